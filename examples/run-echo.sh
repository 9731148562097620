#!/bin/bash
# examples/run-echo.sh - echo ping-pong: examples/echo-server (weft, epoll,
# pthread) driven by examples/echo-client on 127.0.0.1, at several
# connection counts, runs alternated between the implementations (A B C A
# B C ...), the median run of each reported.
#
# usage:
#   examples/run-echo.sh                         (from the build directory)
#   CONNS="10 100 1000 10000" REPEAT=5 examples/run-echo.sh
# environment:
#   CONNS="10 100 1000"  connection counts. C connections need about C + 100
#                        descriptors in the server and in the client: the
#                        script raises `ulimit -n` as far as the largest
#                        count asks and the hard limit allows, and skips (and
#                        says so) a count it cannot reach
#   IMPLS="weft epoll pthread"   servers (echo-server --impl)
#   REPEAT=3       runs of each (implementation, count)
#   DURATION=4     seconds of each run (echo-client --seconds)
#   SIZE=64        bytes per message (echo-client --size)
#   THREADS=1      the client's epoll threads (echo-client --threads)
#   PORT=19300     first port (each run takes the next one)
#   SERVER_ARGS    extra arguments for echo-server (e.g. --workers=2)
#   ECHO_BIN=DIR   where echo-server and echo-client are (default
#                  ./examples, else this script's directory)
# Output: one line per run on stderr, then a table of medians (by round
# trips/s) with p50/p99 latency and the server's Pss under load (sampled
# half-way through the run; B/conn is that minus the idle Pss, divided by
# the connections), and machine-readable lines
#   bench=echo impl=IMPL param=conns=C,size=S,... value=RT unit=rt/s
#   bench=echo_rss_conn impl=IMPL param=... value=B unit=B
# The figures only mean something on a quiet machine: the client shares
# the CPUs with the server.
set -u
die() { echo "run-echo.sh: $*" >&2; exit 1; }

B=${ECHO_BIN:-./examples}
[ -x "$B/echo-server" ] || B=$(dirname "$0")
[ -x "$B/echo-server" ] && [ -x "$B/echo-client" ] ||
	die "echo-server/echo-client not found: build first (make) or set ECHO_BIN"

CONNS=${CONNS:-"10 100 1000"}
IMPLS=${IMPLS:-"weft epoll pthread"}
REPEAT=${REPEAT:-3}
DURATION=${DURATION:-4}
SIZE=${SIZE:-64}
THREADS=${THREADS:-1}
PORT=${PORT:-19300}
SERVER_PID=""

cleanup() {
	if [ -n "$SERVER_PID" ]; then
		kill "$SERVER_PID" 2>/dev/null
		wait "$SERVER_PID" 2>/dev/null
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Descriptors for the largest count (NOFILE), wait_port
# shellcheck source=examples/net.sh
. "$(dirname "$0")/net.sh" || { echo "no $(dirname "$0")/net.sh" >&2; exit 1; }
# shellcheck disable=SC2086
raise_nofile $CONNS

server_pss() {
	awk '/^Pss:/ { print $2 }' "/proc/$SERVER_PID/smaps_rollup" 2>/dev/null || echo 0
}

declare -A RUNS RT P50 P99 PSS PERCONN
port=$PORT
for c in $CONNS; do
	if [ "$NOFILE" != unlimited ] && [ "$c" -gt $((NOFILE - 100)) ]; then
		echo "  skipping c=$c: ulimit -n is $NOFILE (hard limit $(ulimit -Hn))" >&2
		continue
	fi
	for r in $(seq 1 "$REPEAT"); do
		for impl in $IMPLS; do
			port=$((port + 1))
			# shellcheck disable=SC2086
			"$B/echo-server" --impl="$impl" --port="$port" ${SERVER_ARGS:-} 2>/dev/null &
			SERVER_PID=$!
			wait_port "$port" || die "echo-server --impl=$impl did not start on port $port"
			sleep 0.2
			idle=$(server_pss)
			out=$(mktemp)
			"$B/echo-client" --port="$port" --conns="$c" --size="$SIZE" --seconds="$DURATION" \
				--threads="$THREADS" --impl-label="$impl" >"$out" 2>&1 &
			cpid=$!
			sleep "$(awk -v d="$DURATION" 'BEGIN { print d / 2 }')"
			loaded=$(server_pss)
			wait "$cpid" || { cat "$out" >&2; die "echo-client failed ($impl, c=$c)"; }
			kill "$SERVER_PID" 2>/dev/null
			wait "$SERVER_PID" 2>/dev/null
			SERVER_PID=""
			line=$(grep '^bench=echo ' "$out")
			rm -f "$out"
			rt=$(echo "$line" | sed -n 's/.* value=\([0-9]*\) .*/\1/p')
			p50=$(echo "$line" | sed -n 's/.* p50_us=\([0-9]*\).*/\1/p')
			p99=$(echo "$line" | sed -n 's/.* p99_us=\([0-9]*\).*/\1/p')
			pc=$(awk -v a="$loaded" -v b="$idle" -v c="$c" 'BEGIN { printf "%.0f", (a - b) * 1024 / c }')
			RUNS[$impl,$c]="${RUNS[$impl,$c]:-}$rt $p50 $p99 $loaded $pc"$'\n'
			echo "  $impl c=$c run $r: $rt rt/s, p50/p99 $p50/$p99 us, Pss $idle -> $loaded KiB ($pc B/conn)" >&2
		done
	done
	for impl in $IMPLS; do
		med=$(printf '%s' "${RUNS[$impl,$c]}" | sort -n | awk -v n="$REPEAT" 'NR == int((n + 1) / 2)')
		read -r RT[$impl,$c] P50[$impl,$c] P99[$impl,$c] PSS[$impl,$c] PERCONN[$impl,$c] <<<"$med"
	done
done

echo
echo "echo-client --size=$SIZE --seconds=$DURATION --threads=$THREADS on 127.0.0.1, $(nproc) CPUs, kernel $(uname -r), median of $REPEAT (by rt/s)"
printf '%-7s %-8s %10s %8s %8s %10s %8s\n' conns impl rt/s p50_us p99_us pss_KiB B/conn
for c in $CONNS; do
	for impl in $IMPLS; do
		[ -n "${RT[$impl,$c]:-}" ] || continue
		printf '%-7s %-8s %10s %8s %8s %10s %8s\n' "$c" "$impl" "${RT[$impl,$c]}" "${P50[$impl,$c]}" \
			"${P99[$impl,$c]}" "${PSS[$impl,$c]}" "${PERCONN[$impl,$c]}"
	done
done
echo
for c in $CONNS; do
	for impl in $IMPLS; do
		[ -n "${RT[$impl,$c]:-}" ] || continue
		p="conns=$c,size=$SIZE,threads=$THREADS,duration=$DURATION,repeat=$REPEAT"
		echo "bench=echo impl=$impl param=$p value=${RT[$impl,$c]} unit=rt/s p50_us=${P50[$impl,$c]} p99_us=${P99[$impl,$c]}"
		echo "bench=echo_rss_conn impl=$impl param=$p value=${PERCONN[$impl,$c]} unit=B"
	done
done
