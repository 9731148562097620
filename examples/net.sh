# shellcheck shell=bash
# examples/net.sh - sourced (bash) by run-http.sh, run-echo.sh and
# bench-report.sh: what a loopback benchmark with many connections needs.
#
#   raise_nofile CONNS...
#       raises the soft descriptor limit for the largest of CONNS (C
#       connections need about C + 100 descriptors in the server and as
#       many in the client; at least 4096) as far as the hard limit allows;
#       sets NOFILE to the limit obtained, which the caller compares with
#       each count before running it, and MAXCONNS to the largest count
#   wait_port PORT
#       waits up to 5 s until something accepts on 127.0.0.1:PORT;
#       returns 1 if nothing did

raise_nofile() {
	local c want hard
	MAXCONNS=0
	for c in "$@"; do [ "$c" -gt "$MAXCONNS" ] && MAXCONNS=$c; done
	want=$((MAXCONNS + 200 > 4096 ? MAXCONNS + 200 : 4096))
	hard=$(ulimit -Hn)
	[ "$hard" = unlimited ] || [ "$want" -le "$hard" ] || want=$hard
	ulimit -n "$want" 2>/dev/null
	# shellcheck disable=SC2034  # read by the sourcing script
	NOFILE=$(ulimit -n)
}

wait_port() {
	local _
	for _ in $(seq 1 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
