#!/bin/sh
# tests/cross-aarch64.sh - build weft for aarch64 with the cross compiler
# and run the core suites under qemu-user (qemu-aarch64).
#
# Usage: tests/cross-aarch64.sh [SUITE...]   (default: the core suites)
# Environment: CROSS_BUILD_DIR (default /tmp/weft-cross-aarch64, emptied
# first), CROSS_CONFIGURE_ARGS (more configure arguments, e.g.
# --enable-debug or --with-context=ucontext), CK_TIMEOUT_MULTIPLIER (default 3: emulation is 5-20 times slower
# than the host), WEFT_STRESS_SECONDS (default 1), SUITE_TIMEOUT (seconds
# per suite, default 600).
#
# Installs nothing. Exits 77 (skip) with the list of missing packages when
# the cross toolchain, qemu-user or the arm64 libraries are not there. On
# Debian 12, as root:
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install gcc-aarch64-linux-gnu qemu-user liburing-dev:arm64 check:arm64
# libatomic-ops-dev stays the build machine's: Debian's package cannot be
# installed for two architectures at once (installing the arm64 one removes
# the amd64 one), and weft needs only its headers on aarch64 (configure
# says "headers only"). No binfmt registration is needed: the binaries are
# run as `qemu-aarch64 PROGRAM`, and the arm64 loader and libraries come
# from the multiarch packages above (/lib/ld-linux-aarch64.so.1,
# /usr/lib/aarch64-linux-gnu).
#
# Not a CI stage (tests/README "aarch64"): qemu-user runs weft with
# syscalls it ignores (madvise, setrlimit(RLIMIT_AS)) or lacks (io_uring,
# process_vm_readv, seccomp), and the suites must first be green under it.
# madvise(MADV_GUARD_INSTALL) returns 0 and installs nothing: runtime/
# stack.c checks the first marker it installs ("Guard probe") and gives
# guarded stacks mappings of their own when it does not fault, and the
# stack suite's guard-marker tests skip (wt_skip).
#
# Prints one line per suite with its time, the failing tests of a failing
# suite, and ends with "N passed, N failed". Exit 0 when every suite
# passed (or skipped), 1 otherwise.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
build=${CROSS_BUILD_DIR:-/tmp/weft-cross-aarch64}
host=aarch64-linux-gnu
pcdir=/usr/lib/$host/pkgconfig

missing=
command -v $host-gcc >/dev/null 2>&1 || missing="$missing gcc-aarch64-linux-gnu"
command -v $host-objdump >/dev/null 2>&1 || missing="$missing binutils-aarch64-linux-gnu"
command -v qemu-aarch64 >/dev/null 2>&1 || missing="$missing qemu-user"
[ -e "$pcdir/liburing.pc" ] || missing="$missing liburing-dev:arm64"
[ -e "$pcdir/check.pc" ] || missing="$missing check:arm64"
[ -e /usr/include/atomic_ops.h ] || missing="$missing libatomic-ops-dev"
if [ -n "$missing" ]; then
	echo "SKIP cross-aarch64: missing$missing (dpkg --add-architecture arm64 first for the :arm64 ones)"
	exit 77
fi

core="check_context check_thread check_sched check_timer check_os_thread check_config check_stack check_wake stress_wake"
suites=${*:-$core}

# A clean source tree for an out-of-tree build: `make distdir` from a
# configured tree (a tree configured in place rules out VPATH builds from
# it), else the tree itself once autogen.sh has made configure.
rm -rf "$build" && mkdir -p "$build" || exit 1
if [ -f "$src/config.status" ]; then
	(cd "$src" && make -s distdir distdir="$build/src") >"$build/distdir.log" 2>&1 ||
		{ tail -n 20 "$build/distdir.log"; exit 1; }
	top=$build/src
elif [ -x "$src/configure" ]; then
	top=$src
else
	echo "cross-aarch64: run ./autogen.sh first"
	exit 1
fi

start=$(date +%s)
mkdir -p "$build/obj" && cd "$build/obj" || exit 1
# --disable-shared: the tests are aarch64 programs, not libtool wrapper
# scripts that the host shell would run. PKG_CONFIG_LIBDIR: the arm64
# packages' .pc files, not the build machine's.
progs=$(for s in $suites; do printf 'tests/%s ' "$s"; done)
if ! { PKG_CONFIG_LIBDIR=$pcdir:/usr/share/pkgconfig "$top/configure" -q \
		--host=$host --disable-shared ${CROSS_CONFIGURE_ARGS:-} &&
	make -j2 libweft.la $progs; } >"$build/build.log" 2>&1; then
	tail -n 40 "$build/build.log"
	exit 1
fi
if grep -q 'warning:' "$build/build.log"; then
	grep 'warning:' "$build/build.log"
	echo "cross-aarch64: the build has warnings"
	exit 1
fi
echo "cross-aarch64: built libweft and $(echo $suites | wc -w) suites in $(( $(date +%s) - start )) s"

# Exclusive windows: between a load-exclusive (ldxr, ldaxr, ldxp, ...) and
# its store-exclusive no other load or store and no call or return, or the
# retry loop has no forward-progress guarantee on hardware (runtime/tcb.c,
# "On aarch64"). qemu cannot show such a loop spinning (it emulates the
# pair by comparing values), so the code is checked instead.
windows=$($host-objdump -d --no-show-raw-insn .libs/libweft.a | awk '
	/^[0-9a-f]+ <.*>:$/ { fn = $2; open = 0; next }
	$2 ~ /^ld(a)?x(r|p|rb|rh)$/ { open = 1; bad = ""; next }
	!open { next }
	$2 ~ /^st(l)?x(r|p|rb|rh)$/ { if (bad != "") print fn bad; open = 0; next }
	$2 ~ /^(ld|st)/ || $2 ~ /^(bl|blr|br|ret)$/ { bad = bad " " $1 $2 }')
if [ -n "$windows" ]; then
	echo "cross-aarch64: memory accesses or calls inside exclusive windows (function, offset:instruction):"
	echo "$windows" | sed 's/^/    /'
	exit 1
fi

export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-3}
export WEFT_STRESS_SECONDS=${WEFT_STRESS_SECONDS:-1}
pass=0 fail=0 skip=0
for s in $suites; do
	t0=$(date +%s)
	timeout "${SUITE_TIMEOUT:-600}" qemu-aarch64 "tests/$s" >"tests/$s.log" 2>&1
	rc=$?
	dt=$(( $(date +%s) - t0 ))
	summary=$(grep -E '^[0-9]+%: Checks' "tests/$s.log" | tail -n 1)
	skipped=$(grep -E '^skipped: ' "tests/$s.log" | tail -n 1)
	case $rc in
	0) pass=$((pass + 1)); echo "PASS $s ($dt s) $summary, $skipped" ;;
	77) skip=$((skip + 1)); echo "SKIP $s ($dt s) $skipped" ;;
	*)
		fail=$((fail + 1))
		[ $rc = 124 ] && summary="suite timed out after ${SUITE_TIMEOUT:-600} s"
		echo "FAIL $s ($dt s, exit $rc) $summary"
		grep -E ':[FE]:' "tests/$s.log" | sed 's/^/    /'
		echo "    log: $build/obj/tests/$s.log"
		;;
	esac
done
grep -h '^SKIP ' tests/*.log 2>/dev/null | sed 's/^/    /'
echo "cross-aarch64: $(( $(date +%s) - start )) s in all"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
