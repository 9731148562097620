#!/bin/bash
# examples/run-seeds.sh - the "main job": every seed benchmark against its
# kernel baseline, side by side, with a summary table, ratios and the issue's
# targets.
#
# usage: examples/run-seeds.sh [BUILD_DIR]
#   BUILD_DIR  the build tree holding examples/sembench etc.; default: the
#              parent of this script's directory (an in-tree build, or a copy
#              of the script in BUILD_DIR/examples).
# environment:
#   REPS=3           runs per configuration (the table shows medians; use 5
#                    for figures that go into a report)
#   SEM_SECS=3       sembench -r
#   SEM_ARGS="-t 2048 -w 1900"   sembench size (the seed's command line)
#   MUTEX_SECS=2     test-mutex seconds (wall time per run is about +2 s)
#   MUTEX_TASKS="2 16 128"
#   ONLY="sembench test-mutex"   groups to run (known: sembench test-mutex
#                    rwlock cond; rwlock and cond are not in the default)
#   RW_SECS=2        rwlock-bench seconds;  RW_TASKS="16 128"  RW_READS="90 99"
#   COND_SECS=2      cond-bench seconds;    COND_CONSUMERS="1 16"
#   SKIP=REGEX       skip the cases whose label matches; default
#                    'nanosleep|pthread-spin' (no target depends on them, and
#                    2048 1-ms pollers on 2 CPUs make -o 1 slow); SKIP= runs all
#   OUT=DIR          where logs and results go (default: a fresh mktemp dir)
#   QUIET_WAIT=60    before each run, wait up to this many seconds for the
#                    machine to be idle (>= QUIET_IDLE % idle over 1 s, default
#                    90); a run that starts on a busy machine is counted in the
#                    "noisy" column. QUIET_WAIT=0 disables the check.
# Defaults take about 5 minutes on 2 CPUs on an idle machine.
#
# Adding a benchmark: write a parser (stdin = the program's stdout, print
# one number), then in a group function call
#   run_case GROUP LABEL UNIT PARSER [VAR=value ...] -- COMMAND ARGS...
# (the first case of a group is the group's baseline for the ratio column;
# labels must be unique across groups, targets look them up by label),
# add `target "DESCRIPTION" NUM_LABEL DEN_LABEL MIN_RATIO` lines (DEN_LABEL
# "-" compares NUM_LABEL's median itself with MIN_RATIO), and list the group
# function in GROUP_FUNCS. parse_bench_line parses the
# `bench=NAME ... value=X` lines of examples/bench.h.
set -u

here=$(cd "$(dirname "$0")" && pwd)
if [ $# -ge 1 ]; then
	B=$(cd "$1" && pwd) || exit 1
else
	B=$(cd "$here/.." && pwd)
fi
if [ ! -x "$B/examples/sembench" ] || [ ! -x "$B/examples/test-mutex" ]; then
	echo "run-seeds.sh: no examples/sembench and examples/test-mutex under $B;" >&2
	echo "usage: run-seeds.sh BUILD_DIR   (after make in BUILD_DIR)" >&2
	exit 1
fi

REPS=${REPS:-3}
SEM_SECS=${SEM_SECS:-3}
SEM_ARGS=${SEM_ARGS:--t 2048 -w 1900}
MUTEX_SECS=${MUTEX_SECS:-2}
MUTEX_TASKS=${MUTEX_TASKS:-2 16 128}
RW_SECS=${RW_SECS:-2}
RW_TASKS=${RW_TASKS:-16 128}
RW_READS=${RW_READS:-90 99}
COND_SECS=${COND_SECS:-2}
COND_CONSUMERS=${COND_CONSUMERS:-1 16}
ONLY=${ONLY:-sembench test-mutex}
SKIP=${SKIP-nanosleep|pthread-spin}
OUT=${OUT:-$(mktemp -d /tmp/run-seeds.XXXXXX)}
QUIET_WAIT=${QUIET_WAIT:-60}
QUIET_IDLE=${QUIET_IDLE:-90}
mkdir -p "$OUT"
RESULTS=$OUT/results.txt   # group|label|median|unit|values|command|noisy runs
TARGETS=$OUT/targets.txt   # description|num|den|min
: > "$RESULTS"
: > "$TARGETS"

# ---------------------------------------------------------------- parsers

parse_sembench() { awk '/worker burns per second/ { v = $5 } END { print v }'; }
parse_test_mutex() { tr '\r' '\n' | awk '/^avg ops\/sec:/ { v = $3 } END { print v }'; }
# parse_bench_line NAME: the value of the first `bench=NAME ...` line.
parse_bench_line() {
	awk -v n="bench=$1" '$1 == n { for (i = 2; i <= NF; i++) if ($i ~ /^value=/) { sub(/^value=/, "", $i); print $i; exit } }'
}

# ---------------------------------------------------------------- engine

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# Percent of CPU time idle over the next second (all CPUs, /proc/stat).
idle_pct() {
	local a b
	a=$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
	sleep 1
	b=$(awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
	echo "$a $b" | awk '{ t = $4 - $2; print (t > 0) ? int(100 * ($3 - $1) / t) : 100 }'
}

# Wait (up to QUIET_WAIT s) until the machine is idle; returns 1 if it never was.
wait_quiet() {
	[ "$QUIET_WAIT" -gt 0 ] || return 0
	local deadline=$((SECONDS + QUIET_WAIT)) idle
	while :; do
		idle=$(idle_pct)
		[ "$idle" -ge "$QUIET_IDLE" ] && return 0
		if [ $SECONDS -ge $deadline ]; then
			echo "  (machine still busy: ${idle}% idle; running anyway)" >&2
			return 1
		fi
	done
}

# run_case GROUP LABEL UNIT PARSER [VAR=value ...] -- COMMAND ARGS...
run_case() {
	local group=$1 label=$2 unit=$3 parser=$4
	shift 4
	if [ -n "$SKIP" ] && echo "$label" | grep -Eq -- "$SKIP"; then
		return 0
	fi
	local envs=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	local cmd="${envs[*]:+${envs[*]} }$*"
	local vals="" r v log noisy=0
	for r in $(seq 1 "$REPS"); do
		wait_quiet || noisy=$((noisy + 1))
		log=$OUT/$(echo "$group-$label-$r" | tr -c 'A-Za-z0-9_.\n-' '_').log
		env "${envs[@]}" "$@" > "$log.out" 2> "$log.err"
		local rc=$?
		v=$($parser < "$log.out")
		if [ $rc -ne 0 ] || [ -z "$v" ]; then
			echo "  $group/$label run $r FAILED (exit $rc), see $log.out / $log.err" >&2
			v=""
		fi
		vals="$vals $v"
	done
	local med
	med=$(echo "$vals" | median)
	printf '  %-12s %-28s %14s %s   [%s ] noisy %d\n' "$group" "$label" "$med" "$unit" "$vals" "$noisy" >&2
	echo "$group|$label|$med|$unit|$vals|$cmd|$noisy" >> "$RESULTS"
}

# target "DESCRIPTION" NUM_LABEL DEN_LABEL MIN
target() { echo "$1|$2|$3|$4" >> "$TARGETS"; }

median_of() { awk -F'|' -v l="$1" '$2 == l { print $3; exit }' "$RESULTS"; }

report() {
	echo
	echo "== seed benchmarks: medians of $REPS runs ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -r))"
	awk -F'|' '
	{ if (!($1 in base)) base[$1] = $3
	  r = (base[$1] > 0 && $3 != "nan") ? sprintf("%.2fx", $3 / base[$1]) : "-"
	  printf "%-12s %-28s %14s %-9s %9s %6s\n", $1, $2, $3, $4, r, $7 }' \
		"$RESULTS" | sed '1i group        case                                 median unit         vs 1st  noisy'
	echo
	echo "== targets (issues 3 and 18)"
	local d n dn m nv dv ratio ok
	while IFS='|' read -r d n dn m; do
		nv=$(median_of "$n")
		if [ "$dn" = "-" ]; then dv=1; else dv=$(median_of "$dn"); fi
		if [ -z "$nv" ] || [ -z "$dv" ] || [ "$nv" = "nan" ] || [ "$dv" = "nan" ]; then
			printf '%-52s %12s  %s\n' "$d" "n/a" "(not run)"
			continue
		fi
		ratio=$(awk -v a="$nv" -v b="$dv" -v abs="$dn" 'BEGIN { if (abs == "-") printf "%.0f", a; else if (b > 0) printf "%.3f", a / b; else print "inf" }')
		ok=$(awk -v r="$ratio" -v m="$m" 'BEGIN { print (r + 0 >= m + 0) ? "met" : "MISS" }')
		printf '%-52s %12s  >= %-8s %s\n' "$d" "$ratio" "$m" "$ok"
	done < "$TARGETS"
	echo
	echo "== commands (BUILD_DIR=$B)"
	awk -F'|' '{ printf "%-40s %s\n", $1 "/" $2 ":", $6 }' "$RESULTS" | sed "s|$B/||g"
	echo
	echo "logs: $OUT"
}

# ---------------------------------------------------------------- groups

group_sembench() {
	local sb="$B/examples/sembench" a
	read -r -a a <<< "$SEM_ARGS"
	# -s 1: the 10 s setup sleep of mode 0 shortened (it is not measured).
	run_case sembench "o0-sysv" "burns/s" parse_sembench -- "$sb" "${a[@]}" -r "$SEM_SECS" -o 0 -s 1
	run_case sembench "o2-futex" "burns/s" parse_sembench -- "$sb" "${a[@]}" -r "$SEM_SECS" -o 2
	run_case sembench "o1-nanosleep" "burns/s" parse_sembench -- "$sb" "${a[@]}" -r "$SEM_SECS" -o 1
	run_case sembench "o3-weft-wakeq" "burns/s" parse_sembench -- "$sb" "${a[@]}" -r "$SEM_SECS" -o 3
	run_case sembench "o4-weft-post" "burns/s" parse_sembench -- "$sb" "${a[@]}" -r "$SEM_SECS" -o 4
	run_case sembench "o3-NO_MAILBOX" "burns/s" parse_sembench WEFT_FEATURES=NO_MAILBOX -- "$sb" "${a[@]}" -r "$SEM_SECS" -o 3
	run_case sembench "o3-NO_BATCH_WAKE" "burns/s" parse_sembench WEFT_FEATURES=NO_BATCH_WAKE -- "$sb" "${a[@]}" -r "$SEM_SECS" -o 3
	target "sembench -o 3 >= 15M burns/s" o3-weft-wakeq - 15000000
	target "sembench -o 3 / -o 0 (SysV)" o3-weft-wakeq o0-sysv 20
	target "sembench -o 3 / -o 4 (wake queue vs one by one)" o3-weft-wakeq o4-weft-post 2
	target "sembench -o 3 MAILBOX on / off" o3-weft-wakeq o3-NO_MAILBOX 1.26
}

group_test_mutex() {
	local tm="$B/examples/test-mutex" t
	# The ceiling (issue 18): one task, no work outside the lock, so the
	# lock is never idle: the critical section alone, printed beside the
	# contended runs (their "vs ceiling" targets below).
	run_case "mutex-ceil" "ceiling-V1-work0" "ops/s" parse_test_mutex -- "$tm" --impl=weft --work-ns=0 V 1 "$MUTEX_SECS"
	for t in $MUTEX_TASKS; do
		run_case "mutex-V$t" "V$t-pthread" "ops/s" parse_test_mutex -- "$tm" --impl=pthread V "$t" "$MUTEX_SECS"
		run_case "mutex-V$t" "V$t-pthread-adaptive" "ops/s" parse_test_mutex -- "$tm" --impl=pthread-adaptive V "$t" "$MUTEX_SECS"
		run_case "mutex-V$t" "V$t-pthread-spin" "ops/s" parse_test_mutex -- "$tm" --impl=pthread-spin V "$t" "$MUTEX_SECS"
		run_case "mutex-V$t" "V$t-weft" "ops/s" parse_test_mutex -- "$tm" --impl=weft V "$t" "$MUTEX_SECS"
		run_case "mutex-V$t" "V$t-weft-NO_OWNER_SPIN" "ops/s" parse_test_mutex WEFT_FEATURES=NO_OWNER_SPIN -- "$tm" --impl=weft V "$t" "$MUTEX_SECS"
		if [ "$t" -le 2 ]; then
			target "test-mutex V $t: weft / pthread (never below)" "V$t-weft" "V$t-pthread" 1
		else
			target "test-mutex V $t: weft / pthread" "V$t-weft" "V$t-pthread" 3
			target "test-mutex V $t: weft / pthread-adaptive" "V$t-weft" "V$t-pthread-adaptive" 2
			target "test-mutex V $t: OWNER_SPIN on / off" "V$t-weft" "V$t-weft-NO_OWNER_SPIN" 2
			target "test-mutex V $t: weft / ceiling (issue 18)" "V$t-weft" "ceiling-V1-work0" 0.9
			target "test-mutex V $t: weft / adaptive (issue 18)" "V$t-weft" "V$t-pthread-adaptive" 1.3
		fi
	done
}

# rwlock-bench: weft_rwlock vs glibc pthread_rwlock, hold 200 ns (issue 18)
group_rwlock() {
	local rb="$B/examples/rwlock-bench" t r
	[ -x "$rb" ] || { echo "run-seeds.sh: no $rb, group rwlock skipped" >&2; return 0; }
	for t in $RW_TASKS; do
		for r in $RW_READS; do
			run_case "rwlock-$t-r$r" "rw$t-r$r-pthread" "ops/s" "parse_bench_line rwlock" -- "$rb" --impl=pthread --tasks="$t" --read-pct="$r" --secs="$RW_SECS"
			run_case "rwlock-$t-r$r" "rw$t-r$r-weft" "ops/s" "parse_bench_line rwlock" -- "$rb" --impl=weft --tasks="$t" --read-pct="$r" --secs="$RW_SECS"
		done
	done
	target "rwlock 16 tasks 99% reads: weft / pthread" rw16-r99-weft rw16-r99-pthread 3
	target "rwlock 16 tasks 90% reads: weft / pthread" rw16-r90-weft rw16-r90-pthread 1.5
}

# cond-bench: producer/consumer under mutex + cond, 1:C (issue 18)
group_cond() {
	local cb="$B/examples/cond-bench" c
	[ -x "$cb" ] || { echo "run-seeds.sh: no $cb, group cond skipped" >&2; return 0; }
	for c in $COND_CONSUMERS; do
		run_case "cond-1to$c" "cond1to$c-pthread" "items/s" "parse_bench_line cond" -- "$cb" --impl=pthread --consumers="$c" --secs="$COND_SECS"
		run_case "cond-1to$c" "cond1to$c-weft" "items/s" "parse_bench_line cond" -- "$cb" --impl=weft --consumers="$c" --secs="$COND_SECS"
	done
	target "cond 1:16 producer/consumer: weft / pthread" cond1to16-weft cond1to16-pthread 3
}

# name in ONLY -> function
GROUP_FUNCS="sembench:group_sembench test-mutex:group_test_mutex rwlock:group_rwlock cond:group_cond"

# ---------------------------------------------------------------- main

echo "run-seeds.sh: build $B, REPS=$REPS, logs in $OUT" >&2
for g in $ONLY; do
	f=""
	for gf in $GROUP_FUNCS; do
		[ "${gf%%:*}" = "$g" ] && f=${gf#*:}
	done
	if [ -z "$f" ]; then
		echo "run-seeds.sh: unknown group $g (known: $GROUP_FUNCS)" >&2
		exit 1
	fi
	"$f"
done
report | tee "$OUT/summary.txt"
