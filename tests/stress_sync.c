/*
 * tests/stress_sync.c - bounded, seeded stress of the sync primitives.
 *
 * Weft threads and OS threads run a random mix of operations on a few
 * mutexes, a cond-protected ticket queue, semaphores (post, post_n, post_wq,
 * trywait, timedwait with tiny deadlines), an rwlock and a wait group for
 * WEFT_STRESS_SECONDS (default 2), then meet at a barrier. At the end the
 * global invariants are checked: every mutex-protected counter equals the
 * sum of the increments made under it; every ticket produced was consumed
 * or is still queued; semaphore units are conserved (initial + posted =
 * taken + value); the rwlock never had a reader and a writer inside at
 * once; every object is left clean (destroy succeeds).
 * Prints seed= (WEFT_TEST_SEED replays the random choices, not the
 * interleaving) and the operation counts.
 */
#include "tests/sync_common.h"

#include <stdio.h>

#define NMUTEX 4
#define NSEM 4

struct world {
	weft_mutex_t mu[NMUTEX];
	long count[NMUTEX];               /* under mu[i] */
	_Atomic long incs[NMUTEX];        /* increments made */

	weft_mutex_t qm;
	weft_cond_t qc;
	long tickets;                     /* qm */
	_Atomic long produced, consumed;

	weft_sem_t sem[NSEM];
	_Atomic long posted[NSEM], taken[NSEM];

	weft_rwlock_t rw;
	_Atomic int readers, writers;
	long rwcount;                     /* write hold */
	_Atomic long rwwrites;

	weft_barrier_t end_barrier;
	weft_waitgroup_t wg;
	_Atomic int serials;

	weft_time_t end;
	uint64_t seed;
	_Atomic long ops, timeouts;
};

static void op_mutex(struct world *w, uint64_t *rng)
{
	uint64_t r = wt_rand(rng);
	int i = r % NMUTEX, rc;

	switch ((r >> 8) % 4) {
	case 0:
		while ((rc = weft_mutex_trylock(&w->mu[i])) == EBUSY)
			weft_yield();
		break;
	case 1:
		rc = weft_mutex_timedlock(&w->mu[i], weft_now_ns() + (r >> 16) % 50000);
		if (rc == ETIMEDOUT) {
			atomic_fetch_add(&w->timeouts, 1);
			return;
		}
		break;
	default:
		rc = weft_mutex_lock(&w->mu[i]);
		break;
	}
	WT_CHECK(rc == 0);
	w->count[i]++;
	if ((r >> 24) % 16 == 0)
		weft_yield();
	else if ((r >> 24) % 16 == 1)
		sc_spin_ns((r >> 32) % 5000);
	atomic_fetch_add(&w->incs[i], 1);
	WT_CHECK(weft_mutex_unlock(&w->mu[i]) == 0);
}

static void op_queue(struct world *w, uint64_t *rng)
{
	uint64_t r = wt_rand(rng);

	WT_CHECK(weft_mutex_lock(&w->qm) == 0);
	if (r & 1) {
		w->tickets++;
		atomic_fetch_add(&w->produced, 1);
		if (r & 2)
			WT_CHECK(weft_cond_signal(&w->qc) == 0);
		else if ((r & 12) == 0)
			WT_CHECK(weft_cond_broadcast(&w->qc) == 0);
	} else {
		while (w->tickets == 0 && weft_now_ns() < w->end) {
			int rc = weft_cond_timedwait(&w->qc, &w->qm,
						     weft_now_ns() + (r >> 8) % 200000);
			WT_CHECK(rc == 0 || rc == ETIMEDOUT);
		}
		if (w->tickets > 0) {
			w->tickets--;
			atomic_fetch_add(&w->consumed, 1);
		}
	}
	WT_CHECK(weft_mutex_unlock(&w->qm) == 0);
	if (r & 16)
		WT_CHECK(weft_cond_signal(&w->qc) == 0);   /* outside the mutex */
}

static void op_sem(struct world *w, uint64_t *rng)
{
	uint64_t r = wt_rand(rng);
	int i = r % NSEM, rc;
	unsigned n = 1 + (r >> 8) % 4;
	weft_wakeq_t wq;

	switch ((r >> 16) % 5) {
	case 0:
		WT_CHECK(weft_sem_post(&w->sem[i]) == 0);
		atomic_fetch_add(&w->posted[i], 1);
		break;
	case 1:
		WT_CHECK(weft_sem_post_n(&w->sem[i], n) == 0);
		atomic_fetch_add(&w->posted[i], n);
		break;
	case 2:
		weft_wakeq_init(&wq);
		WT_CHECK(weft_sem_post_wq(&w->sem[i], n, &wq) == 0);
		WT_CHECK(weft_sem_post_wq(&w->sem[(i + 1) % NSEM], 1, &wq) == 0);
		atomic_fetch_add(&w->posted[i], n);
		atomic_fetch_add(&w->posted[(i + 1) % NSEM], 1);
		WT_CHECK(weft_wakeq_flush(&wq) == 0);
		break;
	case 3:
		if (weft_sem_trywait(&w->sem[i]) == 0)
			atomic_fetch_add(&w->taken[i], 1);
		break;
	default:
		rc = weft_sem_timedwait(&w->sem[i],
					weft_now_ns() + ((r >> 24) & 1 ? 1 : (r >> 32) % 100000));
		if (rc == 0)
			atomic_fetch_add(&w->taken[i], 1);
		else
			atomic_fetch_add(&w->timeouts, 1);
		WT_CHECK(rc == 0 || rc == ETIMEDOUT);
		break;
	}
}

static void op_rwlock(struct world *w, uint64_t *rng)
{
	uint64_t r = wt_rand(rng);
	int rc;

	if (r % 4 == 0) {
		rc = (r & 4) ? weft_rwlock_timedwrlock(&w->rw, weft_now_ns() + (r >> 8) % 100000)
			     : weft_rwlock_wrlock(&w->rw);
		if (rc == ETIMEDOUT)
			return;
		WT_CHECK(rc == 0);
		WT_CHECK(atomic_fetch_add(&w->writers, 1) == 0);
		WT_CHECK(atomic_load(&w->readers) == 0);
		w->rwcount++;
		atomic_fetch_add(&w->rwwrites, 1);
		atomic_fetch_sub(&w->writers, 1);
	} else {
		rc = (r & 4) ? weft_rwlock_timedrdlock(&w->rw, weft_now_ns() + (r >> 8) % 100000)
			     : weft_rwlock_rdlock(&w->rw);
		if (rc == ETIMEDOUT)
			return;
		WT_CHECK(rc == 0);
		atomic_fetch_add(&w->readers, 1);
		WT_CHECK(atomic_load(&w->writers) == 0);
		if (r & 8)
			weft_yield();
		atomic_fetch_sub(&w->readers, 1);
	}
	WT_CHECK(weft_rwlock_unlock(&w->rw) == 0);
}

static void body(int idx, void *arg)
{
	struct world *w = arg;
	uint64_t rng = w->seed * 0x9e3779b97f4a7c15ull + (uint64_t)idx * 7919 + 1;
	long ops = 0;
	int rc;

	while (weft_now_ns() < w->end) {
		switch (wt_rand(&rng) % 4) {
		case 0: op_mutex(w, &rng); break;
		case 1: op_queue(w, &rng); break;
		case 2: op_sem(w, &rng); break;
		default: op_rwlock(w, &rng); break;
		}
		ops++;
	}
	atomic_fetch_add(&w->ops, ops);
	rc = weft_barrier_wait(&w->end_barrier);
	WT_CHECK(rc == 0 || rc == WEFT_BARRIER_SERIAL_THREAD);
	if (rc == WEFT_BARRIER_SERIAL_THREAD)
		atomic_fetch_add(&w->serials, 1);
	WT_CHECK(weft_waitgroup_done(&w->wg) == 0);
}

static void run_world(int cfg, int nweft, int nos, double seconds)
{
	struct world *w = calloc(1, sizeof(*w));
	struct sc_group g;
	int v;

	ck_assert_ptr_nonnull(w);
	w->seed = wt_seed();
	for (int i = 0; i < NMUTEX; i++)
		weft_mutex_init(&w->mu[i]);
	for (int i = 0; i < NSEM; i++)
		ck_assert_int_eq(weft_sem_init(&w->sem[i], i), 0);
	ck_assert_int_eq(weft_barrier_init(&w->end_barrier, nweft + nos), 0);
	ck_assert_int_eq(weft_waitgroup_add(&w->wg, nweft + nos), 0);
	w->end = weft_now_ns() + (weft_time_t)(seconds * 1e9);

	sc_start(&g, nweft, nos, body, w);
	ck_assert_int_eq(weft_waitgroup_wait(&w->wg), 0);
	sc_join(&g);
	wt_assert_no_failure();

	printf("stress_sync[%s] %d weft + %d OS threads, %.1f s: ops=%ld timeouts=%ld "
	       "tickets %ld/%ld rw writes=%ld\n", wt_configs[cfg].name, nweft, nos, seconds,
	       atomic_load(&w->ops), atomic_load(&w->timeouts), atomic_load(&w->consumed),
	       atomic_load(&w->produced), atomic_load(&w->rwwrites));
	fflush(stdout);
	ck_assert_int_eq(atomic_load(&w->serials), 1);
	for (int i = 0; i < NMUTEX; i++) {
		ck_assert_int_eq(w->count[i], atomic_load(&w->incs[i]));
		ck_assert_int_eq(weft_mutex_destroy(&w->mu[i]), 0);
	}
	ck_assert_int_eq(atomic_load(&w->produced) - atomic_load(&w->consumed), w->tickets);
	ck_assert_int_eq(weft_cond_destroy(&w->qc), 0);
	ck_assert_int_eq(weft_mutex_destroy(&w->qm), 0);
	for (int i = 0; i < NSEM; i++) {
		ck_assert_int_eq(weft_sem_getvalue(&w->sem[i], &v), 0);
		ck_assert_int_eq(i + atomic_load(&w->posted[i]), atomic_load(&w->taken[i]) + v);
		ck_assert_int_eq(weft_sem_destroy(&w->sem[i]), 0);
	}
	ck_assert_int_eq(w->rwcount, atomic_load(&w->rwwrites));
	ck_assert_int_eq(weft_rwlock_destroy(&w->rw), 0);
	ck_assert_int_eq(weft_barrier_destroy(&w->end_barrier), 0);
	free(w);
}

START_TEST(test_stress)
{
	double s = wt_stress_seconds();

	wt_init(_i);
	/* the budget is split over the three configurations */
	run_world(_i, 48, 8, s / wt_nconfigs);
	wt_shutdown();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stress_sync");
	TCase *tc = wt_tcase(s, "stress", wt_stress_seconds() * 3 + 10);

	tcase_add_loop_test(tc, test_stress, 0, wt_nconfigs);
	return wt_run_suite(s);
}
