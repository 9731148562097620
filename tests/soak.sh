#!/bin/sh
# The soak (not in make check): cross-worker wakes over mixed primitives
# (semaphore ring, mutex counter, mutex + cond turns, channel sequence,
# park/unpark turns; tests/soak_wake.c) at WEFT_WORKERS=2 and 16, each run
# ending with exact counts (nothing lost, nothing doubled), the same in
# 20 ms rounds (every round a stop), then the park/unpark pairs of
# stress_wake with the same budget per configuration.
#
#   tests/soak.sh [SECONDS]       run from the top build directory
#
# SECONDS (or SOAK_SECONDS) is the total wall time, split evenly between
# the runs; default 14400 (4 h), which on the 2-CPU CI class makes about
# 10^9 wakes (the rate of each run is printed; scale SECONDS by the
# target). CI runs SOAK_SECONDS=120. SOAK_SEED replays a run's seed (each
# run prints seed=N). WEFT_FEATURES in the environment is passed on.
# Builds the programs first if needed (make check builds them too).
# Exit: 0 all exact, else the first failing run's status (1 a count off,
# 2 a stall: a group made no progress for 60 s, its counts are printed).
set -u
total=${1:-${SOAK_SECONDS:-14400}}
seed=${SOAK_SEED:-$(date +%s)}
make -s tests/soak_wake tests/stress_wake >/dev/null || exit 1

runs=4
per=$((total / runs))
[ "$per" -ge 1 ] || per=1
echo "soak: ${total} s in $runs runs of ${per} s (seed=$seed)"
rc=0
for w in 2 16; do
	echo "=== soak_wake WEFT_WORKERS=$w, $per s"
	WEFT_WORKERS=$w ./tests/soak_wake "$per" "$seed"
	r=$?
	if [ "$r" -ne 0 ]; then
		echo "FAIL: soak_wake WEFT_WORKERS=$w exited $r (seed=$seed)"
		[ "$rc" -ne 0 ] || rc=$r
	fi
done
# Stops: the same groups in rounds of 20 ms (SOAK_ROUNDS), each round
# ending with every group's stop protocol and the workers going idle, at
# 2 and 16 workers (half the run's time each). A stop protocol that can
# strand a thread (the ring's once read the stop flag after its last
# post) stalls here within a few hundred rounds.
half=$(awk "BEGIN { printf \"%.1f\", $per / 2 }")
rounds=$(awk "BEGIN { r = int($per / 2 / 0.02); print (r < 1 ? 1 : r) }")
for w in 2 16; do
	echo "=== soak_wake WEFT_WORKERS=$w, $half s in $rounds rounds"
	SOAK_ROUNDS=$rounds SOAK_STALL=${SOAK_STALL:-10} WEFT_WORKERS=$w ./tests/soak_wake "$half" "$seed"
	r=$?
	if [ "$r" -ne 0 ]; then
		echo "FAIL: soak_wake rounds WEFT_WORKERS=$w exited $r (seed=$seed)"
		[ "$rc" -ne 0 ] || rc=$r
	fi
done
# stress_wake: its three configurations (1 worker, N, N pinned) share
# this run's time; its tcase timeout is 9x the budget + 10 s.
echo "=== stress_wake, $per s"
sw=$(awk "BEGIN { printf \"%.1f\", $per / 3 }")
WEFT_STRESS_SECONDS=$sw WEFT_TEST_SEED=$seed ./tests/stress_wake
r=$?
if [ "$r" -ne 0 ]; then
	echo "FAIL: stress_wake exited $r (seed=$seed)"
	[ "$rc" -ne 0 ] || rc=$r
fi
[ "$rc" -eq 0 ] && echo "soak: PASS"
exit "$rc"
