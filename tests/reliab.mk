# Reliability suites (issue 20): signal handlers, lifecycle edges, I/O
# poll edges, diagnostics (dump, shutdown report, stack overflow report),
# and the gdb helper.
reliab_tests = \
	tests/check_signal \
	tests/check_io_poll \
	tests/check_lifecycle \
	tests/check_diag

check_PROGRAMS += $(reliab_tests)
TESTS += $(reliab_tests)

tests_check_signal_SOURCES = tests/check_signal.c
tests_check_signal_CFLAGS = $(TEST_CFLAGS)
tests_check_signal_LDADD = $(TEST_LDADD)
tests_check_io_poll_SOURCES = tests/check_io_poll.c
tests_check_io_poll_CFLAGS = $(TEST_CFLAGS)
tests_check_io_poll_LDADD = $(TEST_LDADD)
tests_check_lifecycle_SOURCES = tests/check_lifecycle.c
tests_check_lifecycle_CFLAGS = $(TEST_CFLAGS)
tests_check_lifecycle_LDADD = $(TEST_LDADD)
tests_check_diag_SOURCES = tests/check_diag.c
tests_check_diag_CFLAGS = $(TEST_CFLAGS)
tests_check_diag_LDADD = $(TEST_LDADD)
