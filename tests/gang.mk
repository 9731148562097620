# Gang scheduling: tests/check_gang.c, one Check suite.
check_PROGRAMS += tests/check_gang
TESTS += tests/check_gang
