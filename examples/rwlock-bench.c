/*
 * examples/rwlock-bench.c - read-mostly reader-writer lock throughput:
 * weft_rwlock_t in light threads against glibc's pthread_rwlock_t in OS
 * threads, in one binary and one run.
 *
 * Workload (issue 18): T tasks loop: draw a number; with probability R %
 * take a read hold, read the protected data (4 cache lines) and check that
 * it is consistent, otherwise take the write hold and update all of it;
 * spin --hold-ns inside (default 200 ns), release, spin --work-ns outside
 * (default 200 ns). The figure is lock operations per second, all tasks
 * together, over the measured interval (after a warm-up).
 *
 *   rwlock-bench [--impl=LIST] [--tasks=16] [--read-pct=99]
 *                [--hold-ns=200] [--work-ns=200] [--secs=2] [--workers=2]
 *
 * LIST is a comma-separated list of none, none-os, weft, pthread; "both"
 * means weft,pthread (the default) and "all" all four. "none" is the
 * ceiling: the same loop, the same data accesses and spins, no lock at all,
 * in light threads on the same workers (its reads are not checked: nothing
 * makes them consistent). With --workers CPUs to itself it is about
 * workers / (hold + work) ops/s; no lock can beat it. "none-os" is the same
 * loop in T OS threads, the ceiling of the pthread side: on a machine
 * shared with other processes, T OS threads get a larger share of the
 * CPUs than --workers workers do (the kernel shares CPU time by thread),
 * so compare each lock with its own ceiling as well as with each other.
 *
 * Output: a human line per impl and the machine-readable lines
 *   bench=rwlock impl=IMPL param=tasks=T,read=R,hold=H,work=W value=X unit=ops/s
 *   bench=rwlock-cpu impl=IMPL param=... value=Y unit=ops/cpu-s
 * The second divides by the CPU time the process used over the interval
 * (getrusage), not by wall time: on a machine shared with other work it
 * does not depend on how much CPU the others left us, and it charges
 * spinning and scheduling overhead. It does not charge idle time (a worker
 * asleep while work waits), which the first figure does; quote both.
 * plus the spread of per-task operation counts (min/max), because the
 * weft tasks are scheduled cooperatively: a reader that never blocks keeps
 * its worker until it does, so the spread shows how evenly tasks ran, and
 *   bench=rwlock-wmax impl=IMPL param=... value=Z unit=ms
 * the longest a write lock call waited in the measured interval (the
 * writers' starvation bound: a lock that lets readers pass a waiting
 * writer must still bound this).
 * The pthread baseline is glibc's default rwlock (reader preference) with
 * T OS threads; the weft side runs T light threads on --workers workers.
 * A reader that sees the 4 lines disagree reports a broken lock (exit 2).
 */
#include "examples/bench_weft.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <weft.h>
#include <weft/sync.h>

enum { IMPL_NONE, IMPL_NONE_OS, IMPL_WEFT, IMPL_PTHREAD, NIMPL };
static const char *const impl_names[] = { "none", "none-os", "weft", "pthread" };

/* Runs in OS threads (else light threads on --workers workers). */
static bool impl_os(int impl)
{
	return impl == IMPL_NONE_OS || impl == IMPL_PTHREAD;
}

static int opt_tasks = 16, opt_read_pct = 99, opt_workers = 2;
static long opt_hold_ns = 200, opt_work_ns = 200;
static double opt_secs = 2.0;
static double iters_per_ns;

/* The protected data: 4 cache lines, each holding the same counter. */
static struct {
	_Alignas(64) uint64_t v[8];
} data[4];

static weft_rwlock_t wlock = WEFT_RWLOCK_INITIALIZER;
static pthread_rwlock_t plock = PTHREAD_RWLOCK_INITIALIZER;

/* relaxed: a flag polled by the tasks; nothing is published through it */
static _Atomic int go, stop, measuring;
static _Atomic long broken;

struct task {
	_Alignas(64) _Atomic uint64_t ops;   /* relaxed: read by main as a sample */
	uint64_t wmax_ns;    /* longest write lock wait while measuring; read by
	                      * main after the join */
	int idx;
	int impl;
};

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *task_main(void *p)
{
	struct task *t = p;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(t->idx + 1);
	uint64_t hold = (uint64_t)(opt_hold_ns * iters_per_ns + 0.5);
	uint64_t work = (uint64_t)(opt_work_ns * iters_per_ns + 0.5);
	uint64_t n = 0;
	int weft = !impl_os(t->impl);

	while (!atomic_load_explicit(&go, memory_order_relaxed)) {
		if (weft)
			weft_yield();
		else
			sched_yield();
	}
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		bool rd = (int)(rng_next(&rng) % 100) < opt_read_pct;

		if (t->impl == IMPL_NONE || t->impl == IMPL_NONE_OS) {
			/* relaxed atomics: the same loads and stores with no lock,
			 * and no data race */
			if (rd) {
				for (int i = 0; i < 4; i++)
					(void)__atomic_load_n(&data[i].v[0], __ATOMIC_RELAXED);
			} else {
				for (int i = 0; i < 4; i++)
					__atomic_store_n(&data[i].v[0],
							 __atomic_load_n(&data[i].v[0],
									 __ATOMIC_RELAXED) + 1,
							 __ATOMIC_RELAXED);
			}
			bench_spin_iters(hold);
			bench_spin_iters(work);
			/* relaxed: a statistic, sampled by main */
			atomic_store_explicit(&t->ops, ++n, memory_order_relaxed);
			continue;
		}
		if (rd) {
			if (weft)
				weft_rwlock_rdlock(&wlock);
			else
				pthread_rwlock_rdlock(&plock);
			uint64_t a = data[0].v[0];
			for (int i = 1; i < 4; i++)
				if (data[i].v[0] != a)
					atomic_fetch_add(&broken, 1);
		} else {
			uint64_t w0 = bench_now_ns(), w;

			if (weft)
				weft_rwlock_wrlock(&wlock);
			else
				pthread_rwlock_wrlock(&plock);
			w = bench_now_ns() - w0;
			/* relaxed: a flag */
			if (w > t->wmax_ns && atomic_load_explicit(&measuring, memory_order_relaxed))
				t->wmax_ns = w;
			for (int i = 0; i < 4; i++)
				data[i].v[0]++;
		}
		bench_spin_iters(hold);
		if (weft)
			weft_rwlock_unlock(&wlock);
		else
			pthread_rwlock_unlock(&plock);
		bench_spin_iters(work);
		/* relaxed: a statistic, sampled by main */
		atomic_store_explicit(&t->ops, ++n, memory_order_relaxed);
	}
	return NULL;
}

/* CPU time used by the whole process so far (user + system), ns. */
static uint64_t cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

static uint64_t sum_ops(struct task *t, int n)
{
	uint64_t s = 0;

	for (int i = 0; i < n; i++)
		/* relaxed: a sample */
		s += atomic_load_explicit(&t[i].ops, memory_order_relaxed);
	return s;
}

static void run(int impl)
{
	struct task *tasks = calloc((size_t)opt_tasks, sizeof(*tasks));
	weft_thread_t *wt = calloc((size_t)opt_tasks, sizeof(*wt));
	pthread_t *pt = calloc((size_t)opt_tasks, sizeof(*pt));
	uint64_t s0, s1, t0, t1, c0, c1, mn = UINT64_MAX, mx = 0, wmax = 0;
	char param[128];
	double v;

	if (!tasks || !wt || !pt) {
		perror("calloc");
		exit(1);
	}
	memset(data, 0, sizeof(data));
	atomic_store(&go, 0);
	atomic_store(&stop, 0);
	atomic_store(&measuring, 0);
	if (!impl_os(impl))
		bench_weft_start(opt_workers);
	for (int i = 0; i < opt_tasks; i++) {
		tasks[i].idx = i;
		tasks[i].impl = impl;
		bench_task_start(!impl_os(impl), &wt[i], &pt[i], task_main, &tasks[i]);
	}
	atomic_store(&go, 1);
	bench_sleep_s(0.3);                    /* warm-up */
	atomic_store(&measuring, 1);
	s0 = sum_ops(tasks, opt_tasks);
	t0 = bench_now_ns();
	c0 = cpu_ns();
	bench_sleep_s(opt_secs);
	s1 = sum_ops(tasks, opt_tasks);
	t1 = bench_now_ns();
	c1 = cpu_ns();
	for (int i = 0; i < opt_tasks; i++) {
		/* relaxed: a sample */
		uint64_t o = atomic_load_explicit(&tasks[i].ops, memory_order_relaxed);

		mn = o < mn ? o : mn;
		mx = o > mx ? o : mx;
	}
	atomic_store(&measuring, 0);
	atomic_store(&stop, 1);
	for (int i = 0; i < opt_tasks; i++) {
		bench_task_join(!impl_os(impl), wt[i], pt[i]);
		/* after the join: the task's last store is ordered before it */
		wmax = tasks[i].wmax_ns > wmax ? tasks[i].wmax_ns : wmax;
	}
	if (!impl_os(impl))
		weft_shutdown();
	v = (double)(s1 - s0) * 1e9 / (double)(t1 - t0);
	printf("%-8s tasks %4d reads %3d%%  %12.0f ops/s  cpus %.2f  %10.0f ops/cpu-s  "
	       "per-task ops min %llu max %llu  write wait max %.3f ms\n",
	       impl_names[impl], opt_tasks, opt_read_pct, v, (double)(c1 - c0) / (double)(t1 - t0),
	       (double)(s1 - s0) * 1e9 / (double)(c1 - c0 ? c1 - c0 : 1), (unsigned long long)mn,
	       (unsigned long long)mx, (double)wmax / 1e6);
	snprintf(param, sizeof(param), "tasks=%d,read=%d,hold=%ld,work=%ld", opt_tasks,
		 opt_read_pct, opt_hold_ns, opt_work_ns);
	bench_result(NULL, "rwlock", impl_names[impl], param, v, "ops/s");
	bench_result(NULL, "rwlock-cpu", impl_names[impl], param,
		     (double)(s1 - s0) * 1e9 / (double)(c1 - c0 ? c1 - c0 : 1), "ops/cpu-s");
	bench_result(NULL, "rwlock-wmax", impl_names[impl], param, (double)wmax / 1e6, "ms");
	fflush(stdout);
	free(tasks);
	free(wt);
	free(pt);
}

static void usage(void)
{
	fprintf(stderr, "usage: rwlock-bench [--impl=none,none-os,weft,pthread|both|all] [--tasks=N] "
		"[--read-pct=P] [--hold-ns=N] [--work-ns=N] [--secs=S] [--workers=N]\n");
	exit(2);
}

/* Parse a comma-separated impl list into want[]; returns -1 if a name is
 * unknown or the list is empty. */
static int parse_impls(const char *list, bool *want)
{
	char buf[64], *save = NULL, *tok;
	bool any = false;

	if (strlen(list) >= sizeof(buf))
		return -1;
	strcpy(buf, list);
	memset(want, 0, NIMPL * sizeof(*want));
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int k;

		if (!strcmp(tok, "both") || !strcmp(tok, "all")) {
			want[IMPL_WEFT] = want[IMPL_PTHREAD] = true;
			want[IMPL_NONE] |= !strcmp(tok, "all");
			want[IMPL_NONE_OS] |= !strcmp(tok, "all");
			any = true;
			continue;
		}
		for (k = 0; k < NIMPL && strcmp(tok, impl_names[k]); k++)
			;
		if (k == NIMPL)
			return -1;
		want[k] = any = true;
	}
	return any ? 0 : -1;
}

int main(int argc, char **argv)
{
	bool want[NIMPL] = { false, true, true };
	const struct bench_opt opts[] = {
		{ "--tasks=", BENCH_OPT_INT, &opt_tasks },
		{ "--read-pct=", BENCH_OPT_INT, &opt_read_pct },
		{ "--hold-ns=", BENCH_OPT_LONG, &opt_hold_ns },
		{ "--work-ns=", BENCH_OPT_LONG, &opt_work_ns },
		{ "--secs=", BENCH_OPT_DOUBLE, &opt_secs },
		{ "--workers=", BENCH_OPT_INT, &opt_workers },
	};

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strncmp(a, "--impl=", 7)) {
			if (parse_impls(a + 7, want))
				usage();
		} else if (bench_opt_parse(a, opts, sizeof(opts) / sizeof(opts[0])) != 1) {
			usage();
		}
	}
	if (opt_tasks < 1 || opt_read_pct < 0 || opt_read_pct > 100 || opt_hold_ns < 0 ||
	    opt_work_ns < 0 || opt_secs <= 0 || opt_workers < 0)
		usage();
	iters_per_ns = bench_spin_calibrate();
	for (int impl = 0; impl < NIMPL; impl++)
		if (want[impl])
			run(impl);
	if (atomic_load(&broken)) {
		fprintf(stderr, "rwlock-bench: %ld inconsistent reads: the lock is broken\n",
			atomic_load(&broken));
		return 2;
	}
	return 0;
}
