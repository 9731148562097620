#!/bin/bash
# examples/run-http.sh - wrk against the weft and pthread implementations of
# examples/http-server and against nginx, on loopback, at 50 and 1,000
# connections; prints requests/s and p99 latency side by side.
#
# Needs (Debian packages; this script installs nothing):
#   wrk          - the load generator           (apt-get install wrk)
#   nginx-light  - or nginx / nginx-core: the   (apt-get install nginx-light)
#                  baseline, run from a private temporary prefix as
#                  2 workers, access_log off, `return 200` of the same body
# and a built tree (make) for examples/http-server.
#
# Output: a table, the weft ratios, then one machine-readable line per
# implementation and connection count:
#   bench=http impl=IMPL param=conns=C,... value=REQS unit=req/s
#   bench=http_p99 impl=IMPL param=conns=C,... value=P99 unit=us
#
# Run from the top build directory:
#   examples/run-http.sh                  # or: /path/to/src/examples/run-http.sh
# Environment:
#   HTTP_SERVER=path   the http-server binary (default: ./examples/http-server)
#   DURATION=10        seconds per wrk measurement (after a 2 s warm-up)
#   CONNS="50 1000"    connection counts
#   THREADS=2          wrk threads
#   REPEAT=1           runs per point; the median req/s run is reported
#   IMPLS="weft pthread nginx"
#   PORT=18080         first port used (one per server start)
#   WEFT_WORKERS       passed through to the weft server (default: CPUs)
#   LOGDIR=dir         keep wrk outputs there (default: a temporary dir)
#
# wrk, nginx and the server under test share the machine's CPUs, as in any
# loopback benchmark; all three implementations see the same competition.
set -u

die() { echo "run-http.sh: $*" >&2; exit 1; }

missing=""
command -v wrk >/dev/null 2>&1 || missing="$missing wrk"
NGINX=$(command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; })
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

# 1,000 connections need ~2,000 descriptors on the client and the server.
ulimit -n 16384 2>/dev/null || ulimit -n 4096 2>/dev/null
[ "$(ulimit -n)" -ge 2200 ] || echo "warning: ulimit -n is $(ulimit -n); 1,000 connections may fail" >&2

wait_port() {
	for _ in $(seq 1 100); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
			return 0
		fi
		sleep 0.05
	done
	return 1
}

start_server() {   # impl port
	case $1 in
	weft|pthread)
		"$HTTP_SERVER" --impl="$1" --port="$2" 2>"$LOGDIR/server-$1-$2.log" &
		SERVER_PID=$!
		;;
	nginx)
		mkdir -p "$TMP/nginx/logs"
		cat >"$TMP/nginx/nginx.conf" <<EOF
worker_processes 2;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/logs/error.log error;
events { worker_connections 8192; }
http {
	access_log off;
	default_type text/plain;
	keepalive_requests 100000000;
	keepalive_timeout 120s;
	client_body_temp_path $TMP/nginx/body;
	proxy_temp_path $TMP/nginx/proxy;
	fastcgi_temp_path $TMP/nginx/fastcgi;
	uwsgi_temp_path $TMP/nginx/uwsgi;
	scgi_temp_path $TMP/nginx/scgi;
	server {
		listen 127.0.0.1:$2 backlog=4096;
		location / { return 200 "Hello, World!"; }
	}
}
EOF
		"$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off;' \
			2>"$LOGDIR/server-nginx-$2.log" &
		SERVER_PID=$!
		;;
	esac
	wait_port "$2" || die "$1 server did not start on port $2 (see $LOGDIR)"
}

stop_server() {
	kill "$SERVER_PID" 2>/dev/null
	wait "$SERVER_PID" 2>/dev/null
	SERVER_PID=""
}

# p99 from wrk --latency ("99%   1.23ms") in microseconds
p99_us() {
	awk '$1 == "99%" {
		v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
		if (u == "us") m = 1; else if (u == "ms") m = 1000; else if (u == "s") m = 1000000; else m = 1;
		printf "%.0f", v * m }' "$1"
}
rps() { awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$1"; }

declare -A RPS P99
port=$PORT
for c in $CONNS; do
	for impl in $IMPLS; do
		runs=""
		for r in $(seq 1 "$REPEAT"); do
			port=$((port + 1))
			start_server "$impl" "$port"
			wrk -t"$THREADS" -c"$c" -d2s "http://127.0.0.1:$port/" >/dev/null 2>&1
			log="$LOGDIR/wrk-$impl-c$c-r$r.txt"
			wrk -t"$THREADS" -c"$c" -d"${DURATION}s" --latency "http://127.0.0.1:$port/" >"$log" 2>&1
			stop_server
			runs="$runs$(rps "$log") $(p99_us "$log") $log"$'\n'
			echo "  $impl c=$c run $r: $(rps "$log") req/s, p99 $(p99_us "$log") us" >&2
		done
		# median run by req/s
		med=$(printf '%s' "$runs" | sort -n | awk -v n="$REPEAT" 'NR == int((n + 1) / 2)')
		RPS[$impl,$c]=$(echo "$med" | awk '{print $1}')
		P99[$impl,$c]=$(echo "$med" | awk '{print $2}')
	done
done

echo
echo "wrk -t$THREADS -d${DURATION}s on 127.0.0.1, $(nproc) CPUs, kernel $(uname -r), median of $REPEAT"
printf '%-7s' "conns"
for impl in $IMPLS; do printf '  %12s %10s' "$impl req/s" "p99 us"; done
echo
for c in $CONNS; do
	printf '%-7s' "$c"
	for impl in $IMPLS; do printf '  %12s %10s' "${RPS[$impl,$c]:-?}" "${P99[$impl,$c]:-?}"; done
	echo
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
		[ -n "${RPS[$impl,$c]:-}" ] && echo "bench=http impl=$impl param=$p value=${RPS[$impl,$c]} unit=req/s"
		[ -n "${P99[$impl,$c]:-}" ] && echo "bench=http_p99 impl=$impl param=$p value=${P99[$impl,$c]} unit=us"
	done
done
[ "$LOGDIR" = "$TMP/logs" ] || echo "wrk outputs in $LOGDIR"
