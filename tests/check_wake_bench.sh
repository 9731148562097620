#!/bin/sh
# Smoke test of the wake-path benchmarks: examples/dispatcher and
# examples/hackbench run for a fraction of a second in both implementations;
# their summary lines must parse and agree with themselves (transactions
# counted, the rate equal to count / time, every message of hackbench
# received: messages == groups x senders x receivers x loops); the weft runs
# must report the scheduler counters and the pthread runs must not. Then
# the failure paths: a WEFT_FEATURES switch the build does not know gives
# exit status 3 and a message, bad arguments status 2, chan mode has no
# pthread form; examples/scale.sh prints its table and reports an unknown
# feature variant as not available instead of failing.
# Run from the top build directory (automake's test harness does).
# Exit 0 pass, 1 fail, 77 skipped (binaries not built).

ex=./examples
for b in dispatcher hackbench; do
	if [ ! -x "$ex/$b" ]; then
		echo "SKIP: $ex/$b not built"
		exit 77
	fi
done
scale=$ex/scale.sh
[ -x "$scale" ] || scale=${srcdir:-.}/examples/scale.sh

tmo=
command -v timeout >/dev/null 2>&1 && tmo="timeout 60"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# key=value from a summary line: get KEY LINE
get() { echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }
isnum() { echo "$1" | grep -Eq '^[0-9]+(\.[0-9]+)?$'; }

# --- dispatcher ---------------------------------------------------------

check_dispatcher() { # impl args...
	impl=$1
	shift
	out=$(WEFT_WORKERS=2 $tmo "$ex/dispatcher" --impl="$impl" -s 0.3 "$@" 2>&1)
	rc=$?
	line=$(echo "$out" | grep '^bench=dispatcher ')
	if [ $rc -ne 0 ] || [ -z "$line" ]; then
		fail "dispatcher --impl=$impl $*: status $rc, summary '$line'"
		echo "$out"
		return
	fi
	tx=$(get tx "$line") tps=$(get tps "$line") secs=$(get secs "$line")
	p50=$(get p50_us "$line") p99=$(get p99_us "$line") k=$(get kicks_per_kwake "$line")
	for v in "$tx" "$tps" "$secs" "$p50" "$p99"; do
		isnum "$v" || { fail "dispatcher $impl: not a number: '$v' in: $line"; return; }
	done
	# counts: tx >= 100 (one per 3 ms, far below any sane rate), tps = tx / secs (1% + rounding), p50 <= p99
	if ! awk -v tx="$tx" -v tps="$tps" -v s="$secs" -v a="$p50" -v b="$p99" 'BEGIN {
		d = tps * s - tx; if (d < 0) d = -d
		exit !(tx >= 100 && s > 0.2 && d <= tx * 0.01 + 2 && a <= b) }'; then
		fail "dispatcher $impl: inconsistent: $line"
	fi
	if [ "$impl" = weft ]; then
		isnum "$k" || fail "dispatcher weft: no kicks_per_kwake: $line"
		isnum "$(get wakes "$line")" || fail "dispatcher weft: no wakes: $line"
		[ "$(get workers "$line")" = 2 ] || fail "dispatcher weft: WEFT_WORKERS=2 not applied: $line"
	else
		[ "$k" = - ] || fail "dispatcher pthread: scheduler counters shown: $line"
	fi
	echo "ok: dispatcher --impl=$impl $*: tx=$tx tps=$tps p99_us=$p99"
}

check_dispatcher weft -n 4
check_dispatcher pthread -n 4
check_dispatcher weft -d 2 -n 6 -q 2 -w 1000 -b 4096
check_dispatcher pthread -d 2 -n 6 -q 2 -w 1000 -b 4096

# --- hackbench ----------------------------------------------------------

check_hackbench() { # impl mode
	out=$(WEFT_WORKERS=2 $tmo "$ex/hackbench" --impl="$1" --mode="$2" -g 2 -S 3 -R 4 -l 20 2>&1)
	rc=$?
	line=$(echo "$out" | grep '^bench=hackbench ')
	if [ $rc -ne 0 ] || [ -z "$line" ]; then
		fail "hackbench --impl=$1 --mode=$2: status $rc, summary '$line'"
		echo "$out"
		return
	fi
	m=$(get messages "$line") e=$(get expected "$line") r=$(get msgs_per_s "$line")
	if [ "$m" != 480 ] || [ "$e" != 480 ]; then
		fail "hackbench $1 $2: messages=$m expected=$e, want 2*3*4*20 = 480: $line"
	fi
	isnum "$r" || fail "hackbench $1 $2: msgs_per_s '$r'"
	[ "$(get mode "$line")" = "$2" ] || fail "hackbench $1 $2: mode: $line"
	if [ "$1" = weft ]; then
		isnum "$(get kicks_per_kwake "$line")" || fail "hackbench weft $2: no counters: $line"
	else
		[ "$(get kicks_per_kwake "$line")" = - ] || fail "hackbench pthread $2: counters: $line"
	fi
	echo "ok: hackbench --impl=$1 --mode=$2: messages=$m msgs_per_s=$r"
}

for mode in pipe socket chan; do
	check_hackbench weft $mode
done
check_hackbench pthread pipe
check_hackbench pthread socket

# --- failure paths ------------------------------------------------------

"$ex/hackbench" --impl=pthread --mode=chan -g 1 >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "hackbench pthread chan: status $rc, want 2 (no pthread counterpart)"
"$ex/dispatcher" -d 3 -n 2 >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || fail "dispatcher -d 3 -n 2: status $rc, want 2 (bad arguments)"
out=$(WEFT_FEATURES=NO_NOT_A_SWITCH_X "$ex/dispatcher" -n 1 -s 0.05 2>&1)
rc=$?
if [ $rc -ne 3 ] || ! echo "$out" | grep -q 'not available in this build'; then
	fail "unknown feature: status $rc, want 3 and 'not available': $out"
fi

# --- scale.sh -----------------------------------------------------------

out=$(SCALE_WORKERS="1 2" SCALE_BENCH="hackbench-chan" SCALE_FEATURES="NO_NOT_A_SWITCH_X" \
	SCALE_BIN="$ex" $tmo sh "$scale" 2>&1)
rc=$?
[ $rc -eq 0 ] || fail "scale.sh: status $rc"
echo "$out" | grep -q 'NO_NOT_A_SWITCH_X: switch not available' ||
	fail "scale.sh: unknown variant not reported"
rows=$(echo "$out" | awk '$1 == "hackbench-chan" && $2 == "default" && $4 ~ /^[0-9]+$/ &&
	($3 == 1 || ($3 == 2 && $6 == "1.00")) && $7 ~ /^[0-9.]+$/' | wc -l)
[ "$rows" -ge 2 ] || { fail "scale.sh: table rows for workers 1 and 2 missing"; echo "$out"; }

if [ $fails -ne 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "all wake benchmark checks passed"
exit 0
