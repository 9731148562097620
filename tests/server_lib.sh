# tests/server_lib.sh - sourced by the example-server tests
# (check_http.sh, check_conns.sh, check_server_restart.sh): ports and
# server processes. POSIX sh, so that the sh and the bash scripts share it.
#
#   port_start MUL
#       sets port to a port below the kernel's ephemeral range
#       (net.ipv4.ip_local_port_range, 32768-60999 by default), spread by
#       the script's pid times MUL so that scripts running at once start
#       apart. A port in the ephemeral range can be the local end of any
#       connection on the machine (the suites run in parallel, with 1,000
#       loopback connections in check_io), and a listener cannot bind it
#       then.
#   port_busy PORT
#       true if some TCP socket (IPv4 or IPv6, any state) has PORT as its
#       local port (the kernel's tables: no tool needed)
#   pick_port
#       from $port on, the first port that is not busy (at most 50 tries)
#   alive PID
#       true if PID exists and is not a zombie
#   server_tmp SECONDS
#       tmp = a fresh directory and pid empty; at exit the server ($pid)
#       is killed and tmp removed; a TERM (the script's timeout(1)
#       backstop of SECONDS) fails the test with that message
#   start_server READY-TEXT PROGRAM ARGS...
#       PROGRAM ARGS --port=$port in the background, output in
#       $tmp/server.log, until the log shows READY-TEXT (at most 5 s); a
#       server that fails with "in use" is started again on the next port
#       (5 tries). Sets pid. Returns 1, with the log printed, if the server
#       exited or was not ready in time (then it is killed and pid empty).

port_start() {
	_lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	_span=$((_lo - 10000))
	[ $_span -ge 1000 ] || _span=1000
	port=$((10000 + ($$ * $1) % _span))
}

port_busy() {
	_hex=$(printf '%04X' "$1")
	_files=
	for _f in /proc/net/tcp /proc/net/tcp6; do
		[ -r $_f ] && _files="$_files $_f"
	done
	[ -n "$_files" ] || return 1
	awk -v p="$_hex" 'FNR > 1 { n = split($2, a, ":"); if (a[n] == p) f = 1 }
		END { exit !f }' $_files
}

pick_port() {
	_k=0
	while [ $_k -lt 50 ] && port_busy $port; do
		port=$((port + 1))
		_k=$((_k + 1))
	done
}

alive() {
	read -r _s 2>/dev/null <"/proc/$1/stat" || return 1
	_s=${_s##*) }
	[ "${_s%% *}" != Z ]
}

# wait_gone PID: waits up to 2 s for PID to exit (or be a zombie);
# status 1 if it is still alive then.
wait_gone() {
	_i=0
	while [ $_i -lt 40 ]; do
		alive "$1" || return 0
		sleep 0.05
		_i=$((_i + 1))
	done
	! alive "$1"
}

server_tmp() {
	tmp=$(mktemp -d) || exit 1
	pid=
	_limit=$1
	trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
	trap 'echo "FAIL: the test ran out of time ($_limit s)"; exit 1' TERM
}

start_server() {
	_ready=$1
	shift
	_try=1
	while [ $_try -le 5 ]; do
		: >"$tmp/server.log"
		"$@" --port=$port >"$tmp/server.log" 2>&1 &
		pid=$!
		_i=0
		while [ $_i -lt 100 ]; do
			grep -q "$_ready" "$tmp/server.log" && return 0
			alive $pid || break
			sleep 0.05
			_i=$((_i + 1))
		done
		if alive $pid; then
			echo "FAIL: $* not ready after 5 s on port $port:"
			cat "$tmp/server.log"
			kill -9 $pid 2>/dev/null
			wait $pid 2>/dev/null
			pid=
			return 1
		fi
		wait $pid 2>/dev/null
		pid=
		grep -q 'in use' "$tmp/server.log" || break
		port=$((port + 1))
		_try=$((_try + 1))
	done
	echo "FAIL: $* did not start:"
	cat "$tmp/server.log"
	return 1
}
