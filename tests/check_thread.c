/*
 * tests/check_thread.c - suite "thread": spawn, join, detach, exit, yield,
 * keys, attributes, park/unpark, and every bad-input case.
 */
#include "tests/harness.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <unistd.h>
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
	enum { N = 100000 / WT_SCALE_DIV, BATCH = 1000 };
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
	weft_stats_t s0, s1;
	weft_thread_t t;
	void *r;

	wt_init(_i);
	weft_stats_get(&s0);
	ck_assert_int_eq(weft_spawn(&t, tree, (void *)12L, NULL), 0);
	ck_assert_int_eq(weft_join(t, &r), 0);
	wt_assert_no_failure();
	ck_assert_int_eq((long)r, 4096);
	/* the spawn and exit counters see every thread of the tree (2^13 - 1),
	 * spawned from weft threads and from this OS thread */
	weft_stats_get(&s1);
	ck_assert_uint_eq(s1.spawns - s0.spawns, 8191);
	ck_assert_uint_eq(s1.exits - s0.exits, 8191);
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

/* A yield also goes behind threads that are runnable on the worker but
 * still in its mailbox: B, parked, is unparked from this OS thread while
 * A runs on the only worker; A's yield must let B run first. Before the
 * fix, the yield queued A first and drained the mailbox after it: A came
 * back before B ran in 50 of 50 rounds. */
static _Atomic int ym_go, ym_b_ran, ym_sent, ym_a_ready;

static void *ym_b(void *arg)
{
	(void)arg;
	while (!atomic_load(&ym_go))
		weft_park();
	atomic_store(&ym_b_ran, 1);
	return NULL;
}

static void *ym_a(void *arg)
{
	(void)arg;
	atomic_store(&ym_a_ready, 1);
	while (!atomic_load(&ym_sent))
		;                      /* keep the only worker busy */
	weft_yield();
	return (void *)(intptr_t)atomic_load(&ym_b_ran);
}

START_TEST(yield_behind_mailbox)
{
	wt_init_workers(1);
	for (int i = 0; i < 20; i++) {
		weft_thread_t a, b;
		void *r = NULL;
		weft_stats_t s0, s;

		atomic_store(&ym_go, 0);
		atomic_store(&ym_b_ran, 0);
		atomic_store(&ym_sent, 0);
		atomic_store(&ym_a_ready, 0);
		weft_stats_get(&s0);
		ck_assert_int_eq(weft_spawn(&b, ym_b, NULL, NULL), 0);
		do {                   /* until B has parked (its park is counted) */
			usleep(100);
			weft_stats_get(&s);
		} while (s.thread_parks == s0.thread_parks);
		ck_assert_int_eq(weft_spawn(&a, ym_a, NULL, NULL), 0);
		while (!atomic_load(&ym_a_ready))
			;
		atomic_store(&ym_go, 1);
		ck_assert_int_eq(weft_unpark(b), 0);   /* into the mailbox */
		atomic_store(&ym_sent, 1);
		ck_assert_int_eq(weft_join(a, &r), 0);
		ck_assert_int_eq(weft_join(b, NULL), 0);
		ck_assert_msg(r != NULL, "round %d: the yield returned before B ran", i);
	}
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

/* A TCB keeps its stack after a detached exit or an exit into a waiting
 * weft joiner (tcb.c "Stacks that stay with their TCB"); a later spawn
 * that takes the TCB with another stack size or guard setting must get a
 * stack of its own size. The big child touches 3 MiB of its stack: on a
 * reused default-size stack it would hit the guard page. */
static void *stack_toucher(void *arg)
{
	size_t n = (size_t)(uintptr_t)arg;
	volatile char *buf = __builtin_alloca(n);

	for (size_t i = 0; i < n; i += 4096)
		buf[i] = 1;
	return (void *)(uintptr_t)buf[n - 4096];
}

static void *stack_reuse_driver(void *arg)
{
	(void)arg;
	for (int round = 0; round < 20; round++) {
		weft_attr_t a;
		weft_thread_t t;
		void *r = NULL;

		/* default size: exits into this joiner, its TCB keeps the stack */
		WT_CHECK(weft_spawn(&t, ret_arg, NULL, NULL) == 0);
		WT_CHECK(weft_join(t, NULL) == 0);
		weft_attr_init(&a);
		a.detached = 1;
		WT_CHECK(weft_spawn(NULL, ret_arg, NULL, &a) == 0);
		weft_yield();
		/* a bigger stack, and no guard page, from the same TCB cache */
		weft_attr_init(&a);
		a.stack_size = 4u << 20;
		a.guard = round & 1;
		WT_CHECK(weft_spawn(&t, stack_toucher, (void *)(uintptr_t)(3u << 20), &a) == 0);
		WT_CHECK(weft_join(t, &r) == 0);
		WT_CHECK((uintptr_t)r == 1);
	}
	return NULL;
}

START_TEST(stack_reuse_sizes)
{
	weft_thread_t t;
	weft_attr_t a;

	wt_init(_i);
	weft_attr_init(&a);
	a.worker = 0;
	ck_assert_int_eq(weft_spawn(&t, stack_reuse_driver, NULL, &a), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	wt_assert_no_failure();
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
	/* a joinable thread needs a handle: nobody could join it */
	ck_assert_int_eq(weft_spawn(NULL, ret_arg, NULL, NULL), EINVAL);
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

/* A spawn refused for a bad attribute does not start the runtime
 * implicitly (the checks that need no runtime come first). */
START_TEST(bad_attr_no_implicit_init)
{
	weft_attr_t a;
	weft_thread_t t;

	weft_attr_init(&a);
	a.stack_size = 100;
	ck_assert_int_eq(weft_spawn(&t, ret_arg, NULL, &a), EINVAL);
	weft_attr_init(&a);
	a.guard = 2;
	ck_assert_int_eq(weft_spawn(&t, ret_arg, NULL, &a), EINVAL);
	ck_assert_int_eq(weft_shutdown(), EINVAL);   /* never started */
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
 * allocation fail; spawn reports EAGAIN, nothing leaks, runtime healthy.
 * Spawn allocates only to grow the TCB pool: this test runs first (see
 * thread_suite). */
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

/* A join that switches straight to its child (thread.c "Direct join")
 * must survive the child's stack allocation failing at that switch: the
 * child is queued again and the joiner parks until it ran and exited.
 * Distinct stack sizes make every child allocate a fresh stack. */
static void *fj_parent(void *arg)
{
	int eagain = 0;

	(void)arg;
	for (int i = 0; i < 6; i++) {
		weft_attr_t a;
		weft_thread_t c;
		void *r = NULL;
		int rc;

		weft_attr_init(&a);
		a.stack_size = (size_t)(64 + 16 * i) << 10;
		rc = weft_spawn(&c, ret_arg, (void *)(intptr_t)(i + 1), &a);
		WT_CHECK(rc == 0 || rc == EAGAIN);
		if (rc) {
			eagain++;
			continue;
		}
		WT_CHECK(weft_join(c, &r) == 0);
		WT_CHECK(r == (void *)(intptr_t)(i + 1));
	}
	return (void *)(intptr_t)eagain;
}

START_TEST(fault_direct_join)
{
	for (int n = 1; n <= 12; n++) {
		char v[32];
		weft_thread_t p;
		int rc;

		snprintf(v, sizeof(v), "alloc:%d", n);
		setenv("WEFT_FAULT", v, 1);
		wt_init_workers(1);
		rc = weft_spawn(&p, fj_parent, NULL, NULL);
		ck_assert(rc == 0 || rc == EAGAIN);
		if (rc == 0)
			ck_assert_int_eq(weft_join(p, NULL), 0);
		wt_assert_no_failure();
		wt_shutdown();
		unsetenv("WEFT_FAULT");
	}
}
END_TEST

/* Two joiners race for one thread (the API gives one of them the result
 * and the other EINVAL): A, on worker 0, spawns and joins each child; B,
 * a weft thread on worker 1 or a plain OS thread, joins the same handle
 * at once. Each round exactly one join returns 0 with the child's value,
 * and neither hangs. With the joiner named in a field written before the
 * claiming CAS, the loser overwrote the winner's name: the exit woke the
 * loser a second time and the winner never (hung within ~150 rounds), or
 * an OS loser's dead stack waiter. */
/* Up to RJ_ROUNDS rounds, at least RJ_MIN_ROUNDS, and no new round
 * after RJ_BUDGET_NS: each round is a hand-off between two workers or an
 * OS thread, and with the host's CPUs taken by other suites a round once
 * cost over a millisecond (TSan: the 30 s timeout expired). */
#define RJ_ROUNDS 20000
#define RJ_MIN_ROUNDS 2000
#define RJ_BUDGET_NS 8000000000ull
#define RJ_STOP (-1L)
static _Atomic(weft_thread_t) rj_cur;
static _Atomic long rj_pub, rj_b_done, rj_a_won, rj_b_won, rj_rounds;

static void *rj_a(void *arg)
{
	weft_time_t end = weft_now_ns() + RJ_BUDGET_NS;
	long i;

	(void)arg;
	for (i = 1; i <= RJ_ROUNDS; i++) {
		weft_thread_t t, d;
		void *r = NULL;
		int rc;

		if (i > RJ_MIN_ROUNDS && weft_now_ns() > end)
			break;
		WT_CHECK(weft_spawn(&t, ret_arg, (void *)(intptr_t)i, NULL) == 0);
		/* every other round a second child heads the queue: the join
		 * of t then parks and registers after its switch (the wider
		 * window), else it switches straight to t */
		if (i & 1)
			WT_CHECK(weft_spawn(&d, ret_arg, NULL, NULL) == 0);
		atomic_store(&rj_cur, t);
		atomic_store(&rj_pub, i);
		rc = weft_join(t, &r);
		if (i & 1)
			WT_CHECK(weft_join(d, NULL) == 0);
		WT_CHECK(rc == 0 || rc == EINVAL);
		if (rc == 0) {
			atomic_fetch_add(&rj_a_won, 1);
			WT_CHECK(r == (void *)(intptr_t)i);
		}
		/* B is done with the handle before the TCB can be reused */
		while (atomic_load(&rj_b_done) != i)
			weft_yield();
	}
	atomic_store(&rj_rounds, i - 1);
	atomic_store(&rj_pub, RJ_STOP);
	return NULL;
}

static void *rj_b(void *arg)
{
	(void)arg;
	for (long i = 1;; i++) {
		void *r = NULL;
		long pub;
		int rc;

		while ((pub = atomic_load(&rj_pub)) != i && pub != RJ_STOP)
			;
		if (pub == RJ_STOP)
			break;
		rc = weft_join(atomic_load(&rj_cur), &r);
		WT_CHECK(rc == 0 || rc == EINVAL);
		if (rc == 0) {
			atomic_fetch_add(&rj_b_won, 1);
			WT_CHECK(r == (void *)(intptr_t)i);
		}
		atomic_store(&rj_b_done, i);
	}
	return NULL;
}

START_TEST(racing_joiners)
{
	weft_attr_t a;
	weft_thread_t ta, tb;

	wt_init_workers(2);
	atomic_store(&rj_pub, 0);
	atomic_store(&rj_b_done, 0);
	atomic_store(&rj_a_won, 0);
	atomic_store(&rj_b_won, 0);
	atomic_store(&rj_rounds, 0);
	weft_attr_init(&a);
	a.worker = 0;
	ck_assert_int_eq(weft_spawn(&ta, rj_a, NULL, &a), 0);
	if (_i == 0) {
		a.worker = 1;
		ck_assert_int_eq(weft_spawn(&tb, rj_b, NULL, &a), 0);
		ck_assert_int_eq(weft_join(tb, NULL), 0);
	} else {
		rj_b(NULL);   /* B is this OS thread */
	}
	ck_assert_int_eq(weft_join(ta, NULL), 0);
	wt_assert_no_failure();
	ck_assert_int_ge(atomic_load(&rj_rounds), RJ_MIN_ROUNDS);
	ck_assert_int_eq(atomic_load(&rj_a_won) + atomic_load(&rj_b_won), atomic_load(&rj_rounds));
	wt_shutdown();
}
END_TEST

/* A plain OS thread registered in weft_join keeps its claim while the
 * thread exits: a detach or a second join that comes after the
 * registration gets EINVAL, also in the window between the exit and the
 * joiner's wakeup. (The exit stored EXITED there: the other party reaped
 * the thread, the registered joiner failed, or, once the TCB was reused,
 * reaped the next thread and returned its value.) The other party tries
 * once the joiner sleeps in the kernel (it has registered: an OS joiner
 * waits on a futex; seen in /proc/self/task/TID/syscall, at least 5 ms
 * after the handle is published, at most 5 s), until the join has
 * returned; rounds alternate detach and join. (A fixed 5 ms alone let a
 * joiner that the host descheduled before registering lose legitimately.) */
#define OJ_ROUNDS 150
static _Atomic(weft_thread_t) oj_cur;
static _Atomic long oj_pub, oj_go, oj_main_done, oj_ack, oj_stolen;
static _Atomic pid_t oj_tid;

/* Whether OS thread tid sleeps in futex(2) now; true if that cannot be
 * read (then the 5 ms before the first look is all there is). The kernel
 * function it sleeps in (wchan) names the futex on any architecture; the
 * syscall number is the fallback where wchan is hidden ("0"). Under
 * qemu-user that number is the host's (x86-64 futex is 202, aarch64's 98),
 * so it is read only when wchan says nothing. */
static bool oj_in_futex(pid_t tid)
{
	char path[64], buf[64];
	long nr = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/wchan", (int)tid);
	f = fopen(path, "r");
	if (f) {
		bool named = fgets(buf, sizeof(buf), f) && buf[0] && strcmp(buf, "0") != 0;

		fclose(f);
		if (named)
			return strstr(buf, "futex") != NULL;
	}
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return true;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	if (sscanf(buf, "%ld", &nr) != 1)
		return strncmp(buf, "running", 7) != 0;
	return nr == SYS_futex;
}

static void *oj_child(void *arg)
{
	while (!atomic_load(&oj_go))
		weft_yield();
	return arg;
}

static void *oj_other(void *arg)
{
	(void)arg;
	for (long i = 1; i <= OJ_ROUNDS; i++) {
		weft_thread_t c;

		while (atomic_load(&oj_pub) != i)
			weft_yield();
		c = atomic_load(&oj_cur);
		weft_sleep_ns(5000000);
		for (int n = 0; n < 5000 && !oj_in_futex(atomic_load(&oj_tid)); n++)
			weft_sleep_ns(1000000);
		atomic_store(&oj_go, 1);
		while (!atomic_load(&oj_main_done)) {
			void *r = NULL;
			int rc = (i & 1) ? weft_detach(c) : weft_join(c, &r);

			WT_CHECK(rc == 0 || rc == EINVAL);
			if (rc == 0) {
				atomic_fetch_add(&oj_stolen, 1);
				break;
			}
		}
		atomic_store(&oj_ack, i);
	}
	return NULL;
}

START_TEST(os_joiner_keeps_claim)
{
	weft_attr_t a;
	weft_thread_t o;

	wt_init_workers(2);
	atomic_store(&oj_tid, (pid_t)syscall(SYS_gettid));
	atomic_store(&oj_pub, 0);
	atomic_store(&oj_ack, 0);
	atomic_store(&oj_stolen, 0);
	weft_attr_init(&a);
	a.worker = 1;
	ck_assert_int_eq(weft_spawn(&o, oj_other, NULL, &a), 0);
	a.worker = 0;
	for (long i = 1; i <= OJ_ROUNDS; i++) {
		weft_thread_t c;
		void *r = NULL;

		atomic_store(&oj_go, 0);
		atomic_store(&oj_main_done, 0);
		ck_assert_int_eq(weft_spawn(&c, oj_child, (void *)(intptr_t)i, &a), 0);
		atomic_store(&oj_cur, c);
		atomic_store(&oj_pub, i);
		ck_assert_int_eq(weft_join(c, &r), 0);
		ck_assert_ptr_eq(r, (void *)(intptr_t)i);
		atomic_store(&oj_main_done, 1);
		while (atomic_load(&oj_ack) != i)
			usleep(10);
	}
	ck_assert_int_eq(weft_join(o, NULL), 0);
	wt_assert_no_failure();
	ck_assert_int_eq(atomic_load(&oj_stolen), 0);
	wt_shutdown();
}
END_TEST

/* A thread parked in weft_join is woken by its child's exit only:
 * unparks aimed at it leave it parked (their token stays for its next
 * ordinary park), and the join returns the child's value after it exited. */
static _Atomic int jc_release, jc_done;

static void *jc_child(void *arg)
{
	while (!atomic_load(&jc_release))
		weft_sleep_ns(100000);
	atomic_store(&jc_done, 1);
	return arg;
}

static void *jc_joiner(void *arg)
{
	weft_thread_t c;
	void *r = NULL;

	(void)arg;
	WT_CHECK(weft_spawn(&c, jc_child, (void *)0x5a5a, NULL) == 0);
	WT_CHECK(weft_join(c, &r) == 0);
	WT_CHECK(atomic_load(&jc_done) == 1);
	WT_CHECK(r == (void *)0x5a5a);
	/* the stray unparks' token: one ordinary park returns at once */
	WT_CHECK(weft_park_until(weft_now_ns() + 2000000000ull) == 0);
	return NULL;
}

START_TEST(join_ignores_unpark)
{
	weft_thread_t j;

	wt_init(_i);
	atomic_store(&jc_release, 0);
	atomic_store(&jc_done, 0);
	ck_assert_int_eq(weft_spawn(&j, jc_joiner, NULL, NULL), 0);
	for (int i = 0; i < 200; i++) {
		ck_assert_int_eq(weft_unpark(j), 0);
		usleep(100);
	}
	atomic_store(&jc_release, 1);
	ck_assert_int_eq(weft_join(j, NULL), 0);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* A second joiner or a detach of a thread being joined gets EINVAL; the
 * first joiner still gets the value. */
static weft_thread_t jd_child_t;

static void *jd_second(void *arg)
{
	(void)arg;
	weft_sleep_ns(2000000);   /* the first joiner is parked by now */
	WT_CHECK(weft_join(jd_child_t, NULL) == EINVAL);
	WT_CHECK(weft_detach(jd_child_t) == EINVAL);
	atomic_store(&jc_release, 1);
	return NULL;
}

static void *jd_first(void *arg)
{
	void *r = NULL;

	(void)arg;
	WT_CHECK(weft_join(jd_child_t, &r) == 0);
	return r;
}

START_TEST(join_twice)
{
	weft_attr_t a;
	weft_thread_t s, f;
	void *r = NULL;

	wt_init(_i);
	atomic_store(&jc_release, 0);
	atomic_store(&jc_done, 0);
	/* all on worker 0, queued in this order (mailbox FIFO): the first
	 * joiner is parked in its join before the second one runs */
	weft_attr_init(&a);
	a.worker = 0;
	ck_assert_int_eq(weft_spawn(&jd_child_t, jc_child, (void *)7, &a), 0);
	ck_assert_int_eq(weft_spawn(&f, jd_first, NULL, &a), 0);
	ck_assert_int_eq(weft_spawn(&s, jd_second, NULL, &a), 0);
	ck_assert_int_eq(weft_join(f, &r), 0);
	ck_assert_ptr_eq(r, (void *)7);
	ck_assert_int_eq(weft_join(s, NULL), 0);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* scale */

/* A million spawned threads that have not run yet: each costs only its
 * TCB (stacks are allocated at first run). One worker, and the spawner
 * never blocks until all are spawned, so none of them can have run. */
/* Sanitizer builds run it at a tenth of the size (WT_SCALE_DIV). */
/* Under Valgrind (run-time check) a tenth too: memcheck's shadow of 10^6
 * TCBs exceeds its address-space segment table ("FATAL: VG_N_SEGMENTS is
 * too low"), as do 20,000 guarded stacks below. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define WT_ON_VALGRIND() RUNNING_ON_VALGRIND
#endif
#endif
#ifndef WT_ON_VALGRIND
#define WT_ON_VALGRIND() 0
#endif
#define MILLION (WT_ON_VALGRIND() ? 100000 : 1000000 / WT_SCALE_DIV)
static weft_thread_t *million;
static _Atomic long million_ran_early;

static void *million_spawner(void *arg)
{
	weft_attr_t a;

	(void)arg;
	weft_attr_init(&a);
	a.stack_size = 16 * 1024;
	for (long i = 0; i < MILLION; i++) {
		WT_CHECK(weft_spawn(&million[i], bump, NULL, &a) == 0);
		if (atomic_load(&wt_failure))
			return NULL;
	}
	/* relaxed: bump ran on this worker or not at all (one worker) */
	atomic_store(&million_ran_early, atomic_load(&counter));
	for (long i = 0; i < MILLION; i++)
		WT_CHECK(weft_join(million[i], NULL) == 0);
	return NULL;
}

START_TEST(million_unstarted)
{
	weft_thread_t t;

	million = calloc(MILLION, sizeof(*million));
	ck_assert_ptr_nonnull(million);
	wt_init_workers(1);
	atomic_store(&counter, 0);
	ck_assert_int_eq(weft_spawn(&t, million_spawner, NULL, NULL), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	wt_assert_no_failure();
	ck_assert_int_eq(atomic_load(&million_ran_early), 0);
	ck_assert_int_eq(atomic_load(&counter), MILLION);
	wt_shutdown();
	free(million);
}
END_TEST

/* 20,000 threads parked at the same time, each on its own guarded stack.
 * The stacks are slots of shared mappings with guard markers
 * (runtime/stack.c "Chunks"), so they need far fewer mappings than
 * stacks; before, each took 2 VMAs (40,000 of the default
 * vm.max_map_count of 65,530, and 1,000,000 parked threads could not
 * run). On a kernel without guard markers (before 6.13) each guarded
 * stack still has a mapping of its own. After they exit and the runtime
 * shuts down, every mapping is gone again. */
/* TSan makes every running light thread a TSan fiber, and it caps live
 * threads + fibers at 8128 (and each costs it ~1 MiB of trace mappings):
 * 2,000 there. */
#if defined(__SANITIZE_THREAD__)
#define PARKED 2000
#else
#define PARKED (WT_ON_VALGRIND() ? 2000 : 20000 / WT_SCALE_DIV)
#endif
static _Atomic int nparked;

static void *park_once(void *arg)
{
	(void)arg;
	atomic_fetch_add(&nparked, 1);
	while (weft_park() != 0)
		;
	return NULL;
}

/*
 * ASan's shadow memory is one huge mapping that ASan re-maps piecewise
 * (MAP_FIXED) when it clears the shadow of a large region, e.g. a fake
 * stack freed with detect_stack_use_after_return=1. In a Check fork child
 * the pieces stay split (anonymous VMAs the parent already faulted in do not
 * merge with new ones): measured ~37,000 shadow VMAs after this test, none
 * outside it, versus none extra without fork. ASan's, not weft's, so count
 * only the mappings outside the shadow.
 */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>

#if defined(__x86_64__)
#define WT_USER_VA_END ((uintptr_t)1 << 47)
#else
#define WT_USER_VA_END ((uintptr_t)1 << 48)   /* aarch64 48-bit VA */
#endif

static bool in_asan_shadow(uintptr_t a)
{
	size_t scale, offset;

	__asan_get_shadow_mapping(&scale, &offset);
	/* the shadow of the whole user address space */
	return a >= offset && a - offset < (WT_USER_VA_END >> scale);
}
#else
static bool in_asan_shadow(uintptr_t a)
{
	(void)a;
	return false;
}
#endif

/*
 * TSan keeps per-thread mappings (trace, shadow, meta: ~8 VMAs per fiber
 * that ever ran, measured) after the fibers die, in regions it does not
 * export. So under TSan count only what is recognisably a weft stack: a
 * one-page PROT_NONE guard directly below a read-write mapping of the
 * default stack size (what park_once runs on). Same under Valgrind.
 */
#if defined(__SANITIZE_THREAD__)
#define WT_COUNT_STACKS_ONLY 1
#else
/* Valgrind too: memcheck never unmaps the shadow it grew for the run */
#define WT_COUNT_STACKS_ONLY WT_ON_VALGRIND()
#endif

static int count_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	uintptr_t prev_end = 0;
	bool prev_guard = false;
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p;
		uintptr_t lo = (uintptr_t)strtoull(line, &p, 16);
		uintptr_t hi = (uintptr_t)strtoull(p + 1, &p, 16);
		const char *perms = p + 1;

		if (!WT_COUNT_STACKS_ONLY) {
			n += !in_asan_shadow(lo);
		} else {
			n += prev_guard && prev_end == lo && perms[0] == 'r' && perms[1] == 'w' &&
			     /* the usable part: the size plus the colour page
			      * (runtime/stack.c "Colouring") */
			     hi - lo == WEFT_STACK_DEFAULT + (uintptr_t)sysconf(_SC_PAGESIZE);
			prev_guard = !strncmp(perms, "---p", 4) &&
				     hi - lo == (uintptr_t)sysconf(_SC_PAGESIZE);
			prev_end = hi;
		}
		/* a line longer than the buffer: skip the rest of it */
		while (!strchr(line, '\n') && fgets(line, sizeof(line), f))
			;
	}
	fclose(f);
	return n;
}

START_TEST(parked_20k_guarded)
{
	weft_thread_t *ts = calloc(PARKED, sizeof(*ts));
	int before, during;
	long maxmap = wt_max_map_count();   /* 0: unknown */

	ck_assert_msg(maxmap == 0 || maxmap >= 2 * PARKED + 5000,
		      "vm.max_map_count %ld too low for %d guarded stacks", maxmap, PARKED);
	atomic_store(&nparked, 0);
	before = count_maps();
	wt_init(_i);
	for (int i = 0; i < PARKED; i++)
		ck_assert_int_eq(weft_spawn(&ts[i], park_once, NULL, NULL), 0);
	while (atomic_load(&nparked) < PARKED)
		usleep(1000);
	during = count_maps();
	if (wt_guard_markers())
		/* a chunk holds 248 default stacks: about 81 mappings */
		ck_assert_msg(during - before <= PARKED / 32,
			      "%d mappings for %d parked guarded stacks", during - before, PARKED);
	else
		/* every parked thread holds a stack and its guard page */
		ck_assert_int_ge(during - before, PARKED);
	for (int i = 0; i < PARKED; i++)
		ck_assert_int_eq(weft_unpark(ts[i]), 0);
	for (int i = 0; i < PARKED; i++)
		ck_assert_int_eq(weft_join(ts[i], NULL), 0);
	wt_shutdown();
	/* a few stay: malloc arenas of the worker threads */
	ck_assert_int_le(count_maps(), before + 64);
	free(ts);
}
END_TEST

/* Stack caches are bounded and trimmed while the runtime runs: a burst
 * of threads alive at once leaves its stacks cached (at most 64 on the
 * worker, the rest in the overflow pool, runtime/stack.c); once the worker
 * has been idle for the trim bound (10 ms, idle.c "Cache trim") it keeps
 * 8, and the pool is emptied because every worker sleeps. Each thread
 * records the page its frame was on; a trimmed stack's page is no longer
 * resident (mincore: unmapped, or a chunk slot given back with
 * MADV_DONTNEED, runtime/stack.c "Chunks"). */
static void *park_once_at(void *arg)
{
	*(uintptr_t *)arg = (uintptr_t)__builtin_frame_address(0);
	atomic_fetch_add(&nparked, 1);
	while (weft_park() != 0)
		;
	return NULL;
}

/* How many of the n pages at pages[] are not resident. */
static int not_resident(const uintptr_t *pages, int n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	int k = 0;

	for (int i = 0; i < n; i++) {
		unsigned char v = 0;

		if (mincore((void *)(pages[i] & ~(uintptr_t)(pg - 1)), pg, &v) != 0 || !(v & 1))
			k++;
	}
	return k;
}
START_TEST(stack_cache_trimmed_when_idle)
{
	enum { BURST = 200, KEPT_MAX = 16 };
	weft_thread_t *ts = calloc(BURST, sizeof(*ts));
	uintptr_t *pages = calloc(BURST, sizeof(*pages));
	weft_stats_t st0, st1;
	weft_time_t end;
	int all_mapped, now = 0;

	ck_assert_ptr_nonnull(ts);
	ck_assert_ptr_nonnull(pages);
	atomic_store(&nparked, 0);
	wt_init_workers(1);
	weft_stats_get(&st0);
	for (int i = 0; i < BURST; i++)
		ck_assert_int_eq(weft_spawn(&ts[i], park_once_at, &pages[i], NULL), 0);
	while (atomic_load(&nparked) < BURST)
		usleep(1000);
	/* Counted while every stack is in use, not after the joins: the
	 * exits give nothing back (64 cached, the rest fit the pool), and
	 * once the last one has exited the worker may be idle for the trim
	 * bound before this thread gets a CPU again (then nothing was left
	 * to see go away). */
	all_mapped = not_resident(pages, BURST);
	for (int i = 0; i < BURST; i++)
		ck_assert_int_eq(weft_unpark(ts[i]), 0);
	for (int i = 0; i < BURST; i++)
		ck_assert_int_eq(weft_join(ts[i], NULL), 0);
	/* the stacks beyond what a parked worker keeps go away, well
	 * within 2 s of idling, and the stats count them (stack_trims; none
	 * before the burst; the worker adds them after its munmap or
	 * madvise calls, so wait for both) */
	end = weft_now_ns() + 2000000000ull;
	do {
		usleep(5000);
		now = not_resident(pages, BURST);
		weft_stats_get(&st1);
	} while ((now - all_mapped < BURST - KEPT_MAX ||
		  st1.stack_trims - st0.stack_trims < BURST - KEPT_MAX) &&
		 weft_now_ns() < end);
	ck_assert_int_eq(all_mapped, 0);
	ck_assert_msg(now - all_mapped >= BURST - KEPT_MAX,
		      "%d stack pages not resident after idling, of %d", now, BURST);
	ck_assert_uint_ge(st1.stack_trims - st0.stack_trims, BURST - KEPT_MAX);
	wt_shutdown();
	free(ts);
	free(pages);
}
END_TEST

/* ... but not at every park: a worker that parks for less than the trim
 * bound between runs keeps its cache (idle.c "Cache trim"; trimming at
 * every park unmapped the stacks the next burst mapped again). All on one
 * worker, from a weft thread, so the worker is never idle for long
 * outside the sleeps: it fills the cache with 32 stacks, then sleeps
 * 200 us 50 times; a stalled host cannot fake a trim there, since a
 * worker whose timer is due does not park (and does not trim). */
enum { KEPT_STACKS = 32, KEPT_SLEEPS = 50 };

static void *kept_sleeper(void *arg)
{
	weft_stats_t *st = arg;
	weft_thread_t ts[KEPT_STACKS];

	for (int i = 0; i < KEPT_STACKS; i++)
		WT_CHECK(weft_spawn(&ts[i], park_once, NULL, NULL) == 0);
	while (atomic_load(&nparked) < KEPT_STACKS)
		weft_yield();
	for (int i = 0; i < KEPT_STACKS; i++)
		WT_CHECK(weft_unpark(ts[i]) == 0);
	for (int i = 0; i < KEPT_STACKS; i++)
		WT_CHECK(weft_join(ts[i], NULL) == 0);
	weft_stats_get(&st[0]);
	for (int i = 0; i < KEPT_SLEEPS; i++)
		weft_sleep_ns(200000);
	weft_stats_get(&st[1]);
	return NULL;
}

START_TEST(stack_cache_kept_over_short_parks)
{
	weft_stats_t st[2];
	weft_thread_t t;

	atomic_store(&nparked, 0);
	wt_init_workers(1);
	ck_assert_int_eq(weft_spawn(&t, kept_sleeper, st, NULL), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	wt_assert_no_failure();
	ck_assert_uint_ge(st[1].parks - st[0].parks, 1);
	ck_assert_uint_eq(st[1].stack_trims - st[0].stack_trims, 0);
	wt_shutdown();
}
END_TEST

/* Stacks that cannot be mapped: with the address space limited
 * (RLIMIT_AS) a spawned thread's first run fails to map its stack; the
 * thread waits and is retried, and later spawns that need a new stack
 * report EAGAIN (before, every spawn returned 0 and queued another thread
 * that could not run). With the limit lifted, the waiting thread runs and
 * spawns succeed again. Not under sanitizers or Valgrind, whose shadow
 * memory needs the address space. */
#include <sys/resource.h>

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
/* Limit the address space to what is mapped now plus 1 MiB, so that no
 * new stack of 8 MiB fits; the previous limit goes to *old. */
static void ss_limit_as(struct rlimit *old)
{
	struct rlimit lim;
	unsigned long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%lu", &pages), 1);
	fclose(f);
	ck_assert_int_eq(getrlimit(RLIMIT_AS, old), 0);
	lim = *old;
	lim.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (1u << 20);
	ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
}

/* Whether the limit set by ss_limit_as is enforced: an 8 MiB mapping must
 * fail. qemu-user accepts setrlimit(RLIMIT_AS) and ignores it (the limit
 * would apply to the emulator's own memory). */
static bool ss_limit_enforced(void)
{
	void *p = mmap(NULL, 8u << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return true;
	munmap(p, 8u << 20);
	return false;
}
#endif

START_TEST(stack_shortage_eagain)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return;
#else
	enum { SS_WAIT_MAX = 64 };
	struct rlimit old;
	weft_thread_t warm[8], a, b, waiting[SS_WAIT_MAX];
	int nwait = 0;
	weft_attr_t big;
	int rc = 0;
	weft_time_t end;
	void *r = NULL;

	if (WT_ON_VALGRIND())
		return;
	wt_init_workers(1);
	/* TCBs in the cache, so that a spawn below needs no new memory but
	 * its stack (a size nothing has used: a fresh mapping) */
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(weft_spawn(&warm[i], ret_arg, NULL, NULL), 0);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(weft_join(warm[i], NULL), 0);
	weft_attr_init(&big);
	big.stack_size = 8u << 20;
	ss_limit_as(&old);
	if (!ss_limit_enforced()) {
		ck_assert_int_eq(setrlimit(RLIMIT_AS, &old), 0);
		wt_skip("thread/stack_shortage_eagain: RLIMIT_AS is not enforced (qemu-user ignores it)");
		wt_shutdown();
		return;
	}

	ck_assert_int_eq(weft_spawn(&a, ret_arg, (void *)1, &big), 0);
	/* Spawns succeed until the worker has tried a's stack and failed;
	 * those threads wait as a does */
	end = weft_now_ns() + 2000000000ull;
	while (nwait < SS_WAIT_MAX && weft_now_ns() < end) {
		rc = weft_spawn(&waiting[nwait], ret_arg, (void *)2, &big);
		if (rc)
			break;
		nwait++;
		/* 1 ms, doubling every 8 probes up to 64 ms: the 64 probes
		 * span about 1.5 s, time for the worker to get a CPU */
		usleep(1000u << (nwait / 8 < 6 ? nwait / 8 : 6));
	}
	ck_assert_int_eq(setrlimit(RLIMIT_AS, &old), 0);
	ck_assert_int_eq(rc, EAGAIN);
	/* the threads that waited for their stacks run now */
	ck_assert_int_eq(weft_join(a, &r), 0);
	ck_assert_ptr_eq(r, (void *)1);
	for (int i = 0; i < nwait; i++)
		ck_assert_int_eq(weft_join(waiting[i], NULL), 0);
	ck_assert_int_eq(weft_spawn(&b, ret_arg, (void *)2, &big), 0);
	ck_assert_int_eq(weft_join(b, &r), 0);
	ck_assert_ptr_eq(r, (void *)2);
	wt_shutdown();
#endif
}
END_TEST

/* Once no thread waits for a stack, spawns succeed again, even if no
 * stack was freed or mapped meanwhile: two long-lived threads spawned
 * under the limit get their stacks from worker 0's cache after one of
 * them failed to map one on worker 1. Fails (5 of 5 runs) if a flag set
 * on a failed mapping and cleared by a mapping or a free does the
 * counting: it stays set here and refuses every spawn. */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static _Atomic int sc_running, sc_release, sc_warm;

/* A warm-up thread that exits only once all n of them run, so that each
 * has its own stack: threads that finished at once mapped one stack and
 * reused it (between one and four were cached, depending on timing; with
 * one, only one long-lived thread below could run: 4 of 12 runs under
 * load). */
static void *sc_warmup(void *arg)
{
	int n = (int)(intptr_t)arg;

	atomic_fetch_add(&sc_warm, 1);
	while (atomic_load(&sc_warm) < n)
		weft_yield();
	return NULL;
}

/* Wait until n threads have exited (the stats count exits at the exit
 * switch), at most ns. Returns whether they did. */
static bool wait_exits(uint64_t n, weft_time_t ns)
{
	weft_time_t end = weft_now_ns() + ns;
	weft_stats_t st;

	for (;;) {
		ck_assert_int_eq(weft_stats_get(&st), 0);
		if (st.exits >= n)
			return true;
		if (weft_now_ns() >= end)
			return false;
		usleep(1000);
	}
}

/* Four stacks of big's size on worker 0, from four threads alive at once
 * (sc_warmup). detached: they stay with the cached TCBs (tcb.c "Stacks
 * that stay with their TCB"); else this OS thread joins them and they go
 * to the worker's stack cache. No other thread may have exited yet
 * (wait_exits counts every exit since init). */
static void cache_big_stacks(const weft_attr_t *big, bool detached)
{
	weft_thread_t t[4];
	weft_attr_t at = *big;

	atomic_store(&sc_warm, 0);
	at.worker = 0;
	at.detached = detached;
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(weft_spawn(detached ? NULL : &t[i], sc_warmup,
					    (void *)(intptr_t)4, &at), 0);
	if (detached)
		ck_assert(wait_exits(4, 5000000000ull));
	else
		for (int i = 0; i < 4; i++)
			ck_assert_int_eq(weft_join(t[i], NULL), 0);
}

static void *sc_longlived(void *arg)
{
	atomic_fetch_add(&sc_running, 1);
	while (!atomic_load(&sc_release))
		weft_sleep_ns(1000000);
	return arg;
}

static void *sc_spawner(void *arg)
{
	weft_attr_t *big = arg;
	weft_time_t end = weft_now_ns() + 10000000000ull;

	for (int i = 0; i < 2; i++) {
		weft_attr_t at = *big;

		at.detached = 1;
		WT_CHECK(weft_spawn(NULL, sc_longlived, NULL, &at) == 0);
	}
	/* stays until the end: its exit would free a stack */
	while (!atomic_load(&sc_release) && weft_now_ns() < end)
		weft_yield();
	return NULL;
}
#endif

START_TEST(stack_shortage_clears)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return;
#else
	struct rlimit old;
	weft_thread_t sp, x;
	weft_attr_t big, sa;
	int rc;

	if (WT_ON_VALGRIND())
		return;
	/* DRAIN off: a draining worker 1 does not steal (the case below) */
	wt_init_features(2, "NO_DRAIN");
	if (weft_feature("STEAL") != 1 || weft_feature("DRAIN") == 1) {
		/* written for the steal path; the pool hand-off without steals
		 * is stack_shortage_peer_cache's */
		wt_shutdown();
		return;
	}
	atomic_store(&sc_running, 0);
	atomic_store(&sc_release, 0);
	weft_attr_init(&big);
	big.stack_size = 8u << 20;
	cache_big_stacks(&big, false);
	ss_limit_as(&old);
	weft_attr_init(&sa);
	sa.worker = 1;
	ck_assert_int_eq(weft_spawn(&sp, sc_spawner, &big, &sa), 0);
	for (int i = 0; i < 3000 && atomic_load(&sc_running) < 2; i++)
		usleep(1000);
	ck_assert_int_eq(setrlimit(RLIMIT_AS, &old), 0);
	ck_assert_int_eq(atomic_load(&sc_running), 2);
	/* nobody waits for a stack now, and none was freed: a spawn that
	 * needs a new one works */
	rc = weft_spawn(&x, ret_arg, (void *)3, NULL);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(weft_join(x, NULL), 0);
	atomic_store(&sc_release, 1);
	ck_assert_int_eq(weft_join(sp, NULL), 0);
	wt_assert_no_failure();
	wt_shutdown();
#endif
}
END_TEST

/* A thread that cannot map a stack gets one that another worker holds,
 * wherever it holds it. The waiter is pinned to worker 1 (no steal can
 * help) and worker 0 has the only big stacks:
 *   _i = 0  in its stack cache, while a pinned thread keeps it busy (it
 *           never idles, so it never steals);
 *   _i = 1  with its cached TCBs (detached threads keep their stack,
 *           tcb.c "Stacks that stay with their TCB"), busy as in 0;
 *   _i = 2  in its stack cache while it sleeps (parked deep, no tick).
 * While a thread waits for a stack, every worker hands what it holds to
 * the shared pool at its next pick, and the waiter's first failure kicks
 * the parked ones. Without that, the waiter waits until memory is freed
 * (case 0 failed 3 of 3 runs). */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static _Atomic int pc_stop;

static void *pc_busy(void *arg)
{
	weft_time_t end = weft_now_ns() + 10000000000ull;

	while (!atomic_load(&pc_stop) && weft_now_ns() < end)
		weft_yield();
	return arg;
}
#endif

START_TEST(stack_shortage_peer_cache)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return;
#else
	struct rlimit old;
	weft_thread_t busy, w;
	weft_attr_t big, at;
	void *r = NULL;
	bool ran = false;
	int rc;

	if (WT_ON_VALGRIND())
		return;
	wt_init_workers(2);
	atomic_store(&pc_stop, 0);
	if (_i != 2) {
		weft_attr_init(&at);
		at.worker = 0;
		ck_assert_int_eq(weft_spawn(&busy, pc_busy, NULL, &at), 0);
	}
	weft_attr_init(&big);
	big.stack_size = 8u << 20;
	cache_big_stacks(&big, _i == 1);
	if (_i == 2)
		usleep(100000);   /* both workers park deep (nothing ticks) */
	ss_limit_as(&old);
	at = big;
	at.worker = 1;
	rc = weft_spawn(&w, ret_arg, (void *)5, &at);
	if (rc == 0)   /* it ran, on a stack it could only get from the pool */
		ran = wait_exits(5, 3000000000ull);
	ck_assert_int_eq(setrlimit(RLIMIT_AS, &old), 0);
	ck_assert_int_eq(rc, 0);
	ck_assert_msg(ran, "the waiter did not run within 3 s");
	ck_assert_int_eq(weft_join(w, &r), 0);
	ck_assert_ptr_eq(r, (void *)5);
	if (_i != 2) {
		atomic_store(&pc_stop, 1);
		ck_assert_int_eq(weft_join(busy, NULL), 0);
	}
	wt_shutdown();
#endif
}
END_TEST

static Suite *thread_suite(void)
{
	Suite *s = suite_create("thread");
	TCase *tc;

	/* First: spawn allocates only when the TCB pool is empty, and the
	 * pool lives as long as the process, so under CK_FORK=no (one process
	 * for every test) only the suite's first test sees it cold. */
	tc = wt_tcase(s, "cold", 30);
	tcase_add_test(tc, fault_injection);

	tc = wt_tcase(s, "basic", 30);
	tcase_add_loop_test(tc, spawn_join_value, 0, wt_nconfigs);
	tcase_add_loop_test(tc, spawn_join_100k, 0, wt_nconfigs);
	tcase_add_loop_test(tc, spawn_tree, 0, wt_nconfigs);
	tcase_add_loop_test(tc, exit_value, 0, wt_nconfigs);
	tcase_add_loop_test(tc, detached_run, 0, wt_nconfigs);
	tcase_add_loop_test(tc, detach_later, 0, wt_nconfigs);
	tcase_add_loop_test(tc, keys_destructors, 0, wt_nconfigs);
	tcase_add_test(tc, yield_order);
	tcase_add_test(tc, yield_behind_mailbox);
	tcase_add_loop_test(tc, attrs, 0, wt_nconfigs);
	tcase_add_loop_test(tc, stack_reuse_sizes, 0, wt_nconfigs);
	tcase_add_loop_test(tc, park_unpark, 0, wt_nconfigs);
	tcase_add_loop_test(tc, join_ignores_unpark, 0, wt_nconfigs);
	tcase_add_loop_test(tc, join_twice, 0, wt_nconfigs);

	tc = wt_tcase(s, "scale", 60);
	tcase_add_test(tc, million_unstarted);
	tcase_add_loop_test(tc, parked_20k_guarded, 0, wt_nconfigs);
	tcase_add_test(tc, stack_cache_trimmed_when_idle);
	tcase_add_test(tc, stack_cache_kept_over_short_parks);

	tc = wt_tcase(s, "errors", 30);
	tcase_add_loop_test(tc, bad_input, 0, wt_nconfigs);
	tcase_add_test(tc, bad_config);
	tcase_add_test(tc, bad_attr_no_implicit_init);
	tcase_add_test(tc, fault_direct_join);
	tcase_add_test(tc, stack_shortage_eagain);
	tcase_add_test(tc, stack_shortage_clears);
	tcase_add_loop_test(tc, stack_shortage_peer_cache, 0, 3);
	tcase_add_loop_test(tc, racing_joiners, 0, 2);
	tcase_add_test(tc, os_joiner_keeps_claim);
	return s;
}

int main(void)
{
	return wt_run_suite(thread_suite());
}
