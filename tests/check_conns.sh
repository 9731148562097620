#!/bin/bash
# examples/echo-server and examples/http-server (--impl=weft, the servers
# the benchmarks measure) at 1,000 concurrent loopback connections, and
# under connection churn, with tests/conn_load as the client:
#  (a) 1,000 connections open at once, 4 requests each, one at a time;
#  (b) churn: 50 slots at once, each connecting 10 times in a row
#      (connect, 3 requests, close; for HTTP every other connection ends
#      with "Connection: close", so the server closes first);
# every response checked byte for byte and the counts exact (conn_load's
# header comment); then SIGINT must stop each server within 2 s.
# The server side's own counts (connections accepted, requests served,
# each request answered exactly once) are checked in process, where the
# server can count them: check_io io/churn_exact_counts.
#
# Needs about 1,100 descriptors per process: raises `ulimit -n` and exits
# 77 (SKIP) if the hard limit does not allow it. Run from the top build
# directory (automake's test harness does). CONNS=N changes (a)'s count.
# Exit 0 pass, 1 fail, 77 skip.
set -u

# Backstop, as in check_http.sh: timeout(1) on the whole process group.
if [ -z "${CHECK_CONNS_INNER:-}" ]; then
	CHECK_CONNS_INNER=1 exec timeout -k 2 90 bash "$0" "$@"
fi

CONNS=${CONNS:-1000}
LOAD=./tests/conn_load
for f in "$LOAD" ./examples/echo-server ./examples/http-server; do
	[ -x "$f" ] || { echo "FAIL: $f not found (run from the top build directory)"; exit 1; }
done

need=$((CONNS + 200))
soft=$(ulimit -Sn)
if [ "$soft" != unlimited ] && [ "$soft" -lt "$need" ]; then
	ulimit -Sn "$need" 2>/dev/null || ulimit -n "$need" 2>/dev/null
fi
soft=$(ulimit -Sn)
if [ "$soft" != unlimited ] && [ "$soft" -lt "$need" ]; then
	echo "SKIP: $CONNS connections need ulimit -n $need; the limit is $soft (hard $(ulimit -Hn))"
	exit 77
fi

# shellcheck source=tests/server_lib.sh
. "$(dirname "$0")/server_lib.sh" || { echo "FAIL: no $(dirname "$0")/server_lib.sh"; exit 1; }
# Ports below the ephemeral range (server_lib.sh); a port another listener
# holds makes the server fail with "in use", and the next one is tried.
# (No pick_port scan of /proc/net/tcp first: with the other suites'
# connections in TIME_WAIT it took 0.5 s per scan on a loaded machine.)
port_start 13

server_tmp 90

# stop_server NAME: SIGINT; gone within 2 s.
stop_server() {
	kill -INT $pid
	if ! wait_gone $pid; then
		echo "FAIL: $1 still running 2 s after SIGINT"
		return 1
	fi
	wait $pid 2>/dev/null
	pid=
}

fail=0
# run_server NAME PROGRAM READY-TEXT PROTO
run_server() {
	local ok=1
	start_server "$3" "$2" --impl=weft || { fail=1; return; }
	echo "$1 --impl=weft on port $port (ulimit -n $(ulimit -Sn)):"
	"$LOAD" --port=$port --proto=$4 --conns=$CONNS --reqs=4 --seconds=30 || ok=0
	[ $ok = 1 ] && { "$LOAD" --port=$port --proto=$4 --conns=50 --rounds=10 --reqs=3 --seconds=30 || ok=0; }
	stop_server "$1" || ok=0
	if [ $ok = 0 ]; then
		fail=1
		[ -n "$pid" ] && kill -9 $pid 2>/dev/null && wait $pid 2>/dev/null
		pid=
		echo "  server log:"
		sed 's/^/    /' "$tmp/server.log"
	fi
	port=$((port + 1))
}

run_server echo-server ./examples/echo-server 'echo-server: impl=' echo
run_server http-server ./examples/http-server 'listening on' http
[ $fail = 0 ] && echo "PASS: echo-server and http-server, $CONNS connections at once and churn"
exit $fail
