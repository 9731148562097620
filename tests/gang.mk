# Gang scheduling (issue 16): tests/check_gang.c, one Check suite.
gang_tests = tests/check_gang
check_PROGRAMS += $(gang_tests)
TESTS += $(gang_tests)
tests_check_gang_SOURCES = tests/check_gang.c
tests_check_gang_CFLAGS = $(TEST_CFLAGS)
tests_check_gang_LDADD = $(TEST_LDADD)
