#!/bin/bash
# examples/bench-report.sh - what `make bench` runs: every benchmark in
# examples/ with its baseline, gathered into one report with plots.
#
# usage: examples/bench-report.sh [BUILD_DIR]
#        examples/bench-report.sh --report DIR [BUILD_DIR]
#   BUILD_DIR  the build tree holding examples/sembench etc. (default: the
#              parent of this script's directory, i.e. an in-tree build)
#   --report DIR  run nothing: assemble DIR's results, targets, plots and
#              report.md again from its raw.tsv (after an interrupted run, or
#              a change to this script or the plots)
# environment:
#   BENCH_QUICK=1    the short version (a few minutes; CI runs it): one
#                    run of each configuration, short durations, fewer sizes
#   BENCH_OUT=DIR    the report directory (default:
#                    BUILD_DIR/bench-results/<UTC date-time>)
#   BENCH_REPS=N     runs of each configuration, alternated between the
#                    implementations and switches that are compared (default
#                    3; quick 1). Programs that take a run count also take
#                    their own median inside each run. With one run there is
#                    no min-max range, and examples/compare.sh cannot tell a
#                    change from noise: use BENCH_REPS=3 or more (also with
#                    BENCH_QUICK=1) for reports that are to be compared.
#   BENCH_ONLY="SUITE ..."   run only these suites; BENCH_SKIP="SUITE ..."
#                    skips some. Suites, in order:
#       seeds       examples/run-seeds.sh: sembench and test-mutex with the
#                   MAILBOX, BATCH_WAKE and OWNER_SPIN A/B (seeds 000, 001)
#       weft-micro  runtime micro benchmarks against pthreads
#       sync-micro  sync fast paths and wakes, with wake-latency samples
#       pipe-bench  perf bench sched pipe (seed A4), SYNC_WAKE A/B
#       pipeline    the stage pipeline (seed 003), 2 workers and 1, SYNC_WAKE A/B
#       wake-scale  sembench -o 3 at WEFT_WORKERS=2, 16, 64 (issue 14 targets)
#       locks       test-mutex ceiling (--work-ns=0 V 1) and many waiters
#       kick-pingpong  a token passed between two workers by
#                   weft_park/weft_unpark, as it is, with NO_IDLE_SPIN (every
#                   hand-off kicks a sleeping worker: io_uring) and with
#                   NO_IDLE_SPIN,NO_URING (the futex kick)
#       echo        echo-server (weft, epoll, pthread) with echo-client, at
#                   ECHO_CONNS connections (default "10 100 1000"; quick
#                   "10 100"; examples/run-echo.sh runs the same by itself)
#       http        examples/run-http.sh (needs wrk and nginx; else skipped)
#       and, when they are built or present: dispatcher, hackbench, scale
#       (examples/scale.sh), gang, rwlock, cond (lock benchmarks), preload
#       (examples/run-preload.sh: unmodified programs under glibc and under
#       LD_PRELOAD=libweft-preload.so, REPEAT=BENCH_REPS; quick: test-mutex
#       and sysbench only). A missing one is named in the report's
#       "Skipped" list.
#   DISPATCHER_ARGS, HACKBENCH_ARGS, GANG_ARGS, RWLOCK_ARGS, COND_ARGS,
#   SCALE_ENV   extra arguments (environment for scale.sh) for the
#               benchmarks that land later
#   BENCH_TIMEOUT=S  kill a run after S seconds (default 900; quick 300)
#
# What it writes in the report directory:
#   report.md      machine facts, the targets met or missed, one table per
#                  seed and per benchmark with ratios against the baselines,
#                  the plots, the skipped suites
#   results.tsv    one row per metric: suite bench impl variant param unit n
#                  median min max values (the data the report is made of;
#                  examples/compare.sh compares two of these)
#   raw.tsv        one row per run and metric
#   targets.tsv, ab.tsv, scale.tsv, skipped.tsv, machine.txt
#   samples/       wake-latency samples (ns, one per line)
#   plots/         SVG and PNG (examples/bench-plot.sh, gnuplot)
#   logs/          every program's output
#
# Every number comes from a `bench=NAME impl=IMPL param=K=V,... value=X
# unit=U` line (examples/bench.h) or, for the programs that predate it, from
# one parser here (parse_*).
set -u

here=$(cd "$(dirname "$0")" && pwd)
REPORT_ONLY=
if [ "${1:-}" = --report ]; then
	[ -f "${2:-}/raw.tsv" ] || { echo "bench-report.sh: --report DIR: no DIR/raw.tsv" >&2; exit 1; }
	REPORT_ONLY=$(cd "$2" && pwd)
	shift 2
fi
if [ $# -ge 1 ]; then
	B=$(cd "$1" && pwd) || exit 1
else
	B=$(cd "$here/.." && pwd)
fi
E=$B/examples
if [ ! -x "$E/sembench" ]; then
	echo "bench-report.sh: no built examples under $B (run make first)" >&2
	exit 1
fi

QUICK=${BENCH_QUICK:-0}
[ "$QUICK" = 0 ] && QUICK=
if [ -n "$QUICK" ]; then
	REPS=${BENCH_REPS:-1}
	TMO=${BENCH_TIMEOUT:-300}
	IN_RUNS=1
else
	REPS=${BENCH_REPS:-3}
	TMO=${BENCH_TIMEOUT:-900}
	IN_RUNS=3
fi
OUT=${REPORT_ONLY:-${BENCH_OUT:-$B/bench-results/$(date -u +%Y%m%d-%H%M%S)}}
mkdir -p "$OUT/logs" "$OUT/samples" "$OUT/plots" || exit 1
OUT=$(cd "$OUT" && pwd)
RAW=$OUT/raw.tsv
RES=$OUT/results.tsv
SKIPPED=$OUT/skipped.tsv
TARGETS=$OUT/targets.tsv
AB=$OUT/ab.tsv
SCALE=$OUT/scale.tsv
if [ -z "$REPORT_ONLY" ]; then
	printf 'suite\tbench\timpl\tvariant\tparam\tunit\tvalue\n' > "$RAW"
	printf 'suite\treason\n' > "$SKIPPED"
	printf 'bench\tworkers\tcolumn\tvalue\n' > "$SCALE"
fi
T_START=$SECONDS

log() { echo "bench: [$((SECONDS - T_START)) s] $*" >&2; }
skip() { printf '%s\t%s\n' "$1" "$2" >> "$SKIPPED"; log "skip $1: $2"; }

# ---------------------------------------------------------------- collecting

# collect SUITE VARIANT FILE: every `bench=` line of FILE into raw.tsv. The
# runs=N parameter is dropped (it is the program's own repetition, not part
# of what is measured); an extra token K_U=V (echo-client's p50_us=..)
# becomes metric NAME_K in unit U.
collect() {
	awk -v s="$1" -v var="$2" '
	/^bench=/ {
		delete kv; extra = ""
		for (i = 1; i <= NF; i++) {
			k = $i; sub(/=.*/, "", k); v = substr($i, length(k) + 2)
			if (k == "bench" || k == "impl" || k == "param" || k == "value" || k == "unit")
				kv[k] = v
			else if (k ~ /^[a-z0-9]+_[a-z\/]+$/ && v ~ /^[0-9.eE+-]+$/)
				extra = extra " " $i
		}
		if (!("value" in kv) || kv["value"] !~ /^[0-9.eE+-]+$/) next
		p = kv["param"]; gsub(/(^|,)runs=[0-9]+/, "", p); sub(/^,/, "", p); if (p == "") p = "-"
		printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s, kv["bench"], kv["impl"], var, p, kv["unit"], kv["value"]
		n = split(extra, xs, " ")
		for (j = 1; j <= n; j++) {
			k = xs[j]; sub(/=.*/, "", k); v = substr(xs[j], length(k) + 2)
			u = k; sub(/^[^_]*_/, "", u); sub(/_.*/, "", k)
			printf "%s\t%s_%s\t%s\t%s\t%s\t%s\t%s\n", s, kv["bench"], k, kv["impl"], var, p, u, v
		}
	}' "$3" >> "$RAW"
}

# raw SUITE BENCH IMPL VARIANT PARAM UNIT VALUE: one row by hand (parsers).
raw() {
	[ -n "$7" ] || return 0
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$RAW"
}

# run LOGNAME [VAR=value ...] -- COMMAND ARGS...: run once with a timeout,
# stdout and stderr into logs/LOGNAME.log; returns the command's status.
run() {
	local name=$1 envs=()
	shift
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	local lg=$OUT/logs/$name.log
	echo "# ${envs[*]:+${envs[*]} }$*" > "$lg"
	env "${envs[@]}" timeout -k 10 "$TMO" "$@" >> "$lg" 2>&1
	local rc=$?
	[ $rc -eq 0 ] || log "$name: exit $rc (see logs/$name.log)"
	return $rc
}
lastlog() { echo "$OUT/logs/$1.log"; }

# the feature switches this build knows (runtime/features.def)
has_feature() { grep -q "WFT_FEAT($1," "$here/../runtime/features.def" 2>/dev/null; }

# ---------------------------------------------------------------- suites

# run-seeds.sh's groups whose program is built (sembench, test-mutex, and
# the lock benchmarks rwlock and cond once run-seeds.sh has those groups)
seeds_groups() {
	local g bin
	for g in sembench:sembench test-mutex:test-mutex rwlock:rwlock-bench cond:cond-bench; do
		bin=${g#*:}
		g=${g%%:*}
		grep -q "GROUP_FUNCS=.*$g:" "$here/run-seeds.sh" && [ -x "$E/$bin" ] && echo "$g"
	done
}

suite_seeds() {
	local env=(REPS="$REPS" OUT="$OUT/logs/seeds" QUIET_WAIT="${QUIET_WAIT:-0}")
	env+=(ONLY="$(seeds_groups | tr '\n' ' ')")
	if [ -n "$QUICK" ]; then
		env+=(SEM_SECS=1 MUTEX_SECS=1 MUTEX_TASKS="${MUTEX_TASKS:-16}")
	else
		env+=(MUTEX_TASKS="${MUTEX_TASKS:-2 16 128}")
	fi
	run seeds "${env[@]}" -- "$here/run-seeds.sh" "$B"
	[ -s "$OUT/logs/seeds/results.txt" ] || { skip seeds "run-seeds.sh wrote no results (logs/seeds.log)"; return; }
	# group|label|median|unit|values|command|noisy: one raw row per run
	awk -F'|' '{ n = split($5, v, " "); for (i = 1; i <= n; i++)
		printf "seeds\t%s\t%s\t-\t-\t%s\t%s\n", $1, $2, $4, v[i] }' \
		"$OUT/logs/seeds/results.txt" >> "$RAW"
}

suite_weft_micro() {
	local r
	for r in $(seq 1 "$REPS"); do
		run "weft-micro-$r" -- "$E/weft-micro" --runs="$IN_RUNS" &&
			collect weft-micro - "$(lastlog "weft-micro-$r")"
	done
}

suite_sync_micro() {
	local r s
	for r in $(seq 1 "$REPS"); do
		s=()
		# the first run also records the wake-latency samples
		[ "$r" = 1 ] && s=(--samples="$OUT/samples")
		run "sync-micro-$r" -- "$E/sync-micro" --runs="$IN_RUNS" "${s[@]}" &&
			collect sync-micro - "$(lastlog "sync-micro-$r")"
	done
}

suite_pipe_bench() {
	local r loops=1000000
	[ -n "$QUICK" ] && loops=100000
	for r in $(seq 1 "$REPS"); do
		run "pipe-bench-$r" -- "$E/pipe-bench" -r "$IN_RUNS" -l "$loops" &&
			collect pipe-bench - "$(lastlog "pipe-bench-$r")"
		# SYNC_WAKE (the kernel's WF_SYNC) A/B on the unpinned ping-pong
		has_feature SYNC_WAKE || continue
		run "pipe-bench-NO_SYNC_WAKE-$r" WEFT_FEATURES=NO_SYNC_WAKE -- "$E/pipe-bench" -r "$IN_RUNS" \
			-l "$loops" -i weft-free &&
			collect pipe-bench NO_SYNC_WAKE "$(lastlog "pipe-bench-NO_SYNC_WAKE-$r")"
	done
}

# pipeline at 2 workers (every impl), then weft at 1 worker (variant W=1:
# issue 14 wants 2 workers no slower than 1), alternated.
suite_pipeline() {
	local r n=1000000
	[ -n "$QUICK" ] && n=100000
	for r in $(seq 1 "$REPS"); do
		run "pipeline-$r" -- "$E/pipeline" -r "$IN_RUNS" -n "$n" &&
			collect pipeline - "$(lastlog "pipeline-$r")"
		run "pipeline-W1-$r" -- "$E/pipeline" -r "$IN_RUNS" -n "$n" -W 1 -i weft &&
			collect pipeline W=1 "$(lastlog "pipeline-W1-$r")"
		# SYNC_WAKE A/B: the wakee of a producer about to block
		has_feature SYNC_WAKE || continue
		run "pipeline-NO_SYNC_WAKE-$r" WEFT_FEATURES=NO_SYNC_WAKE -- "$E/pipeline" -r "$IN_RUNS" -n "$n" -i weft &&
			collect pipeline NO_SYNC_WAKE "$(lastlog "pipeline-NO_SYNC_WAKE-$r")"
	done
}

# sembench's result and scheduler lines -> burns/s and kicks per 1,000 wakes
parse_sembench() {   # FILE VARIANT
	local v k
	v=$(awk '/worker burns per second/ { for (i = 1; i < NF; i++) if ($(i + 1) == "worker") x = $i } END { print x }' "$1")
	k=$(awk '/^sembench: weft:/ { for (i = 1; i < NF; i++) {
			if ($i == "remote" && $(i + 1) == "wakes") w += $(i + 2)
			if ($i == "local" && $(i + 1) == "wakes") w += $(i + 2)
			if ($i == "kicks") kk = $(i + 1) } }
		END { if (w > 0) printf "%.2f", 1000 * kk / w }' "$1")
	raw wake-scale sembench-o3 weft "$2" t=2048,w=1900 burns/s "$v"
	raw wake-scale kicks_per_1000_wakes weft "$2" t=2048,w=1900 kicks "$k"
}

suite_wake_scale() {
	local r w secs=3
	[ -n "$QUICK" ] && secs=1
	for r in $(seq 1 "$REPS"); do
		for w in 2 16 64; do
			run "wake-scale-W$w-$r" WEFT_WORKERS=$w -- "$E/sembench" -t 2048 -w 1900 -r "$secs" -o 3 &&
				parse_sembench "$(lastlog "wake-scale-W$w-$r")" "W=$w"
		done
	done
}

parse_test_mutex() { tr '\r' '\n' < "$1" | awk '/^avg ops\/sec:/ { v = $3 } END { print v }'; }

# test-mutex: the critical-section ceiling (issue 18: V16/V128 should reach
# 90% of it) and the many-waiters cliff (1,024 tasks against 128).
suite_locks() {
	local r secs=2 tm=$E/test-mutex t
	local tasks="128 1024"
	[ -n "$QUICK" ] && { secs=1; tasks="1024"; }
	for r in $(seq 1 "$REPS"); do
		run "locks-ceiling-$r" -- "$tm" --impl=weft --work-ns=0 V 1 "$secs" &&
			raw locks test-mutex-V weft ceiling tasks=1,work=0 ops/s "$(parse_test_mutex "$(lastlog "locks-ceiling-$r")")"
		for t in $tasks; do
			run "locks-V$t-$r" -- "$tm" --impl=weft V "$t" "$secs" &&
				raw locks test-mutex-V weft - "tasks=$t" ops/s "$(parse_test_mutex "$(lastlog "locks-V$t-$r")")"
			[ -n "$QUICK" ] && continue
			run "locks-M$t-$r" -- "$tm" --impl=weft --hold-ns=50 --work-ns=200 M "$t" "$secs" &&
				raw locks test-mutex-M-short weft - "tasks=$t" ops/s "$(parse_test_mutex "$(lastlog "locks-M$t-$r")")"
		done
	done
}

# kick-pingpong: the round trip of a token between workers 0 and 1 (two
# wakes a round). As it is, an idle worker spins and catches the wake;
# with NO_IDLE_SPIN each hand-off wakes a sleeping worker (the kick: an
# io_uring message), with NO_IDLE_SPIN,NO_URING a futex wake. The variants
# are labelled by their WEFT_FEATURES value.
suite_kick_pingpong() {
	local r v rounds=20000 name
	[ -n "$QUICK" ] && rounds=5000
	if [ ! -x "$E/kick-pingpong" ]; then
		skip kick-pingpong "examples/kick-pingpong is not built"
		return
	fi
	for r in $(seq 1 "$REPS"); do
		for v in - NO_IDLE_SPIN NO_IDLE_SPIN,NO_URING; do
			name="kick-${v//,/+}-$r"
			if [ "$v" = - ]; then
				run "$name" -- "$E/kick-pingpong" "$rounds"
			else
				run "$name" WEFT_FEATURES="$v" -- "$E/kick-pingpong" "$rounds"
			fi && collect kick-pingpong "$v" "$(lastlog "$name")"
		done
	done
}

PORT=${BENCH_PORT:-19100}
# wait_port (and raise_nofile)
# shellcheck source=examples/net.sh
. "$here/net.sh" || { echo "bench: no $here/net.sh" >&2; exit 1; }

suite_echo() {
	local r c impl conns=${ECHO_CONNS:-"10 100 1000"} secs=5 spid
	[ -n "$QUICK" ] && { conns=${ECHO_CONNS:-"10 100"}; secs=2; }
	ulimit -n 16384 2>/dev/null || ulimit -n 4096 2>/dev/null
	for r in $(seq 1 "$REPS"); do
		for c in $conns; do
			for impl in weft epoll pthread; do
				PORT=$((PORT + 1))
				"$E/echo-server" --impl=$impl --port=$PORT > "$OUT/logs/echo-server-$impl-c$c-$r.log" 2>&1 &
				spid=$!
				if wait_port $PORT; then
					run "echo-$impl-c$c-$r" -- "$E/echo-client" --port=$PORT --conns="$c" \
						--seconds="$secs" --threads=1 --impl-label=$impl &&
						collect echo - "$(lastlog "echo-$impl-c$c-$r")"
				else
					log "echo-server --impl=$impl did not start"
				fi
				kill $spid 2>/dev/null
				wait $spid 2>/dev/null
			done
		done
	done
}

suite_http() {
	local env=(HTTP_SERVER="$E/http-server" REPEAT="$REPS" LOGDIR="$OUT/logs/http" PORT=$((PORT + 100)))
	if [ -n "$QUICK" ]; then env+=(DURATION=2 CONNS="50 1000"); else env+=(DURATION=10 CONNS="50 1000"); fi
	mkdir -p "$OUT/logs/http"
	run http "${env[@]}" -- "$here/run-http.sh"
	case $? in
	0) collect http - "$(lastlog http)" ;;
	77) skip http "$(grep -m1 'missing' "$(lastlog http)" | sed 's/^run-http.sh: //') (Debian packages; run-http.sh installs nothing)" ;;
	*) skip http "run-http.sh failed (logs/http.log)" ;;
	esac
}

# A benchmark program that lands later: run it as it is (plus ARGS), once per
# rep, and with its A/B switch off when this build has the switch; collect
# its bench= lines. prog NAME SUITE SWITCH ARGS...
optional_prog() {
	local name=$1 suite=$2 sw=$3 r v vars
	shift 3
	if [ ! -x "$E/$name" ]; then
		skip "$suite" "examples/$name is not in this tree (not landed yet)"
		return
	fi
	vars="-"
	[ -n "$sw" ] && has_feature "$sw" && vars="- NO_$sw"
	for r in $(seq 1 "$REPS"); do
		for v in $vars; do
			if [ "$v" = - ]; then
				run "$suite-$r" -- "$E/$name" "$@" && collect "$suite" - "$(lastlog "$suite-$r")"
			else
				run "$suite-$v-$r" WEFT_FEATURES="$v" -- "$E/$name" "$@" &&
					collect "$suite" "$v" "$(lastlog "$suite-$v-$r")"
			fi
		done
	done
	grep -q . <(awk -F'\t' -v s="$suite" '$1 == s' "$RAW") ||
		skip "$suite" "examples/$name printed no bench= line (logs/$suite-1.log)"
}

# shellcheck disable=SC2086
suite_dispatcher() { optional_prog dispatcher dispatcher WAKE_WIDE ${DISPATCHER_ARGS:-}; }
# shellcheck disable=SC2086
suite_hackbench() { optional_prog hackbench hackbench "" ${HACKBENCH_ARGS:-}; }
# shellcheck disable=SC2086
suite_gang() { optional_prog gang gang GANG ${GANG_ARGS:--i weft,pthread -r 1 -s 1}; }
# shellcheck disable=SC2086
suite_rwlock() {
	if seeds_groups | grep -qx rwlock; then
		want seeds || skip rwlock "run by run-seeds.sh (the seeds suite), which was left out"
		return
	fi
	optional_prog rwlock-bench rwlock "" ${RWLOCK_ARGS:-}
}
# shellcheck disable=SC2086
suite_cond() {
	if seeds_groups | grep -qx cond; then
		want seeds || skip cond "run by run-seeds.sh (the seeds suite), which was left out"
		return
	fi
	optional_prog cond-bench cond "" ${COND_ARGS:-}
}

# examples/scale.sh prints a table (a header naming a workers column, then
# rows), maybe several, each after a title line; or bench= lines with a
# workers= parameter. Both go into scale.tsv: bench workers column value.
# A table's unit column names the throughput's unit ("throughput
# (burns/s)"); its features column, where not "default", is added to the
# benchmark's name (sembench-NO_WAKE_WIDE).
parse_scale() {   # FILE
	awk '
	function isnum(x) { return x ~ /^[0-9.eE+-]+[a-zA-Z\/%]*$/ && x ~ /^[0-9]/ }
	/^bench=/ {
		b = ""; w = ""; v = ""; u = ""; im = ""
		for (i = 1; i <= NF; i++) {
			if ($i ~ /^bench=/) b = substr($i, 7)
			if ($i ~ /^impl=/) im = substr($i, 6)
			if ($i ~ /^value=/) v = substr($i, 7)
			if ($i ~ /^unit=/) u = substr($i, 6)
			if (match($i, /workers=[0-9]+/)) w = substr($i, RSTART + 8, RLENGTH - 8)
		}
		if (b != "" && w != "" && v != "") printf "%s\t%s\t%s %s\t%s\n", b, w, im, u, v
		next
	}
	{
		line = $0; gsub(/\|/, " ", line); n = split(line, f, " ")
		if (n == 0) { hdr = 0; next }
		wc = 0
		for (i = 1; i <= n; i++) if (tolower(f[i]) ~ /^(workers|weft_workers|w|nworkers)$/) wc = i
		if (wc && !isnum(f[1])) {
			hdr = n; hw = wc; bc = 0; uc = 0; fc = 0
			for (i = 1; i <= n; i++) {
				h[i] = f[i]
				if (tolower(f[i]) ~ /^(bench|benchmark|name|test)$/) bc = i
				if (tolower(f[i]) == "unit") uc = i
				if (tolower(f[i]) ~ /^(features|variant)$/) fc = i
			}
			next
		}
		if (hdr && n == hdr && isnum(f[hw])) {
			b = bc ? f[bc] : (title != "" ? title : "scale")
			if (fc && f[fc] != "default" && f[fc] != "-") { x = f[fc]; gsub(/,/, "+", x); b = b "-" x }
			for (i = 1; i <= n; i++) if (i != hw && i != bc && isnum(f[i])) {
				v = f[i]; sub(/[a-zA-Z\/%]+$/, "", v)
				u = f[i]; sub(/^[0-9.eE+-]+/, "", u)
				if (u == "" && uc && tolower(h[i]) ~ /^(throughput|value|rate)$/ && !isnum(f[uc])) u = f[uc]
				printf "%s\t%s\t%s\t%s\n", b, f[hw] + 0, h[i] (u != "" ? " (" u ")" : ""), v
			}
			next
		}
		hdr = 0
		t = $0; sub(/\(.*$/, "", t); gsub(/^[#= -]+|[#= :-]+$/, "", t); gsub(/[^A-Za-z0-9_.+-]+/, "_", t)
		if (t != "" && t !~ /^[-=+|_]+$/) title = t
	}' "$1"
}

suite_scale() {
	if [ ! -x "$here/scale.sh" ]; then
		skip scale "examples/scale.sh is not in this tree (not landed yet)"
		return
	fi
	local env=()
	read -r -a env <<< "${SCALE_ENV:-}"
	run scale BENCH_QUICK="${QUICK:-0}" "${env[@]}" -- "$here/scale.sh" "$B"
	parse_scale "$(lastlog scale)" >> "$SCALE"
	collect scale - "$(lastlog scale)"
	[ "$(wc -l < "$SCALE")" -gt 1 ] || skip scale "scale.sh printed no table with a workers column (logs/scale.log)"
}

suite_preload() {
	if [ ! -x "$here/run-preload.sh" ]; then
		skip preload "examples/run-preload.sh is not in this tree (not landed yet)"
		return
	fi
	# from the build directory: the script finds the library and
	# test-mutex there
	run preload BENCH_QUICK="${QUICK:-0}" REPEAT="$REPS" -- env -C "$B" "$here/run-preload.sh"
	case $? in
	0) collect preload - "$(lastlog preload)" ;;
	77) skip preload "$(grep -m1 -i 'missing' "$(lastlog preload)") (run-preload.sh installs nothing)" ;;
	*) skip preload "run-preload.sh failed (logs/preload.log)" ;;
	esac
}

SUITES="seeds weft-micro sync-micro pipe-bench pipeline wake-scale locks kick-pingpong echo http
	dispatcher hackbench scale gang rwlock cond preload"

# ---------------------------------------------------------------- machine

machine_facts() {
	local io
	io=$(WEFT_STATS=1 timeout 20 "$E/pipe-bench" -l 1000 -r 1 -i weft-same 2>&1 |
		sed -n 's/^ *io: //p' | head -n 1)
	{
		echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
		echo "mode=$([ -n "$QUICK" ] && echo "quick (BENCH_QUICK=1)" || echo full)"
		echo "reps=$REPS"
		echo "commit=$(git -C "$here/.." describe --always --dirty 2>/dev/null || echo unknown)"
		echo "cpus_online=$(nproc --all)"
		echo "cpus_usable=$(nproc)"
		echo "cpu_model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
		echo "kernel=$(uname -sr)"
		echo "arch=$(uname -m)"
		echo "memory=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
		echo "io_uring=${io:-unknown (probe failed)}"
		echo "loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)"
		echo "cc=$(sed -n 's/^CC = //p' "$B/Makefile" 2>/dev/null | head -n 1) $(sed -n 's/^CFLAGS = //p' "$B/Makefile" 2>/dev/null | head -n 1)"
	} > "$OUT/machine.txt"
}

# ---------------------------------------------------------------- aggregate

# results.tsv: per (suite bench impl variant param unit) the median, min,
# max and the values of all runs.
aggregate() {
	printf 'suite\tbench\timpl\tvariant\tparam\tunit\tn\tmedian\tmin\tmax\tvalues\n' > "$RES"
	awk -F'\t' 'NR > 1 {
		k = $1 "\t" $2 "\t" $3 "\t" $4 "\t" $5 "\t" $6
		if (!(k in n)) order[++nk] = k
		vals[k, ++n[k]] = $7 + 0
	}
	END {
		for (o = 1; o <= nk; o++) {
			k = order[o]; m = n[k]
			for (i = 1; i <= m; i++) a[i] = vals[k, i]
			for (i = 2; i <= m; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
			med = (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
			s = ""; for (i = 1; i <= m; i++) s = s (i > 1 ? " " : "") vals[k, i]
			printf "%s\t%d\t%.6g\t%.6g\t%.6g\t%s\n", k, m, med, a[1], a[m], s
		}
	}' "$RAW" >> "$RES"
}

# val SUITE BENCH IMPL VARIANT PARAM: a metric's median ("" if not
# measured); PARAM "*" matches any.
val() {
	awk -F'\t' -v s="$1" -v b="$2" -v i="$3" -v v="$4" -v p="$5" \
		'NR > 1 && $1 == s && (b == "*" || $2 == b) && $3 == i && $4 == v && (p == "*" || $5 == p) { print $8; exit }' "$RES"
}

# target ISSUE "DESCRIPTION" OP THRESHOLD NUM [DEN]: NUM and DEN are
# "SUITE|BENCH|IMPL|VARIANT|PARAM" keys; the measure is NUM/DEN (or NUM).
TARGET_PAIRS=" "
target() {
	local issue=$1 desc=$2 op=$3 th=$4 num den nv dv m st pair="$5>${6:-}>$4"
	case $TARGET_PAIRS in *" $pair "*) return ;; esac
	TARGET_PAIRS="$TARGET_PAIRS$pair "
	IFS='|' read -r -a num <<< "$5"
	nv=$(val "${num[@]}")
	dv=1
	if [ $# -ge 6 ]; then
		IFS='|' read -r -a den <<< "$6"
		dv=$(val "${den[@]}")
	fi
	if [ -z "$nv" ] || [ -z "$dv" ]; then
		printf '%s\t%s\t-\t%s %s\tnot measured\t-\n' "$issue" "$desc" "$op" "$th" >> "$TARGETS"
		return
	fi
	m=$(awk -v a="$nv" -v b="$dv" 'BEGIN { if (b == 0) print "inf"; else { r = a / b
		if (r >= 1e6) printf "%.4gM", r / 1e6; else if (r >= 1e4) printf "%.4gk", r / 1e3; else printf "%.4g", r } }')
	st=$(awk -v m="$m" -v t="$th" -v op="$op" 'BEGIN {
		if (m ~ /M$/) m = m * 1e6; else if (m ~ /k$/) m = m * 1e3; else m = m + 0
		ok = (op == ">=") ? (m >= t) : (m <= t)
		if (ok) print "met\t-"
		else printf "MISSED\t%s by %.0f%%\n", (op == ">=" ? "short" : "over"), 100 * (op == ">=" ? (t - m) / t : (m - t) / t) }')
	printf '%s\t%s\t%s\t%s %s\t%s\n' "$issue" "$desc" "$m" "$op" "$th" "$st" >> "$TARGETS"
}

targets() {
	printf 'issue\ttarget\tmeasured\trequired\tstatus\tby\n' > "$TARGETS"
	local t d n dn mn hp
	# run-seeds.sh's own targets (issue 3, and those later issues add to it):
	# DESCRIPTION|NUM_LABEL|DEN_LABEL|MIN, "-" for an absolute figure
	if [ -s "$OUT/logs/seeds/targets.txt" ]; then
		while IFS='|' read -r d n dn mn; do
			if [ "$dn" = - ]; then
				target "#3+ (run-seeds.sh)" "$d" ">=" "$mn" "seeds|*|$n|-|-"
			else
				target "#3+ (run-seeds.sh)" "$d" ">=" "$mn" "seeds|*|$n|-|-" "seeds|*|$dn|-|-"
			fi
		done < "$OUT/logs/seeds/targets.txt"
	fi
	for t in 16 128; do
		# issue 18 (when run-seeds.sh does not check them itself)
		target "#18" "test-mutex V $t: weft / glibc adaptive" ">=" 1.3 "seeds|*|V$t-weft|-|-" "seeds|*|V$t-pthread-adaptive|-|-"
		target "#18" "test-mutex V $t: weft / ceiling (--work-ns=0 V 1)" ">=" 0.9 "seeds|*|V$t-weft|-|-" "locks|test-mutex-V|weft|ceiling|tasks=1,work=0"
	done
	target "#18" "test-mutex V 1024 / V 128 (no cliff)" ">=" 0.8 "locks|test-mutex-V|weft|-|tasks=1024" "locks|test-mutex-V|weft|-|tasks=128"
	target "#18" "test-mutex --hold-ns=50 --work-ns=200 M: 1024 / 128 tasks" ">=" 0.8 "locks|test-mutex-M-short|weft|-|tasks=1024" "locks|test-mutex-M-short|weft|-|tasks=128"
	target "#18" "uncontended lock+unlock / bare CAS+store" "<=" 1.2 "sync-micro|mutex_uncontended|weft|-|*" "sync-micro|mutex_uncontended|cas_store|-|*"
	# issue 14
	target "#14" "sembench -o 3: 16 workers / 2 workers" ">=" 0.8 "wake-scale|sembench-o3|weft|W=16|*" "wake-scale|sembench-o3|weft|W=2|*"
	target "#14" "sembench -o 3: 64 workers / 2 workers" ">=" 0.6 "wake-scale|sembench-o3|weft|W=64|*" "wake-scale|sembench-o3|weft|W=2|*"
	target "#14" "sembench -o 3 at 16 workers: kicks per 1,000 wakes" "<=" 20 "wake-scale|kicks_per_1000_wakes|weft|W=16|*"
	target "#14" "pipeline (8 stages): 1-worker time / 2-worker time" ">=" 1 "pipeline|pipeline|weft|W=1|*" "pipeline|pipeline|weft|-|*"
	# issue 19
	for t in 50 1000 10000; do
		hp="conns=$t,threads=2,duration=$([ -n "$QUICK" ] && echo 2 || echo 10),repeat=$REPS"
		target "#19" "HTTP c=$t: weft / nginx req/s" ">=" 1.2 "http|http|weft|-|$hp" "http|http|nginx|-|$hp"
		target "#19" "HTTP c=$t: weft p99 / nginx p99" "<=" 1 "http|http_p99|weft|-|$hp" "http|http_p99|nginx|-|$hp"
	done
	for t in 10 100 1000; do
		target "#19" "echo c=$t: weft / epoll round trips/s" ">=" 1 "echo|echo|weft|-|conns=$t,size=64" "echo|echo|epoll|-|conns=$t,size=64"
	done
	# the A/B targets of the switches that land later (evaluated when measured)
	target "#14" "dispatcher: WAKE_WIDE on / off" ">=" 1.07 "dispatcher|dispatcher|weft|-|*" "dispatcher|dispatcher|weft|NO_WAKE_WIDE|*"
	target "#16" "gang: GANG on / off" ">=" 1.5 "gang|gang|weft|-|*" "gang|gang|weft|NO_GANG|*"
}

# ab.tsv: each seed switch's A/B, one row per case: the seeds' labelled
# pairs, and every other metric measured with WEFT_FEATURES=NO_X against
# the same metric without it. Only weft's own rows: a baseline (pthread,
# glibc, epoll, nginx) run beside them is not affected by a switch. A
# variant that turns off more than one switch (NO_X,NO_Y) is not one
# switch's A/B. The case's label is the suite, then the benchmark's name
# without the suite's (dispatcher_p99 in suite dispatcher: "dispatcher
# p99"), then the impl.
ab_table() {
	printf 'switch\tcase\tunit\ton_median\ton_min\ton_max\toff_median\toff_min\toff_max\n' > "$AB"
	awk -F'\t' '
	NR > 1 { row[$1 "|" $2 "|" $3 "|" $4 "|" $5] = $6 "\t" $8 "\t" $9 "\t" $10; rows[NR] = $0
		if (!seenp[$1 "|" $2 "|" $3 "|" $4 "|" $5]++) nparam[$1 "|" $2 "|" $3 "|" $4]++ }
	function pair(sw, cs, on, off) {
		if ((on in row) && (off in row)) {
			split(row[on], a, "\t"); split(row[off], b, "\t")
			printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sw, cs, a[1], a[2], a[3], a[4], b[2], b[3], b[4]
		}
	}
	END {
		pair("MAILBOX", "sembench -o 3", "seeds|sembench|o3-weft-wakeq|-|-", "seeds|sembench|o3-NO_MAILBOX|-|-")
		pair("BATCH_WAKE", "sembench -o 3", "seeds|sembench|o3-weft-wakeq|-|-", "seeds|sembench|o3-NO_BATCH_WAKE|-|-")
		for (t = 1; t <= 4096; t *= 2) {
			pair("OWNER_SPIN", "test-mutex V " t, "seeds|mutex-V" t "|V" t "-weft|-|-", "seeds|mutex-V" t "|V" t "-weft-NO_OWNER_SPIN|-|-")
		}
		for (r = 2; r in rows || r <= NR; r++) {
			if (!(r in rows)) continue
			split(rows[r], f, "\t")
			if (f[4] !~ /^NO_/ || f[4] ~ /,/ || f[1] == "seeds" || f[3] ~ /^(pthread|glibc|epoll|nginx)/) continue
			on = f[1] "|" f[2] "|" f[3] "|-|" f[5]
			bn = f[2]
			if (index(bn, f[1]) == 1) { bn = substr(bn, length(f[1]) + 1); sub(/^[-_]/, "", bn) }
			else if (index(f[1], bn) == 1) bn = ""
			cs = f[1] (bn != "" ? " " bn : "") " " f[3]
			if (nparam[f[1] "|" f[2] "|" f[3] "|" f[4]] > 1) cs = cs " " f[5]
			pair(substr(f[4], 4), cs, on, f[1] "|" f[2] "|" f[3] "|" f[4] "|" f[5])
		}
	}' "$RES" >> "$AB"
}

# ---------------------------------------------------------------- report

# table SUITE BASE [BENCH_REGEX]: the suite's metrics in markdown with the
# ratio against the baseline (BASE: an impl name; "first": the first row of
# the same bench, run-seeds.sh's rule; "variant": the same impl without
# variant, or the first variant measured). > 1 means better than the
# baseline, whichever way the unit goes.
table() {
	awk -F'\t' -v s="$1" -v base="$2" -v re="${3:-.}" '
	function lower(u) { return u ~ /^(ns|us|ms|s|usecs\/op|%|kicks)$/ }
	function fmt(x) { return (x >= 1e6) ? sprintf("%.3gM", x / 1e6) : (x >= 1e4) ? sprintf("%.3gk", x / 1e3) : sprintf("%.4g", x) }
	NR > 1 && $1 == s && $2 ~ re {
		r[++n] = $0
		k = $2 SUBSEP $4 SUBSEP $5
		if (base == "first") { if (!(($2) in first)) first[$2] = $8 }
		else if (base == "variant") { if (!(($2 SUBSEP $3 SUBSEP $5) in first)) first[$2 SUBSEP $3 SUBSEP $5] = $8 }
		else if ($3 == base) { bv[k] = $8; bany[$2 SUBSEP $4] = $8; nb[$2 SUBSEP $4]++ }
	}
	END {
		if (n == 0) { print "(no results)"; exit }
		print "| benchmark | impl | variant | param | median | min-max | runs | unit | vs baseline |"
		print "|---|---|---|---|---:|---:|---:|---|---:|"
		for (i = 1; i <= n; i++) {
			split(r[i], f, "\t")
			b = ""
			if (base == "first") b = first[f[2]]
			else if (base == "variant") b = first[f[2] SUBSEP f[3] SUBSEP f[5]]
			else if ((f[2] SUBSEP f[4] SUBSEP f[5]) in bv) b = bv[f[2] SUBSEP f[4] SUBSEP f[5]]
			else if (nb[f[2] SUBSEP f[4]] == 1) b = bany[f[2] SUBSEP f[4]]
			ratio = "-"
			if (b != "" && b > 0 && f[8] > 0) ratio = sprintf("%.2fx", lower(f[6]) ? b / f[8] : f[8] / b)
			rng = (f[7] > 1) ? fmt(f[9]) "-" fmt(f[10]) : "-"
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f[2], f[3], f[4], f[5], fmt(f[8]), rng, f[7], f[6], ratio
		}
	}' "$RES"
}

# preload_table: examples/run-preload.sh's results, one row per benchmark
# and baseline (glibc's default mutex; for test-mutex also glibc's adaptive
# one): both medians with min-max, preload against the baseline (> 1: the
# preload is better, whichever way the unit goes) and the CPU seconds of
# the runs (BENCH_cpu).
preload_table() {
	awk -F'\t' '
	function lower(u) { return u ~ /^(ns|us|ms|s|usecs\/op|%|kicks)$/ }
	function fmt(x) { return (x >= 1e6) ? sprintf("%.3gM", x / 1e6) : (x >= 1e4) ? sprintf("%.3gk", x / 1e3) : sprintf("%.4g", x) }
	function mm(k) { return fmt(med[k]) (n[k] > 1 ? " (" fmt(lo[k]) "-" fmt(hi[k]) ")" : "") }
	NR > 1 && $1 == "preload" {
		b = $2; cpu = sub(/_cpu$/, "", b)
		k = b SUBSEP $5 SUBSEP $3
		if (cpu) { c[k] = $8; next }
		if (!((b SUBSEP $5) in seen)) { seen[b SUBSEP $5] = 1; order[++no] = b SUBSEP $5 }
		med[k] = $8; lo[k] = $9; hi[k] = $10; n[k] = $7; unit[b SUBSEP $5] = $6
		if ($3 != "preload" && !((b SUBSEP $5 SUBSEP $3) in isb)) { isb[b SUBSEP $5 SUBSEP $3] = 1; bases[b SUBSEP $5] = bases[b SUBSEP $5] " " $3 }
	}
	END {
		if (no == 0) { print "(no results)"; exit }
		print "| benchmark | param | unit | baseline | baseline median (min-max) | preload median (min-max) | preload vs baseline | CPU s baseline / preload | runs |"
		print "|---|---|---|---|---:|---:|---:|---:|---:|"
		for (i = 1; i <= no; i++) {
			split(order[i], bp, SUBSEP)
			p = order[i] SUBSEP "preload"
			nb = split(bases[order[i]], bs, " ")
			for (j = 1; j <= nb; j++) {
				g = order[i] SUBSEP bs[j]
				ratio = "-"
				if ((p in med) && med[g] > 0 && med[p] > 0)
					ratio = sprintf("%.2fx", lower(unit[order[i]]) ? med[g] / med[p] : med[p] / med[g])
				cs = ((g in c) || (p in c)) ? ((g in c) ? sprintf("%.2f", c[g]) : "-") " / " ((p in c) ? sprintf("%.2f", c[p]) : "-") : "-"
				printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", bp[1], bp[2], unit[order[i]], bs[j],
					mm(g), (p in med) ? mm(p) : "-", ratio, cs, n[g] "/" ((p in n) ? n[p] : 0)
			}
		}
	}' "$RES"
}

has_suite() { awk -F'\t' -v s="$1" 'NR > 1 && $1 == s { f = 1; exit } END { exit !f }' "$RES"; }

section() {   # TITLE SUITE BASE [REGEX] [TEXT]
	has_suite "$2" || return 0
	echo "### $1"
	echo
	[ -n "${5:-}" ] && { echo "$5"; echo; }
	table "$2" "$3" "${4:-.}"
	echo
}

plot_links() {   # PREFIX...
	local p f
	for p in "$@"; do
		for f in "$OUT"/plots/"$p"*.svg; do
			[ -e "$f" ] || continue
			f=${f##*/}
			echo "![${f%.svg}](plots/$f) ([PNG](plots/${f%.svg}.png))"
			echo
		done
	done
}

report() {
	local m
	{
		echo "# weft benchmark report"
		echo
		echo "$(sed -n 's/^date=//p' "$OUT/machine.txt"), $(sed -n 's/^mode=//p' "$OUT/machine.txt"), $REPS run(s) per configuration, alternated; took $(sed -n 's/^duration=//p' "$OUT/machine.txt")."
		echo "Each program's own baseline runs in the same sitting. Ratios: > 1 means weft (or the switch) is better, whichever way the unit goes; min-max over the runs (compare two reports with \`examples/compare.sh A B\`, which calls a difference noise when the two min-max ranges overlap)."
		echo
		[ "$REPS" = 1 ] && { echo "**One run per configuration: no min-max ranges, so examples/compare.sh can give no noise verdict on this report (every row \"1 run\"). For reports to compare, run \`make bench BENCH_REPS=3\` (or more; it also applies with BENCH_QUICK=1).**"; echo; }
		awk -F= '$1 == "cpus_online" { c = $2 } $1 ~ /^loadavg_/ { split($2, l, " "); if (l[1] > m) m = l[1] }
			END { if (c > 0 && m > c) printf "**The machine was busy: load average up to %s on %s CPUs during the run. The figures are noisy; rerun on an idle machine before comparing.**\n\n", m, c }' "$OUT/machine.txt"
		echo "## Machine"
		echo
		echo "| fact | value |"
		echo "|---|---|"
		sed 's/|/\\|/g; s/=/ | /; s/^/| /; s/$/ |/' "$OUT/machine.txt"
		echo
		echo "## Targets"
		echo
		echo "From the open issues (#14 wake path at scale, #16 gangs, #18 contended locks, #19 thread-per-connection) and run-seeds.sh's own list (the landed sync work, #3, and what later issues add to it). \"not measured\": the benchmark is skipped or has not landed, or the quick mode leaves that size out."
		echo
		m=$(awk -F'\t' 'NR > 1 { n[$5 ~ /^met/ ? "met" : $5 ~ /^MISSED/ ? "missed" : "nm"]++ } END { printf "%d met, %d missed, %d not measured", n["met"], n["missed"], n["nm"] }' "$TARGETS")
		echo "$m."
		echo
		echo "| issue | target | measured | required | status |"
		echo "|---|---|---:|---|---|"
		awk -F'\t' 'NR > 1 { st = $5; if ($6 != "-") st = st " (" $6 ")"; if (st ~ /^MISSED/) st = "**" st "**"
			printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, st }' "$TARGETS"
		echo
		echo "## Seeds"
		echo
		section "Seed 000: semaphore wakeups (sembench; MAILBOX and BATCH_WAKE A/B)" seeds first '^sembench$' \
			"examples/sembench -t 2048 -w 1900; baseline: -o 0 (SysV semaphores in the kernel)."
		for m in $(awk -F'\t' 'NR > 1 && $1 == "seeds" && $2 ~ /^mutex-V/ { print $2 }' "$RES" | sort -u -V); do
			section "Seed 001: adaptive mutex, test-mutex ${m#mutex-} (OWNER_SPIN A/B)" seeds first "^$m\$" \
				"examples/test-mutex V ${m#mutex-V}; baseline: glibc's default pthread mutex on OS threads."
		done
		for m in $(awk -F'\t' 'NR > 1 && $1 == "seeds" && $2 != "sembench" && $2 !~ /^mutex-V/ && !u[$2]++ { print $2 }' "$RES"); do
			section "run-seeds.sh: $m" seeds first "^$m\$" "Ratios against the group's first case."
		done
		section "Seed 002: dispatcher (WAKE_WIDE A/B)" dispatcher pthread
		section "Seed 003: stage pipeline" pipeline pthread . \
			"examples/pipeline, 8 stages; baseline: pthreads with mutex + condition variables. Variant W=1: weft on one worker."
		section "Seed 004: gang scheduling" gang pthread
		section "Seed A4: perf bench sched pipe" pipe-bench pipe . "examples/pipe-bench; baseline: two pthreads over pipe(2)."
		plot_links ab-
		echo "## Runtime and sync"
		echo
		section "Runtime micro benchmarks (weft-micro)" weft-micro pthread
		section "Sync micro benchmarks (sync-micro)" sync-micro pthread
		section "Kick round trip (kick-pingpong)" kick-pingpong variant . \
			"examples/kick-pingpong ROUNDS: a token passed between two light threads pinned to workers 0 and 1 (weft_park/weft_unpark), microseconds per round trip (two wakes) and kicks per round trip. Variants: as it is (idle workers spin and catch the wake), NO_IDLE_SPIN (every hand-off wakes a sleeping worker: the io_uring kick), NO_IDLE_SPIN,NO_URING (the futex kick). Ratios against the first variant."
		plot_links cdf-
		section "Locks (test-mutex ceiling and many waiters)" locks first . \
			"variant ceiling: --work-ns=0 V 1, the critical section alone. Ratios against the first row of each benchmark: the ceiling for test-mutex-V, 128 tasks for test-mutex-M-short (--hold-ns=50 --work-ns=200 M)."
		section "rwlock" rwlock pthread
		section "cond" cond pthread
		echo "## Scale"
		echo
		section "Wake path at scale: sembench -o 3 by WEFT_WORKERS" wake-scale first . "Ratios against 2 workers."
		section "Hackbench" hackbench pthread
		section "scale.sh" scale pthread
		if [ "$(wc -l < "$SCALE")" -gt 1 ]; then
			echo "### examples/scale.sh"
			echo
			echo "| bench | workers | column | value |"
			echo "|---|---:|---|---:|"
			awk -F'\t' 'NR > 1 { printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }' "$SCALE"
			echo
		fi
		plot_links scale-
		echo "## I/O"
		echo
		section "Echo (echo-server + echo-client)" echo epoll . "Baseline: the epoll event-loop server."
		section "HTTP (examples/run-http.sh, wrk)" http nginx . "Baseline: nginx, 2 workers."
		plot_links echo http
		if has_suite preload; then
			echo "### Preload (examples/run-preload.sh)"
			echo
			echo "Unmodified programs under glibc and under \`LD_PRELOAD=libweft-preload.so\`, the runs alternating (docs/preload.md). Baselines: glibc's default mutex (\`glibc\`) and, for test-mutex, glibc's adaptive one (\`glibc-adaptive\`). Ratio > 1: the preload is better (for a latency in ms, lower). CPU s: median CPU seconds of a run (the program's, or the server's). $([ -n "$QUICK" ] && echo "Quick mode: test-mutex and sysbench only, short runs (run-preload.sh's BENCH_QUICK).")"
			echo
			preload_table
			echo
		fi
		echo "## Skipped"
		echo
		if [ "$(wc -l < "$SKIPPED")" -gt 1 ]; then
			awk -F'\t' 'NR > 1 { printf "- **%s**: %s\n", $1, $2 }' "$SKIPPED"
		else
			echo "Nothing."
		fi
		echo
		local extra=""
		for m in "$E"/*; do
			[ -f "$m" ] && [ -x "$m" ] || continue
			case ${m##*/} in
			*.sh|*.o|weft-micro|sync-micro|sembench|test-mutex|pipe-bench|pipeline|echo-server|echo-client|http-server|kick-pingpong|dispatcher|hackbench|gang|rwlock-bench|rwlock|cond-bench|cond) ;;
			*) extra="$extra ${m##*/}" ;;
			esac
		done
		[ -n "$extra" ] && { echo "Programs in examples/ that make bench does not run yet:$extra."; echo; }
		echo "## Files"
		echo
		echo "results.tsv (one row per metric), raw.tsv (one row per run), targets.tsv, ab.tsv, scale.tsv, samples/ (wake latencies, ns), plots/, logs/ (each program's output; the first line of each is its command)."
	} > "$OUT/report.md"
}

# ---------------------------------------------------------------- main

want() {
	local s
	if [ -n "${BENCH_ONLY:-}" ]; then
		for s in $BENCH_ONLY; do [ "$s" = "$1" ] && return 0; done
		return 1
	fi
	for s in ${BENCH_SKIP:-}; do [ "$s" = "$1" ] && return 1; done
	return 0
}

main() {
	local s
	log "build $B, report in $OUT, ${QUICK:+quick, }$REPS rep(s)"
	machine_facts
	for s in $SUITES; do
		if want "$s"; then
			log "$s"
			"suite_${s//-/_}"
		else
			skip "$s" "left out by BENCH_ONLY/BENCH_SKIP"
		fi
	done
	echo "loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/machine.txt"
	echo "duration=$((SECONDS - T_START)) s" >> "$OUT/machine.txt"
}

if [ -n "$REPORT_ONLY" ]; then
	REPS=$(sed -n 's/^reps=//p' "$OUT/machine.txt")
	grep -q '^mode=quick' "$OUT/machine.txt" && QUICK=1
else
	main
fi
aggregate
targets
ab_table
"$here/bench-plot.sh" "$OUT" || log "bench-plot.sh failed: the report has no plots"
report
log "done: $OUT/report.md"
