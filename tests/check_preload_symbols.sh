#!/bin/sh
# libweft-preload.so interposes every lock symbol glibc exports (issue 15):
# lists glibc's exported pthread mutex/cond/rwlock/spin/barrier, unnamed
# sem_* and C11 mtx/cnd symbols with nm -D on the libc.so.6 that programs
# load, and fails when one of them is not defined by the preload. Then
# reruns the conformance suite with WEFT_PRELOAD=off (everything to glibc:
# the suite's expected answers are glibc's answers too) and checks that
# WEFT_STATS=1 prints the statistics at exit.
set -u
top=${abs_top_builddir:-$(pwd)}
lib=$top/.libs/libweft-preload.so
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
command -v nm >/dev/null || { echo "SKIP: no nm (binutils)"; exit 77; }
libc=$(ldd "$lib" | awk '/libc\.so\.6/ { print $3 }')
[ -n "$libc" ] && [ -f "$libc" ] || { echo "FAIL: no libc.so.6 found for $lib"; exit 1; }

# Named semaphores (sem_open/close/unlink) stay glibc's by design.
want=$(nm -D --defined-only "$libc" | awk '{ print $3 }' | sed 's/@.*//' |
	grep -E '^(pthread_(mutex|cond|rwlock|spin|barrier)_|sem_|mtx_|cnd_)' |
	grep -v -E 'attr|^sem_(open|close|unlink)$' | sort -u)
have=$(nm -D --defined-only "$lib" | awk '{ print $3 }' | sort -u)
n=0 missing=0
for s in $want; do
	n=$((n + 1))
	if ! printf '%s\n' "$have" | grep -qx "$s"; then
		echo "not interposed: $s"
		missing=$((missing + 1))
	fi
done
# No version script: every definition unversioned.
if nm -D --defined-only "$lib" | grep -q '@'; then
	echo "versioned definitions in $lib:"; nm -D --defined-only "$lib" | grep '@'
	missing=$((missing + 1))
fi
echo "$n glibc lock symbols, $missing not interposed"
[ "$missing" = 0 ] || exit 1
[ "$n" -ge 50 ] || { echo "FAIL: only $n lock symbols found in $libc"; exit 1; }

# The conformance suite with everything routed to glibc.
WEFT_PRELOAD=off "$top/tests/check_preload" >check_preload_off.out 2>&1
rc=$?
# (prefixed: tests/skips.sh reads a "skipped: N of M" line at the start of
# a line as this script's own count; the skips of the off run are glibc's
# behaviour, e.g. no hand-off to check, not tests this script left out)
tail -n 5 check_preload_off.out | sed 's/^/off: /'
[ $rc = 0 ] || { echo "FAIL: check_preload with WEFT_PRELOAD=off"; exit 1; }

# WEFT_STATS=1 prints acquisitions per class at exit.
WEFT_STATS=1 CK_RUN_CASE=mutex "$top/tests/check_preload" >check_preload_stats.out 2>&1
grep -A 8 'weft-preload stats' check_preload_stats.out | grep -q '^  mutex ' ||
	{ echo "FAIL: WEFT_STATS=1 printed no statistics"; cat check_preload_stats.out; exit 1; }
echo "1 passed, 0 failed"
