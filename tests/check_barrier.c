/*
 * tests/check_barrier.c - suite "barrier": weft_barrier_t, plus the other
 * one-shot meeting points, weft_once and weft_waitgroup_t.
 *
 * basic        count 1 and 2, reuse, destroy
 * errors       NULL, count 0, EBUSY while waited on, uninitialised;
 *              once: NULL, EDEADLK from inside fn; waitgroup: NULL,
 *              negative counter, out-of-range delta
 * generations  N threads x G generations: exactly one serial thread per
 *              generation, nobody runs ahead of a generation
 * once         fn runs exactly once; every caller returns after it ran
 * waitgroup    waiters wake when the counter reaches 0, weft and OS mixed
 */
#include "tests/sync_common.h"

START_TEST(test_basic)
{
	weft_barrier_t b;

	wt_init(0);
	ck_assert_int_eq(weft_barrier_init(&b, 1), 0);
	ck_assert_int_eq(weft_barrier_wait(&b), WEFT_BARRIER_SERIAL_THREAD);
	ck_assert_int_eq(weft_barrier_wait(&b), WEFT_BARRIER_SERIAL_THREAD);
	ck_assert_int_eq(weft_barrier_destroy(&b), 0);
	wt_shutdown();
}
END_TEST

struct arrive {
	weft_barrier_t *b;
	_Atomic int about_to_wait;
	_Atomic int rc;
};

static void arrive_body(int idx, void *arg)
{
	struct arrive *a = arg;

	(void)idx;
	atomic_store(&a->about_to_wait, 1);
	atomic_store(&a->rc, weft_barrier_wait(a->b));
}

START_TEST(test_errors)
{
	weft_barrier_t b = { { 0 } };
	struct sc_group g;

	wt_init(0);
	ck_assert_int_eq(weft_barrier_init(NULL, 2), EINVAL);
	ck_assert_int_eq(weft_barrier_init(&b, 0), EINVAL);
	ck_assert_int_eq(weft_barrier_wait(NULL), EINVAL);
	ck_assert_int_eq(weft_barrier_destroy(NULL), EINVAL);
	ck_assert_int_eq(weft_barrier_wait(&b), EINVAL);   /* never initialised */
	ck_assert_int_eq(weft_barrier_init(&b, 2), 0);
	ck_assert_int_eq(weft_barrier_destroy(&b), 0);
	ck_assert_int_eq(weft_barrier_wait(&b), EINVAL);   /* destroyed */
	ck_assert_int_eq(weft_barrier_init(&b, 2), 0);
	/* one waiter parked: EBUSY; the second arrival releases it. If the
	 * destroy came first (a slow start on a loaded box), the waiter gets
	 * EINVAL: join it, re-init and try again (no accesses overlap). */
	for (int tries = 0;; tries++) {
		struct arrive a = { .b = &b };
		int r;

		atomic_init(&a.about_to_wait, 0);
		atomic_init(&a.rc, 99);
		sc_start(&g, 1, 0, arrive_body, &a);
		while (!atomic_load(&a.about_to_wait))
			sc_sleep_ms(1);
		sc_sleep_ms(20);
		r = weft_barrier_destroy(&b);
		if (r == EBUSY) {
			ck_assert_int_ne(weft_barrier_wait(&b), EINVAL);
			sc_join(&g);
			ck_assert(atomic_load(&a.rc) == 0 ||
				  atomic_load(&a.rc) == WEFT_BARRIER_SERIAL_THREAD);
			break;
		}
		ck_assert_int_eq(r, 0);
		sc_join(&g);
		ck_assert_int_eq(atomic_load(&a.rc), EINVAL);
		ck_assert_int_lt(tries, 100);
		ck_assert_int_eq(weft_barrier_init(&b, 2), 0);
	}
	ck_assert_int_eq(weft_barrier_destroy(&b), 0);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* generations */

struct gen {
	weft_barrier_t b;
	int n, gens;
	_Atomic int arrived[64];  /* per generation: arrivals */
	_Atomic int serial[64];   /* per generation: serial returns */
};

static void gen_body(int idx, void *arg)
{
	struct gen *g = arg;

	(void)idx;
	for (int k = 0; k < g->gens; k++) {
		atomic_fetch_add(&g->arrived[k], 1);
		int rc = weft_barrier_wait(&g->b);

		WT_CHECK(rc == 0 || rc == WEFT_BARRIER_SERIAL_THREAD);
		if (rc == WEFT_BARRIER_SERIAL_THREAD)
			atomic_fetch_add(&g->serial[k], 1);
		/* everybody of generation k arrived before anyone left it */
		WT_CHECK(atomic_load(&g->arrived[k]) == g->n);
		if (idx % 5 == 0)
			weft_yield();
	}
}

static void run_gen(int nweft, int nos, int gens)
{
	struct gen *g = calloc(1, sizeof(*g));

	ck_assert_ptr_nonnull(g);
	g->n = nweft + nos;
	g->gens = gens;
	ck_assert_int_eq(weft_barrier_init(&g->b, g->n), 0);
	sc_run(nweft, nos, gen_body, g);
	wt_assert_no_failure();
	for (int k = 0; k < gens; k++) {
		ck_assert_int_eq(atomic_load(&g->arrived[k]), g->n);
		ck_assert_int_eq(atomic_load(&g->serial[k]), 1);
	}
	ck_assert_int_eq(weft_barrier_destroy(&g->b), 0);
	free(g);
}

START_TEST(test_generations)
{
	wt_init(_i);
	run_gen(2, 0, 64);
	run_gen(0, 2, 64);
	run_gen(3, 3, 64);
	run_gen(200, 8, 20);
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* once */

static weft_once_t once_obj = WEFT_ONCE_INIT;
static _Atomic int once_runs;
static _Atomic int once_done;

static void once_fn(void)
{
	atomic_fetch_add(&once_runs, 1);
	sc_sleep_ms(20);          /* the others must wait, parked */
	atomic_store(&once_done, 1);
}

static void once_body(int idx, void *arg)
{
	(void)idx;
	(void)arg;
	WT_CHECK(weft_once(&once_obj, once_fn) == 0);
	WT_CHECK(atomic_load(&once_done) == 1);
}

START_TEST(test_once)
{
	wt_init(_i);
	sc_run(20, 4, once_body, NULL);
	wt_assert_no_failure();
	ck_assert_int_eq(atomic_load(&once_runs), 1);
	ck_assert_int_eq(weft_once(&once_obj, once_fn), 0);
	ck_assert_int_eq(atomic_load(&once_runs), 1);
	wt_shutdown();
}
END_TEST

static weft_once_t rec_obj = WEFT_ONCE_INIT;
static _Atomic int rec_rc = -1;

static void rec_fn(void)
{
	atomic_store(&rec_rc, weft_once(&rec_obj, rec_fn));
}

START_TEST(test_once_errors)
{
	weft_once_t o = WEFT_ONCE_INIT;

	wt_init(0);
	ck_assert_int_eq(weft_once(NULL, once_fn), EINVAL);
	ck_assert_int_eq(weft_once(&o, NULL), EINVAL);
	ck_assert_int_eq(weft_once(&rec_obj, rec_fn), 0);
	ck_assert_int_eq(atomic_load(&rec_rc), EDEADLK);
	ck_assert_int_eq(weft_once(&rec_obj, rec_fn), 0);
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* waitgroup */

struct wgt {
	weft_waitgroup_t wg;
	int nworkers;
	_Atomic int finished;
	_Atomic int bad;          /* a waiter returned before every done */
};

static void wg_body(int idx, void *arg)
{
	struct wgt *w = arg;

	if (idx < w->nworkers) {
		sc_sleep_ms(1 + idx % 7);
		atomic_fetch_add(&w->finished, 1);
		WT_CHECK(weft_waitgroup_done(&w->wg) == 0);
	} else {
		WT_CHECK(weft_waitgroup_wait(&w->wg) == 0);
		if (atomic_load(&w->finished) != w->nworkers)
			atomic_store(&w->bad, 1);
	}
}

START_TEST(test_waitgroup)
{
	struct wgt w;
	static const struct { int nweft, nos, nworkers; } mix[] = {
		{ 10, 2, 8 }, { 2, 10, 8 }, { 100, 10, 100 },
	};

	wt_init(_i);
	for (unsigned k = 0; k < sizeof(mix) / sizeof(mix[0]); k++) {
		memset(&w, 0, sizeof(w));
		ck_assert_int_eq(weft_waitgroup_init(&w.wg), 0);
		w.nworkers = mix[k].nworkers;
		ck_assert_int_eq(weft_waitgroup_add(&w.wg, w.nworkers), 0);
		sc_run(mix[k].nweft, mix[k].nos, wg_body, &w);
		ck_assert_int_eq(atomic_load(&w.bad), 0);
		ck_assert_int_eq(weft_waitgroup_wait(&w.wg), 0);   /* 0: at once */
	}
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

START_TEST(test_waitgroup_errors)
{
	weft_waitgroup_t wg = WEFT_WAITGROUP_INITIALIZER;

	wt_init(0);
	ck_assert_int_eq(weft_waitgroup_init(NULL), EINVAL);
	ck_assert_int_eq(weft_waitgroup_add(NULL, 1), EINVAL);
	ck_assert_int_eq(weft_waitgroup_done(NULL), EINVAL);
	ck_assert_int_eq(weft_waitgroup_wait(NULL), EINVAL);
	ck_assert_int_eq(weft_waitgroup_done(&wg), EINVAL);      /* below 0 */
	ck_assert_int_eq(weft_waitgroup_add(&wg, -1), EINVAL);
	ck_assert_int_eq(weft_waitgroup_add(&wg, (long)INT32_MAX + 1), EINVAL);
	ck_assert_int_eq(weft_waitgroup_add(&wg, INT32_MAX), 0);
	ck_assert_int_eq(weft_waitgroup_add(&wg, 1), EINVAL);    /* above max */
	ck_assert_int_eq(weft_waitgroup_add(&wg, -(long)INT32_MAX), 0);
	ck_assert_int_eq(weft_waitgroup_wait(&wg), 0);
	ck_assert_int_eq(weft_waitgroup_add(&wg, 0), 0);
	ck_assert_int_eq(weft_waitgroup_wait(&wg), 0);
	wt_shutdown();
}
END_TEST

static Suite *barrier_suite(void)
{
	Suite *s = suite_create("barrier");
	TCase *tc;

	tc = wt_tcase(s, "basic", 10);
	tcase_add_test(tc, test_basic);

	tc = wt_tcase(s, "errors", 10);
	tcase_add_test(tc, test_errors);
	tcase_add_test(tc, test_once_errors);
	tcase_add_test(tc, test_waitgroup_errors);

	tc = wt_tcase(s, "generations", 30);
	tcase_add_loop_test(tc, test_generations, 0, wt_nconfigs);

	tc = wt_tcase(s, "once", 10);
	tcase_add_loop_test(tc, test_once, 0, wt_nconfigs);

	tc = wt_tcase(s, "waitgroup", 20);
	tcase_add_loop_test(tc, test_waitgroup, 0, wt_nconfigs);
	return s;
}

int main(void)
{
	return wt_run_suite(barrier_suite());
}
