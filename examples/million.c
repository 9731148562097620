/*
 * examples/million.c - a million live light threads (docs/stacks.md).
 *
 *   bulk    spawn N threads that return at once, then join them all; ns
 *           per thread (weft-micro's spawn_join_bulk at N = 1,000,000)
 *   parked  spawn N threads that each park until released, wait until
 *           every one is parked (all N hold a stack at once), report the
 *           RSS per parked thread, then release and join them; ns per
 *           thread for the whole spawn, park, release and join
 *
 * Default configuration (workers = CPUs, default stack size and guard);
 * the environment (WEFT_STACK_SIZE, WEFT_WORKERS, ...) applies as usual.
 * A run that fails (spawn error) says so and how far it got.
 *
 * usage: million [--n=N] [--runs=R] [--bench=bulk,parked] [--limit=SEC]
 * --limit bounds one parked run: past it the run is reported unfinished
 * and the program exits (a runtime stuck at a stack shortage would
 * otherwise take minutes).
 */
#include "examples/bench.h"
#include "examples/bench_weft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long n_threads = 1000000;
static double limit_s = 60;
static weft_thread_t *ts;

static void *nop(void *arg)
{
	return arg;
}

static _Atomic long nparked;
static _Atomic int released;

static void *parker(void *arg)
{
	/* relaxed: a count the spawner polls */
	atomic_fetch_add_explicit(&nparked, 1, memory_order_relaxed);
	/* acquire: pairs with the release store in run_parked */
	while (!atomic_load_explicit(&released, memory_order_acquire))
		weft_park();
	return arg;
}

/* Resident set size in bytes (from /proc/self/statm). */
static long rss_bytes(void)
{
	long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%ld %ld", &size, &res) != 2)
		res = 0;
	fclose(f);
	return res * sysconf(_SC_PAGESIZE);
}

static long spawned;
static int spawn_err;
static double rss_per, park_phase;

static void *run_bulk(void *arg)
{
	uint64_t t0 = bench_now_ns();
	long i;
	int rc = 0;

	(void)arg;
	for (i = 0; i < n_threads; i++)
		if ((rc = weft_spawn(&ts[i], nop, NULL, NULL)) != 0)
			break;
	spawned = i;
	spawn_err = rc;
	for (long j = 0; j < i; j++)
		weft_join(ts[j], NULL);
	return bench_dret((double)(bench_now_ns() - t0) / (double)n_threads);
}

static void *run_parked(void *arg)
{
	uint64_t t0 = bench_now_ns(), stop = t0 + (uint64_t)(limit_s * 1e9);
	long rss0 = rss_bytes(), i;
	int rc = 0;

	(void)arg;
	atomic_store_explicit(&nparked, 0, memory_order_relaxed);
	atomic_store_explicit(&released, 0, memory_order_relaxed);
	for (i = 0; i < n_threads; i++)
		if ((rc = weft_spawn(&ts[i], parker, NULL, NULL)) != 0)
			break;
	spawned = i;
	spawn_err = rc;
	/* relaxed: polled; every parker counts itself before it parks */
	while (atomic_load_explicit(&nparked, memory_order_relaxed) < i) {
		if (bench_now_ns() > stop) {
			printf("parked: n=%ld unfinished after %.0f s: %ld of %ld threads ran\n",
			       n_threads, limit_s, atomic_load(&nparked), i);
			fflush(stdout);
			_exit(2);
		}
		weft_yield();
	}
	rss_per = (double)(rss_bytes() - rss0) / (double)(i ? i : 1);
	park_phase = (double)(bench_now_ns() - t0) / (double)n_threads;
	/* release: the parkers' acquire loads see it */
	atomic_store_explicit(&released, 1, memory_order_release);
	for (long j = 0; j < i; j++)
		weft_unpark(ts[j]);
	for (long j = 0; j < i; j++)
		weft_join(ts[j], NULL);
	return bench_dret((double)(bench_now_ns() - t0) / (double)n_threads);
}

int main(int argc, char **argv)
{
	const char *benches = NULL;
	int runs = 5;
	double v[64], rss[64], park[64];

	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--n=", 4) == 0)
			n_threads = atol(argv[i] + 4);
		else if (strncmp(argv[i], "--runs=", 7) == 0)
			runs = atoi(argv[i] + 7);
		else if (strncmp(argv[i], "--bench=", 8) == 0)
			benches = argv[i] + 8;
		else if (strncmp(argv[i], "--limit=", 8) == 0)
			limit_s = atof(argv[i] + 8);
		else {
			fprintf(stderr, "usage: %s [--n=N] [--runs=R] [--bench=bulk,parked] [--limit=SEC]\n",
				argv[0]);
			return 1;
		}
	}
	if (runs < 1 || runs > 64)
		runs = 5;
	if (n_threads < 1)
		n_threads = 1;
	/* the program's own handle array, faulted in before any timing:
	 * its page faults are not the runtime's cost */
	ts = malloc((size_t)n_threads * sizeof(*ts));
	if (ts)
		memset(ts, 0, (size_t)n_threads * sizeof(*ts));
	if (!ts || weft_init(NULL) != 0) {
		fprintf(stderr, "million: no memory or weft_init failed\n");
		return 1;
	}
	for (int b = 0; b < 2; b++) {
		const char *name = b ? "parked" : "bulk";
		double lo = 1e30, hi = 0;

		if (!bench_want(benches, name))
			continue;
		for (int r = 0; r < runs; r++) {
			v[r] = bench_in_weft(b ? run_parked : run_bulk, NULL);
			rss[r] = rss_per;
			park[r] = park_phase;
			if (spawned < n_threads) {
				printf("%s: n=%ld spawn %ld failed: %s\n", name, n_threads, spawned,
				       strerror(spawn_err));
				return 2;
			}
			lo = v[r] < lo ? v[r] : lo;
			hi = v[r] > hi ? v[r] : hi;
		}
		printf("%s: n=%ld workers=%d ns/thread median %.1f (min %.1f max %.1f, %d runs)",
		       name, n_threads, weft_workers(), bench_median(v, (size_t)runs), lo, hi, runs);
		if (b)
			printf(" (spawn until all parked %.1f) rss/parked thread %.0f bytes",
			       bench_median(park, (size_t)runs), bench_median(rss, (size_t)runs));
		printf("\n");
		fflush(stdout);
	}
	weft_shutdown();
	free(ts);
	return 0;
}
