# tests/: one Check suite per concept, plus bounded seeded stress tests and
# script tests. A suite is the program tests/NAME, built from tests/NAME.c
# (automake's default source) with the defaults below; each is listed once.

# Every test program links the harness and Check (the default LDADD: each
# program outside tests/ sets its own). -pthread from Check's flags.
AM_CPPFLAGS += $(CHECK_CFLAGS)
LDADD = libweft.la libtests.la $(CHECK_LIBS) -lpthread

# Sanitizer runtime options for every test (harmless in a plain build; a
# value already in the environment wins). UBSan only prints by default, so
# a UB report would pass the test: halt_on_error makes it fail it.
AM_TESTS_ENVIRONMENT += \
	UBSAN_OPTIONS="$${UBSAN_OPTIONS-halt_on_error=1:print_stacktrace=1}"; \
	export UBSAN_OPTIONS;

noinst_LTLIBRARIES = libtests.la
libtests_la_SOURCES = tests/harness.c tests/harness.h
noinst_HEADERS += tests/sync_common.h

# The scheduler core: threads, contexts, the scheduler, timers, OS
# threads, configuration, stacks, the wake path.
core_tests = \
	tests/check_context \
	tests/check_thread \
	tests/check_sched \
	tests/check_timer \
	tests/check_os_thread \
	tests/check_config \
	tests/check_stack \
	tests/check_wake \
	tests/stress_wake
tests_check_context_LDADD = $(LDADD) -lm

# Synchronisation primitives and channels.
sync_tests = \
	tests/check_mutex \
	tests/check_cond \
	tests/check_sem \
	tests/check_rwlock \
	tests/check_barrier \
	tests/stress_sync \
	tests/check_chan \
	tests/stress_chan

# I/O. check_io runs twice: as is (io_uring when the kernel allows it) and
# under WEFT_FEATURES=NO_URING (check_io_nouring.sh: the offload/poller
# fallback).
io_tests = tests/check_io tests/stress_io

# Reliability: signal handlers, lifecycle edges, I/O poll edges,
# diagnostics (dump, shutdown report, stack overflow report).
reliab_tests = \
	tests/check_signal \
	tests/check_io_poll \
	tests/check_lifecycle \
	tests/check_diag

check_PROGRAMS += $(core_tests) $(sync_tests) $(io_tests)
TESTS += $(core_tests) $(sync_tests) $(io_tests)

# Script tests: the I/O fallback, Valgrind, a server restarted on its
# port, an HTTP server under load, the echo and HTTP servers at 1,000
# connections and under churn, the wake-path benchmarks' smoke test
# (examples/), the man pages.
script_tests = \
	tests/check_io_nouring.sh \
	tests/check_valgrind.sh \
	tests/check_server_restart.sh \
	tests/check_http.sh \
	tests/check_conns.sh \
	tests/check_wake_bench.sh \
	tests/check_man.sh
TESTS += $(script_tests)
dist_check_SCRIPTS = $(script_tests)
# sourced by the server tests (not a test itself)
EXTRA_DIST += tests/server_lib.sh

# check_conns.sh's client: plain epoll, no weft, no Check (the servers
# under test are examples/).
check_PROGRAMS += tests/conn_load
tests_conn_load_LDADD =

# Gang scheduling: tests/check_gang.c, one Check suite.
check_PROGRAMS += tests/check_gang
TESTS += tests/check_gang

check_PROGRAMS += $(reliab_tests)
TESTS += $(reliab_tests)

# The gdb helper: installed in $(pkgdatadir); tests/check_gdb.sh runs
# tests/gdb_target under gdb in batch mode (SKIP without gdb).
dist_pkgdata_DATA = runtime/weft-gdb.py
check_PROGRAMS += tests/gdb_target
tests_gdb_target_CFLAGS = $(AM_CFLAGS) -g
TESTS += tests/check_gdb.sh
dist_check_SCRIPTS += tests/check_gdb.sh

EXTRA_DIST += tests/README

# The soak (tests/soak.sh, not in TESTS): built by make check, run by hand
# or by CI's soak stage.
check_PROGRAMS += tests/soak_wake
dist_noinst_SCRIPTS += tests/soak.sh

# The aarch64 cross build under qemu-user (not in TESTS: it builds weft a
# second time with the cross compiler; tests/README "aarch64").
dist_noinst_SCRIPTS += tests/cross-aarch64.sh

# CI's skip check (.ci/run): tests/skips.sh and its per-stage limits
dist_noinst_SCRIPTS += tests/skips.sh
EXTRA_DIST += tests/skips.expected

include tests/models/Makefile.mk
