/*
 * examples/pipeline.c - Ed Tomlinson's Java stage pipeline (seed 003) in
 * library form, with a pthread baseline in the same binary (docs/seeds.md, "pipeline").
 *
 * What it owns
 *   K stages, each a thread, connected by K-1 bounded queues. Stage 0
 *   produces N items (ints 0..N-1), every middle stage takes an item, does W
 *   units of work on it and passes it on, the last stage checks the order.
 *   Normally only one stage is runnable at a time: a chain of producer ->
 *   consumer hand-offs, the sleep/wakeup convoy of the seed, where the cost
 *   is all in wakeups and switches. Written from the seed's description
 *   (the original's source was not available).
 *
 *   Implementations (-i, repeatable; default all):
 *     weft          light threads, weft channels of capacity C, unpinned.
 *     weft-up       the same with every stage pinned to worker 0: the seed's
 *                   uniprocessor, where "wake the best waiter" is exact.
 *     chan-pthread  pthreads over the same weft channels (OS-thread waiters).
 *     pthread       pthreads, each queue a mutex + two condition variables
 *                   (what the Java support classes did with synchronized,
 *                   wait and notify): the kernel baseline.
 *
 *   Output, per implementation and run, in the seed's `java bench` form
 *   (setup = creating queues and threads, run = first item to last, total =
 *   setup + run, all in ms), then the context switches per second:
 *
 *     speed1 weft
 *     timer_3 0
 *     timer_3 812 812 RC=0
 *       context switches 2.46e+07/s (weft switches), items 1000000, stages 8
 *
 *   and one machine-readable line per implementation with the median:
 *     bench=pipeline impl=weft param=stages=8,items=1000000,cap=1,work=0 value=812 unit=ms
 *
 *   Options: -s stages (default 8, at least 2), -n items (default 1000000),
 *   -c capacity of each queue (default 1), -w work units per item per stage
 *   (default 0), -r runs (default 5), -W workers (default 2).
 *
 * Invariants
 *   I1  The last stage sees 0, 1, 2, ... N-1 (every queue is FIFO and has one
 *       producer), else the run fails (RC=1) instead of being timed.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft.h>
#include <weft/chan.h>

#include "examples/bench.h"

#define STAGES_MAX 256
#define RUNS_MAX 101

enum impl { IMPL_WEFT, IMPL_WEFT_UP, IMPL_CHAN_PTHREAD, IMPL_PTHREAD, IMPL_COUNT };

static const char *const impl_names[IMPL_COUNT] = {
	"weft", "weft-up", "chan-pthread", "pthread",
};

/* The pthread baseline's bounded queue. */
struct cq {
	pthread_mutex_t lock;
	pthread_cond_t not_empty, not_full;
	size_t head, count, cap;
	int *buf;
};

struct pipe_cfg {
	int stages;
	long items;
	size_t cap;
	int work;
	bool use_cq;
	weft_chan_t *ch[STAGES_MAX];
	struct cq cq[STAGES_MAX];
	volatile int bad;                 /* I1 violated or a call failed */
	volatile unsigned sink;           /* keeps the work from being optimised out */
};

struct stage {
	struct pipe_cfg *p;
	int idx;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "pipeline: %s: %s\n", what, strerror(err));
	exit(1);
}

/* --- pthread baseline queue --- */

static void cq_init(struct cq *q, size_t cap)
{
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->not_empty, NULL);
	pthread_cond_init(&q->not_full, NULL);
	q->head = q->count = 0;
	q->cap = cap ? cap : 1;   /* a condvar queue cannot be a rendezvous */
	q->buf = malloc(q->cap * sizeof(int));
	if (!q->buf)
		die("malloc", ENOMEM);
}

static void cq_fini(struct cq *q)
{
	free(q->buf);
	pthread_cond_destroy(&q->not_full);
	pthread_cond_destroy(&q->not_empty);
	pthread_mutex_destroy(&q->lock);
}

static void cq_put(struct cq *q, int v)
{
	pthread_mutex_lock(&q->lock);
	while (q->count == q->cap)
		pthread_cond_wait(&q->not_full, &q->lock);
	q->buf[(q->head + q->count) % q->cap] = v;
	q->count++;
	pthread_cond_signal(&q->not_empty);
	pthread_mutex_unlock(&q->lock);
}

static int cq_get(struct cq *q)
{
	int v;

	pthread_mutex_lock(&q->lock);
	while (q->count == 0)
		pthread_cond_wait(&q->not_empty, &q->lock);
	v = q->buf[q->head];
	q->head = (q->head + 1) % q->cap;
	q->count--;
	pthread_cond_signal(&q->not_full);
	pthread_mutex_unlock(&q->lock);
	return v;
}

/* --- a stage --- */

static int get(struct pipe_cfg *p, int q, int *v)
{
	if (p->use_cq) {
		*v = cq_get(&p->cq[q]);
		return 0;
	}
	return weft_chan_recv(p->ch[q], v);
}

static int put(struct pipe_cfg *p, int q, int v)
{
	if (p->use_cq) {
		cq_put(&p->cq[q], v);
		return 0;
	}
	return weft_chan_send(p->ch[q], &v);
}

static unsigned work(int v, int units)
{
	unsigned h = (unsigned)v;

	for (int i = 0; i < units; i++)
		h = h * 2654435761u + 0x9e3779b9u;
	return h;
}

static void *stage_main(void *arg)
{
	struct stage *s = arg;
	struct pipe_cfg *p = s->p;
	unsigned acc = 0;
	int v;

	for (long i = 0; i < p->items; i++) {
		if (s->idx == 0) {
			v = (int)i;
		} else if (get(p, s->idx - 1, &v) != 0) {
			p->bad = 1;
			return NULL;
		}
		if (s->idx == p->stages - 1) {
			if (v != (int)i)
				p->bad = 1;   /* I1 */
			continue;
		}
		if (s->idx > 0)
			acc += work(v, p->work);
		if (put(p, s->idx, v) != 0) {
			p->bad = 1;
			return NULL;
		}
	}
	p->sink += acc;
	return NULL;
}

/* --- one run --- */

/* Runs impl once; *setup_ns and *run_ns get the two phases; returns the
 * context switches of the run (weft switches or getrusage's). */
static double run_once(enum impl impl, struct pipe_cfg *p, uint64_t *setup_ns,
		       uint64_t *run_ns)
{
	struct stage st[STAGES_MAX];
	weft_thread_t wt[STAGES_MAX];
	pthread_t pt[STAGES_MAX];
	bench_rusage_t r0, r1, rd;
	weft_stats_t s0, s1;
	uint64_t t0, t1, t2;
	bool weft = impl == IMPL_WEFT || impl == IMPL_WEFT_UP;
	int err;

	p->bad = 0;
	p->use_cq = impl == IMPL_PTHREAD;
	weft_stats_get(&s0);
	bench_rusage_get(&r0);
	t0 = bench_now_ns();
	for (int q = 0; q < p->stages - 1; q++) {
		if (p->use_cq)
			cq_init(&p->cq[q], p->cap);
		else if ((err = weft_chan_create(&p->ch[q], sizeof(int), p->cap)))
			die("weft_chan_create", err);
	}
	/* consumers first, so that every stage is waiting when items arrive */
	for (int i = p->stages - 1; i >= 0; i--) {
		st[i] = (struct stage){ p, i };
		if (weft) {
			weft_attr_t attr = WEFT_ATTR_INITIALIZER;

			attr.worker = impl == IMPL_WEFT_UP ? 0 : -1;
			attr.stack_size = 64 * 1024;
			if ((err = weft_spawn(&wt[i], stage_main, &st[i], &attr)))
				die("weft_spawn", err);
		} else if ((err = pthread_create(&pt[i], NULL, stage_main, &st[i]))) {
			die("pthread_create", err);
		}
	}
	t1 = bench_now_ns();
	for (int i = 0; i < p->stages; i++) {
		if (weft)
			weft_join(wt[i], NULL);
		else
			pthread_join(pt[i], NULL);
	}
	t2 = bench_now_ns();
	bench_rusage_get(&r1);
	weft_stats_get(&s1);
	for (int q = 0; q < p->stages - 1; q++) {
		if (p->use_cq)
			cq_fini(&p->cq[q]);
		else
			weft_chan_destroy(p->ch[q]);
	}
	*setup_ns = t1 - t0;
	*run_ns = t2 - t1;
	if (weft)
		return (double)(s1.switches - s0.switches);
	bench_rusage_delta(&rd, &r0, &r1);
	return (double)(rd.nvcsw + rd.nivcsw);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: pipeline [-s stages] [-n items] [-c capacity] [-w work] [-r runs]\n"
		"                [-W workers] [-i impl]...\n"
		"  impl: weft weft-up chan-pthread pthread (default: all)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
	bool want[IMPL_COUNT] = { false };
	struct pipe_cfg *p = calloc(1, sizeof(*p));
	int runs = 5, workers = 2, opt, err;
	long cap = 1;

	if (!p)
		die("calloc", ENOMEM);
	p->stages = 8;
	p->items = 1000000;
	while ((opt = getopt(argc, argv, "s:n:c:w:r:W:i:h")) != -1) {
		switch (opt) {
		case 's':
			p->stages = atoi(optarg);
			break;
		case 'n':
			p->items = atol(optarg);
			break;
		case 'c':
			cap = atol(optarg);
			break;
		case 'w':
			p->work = atoi(optarg);
			break;
		case 'r':
			runs = atoi(optarg);
			break;
		case 'W':
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
	if (p->stages < 2 || p->stages > STAGES_MAX || p->items <= 0 || cap < 0 ||
	    p->work < 0 || runs <= 0 || runs > RUNS_MAX || workers <= 0)
		usage();
	p->cap = (size_t)cap;
	bench_want_default(want, IMPL_COUNT);
	cfg.workers = workers;
	if ((err = weft_init(&cfg)))
		die("weft_init", err);

	for (int k = 0; k < IMPL_COUNT; k++) {
		double ms[RUNS_MAX];
		char params[128];

		if (!want[k])
			continue;
		for (int r = 0; r < runs; r++) {
			uint64_t setup, run;
			double cs = run_once(k, p, &setup, &run);

			ms[r] = run / 1e6;
			printf("speed%d %s\n", r + 1, impl_names[k]);
			printf("timer_3 %.0f\n", setup / 1e6);
			printf("timer_3 %.0f %.0f RC=%d\n", run / 1e6, (setup + run) / 1e6,
			       p->bad ? 1 : 0);
			printf("  context switches %.3g/s (%s), items %ld, stages %d\n",
			       cs / (run / 1e9), k <= IMPL_WEFT_UP ? "weft switches" : "getrusage",
			       p->items, p->stages);
			if (p->bad) {
				fprintf(stderr, "pipeline: %s: items out of order or a failed call\n",
					impl_names[k]);
				return 1;
			}
		}
		snprintf(params, sizeof(params), "stages=%d,items=%ld,cap=%zu,work=%d,workers=%d",
			 p->stages, p->items, p->cap, p->work, workers);
		bench_result(NULL, "pipeline", impl_names[k], params, bench_median(ms, runs), "ms");
		fflush(stdout);
	}
	weft_shutdown();
	free(p);
	return 0;
}
