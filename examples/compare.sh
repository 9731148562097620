#!/bin/bash
# examples/compare.sh - compare two benchmark reports (bench-results/...
# directories written by `make bench`, i.e. examples/bench-report.sh).
#
# usage: examples/compare.sh A B      (A: before / baseline, B: after)
#
# For every metric measured in both (same suite, benchmark, impl, switch
# variant, parameters and unit, from each directory's results.tsv) it
# prints the two medians, B/A, and a verdict:
#   better / worse   B is better / worse than A, and the runs' min-max
#                    ranges do not overlap
#   noise            the ranges overlap: the difference is within what the
#                    runs of one sitting already spread over
#   1 run            a side has a single run: no range to judge. make bench
#                    runs each configuration BENCH_REPS times (default 3;
#                    1 with BENCH_QUICK=1); for a noise verdict, make both
#                    reports with BENCH_REPS=2 or more, e.g.
#                    `make bench BENCH_QUICK=1 BENCH_REPS=3`
# "better" follows the unit: higher is better for rates (ops/s, req/s,
# burns/s ...), lower for times (ns, us, ms, usecs/op, %) and kicks.
# Then the metrics found on one side only, and a summary line:
#   compare: N metrics, N better, N worse, N noise, N single-run
# followed, when some metric has a single run on a side, by a line that
# says how to get a noise verdict for it.
# Environment: COMPARE_ALL=0 prints only the better and worse rows.
# Exits 0, or 2 on bad arguments.
set -u

if [ $# -ne 2 ] || [ ! -f "$1/results.tsv" ] || [ ! -f "$2/results.tsv" ]; then
	echo "usage: compare.sh A B   (two report directories holding results.tsv)" >&2
	exit 2
fi

awk -F'\t' -v all="${COMPARE_ALL:-1}" -v na="$1" -v nb="$2" '
function lower(u) { return u ~ /^(ns|us|ms|s|usecs\/op|%|kicks)$/ }
function fmt(x) { return (x >= 1e6) ? sprintf("%.3gM", x / 1e6) : (x >= 1e4) ? sprintf("%.3gk", x / 1e3) : sprintf("%.4g", x) }
FNR == 1 { f++; next }
{
	k = $1 "\t" $2 "\t" $3 "\t" $4 "\t" $5 "\t" $6
	if (f == 1) { a[k] = $8 "\t" $9 "\t" $10 "\t" $7; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
	else { b[k] = $8 "\t" $9 "\t" $10 "\t" $7; if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
}
END {
	printf "A: %s\nB: %s\n\n", na, nb
	printf "%-11s %-26s %-12s %-14s %-30s %10s %10s %8s  %s\n", "suite", "bench", "impl", "variant", "param", "A", "B", "B/A", "verdict"
	for (i = 1; i <= n; i++) {
		k = order[i]
		if (!(k in a) || !(k in b)) { only[++no] = k; continue }
		split(k, key, "\t"); split(a[k], x, "\t"); split(b[k], y, "\t")
		ratio = (x[1] != 0) ? y[1] / x[1] : 0
		if (x[4] < 2 || y[4] < 2) { v = "1 run"; single++ }
		else if (y[2] <= x[3] && x[2] <= y[3]) { v = "noise"; noise++ }
		else if ((y[1] > x[1]) != lower(key[6])) { v = "better"; better++ }
		else { v = "worse"; worse++ }
		total++
		if (all == "0" && v != "better" && v != "worse") continue
		printf "%-11s %-26s %-12s %-14s %-30s %10s %10s %7.3fx  %s (%s)\n", key[1], key[2], key[3], key[4], key[5],
			fmt(x[1]), fmt(y[1]), ratio, v, key[6]
	}
	if (no) {
		printf "\nmeasured on one side only:\n"
		for (i = 1; i <= no; i++) {
			k = only[i]; split(k, key, "\t")
			printf "  %s: %s %s %s %s %s\n", (k in a) ? "A" : "B", key[1], key[2], key[3], key[4], key[5]
		}
	}
	printf "\ncompare: %d metrics, %d better, %d worse, %d noise, %d single-run\n", total, better, worse, noise, single
	if (single)
		printf "note: %d metric%s had a single run on a side, so no noise verdict: make both reports with BENCH_REPS=2 or more (make bench runs 3 by default, 1 with BENCH_QUICK=1; e.g. make bench BENCH_QUICK=1 BENCH_REPS=3)\n", single, single == 1 ? "" : "s"
}' "$1/results.tsv" "$2/results.tsv"
