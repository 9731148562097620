/*
 * tests/check_thread.c - suite "thread": spawn, join, detach, exit, yield,
 * keys, attributes, park/unpark, and every bad-input case.
 */
#include "tests/harness.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void *ret_arg(void *arg)
{
	return arg;
}

START_TEST(spawn_join_value)
{
	weft_thread_t t;
	void *r = NULL;

	wt_init(_i);
	ck_assert_int_eq(weft_spawn(&t, ret_arg, (void *)0x1234, NULL), 0);
	ck_assert_int_eq(weft_join(t, &r), 0);
	ck_assert_ptr_eq(r, (void *)0x1234);
	wt_shutdown();
}
END_TEST

static _Atomic long counter;

static void *bump(void *arg)
{
	(void)arg;
	atomic_fetch_add(&counter, 1);
	return NULL;
}

START_TEST(spawn_join_100k)
{
	enum { N = 100000, BATCH = 1000 };
	weft_thread_t *ts = calloc(BATCH, sizeof(*ts));

	wt_init(_i);
	atomic_store(&counter, 0);
	for (int i = 0; i < N; i += BATCH) {
		for (int j = 0; j < BATCH; j++)
			ck_assert_int_eq(weft_spawn(&ts[j], bump, NULL, NULL), 0);
		for (int j = 0; j < BATCH; j++)
			ck_assert_int_eq(weft_join(ts[j], NULL), 0);
	}
	ck_assert_int_eq(atomic_load(&counter), N);
	free(ts);
	wt_shutdown();
}
END_TEST

/* Spawn and join from inside weft threads (a tree). */
static void *tree(void *arg)
{
	long depth = (long)arg;
	weft_thread_t a, b;
	void *ra, *rb;

	if (depth == 0)
		return (void *)1L;
	WT_CHECK(weft_spawn(&a, tree, (void *)(depth - 1), NULL) == 0);
	WT_CHECK(weft_spawn(&b, tree, (void *)(depth - 1), NULL) == 0);
	WT_CHECK(weft_join(a, &ra) == 0);
	WT_CHECK(weft_join(b, &rb) == 0);
	return (void *)((long)ra + (long)rb);
}

START_TEST(spawn_tree)
{
	weft_thread_t t;
	void *r;

	wt_init(_i);
	ck_assert_int_eq(weft_spawn(&t, tree, (void *)12L, NULL), 0);
	ck_assert_int_eq(weft_join(t, &r), 0);
	wt_assert_no_failure();
	ck_assert_int_eq((long)r, 4096);
	wt_shutdown();
}
END_TEST

static void *exits_early(void *arg)
{
	weft_exit(arg);
	return NULL;   /* not reached */
}

START_TEST(exit_value)
{
	weft_thread_t t;
	void *r;

	wt_init(_i);
	ck_assert_int_eq(weft_spawn(&t, exits_early, (void *)77L, NULL), 0);
	ck_assert_int_eq(weft_join(t, &r), 0);
	ck_assert_int_eq((long)r, 77);
	wt_shutdown();
}
END_TEST

START_TEST(detached_run)
{
	weft_attr_t a;

	wt_init(_i);
	atomic_store(&counter, 0);
	weft_attr_init(&a);
	a.detached = 1;
	for (int i = 0; i < 1000; i++)
		ck_assert_int_eq(weft_spawn(NULL, bump, NULL, &a), 0);
	/* shutdown waits for detached threads too */
	wt_shutdown();
	ck_assert_int_eq(atomic_load(&counter), 1000);
}
END_TEST

static void *sleeper(void *arg)
{
	weft_sleep_ns((uint64_t)(uintptr_t)arg);
	return NULL;
}

START_TEST(detach_later)
{
	weft_thread_t t1, t2;

	wt_init(_i);
	/* detach before exit */
	ck_assert_int_eq(weft_spawn(&t1, sleeper, (void *)(uintptr_t)2000000, NULL), 0);
	ck_assert_int_eq(weft_detach(t1), 0);
	/* detach after exit */
	ck_assert_int_eq(weft_spawn(&t2, ret_arg, NULL, NULL), 0);
	weft_sleep_ns(5000000);
	ck_assert_int_eq(weft_detach(t2), 0);
	wt_shutdown();
}
END_TEST

/* Keys with destructors. */
static weft_key_t key;
static _Atomic long destroyed;

static void key_dtor(void *v)
{
	atomic_fetch_add(&destroyed, (long)(uintptr_t)v);
}

static void *uses_key(void *arg)
{
	WT_CHECK(weft_getspecific(key) == NULL);
	WT_CHECK(weft_setspecific(key, arg) == 0);
	weft_yield();
	WT_CHECK(weft_getspecific(key) == arg);
	return NULL;
}

START_TEST(keys_destructors)
{
	weft_thread_t t[10];

	wt_init(_i);
	atomic_store(&destroyed, 0);
	ck_assert_int_eq(weft_key_create(&key, key_dtor), 0);
	for (long i = 0; i < 10; i++)
		ck_assert_int_eq(weft_spawn(&t[i], uses_key, (void *)(i + 1), NULL), 0);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(weft_join(t[i], NULL), 0);
	wt_assert_no_failure();
	ck_assert_int_eq(atomic_load(&destroyed), 55);
	ck_assert_int_eq(weft_key_delete(key), 0);
	ck_assert_int_eq(weft_key_delete(key), EINVAL);
	ck_assert_int_eq(weft_setspecific(key, (void *)1), EINVAL);
	wt_shutdown();
}
END_TEST

/* Yield order: on one worker, a yielding thread goes behind every runnable
 * thread. Three threads append their id then yield, 3 rounds each. */
static int order[9];
static _Atomic int norder;

static void *yielder(void *arg)
{
	for (int r = 0; r < 3; r++) {
		order[atomic_fetch_add(&norder, 1)] = (int)(intptr_t)arg;
		weft_yield();
	}
	return NULL;
}

/* The three yielders are spawned by a thread on the same worker, so all
 * three are queued before the first one runs. */
static void *yield_starter(void *arg)
{
	weft_thread_t t[3];
	weft_attr_t *a = arg;

	for (int i = 0; i < 3; i++)
		WT_CHECK(weft_spawn(&t[i], yielder, (void *)(intptr_t)i, a) == 0);
	for (int i = 0; i < 3; i++)
		WT_CHECK(weft_join(t[i], NULL) == 0);
	return NULL;
}

START_TEST(yield_order)
{
	weft_thread_t t;
	weft_attr_t a;

	wt_init_workers(1);
	atomic_store(&norder, 0);
	weft_attr_init(&a);
	a.worker = 0;
	ck_assert_int_eq(weft_spawn(&t, yield_starter, &a, &a), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	wt_assert_no_failure();
	/* spawn order is newest first (worker.c "Spawn order"); after that,
	 * each yield goes behind the other two: the first round repeats */
	ck_assert(order[0] != order[1] && order[1] != order[2] && order[0] != order[2]);
	for (int i = 3; i < 9; i++)
		ck_assert_int_eq(order[i], order[i % 3]);
	wt_shutdown();
}
END_TEST

/* Pinning and attributes. */
static void *where(void *arg)
{
	(void)arg;
	for (int i = 0; i < 10; i++) {
		weft_yield();
		weft_sleep_ns(10000);
	}
	return (void *)(intptr_t)weft_worker_id();
}

START_TEST(attrs)
{
	weft_attr_t a;
	weft_thread_t t;
	void *r;
	int n;

	wt_init(_i);
	n = weft_workers();
	for (int w = 0; w < n; w++) {
		weft_attr_init(&a);
		a.worker = w;
		a.stack_size = 64 * 1024;
		a.guard = w & 1;
		a.name = "pinned-thread-with-a-long-name";
		ck_assert_int_eq(weft_spawn(&t, where, NULL, &a), 0);
		ck_assert_str_eq(weft_thread_name(t), "pinned-thread-w");
		ck_assert_int_eq(weft_join(t, &r), 0);
		ck_assert_int_eq((int)(intptr_t)r, w);
	}
	wt_shutdown();
}
END_TEST

/* Park/unpark: an unpark before the park makes the park return at once. */
static void *park_token(void *arg)
{
	(void)arg;
	WT_CHECK(weft_unpark(weft_self()) == 0);
	WT_CHECK(weft_park() == 0);
	WT_CHECK(weft_park_until(weft_now_ns() + 1000000) == ETIMEDOUT);
	return NULL;
}

static void *park_wait(void *arg)
{
	_Atomic int *flag = arg;

	while (!atomic_load(flag))
		weft_park();
	return NULL;
}

START_TEST(park_unpark)
{
	weft_thread_t t;
	_Atomic int flag = 0;

	wt_init(_i);
	ck_assert_int_eq(weft_spawn(&t, park_token, NULL, NULL), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	ck_assert_int_eq(weft_spawn(&t, park_wait, &flag, NULL), 0);
	weft_sleep_ns(2000000);
	atomic_store(&flag, 1);
	ck_assert_int_eq(weft_unpark(t), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* --- errors --- */

static void *self_join(void *arg)
{
	(void)arg;
	WT_CHECK(weft_join(weft_self(), NULL) == EDEADLK);
	return NULL;
}

START_TEST(bad_input)
{
	weft_thread_t t;
	weft_attr_t a;

	wt_init(_i);
	ck_assert_int_eq(weft_spawn(&t, NULL, NULL, NULL), EINVAL);
	ck_assert_int_eq(weft_attr_init(NULL), EINVAL);
	weft_attr_init(&a);
	a.worker = weft_workers();
	ck_assert_int_eq(weft_spawn(&t, ret_arg, NULL, &a), EINVAL);
	a.worker = -2;
	ck_assert_int_eq(weft_spawn(&t, ret_arg, NULL, &a), EINVAL);
	weft_attr_init(&a);
	a.stack_size = 100;
	ck_assert_int_eq(weft_spawn(&t, ret_arg, NULL, &a), EINVAL);
	ck_assert_int_eq(weft_join(NULL, NULL), EINVAL);
	ck_assert_int_eq(weft_detach(NULL), EINVAL);
	ck_assert_int_eq(weft_unpark(NULL), EINVAL);
	ck_assert_int_eq(weft_park(), EPERM);
	ck_assert_int_eq(weft_park_until(0), EPERM);
	ck_assert_int_eq(weft_exit(NULL), EPERM);
	ck_assert_int_eq(weft_setspecific(0, NULL), EINVAL);
	ck_assert_int_eq(weft_key_create(NULL, NULL), EINVAL);
	ck_assert_int_eq(weft_key_delete(WEFT_KEYS_MAX), EINVAL);

	/* join of a detached thread, double join, self join */
	weft_attr_init(&a);
	ck_assert_int_eq(weft_spawn(&t, sleeper, (void *)(uintptr_t)3000000, &a), 0);
	ck_assert_int_eq(weft_detach(t), 0);
	ck_assert_int_eq(weft_join(t, NULL), EINVAL);
	ck_assert_int_eq(weft_detach(t), EINVAL);
	ck_assert_int_eq(weft_spawn(&t, ret_arg, NULL, NULL), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	ck_assert_int_eq(weft_join(t, NULL), EINVAL);   /* TCB is FREE now */
	ck_assert_int_eq(weft_spawn(&t, self_join, NULL, NULL), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	wt_assert_no_failure();

	/* init while running, shutdown while stopped */
	ck_assert_int_eq(weft_init(NULL), EBUSY);
	wt_shutdown();
	ck_assert_int_eq(weft_shutdown(), EINVAL);
}
END_TEST

START_TEST(bad_config)
{
	weft_config_t c = WEFT_CONFIG_INITIALIZER;

	c.workers = -1;
	ck_assert_int_eq(weft_init(&c), EINVAL);
	c.workers = WEFT_WORKERS_MAX + 1;
	ck_assert_int_eq(weft_init(&c), EINVAL);
	c.workers = 1;
	c.stack_size = 10;
	ck_assert_int_eq(weft_init(&c), EINVAL);
	c.stack_size = 0;
	c.features = "NO_MAILBOX,BOGUS";
	ck_assert_int_eq(weft_init(&c), EINVAL);
	c.features = "NO_MAILBOX";
	ck_assert_int_eq(weft_init(&c), 0);
	if (!getenv("WEFT_FEATURES"))
		ck_assert_int_eq(weft_feature("MAILBOX"), 0);
	ck_assert_int_eq(weft_feature("NOPE"), -1);
	wt_shutdown();
	/* implicit init at first spawn */
	{
		weft_thread_t t;

		ck_assert_int_eq(weft_spawn(&t, ret_arg, NULL, NULL), 0);
		ck_assert_int_eq(weft_join(t, NULL), 0);
		ck_assert_int_gt(weft_workers(), 0);
		wt_shutdown();
	}
}
END_TEST

/* Allocation failures: WEFT_FAULT=alloc:N makes the N-th internal
 * allocation fail; spawn reports EAGAIN, nothing leaks, runtime healthy. */
START_TEST(fault_injection)
{
	int saw_eagain = 0;

	for (int n = 1; n <= 4; n++) {
		char v[32];
		weft_thread_t t[4];
		int ok = 0;

		snprintf(v, sizeof(v), "alloc:%d", n);
		setenv("WEFT_FAULT", v, 1);
		wt_init_workers(1);
		for (int i = 0; i < 4; i++) {
			int rc = weft_spawn(&t[i], ret_arg, NULL, NULL);

			ck_assert(rc == 0 || rc == EAGAIN);
			if (rc == EAGAIN)
				saw_eagain = 1;
			else
				t[ok++] = t[i];
		}
		for (int i = 0; i < ok; i++)
			ck_assert_int_eq(weft_join(t[i], NULL), 0);
		wt_shutdown();
		unsetenv("WEFT_FAULT");
	}
	ck_assert(saw_eagain);
}
END_TEST

static Suite *thread_suite(void)
{
	Suite *s = suite_create("thread");
	TCase *tc;

	tc = tcase_create("basic");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, spawn_join_value, 0, wt_nconfigs);
	tcase_add_loop_test(tc, spawn_join_100k, 0, wt_nconfigs);
	tcase_add_loop_test(tc, spawn_tree, 0, wt_nconfigs);
	tcase_add_loop_test(tc, exit_value, 0, wt_nconfigs);
	tcase_add_loop_test(tc, detached_run, 0, wt_nconfigs);
	tcase_add_loop_test(tc, detach_later, 0, wt_nconfigs);
	tcase_add_loop_test(tc, keys_destructors, 0, wt_nconfigs);
	tcase_add_test(tc, yield_order);
	tcase_add_loop_test(tc, attrs, 0, wt_nconfigs);
	tcase_add_loop_test(tc, park_unpark, 0, wt_nconfigs);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, bad_input, 0, wt_nconfigs);
	tcase_add_test(tc, bad_config);
	tcase_add_test(tc, fault_injection);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return wt_run_suite(thread_suite());
}
