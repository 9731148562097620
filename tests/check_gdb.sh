#!/bin/sh
# tests/check_gdb.sh - the gdb helper (runtime/weft-gdb.py) lists the light
# threads of a stopped program and prints a parked one's backtrace.
# Runs tests/gdb_target under gdb in batch mode: it stops in gdb_stop_here()
# while the light thread "gdb-parked" is parked in gdb_parked_here().
# Exit 0 pass, 1 fail, 77 skip (no gdb, or not allowed to trace).
srcdir=${srcdir:-.}
if ! command -v gdb >/dev/null 2>&1; then
	echo "check_gdb: SKIP: gdb not installed (Debian package gdb)"
	exit 77
fi
# LeakSanitizer cannot run under ptrace: the ASan build's exit check would
# fail the program at its end
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
out=$(./libtool --mode=execute gdb -nx --batch \
	-ex "source $srcdir/runtime/weft-gdb.py" \
	-ex 'set pagination off' \
	-ex 'break gdb_stop_here' \
	-ex run \
	-ex 'weft threads' \
	-ex 'weft bt gdb-parked' \
	-ex 'bt 1' \
	-ex continue \
	tests/gdb_target 2>&1)
echo "$out"
if echo "$out" | grep -q "ptrace: Operation not permitted\|Could not trace"; then
	echo "check_gdb: SKIP: this environment does not allow ptrace"
	exit 77
fi
fail=0
echo "$out" | grep -q '"gdb-parked" parked on sem' ||
	{ echo "check_gdb: FAIL: weft threads does not list gdb-parked as parked on sem"; fail=1; }
echo "$out" | grep -A30 'light thread 0x.*"gdb-parked"' | grep -q 'gdb_parked_here' ||
	{ echo "check_gdb: FAIL: weft bt shows no gdb_parked_here frame"; fail=1; }
echo "$out" | grep -q 'in gdb_stop_here\|gdb_stop_here ()' ||
	{ echo "check_gdb: FAIL: the registers were not restored after weft bt"; fail=1; }
echo "$out" | grep -q 'gdb_target: done' ||
	{ echo "check_gdb: FAIL: the program did not run to its end after weft bt"; fail=1; }
[ $fail = 0 ] && echo "check_gdb: PASS"
exit $fail
