/*
 * examples/gang.c - seed 004 (gang scheduling in CFS) in library form:
 * gangs of threads that wait for each other by spinning, oversubscribed,
 * with GANG on, GANG off and a pthread baseline in the same binary.
 *
 * What it owns
 *   Two workloads, each run by G groups of K threads for S seconds:
 *     bsp     (default) a bulk-synchronous loop: every thread computes a
 *             chunk of C microseconds of real work (a calibrated loop, so
 *             a thread that is preempted does not finish its chunk early),
 *             then meets its group at a spin barrier. Result: barrier
 *             generations (iterations) per second, summed over groups.
 *     ebizzy  ebizzy's search in library form: each group shares NCHUNKS
 *             chunks of memory, one spinlock each; a thread picks a random
 *             chunk, takes its lock (spinning), scans the chunk for a
 *             random key in pieces of PIECE bytes with a scheduling point
 *             between pieces (a cond_resched: where a slice may end), and
 *             releases it. Result: searches (records) per second.
 *   Implementations (-i, default all, run alternately -r times):
 *     gang-on   weft, GANG on: weft_gang per group, weft_gang_barrier and
 *               weft_gang_spin_until for the waits.
 *     gang-off  weft, GANG off (WEFT_FEATURES=NO_GANG applied through the
 *               config): the same code, members are ordinary threads, the
 *               waits spin for WEFT_GANG_SPIN_NS then yield.
 *     weft      weft with the switches the environment gives (WEFT_FEATURES):
 *               what `make bench` runs, once as is and once with NO_GANG.
 *     pthread   G x K OS threads, restricted to W CPUs (oversubscribed the
 *               same way as the weft runs on W workers), with a plain
 *               spin barrier / spinlock (pause loop, no yield), the kernel
 *               baseline of the seed.
 *   The runtime is started and shut down for every weft run (weft_init /
 *   weft_shutdown), so on and off alternate in one process and one
 *   sitting.
 *
 * Output: one "bench=gang impl=... value=..." line per run (bench.h) and a
 * summary with the medians and the on/off and on/pthread ratios on stderr.
 * docs/gangs.md has the measured table and the commands.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft.h>

#include "bench.h"

#define MAXK 64
#define NCHUNKS 16
#define CHUNK_BYTES (64 * 1024)
#define PIECE 4096

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#endif
}

static int G = 4, K = 2, W = 2, runs = 5, mode_ebizzy, order_mixed;
static double secs = 1.0, chunk_us = 20.0;
static uint64_t slice_us;
static double iters_per_ns;
static uint64_t chunk_iters;

/* ---------------------------------------------------------------------- */
/* One group's shared state (both workloads, both kinds of threads). */

struct group {
	/* bsp */
	weft_gang_barrier_t gb;                    /* weft */
	_Atomic uint32_t count, gen;               /* pthread spin barrier */
	_Atomic int quit;
	_Atomic uint64_t iters;
	/* ebizzy */
	_Atomic int lock[NCHUNKS];
	unsigned char *mem;
	_Atomic uint64_t records;
	weft_gang_t gang;
	int idx;
} __attribute__((aligned(64)));

static struct group *groups;
static _Atomic int stop_flag;

static void compute_chunk(void)
{
	bench_spin_iters(chunk_iters);
}

/* --- bsp, weft --- */

static void *bsp_weft(void *arg)
{
	struct group *g = arg;

	for (;;) {
		compute_chunk();
		if (weft_gang_barrier_wait(&g->gb) == WEFT_BARRIER_SERIAL_THREAD) {
			atomic_fetch_add_explicit(&g->iters, 1, memory_order_relaxed);
			atomic_store(&g->quit, atomic_load(&stop_flag));
		}
		weft_gang_barrier_wait(&g->gb);
		if (atomic_load(&g->quit))
			break;
	}
	return NULL;
}

/* --- bsp, pthread: a counter + generation spin barrier --- */

static int spin_barrier(struct group *g)
{
	uint32_t gen = atomic_load_explicit(&g->gen, memory_order_acquire);

	if (atomic_fetch_add_explicit(&g->count, 1, memory_order_acq_rel) + 1 == (uint32_t)K) {
		atomic_store_explicit(&g->count, 0, memory_order_relaxed);
		atomic_fetch_add_explicit(&g->gen, 1, memory_order_release);
		return 1;
	}
	while (atomic_load_explicit(&g->gen, memory_order_acquire) == gen)
		cpu_relax();
	return 0;
}

static void *bsp_pthread(void *arg)
{
	struct group *g = arg;

	for (;;) {
		compute_chunk();
		if (spin_barrier(g)) {
			atomic_fetch_add_explicit(&g->iters, 1, memory_order_relaxed);
			atomic_store(&g->quit, atomic_load(&stop_flag));
		}
		spin_barrier(g);
		if (atomic_load(&g->quit))
			break;
	}
	return NULL;
}

/* --- ebizzy --- */

static int lock_free(void *arg)
{
	return atomic_load_explicit((_Atomic int *)arg, memory_order_relaxed) == 0;
}

static void lock_weft(_Atomic int *l)
{
	int z = 0;

	while (!atomic_compare_exchange_weak_explicit(l, &z, 1, memory_order_acquire,
						      memory_order_relaxed)) {
		weft_gang_spin_until(lock_free, (void *)l);
		z = 0;
	}
}

static void lock_pthread(_Atomic int *l)
{
	int z = 0;

	while (!atomic_compare_exchange_weak_explicit(l, &z, 1, memory_order_acquire,
						      memory_order_relaxed)) {
		while (atomic_load_explicit(l, memory_order_relaxed))
			cpu_relax();
		z = 0;
	}
}

static uint64_t xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Search chunk c for key in PIECE-byte pieces; between pieces, point()
 * (a scheduling point for weft, nothing for pthreads). */
static int search(struct group *g, int c, unsigned char key, bool weft)
{
	const unsigned char *p = g->mem + (size_t)c * CHUNK_BYTES;
	int found = 0;

	for (size_t off = 0; off < CHUNK_BYTES; off += PIECE) {
		for (size_t i = 0; i < PIECE; i++)
			found += p[off + i] == key;
		if (weft)
			weft_gang_yield();
	}
	return found;
}

static void ebizzy_loop(struct group *g, bool weft)
{
	uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(g->idx + 1) + (uint64_t)(uintptr_t)&s;
	volatile int sink = 0;

	while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
		int c = (int)(xs(&s) % NCHUNKS);

		if (weft)
			lock_weft(&g->lock[c]);
		else
			lock_pthread(&g->lock[c]);
		sink += search(g, c, (unsigned char)xs(&s), weft);
		atomic_store_explicit(&g->lock[c], 0, memory_order_release);
		atomic_fetch_add_explicit(&g->records, 1, memory_order_relaxed);
	}
	(void)sink;
}

static void *ebizzy_weft(void *arg)
{
	ebizzy_loop(arg, true);
	return NULL;
}

static void *ebizzy_pthread(void *arg)
{
	ebizzy_loop(arg, false);
	return NULL;
}

/* ---------------------------------------------------------------------- */

static void groups_reset(void)
{
	for (int i = 0; i < G; i++) {
		unsigned char *mem = groups[i].mem;

		memset(&groups[i], 0, sizeof(groups[i]));
		groups[i].mem = mem;
		groups[i].idx = i;
		weft_gang_barrier_init(&groups[i].gb, (unsigned)K);
	}
	atomic_store(&stop_flag, 0);
}

static double total(void)
{
	uint64_t n = 0;

	for (int i = 0; i < G; i++)
		n += mode_ebizzy ? atomic_load(&groups[i].records) : atomic_load(&groups[i].iters);
	return (double)n;
}

/* The measurement window both runners share: a 0.1 s warm-up (stacks,
 * first turns), then the progress made in secs seconds; stops the
 * threads. Returns iterations (or records) per second. */
static double measure(void)
{
	uint64_t t0, t1;
	double n0, n1;

	bench_sleep_s(0.1);
	n0 = total();
	t0 = bench_now_ns();
	bench_sleep_s(secs);
	n1 = total();
	t1 = bench_now_ns();
	atomic_store(&stop_flag, 1);
	return (n1 - n0) * 1e9 / (double)(t1 - t0);
}

/* on: 1 GANG on, 0 off, -1 as WEFT_FEATURES says */
static double run_weft(int on, weft_stats_t *st)
{
	weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
	weft_gang_attr_t ga = WEFT_GANG_ATTR_INITIALIZER;
	double rate;
	int rc;

	cfg.workers = W;
	cfg.features = on < 0 ? NULL : on ? "GANG" : "NO_GANG";
	if ((rc = weft_init(&cfg))) {
		fprintf(stderr, "gang: weft_init: %s\n", strerror(rc));
		exit(1);
	}
	ga.slice_ns = slice_us * 1000;
	groups_reset();
	for (int i = 0; i < G; i++)
		if ((rc = weft_gang_create(&groups[i].gang, (unsigned)K, &ga))) {
			fprintf(stderr, "gang: weft_gang_create: %s\n", strerror(rc));
			exit(1);
		}
	for (int n = 0; n < G * K; n++) {
		/* gang order: gang by gang. mixed (K = 2): the pairs of gangs a, b
		 * as a0 b0 b1 a1, so that with GANG off (members spread round
		 * robin over the workers by spawn order) worker 0 queues a before
		 * b and worker 1 b before a */
		int i = n / K;

		if (order_mixed && (n / 4) * 2 + 1 < G) {
			static const int pick[4] = { 0, 1, 1, 0 };

			i = (n / 4) * 2 + pick[n % 4];
		}
		if ((rc = weft_gang_spawn(groups[i].gang, mode_ebizzy ? ebizzy_weft : bsp_weft,
					  &groups[i], NULL))) {
			fprintf(stderr, "gang: weft_gang_spawn: %s\n", strerror(rc));
			exit(1);
		}
	}
	rate = measure();
	for (int i = 0; i < G; i++) {
		weft_gang_join(groups[i].gang, NULL);
		weft_gang_destroy(groups[i].gang);
	}
	weft_stats_get(st);
	weft_shutdown();
	return rate;
}

static double run_pthread(void)
{
	pthread_t *th = calloc((size_t)(G * K), sizeof(*th));
	cpu_set_t set;
	pthread_attr_t a;
	double rate;

	/* W CPUs, as the weft runs have W workers */
	CPU_ZERO(&set);
	for (int c = 0; c < W; c++)
		CPU_SET(bench_cpu_nth(c), &set);
	pthread_attr_init(&a);
	pthread_attr_setaffinity_np(&a, sizeof(set), &set);
	groups_reset();
	for (int i = 0; i < G; i++)
		for (int j = 0; j < K; j++)
			if (pthread_create(&th[i * K + j], &a, mode_ebizzy ? ebizzy_pthread : bsp_pthread,
					   &groups[i])) {
				fprintf(stderr, "gang: pthread_create failed\n");
				exit(1);
			}
	pthread_attr_destroy(&a);
	rate = measure();
	for (int i = 0; i < G * K; i++)
		pthread_join(th[i], NULL);
	free(th);
	return rate;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: gang [options]\n"
"  Seed 004 in library form: G groups of K threads that wait for each other\n"
"  by spinning, on W workers (or W CPUs for pthreads).\n"
"  -m MODE   bsp (default): compute a chunk, then a spin barrier; reports\n"
"            iterations (barrier generations) per second, summed over groups\n"
"            ebizzy: search random chunks of shared memory under spinlocks,\n"
"            with a scheduling point every %d bytes; reports records/s\n"
"  -g G      groups (gangs), default 4\n"
"  -k K      threads per group, default 2 (at most W for the weft runs)\n"
"  -w W      weft workers, and CPUs for the pthread baseline; default 2\n"
"  -c US     bsp chunk of real work per iteration in microseconds, default 20\n"
"  -s SECS   measured seconds per run, default 1 (after 0.1 s of warm-up)\n"
"  -r RUNS   runs of each implementation, alternating, default 5\n"
"  -t US     gang slice in microseconds (default: WEFT_GANG_SLICE_US or 2000)\n"
"  -o ORDER  spawn order of the weft members: gang (default: gang by gang)\n"
"            or mixed (K = 2 only: gangs a, b spawned a0 b0 b1 a1, so that\n"
"            GANG off's round-robin placement queues a before b on one\n"
"            worker and b before a on the other: a sensitivity check of\n"
"            the GANG-off baseline; GANG on places members itself)\n"
"  -i LIST   implementations, comma-separated: gang-on,gang-off,pthread\n"
"            (default: these three), or weft: the switches WEFT_FEATURES\n"
"            gives (make bench runs it as is and with NO_GANG)\n"
"  -h        this help\n"
"  Output: one bench=gang line per run on stdout; medians and ratios on\n"
"  stderr, with the gang counters of the weft runs.\n", PIECE);
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "gang-on", "gang-off", "pthread", "weft" };
	bool want[4] = { true, true, true, false };
	double *res[4];
	int nres[4] = { 0, 0, 0, 0 };
	const char *ilist = NULL;
	char params[160];
	int opt;

	while ((opt = getopt(argc, argv, "m:g:k:w:c:s:r:t:i:o:h")) != -1) {
		switch (opt) {
		case 'm':
			if (strcmp(optarg, "ebizzy") == 0)
				mode_ebizzy = 1;
			else if (strcmp(optarg, "bsp") != 0) {
				usage(stderr);
				return 2;
			}
			break;
		case 'g': G = atoi(optarg); break;
		case 'k': K = atoi(optarg); break;
		case 'w': W = atoi(optarg); break;
		case 'c': chunk_us = atof(optarg); break;
		case 's': secs = atof(optarg); break;
		case 'r': runs = atoi(optarg); break;
		case 't': slice_us = strtoull(optarg, NULL, 10); break;
		case 'i': ilist = optarg; break;
		case 'o':
			if (strcmp(optarg, "mixed") == 0)
				order_mixed = 1;
			else if (strcmp(optarg, "gang") != 0) {
				usage(stderr);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (G < 1 || K < 1 || K > MAXK || W < 1 || W > bench_cpu_count() * 64 || runs < 1 ||
	    secs <= 0 || chunk_us < 0 || (order_mixed && K != 2)) {
		usage(stderr);
		return 2;
	}
	if (ilist) {
		for (int i = 0; i < 4; i++)
			want[i] = false;
		for (char *dup = strdup(ilist), *tok = strtok(dup, ","); tok; tok = strtok(NULL, ","))
			for (int i = 0; i < 4; i++)
				if (strcmp(tok, names[i]) == 0)
					want[i] = true;
	}
	if (W > bench_cpu_count())
		want[2] = false;   /* the baseline pins to W distinct CPUs */
	iters_per_ns = bench_spin_calibrate();
	chunk_iters = (uint64_t)(chunk_us * 1000.0 * iters_per_ns);
	groups = aligned_alloc(64, sizeof(*groups) * (size_t)G);
	for (int i = 0; i < G; i++) {
		groups[i].mem = malloc((size_t)NCHUNKS * CHUNK_BYTES);
		for (size_t j = 0; j < (size_t)NCHUNKS * CHUNK_BYTES; j++)
			groups[i].mem[j] = (unsigned char)(j * 2654435761u >> 13);
	}
	for (int i = 0; i < 4; i++)
		res[i] = calloc((size_t)runs, sizeof(double));
	snprintf(params, sizeof(params),
		 "mode=%s,G=%d,K=%d,W=%d,chunk_us=%g,slice_us=%llu,secs=%g%s",
		 mode_ebizzy ? "ebizzy" : "bsp", G, K, W, chunk_us,
		 (unsigned long long)slice_us, secs, order_mixed ? ",order=mixed" : "");
	for (int r = 0; r < runs; r++) {
		for (int i = 0; i < 4; i++) {
			weft_stats_t st;
			double v;

			if (!want[i])
				continue;
			memset(&st, 0, sizeof(st));
			v = i == 2 ? run_pthread() : run_weft(i == 3 ? -1 : i == 0, &st);
			res[i][nres[i]++] = v;
			bench_result(stdout, "gang", names[i], params, v,
				     mode_ebizzy ? "records/s" : "iter/s");
			if (i != 2)
				fprintf(stderr, "  %s run %d: %.0f/s; gang slices %llu, co-dispatch "
					"%llu (mean %.1f us), spin aborts %llu, switches %llu\n",
					names[i], r + 1, v, (unsigned long long)st.gang_slices,
					(unsigned long long)st.gang_codispatches,
					st.gang_codispatches ? (double)st.gang_codispatch_ns /
						(double)st.gang_codispatches / 1000.0 : 0.0,
					(unsigned long long)st.gang_spin_aborts,
					(unsigned long long)st.switches);
			fflush(stdout);
		}
	}
	{
		double med[4] = { 0, 0, 0, 0 };

		fprintf(stderr, "gang: %s, medians of %d runs:\n", params, runs);
		for (int i = 0; i < 4; i++)
			if (nres[i]) {
				med[i] = bench_median(res[i], (size_t)nres[i]);
				fprintf(stderr, "  %-9s %14.0f %s\n", names[i], med[i],
					mode_ebizzy ? "records/s" : "iter/s");
			}
		if (med[0] > 0 && med[1] > 0)
			fprintf(stderr, "  on/off      %8.2fx\n", med[0] / med[1]);
		if (med[0] > 0 && med[2] > 0)
			fprintf(stderr, "  on/pthread  %8.2fx\n", med[0] / med[2]);
	}
	return 0;
}
