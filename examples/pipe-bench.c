/*
 * examples/pipe-bench.c - `perf bench sched pipe` in library form, with its
 * kernel baseline in the same binary (docs/seeds.md, "pipe-bench").
 *
 * What it owns
 *   Two tasks and two one-way links. For L loops, task A writes an int on
 *   link 0 and then reads one from link 1; task B reads from link 0 and
 *   writes on link 1: a strict ping-pong in which every operation is a
 *   blocking hand-off and a wakeup of the partner. Written from the
 *   benchmark's documented behaviour, not from perf's source.
 *
 *   Implementations (-i, repeatable; default: all that apply):
 *     weft-same     two light threads pinned to worker 0, two rendezvous
 *                   channels: the pure switch + hand-off cost (no kick, no
 *                   other CPU involved).
 *     weft-cross    light threads pinned to workers 0 and 1: every wake is a
 *                   remote one (mailbox push, and a kick when the partner's
 *                   worker has gone to sleep).
 *     weft-free     unpinned light threads: what wake placement makes of it.
 *     chan-pthread  two plain pthreads over the same weft channels (the
 *                   channels' OS-thread path: futex waits on the waiters).
 *     pipe          two pthreads and two pipe(2)s, unpinned: `perf bench sched
 *                   pipe -T`, the kernel baseline.
 *     pipe-same     the same, both pinned to one CPU: `taskset -c 0 perf
 *                   bench sched pipe -T`, the kernel's same-CPU switch cost.
 *
 *   Output per implementation and run, in perf's format:
 *
 *     # Executed 1000000 pipe operations between two threads (weft-same)
 *
 *          Total time: 0.312 [sec]
 *
 *            0.312004 usecs/op
 *             3205087 ops/sec
 *
 *   then, for the weft implementations, the scheduler counters per loop, and
 *   a machine-readable line per implementation with the median of the runs:
 *     bench=pipe impl=weft-same param=loops=1000000,runs=5,cap=0 value=0.31 unit=usecs/op
 *
 *   Options: -l loops (default 1000000, as perf), -r runs (default 5; the
 *   median is reported), -c channel capacity (default 0: rendezvous; a pipe
 *   is a buffer, but in a ping-pong at most one int is ever in flight, so the
 *   two behave the same), -w workers (default 2).
 *   A/B of scheduler features: WEFT_FEATURES=NO_NEXT_SLOT,NO_IDLE_SPIN,...
 *
 * Invariants
 *   I1  Each task checks every value it receives (A gets back i + 1 for the
 *       i it sent), so a broken hand-off fails the run instead of timing it.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft.h>
#include <weft/chan.h>

#include "examples/bench.h"

#define RUNS_MAX 101

enum impl {
	IMPL_WEFT_SAME,
	IMPL_WEFT_CROSS,
	IMPL_WEFT_FREE,
	IMPL_CHAN_PTHREAD,
	IMPL_PIPE,
	IMPL_PIPE_SAME,
	IMPL_COUNT,
};

static const char *const impl_names[IMPL_COUNT] = {
	"weft-same", "weft-cross", "weft-free", "chan-pthread", "pipe", "pipe-same",
};

struct pp {
	long loops;
	weft_chan_t *ch[2];
	int fd[2][2];             /* pipe(2) pairs: [link][0 read, 1 write] */
	int cpu;                  /* pipe-same: CPU to pin both to, else -1 */
	volatile int bad;         /* I1 violated */
};

static void die(const char *what, int err)
{
	fprintf(stderr, "pipe-bench: %s: %s\n", what, strerror(err));
	exit(1);
}

/* --- the two tasks over channels --- */

static void *chan_a(void *arg)
{
	struct pp *p = arg;
	int v;

	for (int i = 0; i < p->loops; i++) {
		if (weft_chan_send(p->ch[0], &i) != 0 || weft_chan_recv(p->ch[1], &v) != 0 ||
		    v != i + 1) {
			p->bad = 1;
			break;
		}
	}
	return NULL;
}

static void *chan_b(void *arg)
{
	struct pp *p = arg;
	int v;

	for (int i = 0; i < p->loops; i++) {
		if (weft_chan_recv(p->ch[0], &v) != 0 || v != i) {
			p->bad = 1;
			break;
		}
		v++;
		if (weft_chan_send(p->ch[1], &v) != 0) {
			p->bad = 1;
			break;
		}
	}
	return NULL;
}

/* --- the two tasks over pipes (the kernel baseline) --- */

static void pin_self(const struct pp *p)
{
	if (p->cpu >= 0 && bench_pin_thread(pthread_self(), p->cpu) != 0)
		fprintf(stderr, "pipe-bench: cannot pin to CPU %d\n", p->cpu);
}

static void *pipe_a(void *arg)
{
	struct pp *p = arg;
	int v;

	pin_self(p);
	for (int i = 0; i < p->loops; i++) {
		if (write(p->fd[0][1], &i, sizeof(i)) != sizeof(i) ||
		    read(p->fd[1][0], &v, sizeof(v)) != sizeof(v) || v != i + 1) {
			p->bad = 1;
			break;
		}
	}
	return NULL;
}

static void *pipe_b(void *arg)
{
	struct pp *p = arg;
	int v;

	pin_self(p);
	for (int i = 0; i < p->loops; i++) {
		if (read(p->fd[0][0], &v, sizeof(v)) != sizeof(v) || v != i) {
			p->bad = 1;
			break;
		}
		v++;
		if (write(p->fd[1][1], &v, sizeof(v)) != sizeof(v)) {
			p->bad = 1;
			break;
		}
	}
	return NULL;
}

/* --- one run --- */

static void spawn_weft(weft_thread_t *t, void *(*fn)(void *), void *arg, int worker)
{
	weft_attr_t attr = WEFT_ATTR_INITIALIZER;
	int err;

	attr.worker = worker;
	err = weft_spawn(t, fn, arg, &attr);
	if (err)
		die("weft_spawn", err);
}

/* Returns the elapsed ns of one run of impl. */
static uint64_t run_once(enum impl impl, struct pp *p)
{
	uint64_t t0, t1;
	int err;

	p->bad = 0;
	p->cpu = -1;
	t0 = bench_now_ns();
	if (impl <= IMPL_WEFT_FREE) {
		static const int wa[] = { 0, 0, -1 }, wb[] = { 0, 1, -1 };
		weft_thread_t a, b;

		spawn_weft(&b, chan_b, p, wb[impl]);
		spawn_weft(&a, chan_a, p, wa[impl]);
		if ((err = weft_join(a, NULL)) || (err = weft_join(b, NULL)))
			die("weft_join", err);
	} else {
		void *(*fa)(void *) = impl == IMPL_CHAN_PTHREAD ? chan_a : pipe_a;
		void *(*fb)(void *) = impl == IMPL_CHAN_PTHREAD ? chan_b : pipe_b;
		pthread_t a, b;

		if (impl == IMPL_PIPE_SAME)
			p->cpu = bench_cpu_nth(0);
		if ((err = pthread_create(&b, NULL, fb, p)) || (err = pthread_create(&a, NULL, fa, p)))
			die("pthread_create", err);
		pthread_join(a, NULL);
		pthread_join(b, NULL);
	}
	t1 = bench_now_ns();
	if (p->bad) {
		fprintf(stderr, "pipe-bench: %s: wrong value or failed call\n", impl_names[impl]);
		exit(1);
	}
	return t1 - t0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: pipe-bench [-l loops] [-r runs] [-c capacity] [-w workers] [-i impl]...\n"
		"  impl: weft-same weft-cross weft-free chan-pthread pipe pipe-same (default: all)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
	bool want[IMPL_COUNT] = { false };
	long loops = 1000000, cap = 0;
	int runs = 5, workers = 2, opt, err;
	struct pp p;

	while ((opt = getopt(argc, argv, "l:r:c:w:i:h")) != -1) {
		switch (opt) {
		case 'l':
			loops = atol(optarg);
			break;
		case 'r':
			runs = atoi(optarg);
			break;
		case 'c':
			cap = atol(optarg);
			break;
		case 'w':
			workers = atoi(optarg);
			break;
		case 'i':
			if (bench_want_impl(want, impl_names, IMPL_COUNT, optarg))
				usage();
			break;
		default:
			usage();
		}
	}
	if (loops <= 0 || runs <= 0 || runs > RUNS_MAX || cap < 0 || workers <= 0)
		usage();
	bench_want_default(want, IMPL_COUNT);
	if (workers < 2 && want[IMPL_WEFT_CROSS]) {
		fprintf(stderr, "pipe-bench: weft-cross needs 2 workers; skipped\n");
		want[IMPL_WEFT_CROSS] = false;
	}

	memset(&p, 0, sizeof(p));
	p.loops = loops;
	cfg.workers = workers;
	if ((err = weft_init(&cfg)))
		die("weft_init", err);
	for (int l = 0; l < 2; l++) {
		if ((err = weft_chan_create(&p.ch[l], sizeof(int), (size_t)cap)))
			die("weft_chan_create", err);
		if (pipe(p.fd[l]) != 0)
			die("pipe", errno);
	}

	for (int k = 0; k < IMPL_COUNT; k++) {
		double usec[RUNS_MAX];
		char params[96];

		if (!want[k])
			continue;
		for (int r = 0; r < runs; r++) {
			weft_stats_t s0, s1;
			uint64_t ns;

			weft_stats_get(&s0);
			ns = run_once(k, &p);
			weft_stats_get(&s1);
			usec[r] = ns / 1e3 / loops;
			printf("# Executed %ld pipe operations between two threads (%s)\n\n",
			       loops, impl_names[k]);
			printf("     Total time: %.3f [sec]\n\n", ns / 1e9);
			printf("%15f usecs/op\n", usec[r]);
			printf("%15.0f ops/sec\n", loops / (ns / 1e9));
			if (k <= IMPL_WEFT_FREE || k == IMPL_CHAN_PTHREAD)
				printf("  per loop: switches %.2f  local wakes %.2f  remote wakes %.2f"
				       "  kicks %.3f  worker parks %.3f  migrations %.3f\n",
				       (double)(s1.switches - s0.switches) / loops,
				       (double)(s1.wakes_local - s0.wakes_local) / loops,
				       (double)(s1.wakes_remote - s0.wakes_remote) / loops,
				       (double)(s1.kicks - s0.kicks) / loops,
				       (double)(s1.parks - s0.parks) / loops,
				       (double)(s1.migrations - s0.migrations) / loops);
			printf("\n");
		}
		snprintf(params, sizeof(params), "loops=%ld,runs=%d,cap=%ld,workers=%d", loops,
			 runs, cap, workers);
		bench_result(NULL, "pipe", impl_names[k], params, bench_median(usec, runs),
			     "usecs/op");
		fflush(stdout);
	}

	for (int l = 0; l < 2; l++) {
		weft_chan_destroy(p.ch[l]);
		close(p.fd[l][0]);
		close(p.fd[l][1]);
	}
	weft_shutdown();
	return 0;
}
