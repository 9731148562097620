/*
 * tests/stress_wake.c - bounded, seeded stress of cross-worker wakeups:
 * pairs of threads pinned to different workers hand a token back and forth
 * through park/unpark (and random timed parks) until the time budget
 * (WEFT_STRESS_SECONDS, default 2) runs out, however many wakes that is
 * (tests/soak.sh runs it for minutes or hours). Invariant checked
 * at the end: every handed token was received (no lost wakeup: a loss
 * would hang the pair, caught by the tcase timeout), and the wake counters
 * account for every cross-worker wake.
 */
#include "tests/harness.h"

#include <stdio.h>
#include <stdlib.h>

enum { PAIRS = 8 };

struct pair {
	weft_thread_t th[2];
	_Atomic long turn;           /* token count; side = turn & 1 */
	_Atomic int stop;
	_Atomic int go;         /* both th[] stored; set after the second spawn */
	long handed[2];
	uint64_t seed;
};

static struct pair pairs[PAIRS];
static weft_time_t end_time;

struct arg {
	struct pair *p;
	int side;
};

static void *player(void *a_)
{
	struct arg *a = a_;
	struct pair *p = a->p;
	int me = a->side;
	uint64_t rng = p->seed ^ (uint64_t)(me + 1);

	/* p->th[1 - me] is read only after go (seq_cst) is seen */
	while (!atomic_load(&p->go))
		weft_park();
	for (;;) {
		long v;

		while (((v = atomic_load(&p->turn)) & 1) != me) {
			if (atomic_load(&p->stop))
				return NULL;
			if (wt_rand(&rng) % 4 == 0)
				weft_park_until(weft_now_ns() + wt_rand(&rng) % 3000);
			else
				weft_park();
		}
		if (weft_now_ns() > end_time) {
			atomic_store(&p->stop, 1);
			weft_unpark(p->th[1 - me]);
			return NULL;
		}
		p->handed[me]++;
		atomic_store(&p->turn, v + 1);
		weft_unpark(p->th[1 - me]);
	}
}

START_TEST(cross_worker_wakes)
{
	static struct arg args[PAIRS][2];
	uint64_t seed = wt_seed();
	weft_stats_t s;
	long handed = 0, turns = 0;
	weft_time_t t0, budget;
	double secs;
	int n;

	wt_init(_i);
	n = weft_workers();
	budget = (weft_time_t)(wt_stress_seconds() * 1e9);
	t0 = weft_now_ns();
	end_time = t0 + budget;
	for (int i = 0; i < PAIRS; i++) {
		struct pair *p = &pairs[i];

		atomic_store(&p->turn, 0);
		atomic_store(&p->stop, 0);
		atomic_store(&p->go, 0);
		p->handed[0] = p->handed[1] = 0;
		p->seed = seed + (uint64_t)i * 7919;
		/* create both, then let them go: a player unparks its peer
		 * through p->th, which weft_spawn writes (TSan reported the
		 * race when side 0 ran before the second spawn returned) */
		for (int side = 0; side < 2; side++) {
			weft_attr_t a;

			weft_attr_init(&a);
			a.worker = (i + side) % n;
			args[i][side] = (struct arg){ p, side };
			ck_assert_int_eq(weft_spawn(&p->th[side], player, &args[i][side], &a), 0);
		}
		atomic_store(&p->go, 1);
		for (int side = 0; side < 2; side++)
			ck_assert_int_eq(weft_unpark(p->th[side]), 0);
	}
	for (int i = 0; i < PAIRS; i++)
		for (int side = 0; side < 2; side++)
			ck_assert_int_eq(weft_join(pairs[i].th[side], NULL), 0);
	for (int i = 0; i < PAIRS; i++) {
		handed += pairs[i].handed[0] + pairs[i].handed[1];
		turns += atomic_load(&pairs[i].turn);
	}
	secs = (double)(weft_now_ns() - t0) / 1e9;
	weft_stats_get(&s);
	printf("config=%s secs=%.2f wakes=%ld remote=%llu local=%llu locked=%llu kicks=%llu parks=%llu\n",
	       wt_configs[_i].name, secs, handed, (unsigned long long)s.wakes_remote,
	       (unsigned long long)s.wakes_local, (unsigned long long)s.wakes_locked,
	       (unsigned long long)s.kicks, (unsigned long long)s.parks);
	/* nothing lost: every hand-off advanced the turn exactly once */
	ck_assert_int_eq(handed, turns);
	ck_assert_int_gt(handed, 0);
	/* the run honours its time budget: it ends at the deadline, not at a
	 * wake count (a 30 s soak once stopped after 1 M wakes) */
	ck_assert_msg(weft_now_ns() - t0 >= budget - budget / 10,
		      "stopped after %.2f s of a %.2f s budget", secs, (double)budget / 1e9);
	if (n > 1)
		ck_assert_uint_gt(s.wakes_remote + s.wakes_locked, 0);
	wt_shutdown();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stress_wake");
	TCase *tc = wt_tcase(s, "contended", wt_stress_seconds() * 3 * 3 + 10);

	tcase_add_loop_test(tc, cross_worker_wakes, 0, wt_nconfigs);
	return wt_run_suite(s);
}
