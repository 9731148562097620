/*
 * examples/bench.h - small generic helpers shared by the example benchmarks
 * (sembench, test-mutex, weft-micro). Header only, C11 plus the GNU/Linux
 * calls the benchmarks need anyway (sched_getaffinity, pthread affinity).
 *
 * What lives here: a monotonic clock in ns, the median of a sample, the CPU
 * count, pinning an OS thread to a CPU, getrusage snapshots and their deltas,
 * and one printer for the machine-readable result line
 *
 *     bench=NAME impl=IMPL param=K=V,... value=X unit=U
 *
 * that examples/run-seeds.sh (and anyone else) can grep. Nothing here knows
 * about weft; benchmark-specific code stays in its own .c file.
 *
 * Everything is `static inline` so each program includes it without a
 * separate object file; names carry the `bench_` prefix.
 */
#ifndef WEFT_EXAMPLES_BENCH_H
#define WEFT_EXAMPLES_BENCH_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. Context: any. */
static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sleep s seconds (fractions allowed), resumed across signals. */
static inline void bench_sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) != 0)
		;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median of v[0..n-1] (mean of the two middle values when n is even); the
 * array is sorted in place. Returns 0.0 for n == 0. */
static inline double bench_median(double *v, size_t n)
{
	if (n == 0)
		return 0.0;
	qsort(v, n, sizeof(*v), bench_cmp_double);
	if (n % 2)
		return v[n / 2];
	return (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* Number of CPUs in the process affinity mask (at least 1). */
static inline int bench_cpu_count(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 1;
	int n = CPU_COUNT(&set);
	return n > 0 ? n : 1;
}

/* The idx-th CPU (wrapping around) of the process affinity mask, i.e. the
 * CPU that round-robin placement gives to thread number idx; -1 on error. */
static inline int bench_cpu_nth(int idx)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return -1;
	int n = CPU_COUNT(&set);
	if (n <= 0)
		return -1;
	idx %= n;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (CPU_ISSET(cpu, &set) && idx-- == 0)
			return cpu;
	}
	return -1;
}

/* Pin the OS thread t to CPU cpu. Returns 0 or a positive errno. */
static inline int bench_pin_thread(pthread_t t, int cpu)
{
	cpu_set_t set;

	if (cpu < 0 || cpu >= CPU_SETSIZE)
		return EINVAL;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(t, sizeof(set), &set);
}

/* A getrusage(RUSAGE_SELF) snapshot; the whole process, every thread
 * (threads that already exited included). */
typedef struct bench_rusage {
	uint64_t user_ns;
	uint64_t sys_ns;
	uint64_t nvcsw;  /* voluntary context switches */
	uint64_t nivcsw; /* involuntary context switches */
	uint64_t minflt;
	uint64_t majflt;
} bench_rusage_t;

static inline void bench_rusage_get(bench_rusage_t *r)
{
	struct rusage ru;

	memset(r, 0, sizeof(*r));
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return;
	r->user_ns = (uint64_t)ru.ru_utime.tv_sec * 1000000000u + (uint64_t)ru.ru_utime.tv_usec * 1000u;
	r->sys_ns = (uint64_t)ru.ru_stime.tv_sec * 1000000000u + (uint64_t)ru.ru_stime.tv_usec * 1000u;
	r->nvcsw = (uint64_t)ru.ru_nvcsw;
	r->nivcsw = (uint64_t)ru.ru_nivcsw;
	r->minflt = (uint64_t)ru.ru_minflt;
	r->majflt = (uint64_t)ru.ru_majflt;
}

/* *d = b - a, field by field. */
static inline void bench_rusage_delta(bench_rusage_t *d, const bench_rusage_t *a,
				      const bench_rusage_t *b)
{
	d->user_ns = b->user_ns - a->user_ns;
	d->sys_ns = b->sys_ns - a->sys_ns;
	d->nvcsw = b->nvcsw - a->nvcsw;
	d->nivcsw = b->nivcsw - a->nivcsw;
	d->minflt = b->minflt - a->minflt;
	d->majflt = b->majflt - a->majflt;
}

/* An -i NAME option (repeatable): mark the implementation called name in
 * want[0..n-1] (names[k] is implementation k's name). Returns 0, or -1 if
 * there is no such implementation. */
static inline int bench_want_impl(bool *want, const char *const *names, int n, const char *name)
{
	for (int k = 0; k < n; k++)
		if (strcmp(name, names[k]) == 0) {
			want[k] = true;
			return 0;
		}
	return -1;
}

/* After option parsing: no -i given means every implementation. */
static inline void bench_want_default(bool *want, int n)
{
	for (int k = 0; k < n; k++)
		if (want[k])
			return;
	for (int k = 0; k < n; k++)
		want[k] = true;
}

/* One "--name=value" option of a table (bench_opt_parse): name with its
 * '=', the kind of value, and where it goes. */
enum bench_opt_kind { BENCH_OPT_INT, BENCH_OPT_LONG, BENCH_OPT_DOUBLE };

struct bench_opt {
	const char *name;            /* "--secs=" */
	enum bench_opt_kind kind;
	void *dst;                   /* int *, long * or double * */
};

/* If a is "--name=value" for one of o[0..n-1], store the value there.
 * Returns 1 when stored, 0 when a names no option of the table, -1 when
 * it does but the value is not a number of that kind (the caller prints
 * its usage). Range checks stay with the caller. */
static inline int bench_opt_parse(const char *a, const struct bench_opt *o, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		size_t len = strlen(o[k].name);
		const char *v = a + len;
		char *end;

		if (strncmp(a, o[k].name, len) != 0)
			continue;
		errno = 0;
		if (o[k].kind == BENCH_OPT_DOUBLE) {
			*(double *)o[k].dst = strtod(v, &end);
		} else {
			long x = strtol(v, &end, 10);

			if (o[k].kind == BENCH_OPT_INT && (x < INT32_MIN || x > INT32_MAX))
				errno = ERANGE;
			if (o[k].kind == BENCH_OPT_INT)
				*(int *)o[k].dst = (int)x;
			else
				*(long *)o[k].dst = x;
		}
		return (end == v || *end || errno) ? -1 : 1;
	}
	return 0;
}

/* Print one result line to f (stdout if NULL):
 *   bench=NAME impl=IMPL param=K=V,... value=X unit=U
 * params is a ready-made "k=v,k=v" string ("-" if empty or NULL). */
static inline void bench_result(FILE *f, const char *name, const char *impl,
				const char *params, double value, const char *unit)
{
	fprintf(f ? f : stdout, "bench=%s impl=%s param=%s value=%.9g unit=%s\n", name, impl,
		params && *params ? params : "-", value, unit);
}

/* Busy work: n iterations of an empty volatile loop. */
static inline void bench_spin_iters(uint64_t n)
{
	for (volatile uint64_t i = 0; i < n; i++)
		;
}

/* bench_spin_iters() iterations per ns: the fastest of several ~2 ms
 * trials, so a trial that was preempted (a shared, loaded machine) does
 * not shorten every hold. */
static inline double bench_spin_calibrate(void)
{
	uint64_t n = 100000, t0, t1;
	double best = 0;

	for (;;) {
		t0 = bench_now_ns();
		bench_spin_iters(n);
		t1 = bench_now_ns();
		if (t1 - t0 > 2000000)
			break;
		n *= 2;
	}
	for (int i = 0; i < 10; i++) {
		double r;

		t0 = bench_now_ns();
		bench_spin_iters(n);
		t1 = bench_now_ns();
		r = (double)n / (double)(t1 - t0);
		if (r > best)
			best = r;
	}
	return best;
}

#endif
