#!/bin/bash
# examples/run-http.sh - wrk against the weft and pthread implementations of
# examples/http-server and against nginx, on loopback, at 50, 1,000 and (on
# request) 10,000 connections; prints requests/s, p50/p99/p99.9 latency and
# the server's memory side by side.
#
# Needs (Debian packages; this script installs nothing):
#   wrk          - the load generator           (apt-get install wrk)
#   nginx-light  - or nginx / nginx-core: the   (apt-get install nginx-light)
#                  baseline, run from a private temporary prefix as
#                  2 workers, access_log off, `return 200` of the same body
# and a built tree (make) for examples/http-server.
#
# Output: a table, the weft ratios, then one machine-readable line per
# implementation, connection count and figure:
#   bench=http impl=IMPL param=conns=C,... value=REQS unit=req/s
#   bench=http_p50 / http_p99 / http_p999 ... value=US unit=us
#   bench=http_rss impl=IMPL param=conns=C,... value=KIB unit=KiB
#   bench=http_rss_conn ... value=BYTES unit=B   (memory per connection)
#
# Memory: the proportional set size (Pss, /proc/PID/smaps_rollup) of the
# server's processes summed (nginx: master and workers; Pss charges shared
# pages once overall, so several processes are not counted twice), read
# once before the load (idle, listening) and once half way through the
# measured run with every connection open. RSS is that loaded figure;
# per connection is (loaded - idle) / C.
#
# Run from the top build directory:
#   examples/run-http.sh                  # or: /path/to/src/examples/run-http.sh
#   CONNS="50 1000 10000" REPEAT=5 examples/run-http.sh
# Environment:
#   HTTP_SERVER=path   the http-server binary (default: ./examples/http-server)
#   DURATION=10        seconds per wrk measurement (after a 2 s warm-up)
#   CONNS="50 1000"    connection counts (10000 needs ~10,100 descriptors in
#                      the server and in wrk: the script raises `ulimit -n`
#                      up to the hard limit and skips a count it cannot open)
#   THREADS=2          wrk threads
#   REPEAT=1           runs per point; the implementations alternate within
#                      each repetition (A B C A B C ...), and the median
#                      req/s run of each is reported
#   IMPLS="weft pthread nginx"
#   PORT=18080         first port used (one per server start)
#   WEFT_WORKERS       passed through to the weft server (default: CPUs)
#   SERVER_ARGS=".."   extra arguments for examples/http-server (weft, pthread)
#   LOGDIR=dir         keep wrk outputs there (default: a temporary dir)
#
# wrk, nginx and the server under test share the machine's CPUs, as in any
# loopback benchmark; all three implementations see the same competition.
set -u

die() { echo "run-http.sh: $*" >&2; exit 1; }

missing=""
command -v wrk >/dev/null 2>&1 || missing="$missing wrk"
# nginx_find, nginx_conf, nginx_start: examples/nginx.sh
. "$(dirname "$0")/nginx.sh" || die "no $(dirname "$0")/nginx.sh"
NGINX=$(nginx_find)
[ -n "$NGINX" ] || missing="$missing nginx-light"
if [ -n "$missing" ]; then
	echo "run-http.sh: missing:$missing" >&2
	echo "  install with: apt-get install -y$missing   (Debian package names)" >&2
	echo "  wrk generates the load; nginx (nginx-light, nginx-core or nginx) is the baseline." >&2
	exit 77
fi

HTTP_SERVER=${HTTP_SERVER:-./examples/http-server}
[ -x "$HTTP_SERVER" ] || HTTP_SERVER="$(dirname "$0")/http-server"
[ -x "$HTTP_SERVER" ] || die "http-server not found: build first (make examples/http-server) or set HTTP_SERVER"

DURATION=${DURATION:-10}
CONNS=${CONNS:-"50 1000"}
THREADS=${THREADS:-2}
REPEAT=${REPEAT:-1}
IMPLS=${IMPLS:-"weft pthread nginx"}
PORT=${PORT:-18080}
TMP=$(mktemp -d /tmp/weft-run-http.XXXXXX) || die "mktemp failed"
LOGDIR=${LOGDIR:-$TMP/logs}
mkdir -p "$LOGDIR"
SERVER_PID=""

cleanup() {
	if [ -n "$SERVER_PID" ]; then
		kill "$SERVER_PID" 2>/dev/null
		wait "$SERVER_PID" 2>/dev/null
	fi
	rm -rf "$TMP/nginx"
	[ "$LOGDIR" = "$TMP/logs" ] && rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# C connections need ~C + 100 descriptors in the server and in wrk: raise
# the soft limit as far as the largest count asks and the hard limit allows
# (examples/net.sh, which also gives wait_port).
# shellcheck source=examples/net.sh
. "$(dirname "$0")/net.sh" || die "no $(dirname "$0")/net.sh"
# shellcheck disable=SC2086
raise_nofile $CONNS
# nginx: each of its 2 workers may get most connections (no accept mutex).
# It allocates and initialises its connection table (~0.5 KiB a slot) at
# start, so that memory is in its idle figure, not in the per-connection one.
NGINX_CONNS=$((MAXCONNS + 100 > 1024 ? MAXCONNS + 100 : 1024))

# Latency percentiles from wrk's own histogram (us): --latency prints only
# 50/75/90/99%, so a done() hook prints 50, 99 and 99.9.
cat >"$TMP/pct.lua" <<'EOF_LUA'
done = function(summary, latency, requests)
	for _, p in ipairs({ 50, 99, 99.9 }) do
		io.write(string.format("pct %g %d\n", p, latency:percentile(p)))
	end
end
EOF_LUA

start_server() {   # impl port
	case $1 in
	weft|pthread)
		# shellcheck disable=SC2086
		"$HTTP_SERVER" --impl="$1" --port="$2" ${SERVER_ARGS:-} 2>"$LOGDIR/server-$1-$2.log" &
		SERVER_PID=$!
		;;
	nginx)
		nginx_conf "$TMP/nginx" "$2" "$NOFILE" "$NGINX_CONNS" "" 'return 200 "Hello, World!";'
		nginx_start "$NGINX" "$TMP/nginx" "$LOGDIR/server-nginx-$2.log"
		SERVER_PID=$NGINX_PID
		;;
	esac
	wait_port "$2" || die "$1 server did not start on port $2 (see $LOGDIR)"
}

stop_server() {
	kill "$SERVER_PID" 2>/dev/null
	wait "$SERVER_PID" 2>/dev/null
	SERVER_PID=""
}

# percentile P (50, 99, 99.9) in microseconds from the lua hook's lines
pct_us() { awk -v p="$2" '$1 == "pct" && $2 == p { print $3 }' "$1"; }
rps() { awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$1"; }
# wrk's socket errors (connect, read, write, timeout), summed
errs() { awk '/Socket errors:/ { gsub(/,/, ""); print $4 + $6 + $8 + $10 }' "$1"; }

# Pss in KiB of the server: the process and its children (nginx workers)
server_pss() {
	local p sum=0 v
	for p in $(NGINX_PID=$SERVER_PID nginx_pids); do
		v=$(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null)
		sum=$((sum + ${v:-0}))
	done
	echo "$sum"
}

declare -A RPS P50 P99 P999 RSS PERCONN
declare -A RUNS
port=$PORT
for c in $CONNS; do
	if [ "$c" -gt $((NOFILE - 100)) ]; then
		echo "  skipping c=$c: ulimit -n is $NOFILE (hard limit $(ulimit -Hn))" >&2
		continue
	fi
	for r in $(seq 1 "$REPEAT"); do
		for impl in $IMPLS; do
			port=$((port + 1))
			start_server "$impl" "$port"
			sleep 0.2
			idle=$(server_pss)
			wrk -t"$THREADS" -c"$c" -d2s "http://127.0.0.1:$port/" >/dev/null 2>&1
			log="$LOGDIR/wrk-$impl-c$c-r$r.txt"
			wrk -t"$THREADS" -c"$c" -d"${DURATION}s" -s "$TMP/pct.lua" --latency \
				"http://127.0.0.1:$port/" >"$log" 2>&1 &
			wpid=$!
			sleep "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')"
			loaded=$(server_pss)
			wait "$wpid"
			stop_server
			pc=$(awk -v a="$loaded" -v b="$idle" -v c="$c" 'BEGIN { printf "%.0f", (a - b) * 1024 / c }')
			RUNS[$impl,$c]="${RUNS[$impl,$c]:-}$(rps "$log") $(pct_us "$log" 50) $(pct_us "$log" 99) $(pct_us "$log" 99.9) $loaded $pc"$'\n'
			e=$(errs "$log")
			echo "  $impl c=$c run $r: $(rps "$log") req/s, p50/p99/p99.9 $(pct_us "$log" 50)/$(pct_us "$log" 99)/$(pct_us "$log" 99.9) us, Pss $idle -> $loaded KiB ($pc B/conn)${e:+, socket errors $e}" >&2
		done
	done
	for impl in $IMPLS; do
		# median run by req/s
		med=$(printf '%s' "${RUNS[$impl,$c]}" | sort -n | awk -v n="$REPEAT" 'NR == int((n + 1) / 2)')
		read -r RPS[$impl,$c] P50[$impl,$c] P99[$impl,$c] P999[$impl,$c] RSS[$impl,$c] PERCONN[$impl,$c] <<<"$med"
	done
done

echo
echo "wrk -t$THREADS -d${DURATION}s on 127.0.0.1, $(nproc) CPUs, kernel $(uname -r), median of $REPEAT (by req/s)"
printf '%-7s %-8s %10s %9s %9s %9s %10s %9s\n' conns impl req/s p50_us p99_us p999_us pss_KiB B/conn
for c in $CONNS; do
	for impl in $IMPLS; do
		[ -n "${RPS[$impl,$c]:-}" ] || continue
		printf '%-7s %-8s %10s %9s %9s %9s %10s %9s\n' "$c" "$impl" "${RPS[$impl,$c]}" \
			"${P50[$impl,$c]}" "${P99[$impl,$c]}" "${P999[$impl,$c]}" "${RSS[$impl,$c]}" "${PERCONN[$impl,$c]}"
	done
done
case " $IMPLS " in
*" weft "*)
	echo
	for c in $CONNS; do
		line="c=$c:"
		for base in nginx pthread; do
			case " $IMPLS " in *" $base "*)
				line="$line  weft/$base req/s = $(awk -v a="${RPS[weft,$c]:-0}" -v b="${RPS[$base,$c]:-0}" \
					'BEGIN { if (b > 0) printf "%.2f", a / b; else print "?" }')x" ;;
			esac
		done
		echo "$line"
	done
	;;
esac

# Machine-readable lines (examples/bench-report.sh reads them), one per
# implementation and connection count: the median run's req/s and p99.
echo
for c in $CONNS; do
	for impl in $IMPLS; do
		p="conns=$c,threads=$THREADS,duration=$DURATION,repeat=$REPEAT"
		[ -n "${RPS[$impl,$c]:-}" ] || continue
		echo "bench=http impl=$impl param=$p value=${RPS[$impl,$c]} unit=req/s"
		echo "bench=http_p50 impl=$impl param=$p value=${P50[$impl,$c]} unit=us"
		echo "bench=http_p99 impl=$impl param=$p value=${P99[$impl,$c]} unit=us"
		echo "bench=http_p999 impl=$impl param=$p value=${P999[$impl,$c]} unit=us"
		echo "bench=http_rss impl=$impl param=$p value=${RSS[$impl,$c]} unit=KiB"
		echo "bench=http_rss_conn impl=$impl param=$p value=${PERCONN[$impl,$c]} unit=B"
	done
done
[ "$LOGDIR" = "$TMP/logs" ] || echo "wrk outputs in $LOGDIR"
