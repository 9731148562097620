#!/bin/bash
# examples/run-preload.sh - unmodified programs under glibc and under
# LD_PRELOAD=libweft-preload.so, in one sitting, alternating A/B, medians
# with min-max (issue 15). Prints throughput, errors and CPU time side by
# side, then the preload/glibc ratio.
#
# Benchmarks (each skipped, with the reason, when its program is missing):
#   test-mutex  examples/test-mutex --impl=pthread V T S at T = 2, 16, 128
#               (seed 001's A/B in native form: an unmodified pthread
#               binary); baselines glibc default and glibc adaptive
#               (--impl=pthread-adaptive); metric avg ops/s
#   sysbench    sysbench 1.0 `mutex` (--mutex-locks=MUTEX_LOCKS; metric
#               lock ops/s = threads x locks / total time) and `threads`
#               (--time=S; metric events/s) at 2, 16 and 64 threads
#   pigz        pigz -p 4 on a 200 MB file made here (half random, half
#               text); metric MB/s; the output must be bit-identical to
#               glibc's run (an error otherwise)
#   mariadb     MariaDB (mariadbd) on a private temporary datadir and
#               socket, started and stopped by this script, once per side
#               and repeat: glibc, then LD_PRELOAD on mariadbd (the sysbench
#               client never has the preload); sysbench oltp_read_write and
#               oltp_point_select at each of MARIADB_THREADS, MARIADB_SECONDS
#               each, after a MARIADB_WARMUP point_select warm-up; metrics
#               transactions/s and the 99th percentile latency (ms), the
#               server's CPU seconds per run; errors are sysbench's failed
#               or ignored errors, a server that died, and [ERROR] lines in
#               its log
#   memcached   memcached -t 4 on 127.0.0.1:MEMCACHED_PORT (private
#               memory, started and stopped by this script once per side
#               and repeat), loaded by memcaslap (libmemcached-tools; 90%
#               get, 10% set, 10% of the gets verified) with 2 threads and
#               each of MEMCACHED_CONC connections, MEMCACHED_SECONDS each;
#               metric operations/s and the server's CPU seconds; errors are
#               memcaslap failures, get or verify misses, and a server that
#               died
# redis, rocksdb and nginx are not run by this script yet
# (docs/preload.md says what was measured).
#
# Needs (Debian packages; this script installs nothing):
#   sysbench  (apt-get install sysbench)   pigz  (apt-get install pigz)
#   mariadb   (apt-get install mariadb-server sysbench: mariadbd,
#              mariadb-install-db, mariadb, mariadb-admin; the packaged
#              service need not run, this script starts its own server)
#   memcached (apt-get install memcached libmemcached-tools: memcaslap)
# and a built tree (make) for .libs/libweft-preload.so and examples/test-mutex.
#
# Run from the top build directory:
#   examples/run-preload.sh
# Environment:
#   REPEAT=5            runs per point (alternating glibc / preload)
#   SECONDS_PER_RUN=3   test-mutex and sysbench threads duration
#   TASKS="2 16 128"    test-mutex task counts
#   THREADS="2 16 64"   sysbench thread counts
#   MUTEX_LOCKS=20000   sysbench mutex --mutex-locks
#   BENCHES="test-mutex sysbench pigz mariadb memcached"
#   MEMCACHED_CONC="16 128" MEMCACHED_SECONDS=20 MEMCACHED_PORT=21299
#   MARIADB_THREADS="16 64"  MARIADB_SECONDS=60  MARIADB_WARMUP=5
#   MARIADB_TESTS="oltp_read_write oltp_point_select"
#   MARIADB_TABLES=4 MARIADB_TABLE_SIZE=100000 (about 100 MB: in memory)
#   MARIADB_OPTS="--innodb-buffer-pool-size=512M
#                 --innodb-flush-log-at-trx-commit=2" (server options
#                 beyond datadir/socket; commit=2 so that the VM's fsync
#                 latency does not hide the locks)
#   BENCH_QUICK=1       (make bench's short version) REPEAT=1,
#                       SECONDS_PER_RUN=1, 2 and 16 tasks/threads,
#                       MUTEX_LOCKS=2000, no pigz, unless set
#   PRELOAD=path        the library (default: ./.libs/libweft-preload.so)
#   LOGDIR=dir          keep every run's output there (default: temporary)
#
# The machine is shared: quote ratios from one sitting only, with the
# min-max spread this prints.
set -u

die() { echo "run-preload.sh: $*" >&2; exit 1; }

if [ "${BENCH_QUICK:-0}" != 0 ]; then
	# make bench BENCH_QUICK=1 (CI): one short run of each point, no pigz
	REPEAT=${REPEAT:-1} SECONDS_PER_RUN=${SECONDS_PER_RUN:-1} TASKS=${TASKS:-"2 16"}
	THREADS=${THREADS:-"2 16"} MUTEX_LOCKS=${MUTEX_LOCKS:-2000}
	BENCHES=${BENCHES:-"test-mutex sysbench"}
	MARIADB_THREADS=${MARIADB_THREADS:-16} MARIADB_SECONDS=${MARIADB_SECONDS:-5}
	MARIADB_TABLE_SIZE=${MARIADB_TABLE_SIZE:-10000}
fi
REPEAT=${REPEAT:-5}
SECS=${SECONDS_PER_RUN:-3}
TASKS=${TASKS:-"2 16 128"}
THREADS=${THREADS:-"2 16 64"}
MUTEX_LOCKS=${MUTEX_LOCKS:-20000}
BENCHES=${BENCHES:-"test-mutex sysbench pigz mariadb memcached"}
MEMCACHED_CONC=${MEMCACHED_CONC:-"16 128"}
MEMCACHED_SECONDS=${MEMCACHED_SECONDS:-20}
MEMCACHED_PORT=${MEMCACHED_PORT:-21299}
MARIADB_THREADS=${MARIADB_THREADS:-"16 64"}
MARIADB_SECONDS=${MARIADB_SECONDS:-60}
MARIADB_WARMUP=${MARIADB_WARMUP:-5}
MARIADB_TESTS=${MARIADB_TESTS:-"oltp_read_write oltp_point_select"}
MARIADB_TABLES=${MARIADB_TABLES:-4}
MARIADB_TABLE_SIZE=${MARIADB_TABLE_SIZE:-100000}
MARIADB_OPTS=${MARIADB_OPTS:-"--innodb-buffer-pool-size=512M --innodb-flush-log-at-trx-commit=2"}
PRELOAD=${PRELOAD:-$(pwd)/.libs/libweft-preload.so}
[ -f "$PRELOAD" ] || die "no $PRELOAD: run from the top build directory after make"
case $PRELOAD in /*) ;; *) PRELOAD=$(pwd)/$PRELOAD ;; esac
if ldd "$PRELOAD" | grep -qE 'lib(asan|tsan)'; then
	die "$PRELOAD is a sanitizer build; benchmark a plain build"
fi
# On exit: stop a server this script started (mariadb) and remove the
# temporary LOGDIR.
my_pid= tmp_logdir=
cleanup() {
	[ -n "$my_pid" ] && kill "$my_pid" 2>/dev/null && wait "$my_pid" 2>/dev/null
	[ -n "$tmp_logdir" ] && rm -rf "$tmp_logdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -n "${LOGDIR:-}" ]; then
	mkdir -p "$LOGDIR" || die "cannot create $LOGDIR"
else
	LOGDIR=$(mktemp -d)
	tmp_logdir=$LOGDIR
fi

# median, min and max of the numbers on stdin: "MED MIN MAX"
stats() { sort -g | awk '{ v[NR] = $1 } END { if (!NR) { print "- - -"; exit }
	m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
	printf "%.7g %.7g %.7g\n", m, v[1], v[NR] }'; }

# run LOG CMD...: CMD's output and its CPU time (a "CPU user sys" line
# from bash's time) to LOG; cpu_of LOG: user+sys seconds.
cpu_of() { awk '/^CPU / { print $2 + $3 }' "$1"; }
run() {
	local log=$1
	shift
	{ TIMEFORMAT='CPU %U %S'; time "$@"; } >"$log" 2>&1
}

summary=()
errors=0
printf '%-34s %-8s %22s %22s %8s\n' "benchmark" "" "glibc med (min-max)" "preload med (min-max)" "ratio"

# report NAME UNIT GLIBC_VALUES PRELOAD_VALUES GLIBC_CPU PRELOAD_CPU [BASE2_NAME BASE2_VALUES]
report() {
	local name=$1 unit=$2 gv=$3 pv=$4 gc=$5 pc=$6
	read -r gm gmin gmax <<<"$(tr ' ' '\n' <<<"$gv" | grep . | stats)"
	read -r pm pmin pmax <<<"$(tr ' ' '\n' <<<"$pv" | grep . | stats)"
	local ratio=-
	[ "$gm" != - ] && [ "$pm" != - ] && [ "$gm" != 0 ] &&
		ratio=$(awk -v a="$pm" -v b="$gm" 'BEGIN { printf "%.2fx", a / b }')
	local gcm pcm
	gcm=$(tr ' ' '\n' <<<"$gc" | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", v[int((NR + 1) / 2)]; else print "-" }')
	pcm=$(tr ' ' '\n' <<<"$pc" | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", v[int((NR + 1) / 2)]; else print "-" }')
	printf '%-34s %-8s %22s %22s %8s   cpu s %s / %s\n' "$name" "$unit" \
		"$gm ($gmin-$gmax)" "$pm ($pmin-$pmax)" "$ratio" "$gcm" "$pcm"
	summary+=("bench=preload name=$name unit=$unit glibc=$gm preload=$pm ratio=$ratio")
}

# ---- test-mutex ----
if [[ " $BENCHES " == *" test-mutex "* ]]; then
	TM=./examples/test-mutex
	[ -x "$TM" ] || TM=
	if [ -z "$TM" ]; then
		echo "test-mutex: SKIP (no ./examples/test-mutex: make first)"
	else
		for t in $TASKS; do
			gv= pv= av= gc= pc= ac=
			for r in $(seq 1 "$REPEAT"); do
				for side in glibc adaptive preload; do
					log=$LOGDIR/test-mutex-$t-$side-$r.log
					case $side in
					glibc) run "$log" "$TM" --impl=pthread V "$t" "$SECS" ;;
					adaptive) run "$log" "$TM" --impl=pthread-adaptive V "$t" "$SECS" ;;
					preload) run "$log" env LD_PRELOAD="$PRELOAD" "$TM" --impl=pthread V "$t" "$SECS" ;;
					esac || { echo "test-mutex $side $t: ERROR (see $log)"; errors=$((errors + 1)); }
					v=$(awk '/avg ops\/sec:/ { print $3 }' "$log")
					c=$(cpu_of "$log")
					case $side in
					glibc) gv="$gv $v"; gc="$gc $c" ;;
					adaptive) av="$av $v"; ac="$ac $c" ;;
					preload) pv="$pv $v"; pc="$pc $c" ;;
					esac
				done
			done
			report "test-mutex V $t (vs default)" ops/s "$gv" "$pv" "$gc" "$pc"
			report "test-mutex V $t (vs adaptive)" ops/s "$av" "$pv" "$ac" "$pc"
		done
	fi
fi

# ---- sysbench ----
if [[ " $BENCHES " == *" sysbench "* ]]; then
	if ! command -v sysbench >/dev/null 2>&1; then
		echo "sysbench: SKIP (not installed: apt-get install sysbench)"
	else
		for t in $THREADS; do
			for test in mutex threads; do
				gv= pv= gc= pc=
				for r in $(seq 1 "$REPEAT"); do
					for side in glibc preload; do
						log=$LOGDIR/sysbench-$test-$t-$side-$r.log
						pre=
						[ $side = preload ] && pre=$PRELOAD
						if [ $test = mutex ]; then
							run "$log" env LD_PRELOAD="$pre" sysbench mutex --threads="$t" \
								--mutex-locks="$MUTEX_LOCKS" run
						else
							run "$log" env LD_PRELOAD="$pre" sysbench threads --threads="$t" \
								--time="$SECS" run
						fi || { echo "sysbench $test $side $t: ERROR (see $log)"; errors=$((errors + 1)); }
						if [ $test = mutex ]; then
							v=$(awk -v n="$t" -v l="$MUTEX_LOCKS" '/total time:/ { sub("s", "", $3); if ($3 > 0) printf "%.0f", n * l / $3 }' "$log")
						else
							v=$(awk -v s="$SECS" '/total number of events:/ { printf "%.0f", $5 / s }' "$log")
						fi
						c=$(cpu_of "$log")
						if [ $side = glibc ]; then gv="$gv $v"; gc="$gc $c"; else pv="$pv $v"; pc="$pc $c"; fi
					done
				done
				unit=locks/s
				[ $test = threads ] && unit=events/s
				report "sysbench $test $t threads" $unit "$gv" "$pv" "$gc" "$pc"
			done
		done
	fi
fi

# ---- pigz ----
if [[ " $BENCHES " == *" pigz "* ]]; then
	if ! command -v pigz >/dev/null 2>&1; then
		echo "pigz: SKIP (not installed: apt-get install pigz)"
	else
		f=$LOGDIR/pigz-input
		{ head -c 100000000 /dev/urandom; yes 'weft preload pigz input line, compressible text' |
			head -c 100000000; } >"$f"
		gv= pv= gc= pc= ref=
		for r in $(seq 1 "$REPEAT"); do
			for side in glibc preload; do
				pre=
				[ $side = preload ] && pre=$PRELOAD
				log=$LOGDIR/pigz-$side-$r.log
				s0=$(date +%s.%N)
				run "$log" env LD_PRELOAD="$pre" sh -c 'pigz -p 4 -c "$1" | sha256sum' sh "$f" ||
					{ echo "pigz $side: ERROR (see $log)"; errors=$((errors + 1)); }
				s1=$(date +%s.%N)
				sum=$(awk 'NF == 2 && length($1) == 64 { print $1 }' "$log")
				[ -n "$ref" ] || ref=$sum
				if [ "$sum" != "$ref" ]; then
					echo "pigz $side run $r: output differs ($sum vs $ref)"
					errors=$((errors + 1))
				fi
				v=$(awk -v a="$s0" -v b="$s1" 'BEGIN { printf "%.0f", 200 / (b - a) }')
				c=$(cpu_of "$log")
				if [ $side = glibc ]; then gv="$gv $v"; gc="$gc $c"; else pv="$pv $v"; pc="$pc $c"; fi
			done
		done
		report "pigz -p 4, 200 MB" MB/s "$gv" "$pv" "$gc" "$pc"
		rm -f "$f"
	fi
fi

# ---- mariadb ----
# my_start SIDE LOG: start mariadbd on $MDB (under the preload for SIDE
# preload), wait for its socket; sets my_pid. my_stop: shut it down and
# wait for the process to go (a server that does not stop is an error).
my_start() {
	local side=$1 log=$2 pre= u=
	[ "$side" = preload ] && pre=$PRELOAD
	[ "$(id -u)" = 0 ] && u=--user=root
	rm -f "$MDB/sock"
	# shellcheck disable=SC2086 # MARIADB_OPTS is a list of options
	env LD_PRELOAD="$pre" mariadbd --no-defaults --datadir="$MDB/data" --socket="$MDB/sock" \
		--skip-networking --pid-file="$MDB/pid" --log-error="$log" $u $MARIADB_OPTS \
		>>"$log.out" 2>&1 &
	my_pid=$!
	for _ in $(seq 1 240); do
		[ -S "$MDB/sock" ] && mariadb-admin --no-defaults -S "$MDB/sock" -uroot ping >/dev/null 2>&1 &&
			return 0
		kill -0 "$my_pid" 2>/dev/null || return 1
		sleep 0.25
	done
	return 1
}
my_stop() {
	mariadb-admin --no-defaults -S "$MDB/sock" -uroot shutdown >/dev/null 2>&1
	for _ in $(seq 1 240); do
		kill -0 "$my_pid" 2>/dev/null || { wait "$my_pid" 2>/dev/null; my_pid=; return 0; }
		sleep 0.25
	done
	kill -9 "$my_pid" 2>/dev/null
	my_pid=
	return 1
}
# server CPU seconds so far (utime + stime of /proc/PID/stat)
my_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' \
	"/proc/$my_pid/stat" 2>/dev/null; }
my_sb() {
	sysbench "$1" --db-driver=mysql --mysql-socket="$MDB/sock" --mysql-user=root \
		--tables="$MARIADB_TABLES" --table-size="$MARIADB_TABLE_SIZE" "${@:2}"
}
if [[ " $BENCHES " == *" mariadb "* ]]; then
	missing=
	for p in mariadbd mariadb-install-db mariadb mariadb-admin sysbench; do
		command -v $p >/dev/null 2>&1 || missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		echo "mariadb: SKIP (not installed:$missing; apt-get install mariadb-server sysbench)"
	else
		MDB=$LOGDIR/mariadb
		mkdir -p "$MDB"
		u=
		[ "$(id -u)" = 0 ] && u=--user=root
		if ! mariadb-install-db --no-defaults --datadir="$MDB/data" $u \
			--auth-root-authentication-method=normal --skip-test-db >"$MDB/install.log" 2>&1; then
			echo "mariadb: ERROR (mariadb-install-db failed, see $MDB/install.log)"
			errors=$((errors + 1))
		elif ! my_start glibc "$MDB/prepare.err"; then
			echo "mariadb: ERROR (mariadbd did not start, see $MDB/prepare.err)"
			errors=$((errors + 1))
			my_stop
		else
			mariadb --no-defaults -S "$MDB/sock" -uroot -e 'create database sbtest' &&
				my_sb oltp_read_write prepare >"$MDB/prepare.log" 2>&1 ||
				{ echo "mariadb: ERROR (sysbench prepare, see $MDB/prepare.log)"; errors=$((errors + 1)); }
			my_stop || { echo "mariadb: ERROR (server did not stop)"; errors=$((errors + 1)); }
			declare -A tps lat cpu dead retried
			for r in $(seq 1 "$REPEAT"); do
				for side in glibc preload; do
					elog=$MDB/server-$side-$r.err
					if ! my_start $side "$elog"; then
						echo "mariadb $side run $r: ERROR (mariadbd did not start, see $elog)"
						errors=$((errors + 1))
						my_stop
						continue
					fi
					if [ $side = preload ] && ! grep -q weft-preload "/proc/$my_pid/maps"; then
						echo "mariadb: ERROR (the preload is not mapped in mariadbd)"
						errors=$((errors + 1))
					fi
					my_sb oltp_point_select --threads=16 --time="$MARIADB_WARMUP" run \
						>"$MDB/warmup-$side-$r.log" 2>&1
					life_ign=0
					for test in $MARIADB_TESTS; do
						for t in $MARIADB_THREADS; do
							log=$MDB/$test-$t-$side-$r.log
							c0=$(my_cpu)
							my_sb "$test" --threads="$t" --time="$MARIADB_SECONDS" \
								--percentile=99 run >"$log" 2>&1 ||
								{ echo "mariadb $test $t $side: ERROR (see $log)"; errors=$((errors + 1)); }
							c1=$(my_cpu)
							ign=$(awk '/ignored errors:/ { print $3 }' "$log")
							life_ign=$((life_ign + ${ign:-0}))
							k=$test-$t-$side
							tps[$k]="${tps[$k]:-} $(awk '/transactions:/ { gsub(/\(/, "", $3); print $3 }' "$log")"
							lat[$k]="${lat[$k]:-} $(awk '/99th percentile:/ { print $3 }' "$log")"
							cpu[$k]="${cpu[$k]:-} $(awk -v a="$c0" -v b="$c1" 'BEGIN { if (a != "" && b != "") printf "%.2f", b - a }')"
						done
					done
					kill -0 "$my_pid" 2>/dev/null ||
						{ echo "mariadb $side run $r: ERROR (mariadbd died, see $elog)"; errors=$((errors + 1)); }
					# sysbench's "ignored errors" are the transactions it
					# retried after an InnoDB deadlock (1213), a normal
					# outcome of oltp_read_write; more of them than the
					# server counted deadlocks is an error
					dl=$(mariadb --no-defaults -S "$MDB/sock" -uroot -N -e \
						"show global status like 'Innodb_deadlocks'" 2>/dev/null | awk '{ print $2 }')
					dead[$side]=$(( ${dead[$side]:-0} + ${dl:-0} ))
					retried[$side]=$(( ${retried[$side]:-0} + life_ign ))
					if [ "$life_ign" -gt "${dl:-0}" ]; then
						echo "mariadb $side run $r: ERROR ($life_ign ignored errors, ${dl:-?} InnoDB deadlocks)"
						errors=$((errors + 1))
					fi
					my_stop || { echo "mariadb $side run $r: ERROR (server did not stop)"; errors=$((errors + 1)); }
					if grep -q '\[ERROR\]' "$elog"; then
						echo "mariadb $side run $r: [ERROR] in the server log:"
						grep '\[ERROR\]' "$elog" | head -n 5
						errors=$((errors + 1))
					fi
				done
			done
			for test in $MARIADB_TESTS; do
				for t in $MARIADB_THREADS; do
					report "mariadb $test $t thr" tx/s "${tps[$test-$t-glibc]:-}" \
						"${tps[$test-$t-preload]:-}" "${cpu[$test-$t-glibc]:-}" "${cpu[$test-$t-preload]:-}"
					report "mariadb $test $t thr p99" ms "${lat[$test-$t-glibc]:-}" \
						"${lat[$test-$t-preload]:-}" "" ""
				done
			done
			echo "mariadb: transactions retried after InnoDB deadlocks (all runs):" \
				"glibc ${retried[glibc]:-0} (server counted ${dead[glibc]:-0})," \
				"preload ${retried[preload]:-0} (server counted ${dead[preload]:-0})"
		fi
	fi
fi

# ---- memcached ----
if [[ " $BENCHES " == *" memcached "* ]]; then
	missing=
	for p in memcached memcaslap; do
		command -v $p >/dev/null 2>&1 || missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		echo "memcached: SKIP (not installed:$missing; apt-get install memcached libmemcached-tools)"
	else
		declare -A mops mcpu
		u=
		[ "$(id -u)" = 0 ] && u="-u root"
		for r in $(seq 1 "$REPEAT"); do
			for side in glibc preload; do
				pre=
				[ $side = preload ] && pre=$PRELOAD
				elog=$LOGDIR/memcached-server-$side-$r.log
				# shellcheck disable=SC2086 # u is an option and its argument
				env LD_PRELOAD="$pre" memcached $u -t 4 -m 256 -l 127.0.0.1 \
					-p "$MEMCACHED_PORT" -U 0 >"$elog" 2>&1 &
				my_pid=$!
				up=
				for _ in $(seq 1 40); do
					memcping --servers=127.0.0.1:"$MEMCACHED_PORT" >/dev/null 2>&1 && { up=1; break; }
					kill -0 "$my_pid" 2>/dev/null || break
					sleep 0.25
				done
				if [ -z "$up" ]; then
					echo "memcached $side run $r: ERROR (did not start, see $elog)"
					errors=$((errors + 1))
					kill "$my_pid" 2>/dev/null; wait "$my_pid" 2>/dev/null; my_pid=
					continue
				fi
				for c in $MEMCACHED_CONC; do
					log=$LOGDIR/memcached-$c-$side-$r.log
					c0=$(my_cpu)
					timeout $((MEMCACHED_SECONDS + 60)) memcaslap -s 127.0.0.1:"$MEMCACHED_PORT" \
						-T 2 -c "$c" -t "${MEMCACHED_SECONDS}s" -v 0.1 >"$log" 2>&1 ||
						{ echo "memcached $c $side: ERROR (see $log)"; errors=$((errors + 1)); }
					c1=$(my_cpu)
					bad=$(awk '/^(get_misses|verify_misses|verify_failed):/ { n += $2 } END { print n + 0 }' "$log")
					if [ "$bad" != 0 ]; then
						echo "memcached $c $side run $r: ERROR ($bad get/verify misses, see $log)"
						errors=$((errors + 1))
					fi
					k=$c-$side
					mops[$k]="${mops[$k]:-} $(awk '/^Run time:/ { print $7 }' "$log")"
					mcpu[$k]="${mcpu[$k]:-} $(awk -v a="$c0" -v b="$c1" 'BEGIN { if (a != "" && b != "") printf "%.2f", b - a }')"
				done
				kill -0 "$my_pid" 2>/dev/null ||
					{ echo "memcached $side run $r: ERROR (died, see $elog)"; errors=$((errors + 1)); }
				kill "$my_pid" 2>/dev/null
				wait "$my_pid" 2>/dev/null
				my_pid=
			done
		done
		for c in $MEMCACHED_CONC; do
			report "memcached -t 4, memcaslap -c $c" ops/s "${mops[$c-glibc]:-}" \
				"${mops[$c-preload]:-}" "${mcpu[$c-glibc]:-}" "${mcpu[$c-preload]:-}"
		done
	fi
fi

echo
for l in "${summary[@]}"; do echo "$l"; done
echo "errors: $errors"
[ "$errors" = 0 ]
