/*
 * examples/weft-micro.c - micro benchmarks of the runtime core, each with
 * its kernel (pthread) baseline in the same binary and the same run.
 *
 *   weft-micro [--impl=weft|pthread|all] [--bench=NAME[,NAME...]] [--runs=N]
 *
 * Benchmarks (each prints one line per impl, the median of --runs runs):
 *   spawn_join_seq   spawn one thread, join it, repeat; ns per thread
 *   spawn_join_bulk  spawn N, then join all; ns per thread
 *   yield            two threads on one worker (one CPU) yield to each other; ns per yield
 *   pingpong_same    a token handed back and forth through a blocking primitive
 *                    (weft: park/unpark; pthread: two sem_t), both on one worker
 *                    (pthreads pinned to one CPU); ns per round trip
 *   pingpong_cross   the same across two workers (two CPUs) while both workers are
 *                    busy (each also runs a thread that keeps yielding; pthread: a
 *                    busy-spinning thread on each CPU); ns per round trip
 *   pingpong_idle    across two workers, nothing else to run (the peer worker parks
 *                    or spins between hand-offs; pthread: two CPUs otherwise idle)
 *   fib              fib(30), each call spawning a thread for fib(n-1); total ms,
 *                    plus ns per spawn; the pthread form runs fib(18) (fib(30) would
 *                    create 1.6 M OS threads) and reports ns per spawn
 *   idle             CPU used by an idle runtime over 2 s, after 100 ms without work; %
 *   busy_one         one thread computes for 1 s without yielding, every other worker
 *                    has nothing to do: the process's CPU time per wall second
 *                    (1.00 is the computation alone; the rest is what the idle
 *                    workers cost meanwhile), and the worker parks per millisecond.
 *                    Run it at WEFT_WORKERS=2, 16, 64, 256: the idle side should not
 *                    grow with the number of workers
 *   timer            lateness of 1 ms sleeps (median and max of 200); us
 *
 * Output lines: bench=NAME impl=IMPL param=K=V,... value=X unit=U
 */
#include "examples/bench_weft.h"

#include <semaphore.h>
#include <stdatomic.h>
#include <weft.h>

static int runs = 5;

/* ---------------------------------------------------------------------- */
/* helpers */

static void *nop(void *arg)
{
	return arg;
}

/* ---------------------------------------------------------------------- */
/* spawn/join */

enum { SEQ_N = 200000, BULK_N = 100000 };

static void *weft_seq(void *arg)
{
	uint64_t t0 = bench_now_ns();

	(void)arg;
	for (int i = 0; i < SEQ_N; i++) {
		weft_thread_t t;

		weft_spawn(&t, nop, NULL, NULL);
		weft_join(t, NULL);
	}
	return bench_dret((double)(bench_now_ns() - t0) / SEQ_N);
}

static weft_thread_t bulk_ts[BULK_N];

static void *weft_bulk(void *arg)
{
	uint64_t t0 = bench_now_ns();

	(void)arg;
	for (int i = 0; i < BULK_N; i++)
		weft_spawn(&bulk_ts[i], nop, NULL, NULL);
	for (int i = 0; i < BULK_N; i++)
		weft_join(bulk_ts[i], NULL);
	return bench_dret((double)(bench_now_ns() - t0) / BULK_N);
}

static double pthread_seq(int n)
{
	uint64_t t0 = bench_now_ns();

	for (int i = 0; i < n; i++) {
		pthread_t t;

		pthread_create(&t, NULL, nop, NULL);
		pthread_join(t, NULL);
	}
	return (double)(bench_now_ns() - t0) / n;
}

static double pthread_bulk(int n)
{
	pthread_t *ts = malloc(sizeof(*ts) * (size_t)n);
	pthread_attr_t a;
	uint64_t t0;

	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 * 1024);
	t0 = bench_now_ns();
	for (int i = 0; i < n; i++)
		pthread_create(&ts[i], &a, nop, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(ts[i], NULL);
	t0 = bench_now_ns() - t0;
	pthread_attr_destroy(&a);
	free(ts);
	return (double)t0 / n;
}

/* ---------------------------------------------------------------------- */
/* yield */

enum { YIELDS = 2000000 };

static void *weft_yielder(void *arg)
{
	(void)arg;
	for (int i = 0; i < YIELDS; i++)
		weft_yield();
	return NULL;
}

static void *weft_yield_bench(void *arg)
{
	weft_attr_t a;
	weft_thread_t t[2];
	uint64_t t0;

	(void)arg;
	weft_attr_init(&a);
	a.worker = 1 % weft_workers();
	/* both yielders on one worker (not the one running this driver) */
	weft_spawn(&t[0], weft_yielder, NULL, &a);
	weft_spawn(&t[1], weft_yielder, NULL, &a);
	t0 = bench_now_ns();
	weft_join(t[0], NULL);
	weft_join(t[1], NULL);
	return bench_dret((double)(bench_now_ns() - t0) / (2.0 * YIELDS));
}

static void *pthread_yielder(void *arg)
{
	(void)arg;
	for (int i = 0; i < YIELDS / 4; i++)
		sched_yield();
	return NULL;
}

static double pthread_yield_bench(void)
{
	pthread_t t[2];
	uint64_t t0 = bench_now_ns();

	for (int i = 0; i < 2; i++) {
		pthread_create(&t[i], NULL, pthread_yielder, NULL);
		bench_pin_thread(t[i], bench_cpu_nth(0));
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return (double)(bench_now_ns() - t0) / (2.0 * (YIELDS / 4));
}

/* ---------------------------------------------------------------------- */
/* ping-pong */

enum { PP_ROUNDS = 500000 };

struct pp {
	weft_thread_t th[2];
	_Atomic int turn;
	sem_t sem[2];
	int rounds;
};

struct pp_arg {
	struct pp *p;
	int me;
};

static void *weft_pinger(void *arg)
{
	struct pp_arg *a = arg;
	struct pp *p = a->p;
	int me = a->me;

	for (int i = 0; i < p->rounds; i++) {
		/* acquire: pairs with the peer's release store of turn */
		while (atomic_load_explicit(&p->turn, memory_order_acquire) != me)
			weft_park();
		atomic_store_explicit(&p->turn, 1 - me, memory_order_release);
		weft_unpark(p->th[1 - me]);
	}
	return NULL;
}

/* mode 0: same worker; 1: cross, busy workers; 2: cross, otherwise idle */
static void *weft_pp_bench(void *arg)
{
	int mode = (int)(intptr_t)arg;
	struct pp p;
	struct pp_arg a[2];
	struct bench_busy busy;
	uint64_t t0;

	memset(&p, 0, sizeof(p));
	p.rounds = PP_ROUNDS;
	atomic_store(&p.turn, 0);
	if (mode == 1)
		bench_busy_start(&busy, true);
	t0 = bench_now_ns();
	for (int i = 0; i < 2; i++) {
		a[i] = (struct pp_arg){ &p, i };
		bench_spawn_on(&p.th[i], weft_pinger, &a[i], mode == 0 ? 1 : i);
	}
	weft_join(p.th[0], NULL);
	weft_join(p.th[1], NULL);
	t0 = bench_now_ns() - t0;
	if (mode == 1)
		bench_busy_stop(&busy);
	return bench_dret((double)t0 / PP_ROUNDS);
}

static void *pthread_pinger(void *arg)
{
	struct pp_arg *a = arg;
	struct pp *p = a->p;

	BENCH_SEM_PINGPONG(a->me, p->rounds, sem_post, sem_wait, p->sem)
	return NULL;
}

static double pthread_pp_bench(int mode)
{
	struct pp p;
	struct pp_arg a[2];
	struct bench_busy busy;
	pthread_t t[2];
	uint64_t t0;

	memset(&p, 0, sizeof(p));
	p.rounds = PP_ROUNDS / 5;
	sem_init(&p.sem[0], 0, 0);
	sem_init(&p.sem[1], 0, 0);
	if (mode == 1)
		bench_busy_start(&busy, false);
	t0 = bench_now_ns();
	for (int i = 0; i < 2; i++) {
		a[i] = (struct pp_arg){ &p, i };
		pthread_create(&t[i], NULL, pthread_pinger, &a[i]);
		bench_pin_thread(t[i], bench_cpu_nth(mode == 0 ? 0 : i));
	}
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	t0 = bench_now_ns() - t0;
	if (mode == 1)
		bench_busy_stop(&busy);
	sem_destroy(&p.sem[0]);
	sem_destroy(&p.sem[1]);
	return (double)t0 / p.rounds;
}

/* ---------------------------------------------------------------------- */
/* fib */

static long fib_seq(int n)
{
	return n < 2 ? n : fib_seq(n - 1) + fib_seq(n - 2);
}

/* Spawns of fib(n): one per call with n >= 2, S(n) = 1 + S(n-1) + S(n-2)
 * = fib(n+1) - 1. Computed, not counted: a shared atomic counter bumped
 * by every spawn on both workers would bounce a cache line per spawn and
 * measure itself. */
static long fib_spawns(long n)
{
	return fib_seq(n + 1) - 1;
}

static void *weft_fib(void *arg)
{
	long n = (long)arg;
	weft_thread_t t;
	void *a;
	long b;

	if (n < 2)
		return (void *)n;
	weft_spawn(&t, weft_fib, (void *)(n - 1), NULL);
	b = (long)weft_fib((void *)(n - 2));
	weft_join(t, &a);
	return (void *)((long)a + b);
}

static void *pthread_fib(void *arg)
{
	long n = (long)arg;
	pthread_t t;
	pthread_attr_t at;
	void *a;
	long b;

	if (n < 2)
		return (void *)n;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 64 * 1024);
	if (pthread_create(&t, &at, pthread_fib, (void *)(n - 1)) != 0) {
		pthread_attr_destroy(&at);
		return (void *)(fib_seq((int)n));
	}
	pthread_attr_destroy(&at);
	b = (long)pthread_fib((void *)(n - 2));
	pthread_join(t, &a);
	return (void *)((long)a + b);
}

/* ---------------------------------------------------------------------- */
/* timer */

static void *timer_once(void *arg)
{
	uint64_t d = bench_now_ns() + 1000000;

	(void)arg;
	weft_sleep_until(d);
	return bench_dret((double)(bench_now_ns() - d) / 1e3);
}

/* busy_one: compute for BUSY_NS without a scheduling point; returns the
 * process's CPU seconds per wall second over that time, and the worker
 * parks per millisecond in *(double *)arg. */
#define BUSY_NS 1000000000ull

static void *busy_one(void *arg)
{
	bench_rusage_t a, b, d;
	weft_stats_t s0, s1;
	uint64_t t0, t;

	weft_sleep_ns(50000000);   /* let the start-up settle */
	/* one short thread on every other worker, gone before the window:
	 * their workers go idle while this one computes (a program's parallel
	 * phase ending in a serial one), not before it started */
	for (int i = 1; i < weft_workers(); i++) {
		weft_attr_t at;

		weft_attr_init(&at);
		at.worker = i;
		at.detached = 1;
		if (weft_spawn(NULL, nop, NULL, &at))
			return bench_dret(-1);
	}
	t0 = bench_now_ns();
	while (bench_now_ns() - t0 < 20000000)
		;
	weft_stats_get(&s0);
	bench_rusage_get(&a);
	t0 = bench_now_ns();
	do
		t = bench_now_ns();
	while (t - t0 < BUSY_NS);
	bench_rusage_get(&b);
	weft_stats_get(&s1);
	bench_rusage_delta(&d, &a, &b);
	*(double *)arg = (double)(s1.parks - s0.parks) * 1e6 / (double)(t - t0);
	return bench_dret((double)(d.user_ns + d.sys_ns) / (double)(t - t0));
}

/* ---------------------------------------------------------------------- */

#define MEDIAN_OF(expr) ({ \
	double v_[64]; \
	for (int r_ = 0; r_ < runs; r_++) \
		v_[r_] = (expr); \
	bench_median(v_, (size_t)runs); \
})

int main(int argc, char **argv)
{
	const char *impl = "all", *benches = NULL;
	int do_weft, do_pthread;
	int ncpu = bench_cpu_count();
	char param[128];

	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--impl=", 7) == 0)
			impl = argv[i] + 7;
		else if (strncmp(argv[i], "--bench=", 8) == 0)
			benches = argv[i] + 8;
		else if (strncmp(argv[i], "--runs=", 7) == 0)
			runs = atoi(argv[i] + 7);
		else {
			fprintf(stderr, "usage: %s [--impl=weft|pthread|all] [--bench=a,b] [--runs=N]\n",
				argv[0]);
			return 2;
		}
	}
	if (runs < 1 || runs > 64)
		runs = 5;
	do_weft = !strcmp(impl, "all") || !strcmp(impl, "weft");
	do_pthread = !strcmp(impl, "all") || !strcmp(impl, "pthread");

	if (do_weft)
		bench_weft_start(ncpu >= 2 ? ncpu : 2);

	if (bench_want(benches, "spawn_join_seq")) {
		snprintf(param, sizeof(param), "n=%d", SEQ_N);
		if (do_weft)
			bench_result(NULL, "spawn_join_seq", "weft", param,
				     MEDIAN_OF(bench_in_weft(weft_seq, NULL)), "ns");
		if (do_pthread)
			bench_result(NULL, "spawn_join_seq", "pthread", "n=20000",
				     MEDIAN_OF(pthread_seq(20000)), "ns");
	}
	if (bench_want(benches, "spawn_join_bulk")) {
		snprintf(param, sizeof(param), "n=%d", BULK_N);
		if (do_weft)
			bench_result(NULL, "spawn_join_bulk", "weft", param,
				     MEDIAN_OF(bench_in_weft(weft_bulk, NULL)), "ns");
		if (do_pthread)
			bench_result(NULL, "spawn_join_bulk", "pthread", "n=10000",
				     MEDIAN_OF(pthread_bulk(10000)), "ns");
	}
	if (bench_want(benches, "yield")) {
		if (do_weft)
			bench_result(NULL, "yield", "weft", "threads=2,workers=1",
				     MEDIAN_OF(bench_in_weft(weft_yield_bench, NULL)), "ns");
		if (do_pthread)
			bench_result(NULL, "yield", "pthread", "threads=2,cpus=1",
				     MEDIAN_OF(pthread_yield_bench()), "ns");
	}
	{
		static const char *names[3] = { "pingpong_same", "pingpong_cross", "pingpong_idle" };

		for (int m = 0; m < 3; m++) {
			if (!bench_want(benches, names[m]))
				continue;
			if (do_weft)
				bench_result(NULL, names[m], "weft", "primitive=park_unpark",
					     MEDIAN_OF(bench_in_weft(weft_pp_bench, (void *)(intptr_t)m)), "ns");
			if (do_pthread)
				bench_result(NULL, names[m], "pthread", "primitive=sem_t",
					     MEDIAN_OF(pthread_pp_bench(m)), "ns");
		}
	}
	if (bench_want(benches, "fib")) {
		uint64_t t0 = bench_now_ns();
		long r = fib_seq(30);
		double seq_ms = (double)(bench_now_ns() - t0) / 1e6;

		bench_result(NULL, "fib", "serial", "n=30", seq_ms, "ms");
		if (do_weft) {
			double v[64], per[64];

			for (int i = 0; i < runs; i++) {
				weft_thread_t t;
				void *res;

				t0 = bench_now_ns();
				weft_spawn(&t, weft_fib, (void *)30L, NULL);
				weft_join(t, &res);
				v[i] = (double)(bench_now_ns() - t0) / 1e6;
				per[i] = v[i] * 1e6 / (double)fib_spawns(30);
				if ((long)res != r)
					fprintf(stderr, "fib: wrong result %ld\n", (long)res);
			}
			snprintf(param, sizeof(param), "n=30,workers=%d", weft_workers());
			bench_result(NULL, "fib", "weft", param, bench_median(v, (size_t)runs), "ms");
			bench_result(NULL, "fib_per_spawn", "weft", param,
				     bench_median(per, (size_t)runs), "ns");
		}
		if (do_pthread) {
			double per[64];

			for (int i = 0; i < runs; i++) {
				t0 = bench_now_ns();
				pthread_fib((void *)18L);
				per[i] = (double)(bench_now_ns() - t0) / (double)fib_spawns(18);
			}
			bench_result(NULL, "fib_per_spawn", "pthread", "n=18",
				     bench_median(per, (size_t)runs), "ns");
		}
	}
	if (bench_want(benches, "timer") && do_weft) {
		double late[200];

		for (int i = 0; i < 200; i++)
			late[i] = bench_in_weft(timer_once, NULL);
		bench_median(late, 200);
		bench_result(NULL, "timer_late_median", "weft", "sleep=1ms", late[100], "us");
		bench_result(NULL, "timer_late_max", "weft", "sleep=1ms", late[199], "us");
	}
	if (bench_want(benches, "timer") && do_pthread) {
		/* the kernel baseline: clock_nanosleep(TIMER_ABSTIME) from a plain
		 * thread, with the default timer slack an application gets */
		double late[200];

		for (int i = 0; i < 200; i++) {
			uint64_t d = bench_now_ns() + 1000000;
			struct timespec ts = { (time_t)(d / 1000000000ull), (long)(d % 1000000000ull) };

			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
				;
			late[i] = (double)(bench_now_ns() - d) / 1e3;
		}
		bench_median(late, 200);
		bench_result(NULL, "timer_late_median", "pthread", "sleep=1ms", late[100], "us");
		bench_result(NULL, "timer_late_max", "pthread", "sleep=1ms", late[199], "us");
	}
	if (bench_want(benches, "idle") && do_weft) {
		bench_rusage_t a, b, d;
		uint64_t t0;

		weft_sleep_ns(100000000);
		bench_rusage_get(&a);
		t0 = bench_now_ns();
		weft_sleep_ns(2000000000);
		bench_rusage_get(&b);
		bench_rusage_delta(&d, &a, &b);
		bench_result(NULL, "idle_cpu", "weft", "window=2s",
			     100.0 * (double)(d.user_ns + d.sys_ns) / (double)(bench_now_ns() - t0), "%");
	}
	if (bench_want(benches, "busy_one") && do_weft) {
		double cpu[64], parks[64];

		for (int i = 0; i < runs; i++)
			cpu[i] = bench_in_weft(busy_one, &parks[i]);
		snprintf(param, sizeof(param), "workers=%d", weft_workers());
		bench_result(NULL, "busy_one_cpu", "weft", param, bench_median(cpu, (size_t)runs),
			     "cpus");
		bench_result(NULL, "busy_one_parks", "weft", param,
			     bench_median(parks, (size_t)runs), "per_ms");
	}
	if (do_weft) {
		if (getenv("WEFT_STATS"))
			weft_stats_print(stderr);
		weft_shutdown();
	}
	return 0;
}
