# Reliability suites (issue 20): signal handlers, lifecycle edges, I/O
# poll edges, diagnostics (dump, shutdown report, stack overflow report),
# and the gdb helper.
reliab_tests = \
	tests/check_signal

check_PROGRAMS += $(reliab_tests)
TESTS += $(reliab_tests)

tests_check_signal_SOURCES = tests/check_signal.c
tests_check_signal_CFLAGS = $(TEST_CFLAGS)
tests_check_signal_LDADD = $(TEST_LDADD)
