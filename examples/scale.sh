#!/bin/sh
# examples/scale.sh - the wake-path benchmarks over worker counts, in one
# table: how a wake costs as the runtime grows (oversubscribed where the
# machine has fewer CPUs than workers).
#
#   examples/scale.sh                       # all benchmarks, default list
#   SCALE_WORKERS="2 16" REPEAT=5 examples/scale.sh
#   SCALE_FEATURES="NO_WAKE_WIDE" examples/scale.sh   # A/B: default + variant
#
# Benchmarks (SCALE_BENCH="name ..." picks some; default all):
#   sembench      examples/sembench -t 2048 -w 1900 -r 2 -o 3 (weft semaphores,
#                 wake queues): worker burns/s
#   sembench-u    the same with -u (unpinned), if `sembench -h` lists -u
#   dispatcher    examples/dispatcher -s 1 (1 dispatcher, 16 servers, 5 us
#                 work): transactions/s
#   hackbench-chan, hackbench-pipe   examples/hackbench --mode=chan|pipe
#                 (10 groups of 20 + 20, 100 loops): messages/s
#   fib           examples/weft-micro --bench=fib: spawns/s (1e9 / ns per spawn)
#   pingpong      examples/weft-micro --bench=pingpong_cross: round trips/s
#                 (1e9 / ns per round trip); its two threads and two busy
#                 yielders are pinned to workers 0 and 1, so at 1 worker it is
#                 a same-worker ping-pong (not comparable with the others)
# All run with --impl=weft (or their weft mode); the pthread baselines are
# in the binaries themselves.
#
# Environment:
#   SCALE_WORKERS  worker counts (default "1 2 4 8 16 32 64", or "2 16 64"
#                  with BENCH_QUICK=1, make bench's short version); the
#                  machine's CPU count is added when it is larger than all
#                  of them
#   REPEAT         runs per point (default 1). The runs alternate (every
#                  point once, then every point again, ...) and the table
#                  shows the median of each column
#   SCALE_FEATURES feature variants to run besides the default, each a
#                  WEFT_FEATURES value (space-separated, e.g.
#                  "NO_WAKE_WIDE NO_WAKE_AFFINE,NO_WAKE_WIDE"). A variant
#                  naming a switch this build does not know is reported as
#                  not available and skipped. Nothing is passed by default
#   SCALE_TIMEOUT  seconds per run before it is abandoned (default 120)
#   SCALE_BIN      directory of the binaries (default: this script's)
#   SCALE_LOG      keep each run's output in this directory
#
# Columns: throughput (median), ratio to the 2-worker median of the same
# benchmark and variant ("-" without a 2-worker point), and from the
# WEFT_STATS=1 table each run prints at exit (whole process, found by the
# counters' names): kicks, remote wakes, steals and chained kicks (if the
# build counts them, else "-"), each per 1,000 wakes (wakes = local +
# remote). Runs that fail or time out show "-".
#
# Needs: sh, awk, sort; timeout(1) if present. Exit status: 0, or 1 if no
# benchmark binary was found.

set -u

bindir=${SCALE_BIN:-$(cd "$(dirname "$0")" && pwd)}
if [ "${BENCH_QUICK:-0}" != 0 ]; then
	workers=${SCALE_WORKERS:-"2 16 64"}
else
	workers=${SCALE_WORKERS:-"1 2 4 8 16 32 64"}
fi
repeat=${REPEAT:-1}
benches=${SCALE_BENCH:-"sembench sembench-u dispatcher hackbench-chan hackbench-pipe fib pingpong"}
tmo=${SCALE_TIMEOUT:-120}

case $repeat in
'' | *[!0-9]* | 0) echo "scale.sh: REPEAT must be a positive integer" >&2; exit 2 ;;
esac

ncpu=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
max=0
has_ncpu=no
for w in $workers; do
	case $w in
	'' | *[!0-9]* | 0) echo "scale.sh: bad worker count '$w'" >&2; exit 2 ;;
	esac
	[ "$w" -gt "$max" ] && max=$w
	[ "$w" -eq "$ncpu" ] && has_ncpu=yes
done
if [ "$ncpu" -gt "$max" ] && [ $has_ncpu = no ]; then
	workers="$workers $ncpu"
fi

run_timeout=
if command -v timeout >/dev/null 2>&1; then
	run_timeout="timeout $tmo"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/scale.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
results=$tmp/results

# --- what is there ----------------------------------------------------

have() { [ -x "$bindir/$1" ]; }

selected=
for b in $benches; do
	case $b in
	sembench) bin=sembench ;;
	sembench-u) bin=sembench ;;
	dispatcher) bin=dispatcher ;;
	hackbench-chan | hackbench-pipe) bin=hackbench ;;
	fib | pingpong) bin=weft-micro ;;
	*) echo "scale.sh: unknown benchmark '$b' (skipped)" >&2; continue ;;
	esac
	if ! have $bin; then
		echo "scale.sh: skipping $b: $bindir/$bin not built" >&2
		continue
	fi
	if [ "$b" = sembench-u ] && ! "$bindir/sembench" -h 2>&1 | grep -q -- '^ *-u'; then
		echo "scale.sh: skipping sembench-u: this sembench has no -u option" >&2
		continue
	fi
	selected="$selected $b"
done
if [ -z "$selected" ]; then
	echo "scale.sh: no benchmark binary found in $bindir (run make first)" >&2
	exit 1
fi

# A variant whose switches this build lacks: weft_init refuses it. Probe
# with the first weft binary at hand.
probe() {
	if have dispatcher; then
		WEFT_WORKERS=1 WEFT_FEATURES=$1 "$bindir/dispatcher" -n 1 -s 0.01 >/dev/null 2>&1
	elif have hackbench; then
		WEFT_WORKERS=1 WEFT_FEATURES=$1 "$bindir/hackbench" --mode=chan -g 1 -S 1 -R 1 -l 1 \
			>/dev/null 2>&1
	else
		WEFT_WORKERS=1 WEFT_FEATURES=$1 "$bindir/weft-micro" --impl=weft --bench=none \
			>/dev/null 2>&1
	fi
}
variants=default
for v in ${SCALE_FEATURES:-}; do
	if probe "$v"; then
		variants="$variants $v"
	else
		echo "scale.sh: WEFT_FEATURES=$v: switch not available in this build (variant skipped)" >&2
	fi
done

# --- one run ----------------------------------------------------------

# Print the run's throughput and, from the WEFT_STATS table, kicks /
# remote / steals / chain per 1,000 wakes ("-" for what is missing).
extract() { # bench file
	awk -v b="$1" '
	function num(x) { return x + 0 }
	/^ *[0-9]+  [^ ]/ {
		v = $1; d = $0; sub(/^ *[0-9]+  /, "", d)
		if (d ~ /^kicks/ && !("kicks" in s)) s["kicks"] = v
		else if (d ~ /^local wakes/) s["local"] = v
		else if (d ~ /^remote wakes \(mailbox/) s["remote"] = v
		else if (d ~ /^remote wakes \(locked/) s["locked"] = v
		else if (d ~ /^threads stolen/) s["steals"] = v
		if (d ~ /chain/ && (!("chain" in s) || (!chk && d ~ /kick/))) {
			s["chain"] = v; chk = (d ~ /kick/)
		}
	}
	b ~ /^sembench/ && /exact:.*worker burns\/s/ {
		for (i = 1; i <= NF; i++) if ($i == "worker" && $(i + 1) == "burns/s,") thr = $(i - 1)
	}
	b == "dispatcher" && /^bench=dispatcher/ {
		for (i = 1; i <= NF; i++) if ($i ~ /^tps=/) { thr = $i; sub(/^tps=/, "", thr) }
	}
	b ~ /^hackbench/ && /^bench=hackbench/ {
		for (i = 1; i <= NF; i++) {
			if ($i ~ /^msgs_per_s=/) { thr = $i; sub(/^msgs_per_s=/, "", thr) }
			if ($i ~ /^messages=/) { m = $i; sub(/^messages=/, "", m) }
			if ($i ~ /^expected=/) { e = $i; sub(/^expected=/, "", e) }
		}
		if (m != e) thr = ""
	}
	b == "fib" && /^bench=fib_per_spawn impl=weft/ {
		for (i = 1; i <= NF; i++) if ($i ~ /^value=/) { x = $i; sub(/^value=/, "", x); if (num(x) > 0) thr = 1e9 / x }
	}
	b == "pingpong" && /^bench=pingpong_cross impl=weft/ {
		for (i = 1; i <= NF; i++) if ($i ~ /^value=/) { x = $i; sub(/^value=/, "", x); if (num(x) > 0) thr = 1e9 / x }
	}
	function per(k) {
		if (!(k in s) || wakes <= 0) return "-"
		return sprintf("%.2f", 1000 * s[k] / wakes)
	}
	END {
		wakes = num(s["local"]) + num(s["remote"]) + num(s["locked"])
		if (thr == "") thr = "-"
		rem = ("remote" in s) ? num(s["remote"]) + num(s["locked"]) : ""
		if (rem != "") s["rem"] = rem
		printf "%s %s %s %s %s\n", thr, per("kicks"), per("rem"), per("steals"), per("chain")
	}' "$2"
}

unit_of() {
	case $1 in
	sembench*) echo "burns/s" ;;
	dispatcher) echo "tx/s" ;;
	hackbench*) echo "msgs/s" ;;
	fib) echo "spawns/s" ;;
	pingpong) echo "rtrips/s" ;;
	esac
}

run_one() { # bench workers variant rep
	b=$1 w=$2 v=$3 r=$4
	out=$tmp/run.out
	case $b in
	sembench) set -- "$bindir/sembench" -t 2048 -w 1900 -r 2 -o 3 ;;
	sembench-u) set -- "$bindir/sembench" -t 2048 -w 1900 -r 2 -o 3 -u ;;
	dispatcher) set -- "$bindir/dispatcher" --impl=weft -s 1 ;;
	hackbench-chan) set -- "$bindir/hackbench" --impl=weft --mode=chan ;;
	hackbench-pipe) set -- "$bindir/hackbench" --impl=weft --mode=pipe ;;
	fib) set -- "$bindir/weft-micro" --impl=weft --bench=fib --runs=1 ;;
	pingpong) set -- "$bindir/weft-micro" --impl=weft --bench=pingpong_cross --runs=1 ;;
	esac
	if [ "$v" = default ]; then
		env WEFT_WORKERS="$w" WEFT_STATS=1 $run_timeout "$@" >"$out" 2>&1
	else
		env WEFT_WORKERS="$w" WEFT_STATS=1 WEFT_FEATURES="$v" $run_timeout "$@" >"$out" 2>&1
	fi
	rc=$?
	if [ -n "${SCALE_LOG:-}" ]; then
		mkdir -p "$SCALE_LOG" && cp "$out" "$SCALE_LOG/$b.$v.w$w.r$r.log"
	fi
	if [ $rc -ne 0 ]; then
		echo "scale.sh: $b workers=$w ($v) run $r: exit status $rc" >&2
		echo "$b $v $w - - - - -" >>"$results"
		return
	fi
	line=$(extract "$b" "$out")
	echo "$b $v $w $line" >>"$results"
	echo "scale.sh: $b workers=$w ($v) run $r: ${line%% *} $(unit_of "$b")" >&2
}

: >"$results"
r=1
while [ $r -le "$repeat" ]; do
	for w in $workers; do
		for b in $selected; do
			for v in $variants; do
				run_one "$b" "$w" "$v" "$r"
			done
		done
	done
	r=$((r + 1))
done

# --- the table --------------------------------------------------------

echo
echo "weft wake-path scale table: $(uname -n), $ncpu CPUs, REPEAT=$repeat (medians), workers: $workers"
order=0
for b in $selected; do
	order=$((order + 1))
	echo "$b $order $(unit_of "$b")"
done >"$tmp/order"
awk -v worders="$workers" -v vorders="$variants" '
function median(key, col,    n, i, j, t, a, c) {
	n = 0
	for (i = 1; i <= cnt[key]; i++) {
		t = val[key, i, col]
		if (t != "-") a[++n] = t + 0
	}
	if (n == 0) return "-"
	for (i = 2; i <= n; i++) {
		t = a[i]
		for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]
		a[j + 1] = t
	}
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
FNR == NR { ord[$1] = $2; unit[$1] = $3; names[$2] = $1; nb = $2; next }
{
	key = $1 SUBSEP $2 SUBSEP $3
	c = ++cnt[key]
	for (k = 4; k <= 8; k++) val[key, c, k] = $k
}
END {
	nw = split(worders, W, " "); nv = split(vorders, V, " ")
	printf "%-15s %-14s %7s %14s %-9s %7s %10s %10s %10s %10s\n", "benchmark", "features",
		"workers", "throughput", "unit", "x2w", "kicks/1kw", "remote/1kw", "steals/1kw", "chain/1kw"
	for (bi = 1; bi <= nb; bi++) {
		b = names[bi]
		for (vi = 1; vi <= nv; vi++) {
			v = V[vi]
			base = median(b SUBSEP v SUBSEP 2, 4)
			for (wi = 1; wi <= nw; wi++) {
				w = W[wi]; key = b SUBSEP v SUBSEP w
				if (!(key in cnt)) continue
				thr = median(key, 4)
				ratio = (thr != "-" && base != "-" && base > 0) ? sprintf("%.2f", thr / base) : "-"
				ts = (thr == "-") ? "-" : sprintf("%.0f", thr)
				m5 = median(key, 5); m6 = median(key, 6); m7 = median(key, 7); m8 = median(key, 8)
				printf "%-15s %-14s %7s %14s %-9s %7s %10s %10s %10s %10s\n", b, v, w, ts,
					unit[b], ratio,
					m5 == "-" ? "-" : sprintf("%.2f", m5), m6 == "-" ? "-" : sprintf("%.2f", m6),
					m7 == "-" ? "-" : sprintf("%.2f", m7), m8 == "-" ? "-" : sprintf("%.2f", m8)
			}
		}
	}
}' "$tmp/order" "$results"
exit 0
