# channel suites (issue 3): the unit suite and the bounded, seeded stress test.
chan_tests = \
	tests/check_chan \
	tests/stress_chan

check_PROGRAMS += $(chan_tests)
TESTS += $(chan_tests)

tests_check_chan_SOURCES = tests/check_chan.c
tests_check_chan_CFLAGS = $(TEST_CFLAGS)
tests_check_chan_LDADD = $(TEST_LDADD)
tests_stress_chan_SOURCES = tests/stress_chan.c
tests_stress_chan_CFLAGS = $(TEST_CFLAGS)
tests_stress_chan_LDADD = $(TEST_LDADD)
