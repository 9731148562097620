# I/O suites (issue 4). check_io runs twice: as is (io_uring when the kernel
# allows it) and under WEFT_FEATURES=NO_URING (the offload/poller fallback).
io_tests = tests/check_io tests/stress_io

check_PROGRAMS += $(io_tests)
TESTS += $(io_tests) tests/check_io_nouring.sh tests/check_valgrind.sh \
	tests/check_server_restart.sh tests/check_http.sh

tests_check_io_SOURCES = tests/check_io.c
tests_check_io_CFLAGS = $(TEST_CFLAGS)
tests_check_io_LDADD = $(TEST_LDADD)

tests_stress_io_SOURCES = tests/stress_io.c
tests_stress_io_CFLAGS = $(TEST_CFLAGS)
tests_stress_io_LDADD = $(TEST_LDADD)

dist_check_SCRIPTS = tests/check_io_nouring.sh tests/check_valgrind.sh \
	tests/check_server_restart.sh tests/check_http.sh
