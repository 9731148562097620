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
#   redis       redis-server on 127.0.0.1:REDIS_PORT with a private dir,
#               started per side and repeat; db 0 gets REDIS_KEYS fixed keys
#               (DEBUG POPULATE), redis-benchmark loads db 1 (REDIS_TESTS,
#               REDIS_REQUESTS each, REDIS_CONC connections, random keys),
#               and REDIS_BGSAVE_AFTER seconds into the load a BGSAVE forks
#               the server while its threads hold locks; metric requests/s
#               per test, the server's CPU seconds over the load. Errors: a
#               BGSAVE that does not end with status ok or does not advance
#               LASTSAVE, an rdb saved under load that redis-check-rdb
#               rejects, a quiescent rdb whose DBSIZE or DEBUG DIGEST
#               differs when a glibc server loads it back, a db 0 digest
#               that differs between runs, a server that dies or does not
#               stop
#   rocksdb     db_bench (rocksdb-tools) readwhilewriting: ROCKSDB_THREADS
#               readers and one writer for ROCKSDB_SECONDS on a copy of a
#               ROCKSDB_NUM-key fillseq data set (made once, not measured),
#               then verifychecksum; metric db_bench's ops/s; errors: a
#               failed run, a read that did not find its key (every key
#               exists; db_bench prints the count of one reader thread), no
#               verifychecksum result
#   nginx       nginx (2 workers, private prefix and configuration, see
#               examples/nginx.sh) serving a 4 KiB page through its thread
#               pool (aio threads), with the accept mutex, a limit_req zone
#               locked on every request and a limit_conn zone (shared
#               memory: glibc's process-shared semaphores, which the preload
#               passes to glibc); wrk -t2 -c NGINX_CONC for NGINX_SECONDS;
#               metric requests/s and the master's and workers' CPU
#               seconds; errors: a response that is not 200 with exactly the
#               page, wrk socket errors, lines in nginx's error log, a
#               server that dies or does not stop on SIGQUIT
# (docs/preload.md says what was measured).
#
# Needs (Debian packages; this script installs nothing):
#   sysbench  (apt-get install sysbench)   pigz  (apt-get install pigz)
#   mariadb   (apt-get install mariadb-server sysbench: mariadbd,
#              mariadb-install-db, mariadb, mariadb-admin; the packaged
#              service need not run, this script starts its own server)
#   memcached (apt-get install memcached libmemcached-tools: memcaslap)
#   redis     (apt-get install redis-server redis-tools; the packaged
#              service need not run)
#   rocksdb   (apt-get install rocksdb-tools: db_bench)
#   nginx     (apt-get install nginx-light wrk)
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
#   BENCHES="test-mutex sysbench pigz mariadb memcached redis rocksdb nginx"
#   MEMCACHED_CONC="16 128" MEMCACHED_SECONDS=20 MEMCACHED_PORT=21299
#   REDIS_TESTS=set,get,lpush,hset REDIS_REQUESTS=100000 REDIS_CONC=50
#   REDIS_KEYS=200000 REDIS_BGSAVE_AFTER=1 REDIS_PORT=21399
#   ROCKSDB_NUM=200000 ROCKSDB_THREADS=4 ROCKSDB_SECONDS=10
#   NGINX_CONC=50 NGINX_SECONDS=10 NGINX_PORT=21499
#   MARIADB_THREADS="16 64"  MARIADB_SECONDS=60  MARIADB_WARMUP=5
#   MARIADB_TESTS="oltp_read_write oltp_point_select"
#   MARIADB_TABLES=4 MARIADB_TABLE_SIZE=100000 (about 100 MB: in memory)
#   MARIADB_OPTS="--innodb-buffer-pool-size=512M
#                 --innodb-flush-log-at-trx-commit=2" (server options
#                 beyond datadir/socket; commit=2 so that the VM's fsync
#                 latency does not hide the locks)
#   BENCH_QUICK=1       (make bench's short version) REPEAT=1,
#                       SECONDS_PER_RUN=1, 2 and 16 tasks/threads,
#                       MUTEX_LOCKS=2000, only test-mutex and sysbench
#                       (BENCHES), unless set
#   PRELOAD=path        the library (default: ./.libs/libweft-preload.so)
#   LOGDIR=dir          keep every run's output there (default: temporary)
#
# Output: the table above, one line per benchmark with its ratio and CPU
# seconds; then a summary line per benchmark (bench=preload name=...
# glibc=... preload=... ratio=...); then one machine-readable line per run
# in examples/bench.h's format, which `make bench` (bench-report.sh)
# collects into its report:
#   bench=BENCH impl=glibc|glibc-adaptive|preload param=K=V,... value=X unit=U
# BENCH names the program and test (test-mutex-V, sysbench-mutex,
# sysbench-threads, pigz, mariadb-TEST and mariadb-TEST_p99, memcached,
# redis-TEST, rocksdb-readwhilewriting, nginx); BENCH_cpu (unit s) is the
# CPU time of the same run (for redis, of each side's whole load: redis_cpu).
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
BENCHES=${BENCHES:-"test-mutex sysbench pigz mariadb memcached redis rocksdb nginx"}
REDIS_TESTS=${REDIS_TESTS:-set,get,lpush,hset}
REDIS_REQUESTS=${REDIS_REQUESTS:-100000}
REDIS_CONC=${REDIS_CONC:-50}
REDIS_KEYS=${REDIS_KEYS:-200000}
REDIS_BGSAVE_AFTER=${REDIS_BGSAVE_AFTER:-1}
REDIS_PORT=${REDIS_PORT:-21399}
ROCKSDB_NUM=${ROCKSDB_NUM:-200000}
ROCKSDB_THREADS=${ROCKSDB_THREADS:-4}
ROCKSDB_SECONDS=${ROCKSDB_SECONDS:-10}
NGINX_CONC=${NGINX_CONC:-50}
NGINX_SECONDS=${NGINX_SECONDS:-10}
NGINX_PORT=${NGINX_PORT:-21499}
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
# On exit: stop a server this script started (mariadb, memcached, redis,
# nginx) and remove the temporary LOGDIR.
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

# machine BENCH PARAM UNIT IMPL VALUES [CPUS]: one bench= line per run
# (VALUES and CPUS: one number per run), printed after the summary; the
# CPU seconds become metric BENCH_cpu in unit s.
mlines=()
machine() {
	local v
	for v in $5; do
		mlines+=("bench=$1 impl=$4 param=$2 value=$v unit=$3")
	done
	for v in ${6:-}; do
		mlines+=("bench=${1}_cpu impl=$4 param=$2 value=$v unit=s")
	done
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
					# the progress lines end in a carriage return:
					# the "avg ops/sec:" line is the run's average
					v=$(tr '\r' '\n' <"$log" | awk '/^avg ops\/sec:/ { v = $3 } END { print v }')
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
			machine test-mutex-V "tasks=$t,secs=$SECS" ops/s glibc "$gv" "$gc"
			machine test-mutex-V "tasks=$t,secs=$SECS" ops/s glibc-adaptive "$av" "$ac"
			machine test-mutex-V "tasks=$t,secs=$SECS" ops/s preload "$pv" "$pc"
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
				mp="threads=$t,secs=$SECS"
				[ $test = mutex ] && mp="threads=$t,locks=$MUTEX_LOCKS"
				machine "sysbench-$test" "$mp" $unit glibc "$gv" "$gc"
				machine "sysbench-$test" "$mp" $unit preload "$pv" "$pc"
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
		machine pigz "procs=4,mb=200" MB/s glibc "$gv" "$gc"
		machine pigz "procs=4,mb=200" MB/s preload "$pv" "$pc"
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
					mp="threads=$t,secs=$MARIADB_SECONDS"
					for side in glibc preload; do
						machine "mariadb-$test" "$mp" tx/s $side "${tps[$test-$t-$side]:-}" \
							"${cpu[$test-$t-$side]:-}"
						machine "mariadb-${test}_p99" "$mp" ms $side "${lat[$test-$t-$side]:-}"
					done
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
			for side in glibc preload; do
				machine memcached "threads=4,conns=$c,secs=$MEMCACHED_SECONDS" ops/s $side \
					"${mops[$c-$side]:-}" "${mcpu[$c-$side]:-}"
			done
		done
	fi
fi

# port_busy PORT: something listens on 127.0.0.1:PORT
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---- redis ----
# rd_cli ARGS...: redis-cli on our server, 5 s connect and reply bound
rd_cli() { timeout 30 redis-cli -p "$REDIS_PORT" "$@"; }
# rd_start SIDE DIR LOG: redis-server on 127.0.0.1:REDIS_PORT with DIR as
# its working directory (dump.rdb is loaded from and saved there), under
# the preload for SIDE preload; no automatic saves, no AOF; sets my_pid
rd_start() {
	local pre=
	[ "$1" = preload ] && pre=$PRELOAD
	# someone else's server on the port would answer our pings
	if port_busy "$REDIS_PORT"; then
		echo "redis: port $REDIS_PORT is in use (set REDIS_PORT)" >>"$3"
		return 1
	fi
	env LD_PRELOAD="$pre" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$2" \
		--dbfilename dump.rdb --save '' --appendonly no --enable-debug-command local \
		--daemonize no --logfile "" >"$3" 2>&1 &
	my_pid=$!
	for _ in $(seq 1 120); do
		[ "$(rd_cli ping 2>/dev/null)" = PONG ] && return 0
		kill -0 "$my_pid" 2>/dev/null || return 1
		sleep 0.25
	done
	return 1
}
# rd_stop: SHUTDOWN NOSAVE and wait for the process (an error if it stays)
rd_stop() {
	rd_cli shutdown nosave >/dev/null 2>&1
	for _ in $(seq 1 120); do
		kill -0 "$my_pid" 2>/dev/null || { wait "$my_pid" 2>/dev/null; my_pid=; return 0; }
		sleep 0.25
	done
	kill -9 "$my_pid" 2>/dev/null
	my_pid=
	return 1
}
# rd_bgsave_wait: wait (up to 300 s) for the BGSAVE under way to end;
# succeeds when it ended with status ok
rd_bgsave_wait() {
	local info
	for _ in $(seq 1 1200); do
		info=$(rd_cli info persistence 2>/dev/null | tr -d '\r')
		if grep -q '^rdb_bgsave_in_progress:0' <<<"$info"; then
			grep -q '^rdb_last_bgsave_status:ok' <<<"$info"
			return
		fi
		sleep 0.25
	done
	return 1
}
rd_err() { echo "redis $side run $r: ERROR ($*)"; errors=$((errors + 1)); }
if [[ " $BENCHES " == *" redis "* ]]; then
	missing=
	for p in redis-server redis-cli redis-benchmark redis-check-rdb; do
		command -v $p >/dev/null 2>&1 || missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		echo "redis: SKIP (not installed:$missing; apt-get install redis-server redis-tools)"
	else
		declare -A rrps rcpu
		rtests=
		ref0=
		for r in $(seq 1 "$REPEAT"); do
			for side in glibc preload; do
				d=$LOGDIR/redis-$side-$r
				mkdir -p "$d"
				if ! rd_start $side "$d" "$d/server.log"; then
					rd_err "redis-server did not start, see $d/server.log"
					rd_stop
					continue
				fi
				if [ $side = preload ] && ! grep -q weft-preload "/proc/$my_pid/maps"; then
					rd_err "the preload is not mapped in redis-server"
				fi
				# db 0: a fixed data set the load never touches (its
				# digest must be the same in every run); db 1: the load
				rd_cli debug populate "$REDIS_KEYS" key 100 >/dev/null
				t0=$(rd_cli lastsave)
				c0=$(my_cpu)
				log=$d/benchmark.log
				timeout $((REDIS_REQUESTS / 100 + 600)) redis-benchmark -p "$REDIS_PORT" --dbnum 1 \
					-c "$REDIS_CONC" -r 100000 -n "$REDIS_REQUESTS" -t "$REDIS_TESTS" --csv >"$log" 2>&1 &
				bpid=$!
				# the BGSAVE under load: the server forks while its
				# threads (jemalloc's, the bio threads) hold locks
				sleep "$REDIS_BGSAVE_AFTER"
				kill -0 $bpid 2>/dev/null || rd_err "the load ended before the BGSAVE: raise REDIS_REQUESTS"
				out=$(rd_cli bgsave 2>&1)
				[[ $out == *"saving started"* ]] || rd_err "BGSAVE: $out"
				if ! rd_bgsave_wait; then
					rd_err "BGSAVE under load did not complete with status ok"
				else
					t1=$(rd_cli lastsave)
					[ "${t1:-0}" -gt "${t0:-0}" ] || rd_err "LASTSAVE did not advance ($t0 -> $t1)"
					cp "$d/dump.rdb" "$d/underload.rdb"
				fi
				kill -0 $bpid 2>/dev/null || rd_err "the load ended before the BGSAVE did: raise REDIS_REQUESTS"
				wait $bpid || rd_err "redis-benchmark failed, see $log"
				c1=$(my_cpu)
				[ -f "$d/underload.rdb" ] && ! redis-check-rdb "$d/underload.rdb" >"$d/check-rdb.log" 2>&1 &&
					rd_err "redis-check-rdb rejects the rdb saved under load, see $d/check-rdb.log"
				# quiescent: the dump must load back with the same keys
				# and the same digest, in a glibc server
				n0=$(rd_cli -n 0 dbsize) n1=$(rd_cli -n 1 dbsize) dg=$(rd_cli debug digest)
				rd_cli bgsave >/dev/null 2>&1
				rd_bgsave_wait || rd_err "BGSAVE after the load did not complete with status ok"
				kill -0 "$my_pid" 2>/dev/null || rd_err "redis-server died, see $d/server.log"
				rd_stop || rd_err "redis-server did not stop"
				if ! rd_start glibc "$d" "$d/reload.log"; then
					rd_err "the rdb does not load back, see $d/reload.log"
					rd_stop
				else
					m0=$(rd_cli -n 0 dbsize) m1=$(rd_cli -n 1 dbsize) dh=$(rd_cli debug digest)
					[ "$m0 $m1 $dh" = "$n0 $n1 $dg" ] ||
						rd_err "reloaded rdb differs: dbsize $m0+$m1 digest $dh, saved $n0+$n1 $dg"
					[ "$n0" = "$REDIS_KEYS" ] || rd_err "db 0 has $n0 keys, not $REDIS_KEYS"
					rd_cli -n 1 flushdb >/dev/null
					z=$(rd_cli debug digest)
					[ -n "$ref0" ] || ref0=$z
					[ "$z" = "$ref0" ] || rd_err "db 0 digest $z differs from the first run's $ref0"
					rd_stop || rd_err "redis-server (reload) did not stop"
				fi
				while IFS=, read -r name rps _; do
					name=${name//\"/} rps=${rps//\"/}
					[ "$name" = test ] && continue
					[[ " $rtests " == *" $name "* ]] || rtests="$rtests $name"
					rrps[$name-$side]="${rrps[$name-$side]:-} $rps"
				done <"$log"
				rcpu[$side]="${rcpu[$side]:-} $(awk -v a="$c0" -v b="$c1" 'BEGIN { if (a != "" && b != "") printf "%.2f", b - a }')"
				rm -f "$d"/*.rdb
			done
		done
		for name in $rtests; do
			report "redis $name -c $REDIS_CONC" req/s "${rrps[$name-glibc]:-}" \
				"${rrps[$name-preload]:-}" "${rcpu[glibc]:-}" "${rcpu[preload]:-}"
			for side in glibc preload; do
				machine "redis-$name" "conns=$REDIS_CONC,requests=$REDIS_REQUESTS" req/s $side \
					"${rrps[$name-$side]:-}"
			done
		done
		for side in glibc preload; do
			machine redis "conns=$REDIS_CONC,requests=$REDIS_REQUESTS" - $side "" "${rcpu[$side]:-}"
		done
	fi
fi

# ---- rocksdb ----
if [[ " $BENCHES " == *" rocksdb "* ]]; then
	if ! command -v db_bench >/dev/null 2>&1; then
		echo "rocksdb: SKIP (not installed: db_bench; apt-get install rocksdb-tools)"
	else
		base=$LOGDIR/rocksdb-base
		rm -rf "$base"
		# the data set, once, not measured: ROCKSDB_NUM keys in order
		if ! db_bench --benchmarks=fillseq --db="$base" --num="$ROCKSDB_NUM" --threads=1 \
			--compression_type=none --progress_reports=false >"$LOGDIR/rocksdb-fill.log" 2>&1; then
			echo "rocksdb: ERROR (fillseq failed, see $LOGDIR/rocksdb-fill.log)"
			errors=$((errors + 1))
		else
			gv= pv= gc= pc=
			for r in $(seq 1 "$REPEAT"); do
				for side in glibc preload; do
					pre=
					[ $side = preload ] && pre=$PRELOAD
					db=$LOGDIR/rocksdb-run
					rm -rf "$db"
					cp -a "$base" "$db"
					log=$LOGDIR/rocksdb-$side-$r.log
					# every key exists, so every read must find its key;
					# verifychecksum reads every block back afterwards
					run "$log" env LD_PRELOAD="$pre" timeout $((ROCKSDB_SECONDS + 300)) db_bench \
						--benchmarks=readwhilewriting,verifychecksum --use_existing_db=1 \
						--db="$db" --num="$ROCKSDB_NUM" --threads="$ROCKSDB_THREADS" \
						--duration="$ROCKSDB_SECONDS" --seed="$r" --compression_type=none \
						--progress_reports=false ||
						{ echo "rocksdb $side run $r: ERROR (see $log)"; errors=$((errors + 1)); }
					read -r v found of <<<"$(awk '/^readwhilewriting / { for (i = 1; i <= NF; i++) {
						if ($i == "ops/sec") v = $(i - 1); if ($i == "of") { f = $(i - 1); o = $(i + 1) } }
						sub(/\(/, "", f); print v, f, o }' "$log")"
					if [ -z "${found:-}" ] || [ "$found" != "$of" ]; then
						echo "rocksdb $side run $r: ERROR (${found:-?} of ${of:-?} reads found their key)"
						errors=$((errors + 1))
					fi
					grep -q '^verifychecksum ' "$log" ||
						{ echo "rocksdb $side run $r: ERROR (no verifychecksum result)"; errors=$((errors + 1)); }
					c=$(cpu_of "$log")
					if [ $side = glibc ]; then gv="$gv $v"; gc="$gc $c"; else pv="$pv $v"; pc="$pc $c"; fi
				done
			done
			rm -rf "$LOGDIR/rocksdb-run"
			report "rocksdb readwhilewriting $ROCKSDB_THREADS+1 thr" ops/s "$gv" "$pv" "$gc" "$pc"
			mp="readers=$ROCKSDB_THREADS,writers=1,keys=$ROCKSDB_NUM,secs=$ROCKSDB_SECONDS"
			machine rocksdb-readwhilewriting "$mp" ops/s glibc "$gv" "$gc"
			machine rocksdb-readwhilewriting "$mp" ops/s preload "$pv" "$pc"
		fi
		rm -rf "$base"
	fi
fi

# ---- nginx ----
if [[ " $BENCHES " == *" nginx "* ]]; then
	. "$(dirname "$0")/nginx.sh" || die "no $(dirname "$0")/nginx.sh"
	NGINX=$(nginx_find)
	missing=
	[ -n "$NGINX" ] || missing=" nginx"
	command -v wrk >/dev/null 2>&1 || missing="$missing wrk"
	if [ -n "$missing" ]; then
		echo "nginx: SKIP (not installed:$missing; apt-get install nginx-light wrk)"
	else
		nd=$LOGDIR/nginx
		mkdir -p "$nd/html"
		# a root master runs its workers as nobody, who must reach the page
		[ "$(id -u)" = 0 ] && chmod a+x "$LOGDIR" "$nd" && chmod a+rx "$nd/html"
		# a 4 KiB page; every response must be 200 with exactly it
		yes 'weft preload nginx page' | head -c 4096 >"$nd/html/index.html"
		cat >"$nd/check.lua" <<EOF_LUA
local f = io.open("$nd/html/index.html", "rb")
local expected = f:read("*a")
f:close()
n, bad = 0, 0
local threads = {}
function setup(thread) table.insert(threads, thread) end
function response(status, headers, body)
	n = n + 1
	if status ~= 200 or body ~= expected then bad = bad + 1 end
end
function done(summary, latency, requests)
	local tn, tb = 0, 0
	for _, t in ipairs(threads) do tn = tn + t:get("n"); tb = tb + t:get("bad") end
	io.write(string.format("checked %d bad %d\n", tn, tb))
end
EOF_LUA
		# Shared zones (glibc's process-shared semaphores in shared
		# memory, which the preload passes to glibc): the accept mutex,
		# limit_req's zone (locked on every request) and limit_conn's.
		# The page is read by the thread pool (aio threads: private
		# pthread mutex and cond).
		zones='limit_req_zone $binary_remote_addr zone=rq:1m rate=1000000r/s;
	limit_conn_zone $binary_remote_addr zone=perip:1m;'
		loc="root $nd/html; sendfile off; aio threads;
			limit_req zone=rq burst=1000000 nodelay; limit_conn perip 60000;"
		gv= pv= gc= pc=
		for r in $(seq 1 "$REPEAT"); do
			for side in glibc preload; do
				pre=
				[ $side = preload ] && pre=$PRELOAD
				rm -rf "$nd/srv"
				nginx_conf "$nd/srv" "$NGINX_PORT" 4096 1024 "$zones" "$loc" "accept_mutex on;"
				elog=$LOGDIR/nginx-server-$side-$r.log
				if port_busy "$NGINX_PORT"; then
					echo "nginx $side run $r: ERROR (port $NGINX_PORT is in use: set NGINX_PORT)"
					errors=$((errors + 1))
					continue
				fi
				nginx_start "$NGINX" "$nd/srv" "$elog" LD_PRELOAD="$pre"
				my_pid=$NGINX_PID
				up=
				for _ in $(seq 1 80); do
					port_busy "$NGINX_PORT" && { up=1; break; }
					kill -0 "$my_pid" 2>/dev/null || break
					sleep 0.25
				done
				if [ -z "$up" ]; then
					echo "nginx $side run $r: ERROR (did not start, see $elog)"
					errors=$((errors + 1))
					kill "$my_pid" 2>/dev/null; wait "$my_pid" 2>/dev/null; my_pid=
					continue
				fi
				sleep 0.2
				if [ $side = preload ]; then
					for p in $(nginx_pids); do
						grep -q weft-preload "/proc/$p/maps" 2>/dev/null ||
							{ echo "nginx: ERROR (the preload is not mapped in process $p)"; errors=$((errors + 1)); }
					done
				fi
				log=$LOGDIR/nginx-$side-$r.log
				timeout $((NGINX_SECONDS + 60)) wrk -t2 -c "$NGINX_CONC" -d "${NGINX_SECONDS}s" \
					-s "$nd/check.lua" "http://127.0.0.1:$NGINX_PORT/index.html" >"$log" 2>&1 ||
					{ echo "nginx $side run $r: ERROR (wrk failed, see $log)"; errors=$((errors + 1)); }
				c=0
				for p in $(nginx_pids); do
					c=$(awk -v c="$c" -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", c + ($12 + $13) / hz }' \
						"/proc/$p/stat" 2>/dev/null || echo "$c")
				done
				bad=$(awk '/^checked / { print $4 }' "$log")
				sock=$(awk '/Socket errors:/ { gsub(/,/, ""); print $4 + $6 + $8 + $10 }' "$log")
				non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $5 }' "$log")
				if [ "${bad:-x}" != 0 ] || [ "${sock:-0}" != 0 ] || [ "${non2xx:-0}" != 0 ]; then
					echo "nginx $side run $r: ERROR (${bad:-?} wrong responses, ${sock:-0} socket errors, ${non2xx:-0} non-2xx; see $log)"
					errors=$((errors + 1))
				fi
				kill -0 "$my_pid" 2>/dev/null ||
					{ echo "nginx $side run $r: ERROR (died, see $elog)"; errors=$((errors + 1)); }
				kill -QUIT "$my_pid" 2>/dev/null
				for _ in $(seq 1 80); do kill -0 "$my_pid" 2>/dev/null || break; sleep 0.25; done
				if kill -0 "$my_pid" 2>/dev/null; then
					echo "nginx $side run $r: ERROR (did not stop on SIGQUIT)"
					errors=$((errors + 1))
					kill -9 "$my_pid" 2>/dev/null
				fi
				wait "$my_pid" 2>/dev/null
				my_pid=
				if [ -s "$nd/srv/logs/error.log" ]; then
					echo "nginx $side run $r: ERROR (its error log:)"
					head -n 5 "$nd/srv/logs/error.log"
					errors=$((errors + 1))
				fi
				v=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$log")
				if [ $side = glibc ]; then gv="$gv $v"; gc="$gc $c"; else pv="$pv $v"; pc="$pc $c"; fi
			done
		done
		report "nginx 2 workers, wrk -c $NGINX_CONC" req/s "$gv" "$pv" "$gc" "$pc"
		mp="workers=2,conns=$NGINX_CONC,secs=$NGINX_SECONDS"
		machine nginx "$mp" req/s glibc "$gv" "$gc"
		machine nginx "$mp" req/s preload "$pv" "$pc"
	fi
fi

echo
for l in "${summary[@]}"; do echo "$l"; done
for l in "${mlines[@]}"; do echo "$l"; done
echo "errors: $errors"
[ "$errors" = 0 ]
