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

# The gdb helper: installed in $(pkgdatadir); tests/check_gdb.sh runs
# tests/gdb_target under gdb in batch mode (SKIP without gdb).
dist_pkgdata_DATA = runtime/weft-gdb.py
check_PROGRAMS += tests/gdb_target
tests_gdb_target_SOURCES = tests/gdb_target.c
tests_gdb_target_CFLAGS = $(AM_CFLAGS) -g
tests_gdb_target_LDADD = libweft.la -lpthread
TESTS += tests/check_gdb.sh
dist_check_SCRIPTS += tests/check_gdb.sh
