/*
 * tests/check_os_thread.c - suite "os_thread": the API from plain OS
 * threads: several pthreads spawn and join concurrently, unpark weft
 * threads, and join threads spawned by other OS threads.
 */
#include "tests/harness.h"

#include <pthread.h>
#include <errno.h>

static void *add_one(void *arg)
{
	return (void *)((long)arg + 1);
}

static void *os_spawner(void *arg)
{
	long base = (long)arg;

	for (long i = 0; i < 2000; i++) {
		weft_thread_t t;
		void *r;

		if (weft_spawn(&t, add_one, (void *)(base + i), NULL) != 0 ||
		    weft_join(t, &r) != 0 || (long)r != base + i + 1)
			return (void *)1;
	}
	return NULL;
}

START_TEST(many_os_threads)
{
	pthread_t p[8];

	wt_init(_i);
	for (long i = 0; i < 8; i++)
		ck_assert_int_eq(pthread_create(&p[i], NULL, os_spawner, (void *)(i * 100000)), 0);
	for (int i = 0; i < 8; i++) {
		void *r;

		pthread_join(p[i], &r);
		ck_assert_ptr_null(r);
	}
	wt_shutdown();
}
END_TEST

/* A weft thread parks; an OS thread unparks it. */
static _Atomic int flag;

static void *wait_flag(void *arg)
{
	(void)arg;
	while (!atomic_load(&flag))
		weft_park();
	return (void *)7;
}

static void *os_unparker(void *arg)
{
	weft_thread_t t = arg;

	atomic_store(&flag, 1);
	weft_unpark(t);
	return NULL;
}

START_TEST(unpark_from_os_thread)
{
	weft_thread_t t;
	pthread_t p;
	void *r;

	wt_init(_i);
	atomic_store(&flag, 0);
	ck_assert_int_eq(weft_spawn(&t, wait_flag, NULL, NULL), 0);
	weft_sleep_ns(1000000);
	pthread_create(&p, NULL, os_unparker, t);
	pthread_join(p, NULL);
	ck_assert_int_eq(weft_join(t, &r), 0);
	ck_assert_int_eq((long)r, 7);
	wt_shutdown();
}
END_TEST

/* Join from a different OS thread than the spawner; weft_self is NULL and
 * weft_yield works on an OS thread. */
static void *os_joiner(void *arg)
{
	void *r = NULL;

	if (weft_self() != NULL || weft_worker_id() != -1 || weft_yield() != 0)
		return (void *)1;
	if (weft_join((weft_thread_t)arg, &r) != 0 || (long)r != 42)
		return (void *)2;
	return NULL;
}

static void *slow42(void *arg)
{
	(void)arg;
	weft_sleep_ns(2000000);
	return (void *)42;
}

START_TEST(join_from_other_os_thread)
{
	weft_thread_t t;
	pthread_t p;
	void *r;

	wt_init(_i);
	ck_assert_int_eq(weft_spawn(&t, slow42, NULL, NULL), 0);
	pthread_create(&p, NULL, os_joiner, t);
	pthread_join(p, &r);
	ck_assert_ptr_null(r);
	ck_assert_int_eq(weft_shutdown(), 0);
}
END_TEST

static void *try_shutdown(void *arg)
{
	(void)arg;
	WT_CHECK(weft_shutdown() == EPERM);
	WT_CHECK(weft_init(NULL) == EBUSY);
	return NULL;
}

START_TEST(errors_from_weft_thread)
{
	weft_thread_t t;

	wt_init(_i);
	ck_assert_int_eq(weft_spawn(&t, try_shutdown, NULL, NULL), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

static Suite *os_suite(void)
{
	Suite *s = suite_create("os_thread");
	TCase *tc = wt_tcase(s, "os_thread", 30);

	tcase_add_loop_test(tc, many_os_threads, 0, wt_nconfigs);
	tcase_add_loop_test(tc, unpark_from_os_thread, 0, wt_nconfigs);
	tcase_add_loop_test(tc, join_from_other_os_thread, 0, wt_nconfigs);
	tcase_add_loop_test(tc, errors_from_weft_thread, 0, wt_nconfigs);
	return s;
}

int main(void)
{
	return wt_run_suite(os_suite());
}
