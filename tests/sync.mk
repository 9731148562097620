# sync primitive suites (issue 3).
sync_tests = \
	tests/check_mutex \
	tests/check_cond \
	tests/check_sem \
	tests/check_rwlock \
	tests/check_barrier \
	tests/stress_sync

check_PROGRAMS += $(sync_tests)
TESTS += $(sync_tests)

noinst_HEADERS += tests/sync_common.h

tests_check_mutex_SOURCES = tests/check_mutex.c
tests_check_mutex_CFLAGS = $(TEST_CFLAGS)
tests_check_mutex_LDADD = $(TEST_LDADD)
tests_check_cond_SOURCES = tests/check_cond.c
tests_check_cond_CFLAGS = $(TEST_CFLAGS)
tests_check_cond_LDADD = $(TEST_LDADD)
tests_check_sem_SOURCES = tests/check_sem.c
tests_check_sem_CFLAGS = $(TEST_CFLAGS)
tests_check_sem_LDADD = $(TEST_LDADD)
tests_check_rwlock_SOURCES = tests/check_rwlock.c
tests_check_rwlock_CFLAGS = $(TEST_CFLAGS)
tests_check_rwlock_LDADD = $(TEST_LDADD)
tests_check_barrier_SOURCES = tests/check_barrier.c
tests_check_barrier_CFLAGS = $(TEST_CFLAGS)
tests_check_barrier_LDADD = $(TEST_LDADD)
tests_stress_sync_SOURCES = tests/stress_sync.c
tests_stress_sync_CFLAGS = $(TEST_CFLAGS)
tests_stress_sync_LDADD = $(TEST_LDADD)
