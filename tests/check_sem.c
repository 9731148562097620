/*
 * tests/check_sem.c - suite "sem": weft_sem_t and wake queues.
 *
 * basic      init/wait/trywait/post/getvalue, post_n, post_wq + flush
 * errors     every bad-input case: NULL, EINVAL above the max, EAGAIN,
 *            EOVERFLOW, EBUSY, ETIMEDOUT on a past deadline
 * conserve   units are conserved: producers post X (post, post_n,
 *            post_wq), consumers take exactly X, weft and OS threads mixed
 * timeout    sembench -T: 1 ns .. 50 us timed waits racing posts lose no
 *            unit and no wakeup; timedwait expiry and success
 * wakeq      a granted waiter stays blocked until the flush; batched wakes
 *            of many waiters across workers; flush counters; a timed-out
 *            waiter granted by a post_wq does not touch the semaphore
 *            destroyed before the flush (regression: use after free)
 * os_thread  OS threads wait for weft posts and the reverse
 * own_post   a thread's own post, then its trywait, finds the unit while
 *            other threads hold qlock and drain deferred posts (regression:
 *            EAGAIN while a drainer had exchanged deferred to 0 but not
 *            yet added the units to the value)
 * destroy_after_post
 *            a thread takes a slow post's unit, destroys the semaphore and
 *            makes its page inaccessible while the poster is still in its
 *            post call (regression: the poster read the deferred count and
 *            retried qlock after its unlock)
 */
#include "tests/sync_common.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

START_TEST(test_basic)
{
	weft_sem_t s;
	int v;

	wt_init(0);
	ck_assert_int_eq(weft_sem_init(&s, 2), 0);
	ck_assert_int_eq(weft_sem_getvalue(&s, &v), 0);
	ck_assert_int_eq(v, 2);
	ck_assert_int_eq(weft_sem_wait(&s), 0);
	ck_assert_int_eq(weft_sem_trywait(&s), 0);
	ck_assert_int_eq(weft_sem_trywait(&s), EAGAIN);
	ck_assert_int_eq(weft_sem_post(&s), 0);
	ck_assert_int_eq(weft_sem_timedwait(&s, sc_ms(10)), 0);
	ck_assert_int_eq(weft_sem_post_n(&s, 5), 0);
	ck_assert_int_eq(weft_sem_post_n(&s, 0), 0);
	ck_assert_int_eq(weft_sem_getvalue(&s, &v), 0);
	ck_assert_int_eq(v, 5);
	{
		weft_wakeq_t wq = WEFT_WAKEQ_INITIALIZER;

		ck_assert_int_eq(weft_sem_post_wq(&s, 3, &wq), 0);
		ck_assert_int_eq(weft_wakeq_flush(&wq), 0);
		ck_assert_int_eq(weft_wakeq_flush(&wq), 0);   /* empty flush */
		ck_assert_int_eq(weft_wakeq_init(&wq), 0);
	}
	ck_assert_int_eq(weft_sem_getvalue(&s, &v), 0);
	ck_assert_int_eq(v, 8);
	ck_assert_int_eq(weft_sem_destroy(&s), 0);
	wt_shutdown();
}
END_TEST

/* Has the waiter parked (so it is queued: it queues before it parks)?
 * Returns EBUSY then, else 0. A destroy cannot be the probe: one that
 * succeeds before the waiter queues destroys the semaphore for good. */
static int parked_fn(void *unused)
{
	weft_stats_t st;

	(void)unused;
	if (weft_stats_get(&st) != 0)
		return 0;
	return st.thread_parks > 0 ? EBUSY : 0;
}

static void waiter_body(int idx, void *arg)
{
	(void)idx;
	WT_CHECK(weft_sem_wait(arg) == 0);
}

START_TEST(test_errors)
{
	weft_sem_t s;
	weft_wakeq_t wq;
	struct sc_group g;
	int v;

	wt_init(0);
	ck_assert_int_eq(weft_sem_init(NULL, 0), EINVAL);
	ck_assert_int_eq(weft_sem_init(&s, WEFT_SEM_VALUE_MAX + 1u), EINVAL);
	ck_assert_int_eq(weft_sem_init(&s, WEFT_SEM_VALUE_MAX), 0);
	ck_assert_int_eq(weft_sem_post(&s), EOVERFLOW);
	ck_assert_int_eq(weft_sem_post_n(&s, 1), EOVERFLOW);
	ck_assert_int_eq(weft_sem_getvalue(&s, &v), 0);
	ck_assert_int_eq(v, (int)WEFT_SEM_VALUE_MAX);
	ck_assert_int_eq(weft_sem_init(&s, 0), 0);
	ck_assert_int_eq(weft_sem_post_n(&s, WEFT_SEM_VALUE_MAX + 1u), EINVAL);
	ck_assert_int_eq(weft_sem_post_n(&s, WEFT_SEM_VALUE_MAX), 0);
	ck_assert_int_eq(weft_sem_post_n(&s, 1), EOVERFLOW);
	ck_assert_int_eq(weft_sem_init(&s, 0), 0);
	ck_assert_int_eq(weft_sem_wait(NULL), EINVAL);
	ck_assert_int_eq(weft_sem_trywait(NULL), EINVAL);
	ck_assert_int_eq(weft_sem_timedwait(NULL, 0), EINVAL);
	ck_assert_int_eq(weft_sem_post(NULL), EINVAL);
	ck_assert_int_eq(weft_sem_post_n(NULL, 1), EINVAL);
	ck_assert_int_eq(weft_sem_post_wq(NULL, 1, &wq), EINVAL);
	ck_assert_int_eq(weft_sem_post_wq(&s, 1, NULL), EINVAL);
	ck_assert_int_eq(weft_sem_getvalue(NULL, &v), EINVAL);
	ck_assert_int_eq(weft_sem_getvalue(&s, NULL), EINVAL);
	ck_assert_int_eq(weft_sem_destroy(NULL), EINVAL);
	ck_assert_int_eq(weft_wakeq_init(NULL), EINVAL);
	ck_assert_int_eq(weft_wakeq_flush(NULL), EINVAL);
	ck_assert_int_eq(weft_sem_trywait(&s), EAGAIN);
	ck_assert_int_eq(weft_sem_timedwait(&s, 0), ETIMEDOUT);
	ck_assert_int_eq(weft_sem_timedwait(&s, weft_now_ns()), ETIMEDOUT);
	/* destroy while waited on */
	sc_start(&g, 1, 1, waiter_body, &s);
	ck_assert_int_eq(sc_until(parked_fn, NULL, EBUSY), EBUSY);
	ck_assert_int_eq(weft_sem_destroy(&s), EBUSY);
	ck_assert_int_eq(weft_sem_getvalue(&s, &v), 0);
	ck_assert_int_eq(v, 0);
	ck_assert_int_eq(weft_sem_post_n(&s, 2), 0);
	sc_join(&g);
	ck_assert_int_eq(weft_sem_destroy(&s), 0);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* conserve */

struct cons {
	weft_sem_t s;
	int nprod, ncons;
	long per_prod;           /* units each producer posts */
	_Atomic long taken;
	_Atomic long posted;
	long total;
};

static void cons_body(int idx, void *arg)
{
	struct cons *c = arg;
	uint64_t rng = 1234567 + idx;

	if (idx % 2 == 0 && idx / 2 < c->nprod) {
		/* producer */
		long left = c->per_prod;
		weft_wakeq_t wq = WEFT_WAKEQ_INITIALIZER;

		while (left > 0) {
			unsigned n = 1 + wt_rand(&rng) % 8;
			int how = wt_rand(&rng) % 3;

			if (n > left)
				n = (unsigned)left;
			if (how == 0) {
				for (unsigned k = 0; k < n; k++)
					WT_CHECK(weft_sem_post(&c->s) == 0);
			} else if (how == 1) {
				WT_CHECK(weft_sem_post_n(&c->s, n) == 0);
			} else {
				WT_CHECK(weft_sem_post_wq(&c->s, n, &wq) == 0);
				if (wt_rand(&rng) & 1)
					weft_yield();   /* wakees stay blocked meanwhile */
				WT_CHECK(weft_wakeq_flush(&wq) == 0);
			}
			atomic_fetch_add(&c->posted, n);
			left -= n;
			if ((wt_rand(&rng) & 7) == 0)
				weft_yield();
		}
		return;
	}
	/* consumer: take until the total is reached */
	for (;;) {
		long t = atomic_load(&c->taken);

		if (t >= c->total)
			return;
		/* claim a slot first so that nobody waits for a unit that
		 * will never come */
		if (!atomic_compare_exchange_weak(&c->taken, &t, t + 1))
			continue;
		WT_CHECK(weft_sem_wait(&c->s) == 0);
	}
}

static void run_conserve(int nweft, int nos, int nprod, long total)
{
	struct cons *c = calloc(1, sizeof(*c));
	int v;

	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(weft_sem_init(&c->s, 0), 0);
	c->nprod = nprod;
	c->per_prod = total / nprod;
	c->total = c->per_prod * nprod;
	sc_run(nweft, nos, cons_body, c);
	wt_assert_no_failure();
	ck_assert_int_eq(atomic_load(&c->posted), c->total);
	ck_assert_int_eq(atomic_load(&c->taken), c->total);
	ck_assert_int_eq(weft_sem_getvalue(&c->s, &v), 0);
	ck_assert_int_eq(v, 0);
	ck_assert_int_eq(weft_sem_destroy(&c->s), 0);
	free(c);
}

START_TEST(test_conserve)
{
	wt_init(_i);
	run_conserve(4, 0, 2, 20000);
	run_conserve(0, 4, 2, 20000);
	run_conserve(6, 4, 3, 30000);
	run_conserve(200, 20, 8, 30000);
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* timeout: sembench -T */

struct tt {
	weft_sem_t s;
	long total;
	_Atomic long got, timeouts;
	_Atomic int producers_done;
	weft_time_t give_up;
};

static void tt_body(int idx, void *arg)
{
	struct tt *t = arg;
	uint64_t rng = 99 + idx;

	if (idx == 0) {
		/* producer: post exactly total units in bursts */
		weft_wakeq_t wq = WEFT_WAKEQ_INITIALIZER;

		/* Start once the consumers time out on the empty semaphore: a
		 * producer that ran first could post everything before any
		 * consumer waited, and no timeout would race a post (failed
		 * the timeouts > 0 check below 2 times in 30 runs) */
		while (atomic_load(&t->timeouts) < 10 && weft_now_ns() < t->give_up)
			weft_yield();

		for (long left = t->total; left > 0;) {
			unsigned n = 1 + wt_rand(&rng) % 16;

			if (n > left)
				n = (unsigned)left;
			if (wt_rand(&rng) & 1) {
				WT_CHECK(weft_sem_post_n(&t->s, n) == 0);
			} else {
				WT_CHECK(weft_sem_post_wq(&t->s, n, &wq) == 0);
				WT_CHECK(weft_wakeq_flush(&wq) == 0);
			}
			left -= n;
			if ((wt_rand(&rng) & 3) == 0)
				sc_spin_ns(wt_rand(&rng) % 20000);
			else
				weft_yield();
		}
		atomic_store(&t->producers_done, 1);
		return;
	}
	/* consumers: tiny deadlines (1 ns .. 50 us), like -T's 1 ns */
	while (atomic_load(&t->got) < t->total && weft_now_ns() < t->give_up) {
		uint64_t d = (wt_rand(&rng) & 1) ? 1 : wt_rand(&rng) % 50000;
		int rc = weft_sem_timedwait(&t->s, weft_now_ns() + d);

		if (rc == 0)
			atomic_fetch_add(&t->got, 1);
		else if (rc == ETIMEDOUT)
			atomic_fetch_add(&t->timeouts, 1);
		else
			WT_CHECK(rc == 0 || rc == ETIMEDOUT);
	}
}

START_TEST(test_timeout_race)
{
	struct tt *t = calloc(1, sizeof(*t));
	int v;

	wt_init(_i);
	ck_assert_int_eq(weft_sem_init(&t->s, 0), 0);
	t->total = 20000;
	t->give_up = sc_ms(8000);
	sc_run(13, 3, tt_body, t);
	wt_assert_no_failure();
	printf("timeout_race[%s]: got=%ld timeouts=%ld\n", wt_configs[_i].name,
	       atomic_load(&t->got), atomic_load(&t->timeouts));
	ck_assert_int_eq(weft_sem_getvalue(&t->s, &v), 0);
	/* every posted unit was taken exactly once: none lost to a timeout
	 * that raced its grant, none doubled */
	ck_assert_int_eq(atomic_load(&t->got) + v, t->total);
	ck_assert_int_eq(v, 0);
	ck_assert_int_gt(atomic_load(&t->timeouts), 0);
	ck_assert_int_eq(weft_sem_destroy(&t->s), 0);
	free(t);
	wt_shutdown();
}
END_TEST

struct tw {
	weft_sem_t s;
	_Atomic int rc;
	_Atomic uint64_t elapsed;
	uint64_t ms;
};

static void tw_body(int idx, void *arg)
{
	struct tw *t = arg;
	weft_time_t t0 = weft_now_ns();

	(void)idx;
	atomic_store(&t->rc, weft_sem_timedwait(&t->s, t0 + t->ms * 1000000ull));
	atomic_store(&t->elapsed, weft_now_ns() - t0);
}

START_TEST(test_timeout)
{
	struct tw t = { .ms = 20 };
	struct sc_group g;

	wt_init(_i);
	weft_sem_init(&t.s, 0);
	for (int os = 0; os < 2; os++) {
		sc_run(!os, os, tw_body, &t);
		ck_assert_int_eq(atomic_load(&t.rc), ETIMEDOUT);
		ck_assert_uint_ge(atomic_load(&t.elapsed), 19000000ull);
		ck_assert_uint_lt(atomic_load(&t.elapsed), 1000000000ull);
	}
	t.ms = 5000;
	for (int os = 0; os < 2; os++) {
		sc_start(&g, !os, os, tw_body, &t);
		sc_sleep_ms(10);
		ck_assert_int_eq(weft_sem_post(&t.s), 0);
		sc_join(&g);
		ck_assert_int_eq(atomic_load(&t.rc), 0);
		ck_assert_uint_lt(atomic_load(&t.elapsed), 4000000000ull);
	}
	ck_assert_int_eq(weft_sem_destroy(&t.s), 0);
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* wakeq */

struct wq_arg {
	weft_sem_t s;
	_Atomic long done;
	_Atomic long arrived;
};

static void wq_waiter(int idx, void *arg)
{
	struct wq_arg *a = arg;

	(void)idx;
	atomic_fetch_add(&a->arrived, 1);
	WT_CHECK(weft_sem_wait(&a->s) == 0);
	atomic_fetch_add(&a->done, 1);
}

/* Waiters granted by a post_wq stay blocked until the flush. Which waiters
 * a post_wq grants is known only for those queued before it: a waiter not
 * queued yet takes a posted unit itself, and at any time (so the value read
 * after the post can already be short of what the post left). A weft waiter
 * queues before it parks, and nothing else parks here, so the thread_parks
 * count read before the post is a lower bound on the units granted; the
 * rest, 4 - parked, are all the late waiters can take before the flush. */
START_TEST(test_wakeq_deferred)
{
	struct wq_arg a;
	weft_wakeq_t wq;
	struct sc_group g;
	weft_stats_t s0, s1;
	long parked, done;
	int v;

	wt_init(_i);
	weft_sem_init(&a.s, 0);
	atomic_init(&a.done, 0);
	atomic_init(&a.arrived, 0);
	weft_wakeq_init(&wq);
	s0 = sc_stats();
	sc_start(&g, 3, 1, wq_waiter, &a);
	/* the three weft waiters queued and parked (bounded: 10 s); then time
	 * for the OS waiter, which is usually queued too */
	for (int i = 0; i < 10000; i++) {
		s1 = sc_stats();
		if (s1.thread_parks - s0.thread_parks >= 3)
			break;
		sc_sleep_ms(1);
	}
	sc_wait_atleast(&a.arrived, 4, 10000);
	sc_sleep_ms(20);
	s1 = sc_stats();
	parked = (long)(s1.thread_parks - s0.thread_parks);
	if (parked > 3)
		parked = 3;   /* a spurious return re-parks: still 3 waiters at most */
	ck_assert_int_eq(weft_sem_post_wq(&a.s, 4, &wq), 0);
	ck_assert_int_eq(weft_sem_getvalue(&a.s, &v), 0);
	sc_sleep_ms(20);
	done = atomic_load(&a.done);
	printf("wakeq_deferred[%s]: parked=%ld value=%d done before flush=%ld\n",
	       wt_configs[_i].name, parked, v, done);
	fflush(stdout);
	/* at least `parked` units were granted, not posted */
	ck_assert_int_le(v, 4 - parked);
	/* the granted waiters have not run: only late ones can be done */
	ck_assert_int_le(done, 4 - parked);
	ck_assert_int_eq(weft_wakeq_flush(&wq), 0);
	sc_join(&g);
	ck_assert_int_eq(atomic_load(&a.done), 4);
	ck_assert_int_eq(weft_sem_destroy(&a.s), 0);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* Many waiters spread over the workers, one post_n wakes them all; the
 * flush counts one flush and (with BATCH_WAKE) at most one batch per
 * worker. */
START_TEST(test_wakeq_batch)
{
	struct wq_arg a;
	weft_thread_t t[256];
	weft_attr_t at;
	weft_stats_t s0, s1;
	int nw;

	wt_init(_i);
	nw = weft_workers();
	weft_sem_init(&a.s, 0);
	atomic_init(&a.done, 0);
	atomic_init(&a.arrived, 0);
	{
		struct sc_job j[256];

		for (int i = 0; i < 256; i++) {
			weft_attr_init(&at);
			at.stack_size = SC_STACK;
			at.worker = i % nw;
			j[i] = (struct sc_job){ wq_waiter, &a, i };
			ck_assert_int_eq(weft_spawn(&t[i], sc_tramp, &j[i], &at), 0);
		}
		/* A flush is counted only when it wakes two or more, so enough
		 * waiters must be queued first: a fixed sleep does not ensure
		 * that on a loaded box. A pinned waiter queues and parks before
		 * the next one runs on its worker (no switch in between), so
		 * once all 256 have arrived at most one per worker is not
		 * queued yet: 256 - nw >= 2 are (waited for at most 10 s). */
		ck_assert_int_eq(sc_wait_atleast(&a.arrived, 256, 10000), 256);
		s0 = sc_stats();
		ck_assert_int_eq(weft_sem_post_n(&a.s, 256), 0);
		for (int i = 0; i < 256; i++)
			ck_assert_int_eq(weft_join(t[i], NULL), 0);
	}
	s1 = sc_stats();
	ck_assert_int_eq(atomic_load(&a.done), 256);
	printf("wakeq_batch[%s]: BATCH_WAKE=%d flushes=%llu batches=%llu kicks=%llu\n",
	       wt_configs[_i].name, weft_feature("BATCH_WAKE"),
	       (unsigned long long)(s1.wakeq_flushes - s0.wakeq_flushes),
	       (unsigned long long)(s1.wakeq_batches - s0.wakeq_batches),
	       (unsigned long long)(s1.kicks - s0.kicks));
	fflush(stdout);
	ck_assert_uint_ge(s1.wakeq_flushes - s0.wakeq_flushes, 1);
	/* the posting OS thread has no worker: every group is remote, at most
	 * one batch per worker (more only if the table overflowed) */
	ck_assert_uint_le(s1.wakeq_batches - s0.wakeq_batches, (uint64_t)nw);
	ck_assert_int_eq(weft_sem_destroy(&a.s), 0);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* Use after free regression: a timed waiter whose deadline has fired but
 * who has not run yet is granted a unit by a post_wq; the poster destroys
 * the semaphore (0: nobody waits on it any more) and frees it before its
 * flush. The waiter must then wait for the flush without touching s. The
 * semaphore sits alone at the start of an mmap'd page that is made
 * PROT_NONE after the destroy, so a touch kills the test with SIGSEGV. One
 * worker makes the order deterministic. */
struct gdf {
	weft_sem_t *s;                /* in its own page */
	_Atomic int wrc, wdone, drc;
};

static void *gdf_waiter(void *arg)
{
	struct gdf *g = arg;

	atomic_store(&g->wrc, weft_sem_timedwait(g->s, weft_now_ns() + 1000000));
	atomic_store(&g->wdone, 1);
	return NULL;
}

static void *gdf_poster(void *arg)
{
	struct gdf *g = arg;
	weft_wakeq_t wq = WEFT_WAKEQ_INITIALIZER;

	/* busy past the waiter's deadline without switching: its timer has
	 * fired, it has not run */
	sc_spin_ns(5000000);
	WT_CHECK(weft_sem_post_wq(g->s, 1, &wq) == 0);   /* grants it */
	atomic_store(&g->drc, weft_sem_destroy(g->s));
	WT_CHECK(mprotect(g->s, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE) == 0);
	/* let the waiter run before the flush: its park returns ETIMEDOUT,
	 * but it was granted, so it must wait for WOKEN without touching s */
	sc_sleep_ms(5);
	WT_CHECK(weft_wakeq_flush(&wq) == 0);
	return NULL;
}

START_TEST(test_destroy_after_grant_timed)
{
	struct gdf g = { .wrc = -1, .drc = -1 };
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	void *page = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	/* the waiter first (see sc_pair_driver: spawned from this OS thread,
	 * a 1 ms delay let the waiter time out before the poster existed) */
	struct sc_pair pr = { gdf_waiter, gdf_poster, &g };
	weft_thread_t d;

	ck_assert(page != MAP_FAILED);
	g.s = page;
	ck_assert_int_eq(weft_sem_init(g.s, 0), 0);
	wt_init_workers(1);
	ck_assert_int_eq(weft_spawn(&d, sc_pair_driver, &pr, NULL), 0);
	for (int i = 0; i < 5000 && !atomic_load(&g.wdone); i++)
		usleep(1000);
	ck_assert_msg(atomic_load(&g.wdone), "waiter did not return");
	ck_assert_int_eq(weft_join(d, NULL), 0);
	ck_assert_int_eq(atomic_load(&g.drc), 0);
	ck_assert_int_eq(atomic_load(&g.wrc), 0);      /* the grant won */
	wt_assert_no_failure();
	wt_shutdown();
	ck_assert_int_eq(munmap(page, pg), 0);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* os_thread: ping-pong across the weft / OS boundary */

struct pp {
	weft_sem_t a, b;
	int rounds;
	int flip;                 /* which idx plays the pinger */
};

static void pp_body(int idx, void *arg)
{
	struct pp *p = arg;

	for (int i = 0; i < p->rounds; i++) {
		if ((idx ^ p->flip) == 0) {
			WT_CHECK(weft_sem_post(&p->a) == 0);
			WT_CHECK(weft_sem_wait(&p->b) == 0);
		} else {
			WT_CHECK(weft_sem_wait(&p->a) == 0);
			WT_CHECK(weft_sem_post(&p->b) == 0);
		}
	}
}

START_TEST(test_os_thread)
{
	static const struct { int nweft, nos, flip; } pairs[] = {
		{ 1, 1, 0 },   /* weft pings, OS answers */
		{ 1, 1, 1 },   /* OS pings, weft answers */
		{ 0, 2, 0 },
		{ 2, 0, 0 },
	};
	struct pp p = { .rounds = 2000 };
	int v;

	wt_init(_i);
	weft_sem_init(&p.a, 0);
	weft_sem_init(&p.b, 0);
	for (unsigned k = 0; k < sizeof(pairs) / sizeof(pairs[0]); k++) {
		p.flip = pairs[k].flip;
		sc_run(pairs[k].nweft, pairs[k].nos, pp_body, &p);
	}
	wt_assert_no_failure();
	ck_assert_int_eq(weft_sem_getvalue(&p.a, &v), 0);
	ck_assert_int_eq(v, 0);
	ck_assert_int_eq(weft_sem_getvalue(&p.b, &v), 0);
	ck_assert_int_eq(v, 0);
	wt_shutdown();
}
END_TEST

/* A batch of wakees for one remote worker runs there in queue (FIFO)
 * order: the chain spliced into the mailbox keeps its order. (It came out
 * newest first: the chain was pushed unreversed onto the mailbox stack.) */
enum { ORD_N = 8 };
static weft_sem_t ord_sem;
static _Atomic int ord_queued, ord_pos;
static int ord_seen[ORD_N];

static void *ord_waiter(void *arg)
{
	atomic_fetch_add(&ord_queued, 1);
	WT_CHECK(weft_sem_wait(&ord_sem) == 0);
	/* all run on worker 1, one at a time */
	ord_seen[atomic_fetch_add(&ord_pos, 1)] = (int)(intptr_t)arg;
	return NULL;
}

static void *ord_poster(void *arg)
{
	(void)arg;
	WT_CHECK(weft_sem_post_n(&ord_sem, ORD_N) == 0);
	return NULL;
}

START_TEST(test_wakeq_remote_fifo)
{
	weft_thread_t t[ORD_N], p;
	weft_attr_t a;

	wt_init_workers(2);
	ck_assert_int_eq(weft_sem_init(&ord_sem, 0), 0);
	atomic_store(&ord_queued, 0);
	atomic_store(&ord_pos, 0);
	weft_attr_init(&a);
	a.worker = 1;
	for (int i = 0; i < ORD_N; i++) {
		ck_assert_int_eq(weft_spawn(&t[i], ord_waiter, (void *)(intptr_t)i, &a), 0);
		while (atomic_load(&ord_queued) < i + 1)
			usleep(100);
		usleep(2000);   /* it is queued on the semaphore before the next */
	}
	a.worker = 0;
	ck_assert_int_eq(weft_spawn(&p, ord_poster, NULL, &a), 0);
	ck_assert_int_eq(weft_join(p, NULL), 0);
	for (int i = 0; i < ORD_N; i++)
		ck_assert_int_eq(weft_join(t[i], NULL), 0);
	wt_assert_no_failure();
	for (int i = 0; i < ORD_N; i++)
		ck_assert_int_eq(ord_seen[i], i);
	ck_assert_int_eq(weft_sem_destroy(&ord_sem), 0);
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* own_post: posters take turns (a mutex around each post + trywait pair),
 * timed waiters with tiny deadlines keep WAITERS set and qlock busy, so
 * posts defer and holders drain.
 *
 * Why any value seen by a poster after its pair is a failure: posters are
 * the only posters and at most one is between its post and its trywait.
 * A correct trywait returns EAGAIN only at a moment when no unit is
 * available (value 0, nothing deferred), i.e. when every unit posted so
 * far was taken by a waiter or a trywait; so after each pair no unit is
 * left anywhere and the value is 0. A trywait that misses a unit in a
 * drainer's hands returns EAGAIN and leaves the unit behind: the poster
 * then sees value 1, unless a waiter takes it first (which the counts at
 * the end cannot tell from a correct run: the leftover check is the one
 * that catches it). */
struct op {
	weft_sem_t s;
	weft_mutex_t m;
	int nweft;
	uint64_t seed;
	weft_time_t end;
	_Atomic int posters_left;
	_Atomic long pairs, eagain, got, timeouts, leftover;
};

static void op_body(int idx, void *arg)
{
	struct op *o = arg;
	uint64_t rng = o->seed + (uint64_t)idx * 0x9E3779B97F4A7C15ull;

	if (idx < 2 || (idx >= o->nweft && idx < o->nweft + 2)) {
		while (weft_now_ns() < o->end) {
			int rc, v = 0;

			WT_CHECK(weft_mutex_lock(&o->m) == 0);
			WT_CHECK(weft_sem_post(&o->s) == 0);
			rc = weft_sem_trywait(&o->s);
			WT_CHECK(rc == 0 || rc == EAGAIN);
			if (rc == EAGAIN) {
				atomic_fetch_add(&o->eagain, 1);
				/* a missed unit shows up once its drainer is
				 * done: look for a few microseconds */
				weft_time_t until = weft_now_ns() + 5000;

				do
					WT_CHECK(weft_sem_getvalue(&o->s, &v) == 0);
				while (v == 0 && weft_now_ns() < until);
			} else {
				WT_CHECK(weft_sem_getvalue(&o->s, &v) == 0);
			}
			if (v != 0)
				atomic_fetch_add(&o->leftover, 1);
			WT_CHECK(weft_mutex_unlock(&o->m) == 0);
			atomic_fetch_add(&o->pairs, 1);
			if ((wt_rand(&rng) & 7) == 0)
				weft_yield();
		}
		atomic_fetch_sub(&o->posters_left, 1);
		return;
	}
	while (atomic_load(&o->posters_left) > 0) {
		uint64_t d = (wt_rand(&rng) & 1) ? 1 : wt_rand(&rng) % 20000;
		int rc = weft_sem_timedwait(&o->s, weft_now_ns() + d);

		WT_CHECK(rc == 0 || rc == ETIMEDOUT);
		if (rc == 0)
			atomic_fetch_add(&o->got, 1);
		else
			atomic_fetch_add(&o->timeouts, 1);
	}
}

START_TEST(test_own_post_trywait)
{
	struct op *o = calloc(1, sizeof(*o));
	int v;

	ck_assert_ptr_nonnull(o);
	wt_init(_i);
	o->seed = wt_seed();
	ck_assert_int_eq(weft_sem_init(&o->s, 0), 0);
	ck_assert_int_eq(weft_mutex_init(&o->m), 0);
	/* 4 weft + 10 OS threads (OS waiters get preempted mid-drain on a
	 * small machine: it widens the window); posters: the first 2 of each
	 * kind */
	o->nweft = 4;
	atomic_store(&o->posters_left, 4);
	o->end = weft_now_ns() + (weft_time_t)(wt_stress_seconds() * 1e9);
	sc_run(o->nweft, 10, op_body, o);
	wt_assert_no_failure();
	ck_assert_int_eq(weft_sem_getvalue(&o->s, &v), 0);
	long eagain = atomic_load(&o->eagain), got = atomic_load(&o->got);
	long leftover = atomic_load(&o->leftover);

	printf("own_post[%s]: pairs=%ld eagain=%ld got=%ld timeouts=%ld "
	       "leftover=%ld value=%d\n", wt_configs[_i].name,
	       atomic_load(&o->pairs), eagain, got, atomic_load(&o->timeouts),
	       leftover, v);
	/* a poster saw a unit left behind by its own trywait's EAGAIN */
	ck_assert_int_eq(leftover, 0);
	ck_assert_int_eq(v, 0);
	/* every EAGAIN is a unit some waiter took */
	ck_assert_int_eq(eagain, got);
	ck_assert_int_eq(weft_sem_destroy(&o->s), 0);
	ck_assert_int_eq(weft_mutex_destroy(&o->m), 0);
	free(o);
	wt_shutdown();
}
END_TEST

/* A post must not touch the semaphore after the RMW that lets go of it:
 * a thread that takes the posted unit may destroy and free it at once
 * (POSIX: destroying is safe once nobody is blocked on it).
 * Per round: E maps a page, puts a semaphore there (value 0); W waits on
 * it; P posts 2 once W is (very likely) queued, so its post takes the
 * slow path: it grants W one unit and the value the other under qlock.
 * E takes that unit with trywait as soon as it appears, destroys the
 * semaphore and makes the page inaccessible (PROT_NONE, unmapped only
 * 256 rounds later, so no new mapping reuses the address meanwhile): a
 * later access by P faults in any build. The window (P between its
 * unlock and the end of its post call) is a few instructions, so a timer
 * signals P every 8-20 us (seeded), and the handler, when it lands
 * inside the post (post_wq: the call is only the post, the flush comes
 * after it), holds P up to 100 us or until E has poisoned the page (a
 * granted W may be woken after the destroy: it no longer touches the
 * semaphore). It reaches the window in some of a few thousand rounds.
 * If E got both units (P's post took the fast path: W had not queued
 * yet), it gives W's back and waits for W before destroying. */
enum { UAF_RING = 256 };

struct uaf {
	_Atomic(weft_sem_t *) cur;       /* this round's semaphore */
	_Atomic long round;              /* published by E */
	_Atomic long w_ready;            /* W announced: about to wait */
	_Atomic long w_done;             /* W returned */
	_Atomic long poisoned;           /* E made that round's page PROT_NONE */
	_Atomic int posting;             /* P is inside its post call */
	_Atomic long held_round;         /* the handler held P in that round */
	_Atomic int stop;
	_Atomic long slow_rounds, fast_rounds, held;
	uint64_t seed;
};

static struct uaf uaf;

static uint64_t uaf_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void uaf_handler(int sig)
{
	(void)sig;
	if (!atomic_load(&uaf.posting))
		return;
	long r = atomic_load(&uaf.round);
	uint64_t until = uaf_now() + 100000;

	/* once per post: the timer period is shorter than the hold */
	if (atomic_load(&uaf.held_round) == r)
		return;
	atomic_store(&uaf.held_round, r);
	atomic_fetch_add(&uaf.held, 1);
	while (atomic_load(&uaf.poisoned) < r && uaf_now() < until)
		;
}

static void *uaf_waiter(void *arg)
{
	(void)arg;
	for (long r = 1; ; r++) {
		weft_sem_t *s;

		while (atomic_load(&uaf.round) < r) {
			if (atomic_load(&uaf.stop))
				return NULL;
			sched_yield();
		}
		s = atomic_load(&uaf.cur);
		atomic_store(&uaf.w_ready, r);
		WT_CHECK(weft_sem_wait(s) == 0);
		atomic_store(&uaf.w_done, r);
	}
}

static void *uaf_poster(void *arg)
{
	uint64_t rng = uaf.seed ^ 0x5555;
	struct sigevent sev = { 0 };
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	timer_t tm;

	(void)arg;
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGUSR1;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	WT_CHECK(timer_create(CLOCK_MONOTONIC, &sev, &tm) == 0);
	its.it_value.tv_nsec = 8000 + (long)(wt_rand(&rng) % 12000);
	its.it_interval = its.it_value;
	WT_CHECK(timer_settime(tm, 0, &its, NULL) == 0);
	for (long r = 1; ; r++) {
		weft_wakeq_t wq;
		uint64_t t;

		while (atomic_load(&uaf.w_ready) < r) {
			if (atomic_load(&uaf.stop))
				goto out;
			sched_yield();
		}
		/* let W queue itself: it is an OS thread, a few us */
		t = uaf_now() + 2000 + wt_rand(&rng) % 6000;
		while (uaf_now() < t)
			sched_yield();
		WT_CHECK(weft_wakeq_init(&wq) == 0);
		atomic_store(&uaf.posting, 1);
		WT_CHECK(weft_sem_post_wq(atomic_load(&uaf.cur), 2, &wq) == 0);
		atomic_store(&uaf.posting, 0);
		weft_wakeq_flush(&wq);
	}
out:
	timer_delete(tm);
	return NULL;
}

START_TEST(test_destroy_after_post)
{
	static void *ring[UAF_RING];
	struct sigaction sa = { 0 };
	pthread_t w, p;
	long pg = sysconf(_SC_PAGESIZE), r;
	uint64_t end;

	wt_init(0);
	memset(&uaf, 0, sizeof(uaf));
	uaf.seed = wt_seed();
	sa.sa_handler = uaf_handler;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	ck_assert_int_eq(pthread_create(&w, NULL, uaf_waiter, NULL), 0);
	ck_assert_int_eq(pthread_create(&p, NULL, uaf_poster, NULL), 0);
	end = uaf_now() + (uint64_t)(wt_stress_seconds() * 1e9);
	for (r = 1; uaf_now() < end; r++) {
		void *pgp = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		weft_sem_t *s = pgp;
		int got = 0, rc;

		ck_assert_ptr_ne(pgp, MAP_FAILED);
		ck_assert_int_eq(weft_sem_init(s, 0), 0);
		atomic_store(&uaf.cur, s);
		atomic_store(&uaf.round, r);
		while ((rc = weft_sem_trywait(s)) == EAGAIN)
			sched_yield();
		ck_assert_int_eq(rc, 0);
		got = 1;
		if (weft_sem_trywait(s) == 0)
			got = 2;
		if (got == 2) {
			/* fast path: W has not taken its unit yet */
			ck_assert_int_eq(weft_sem_post(s), 0);
			while (atomic_load(&uaf.w_done) < r)
				sched_yield();
			atomic_fetch_add(&uaf.fast_rounds, 1);
		} else {
			atomic_fetch_add(&uaf.slow_rounds, 1);
		}
		/* W is granted or done: nobody is blocked on s */
		ck_assert_int_eq(weft_sem_destroy(s), 0);
		ck_assert_int_eq(mprotect(pgp, (size_t)pg, PROT_NONE), 0);
		atomic_store(&uaf.poisoned, r);
		if (ring[r % UAF_RING])
			munmap(ring[r % UAF_RING], (size_t)pg);
		ring[r % UAF_RING] = pgp;
	}
	/* the last round's W may still be on its way out of its wait */
	while (atomic_load(&uaf.w_done) < r - 1)
		sched_yield();
	atomic_store(&uaf.stop, 1);
	ck_assert_int_eq(pthread_join(p, NULL), 0);
	ck_assert_int_eq(pthread_join(w, NULL), 0);
	for (int i = 0; i < UAF_RING; i++)
		if (ring[i]) {
			munmap(ring[i], (size_t)pg);
			ring[i] = NULL;
		}
	wt_assert_no_failure();
	printf("destroy_after_post: rounds=%ld slow=%ld fast=%ld held=%ld\n",
	       r - 1, atomic_load(&uaf.slow_rounds),
	       atomic_load(&uaf.fast_rounds), atomic_load(&uaf.held));
	/* the test must have exercised the slow path */
	ck_assert_int_gt(atomic_load(&uaf.slow_rounds), 0);
	wt_shutdown();
}
END_TEST

static Suite *sem_suite(void)
{
	Suite *s = suite_create("sem");
	TCase *tc;

	tc = wt_tcase(s, "basic", 10);
	tcase_add_test(tc, test_basic);

	tc = wt_tcase(s, "errors", 10);
	tcase_add_test(tc, test_errors);

	tc = wt_tcase(s, "conserve", 60);
	tcase_add_loop_test(tc, test_conserve, 0, wt_nconfigs);

	tc = wt_tcase(s, "timeout", 30);
	tcase_add_loop_test(tc, test_timeout, 0, wt_nconfigs);
	tcase_add_loop_test(tc, test_timeout_race, 0, wt_nconfigs);

	tc = wt_tcase(s, "wakeq", 20);
	tcase_add_loop_test(tc, test_wakeq_deferred, 0, wt_nconfigs);
	tcase_add_loop_test(tc, test_wakeq_batch, 0, wt_nconfigs);
	tcase_add_test(tc, test_destroy_after_grant_timed);
	tcase_add_test(tc, test_wakeq_remote_fifo);

	tc = wt_tcase(s, "os_thread", 20);
	tcase_add_loop_test(tc, test_os_thread, 0, wt_nconfigs);

	tc = wt_tcase(s, "own_post", 60);
	tcase_add_loop_test(tc, test_own_post_trywait, 0, wt_nconfigs);

	tc = wt_tcase(s, "destroy_after_post", 30);
	tcase_add_test(tc, test_destroy_after_post);
	return s;
}

int main(void)
{
	return wt_run_suite(sem_suite());
}
