/*
 * examples/cond-bench.c - condition-variable hand-off: producer/consumer
 * queues under a mutex and two condition variables, weft_mutex_t +
 * weft_cond_t in light threads against glibc's pthread_mutex_t +
 * pthread_cond_t in OS threads, in one binary and one run.
 *
 * Workload (issue 18): P producers and C consumers share one bounded FIFO
 * (--cap slots, default 64) under one mutex. A producer locks, waits on
 * "not full" while the queue is full, appends an item, signals "not empty"
 * and unlocks; a consumer locks, waits on "not empty" while it is empty,
 * takes an item, signals "not full" and unlocks, then spins --work-ns
 * (default 0). The figure is items consumed per second over the measured
 * interval (after a warm-up). The classic shapes are 1:1 and 1:16.
 *
 *   cond-bench [--impl=weft|pthread|both] [--producers=1] [--consumers=1]
 *              [--cap=64] [--work-ns=0] [--secs=2] [--workers=2]
 *
 * Output: a human line per impl and
 *   bench=cond impl=IMPL param=p=P,c=C,cap=N,work=W value=X unit=items/s
 * The consumers' item counts are checked at the end: every item produced
 * is consumed exactly once (the sequence numbers add up), or exit 2.
 */
#include "examples/bench_weft.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft.h>
#include <weft/sync.h>

enum { IMPL_WEFT, IMPL_PTHREAD };
static const char *const impl_names[] = { "weft", "pthread" };

static int opt_prod = 1, opt_cons = 1, opt_cap = 64, opt_workers = 2;
static long opt_work_ns = 0;
static double opt_secs = 2.0;
static double iters_per_ns;

static struct {
	weft_mutex_t wm;
	weft_cond_t wne, wnf;            /* not empty, not full */
	pthread_mutex_t pm;
	pthread_cond_t pne, pnf;
	uint64_t *ring;
	int head, count;                 /* under the mutex */
	int nwait_ne, nwait_nf;          /* waiters, under the mutex */
} q;

/* relaxed: flags polled by the threads; the queue itself is under the
 * mutex, and stop is also read under it */
static _Atomic int go, stop;

struct task {
	_Alignas(64) _Atomic uint64_t items;  /* relaxed: sampled by main */
	uint64_t sum;                    /* consumer: sum of sequence numbers */
	uint64_t made;                   /* producer: items produced */
	int idx, impl;
};

static void qlock(int weft)
{
	if (weft)
		weft_mutex_lock(&q.wm);
	else
		pthread_mutex_lock(&q.pm);
}

static void qunlock(int weft)
{
	if (weft)
		weft_mutex_unlock(&q.wm);
	else
		pthread_mutex_unlock(&q.pm);
}

static void qwait(int weft, int ne)
{
	if (weft)
		weft_cond_wait(ne ? &q.wne : &q.wnf, &q.wm);
	else
		pthread_cond_wait(ne ? &q.pne : &q.pnf, &q.pm);
}

static void qsignal(int weft, int ne)
{
	if (weft)
		weft_cond_signal(ne ? &q.wne : &q.wnf);
	else
		pthread_cond_signal(ne ? &q.pne : &q.pnf);
}

static void qbroadcast(int weft)
{
	if (weft) {
		weft_cond_broadcast(&q.wne);
		weft_cond_broadcast(&q.wnf);
	} else {
		pthread_cond_broadcast(&q.pne);
		pthread_cond_broadcast(&q.pnf);
	}
}

static int stopped(void)
{
	/* relaxed: see stop */
	return atomic_load_explicit(&stop, memory_order_relaxed);
}

static void wait_go(int weft)
{
	/* relaxed: see go */
	while (!atomic_load_explicit(&go, memory_order_relaxed)) {
		if (weft)
			weft_yield();
		else
			sched_yield();
	}
}

/* Sequence numbers: producer i makes i + 1, i + 1 + P, ... (never 0). */
static void *producer(void *p)
{
	struct task *t = p;
	int weft = t->impl == IMPL_WEFT;
	uint64_t seq = (uint64_t)t->idx + 1;

	wait_go(weft);
	for (;;) {
		qlock(weft);
		while (q.count == opt_cap && !stopped()) {
			q.nwait_nf++;
			qwait(weft, 0);
			q.nwait_nf--;
		}
		if (stopped()) {
			qunlock(weft);
			break;
		}
		q.ring[(q.head + q.count) % opt_cap] = seq;
		q.count++;
		if (q.nwait_ne)
			qsignal(weft, 1);
		qunlock(weft);
		t->made++;
		seq += (uint64_t)opt_prod;
	}
	return NULL;
}

static void *consumer(void *p)
{
	struct task *t = p;
	int weft = t->impl == IMPL_WEFT;
	uint64_t work = (uint64_t)(opt_work_ns * iters_per_ns + 0.5), n = 0;

	wait_go(weft);
	for (;;) {
		qlock(weft);
		while (q.count == 0 && !stopped()) {
			q.nwait_ne++;
			qwait(weft, 1);
			q.nwait_ne--;
		}
		if (q.count == 0) {      /* stopped and drained */
			qunlock(weft);
			break;
		}
		t->sum += q.ring[q.head];
		q.head = (q.head + 1) % opt_cap;
		q.count--;
		if (q.nwait_nf)
			qsignal(weft, 0);
		qunlock(weft);
		bench_spin_iters(work);
		/* relaxed: a statistic, sampled by main */
		atomic_store_explicit(&t->items, ++n, memory_order_relaxed);
	}
	return NULL;
}

static uint64_t sum_items(struct task *t, int from, int to)
{
	uint64_t s = 0;

	for (int i = from; i < to; i++)
		/* relaxed: a sample */
		s += atomic_load_explicit(&t[i].items, memory_order_relaxed);
	return s;
}

static int run(int impl)
{
	int n = opt_prod + opt_cons, weft = impl == IMPL_WEFT, bad = 0;
	struct task *tasks = calloc((size_t)n, sizeof(*tasks));
	weft_thread_t *wt = calloc((size_t)n, sizeof(*wt));
	pthread_t *pt = calloc((size_t)n, sizeof(*pt));
	uint64_t s0, s1, t0, t1, made = 0, got = 0, want = 0, sum = 0;
	char param[128];
	double v;

	q.ring = calloc((size_t)opt_cap, sizeof(*q.ring));
	if (!tasks || !wt || !pt || !q.ring) {
		perror("calloc");
		exit(1);
	}
	q.head = q.count = q.nwait_ne = q.nwait_nf = 0;
	weft_mutex_init(&q.wm);
	weft_cond_init(&q.wne);
	weft_cond_init(&q.wnf);
	pthread_mutex_init(&q.pm, NULL);
	pthread_cond_init(&q.pne, NULL);
	pthread_cond_init(&q.pnf, NULL);
	atomic_store(&go, 0);
	atomic_store(&stop, 0);
	if (weft)
		bench_weft_start(opt_workers);
	for (int i = 0; i < n; i++) {
		tasks[i].idx = i < opt_prod ? i : i - opt_prod;
		tasks[i].impl = impl;
		bench_task_start(weft, &wt[i], &pt[i], i < opt_prod ? producer : consumer, &tasks[i]);
	}
	atomic_store(&go, 1);
	bench_sleep_s(0.3);                    /* warm-up */
	s0 = sum_items(tasks, opt_prod, n);
	t0 = bench_now_ns();
	bench_sleep_s(opt_secs);
	s1 = sum_items(tasks, opt_prod, n);
	t1 = bench_now_ns();
	/* Stop under the mutex and wake everyone: the waits re-check it. */
	qlock(weft);
	atomic_store(&stop, 1);
	qbroadcast(weft);
	qunlock(weft);
	for (int i = 0; i < n; i++)
		bench_task_join(weft, wt[i], pt[i]);
	if (weft)
		weft_shutdown();
	/* Every item made was consumed once: the sums of the sequence numbers
	 * agree (producer i made i+1, i+1+P, ..., made_i items). */
	for (int i = 0; i < n; i++) {
		if (i < opt_prod) {
			uint64_t m = tasks[i].made, a = (uint64_t)i + 1, P = (uint64_t)opt_prod;

			made += m;
			want += m * a + P * (m * (m - 1) / 2);
		} else {
			/* relaxed: the threads are joined */
			got += atomic_load_explicit(&tasks[i].items, memory_order_relaxed);
			sum += tasks[i].sum;
		}
	}
	if (made != got || want != sum) {
		fprintf(stderr, "cond-bench %s: made %llu consumed %llu (sums %llu / %llu): lost or doubled items\n",
			impl_names[impl], (unsigned long long)made, (unsigned long long)got,
			(unsigned long long)want, (unsigned long long)sum);
		bad = 1;
	}
	v = (double)(s1 - s0) * 1e9 / (double)(t1 - t0);
	printf("%-8s producers %d consumers %3d cap %d  %12.0f items/s\n", impl_names[impl],
	       opt_prod, opt_cons, opt_cap, v);
	snprintf(param, sizeof(param), "p=%d,c=%d,cap=%d,work=%ld", opt_prod, opt_cons, opt_cap,
		 opt_work_ns);
	bench_result(NULL, "cond", impl_names[impl], param, v, "items/s");
	fflush(stdout);
	weft_cond_destroy(&q.wne);
	weft_cond_destroy(&q.wnf);
	weft_mutex_destroy(&q.wm);
	pthread_cond_destroy(&q.pne);
	pthread_cond_destroy(&q.pnf);
	pthread_mutex_destroy(&q.pm);
	free(q.ring);
	free(tasks);
	free(wt);
	free(pt);
	return bad;
}

static void usage(void)
{
	fprintf(stderr, "usage: cond-bench [--impl=weft|pthread|both] [--producers=N] "
		"[--consumers=N] [--cap=N] [--work-ns=N] [--secs=S] [--workers=N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	bool want[2] = { true, true };
	int bad = 0;
	const struct bench_opt opts[] = {
		{ "--producers=", BENCH_OPT_INT, &opt_prod },
		{ "--consumers=", BENCH_OPT_INT, &opt_cons },
		{ "--cap=", BENCH_OPT_INT, &opt_cap },
		{ "--work-ns=", BENCH_OPT_LONG, &opt_work_ns },
		{ "--secs=", BENCH_OPT_DOUBLE, &opt_secs },
		{ "--workers=", BENCH_OPT_INT, &opt_workers },
	};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strncmp(a, "--impl=", 7)) {
			want[0] = !strcmp(a + 7, "weft") || !strcmp(a + 7, "both");
			want[1] = !strcmp(a + 7, "pthread") || !strcmp(a + 7, "both");
			if (!want[0] && !want[1])
				usage();
		} else if (bench_opt_parse(a, opts, sizeof(opts) / sizeof(opts[0])) != 1) {
			usage();
		}
	}
	if (opt_prod < 1 || opt_cons < 1 || opt_cap < 1 || opt_work_ns < 0 || opt_secs <= 0 ||
	    opt_workers < 0)
		usage();
	iters_per_ns = bench_spin_calibrate();
	for (int impl = 0; impl < 2; impl++)
		if (want[impl])
			bad |= run(impl);
	return bad ? 2 : 0;
}
