/*
 * tests/check_gang.c - gang scheduling (runtime/gang.c, weft/gang.h).
 *
 * Black-box, through the public API and the WEFT_STATS counters:
 *   errors      EINVAL/EBUSY/EDEADLK cases of every call, and of the
 *               attribute path (weft_attr_setgang + weft_spawn);
 *   basic       co-dispatch: the members of a gang sampled at every
 *               barrier run on distinct workers, and released members
 *               resume together (gang_codispatches);
 *               the spin rule: a member never spins while its peer is
 *               parked (pred calls against gang_spin_aborts);
 *               fairness: 4 gangs on 2 workers get 20-30% of the slices;
 *               a member that parks, sleeps or blocks in I/O frees its
 *               worker and the gang goes on; a member that ends with
 *               weft_exit leaves its gang (no more turns for a gang whose
 *               members all exited);
 *               GANG off: members are ordinary threads, barrier still works;
 *   stress      random gangs and operations under RANDOMIZE, bounded and
 *               seeded, at the environment's worker count.
 * The mechanism tests need 2 workers and set them through the config
 * (WEFT_WORKERS in the environment would override it, so they unset it).
 */
#define _GNU_SOURCE
#include "tests/harness.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <weft/io.h>
#include <stdlib.h>
#include <string.h>
#include <weft/gang.h>
#include <weft/stats.h>
#include <weft/sync.h>

/* Start the runtime with exactly n workers and these features. */
static void init_exact(int n, const char *features)
{
	unsetenv("WEFT_WORKERS");
	wt_init_features(n, features);
	ck_assert_int_eq(weft_workers(), n);
}

/* The same for a test of the GANG mechanism: false (after a printed
 * skip and a shutdown) if WEFT_FEATURES in the environment turned GANG
 * off, which overrides the config. */
static bool init_gang_on(int n)
{
	init_exact(n, NULL);
	if (weft_feature("GANG") == 1)
		return true;
	wt_skip("gang: GANG is off (WEFT_FEATURES): this test checks the mechanism");
	wt_shutdown();
	return false;
}

static void compute_ns(uint64_t ns)
{
	uint64_t end = weft_now_ns() + ns;

	while (weft_now_ns() < end)
		;
}

static void *noop(void *arg)
{
	return arg;
}

/* ---------------------------------------------------------------------- */
/* errors */

static weft_gang_t join_target;

static void *join_own_gang(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)weft_gang_join(join_target, NULL);
}

START_TEST(errors)
{
	weft_gang_t g;
	weft_gang_attr_t ga = WEFT_GANG_ATTR_INITIALIZER;
	weft_attr_t a;
	weft_gang_barrier_t b;
	weft_gang_info_t info;
	void *rets[2];

	init_exact(2, NULL);
	ck_assert_int_eq(weft_gang_create(NULL, 1, NULL), EINVAL);
	ck_assert_int_eq(weft_gang_create(&g, 0, NULL), EINVAL);
	ck_assert_int_eq(weft_gang_create(&g, 3, NULL), EINVAL);   /* k > workers */
	ga.slice_ns = 10;
	ck_assert_int_eq(weft_gang_create(&g, 1, &ga), EINVAL);
	ga.slice_ns = 0;
	ga.reserved[0] = &ga;
	ck_assert_int_eq(weft_gang_create(&g, 1, &ga), EINVAL);
	ga.reserved[0] = NULL;

	ck_assert_int_eq(weft_gang_create(&g, 2, &ga), 0);
	ck_assert_int_eq(weft_gang_spawn(NULL, noop, NULL, NULL), EINVAL);
	ck_assert_int_eq(weft_gang_spawn(g, NULL, NULL, NULL), EINVAL);
	weft_attr_init(&a);
	a.worker = 0;
	ck_assert_int_eq(weft_gang_spawn(g, noop, NULL, &a), EINVAL);
	a.worker = -1;
	a.detached = 1;
	ck_assert_int_eq(weft_gang_spawn(g, noop, NULL, &a), EINVAL);
	a.detached = 0;
	ck_assert_int_eq(weft_gang_spawn(g, noop, (void *)1, &a), 0);
	ck_assert_int_eq(weft_gang_destroy(g), EBUSY);   /* members, not joined */
	ck_assert_int_eq(weft_gang_spawn(g, noop, (void *)2, NULL), 0);
	ck_assert_int_eq(weft_gang_spawn(g, noop, NULL, NULL), EINVAL);   /* a third member */
	ck_assert_int_eq(weft_gang_info(g, NULL), EINVAL);
	ck_assert_int_eq(weft_gang_info(NULL, &info), EINVAL);
	ck_assert_int_eq(weft_gang_info(g, &info), 0);
	ck_assert_uint_eq(info.k, 2);
	ck_assert_uint_eq(info.members, 2);
	ck_assert_int_eq(weft_gang_join(NULL, NULL), EINVAL);
	ck_assert_int_eq(weft_gang_join(g, rets), 0);
	ck_assert_ptr_eq(rets[0], (void *)1);
	ck_assert_ptr_eq(rets[1], (void *)2);
	ck_assert_int_eq(weft_gang_join(g, NULL), EINVAL);   /* joined */
	ck_assert_int_eq(weft_gang_spawn(g, noop, NULL, NULL), EINVAL);
	ck_assert_int_eq(weft_gang_destroy(NULL), EINVAL);
	ck_assert_int_eq(weft_gang_destroy(g), 0);

	/* a member joining its own gang */
	ck_assert_int_eq(weft_gang_create(&join_target, 1, NULL), 0);
	ck_assert_int_eq(weft_gang_spawn(join_target, join_own_gang, NULL, NULL), 0);
	ck_assert_int_eq(weft_gang_join(join_target, rets), 0);
	ck_assert_int_eq((int)(intptr_t)rets[0], EDEADLK);
	ck_assert_int_eq(weft_gang_destroy(join_target), 0);

	/* an empty gang may be destroyed without a join */
	ck_assert_int_eq(weft_gang_create(&g, 1, NULL), 0);
	ck_assert_int_eq(weft_gang_destroy(g), 0);

	ck_assert_int_eq(weft_gang_barrier_init(NULL, 2), EINVAL);
	ck_assert_int_eq(weft_gang_barrier_init(&b, 0), EINVAL);
	ck_assert_int_eq(weft_gang_barrier_destroy(NULL), EINVAL);
	memset(&b, 0, sizeof(b));
	ck_assert_int_eq(weft_gang_barrier_wait(&b), EINVAL);     /* not initialised */
	ck_assert_int_eq(weft_gang_barrier_init(&b, 1), 0);
	ck_assert_int_eq(weft_gang_barrier_wait(&b), WEFT_BARRIER_SERIAL_THREAD);
	ck_assert_int_eq(weft_gang_barrier_destroy(&b), 0);
	ck_assert_int_eq(weft_gang_barrier_destroy(&b), EINVAL);
	ck_assert_int_eq(weft_gang_spin_until(NULL, NULL), EINVAL);
	ck_assert_int_eq(weft_gang_index(), -1);
	wt_shutdown();
}
END_TEST

/* The attribute path: weft_attr_setgang + weft_spawn. */

static void *attr_member(void *arg)
{
	/* a member knows its index from its first instruction on */
	return (void *)(intptr_t)(weft_gang_index() * 100 + (int)(intptr_t)arg);
}

/* Spawned from a weft thread (weft_spawn's other path): two members of
 * the gang in arg through one attribute, and a third refused. */
static void *attr_spawner(void *arg)
{
	weft_gang_t g = arg;
	weft_attr_t a;
	weft_thread_t t = NULL;

	weft_attr_init(&a);
	WT_CHECK(weft_attr_setgang(&a, g) == 0);
	WT_CHECK(weft_spawn(&t, attr_member, (void *)1, &a) == 0);
	WT_CHECK(t != NULL);
	WT_CHECK(weft_spawn(NULL, attr_member, (void *)2, &a) == 0);   /* t may be NULL */
	t = NULL;
	WT_CHECK(weft_spawn(&t, attr_member, (void *)3, &a) == EINVAL);   /* full */
	WT_CHECK(t == NULL);
	return NULL;
}

START_TEST(attr_errors)
{
	weft_gang_t g, h;
	weft_attr_t a;
	weft_thread_t t = NULL, t2 = NULL, sp;
	weft_gang_info_t info;
	void *rets[2];

	init_exact(2, NULL);
	ck_assert_int_eq(weft_attr_setgang(NULL, NULL), EINVAL);
	ck_assert_int_eq(weft_gang_create(&g, 2, NULL), 0);
	ck_assert_int_eq(weft_gang_create(&h, 1, NULL), 0);
	weft_attr_init(&a);
	ck_assert_int_eq(weft_attr_setgang(&a, g), 0);
	ck_assert_ptr_eq(a.reserved[0], g);
	a.name = "member";
	/* worker and detached belong to the gang, as for weft_gang_spawn */
	a.worker = 0;
	ck_assert_int_eq(weft_spawn(&t, attr_member, NULL, &a), EINVAL);
	a.worker = -1;
	a.detached = 1;
	ck_assert_int_eq(weft_spawn(&t, attr_member, NULL, &a), EINVAL);
	a.detached = 0;
	a.reserved[1] = &a;
	ck_assert_int_eq(weft_spawn(&t, attr_member, NULL, &a), EINVAL);
	a.reserved[1] = NULL;
	ck_assert_ptr_null(t);
	/* an attribute naming g cannot add to another gang */
	ck_assert_int_eq(weft_gang_spawn(h, attr_member, NULL, &a), EINVAL);
	ck_assert_int_eq(weft_gang_info(g, &info), 0);
	ck_assert_uint_eq(info.members, 0);

	/* two members through the same attribute (the handle works) */
	ck_assert_int_eq(weft_spawn(&t, attr_member, (void *)1, &a), 0);
	ck_assert_ptr_nonnull(t);
	ck_assert_str_eq(weft_thread_name(t), "member");
	ck_assert_int_eq(weft_spawn(&t2, attr_member, (void *)2, &a), 0);
	ck_assert_ptr_nonnull(t2);
	ck_assert_ptr_ne(t, t2);
	/* a third: the gang is full (each member slot fills once) */
	ck_assert_int_eq(weft_spawn(&sp, attr_member, NULL, &a), EINVAL);
	ck_assert_int_eq(weft_gang_spawn(g, attr_member, NULL, NULL), EINVAL);
	ck_assert_int_eq(weft_gang_info(g, &info), 0);
	ck_assert_uint_eq(info.members, 2);
	ck_assert_int_eq(weft_gang_join(g, rets), 0);
	ck_assert_int_eq((int)(intptr_t)rets[0], 1);
	ck_assert_int_eq((int)(intptr_t)rets[1], 102);
	/* joined: no more members, through either path */
	ck_assert_int_eq(weft_spawn(&sp, attr_member, NULL, &a), EINVAL);
	ck_assert_int_eq(weft_gang_spawn(g, attr_member, NULL, NULL), EINVAL);
	ck_assert_int_eq(weft_gang_destroy(g), 0);
	/* destroyed: every call says EINVAL (the handle is looked up, not
	 * dereferenced: no use after free under ASan) */
	ck_assert_int_eq(weft_spawn(&sp, attr_member, NULL, &a), EINVAL);
	ck_assert_int_eq(weft_gang_spawn(g, attr_member, NULL, NULL), EINVAL);
	ck_assert_int_eq(weft_gang_info(g, &info), EINVAL);
	ck_assert_int_eq(weft_gang_join(g, NULL), EINVAL);
	ck_assert_int_eq(weft_gang_destroy(g), EINVAL);
	/* a made-up handle */
	ck_assert_int_eq(weft_attr_setgang(&a, (weft_gang_t)&a), 0);
	ck_assert_int_eq(weft_spawn(&sp, attr_member, NULL, &a), EINVAL);
	/* cleared: a plain thread again */
	ck_assert_int_eq(weft_attr_setgang(&a, NULL), 0);
	ck_assert_int_eq(weft_spawn(&sp, attr_member, (void *)7, &a), 0);
	ck_assert_int_eq(weft_join(sp, rets), 0);
	ck_assert_int_eq((int)(intptr_t)rets[0], -100 + 7);   /* index -1 */

	/* from a weft thread */
	ck_assert_int_eq(weft_gang_create(&g, 2, NULL), 0);
	ck_assert_int_eq(weft_spawn(&sp, attr_spawner, g, NULL), 0);
	ck_assert_int_eq(weft_join(sp, NULL), 0);
	ck_assert_int_eq(weft_gang_join(g, rets), 0);
	ck_assert_int_eq((int)(intptr_t)rets[0], 1);
	ck_assert_int_eq((int)(intptr_t)rets[1], 102);
	ck_assert_int_eq(weft_gang_destroy(g), 0);
	ck_assert_int_eq(weft_gang_destroy(h), 0);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* BSP gangs: each member computes, notes its worker, meets at the barrier;
 * the barrier's serial member checks the notes. */

#define MAXK 16

struct bsp {
	weft_gang_t g;
	weft_gang_barrier_t b;
	unsigned k;
	_Atomic int where[MAXK];          /* worker of each member this round */
	_Atomic long rounds;
	_Atomic long samples, distinct;
	_Atomic int quit;                 /* the serial member's reading of bsp_stop */
};

static _Atomic int bsp_stop;
static uint64_t bsp_chunk_ns = 20000;

static void *bsp_member(void *arg)
{
	struct bsp *s = arg;
	int me = weft_gang_index();

	WT_CHECK(me >= 0 && (unsigned)me < s->k);
	for (;;) {
		compute_ns(bsp_chunk_ns);
		atomic_store(&s->where[me], weft_worker_id());
		if (weft_gang_barrier_wait(&s->b) == WEFT_BARRIER_SERIAL_THREAD) {
			/* every member is in this generation's wait: sample */
			bool ok = true;

			for (unsigned i = 0; i < s->k; i++)
				for (unsigned j = i + 1; j < s->k; j++)
					if (atomic_load(&s->where[i]) == atomic_load(&s->where[j]))
						ok = false;
			atomic_fetch_add(&s->samples, 1);
			atomic_fetch_add(&s->distinct, ok);
			atomic_fetch_add(&s->rounds, 1);
			/* the members agree on stopping: one reads the flag */
			atomic_store(&s->quit, atomic_load(&bsp_stop));
		}
		/* everyone reads quit after the serial member wrote it, and
		 * before the next round's serial member can write it again */
		weft_gang_barrier_wait(&s->b);
		if (atomic_load(&s->quit))
			break;
	}
	return NULL;
}

static void bsp_start(struct bsp *s, unsigned k, const weft_gang_attr_t *ga)
{
	memset(s, 0, sizeof(*s));
	s->k = k;
	ck_assert_int_eq(weft_gang_create(&s->g, k, ga), 0);
	ck_assert_int_eq(weft_gang_barrier_init(&s->b, k), 0);
	for (unsigned i = 0; i < k; i++)
		ck_assert_int_eq(weft_gang_spawn(s->g, bsp_member, s, NULL), 0);
}

/* The same gang built through the attribute path (weft_attr_setgang). */
static void bsp_start_attr(struct bsp *s, unsigned k)
{
	weft_attr_t a;

	memset(s, 0, sizeof(*s));
	s->k = k;
	ck_assert_int_eq(weft_gang_create(&s->g, k, NULL), 0);
	ck_assert_int_eq(weft_gang_barrier_init(&s->b, k), 0);
	weft_attr_init(&a);
	ck_assert_int_eq(weft_attr_setgang(&a, s->g), 0);
	for (unsigned i = 0; i < k; i++)
		ck_assert_int_eq(weft_spawn(NULL, bsp_member, s, &a), 0);
}

static void bsp_finish(struct bsp *s)
{
	ck_assert_int_eq(weft_gang_join(s->g, NULL), 0);
	ck_assert_int_eq(weft_gang_barrier_destroy(&s->b), 0);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

START_TEST(codispatch)
{
	static struct bsp s[2];
	weft_stats_t st;

	if (!init_gang_on(2))
		return;
	atomic_store(&bsp_stop, 0);
	bsp_start(&s[0], 2, NULL);
	bsp_start_attr(&s[1], 2);   /* members through the attribute: the same rules */
	/* 500 ms, and on in 100 ms steps up to 10 s until both gangs have
	 * taken the turns and samples asserted below (on a loaded host the
	 * workers' OS threads may be off the CPUs for most of 500 ms) */
	sleep_ms(500);
	for (int waited = 500; waited < 10000; waited += 100) {
		bool enough = true;

		for (int i = 0; i < 2; i++) {
			weft_gang_info_t info;

			ck_assert_int_eq(weft_gang_info(s[i].g, &info), 0);
			enough = enough && atomic_load(&s[i].samples) > 10 && info.slices > 10;
		}
		if (enough)
			break;
		sleep_ms(100);
	}
	atomic_store(&bsp_stop, 1);
	for (int i = 0; i < 2; i++) {
		weft_gang_info_t info;

		ck_assert_int_eq(weft_gang_info(s[i].g, &info), 0);
		bsp_finish(&s[i]);
		printf("gang %d: rounds %ld, slices %llu, runs %llu\n", i, (long)s[i].rounds,
		       (unsigned long long)info.slices, (unsigned long long)info.runs);
		ck_assert_int_gt(s[i].samples, 10);
		ck_assert_int_eq(s[i].distinct, s[i].samples);
		ck_assert_uint_gt(info.slices, 10);   /* two slots on two workers: turns */
		ck_assert_int_eq(weft_gang_destroy(s[i].g), 0);
	}
	weft_stats_get(&st);
	printf("gang_slices %llu codispatches %llu mean %.0f ns\n",
	       (unsigned long long)st.gang_slices, (unsigned long long)st.gang_codispatches,
	       st.gang_codispatches ? (double)st.gang_codispatch_ns / (double)st.gang_codispatches : 0.0);
	ck_assert_uint_gt(st.gang_codispatches, 0);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* The spin rule. Member 0 sleeps (parks) again and again, flagging each
 * sleep; member 1 spins until member 0's round moves. Every spin step of
 * member 1 calls pred once; a step taken while member 0 is asleep must be
 * followed by a yield (gang_spin_aborts), not by a spin: so pred calls
 * made while the flag is up are at most about one per abort. A plain
 * spinner (GANG off: yields only after WEFT_GANG_SPIN_NS) makes thousands
 * per yield. Slack: the few steps between member 0 raising its flag and
 * actually parking. */

#define SPIN_ROUNDS 30

static _Atomic int sleeper_asleep;
static _Atomic int sleeper_round;
static _Atomic long calls_asleep;

struct spin_arg {
	int want;
};

static int round_reached(void *arg)
{
	struct spin_arg *a = arg;

	if (atomic_load_explicit(&sleeper_asleep, memory_order_relaxed))
		atomic_fetch_add_explicit(&calls_asleep, 1, memory_order_relaxed);
	return atomic_load_explicit(&sleeper_round, memory_order_acquire) >= a->want;
}

static void *spin_member(void *arg)
{
	(void)arg;
	if (weft_gang_index() == 0) {
		for (int r = 1; r <= SPIN_ROUNDS; r++) {
			atomic_store(&sleeper_asleep, 1);
			weft_sleep_ns(1000000);
			atomic_store(&sleeper_asleep, 0);
			atomic_store_explicit(&sleeper_round, r, memory_order_release);
		}
	} else {
		for (int r = 1; r <= SPIN_ROUNDS; r++) {
			struct spin_arg a = { r };

			weft_gang_spin_until(round_reached, &a);
		}
	}
	return NULL;
}

static void spin_rule_run(const char *features, long *calls, long *aborts)
{
	weft_gang_t g;
	weft_stats_t st;

	*calls = *aborts = -1;
	if (!features) {
		if (!init_gang_on(2))
			return;
	} else {
		init_exact(2, features);
	}
	atomic_store(&sleeper_asleep, 0);
	atomic_store(&sleeper_round, 0);
	atomic_store(&calls_asleep, 0);
	ck_assert_int_eq(weft_gang_create(&g, 2, NULL), 0);
	ck_assert_int_eq(weft_gang_spawn(g, spin_member, NULL, NULL), 0);
	ck_assert_int_eq(weft_gang_spawn(g, spin_member, NULL, NULL), 0);
	ck_assert_int_eq(weft_gang_join(g, NULL), 0);
	ck_assert_int_eq(weft_gang_destroy(g), 0);
	weft_stats_get(&st);
	*calls = atomic_load(&calls_asleep);
	*aborts = (long)st.gang_spin_aborts;
	printf("%s: pred calls while the peer slept %ld, spin aborts %ld\n",
	       features ? features : "GANG", *calls, *aborts);
	wt_assert_no_failure();
	wt_shutdown();
}

START_TEST(no_spin_on_parked_peer)
{
	long calls, aborts;

	spin_rule_run(NULL, &calls, &aborts);
	if (calls < 0)
		return;   /* skipped */
	ck_assert_int_gt(aborts, SPIN_ROUNDS);
	ck_assert_int_le(calls, 2 * aborts + 20000);
}
END_TEST

/* The same workload with GANG off spins on the sleeper: the assertion
 * above can fail (and the off path spins for a bounded time, then yields,
 * so it still finishes). */
START_TEST(gang_off_spins_bounded)
{
	long calls, aborts;

	spin_rule_run("NO_GANG", &calls, &aborts);
	ck_assert_int_eq(aborts, 0);
	ck_assert_int_gt(calls, 2 * aborts + 20000);
}
END_TEST

/* ---------------------------------------------------------------------- */

START_TEST(fairness)
{
	static struct bsp s[4];
	weft_gang_attr_t ga = WEFT_GANG_ATTR_INITIALIZER;
	uint64_t slices[4], runs[4], tot = 0, rtot = 0;

	if (!init_gang_on(2))
		return;
	ga.slice_ns = 2000000;
	atomic_store(&bsp_stop, 0);
	for (int i = 0; i < 4; i++)
		bsp_start(&s[i], 2, &ga);
	/* 2 s, and on in 250 ms steps up to 10 s while fewer than 200 turns
	 * were taken (on a loaded host the ticker's 2 ms sleeps overrun) */
	sleep_ms(2000);
	for (int waited = 2000;; waited += 250) {
		tot = rtot = 0;
		for (int i = 0; i < 4; i++) {
			weft_gang_info_t info;

			ck_assert_int_eq(weft_gang_info(s[i].g, &info), 0);
			slices[i] = info.slices;
			runs[i] = info.runs;
			tot += slices[i];
			rtot += runs[i];
		}
		if (tot > 200 || waited >= 10000)
			break;
		sleep_ms(250);
	}
	atomic_store(&bsp_stop, 1);
	for (int i = 0; i < 4; i++) {
		bsp_finish(&s[i]);
		ck_assert_int_eq(weft_gang_destroy(s[i].g), 0);
	}
	for (int i = 0; i < 4; i++) {
		printf("gang %d: slices %llu (%.1f%%) runs %llu (%.1f%%) rounds %ld\n", i,
		       (unsigned long long)slices[i], 100.0 * (double)slices[i] / (double)tot,
		       (unsigned long long)runs[i], 100.0 * (double)runs[i] / (double)rtot,
		       (long)s[i].rounds);
		ck_assert(slices[i] * 100 >= tot * 20 && slices[i] * 100 <= tot * 30);
		ck_assert(runs[i] * 100 >= rtot * 20 && runs[i] * 100 <= rtot * 30);
		ck_assert_int_gt(s[i].rounds, 0);
	}
	/* 2 ms slices: hundreds of turns within 10 s, loaded or not */
	ck_assert_uint_gt(tot, 200);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* A member that parks frees its worker: a thread pinned to that worker
 * runs while it sleeps, and its peer keeps running (the gang goes on). */

static _Atomic int parker_worker = -1;
static _Atomic int parker_asleep;
static _Atomic long other_progress, peer_progress;
static _Atomic int parker_done;
static int parker_pipe[2] = { -1, -1 };   /* >= 0: block in weft_io_read, not sleep */
static weft_gang_barrier_t parker_bar;
static _Atomic long parker_rounds;

static int parker_finished(void *arg)
{
	(void)arg;
	if (atomic_load(&parker_asleep))
		atomic_fetch_add(&peer_progress, 1);
	return atomic_load(&parker_done);
}

/* Both the peer's spin and the other thread on the blocked member's
 * worker were seen running while the member was blocked. */
static bool blocked_window_seen(void)
{
	return atomic_load(&peer_progress) > 10 && atomic_load(&other_progress) > 10;
}

static void *park_member(void *arg)
{
	(void)arg;
	if (weft_gang_index() == 0) {
		atomic_store(&parker_worker, weft_worker_id());
		/* wait for the other thread to exist (it spins on our worker
		 * once we sleep) */
		while (atomic_load(&other_progress) == 0)
			weft_yield();
		atomic_store(&parker_asleep, 1);
		if (parker_pipe[0] >= 0) {
			char c;

			/* nothing to read until the test writes, 50 ms later */
			WT_CHECK(weft_io_read(parker_pipe[0], &c, 1) == 1);
		} else {
			/* 50 ms, and on while the others have not been seen
			 * running meanwhile (on a loaded host their workers' OS
			 * threads may be off the CPUs for most of 50 ms), up
			 * to 2 s */
			for (int i = 0; i < 40 && (i == 0 || !blocked_window_seen()); i++)
				weft_sleep_ns(50000000);
		}
		atomic_store(&parker_asleep, 0);
		atomic_store(&parker_done, 1);
	} else {
		weft_gang_spin_until(parker_finished, NULL);
	}
	/* the gang goes on: both members meet again, round after round */
	for (int r = 0; r < 20; r++)
		if (weft_gang_barrier_wait(&parker_bar) == WEFT_BARRIER_SERIAL_THREAD)
			atomic_fetch_add(&parker_rounds, 1);
	return NULL;
}

static void *other_thread(void *arg)
{
	(void)arg;
	atomic_fetch_add(&other_progress, 1);
	while (!atomic_load(&parker_done)) {
		if (atomic_load(&parker_asleep))
			atomic_fetch_add(&other_progress, 1);
		weft_yield();
	}
	return NULL;
}

/* io: 0 member 0 sleeps, 1 it reads an empty pipe (weft_io_read). */
static void park_frees_worker_run(int io)
{
	weft_gang_t g;
	weft_thread_t o;
	weft_attr_t a;
	long before;

	if (!init_gang_on(2))
		return;
	parker_pipe[0] = parker_pipe[1] = -1;
	if (io)
		ck_assert_int_eq(pipe(parker_pipe), 0);
	ck_assert_int_eq(weft_gang_barrier_init(&parker_bar, 2), 0);
	atomic_store(&parker_rounds, 0);
	atomic_store(&parker_worker, -1);
	atomic_store(&parker_asleep, 0);
	atomic_store(&parker_done, 0);
	atomic_store(&other_progress, 0);
	atomic_store(&peer_progress, 0);
	ck_assert_int_eq(weft_gang_create(&g, 2, NULL), 0);
	ck_assert_int_eq(weft_gang_spawn(g, park_member, NULL, NULL), 0);
	ck_assert_int_eq(weft_gang_spawn(g, park_member, NULL, NULL), 0);
	while (atomic_load(&parker_worker) < 0)
		sleep_ms(1);
	weft_attr_init(&a);
	a.worker = atomic_load(&parker_worker);
	ck_assert_int_eq(weft_spawn(&o, other_thread, NULL, &a), 0);
	before = atomic_load(&other_progress);
	if (io) {
		/* 50 ms, and on as in park_member's sleep, up to 2 s */
		sleep_ms(50);
		for (int i = 0; i < 200 && !blocked_window_seen(); i++)
			sleep_ms(10);
		ck_assert_int_eq(write(parker_pipe[1], "x", 1), 1);
	}
	ck_assert_int_eq(weft_gang_join(g, NULL), 0);
	ck_assert_int_eq(weft_join(o, NULL), 0);
	ck_assert_int_eq(weft_gang_destroy(g), 0);
	printf("%s: other thread on the blocked member's worker: %ld steps; peer: %ld spin "
	       "steps; rounds after %ld\n", io ? "read" : "sleep",
	       (long)atomic_load(&other_progress) - before, (long)atomic_load(&peer_progress),
	       (long)atomic_load(&parker_rounds));
	ck_assert_int_gt(atomic_load(&other_progress), 10);
	ck_assert_int_gt(atomic_load(&peer_progress), 10);
	ck_assert_int_eq(atomic_load(&parker_rounds), 20);
	ck_assert_int_eq(weft_gang_barrier_destroy(&parker_bar), 0);
	if (io) {
		close(parker_pipe[0]);
		close(parker_pipe[1]);
		parker_pipe[0] = parker_pipe[1] = -1;
	}
	wt_assert_no_failure();
	wt_shutdown();
}

START_TEST(park_frees_worker)
{
	park_frees_worker_run(0);
}
END_TEST

/* The same with I/O: a member blocked in weft_io_read on an empty pipe
 * frees its worker, and its peer spins (aborting) and goes on. */
START_TEST(io_frees_worker)
{
	park_frees_worker_run(1);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* A member that ends with weft_exit leaves its gang as one whose function
 * returns does: once every member of gang A has exited, A's row gets no
 * more turns, and gang B (the other row on the same workers) keeps the
 * workers; weft_gang_join collects weft_exit's values. */

static _Atomic int exited_count;

static void exit_deep(int i)
{
	atomic_fetch_add(&exited_count, 1);
	weft_exit((void *)(intptr_t)(i + 10));
}

static void *exit_member(void *arg)
{
	weft_gang_barrier_t *b = arg;

	weft_gang_barrier_wait(b);   /* both members ran */
	exit_deep(weft_gang_index());
	return NULL;   /* not reached */
}

START_TEST(exit_leaves_gang)
{
	static struct bsp s;
	weft_gang_barrier_t b;
	weft_gang_t a;
	weft_gang_attr_t ga = WEFT_GANG_ATTR_INITIALIZER;
	weft_gang_info_t i0, i1;
	void *rets[2];
	bool quiet = false;
	long r0;

	if (!init_gang_on(2))
		return;
	atomic_store(&exited_count, 0);
	atomic_store(&bsp_stop, 0);
	ga.slice_ns = 1000000;   /* 1 ms: hundreds of turns in the window */
	ck_assert_int_eq(weft_gang_barrier_init(&b, 2), 0);
	ck_assert_int_eq(weft_gang_create(&a, 2, &ga), 0);
	bsp_start(&s, 2, &ga);   /* the second row on the same two workers */
	ck_assert_int_eq(weft_gang_spawn(a, exit_member, &b, NULL), 0);
	ck_assert_int_eq(weft_gang_spawn(a, exit_member, &b, NULL), 0);
	while (atomic_load(&exited_count) < 2)
		sleep_ms(1);
	/* Windows of 200 ms until one in which A got at most 1 turn (the one
	 * being rotated to while its last member left). The counter above is
	 * bumped just before weft_exit, and on a loaded host a worker may
	 * stay preempted between the two for a while: hence several windows.
	 * Without the fix every window has a turn per slice (1 ms). */
	r0 = atomic_load(&s.rounds);
	ck_assert_int_eq(weft_gang_info(a, &i0), 0);
	for (int w = 0; w < 10 && !quiet; w++) {
		sleep_ms(200);
		ck_assert_int_eq(weft_gang_info(a, &i1), 0);
		printf("exited gang: %llu turns in window %d after its members exited\n",
		       (unsigned long long)(i1.slices - i0.slices), w);
		quiet = i1.slices - i0.slices <= 1;
		i0 = i1;
	}
	/* the other gang goes on: give it up to 10 s on a loaded host */
	for (int w = 0; w < 200 && atomic_load(&s.rounds) == r0; w++)
		sleep_ms(50);
	printf("the other gang: %ld rounds meanwhile\n", (long)(atomic_load(&s.rounds) - r0));
	ck_assert_msg(quiet, "a gang whose members all exited kept getting turns");
	ck_assert_int_gt(atomic_load(&s.rounds), r0);
	atomic_store(&bsp_stop, 1);
	bsp_finish(&s);
	ck_assert_int_eq(weft_gang_destroy(s.g), 0);
	ck_assert_int_eq(weft_gang_join(a, rets), 0);
	ck_assert_ptr_eq(rets[0], (void *)10);
	ck_assert_ptr_eq(rets[1], (void *)11);
	ck_assert_int_eq(weft_gang_destroy(a), 0);
	ck_assert_int_eq(weft_gang_barrier_destroy(&b), 0);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* GANG off: members are ordinary threads; the barrier still works. */
START_TEST(gang_off_plain)
{
	static struct bsp s[3];
	weft_stats_t st;

	init_exact(2, "NO_GANG");
	atomic_store(&bsp_stop, 0);
	for (int i = 0; i < 3; i++)
		bsp_start(&s[i], 2, NULL);
	sleep_ms(200);
	atomic_store(&bsp_stop, 1);
	for (int i = 0; i < 3; i++) {
		weft_gang_info_t info;

		bsp_finish(&s[i]);
		ck_assert_int_eq(weft_gang_info(s[i].g, &info), 0);
		ck_assert_uint_eq(info.slices, 0);
		ck_assert_int_gt(s[i].rounds, 0);
		ck_assert_int_eq(weft_gang_destroy(s[i].g), 0);
	}
	weft_stats_get(&st);
	ck_assert_uint_eq(st.gang_slices, 0);
	ck_assert_uint_eq(st.gang_spin_aborts, 0);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Stress: random gangs (k up to the worker count, at most 4) doing random
 * things between barriers, under RANDOMIZE, at the environment's worker
 * count. Checked: every member of a gang passes every barrier generation
 * in step (each member's round counter equals the generation at the
 * serial point), nothing hangs, everything joins. */

#define NSTRESS 4

struct sgang {
	weft_gang_t g;
	weft_gang_barrier_t b;
	unsigned k;
	_Atomic long round[MAXK];
	_Atomic long gens;
	_Atomic int quit;
	weft_sem_t sem;
	uint64_t seed;
};

static _Atomic int stress_stop;

static void *stress_member(void *arg)
{
	struct sgang *s = arg;
	int me = weft_gang_index();
	uint64_t rng = s->seed * 31 + (uint64_t)me + 1;

	for (long r = 1;; r++) {
		switch (wt_rand(&rng) % 6) {
		case 0:
			compute_ns(wt_rand(&rng) % 30000);
			break;
		case 1:
			weft_sleep_ns(wt_rand(&rng) % 200000);
			break;
		case 2:
			weft_yield();
			break;
		case 3:
			weft_gang_yield();
			break;
		case 4:
			/* a park through a semaphore we post ourselves */
			weft_sem_post(&s->sem);
			weft_sem_wait(&s->sem);
			break;
		default:
			break;
		}
		atomic_store(&s->round[me], r);
		if (weft_gang_barrier_wait(&s->b) == WEFT_BARRIER_SERIAL_THREAD) {
			for (unsigned i = 0; i < s->k; i++)
				WT_CHECK(atomic_load(&s->round[i]) == r);
			atomic_store(&s->gens, r);
			atomic_store(&s->quit, atomic_load(&stress_stop));
		}
		weft_gang_barrier_wait(&s->b);
		if (atomic_load(&s->quit))
			break;
	}
	return NULL;
}

START_TEST(stress_randomize)
{
	static struct sgang s[NSTRESS];
	uint64_t seed = wt_seed(), rng = seed;
	double secs = wt_stress_seconds() / 2;
	int n;

	wt_init_features(0, "RANDOMIZE");
	n = weft_workers();
	atomic_store(&stress_stop, 0);
	for (int i = 0; i < NSTRESS; i++) {
		weft_gang_attr_t ga = WEFT_GANG_ATTR_INITIALIZER;
		unsigned maxk = (unsigned)(n < 4 ? n : 4);

		memset(&s[i], 0, sizeof(s[i]));
		s[i].k = 1 + (unsigned)(wt_rand(&rng) % maxk);
		s[i].seed = wt_rand(&rng);
		ga.slice_ns = WEFT_GANG_SLICE_MIN_NS * (1 + wt_rand(&rng) % 20);
		ck_assert_int_eq(weft_gang_create(&s[i].g, s[i].k, &ga), 0);
		ck_assert_int_eq(weft_gang_barrier_init(&s[i].b, s[i].k), 0);
		ck_assert_int_eq(weft_sem_init(&s[i].sem, 0), 0);
		for (unsigned j = 0; j < s[i].k; j++)
			ck_assert_int_eq(weft_gang_spawn(s[i].g, stress_member, &s[i], NULL), 0);
	}
	sleep_ms((int)(secs * 1000));
	atomic_store(&stress_stop, 1);
	for (int i = 0; i < NSTRESS; i++) {
		ck_assert_int_eq(weft_gang_join(s[i].g, NULL), 0);
		printf("gang %d: k %u, %ld generations\n", i, s[i].k, (long)atomic_load(&s[i].gens));
		ck_assert_int_gt(atomic_load(&s[i].gens), 0);
		ck_assert_int_eq(weft_gang_destroy(s[i].g), 0);
		ck_assert_int_eq(weft_gang_barrier_destroy(&s[i].b), 0);
		ck_assert_int_eq(weft_sem_destroy(&s[i].sem), 0);
	}
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gang");
	TCase *tc;

	tc = wt_tcase(s, "errors", 30);
	tcase_add_test(tc, errors);
	tcase_add_test(tc, attr_errors);
	tc = wt_tcase(s, "basic", 60);
	tcase_add_test(tc, codispatch);
	tcase_add_test(tc, no_spin_on_parked_peer);
	tcase_add_test(tc, gang_off_spins_bounded);
	tcase_add_test(tc, fairness);
	tcase_add_test(tc, park_frees_worker);
	tcase_add_test(tc, io_frees_worker);
	tcase_add_test(tc, exit_leaves_gang);
	tcase_add_test(tc, gang_off_plain);
	tc = wt_tcase(s, "stress", wt_stress_seconds() * 3 + 30);
	tcase_add_test(tc, stress_randomize);
	return wt_run_suite(s);
}
