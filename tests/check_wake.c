/*
 * tests/check_wake.c - the wake path at scale (runtime/wake.c, idle.c):
 * placement rules, one kick per burst, and no runnable thread left behind
 * a busy worker while another idles.
 *
 * Black-box: each rule shows in where a woken thread runs
 * (weft_worker_id) and in the WEFT_STATS counters (kicks, chain_kicks,
 * place_*). Every test runs with DRAIN off (it moves threads between
 * workers by its own rule on a loaded host) and several rounds where the
 * host's timing could make one round go the other way.
 */
#define _GNU_SOURCE
#include "tests/harness.h"
#include "examples/task_stat.h"

#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/chan.h>
#include <weft/stats.h>
#include <weft/sync.h>

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Compute for ns without yielding or blocking: holds the worker. */
static void compute_ns(uint64_t ns)
{
	uint64_t end = weft_now_ns() + ns;

	while (weft_now_ns() < end)
		;
}

static void stats(weft_stats_t *s)
{
	ck_assert_int_eq(weft_stats_get(s), 0);
}

/* Run the process on the first CPU of its affinity mask (the kick gate
 * needs more workers than CPUs whatever the machine); *old receives the
 * mask to restore. */
static void pin_to_one_cpu(cpu_set_t *old)
{
	cpu_set_t one;
	int cpu = 0;

	ck_assert_int_eq(sched_getaffinity(0, sizeof(*old), old), 0);
	while (!CPU_ISSET(cpu, old))
		cpu++;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(one), &one), 0);
}

/* The test's mechanism needs these switches on (WEFT_FEATURES may turn
 * them off for a CI stage): else it prints SKIP and returns false. Each
 * switch: a comma-separated list of names. */
static bool needs(const char *test, const char *switches)
{
	char buf[64], *save = NULL;
	bool ok = true;

	wt_init_features(1, NULL);
	snprintf(buf, sizeof(buf), "%s", switches);
	for (char *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save))
		if (weft_feature(f) != 1) {
			wt_skip("wake/%s: needs %s (WEFT_FEATURES turns it off)", test, f);
			ok = false;
			break;   /* one skip per test */
		}
	wt_shutdown();
	return ok;
}

/* ---------------------------------------------------------------------- */
/* One kick per burst: a post_n to 256 waiters spread over 16 parked
 * workers makes at most 2 wake syscalls from the poster (kicks that are
 * not chained), and all 256 run. */

#define BURST_WAITERS 256
#define BURST_WORKERS 16

static weft_sem_t burst_sem;
static _Atomic int burst_arrived, burst_done;

static void *burst_waiter(void *arg)
{
	(void)arg;
	atomic_fetch_add(&burst_arrived, 1);
	WT_CHECK(weft_sem_wait(&burst_sem) == 0);
	atomic_fetch_add(&burst_done, 1);
	return NULL;
}

/* The burst itself, once n waiters have been spawned: wait until they
 * all arrived (5 s), let them block and their workers park (settle_ms),
 * post_n all n, wait until they all ran (done_ms); the stats around the
 * post in *s0 and *s1. */
static void burst_fire(int n, int settle_ms, int done_ms, weft_stats_t *s0, weft_stats_t *s1)
{
	int spins = 0;

	while (atomic_load(&burst_arrived) < n && spins++ < 5000)
		sleep_ms(1);
	ck_assert_int_eq(atomic_load(&burst_arrived), n);
	sleep_ms(settle_ms);
	stats(s0);
	ck_assert_int_eq(weft_sem_post_n(&burst_sem, (unsigned)n), 0);
	spins = 0;
	while (atomic_load(&burst_done) < n && spins++ < done_ms)
		sleep_ms(1);
	stats(s1);
}

/* The poster's own kicks (not chained) for one post_n: at most 2. */
static void burst_assert_direct(const char *what, const weft_stats_t *s0, const weft_stats_t *s1)
{
	uint64_t kicks = s1->kicks - s0->kicks, chained = s1->chain_kicks - s0->chain_kicks;

	printf("burst %s: %llu kicks, %llu chained, %llu placed on an awake worker\n", what,
	       (unsigned long long)kicks, (unsigned long long)chained,
	       (unsigned long long)(s1->place_awake - s0->place_awake));
	ck_assert_msg(kicks - chained <= 2, "%s: %llu kicks not chained (%llu chained) for one post_n",
		      what, (unsigned long long)(kicks - chained), (unsigned long long)chained);
}

/* Spawned pinned to worker k: spawns its share of unpinned waiters, which
 * start (and park) on worker k, so their last workers are spread. */
static void *burst_spawner(void *arg)
{
	weft_attr_t a;

	weft_attr_init(&a);
	a.detached = 1;
	for (int i = 0; i < (int)(intptr_t)arg; i++)
		WT_CHECK(weft_spawn(NULL, burst_waiter, NULL, &a) == 0);
	return NULL;
}

static void burst_run(int pinned)
{
	weft_stats_t s0, s1;
	weft_attr_t a;

	atomic_store(&burst_arrived, 0);
	atomic_store(&burst_done, 0);
	wt_init_features(BURST_WORKERS, "NO_DRAIN");
	ck_assert_int_eq(weft_sem_init(&burst_sem, 0), 0);
	weft_attr_init(&a);
	a.detached = 1;
	for (int k = 0; k < BURST_WORKERS; k++) {
		a.worker = k;
		if (pinned) {
			for (int i = 0; i < BURST_WAITERS / BURST_WORKERS; i++)
				ck_assert_int_eq(weft_spawn(NULL, burst_waiter, NULL, &a), 0);
		} else {
			ck_assert_int_eq(weft_spawn(NULL, burst_spawner,
						    (void *)(intptr_t)(BURST_WAITERS / BURST_WORKERS), &a), 0);
		}
	}
	/* every waiter blocked, every worker idle: they park for good */
	burst_fire(BURST_WAITERS, 100, 10000, &s0, &s1);
	wt_assert_no_failure();
	ck_assert_int_eq(atomic_load(&burst_done), BURST_WAITERS);
	burst_assert_direct(pinned ? "pinned" : "unpinned", &s0, &s1);
	if (!pinned)
		/* R4: the batch's unpinned wakees go to the one parked worker
		 * it kicks (workers then join by demand), not each to its own
		 * parked last worker (0 moved without R4: 16 kicks, all made
		 * for the poster) */
		ck_assert_msg(s1.place_awake - s0.place_awake >= BURST_WAITERS / 2,
			      "unpinned: %llu of %d wakees moved to the batch's worker",
			      (unsigned long long)(s1.place_awake - s0.place_awake), BURST_WAITERS);
	weft_sem_destroy(&burst_sem);
	wt_shutdown();
}

START_TEST(burst_one_kick_unpinned)
{
	burst_run(0);
}
END_TEST

START_TEST(burst_one_kick_pinned)
{
	burst_run(1);
}
END_TEST

/* The kick gate's race, forced (WEFT_FAULT=gatefree, runtime/fault.c):
 * oversubscribed (8 workers on one CPU), worker 0 kept awake by a
 * yielding thread, so the other workers park with the idle tick and every
 * kick of them is gated; the fault makes each gated kick find a CPU free
 * at its recheck, and the kicker then kicks the next pending worker
 * (round robin), seldom its own target. A post_n to one pinned waiter
 * per parked worker: those kicks are made for other wakes and count as
 * chained, so the poster's own stay at two. Counted as the poster's
 * (before), each gated chain step added one. */
#define GR_WORKERS 8
static _Atomic int gr_stop;

START_TEST(burst_gate_race)
{
	cpu_set_t old;
	weft_stats_t s0, s1;
	weft_attr_t a;
	weft_thread_t b;

	if (!needs("burst_gate_race", "KICK_GATE,STEAL"))
		return;
	pin_to_one_cpu(&old);
	atomic_store(&burst_arrived, 0);
	atomic_store(&burst_done, 0);
	atomic_store(&gr_stop, 0);
	ck_assert_int_eq(setenv("WEFT_FAULT", "gatefree", 1), 0);
	wt_init_features(GR_WORKERS, "NO_DRAIN");
	ck_assert_int_eq(unsetenv("WEFT_FAULT"), 0);
	ck_assert_int_eq(weft_sem_init(&burst_sem, 0), 0);
	weft_attr_init(&a);
	a.worker = 0;
	ck_assert_int_eq(weft_spawn(&b, wt_yielder, &gr_stop, &a), 0);
	a.detached = 1;
	for (int k = 1; k < GR_WORKERS; k++) {
		a.worker = k;
		ck_assert_int_eq(weft_spawn(NULL, burst_waiter, NULL, &a), 0);
	}
	/* the waiters block, their workers park with the tick */
	burst_fire(GR_WORKERS - 1, 20, 5000, &s0, &s1);
	atomic_store(&gr_stop, 1);
	ck_assert_int_eq(weft_join(b, NULL), 0);
	wt_assert_no_failure();
	ck_assert_int_eq(atomic_load(&burst_done), GR_WORKERS - 1);
	weft_sem_destroy(&burst_sem);
	wt_shutdown();
	ck_assert_int_eq(sched_setaffinity(0, sizeof(old), &old), 0);
	burst_assert_direct("gate race", &s0, &s1);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* A stranded-mail rescue's kick counts as chained (runtime/idle.c
 * mail_rescue): an idle worker that takes a busy worker's stuck mailbox
 * gives the pinned threads back, and if the victim parked meanwhile it
 * kicks it. That kick is made for the wakers of that mail, not by them;
 * counted as theirs, it made burst_one_kick_pinned fail under load ("3
 * kicks not chained (13 chained)", a rescuer preempted between its take
 * and its push-back while the victim parked). Forced here: S spins on
 * worker 0 without a switch, Y (pinned there) is posted and strands in
 * its mailbox, worker 1 (ticking for T's sleeps) watches it and rescues
 * it, and WEFT_FAULT=rescueslow holds the rescuer between take and
 * push-back until S ends and worker 0 parks. The post itself finds
 * worker 0 awake and kicks nobody, so every kick of the round is the
 * rescue's. */
static _Atomic int rk_stop, rk_s_running;
static weft_sem_t rk_sem;

static void *rk_y(void *arg)
{
	(void)arg;
	WT_CHECK(weft_sem_wait(&rk_sem) == 0);
	return NULL;
}

/* spins RK_SPIN_MS without a switch: worker 0 stays awake with mail */
#define RK_SPIN_MS 50
static void *rk_s(void *arg)
{
	weft_time_t end = weft_now_ns() + RK_SPIN_MS * 1000000ull;

	(void)arg;
	atomic_store(&rk_s_running, 1);
	while (weft_now_ns() < end)
		;
	atomic_store(&rk_s_running, 2);
	return NULL;
}

/* keeps worker 1 looking at its victims (a park re-check per sleep) */
static void *rk_t(void *arg)
{
	(void)arg;
	while (!atomic_load(&rk_stop))
		WT_CHECK(weft_sleep_ns(200000) == 0);
	return NULL;
}

START_TEST(rescue_kick_chained)
{
	weft_stats_t s0, s1;
	weft_thread_t y, sp, t;
	weft_attr_t a;
	uint64_t kicks, chained;
	int rescued = 0;
	bool awake;

	if (!needs("rescue_kick_chained", "MAILBOX,STEAL"))
		return;
	ck_assert_int_eq(setenv("WEFT_FAULT", "rescueslow:100000", 1), 0);
	wt_init_features(2, "NO_DRAIN");
	ck_assert_int_eq(unsetenv("WEFT_FAULT"), 0);
	ck_assert_int_eq(weft_sem_init(&rk_sem, 0), 0);
	weft_attr_init(&a);
	atomic_store(&rk_stop, 0);
	a.worker = 1;
	ck_assert_int_eq(weft_spawn(&t, rk_t, NULL, &a), 0);
	/* up to 10 rounds: under a loaded host the post may come after S
	 * ended (then it kicks worker 0 itself), or worker 1 may not look
	 * at the mailbox before S ends (then worker 0 drains Y itself) */
	for (int round = 0; round < 10 && !rescued; round++) {
		atomic_store(&rk_s_running, 0);
		a.worker = 0;
		ck_assert_int_eq(weft_spawn(&y, rk_y, NULL, &a), 0);
		sleep_ms(20);   /* Y blocks on the semaphore */
		ck_assert_int_eq(weft_spawn(&sp, rk_s, NULL, &a), 0);
		for (int i = 0; i < 2000 && !atomic_load(&rk_s_running); i++)
			sleep_ms(1);
		ck_assert(atomic_load(&rk_s_running));
		stats(&s0);
		ck_assert_int_eq(weft_sem_post(&rk_sem), 0);
		/* S still spinning after the post: worker 0 was awake for it */
		awake = atomic_load(&rk_s_running) == 1;
		ck_assert_int_eq(weft_join(y, NULL), 0);
		ck_assert_int_eq(weft_join(sp, NULL), 0);
		/* the rescuer counts its kick as chained after the wake
		 * syscall, and the kicked worker (Y, then our joins) may run
		 * first: under load it was preempted there for a while */
		for (int i = 0; i < 200; i++) {
			stats(&s1);
			if (s1.kicks - s0.kicks == s1.chain_kicks - s0.chain_kicks)
				break;
			sleep_ms(1);
		}
		if (!awake) {
			printf("rescue round %d: the post came after S ended (loaded host)\n", round);
			continue;
		}
		kicks = s1.kicks - s0.kicks;
		chained = s1.chain_kicks - s0.chain_kicks;
		printf("rescue round %d: %llu kicks, %llu chained\n", round,
		       (unsigned long long)kicks, (unsigned long long)chained);
		ck_assert_msg(kicks == chained, "%llu kicks, only %llu chained: the rescue's kick "
			      "counted as the poster's", (unsigned long long)kicks,
			      (unsigned long long)chained);
		rescued = kicks > 0;
	}
	ck_assert_msg(rescued, "no rescue kick in 10 rounds: the mechanism under test did not run");
	atomic_store(&rk_stop, 1);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	weft_sem_destroy(&rk_sem);
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Placement rules R1 and R2 (runtime/wake.c): X last ran on worker 1; a
 * waker pinned to worker 0 posts X's semaphore and then blocks.
 *   R1: worker 1 is awake (a pinned thread there keeps yielding): X runs
 *       on worker 1, its last one.
 *   R2: worker 1 is parked: X runs on worker 0, the waker's (WAKE_AFFINE),
 *       and on worker 1 with NO_WAKE_AFFINE. */

#define ROUNDS 20

static weft_sem_t px_sem, pw_sem;
static _Atomic int px_where, px_parked, keep_busy;

/* X: parks once on px_sem, notes where it ran after the wake. */
static void *px_thread(void *arg)
{
	(void)arg;
	WT_CHECK(weft_worker_id() == 1);
	atomic_store(&px_parked, 1);
	WT_CHECK(weft_sem_wait(&px_sem) == 0);
	atomic_store(&px_where, weft_worker_id());
	WT_CHECK(weft_sem_post(&pw_sem) == 0);
	return NULL;
}

/* Pinned to worker 1: X starts (and parks) there, so its last worker is 1. */
static void *px_spawner(void *arg)
{
	weft_thread_t x;

	(void)arg;
	WT_CHECK(weft_spawn(&x, px_thread, NULL, NULL) == 0);
	WT_CHECK(weft_join(x, NULL) == 0);
	return NULL;
}

static void *busy_yielder(void *arg)
{
	(void)arg;
	while (atomic_load_explicit(&keep_busy, memory_order_relaxed))
		weft_yield();
	return NULL;
}

/* Runs on worker 0: rounds of "X parks on worker 1; wake it from here and
 * block; see where it ran". Returns how many rounds X ran on worker 1. */
static void *px_waker(void *arg)
{
	weft_thread_t s, b = NULL;
	weft_attr_t a;
	int on1 = 0, busy = (int)(intptr_t)arg;

	weft_attr_init(&a);
	a.worker = 1;
	if (busy) {
		atomic_store(&keep_busy, 1);
		WT_CHECK(weft_spawn(&b, busy_yielder, NULL, &a) == 0);
	}
	for (int r = 0; r < ROUNDS; r++) {
		atomic_store(&px_parked, 0);
		atomic_store(&px_where, -1);
		WT_CHECK(weft_spawn(&s, px_spawner, NULL, &a) == 0);
		/* Busy, not asleep: an idle worker 0 would steal X before it
		 * parks on worker 1 (and waking from a sleep, it would get
		 * worker 1 going to look at its next slot). 2 ms after X parked,
		 * an idle worker 1 has parked too (its tick looks last a few us
		 * a millisecond). */
		while (!atomic_load(&px_parked))
			;
		compute_ns(2000000);
		WT_CHECK(weft_sem_post(&px_sem) == 0);
		if (busy) {
			/* stay busy (no steal from here) while X runs where it
			 * was placed; bounded: placed here, it waits for us */
			uint64_t end = weft_now_ns() + 50000000;

			while (atomic_load(&px_where) < 0 && weft_now_ns() < end)
				;
		}
		WT_CHECK(weft_sem_wait(&pw_sem) == 0);
		WT_CHECK(weft_join(s, NULL) == 0);
		on1 += atomic_load(&px_where) == 1;
	}
	if (busy) {
		atomic_store(&keep_busy, 0);
		WT_CHECK(weft_join(b, NULL) == 0);
	}
	return (void *)(intptr_t)on1;
}

static int px_run(const char *features, int busy)
{
	weft_thread_t w;
	weft_attr_t a;
	void *ret;

	wt_init_features(2, features);
	ck_assert_int_eq(weft_sem_init(&px_sem, 0), 0);
	ck_assert_int_eq(weft_sem_init(&pw_sem, 0), 0);
	weft_attr_init(&a);
	a.worker = 0;
	ck_assert_int_eq(weft_spawn(&w, px_waker, (void *)(intptr_t)busy, &a), 0);
	ck_assert_int_eq(weft_join(w, &ret), 0);
	wt_assert_no_failure();
	wt_shutdown();
	return (int)(intptr_t)ret;
}

START_TEST(affine_pulls_to_waker)
{
	/* without the next slot, the pulled wakee is surplus on worker 0 and
	 * an idle worker steals it: placed affine, run elsewhere */
	if (!needs("affine_pulls_to_waker", "NEXT_SLOT,WAKE_AFFINE"))
		return;
	/* R2 on: X, whose last worker (1) is parked, runs on the waker's 0 */
	int on1 = px_run("NO_DRAIN", 0);

	ck_assert_msg(on1 <= ROUNDS / 4, "WAKE_AFFINE: X ran on its parked last worker in %d of %d rounds",
		      on1, ROUNDS);
	/* R2 off: X goes back to worker 1 (kicked) */
	on1 = px_run("NO_DRAIN,NO_WAKE_AFFINE,NO_WAKE_WIDE", 0);
	ck_assert_msg(on1 >= ROUNDS - ROUNDS / 4, "NO_WAKE_AFFINE: X ran on worker 1 in %d of %d rounds",
		      on1, ROUNDS);
}
END_TEST

START_TEST(awake_last_keeps)
{
	/* R1: worker 1 stays awake (a pinned yielder); X keeps running there */
	int on1 = px_run("NO_DRAIN", 1);

	ck_assert_msg(on1 >= ROUNDS - ROUNDS / 4, "R1: X left its awake last worker in %d of %d rounds",
		      ROUNDS - on1, ROUNDS);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* R2' (WAKE_WIDE): a dispatcher pinned to worker 0 wakes 8 servers in
 * turn; its flips are high and each server's are low, so its wakes are
 * counted wide and not pulled to worker 0. NO_WAKE_WIDE: none is. */

#define NSERVERS 8
#define DISPATCHES 4000

static weft_sem_t srv_sem[NSERVERS], reply_sem;
static _Atomic int srv_stop, srv_started;
static int nservers = NSERVERS;   /* servers the dispatcher uses (<= NSERVERS) */
/* >= 0: the servers are spawned by a thread pinned to this worker, so
 * that they start there (unpinned) and the dispatcher's first wake of
 * each finds its last worker parked: the placement rules are asked
 * whether or not an idle worker ever steals a server */
static int srv_home = -1;
static weft_thread_t srv_t[NSERVERS];

static void *server(void *arg)
{
	weft_sem_t *s = arg;

	atomic_fetch_add(&srv_started, 1);
	for (;;) {
		WT_CHECK(weft_sem_wait(s) == 0);
		if (atomic_load(&srv_stop))
			return NULL;
		for (volatile int i = 0; i < 2000; i++)
			;
		WT_CHECK(weft_sem_post(&reply_sem) == 0);
	}
}

static void *spawn_servers(void *arg)
{
	(void)arg;
	for (int i = 0; i < nservers; i++)
		WT_CHECK(weft_spawn(&srv_t[i], server, &srv_sem[i], NULL) == 0);
	return NULL;
}

/* Start the servers: here, or (srv_home >= 0) on worker srv_home, then
 * wait until they all wait and that worker has run dry and parked. */
static void servers_start(void)
{
	weft_attr_t a;
	weft_thread_t sp;

	atomic_store(&srv_stop, 0);
	atomic_store(&srv_started, 0);
	if (srv_home < 0) {
		spawn_servers(NULL);
		return;
	}
	weft_attr_init(&a);
	a.worker = srv_home;
	WT_CHECK(weft_spawn(&sp, spawn_servers, NULL, &a) == 0);
	WT_CHECK(weft_join(sp, NULL) == 0);
	while (atomic_load(&srv_started) < nservers)
		WT_CHECK(weft_sleep_ns(1000000) == 0);
	WT_CHECK(weft_sleep_ns(5000000) == 0);
}

/* Collect the replies in flight (in_flight), then stop and join the
 * servers. */
static void servers_stop(int in_flight)
{
	for (int d = 0; d < in_flight; d++)
		WT_CHECK(weft_sem_wait(&reply_sem) == 0);
	atomic_store(&srv_stop, 1);
	for (int i = 0; i < nservers; i++) {
		WT_CHECK(weft_sem_post(&srv_sem[i]) == 0);
		WT_CHECK(weft_join(srv_t[i], NULL) == 0);
	}
}

static void *dispatcher(void *arg)
{
	int in_flight = 0;

	(void)arg;
	servers_start();
	for (int d = 0; d < DISPATCHES / WT_SCALE_DIV; d++) {
		/* 4 in flight at a time, round-robin over the servers */
		WT_CHECK(weft_sem_post(&srv_sem[d % nservers]) == 0);
		if (++in_flight == 4) {
			WT_CHECK(weft_sem_wait(&reply_sem) == 0);
			in_flight--;
		}
		if (d % 64 != 63)
			continue;
		/* now and then a pause long enough for the other workers to
		 * run dry and park, so the next wakes find the servers' last
		 * worker parked and the wide rule is asked (host timing alone
		 * may keep it busy for a whole run) */
		WT_CHECK(weft_sleep_ns(2000000) == 0);
	}
	servers_stop(in_flight);
	return NULL;
}

/* Returns the wakes counted wide; *affine (if not NULL): those pulled to
 * the waker's worker (R2). */
static uint64_t wide_run_n(int workers, const char *features, uint64_t *affine)
{
	weft_stats_t s0, s1;
	weft_thread_t d;
	weft_attr_t a;

	atomic_store(&srv_stop, 0);
	wt_init_features(workers, features);
	for (int i = 0; i < NSERVERS; i++)
		ck_assert_int_eq(weft_sem_init(&srv_sem[i], 0), 0);
	ck_assert_int_eq(weft_sem_init(&reply_sem, 0), 0);
	weft_attr_init(&a);
	a.worker = 0;
	stats(&s0);
	ck_assert_int_eq(weft_spawn(&d, dispatcher, NULL, &a), 0);
	ck_assert_int_eq(weft_join(d, NULL), 0);
	stats(&s1);
	wt_assert_no_failure();
	wt_shutdown();
	if (affine)
		*affine = s1.place_affine - s0.place_affine;
	return s1.place_wide - s0.place_wide;
}

static uint64_t wide_run(const char *features)
{
	return wide_run_n(2, features, NULL);
}

START_TEST(wide_waker_not_pulled)
{
	uint64_t on = 0, off;

	/* without stealing, the servers never leave the dispatcher's worker,
	 * so the wide rule is never asked (R1) */
	if (!needs("wide_waker_not_pulled", "STEAL,WAKE_WIDE"))
		return;
	/* the rule is asked only when a server's last worker is parked: the
	 * servers start on worker 1 (srv_home), which parks before the first
	 * dispatch; later asks follow steals, which the host's timing
	 * decides: up to 3 runs */
	srv_home = 1;
	off = wide_run("NO_DRAIN,NO_WAKE_WIDE");
	for (int i = 0; i < 3 && on == 0; i++)
		on = wide_run("NO_DRAIN");
	srv_home = -1;
	printf("wide waker: %llu wakes counted wide\n", (unsigned long long)on);

	ck_assert_msg(on > 0, "WAKE_WIDE: no wake of the dispatcher was counted wide");
	ck_assert_msg(off == 0, "NO_WAKE_WIDE: %llu wakes counted wide", (unsigned long long)off);
}
END_TEST

/* R2' counts a flip only for a wakee other than the waker's last two
 * (wake.c "Wide wakers"): a thread that alternates between two partners,
 * a pipeline stage waking its successor and its predecessor, makes no
 * flips, so its wakes are pulled to its worker (R2) against partners
 * that do not flip either. That includes a dispatcher over exactly two
 * servers, this test's thread: history alone cannot tell it from a
 * pipeline stage (docs/wake-path.md "Wide wakers" has both measured).
 * The rule is asked only when a server's last worker is parked: the
 * servers start on worker 1 (srv_home), which parks before the first
 * dispatch, and later ones depend on steals (host timing); runs until
 * one pulled a wake (at most 3), and none may count a wide wake. Fails with a flip per change of wakee (hundreds counted
 * wide in each of 3 runs), and if no wake was ever pulled (the rule was
 * never asked, so nothing was tested). */
START_TEST(two_wakees_not_wide)
{
	uint64_t wide = 0, affine = 0, a;

	if (!needs("two_wakees_not_wide", "STEAL,WAKE_WIDE,WAKE_AFFINE"))
		return;
	nservers = 2;
	srv_home = 1;
	for (int i = 0; i < 3 && affine == 0; i++) {
		wide += wide_run_n(2, "NO_DRAIN", &a);
		affine += a;
	}
	srv_home = -1;
	nservers = NSERVERS;
	printf("two wakees: %llu wakes pulled, %llu counted wide\n", (unsigned long long)affine,
	       (unsigned long long)wide);
	ck_assert_msg(wide == 0, "a waker alternating between 2 wakees: %llu wakes counted wide",
		      (unsigned long long)wide);
	ck_assert_msg(affine > 0, "no wake was pulled in 3 runs: the rule was never asked");
}
END_TEST

/* R2' spreads only where a CPU would idle: 4 workers on one CPU, with the
 * dispatcher's worker running, have none, so no wake is counted wide (the
 * unconditional rule counted them as on 2 workers: it kicked parked
 * workers onto a busy CPU). */
START_TEST(wide_not_spread_oversubscribed)
{
	cpu_set_t old;
	uint64_t on;

	pin_to_one_cpu(&old);
	on = wide_run_n(4, "NO_DRAIN", NULL);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(old), &old), 0);
	ck_assert_msg(on == 0, "4 workers on one CPU: %llu wakes counted wide", (unsigned long long)on);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* No runnable thread waits behind a busy worker while another idles
 * (the two stranded cases): the waiting thread runs within 20 ms
 * (median of 3 rounds; every round well before the 300 ms computation
 * ends); without the fix it waits for the end of it. */

#define COMPUTE_NS 300000000ull

static _Atomic uint64_t started_at;

static void *note_start(void *arg)
{
	(void)arg;
	atomic_store(&started_at, weft_now_ns());
	return NULL;
}

static void compute_until(uint64_t end)
{
	while (weft_now_ns() < end)
		;   /* no yield, no blocking call */
}

/* Case A: a thread spawns a child, then computes without yielding. */
static void *spawn_then_compute(void *arg)
{
	weft_thread_t c;
	uint64_t t0 = weft_now_ns();

	(void)arg;
	WT_CHECK(weft_spawn(&c, note_start, NULL, NULL) == 0);
	compute_until(t0 + COMPUTE_NS);
	WT_CHECK(weft_join(c, NULL) == 0);
	return (void *)(uintptr_t)(atomic_load(&started_at) - t0);
}

/* Case B: X waits on a semaphore, last ran on worker k; a thread pinned
 * to worker k computes; main posts. X is woken into worker k's mailbox
 * (its last worker is awake) and the idle worker takes it from there. */
static weft_sem_t x_sem;
static _Atomic int x_parked;

static _Atomic int x_worker;

static void *x_waiter(void *arg)
{
	(void)arg;
	atomic_store(&x_worker, weft_worker_id());
	atomic_store(&x_parked, 1);
	WT_CHECK(weft_sem_wait(&x_sem) == 0);
	atomic_store(&started_at, weft_now_ns());
	return NULL;
}

static void *x_spawner(void *arg)
{
	weft_thread_t x;

	(void)arg;
	WT_CHECK(weft_spawn(&x, x_waiter, NULL, NULL) == 0);
	WT_CHECK(weft_join(x, NULL) == 0);
	return NULL;
}

static void *pinned_compute(void *arg)
{
	(void)arg;
	compute_until(weft_now_ns() + COMPUTE_NS);
	return NULL;
}

/* Case C: Y yields to C, which computes without yielding; Y waits in
 * the worker's private list (the mutex hand-off does this: the unlocker
 * yields to the waiter it woke, and a waiter that then never blocks held
 * the worker while the unlocker waited; test-mutex V 2 showed one task
 * with 1.7 M operations, the other with 1,830). */
static void *yield_then_note(void *arg)
{
	weft_thread_t c;
	uint64_t t0;

	(void)arg;
	WT_CHECK(weft_spawn(&c, pinned_compute, NULL, NULL) == 0);   /* lone child: next slot */
	t0 = weft_now_ns();
	WT_CHECK(weft_yield() == 0);   /* C runs here; Y queues behind it */
	atomic_store(&started_at, weft_now_ns());
	WT_CHECK(weft_join(c, NULL) == 0);
	return (void *)(uintptr_t)t0;
}

static void *y_spawner(void *arg)
{
	weft_thread_t y;
	void *t0;

	(void)arg;
	WT_CHECK(weft_spawn(&y, yield_then_note, NULL, NULL) == 0);
	WT_CHECK(weft_join(y, &t0) == 0);   /* takes Y from the slot: Y runs on worker 0 */
	return t0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* d[0..n-1]: per-round delays (n odd, at least 3). The median must stay
 * under 20 ms, the worst under half the computation. */
static void check_delays_n(const char *what, uint64_t *d, int n)
{
	qsort(d, (size_t)n, sizeof(d[0]), cmp_u64);
	printf("%s: delays", what);
	for (int i = 0; i < n; i++)
		printf(" %.2f", (double)d[i] / 1e6);
	printf(" ms\n");
	ck_assert_msg(d[n - 1] < COMPUTE_NS / 2,
		      "%s: a round waited %.1f ms (the computation is %.0f ms)", what,
		      (double)d[n - 1] / 1e6, (double)COMPUTE_NS / 1e6);
	ck_assert_msg(d[n / 2] < 20000000ull, "%s: median delay %.1f ms (bound 20 ms)", what,
		      (double)d[n / 2] / 1e6);
}

static void check_delays(const char *what, uint64_t d[3])
{
	check_delays_n(what, d, 3);
}

START_TEST(stranded_spawned_child)
{
	uint64_t d[3];
	weft_attr_t a;

	/* the lone child waits in the next slot, where a thief takes it */
	if (!needs("stranded_spawned_child", "STEAL,NEXT_SLOT"))
		return;
	wt_init_features(2, "NO_DRAIN");
	weft_attr_init(&a);
	a.worker = 0;
	for (int r = 0; r < 3; r++) {
		weft_thread_t t;
		void *ret;

		ck_assert_int_eq(weft_spawn(&t, spawn_then_compute, NULL, &a), 0);
		ck_assert_int_eq(weft_join(t, &ret), 0);
		d[r] = (uint64_t)(uintptr_t)ret;
	}
	wt_assert_no_failure();
	wt_shutdown();
	check_delays("spawned child", d);
}
END_TEST

START_TEST(stranded_wakee_mailbox)
{
	uint64_t d[3];
	weft_attr_t a;

	/* the rescue is a steal */
	if (!needs("stranded_wakee_mailbox", "STEAL"))
		return;

	wt_init_features(2, "NO_DRAIN");
	weft_attr_init(&a);
	a.worker = 0;
	for (int r = 0; r < 3; r++) {
		weft_thread_t x, p;
		uint64_t t0;
		int spins = 0;

		ck_assert_int_eq(weft_sem_init(&x_sem, 0), 0);
		atomic_store(&x_parked, 0);
		/* X (unpinned) starts on worker 0: spawned by a thread pinned
		 * there, which joins it */
		ck_assert_int_eq(weft_spawn(&x, x_spawner, NULL, &a), 0);
		while (!atomic_load(&x_parked) && spins++ < 5000)
			sleep_ms(1);
		sleep_ms(5);            /* every worker idle: they sleep deep */
		/* the computation holds X's last worker (0, unless a thief
		 * took X from the next slot first) */
		a.worker = atomic_load(&x_worker);
		ck_assert_int_eq(weft_spawn(&p, pinned_compute, NULL, &a), 0);
		a.worker = 0;
		sleep_ms(50);
		t0 = weft_now_ns();
		ck_assert_int_eq(weft_sem_post(&x_sem), 0);
		ck_assert_int_eq(weft_join(p, NULL), 0);
		ck_assert_int_eq(weft_join(x, NULL), 0);
		d[r] = atomic_load(&started_at) - t0;
		weft_sem_destroy(&x_sem);
	}
	wt_assert_no_failure();
	wt_shutdown();
	check_delays("woken thread", d);
}
END_TEST

START_TEST(stranded_yielder)
{
	uint64_t d[3];
	weft_attr_t a;

	/* the rescue is a steal */
	if (!needs("stranded_yielder", "STEAL"))
		return;
	wt_init_features(2, "NO_DRAIN");
	weft_attr_init(&a);
	a.worker = 0;
	for (int r = 0; r < 3; r++) {
		weft_thread_t p;
		void *t0;

		sleep_ms(5);            /* every worker idle: they sleep deep */
		ck_assert_int_eq(weft_spawn(&p, y_spawner, NULL, &a), 0);
		ck_assert_int_eq(weft_join(p, &t0), 0);
		d[r] = atomic_load(&started_at) - (uint64_t)(uintptr_t)t0;
	}
	wt_assert_no_failure();
	wt_shutdown();
	check_delays("yielder", d);
}
END_TEST

/* Start 2 workers (DRAIN off) for a test of where local wakes run: they
 * go to the waker's worker (WAKE_AFFINE), its next slot (NEXT_SLOT, not
 * shuffled by RANDOMIZE) and can be stolen (STEAL). Else prints SKIP and
 * returns false with no runtime. */
static bool start_local_wakes(const char *test)
{
	if (!needs(test, "STEAL,NEXT_SLOT,WAKE_AFFINE"))
		return false;
	wt_init_features(2, "NO_DRAIN");
	if (weft_feature("RANDOMIZE") == 1) {
		wt_shutdown();
		wt_skip("wake/%s: RANDOMIZE shuffles next-slot use", test);
		return false;
	}
	return true;
}

/* ---------------------------------------------------------------------- */
/* A displaced wakee (worker.c offer_displaced). A, pinned to worker 0,
 * wakes B and then C, both unpinned and last run on worker 0: B goes to
 * the next slot and C displaces it to the queue. Worker 1 is idle with
 * the idle tick (A kept worker 0 awake throughout, so worker 1 parked as
 * the looker, not deep). The two wakes make no kick: a waker that blocks
 * next runs both here. A then computes for COMPUTE_NS without blocking,
 * and worker 1 takes B (from the ring) and C (from the next slot) within
 * the stranding bound. With the surplus kick at the displacement, A's
 * second wake kicked worker 1 in every round. */

#define DISPLACE_ROUNDS 5

static weft_sem_t dsp_sem[2];
static _Atomic int dsp_parked;
static _Atomic uint64_t dsp_ran[2];
static _Atomic int dsp_late;   /* this round, B ran only after A computed */

static void *dsp_wakee(void *arg)
{
	int i = (int)(intptr_t)arg;

	atomic_fetch_add(&dsp_parked, 1);
	WT_CHECK(weft_sem_wait(&dsp_sem[i]) == 0);
	atomic_store(&dsp_ran[i], weft_now_ns());
	return NULL;
}

/* One round; returns the kicks the two wakes made, and in *t0 when they
 * were made. */
static void *dsp_waker(void *arg)
{
	uint64_t *t0 = arg;
	weft_thread_t x[2];
	weft_stats_t s0, s1;
	uint64_t end;

	atomic_store(&dsp_parked, 0);
	for (int i = 0; i < 2; i++) {
		WT_CHECK(weft_sem_init(&dsp_sem[i], 0) == 0);
		WT_CHECK(weft_spawn(&x[i], dsp_wakee, (void *)(intptr_t)i, NULL) == 0);
	}
	/* yield, never block: worker 0 stays awake while they start and park */
	while (atomic_load(&dsp_parked) < 2)
		WT_CHECK(weft_yield() == 0);
	compute_ns(5000000);   /* worker 1 parks with the idle tick */
	WT_CHECK(weft_stats_get(&s0) == 0);
	*t0 = weft_now_ns();
	WT_CHECK(weft_sem_post(&dsp_sem[0]) == 0);   /* B: the next slot */
	WT_CHECK(weft_sem_post(&dsp_sem[1]) == 0);   /* C displaces B */
	WT_CHECK(weft_stats_get(&s1) == 0);
	end = *t0 + COMPUTE_NS / 4;
	while (weft_now_ns() < end && !(atomic_load(&dsp_ran[0]) && atomic_load(&dsp_ran[1])))
		;   /* computes: no yield, no blocking call */
	/* B ran while A computed (else the join below runs it here): not a
	 * check per round, since a post made in the few us a ticking worker
	 * is out of nidle leaves B private until A's next pick, as designed;
	 * counted by the test */
	atomic_store(&dsp_late, atomic_load(&dsp_ran[0]) == 0 || atomic_load(&dsp_ran[0]) >= end);
	for (int i = 0; i < 2; i++) {
		WT_CHECK(weft_join(x[i], NULL) == 0);
		weft_sem_destroy(&dsp_sem[i]);
	}
	return (void *)(uintptr_t)(s1.kicks - s0.kicks);
}

START_TEST(displaced_wakee_no_kick)
{
	uint64_t d[DISPLACE_ROUNDS];
	int kicked = 0, late = 0;
	weft_attr_t a;

	/* pulled to A's worker (WAKE_AFFINE, the next slot) and stolen from
	 * there (STEAL); RANDOMIZE sends local wakes past the next slot */
	if (!start_local_wakes("displaced_wakee_no_kick"))
		return;
	weft_attr_init(&a);
	a.worker = 0;
	for (int r = 0; r < DISPLACE_ROUNDS; r++) {
		weft_thread_t t;
		uint64_t t0 = 0;
		void *k;

		atomic_store(&dsp_ran[0], 0);
		atomic_store(&dsp_ran[1], 0);
		ck_assert_int_eq(weft_spawn(&t, dsp_waker, &t0, &a), 0);
		ck_assert_int_eq(weft_join(t, &k), 0);
		kicked += (uintptr_t)k > 0;
		late += atomic_load(&dsp_late);
		/* B's delay (it waited in the queue; C in the slot is the
		 * stranded_* cases' concern) */
		d[r] = atomic_load(&dsp_ran[0]) - t0;
		printf("displaced: round %d kicks %lu\n", r, (unsigned long)(uintptr_t)k);
	}
	wt_assert_no_failure();
	wt_shutdown();
	ck_assert_msg(kicked <= 1, "%d of %d rounds kicked a worker for a displaced wakee", kicked,
		      DISPLACE_ROUNDS);
	ck_assert_msg(late <= 1, "%d of %d rounds: the displaced wakee ran only after its waker",
		      late, DISPLACE_ROUNDS);
	check_delays_n("displaced wakee", d, DISPLACE_ROUNDS);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* A chain of stages (examples/pipeline in small): 8 light threads joined
 * by channels of capacity 1, one item at a time. Each stage wakes the
 * stage after it and the one before it, then blocks, so the chain runs
 * best on one worker while the other idles. With 2 workers it made ~75
 * kicks per 1,000 items here, nearly all the displaced wakee's surplus
 * kick (worker.c offer_displaced), each followed by a steal that split
 * the chain; the kick that answered the idle worker's request for
 * private work (answer_split_req) made most of the rest (0.8 per 1,000
 * without it). Now the idle worker is left to its tick: the bound is 2
 * per 1,000 items (0.2 to 0.35 seen). */

#define CHAIN_STAGES 8
#define CHAIN_ITEMS 200000

static weft_chan_t *chain_ch[CHAIN_STAGES - 1];

static void *chain_stage(void *arg)
{
	int k = (int)(intptr_t)arg;

	for (int i = 0; i < CHAIN_ITEMS; i++) {
		int v = i;

		if (k > 0)
			WT_CHECK(weft_chan_recv(chain_ch[k - 1], &v) == 0 && v == i);
		if (k < CHAIN_STAGES - 1)
			WT_CHECK(weft_chan_send(chain_ch[k], &v) == 0);
	}
	return NULL;
}

START_TEST(chain_few_kicks)
{
	weft_thread_t st[CHAIN_STAGES];
	weft_stats_t s0, s1;
	double per_k;

	if (!start_local_wakes("chain_few_kicks"))
		return;
	for (int k = 0; k < CHAIN_STAGES - 1; k++)
		ck_assert_int_eq(weft_chan_create(&chain_ch[k], sizeof(int), 1), 0);
	stats(&s0);
	for (int k = 0; k < CHAIN_STAGES; k++)
		ck_assert_int_eq(weft_spawn(&st[k], chain_stage, (void *)(intptr_t)k, NULL), 0);
	for (int k = 0; k < CHAIN_STAGES; k++)
		ck_assert_int_eq(weft_join(st[k], NULL), 0);
	stats(&s1);
	for (int k = 0; k < CHAIN_STAGES - 1; k++)
		ck_assert_int_eq(weft_chan_destroy(chain_ch[k]), 0);
	wt_assert_no_failure();
	wt_shutdown();
	per_k = (double)(s1.kicks - s0.kicks) * 1000.0 / CHAIN_ITEMS;
	printf("chain: %lu kicks, %.2f per 1,000 items, %lu steals\n",
	       (unsigned long)(s1.kicks - s0.kicks), per_k, (unsigned long)(s1.steals - s0.steals));
	ck_assert_msg(per_k < 2.0, "chain of %d stages: %.2f kicks per 1,000 items (bound 2)",
		      CHAIN_STAGES, per_k);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* A waker reads nothing of its wakee after the push (runtime/wake.c
 * wft_wake_push and wft_wake_push_burst, worker.c wft_worker_push_local):
 * once the wakee is in a mailbox or a next slot another worker may run it,
 * it may exit, and its TCB may be spawned again. Each round makes that
 * happen: the waker W (pinned to worker 0) wakes X; X runs on worker 1,
 * detaches itself, unparks R and exits (its TCB goes to worker 1's cache);
 * R (pinned to worker 1) spawns a thread at once, which takes X's TCB from
 * that cache and writes it (spawn_reset). A waker that read X after the
 * push races that write, which TSan reports; a plain build cannot see it,
 * and there the test checks that every round ran. Three kinds of round:
 * MAIL, X pinned to worker 1, where a yielding thread keeps worker 1 awake
 * (W's unpark pushes into worker 1's mailbox and finds it awake); SLOT, X
 * unpinned, parked on worker 0 (W's push goes to its own next slot, W
 * computes on, and worker 1 steals X from the slot: worker.c I5); BURST,
 * two X pinned to worker 1 on a semaphore, posted with weft_sem_post_n (a
 * batched flush: the burst's push to its first worker). */

#define REUSE_ROUNDS 150

enum reuse_mode { REUSE_MAIL, REUSE_SLOT, REUSE_BURST };

static weft_thread_t reuse_r;
static weft_sem_t reuse_sem;
static _Atomic int reuse_x_parking, reuse_x_go, reuse_r_go, reuse_done, reuse_stop;

static void *reuse_nop(void *arg)
{
	(void)arg;
	atomic_fetch_add(&reuse_done, 1);
	return NULL;
}

/* R: each wake, one spawn from worker 1 per X that exited just before */
static void *reuse_respawner(void *arg)
{
	weft_attr_t a;
	weft_thread_t c;

	(void)arg;
	weft_attr_init(&a);
	a.detached = 1;
	a.worker = 1;
	for (;;) {
		int go;

		WT_CHECK(weft_park() == 0);
		go = atomic_exchange(&reuse_r_go, 0);
		if (go < 0)
			return NULL;
		while (go-- > 0)
			WT_CHECK(weft_spawn(&c, reuse_nop, NULL, &a) == 0);
	}
}

static void *reuse_x(void *arg)
{
	bool on_sem = arg != NULL;

	atomic_fetch_add(&reuse_x_parking, 1);
	if (on_sem)
		WT_CHECK(weft_sem_wait(&reuse_sem) == 0);
	else
		while (!atomic_load(&reuse_x_go))
			WT_CHECK(weft_park() == 0);
	/* detached only now (W may need the handle): the exit frees the
	 * TCB into this worker's cache */
	WT_CHECK(weft_detach(weft_self()) == 0);
	atomic_fetch_add(&reuse_r_go, 1);
	WT_CHECK(weft_unpark(reuse_r) == 0);
	return NULL;
}


static void *reuse_waker(void *arg)
{
	enum reuse_mode mode = (enum reuse_mode)(uintptr_t)arg;
	int nx = mode == REUSE_BURST ? 2 : 1;
	uint64_t deadline = weft_now_ns() + 20000000000ull;
	weft_attr_t a;

	weft_attr_init(&a);
	a.worker = mode == REUSE_SLOT ? -1 : 1;
	for (int r = 0; r < REUSE_ROUNDS && !atomic_load(&wt_failure); r++) {
		weft_thread_t x[2];

		atomic_store(&reuse_x_parking, 0);
		atomic_store(&reuse_x_go, 0);
		for (int i = 0; i < nx; i++)
			WT_CHECK(weft_spawn(&x[i], reuse_x, mode == REUSE_BURST ? &reuse_sem : NULL,
					    &a) == 0);
		/* unpinned, X is W's lone child and runs here when W yields */
		while (atomic_load(&reuse_x_parking) < nx && weft_now_ns() < deadline)
			WT_CHECK(weft_yield() == 0);
		WT_CHECK(weft_sleep_ns(100000) == 0);   /* X parks meanwhile */
		if (mode == REUSE_BURST) {
			WT_CHECK(weft_sem_post_n(&reuse_sem, 2) == 0);
		} else {
			atomic_store(&reuse_x_go, 1);
			WT_CHECK(weft_unpark(x[0]) == 0);
		}
		if (mode == REUSE_SLOT)
			compute_ns(300000);   /* past I5's delay: worker 1 steals X */
		while (atomic_load(&reuse_done) < (r + 1) * nx && weft_now_ns() < deadline)
			WT_CHECK(weft_yield() == 0);
		WT_CHECK(atomic_load(&reuse_done) == (r + 1) * nx);
	}
	return NULL;
}

static void reuse_run(enum reuse_mode mode)
{
	weft_attr_t a;
	weft_thread_t w, y = NULL;

	atomic_store(&reuse_done, 0);
	atomic_store(&reuse_stop, 0);
	atomic_store(&reuse_r_go, 0);
	ck_assert_int_eq(weft_sem_init(&reuse_sem, 0), 0);
	weft_attr_init(&a);
	a.worker = 1;
	ck_assert_int_eq(weft_spawn(&reuse_r, reuse_respawner, NULL, &a), 0);
	/* keeps worker 1 awake in the pinned rounds: X's mail finds it AWAKE */
	if (mode != REUSE_SLOT)
		ck_assert_int_eq(weft_spawn(&y, wt_yielder, &reuse_stop, &a), 0);
	a.worker = 0;
	ck_assert_int_eq(weft_spawn(&w, reuse_waker, (void *)(uintptr_t)mode, &a), 0);
	ck_assert_int_eq(weft_join(w, NULL), 0);
	atomic_store(&reuse_stop, 1);
	atomic_store(&reuse_r_go, -1);
	ck_assert_int_eq(weft_unpark(reuse_r), 0);
	ck_assert_int_eq(weft_join(reuse_r, NULL), 0);
	if (y)
		ck_assert_int_eq(weft_join(y, NULL), 0);
	wt_assert_no_failure();
	ck_assert_int_eq(atomic_load(&reuse_done), REUSE_ROUNDS * (mode == REUSE_BURST ? 2 : 1));
	weft_sem_destroy(&reuse_sem);
}

START_TEST(no_read_after_push)
{
	wt_init_features(2, "NO_DRAIN");
	reuse_run(REUSE_MAIL);
	reuse_run(REUSE_SLOT);
	reuse_run(REUSE_BURST);
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Kick gate (runtime/idle.c "Kick gate"): oversubscribed, a wake may leave
 * a sleeping worker's kick pending while no CPU is free, but only when the
 * worker's park ends within the idle tick. Here the process has one CPU
 * and four workers. Every worker parks deep (all idle), then G, pinned to
 * worker 0, computes for GATE_COMPUTE_NS: demand (worker 0, plus the
 * posting OS thread) is at the CPU count. The main thread posts X, pinned
 * to worker 3, whose park has no deadline: it must be kicked at once. A
 * gate that left it pending would leave X until G stops and worker 0
 * parks and hands over (the whole computation); with the bound, X runs in
 * about a wake. Then a second post while worker 3 parked with the tick
 * (worker 0 awake): the gate may wait for the tick, so X runs within
 * about 1 ms plus the CPU share. */

#define GATE_ROUNDS 4
#define GATE_COMPUTE_NS 150000000ull
#define GATE_BOUND_NS 40000000ull

static weft_sem_t gate_sem;
static _Atomic int gate_woken;
static _Atomic uint64_t gate_woke_at;

static void *gate_x(void *arg)
{
	(void)arg;
	for (;;) {
		WT_CHECK(weft_sem_wait(&gate_sem) == 0);
		atomic_store(&gate_woke_at, weft_now_ns());
		if (atomic_fetch_add(&gate_woken, 1) + 1 == 2 * GATE_ROUNDS)
			return NULL;
	}
}

static void *gate_compute(void *arg)
{
	(void)arg;
	compute_until(weft_now_ns() + GATE_COMPUTE_NS);
	return NULL;
}

/* Post X's semaphore and return how long X took to run (ns); waits up
 * to 2 s for it (a lost wakeup fails here). */
static uint64_t gate_post(void)
{
	int before = atomic_load(&gate_woken);
	uint64_t p = weft_now_ns();

	ck_assert_int_eq(weft_sem_post(&gate_sem), 0);
	while (atomic_load(&gate_woken) == before && weft_now_ns() - p < 2000000000ull)
		sleep_ms(0);
	ck_assert_msg(atomic_load(&gate_woken) > before, "X not woken within 2 s of the post");
	return atomic_load(&gate_woke_at) - p;
}

START_TEST(kick_gate_bounded)
{
	cpu_set_t old;
	weft_attr_t a;
	weft_thread_t x, g;
	uint64_t deep_max = 0, tick_max = 0, d;

	if (!needs("kick_gate_bounded", "KICK_GATE,STEAL"))
		return;
	pin_to_one_cpu(&old);
	atomic_store(&gate_woken, 0);
	wt_init_features(4, "NO_DRAIN");
	ck_assert_int_eq(weft_sem_init(&gate_sem, 0), 0);
	weft_attr_init(&a);
	a.worker = 3;
	ck_assert_int_eq(weft_spawn(&x, gate_x, NULL, &a), 0);
	for (int r = 0; r < GATE_ROUNDS; r++) {
		/* all idle long enough to park deep (no tick) */
		sleep_ms(30);
		a.worker = 0;
		ck_assert_int_eq(weft_spawn(&g, gate_compute, NULL, &a), 0);
		sleep_ms(5);
		d = gate_post();   /* worker 3 parked deep */
		deep_max = d > deep_max ? d : deep_max;
		sleep_ms(5);             /* worker 3 parks again, with the tick */
		d = gate_post();
		tick_max = d > tick_max ? d : tick_max;
		ck_assert_int_eq(weft_join(g, NULL), 0);
	}
	ck_assert_int_eq(weft_join(x, NULL), 0);
	weft_sem_destroy(&gate_sem);
	wt_assert_no_failure();
	wt_shutdown();
	ck_assert_int_eq(sched_setaffinity(0, sizeof(old), &old), 0);
	printf("kick gate: deep park woken in %.2f ms, tick park in %.2f ms (worst of %d)\n",
	       (double)deep_max / 1e6, (double)tick_max / 1e6, GATE_ROUNDS);
	ck_assert_msg(deep_max < GATE_BOUND_NS, "a deep-parked worker's wakee waited %.1f ms",
		      (double)deep_max / 1e6);
	ck_assert_msg(tick_max < GATE_BOUND_NS, "a tick-parked worker's wakee waited %.1f ms",
		      (double)tick_max / 1e6);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* Outside waker (runtime/idle.c park_again_at): oversubscribed, a worker
 * that finds every worker idle parks with the idle tick, not deep, while a
 * plain OS thread made a burst of wakes within the last tick, so that the
 * kick gate may leave its next kick to a hand-over instead of kicking a
 * deep park at once (sembench -o 3: the Kick chain's kicks of deep parks).
 * Here: one CPU, 4 workers, threads A, B, C pinned to workers 1-3; the
 * main thread (an OS thread) posts all three back to back (a burst), waits
 * until they wait again and their workers have parked, then counts the
 * parks of the next OW_QUIET_MS: a worker parked with the tick wakes and
 * parks again (the counter moves), a deep one sleeps through (it does
 * not; its stack trim comes after 10 ms).
 * The rule depends on timing that a loaded host breaks: the posts must
 * come within 50 us of each other (a burst), and a tick-parked worker
 * must get the CPU within the window. So a round counts only if the
 * process's threads together waited less than OW_LOADED_NS for a CPU
 * from the posts to the end of the window (schedstat run delay: the
 * host's load, not weft's decisions); rounds run until OW_ROUNDS such
 * rounds (at most OW_MAX_ROUNDS). Under load, without this, 10-13 parks
 * were seen in 20 windows. A deep-parking runtime gets no parks in the
 * windows of unloaded rounds either way. */

#define OW_ROUNDS 20
#define OW_MAX_ROUNDS 200
#define OW_THREADS 3
#define OW_QUIET_MS 4
#define OW_LOADED_NS 1000000ull

static weft_sem_t ow_sem[OW_THREADS];
static _Atomic int ow_woken;
static _Atomic bool ow_stop;

static void *ow_waiter(void *arg)
{
	weft_sem_t *s = arg;

	for (;;) {
		WT_CHECK(weft_sem_wait(s) == 0);
		if (atomic_load(&ow_stop))
			return NULL;
		atomic_fetch_add(&ow_woken, 1);
	}
}

START_TEST(gate_outside_waker)
{
	cpu_set_t old;
	weft_thread_t t[OW_THREADS];
	weft_stats_t s0, s1;
	weft_attr_t a;
	uint64_t quiet = 0;
	int counted = 0, loaded = 0;

	if (!needs("gate_outside_waker", "KICK_GATE,STEAL"))
		return;
	pin_to_one_cpu(&old);
	wt_init_features(4, "NO_DRAIN");
	atomic_store(&ow_woken, 0);
	atomic_store(&ow_stop, false);
	weft_attr_init(&a);
	for (int i = 0; i < OW_THREADS; i++) {
		ck_assert_int_eq(weft_sem_init(&ow_sem[i], 0), 0);
		a.worker = i + 1;
		ck_assert_int_eq(weft_spawn(&t[i], ow_waiter, &ow_sem[i], &a), 0);
	}
	for (int r = 0; r < OW_MAX_ROUNDS && counted < OW_ROUNDS; r++) {
		struct timespec poll = { 0, 50000 };
		uint64_t t0, wait0;

		sleep_ms(12);   /* every worker idle and parked deep, trim done */
		wait0 = threads_cpu_wait_ns(NULL);
		stats(&s0);
		for (int i = 0; i < OW_THREADS; i++)
			ck_assert_int_eq(weft_sem_post(&ow_sem[i]), 0);
		t0 = weft_now_ns();
		while (atomic_load(&ow_woken) < (r + 1) * OW_THREADS &&
		       weft_now_ns() - t0 < 2000000000ull)
			sched_yield();
		ck_assert_msg(atomic_load(&ow_woken) == (r + 1) * OW_THREADS,
			      "round %d: a wakee did not run within 2 s", r);
		/* let the three workers park (each parks once after its
		 * wakee waits again), then count the quiet window */
		t0 = weft_now_ns();
		do {
			nanosleep(&poll, NULL);
			stats(&s1);
		} while (s1.parks - s0.parks < OW_THREADS && weft_now_ns() - t0 < 100000000ull);
		s0 = s1;
		sleep_ms(OW_QUIET_MS);
		stats(&s1);
		if (threads_cpu_wait_ns(NULL) - wait0 >= OW_LOADED_NS) {
			loaded++;
			continue;
		}
		counted++;
		quiet += s1.parks - s0.parks;
	}
	atomic_store(&ow_stop, true);
	for (int i = 0; i < OW_THREADS; i++) {
		ck_assert_int_eq(weft_sem_post(&ow_sem[i]), 0);
		ck_assert_int_eq(weft_join(t[i], NULL), 0);
		weft_sem_destroy(&ow_sem[i]);
	}
	wt_assert_no_failure();
	wt_shutdown();
	ck_assert_int_eq(sched_setaffinity(0, sizeof(old), &old), 0);
	printf("outside waker: %llu parks in the quiet windows of %d rounds (%d more rounds "
	       "not counted: the process waited >= %.1f ms for a CPU)\n",
	       (unsigned long long)quiet, counted, loaded, OW_LOADED_NS / 1e6);
	ck_assert_msg(counted >= OW_ROUNDS, "only %d of %d rounds ran without waiting for a CPU",
		      counted, counted + loaded);
	/* about one re-park per burst's worker per round with the rule;
	 * none with deep parks */
	ck_assert_msg(quiet >= (uint64_t)counted, "%llu parks in %d quiet windows: workers parked deep "
		      "after an OS thread's burst", (unsigned long long)quiet, counted);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("wake");
	TCase *tc = wt_tcase(s, "wake", 60);

	tcase_add_test(tc, burst_one_kick_unpinned);
	tcase_add_test(tc, burst_one_kick_pinned);
	tcase_add_test(tc, burst_gate_race);
	tcase_add_test(tc, rescue_kick_chained);
	tcase_add_test(tc, affine_pulls_to_waker);
	tcase_add_test(tc, awake_last_keeps);
	tcase_add_test(tc, wide_waker_not_pulled);
	tcase_add_test(tc, two_wakees_not_wide);
	tcase_add_test(tc, wide_not_spread_oversubscribed);
	tcase_add_test(tc, stranded_spawned_child);
	tcase_add_test(tc, stranded_wakee_mailbox);
	tcase_add_test(tc, stranded_yielder);
	tcase_add_test(tc, displaced_wakee_no_kick);
	tcase_add_test(tc, chain_few_kicks);
	tcase_add_test(tc, kick_gate_bounded);
	tcase_add_test(tc, gate_outside_waker);
	/* its own case: CI runs it alone under TSan (.ci/run), where the
	 * placement cases above are not judged */
	tc = wt_tcase(s, "reuse", 60);
	tcase_add_test(tc, no_read_after_push);
	return wt_run_suite(s);
}
