# tests/: one Check suite per concept, plus bounded seeded stress tests.
# Each binary is listed once here; TESTS = check_PROGRAMS.
TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
TEST_LDADD = libweft.la libtests.la $(CHECK_LIBS) -lpthread

# Sanitizer runtime options for every test (harmless in a plain build; a
# value already in the environment wins). UBSan only prints by default, so
# a UB report would pass the test: halt_on_error makes it fail it.
AM_TESTS_ENVIRONMENT += \
	UBSAN_OPTIONS="$${UBSAN_OPTIONS-halt_on_error=1:print_stacktrace=1}"; \
	export UBSAN_OPTIONS;

noinst_LTLIBRARIES = libtests.la
libtests_la_SOURCES = tests/harness.c tests/harness.h
libtests_la_CFLAGS = $(TEST_CFLAGS)

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

check_PROGRAMS += $(core_tests)
TESTS += $(core_tests)

tests_check_context_SOURCES = tests/check_context.c
tests_check_context_CFLAGS = $(TEST_CFLAGS)
tests_check_context_LDADD = $(TEST_LDADD) -lm
tests_check_thread_SOURCES = tests/check_thread.c
tests_check_thread_CFLAGS = $(TEST_CFLAGS)
tests_check_thread_LDADD = $(TEST_LDADD)
tests_check_sched_SOURCES = tests/check_sched.c
tests_check_sched_CFLAGS = $(TEST_CFLAGS)
tests_check_sched_LDADD = $(TEST_LDADD)
tests_check_timer_SOURCES = tests/check_timer.c
tests_check_timer_CFLAGS = $(TEST_CFLAGS)
tests_check_timer_LDADD = $(TEST_LDADD)
tests_check_os_thread_SOURCES = tests/check_os_thread.c
tests_check_os_thread_CFLAGS = $(TEST_CFLAGS)
tests_check_os_thread_LDADD = $(TEST_LDADD)
tests_check_config_SOURCES = tests/check_config.c
tests_check_config_CFLAGS = $(TEST_CFLAGS)
tests_check_config_LDADD = $(TEST_LDADD)
tests_check_stack_SOURCES = tests/check_stack.c
tests_check_stack_CFLAGS = $(TEST_CFLAGS)
tests_check_stack_LDADD = $(TEST_LDADD)
tests_check_wake_SOURCES = tests/check_wake.c
tests_check_wake_CFLAGS = $(TEST_CFLAGS)
tests_check_wake_LDADD = $(TEST_LDADD)
tests_stress_wake_SOURCES = tests/stress_wake.c
tests_stress_wake_CFLAGS = $(TEST_CFLAGS)
tests_stress_wake_LDADD = $(TEST_LDADD)

EXTRA_DIST += tests/README

# The soak (tests/soak.sh, not in TESTS): built by make check, run by hand
# or by CI's soak stage.
check_PROGRAMS += tests/soak_wake
tests_soak_wake_SOURCES = tests/soak_wake.c
tests_soak_wake_CFLAGS = $(AM_CFLAGS)
tests_soak_wake_LDADD = libweft.la -lpthread
dist_noinst_SCRIPTS += tests/soak.sh

# The aarch64 cross build under qemu-user (not in TESTS: it builds weft a
# second time with the cross compiler; tests/README "aarch64").
dist_noinst_SCRIPTS += tests/cross-aarch64.sh

# CI's skip check (.ci/run): tests/skips.sh and its per-stage limits
dist_noinst_SCRIPTS += tests/skips.sh
EXTRA_DIST += tests/skips.expected

include tests/sync.mk
include tests/chan.mk
include tests/io.mk
include tests/gang.mk

# wake-path benchmarks smoke test (examples/wake.mk)
TESTS += tests/check_wake_bench.sh
dist_check_SCRIPTS += tests/check_wake_bench.sh
TESTS += tests/check_man.sh
include tests/models/Makefile.mk
