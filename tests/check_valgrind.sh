#!/bin/sh
# A weft program runs to completion under Valgrind. Valgrind cannot run the
# other threads while one is blocked in io_uring_enter, so weft_init turns
# io_uring off when it finds itself on Valgrind (runtime/uring.c); before
# that, a worker waiting in its ring for a kick hung the program. Runs the
# yield benchmark (1 worker, and 2: one of them goes idle) under Memcheck and
# checks the result line, Memcheck's verdict and the reported I/O backend.
# Skipped (77) without valgrind, without <valgrind/valgrind.h> at build
# time, or on a sanitizer build (Valgrind cannot run those).
# Run from the top build directory (automake's test harness does).
command -v valgrind >/dev/null 2>&1 || { echo "no valgrind: skipped"; exit 77; }
grep -q 'define HAVE_VALGRIND_VALGRIND_H 1' config.h 2>/dev/null ||
	{ echo "built without valgrind/valgrind.h: skipped"; exit 77; }
lib=.libs/libweft.so
if [ -f "$lib" ] && ldd "$lib" 2>/dev/null | grep -Eq 'lib(asan|tsan|ubsan)'; then
	echo "sanitizer build: skipped"
	exit 77
fi
out=${TMPDIR:-/tmp}/weft-check-valgrind.$$
ok=0
for n in 1 2; do
	echo "=== WEFT_WORKERS=$n"
	WEFT_WORKERS=$n WEFT_STATS=1 timeout -s KILL "${WEFT_VG_TIMEOUT:-300}" ./libtool --mode=execute \
		valgrind -q --error-exitcode=99 ./examples/weft-micro --impl=weft --bench=yield \
		--runs=1 >"$out" 2>&1
	rc=$?
	cat "$out"
	[ $rc -eq 0 ] || { echo "FAIL: exit status $rc (137: killed after ${WEFT_VG_TIMEOUT:-300} s, hung)"; ok=1; }
	grep -q '^bench=yield impl=weft' "$out" || { echo "FAIL: no result line"; ok=1; }
	grep -q 'io_uring disabled: running on Valgrind' "$out" ||
		{ echo "FAIL: WEFT_STATS does not say io_uring is off under Valgrind"; ok=1; }
done
rm -f "$out"
exit $ok
