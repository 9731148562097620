#!/bin/bash
# examples/bench-plot.sh - the plots of a benchmark report (gnuplot; Debian
# package gnuplot-nox), each as SVG and PNG in DIR/plots/.
#
# usage: examples/bench-plot.sh DIR     (DIR: a bench-report.sh directory)
#
#   ab-SWITCH      one per seed feature switch measured (ab.tsv): the
#                  median of each case with the switch on and off, min-max
#                  as error bars; weft's cases only (ab.tsv leaves out the
#                  baselines, which a switch cannot affect)
#   cdf-BENCH      wake-latency distribution (samples/BENCH-IMPL.txt, ns),
#                  one line per implementation, log time axis
#   scale-BENCH    throughput (and kicks per 1,000 wakes) against the
#                  number of workers: wake-scale from results.tsv and every
#                  examples/scale.sh table (scale.tsv; its throughput column
#                  carries the benchmark's unit, "throughput (tx/s)")
#   http, echo     requests (round trips) per second and p99 latency
#                  against connections, one line per implementation, one
#                  legend for both panels at the foot
# A plot whose data is missing is not drawn. Exits 1 when gnuplot is
# missing, 0 otherwise.
set -u

D=${1:?usage: bench-plot.sh REPORT_DIR}
P=$D/plots
mkdir -p "$P"
if ! command -v gnuplot >/dev/null 2>&1; then
	echo "bench-plot.sh: gnuplot not found (apt-get install gnuplot-nox); no plots" >&2
	exit 1
fi

# render NAME < script: the gnuplot script drawn as NAME.svg and NAME.png
render() {
	local s
	s=$(cat)
	{
		echo "set terminal svg size 900,560 dynamic noenhanced font 'Helvetica,13' background rgb 'white'"
		echo "set output '$P/$1.svg'"
		echo "$s"
	} | gnuplot 2> "$P/$1.err"
	{
		echo "set terminal pngcairo size 900,560 noenhanced font 'DejaVu Sans,11' background rgb 'white'"
		echo "set output '$P/$1.png'"
		echo "$s"
	} | gnuplot 2>> "$P/$1.err"
	sed -i '/^Warning: empty .* range/d' "$P/$1.err"
	if [ -s "$P/$1.err" ]; then
		echo "bench-plot.sh: $1:" >&2
		cat "$P/$1.err" >&2
	else
		rm -f "$P/$1.err"
	fi
}

COMMON="set grid ytics lc rgb '#dddddd'
set key outside top center horizontal
set border 3
set tics nomirror
set datafile separator '\t'"

# ---------------------------------------------------------------- A/B bars

ab_plots() {
	local sw unit
	[ -s "$D/ab.tsv" ] || return 0
	for sw in $(awk -F'\t' 'NR > 1 { print $1 }' "$D/ab.tsv" | sort -u); do
		# each case as performance relative to the switch on (higher is
		# better whatever the unit: a time is inverted), so that cases in
		# different units share one axis; the unit goes into the label.
		# Labels are horizontal, centred under their bars, wrapped at
		# spaces and commas into lines of at most 24 characters ("|"
		# between lines, a newline in the plot) so that none runs past
		# its neighbours or the edge.
		awk -F'\t' -v s="$sw" '
		function wrap(str, w,    n, t, i, j, out, line, m, p) {
			n = split(str, t, " "); out = ""; line = ""
			for (i = 1; i <= n; i++) {
				m = split(t[i], p, ",")
				for (j = 1; j <= m; j++) {
					x = p[j] (j < m ? "," : "")
					sep = (j == 1) ? " " : ""
					if (line != "" && length(line) + length(sep) + length(x) > w) { out = out (out != "" ? "|" : "") line; line = x }
					else line = line (line != "" ? sep : "") x
				}
			}
			return out (out != "" ? "|" : "") line
		}
		NR > 1 && $1 == s {
			inv = ($3 ~ /^(ns|us|ms|s|usecs\/op|%|kicks)$/)
			on = $4
			for (i = 4; i <= 9; i++) r[i] = inv ? on / $i : $i / on
			lab = wrap($2, 24) "|(" $3 ")"
			# inverted, min and max swap
			if (inv) printf "%s\t%g\t%g\t%g\t%g\t%g\t%g\n", lab, r[4], r[6], r[5], r[7], r[9], r[8]
			else printf "%s\t%g\t%g\t%g\t%g\t%g\t%g\n", lab, r[4], r[5], r[6], r[7], r[8], r[9]
		}' "$D/ab.tsv" > "$P/ab-$sw.dat"
		render "ab-$sw" <<EOF
$COMMON
set title "Feature switch $sw: on (default) vs off (WEFT_FEATURES=NO_$sw)\nmedian of the runs, error bars min-max; the figures are in report.md"
set ylabel "performance relative to $sw on (= 1; higher is better)"
set style data histogram
set style histogram errorbars gap 2 lw 1.5
set style fill solid 0.85 border -1
set boxwidth 0.9
set yrange [0:*]
set format y "%.2f"
set xtics scale 0 norotate center
set bmargin 7
nl(s) = strstrt(s, "|") ? s[1:strstrt(s, "|") - 1] . "\n" . nl(s[strstrt(s, "|") + 1:*]) : s
plot '$P/ab-$sw.dat' using 2:3:4:xtic(nl(strcol(1))) title "$sw on" lc rgb '#1f77b4', \
     '' using 5:6:7 title "$sw off (NO_$sw)" lc rgb '#ff7f0e'
EOF
	done
}

# ---------------------------------------------------------------- latency CDF

cdf_plots() {
	local bench f impl plot desc
	for bench in $(ls "$D/samples" 2>/dev/null | sed -n 's/^\(.*\)-[^-]*\.txt$/\1/p' | sort -u); do
		plot=""
		for f in "$D/samples/$bench"-*.txt; do
			impl=${f##*/$bench-}
			impl=${impl%.txt}
			# at most ~2,000 points per curve: every k-th sorted sample
			sort -n "$f" | awk '{ v[NR] = $1 } END { k = int(NR / 2000) + 1
				for (i = 1; i <= NR; i += k) printf "%.4f\t%.5f\n", v[i] / 1000, i / NR
				printf "%.4f\t1\n", v[NR] / 1000 }' > "$P/cdf-$bench-$impl.dat"
			plot="$plot${plot:+, }'$P/cdf-$bench-$impl.dat' using 1:2 with lines lw 2 title '$impl'"
		done
		case $bench in
		mutex_handoff) desc="mutex hand-off: unlock to the waiter's acquisition, two busy workers (sync-micro)" ;;
		sem_wake) desc="semaphore wake: post to the waiter running, two busy workers (sync-micro)" ;;
		*) desc="$bench" ;;
		esac
		render "cdf-$bench" <<EOF
$COMMON
set title "Wake latency CDF: $desc"
set xlabel "latency (microseconds, log scale)"
set ylabel "fraction of wakes at or below"
set logscale x
set yrange [0:1.02]
set key inside bottom right vertical
plot $plot
EOF
	done
}

# ---------------------------------------------------------------- scale

scale_plots() {
	local b col plot i y2
	# wake-scale: sembench -o 3 and kicks per 1,000 wakes by WEFT_WORKERS
	awk -F'\t' 'NR > 1 && $1 == "wake-scale" && $4 ~ /^W=/ {
		w = substr($4, 3); if ($2 == "sembench-o3") t[w] = $8 " " $9 " " $10; else k[w] = $8; ws[w] = 1 }
		END { for (w in ws) if (w in t) print w "\t" t[w] "\t" (w in k ? k[w] : "NaN") }' "$D/results.tsv" |
		sort -n | tr ' ' '\t' > "$P/scale-wake.dat"
	if [ -s "$P/scale-wake.dat" ]; then
		render scale-wake <<EOF
$COMMON
set title "sembench -o 3 (2048 threads, 1900 waiters) against WEFT_WORKERS\non $(nproc) CPUs: more workers than CPUs is oversubscribed"
set xlabel "workers (log scale)"
set ylabel "worker burns per second (median, min-max)"
set y2label "kicks per 1,000 wakes"
set logscale x 2
set xrange [1:128]
set yrange [0:*]
set y2range [0:*]
set y2tics
set format y "%.1s%c"
plot '$P/scale-wake.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title 'burns/s', \
     '' using 1:5 axes x1y2 with linespoints lw 2 pt 5 dt 2 title 'kicks per 1,000 wakes'
EOF
	fi
	# examples/scale.sh: one plot per benchmark, one line per column
	[ -s "$D/scale.tsv" ] || return 0
	for b in $(awk -F'\t' 'NR > 1 { print $1 }' "$D/scale.tsv" | sort -u); do
		plot=""
		i=0
		y1cols=""
		y2cols=""
		while IFS= read -r col; do
			i=$((i + 1))
			awk -F'\t' -v b="$b" -v c="$col" 'NR > 1 && $1 == b && $3 == c { print $2 "\t" $4 }' \
				"$D/scale.tsv" | sort -n > "$P/scale-$b-$i.dat"
			y2=
			# the throughput on the left axis, the counters per 1,000
			# wakes on the right (on one axis with a throughput of
			# 10^5 they were flat lines at 0); x2w, the throughput
			# over its 2-worker value, is left out (the left curve
			# shows it)
			case $col in
			x2w) continue ;;
			*/1kw) y2="axes x1y2 "; y2cols="$y2cols${y2cols:+, }$col" ;;
			*) y1cols="$y1cols${y1cols:+, }$col" ;;
			esac
			plot="$plot${plot:+, }'$P/scale-$b-$i.dat' using 1:2 ${y2}with linespoints lw 2 pt 7 title '$col${y2:+ (right axis)}'"
		done < <(awk -F'\t' -v b="$b" 'NR > 1 && $1 == b && !s[$3]++ { print $3 }' "$D/scale.tsv")
		render "scale-$b" <<EOF
$COMMON
set title "examples/scale.sh: $b against the number of workers ($(nproc) CPUs)"
set xlabel "workers (log scale)"
set ylabel "$y1cols"
$([ -n "$y2cols" ] && printf 'set y2label "per 1,000 wakes (the /1kw lines)"\nset y2tics\nset y2range [0:*]')
set logscale x 2
set yrange [0:*]
set format y "%.1s%c"
plot $plot
EOF
	done
}

# ---------------------------------------------------------------- by connections

# conn_plot NAME SUITE BENCH P99BENCH "TITLE" "UNIT": throughput and p99 (us
# in results.tsv, drawn in ms) against conns=N, a line per impl.
conn_plot() {
	local name=$1 suite=$2 bench=$3 p99=$4 title=$5 unit=$6 impl plot1="" plot2=""
	for impl in $(awk -F'\t' -v s="$suite" -v b="$bench" 'NR > 1 && $1 == s && $2 == b && !u[$3]++ { print $3 }' "$D/results.tsv"); do
		awk -F'\t' -v s="$suite" -v b="$bench" -v p="$p99" -v i="$impl" '
			NR > 1 && $1 == s && $3 == i && match($5, /conns=[0-9]+/) {
				c = substr($5, RSTART + 6, RLENGTH - 6)
				if ($2 == b) t[c] = $8 "\t" $9 "\t" $10; else if ($2 == p) l[c] = $8 / 1000; cs[c] = 1 }
			END { for (c in cs) if (c in t) print c "\t" t[c] "\t" (c in l ? l[c] : "NaN") }' \
			"$D/results.tsv" | sort -n > "$P/$name-$impl.dat"
		[ -s "$P/$name-$impl.dat" ] || continue
		plot1="$plot1${plot1:+, }'$P/$name-$impl.dat' using 1:2:3:4 with yerrorlines lw 2 pt 7 title '$impl'"
		plot2="$plot2${plot2:+, }'$P/$name-$impl.dat' using 1:5 with linespoints lw 2 pt 7 title '$impl'"
	done
	[ -n "$plot1" ] || return 0
	render "$name" <<EOF
$COMMON
set multiplot layout 1,2 title "$title"
# one legend for both panels, centred at the foot of the image, below
# the axis titles (each panel's own legend under its axis title crowded it)
set key at screen 0.5, screen 0.02 center bottom horizontal samplen 2
set bmargin 5
set logscale x
set autoscale xfix
set offsets graph 0.06, graph 0.06, 0, 0
set xlabel "connections (log scale)"
set ylabel "$unit (median, min-max)"
set yrange [0:*]
set format y "%.1s%c"
plot $plot1
set ylabel "p99 latency (ms)"
set format y "%g"
unset key
plot $plot2
unset multiplot
EOF
}

ab_plots
cdf_plots
scale_plots
conn_plot http http http http_p99 "HTTP hello on loopback (wrk -t2): requests/s and p99 against connections" "requests per second"
conn_plot echo echo echo echo_p99 "Echo ping-pong (64 B, echo-client): round trips/s and p99 against connections" "round trips per second"
exit 0
