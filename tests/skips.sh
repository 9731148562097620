#!/bin/sh
# tests/skips.sh STAGE [TESTS] - after a `make check` run (of TESTS, a
# space-separated list as make's TESTS; default every suite with a log),
# count each suite's skips
# and fail if a suite skipped more than tests/skips.expected allows for
# STAGE (a CI stage name). A stage listed there (a "STAGE - 0" line for a
# stage with no skips) lets each suite skip as many tests as its line
# says, none if it has no line; a stage not listed yet is only reported.
# A Check suite's count is the "skipped: N of M tests" line wt_run_suite
# prints at the end of its log; a script test that exits 77 counts 1.
# SKIPS_RECORD=FILE appends the observed counts as "STAGE SUITE N" lines
# instead of checking (how tests/skips.expected is made).
# Run from the build directory; the source directory is this script's.
set -u
stage=${1:?usage: tests/skips.sh STAGE [TESTS]}
list=${2:-}
[ -n "$list" ] || list=$(ls tests/*.trs 2>/dev/null | sed 's/\.trs$//')
expected="$(dirname "$0")/skips.expected"
status=0
for t in $list; do
	trs=$t.trs
	log=$t.log
	suite=$(basename "$t")
	[ -e "$trs" ] || continue
	n=$(sed -n 's/^skipped: \([0-9][0-9]*\) of [0-9]* tests$/\1/p' "$log" 2>/dev/null | tail -n 1)
	if [ -z "$n" ]; then
		n=0
		grep -q '^:test-result: SKIP' "$trs" && n=1
	fi
	[ "$n" -gt 0 ] || continue
	if [ -n "${SKIPS_RECORD:-}" ]; then
		echo "$stage $suite $n" >>"$SKIPS_RECORD"
		continue
	fi
	if ! awk -v st="$stage" '$1 == st { f = 1 } END { exit !f }' "$expected" 2>/dev/null; then
		echo "skips [$stage]: $suite $n (no baseline for this stage yet: not checked)"
		continue
	fi
	max=$(awk -v st="$stage" -v su="$suite" '$1 == st && $2 == su { print $3 }' "$expected" 2>/dev/null)
	max=${max:-0}
	if [ "$n" -gt "$max" ]; then
		echo "skips [$stage]: $suite skipped $n tests, more than the $max of tests/skips.expected:"
		grep '^SKIP' "$log" | sed 's/^/    /'
		status=1
	else
		echo "skips [$stage]: $suite $n (at most $max)"
	fi
done
exit $status
