#!/bin/sh
# A stopped example server frees its port at once, so the benchmark
# scripts can start the next implementation on the same port right away.
# Bug: the weft servers' acceptors have io_uring accepts pending when
# SIGINT arrives; the kernel drops their references to the listening
# socket only in the ring's exit work, after the process is gone, and
# until then the port stayed in LISTEN: the next server on the port
# failed with "bind/listen: Address already in use" (conn_server.h
# cs_on_signal now shuts the listener down first).
# Run from the top build directory (automake's test harness does).
set -u
# A port below the kernel's ephemeral range (server_lib.sh: a port in it
# can be the local end of any connection, and round 1 would then fail to
# bind). A port that is busy before the first round is not the bug this
# test looks for: the next one is tried (pick_port).
# shellcheck source=tests/server_lib.sh
. "$(dirname "$0")/server_lib.sh" || { echo "FAIL: no $(dirname "$0")/server_lib.sh"; exit 1; }
port_start 1
pick_port
fail=0

# wait_ready PORT: until an echo round trip succeeds (at most 5 s).
wait_ready() {
	i=0
	while [ $i -lt 50 ]; do
		if ./examples/echo-client --port="$1" --conns=2 --seconds=0.2 >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# After the server's exit, nothing may listen on the port any more: a
# connect must be refused. The lingering listener instead completed the
# handshake (the kernel answers a SYN into the backlog) and then reset the
# connection ("connection closed by the server"), in 4 of 4 stops measured
# with the unfixed server. Eight rounds, each with traffic before the stop.
rounds=8
r=1
while [ $r -le $rounds ]; do
	./examples/echo-server --impl=weft --port=$port >server.$$.log 2>&1 &
	pid=$!
	if ! wait_ready $port; then
		echo "FAIL: echo-server --impl=weft round $r never answered on port $port:"
		cat server.$$.log
		kill -9 $pid 2>/dev/null
		wait $pid 2>/dev/null
		fail=1
		break
	fi
	./examples/echo-client --port=$port --conns=10 --seconds=0.3 >/dev/null 2>&1
	kill -INT $pid
	wait $pid
	out=$(./examples/echo-client --port=$port --conns=1 --seconds=0.1 2>&1)
	case "$out" in
	*refused*) ;;
	*)
		echo "FAIL: round $r: port $port still accepts after the server exited: $out"
		fail=1
		break
		;;
	esac
	r=$((r + 1))
done
[ $fail = 0 ] && echo "echo-server --impl=weft: $rounds stops, port $port free after each"
rm -f server.$$.log
exit $fail
