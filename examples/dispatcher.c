/*
 * examples/dispatcher.c - a dispatcher handing requests to many servers and
 * collecting their replies: the pgbench shape behind the kernel's
 * wake_wide() heuristic, in library form, with its pthread baseline in the
 * same binary.
 *
 *   dispatcher [--impl=weft|pthread] [-d DISPATCHERS] [-n SERVERS] [-q DEPTH]
 *              [-w WORK_NS] [-b BUF_BYTES] [-s SECONDS]
 *
 * Why this workload. In pgbench one client thread drives many connections,
 * each served by its own server process: the client wakes many distinct
 * wakees in turn (many "wakee flips"), and each server wakes only its
 * client. Pulling every wakee onto the waker's CPU (wake affine) piles the
 * servers up behind the dispatcher; spreading them (wake wide) lets them
 * run in parallel. Mike Galbraith's pgbench runs with the WAKE_WIDE_IDLE
 * variant gained 6.9% (server side) and 10.9% (clients too) in tps. This
 * program reproduces the shape so that a runtime's placement switches can
 * be compared: WEFT_FEATURES=NO_WAKE_WIDE where the build has the switch.
 *
 * The workload
 *   Servers are split round robin over the dispatchers (server s belongs to
 *   dispatcher s % D). A dispatcher keeps up to DEPTH requests in flight
 *   (default: all of its servers, one outstanding query per connection as
 *   in pgbench). It hands the next request to the idle server that has
 *   waited longest (FIFO), so with DEPTH below its server count it keeps
 *   waking different servers. A server waits for a request, does WORK_NS of
 *   calibrated busy work (and reads and writes every cache line of a private
 *   BUF_BYTES buffer, so running it on another CPU costs cache misses), and
 *   replies. The dispatcher waits for replies and takes all that have
 *   arrived at once (as pgbench's select() over its connections does).
 *
 * The synchronisation, identical in both implementations
 *   request: one counting semaphore per server (weft_sem_t / sem_t). The
 *     dispatcher knows which server gets the request, and a post wakes
 *     exactly that server: the wakee is chosen by the program, not by a
 *     shared queue's waiter order, so the wakee pattern is the one of
 *     pgbench (each connection has its own backend). A shared channel would
 *     let whichever server waited longest take the next request.
 *   reply: one queue per dispatcher, a ring of server numbers under a mutex
 *     and a condition variable (weft_mutex_t + weft_cond_t /
 *     pthread_mutex_t + pthread_cond_t): many servers wake one dispatcher.
 *     A server signals only when the dispatcher is waiting.
 *
 * Output
 *   A table (transactions/s; latency p50/p99 per request, from the
 *   dispatcher handing it out to the dispatcher taking the reply; for weft,
 *   the scheduler counters of the measured window: kicks per 1,000 wakes,
 *   remote wakes and steals per transaction, chained kicks if the build
 *   counts them) and one machine-readable line:
 *     bench=dispatcher impl=weft workers=2 dispatchers=1 servers=16 depth=16
 *     secs=5.00 tx=N tps=X p50_us=X p99_us=X
 *     kicks_per_kwake=X remote_per_tx=X steals_per_tx=X chain_per_kwake=X
 *     wakes=N wake_wide=on|off|- wake_affine=on|off|-
 *     param=workers=2,dispatchers=1,servers=16,depth=16,work_ns=5000,buf=0
 *     value=X unit=tx/s
 *   ("-": not measured, or the switch does not exist in this build).
 *   Exit status 3: WEFT_FEATURES names a switch this build does not have.
 *
 * Invariants
 *   I1  Every request gets exactly one reply: a dispatcher stops only when
 *       none of its requests is in flight, then tells its servers to quit.
 *   I2  Only replies taken before the dispatcher saw the stop flag count,
 *       and the counters are read at the same moment as the clock.
 */
#include "examples/wake_bench.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft.h>

/* ---------------------------------------------------------------------- */
/* options */

static bool use_weft = true;
static int n_disp = 1, n_serv = 16, depth = 0;
static uint64_t work_ns = 5000, buf_bytes = 0;
static double secs = 5.0;

/* ---------------------------------------------------------------------- */
/* calibrated busy work */

static double iters_per_ns;

/* n rounds of a 64-bit LCG the compiler cannot fold away. */
static uint64_t burn(uint64_t n, uint64_t x)
{
	for (uint64_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

/* Iterations per ns of burn(): the fastest of 5 tries (the machine is
 * shared; the fastest try is the least disturbed). */
static void calibrate(void)
{
	const uint64_t n = 2000000;
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 5; i++) {
		uint64_t t0 = bench_now_ns();

		burn(n, t0);
		t0 = bench_now_ns() - t0;
		if (t0 && t0 < best)
			best = t0;
	}
	iters_per_ns = (double)n / (double)(best ? best : 1);
}

/* ---------------------------------------------------------------------- */
/* latency histogram: values below 64 ns exact, above that 32 buckets per
 * power of two (at most ~3% error) */

enum { HIST_SUB = 32, HIST_N = 64 + 58 * HIST_SUB };

struct hist {
	uint64_t n[HIST_N];
	uint64_t total;
};

static int hist_idx(uint64_t v)
{
	int e;

	if (v < 64)
		return (int)v;
	e = 63 - __builtin_clzll(v); /* 6..63 */
	return 64 + (e - 6) * HIST_SUB + (int)((v >> (e - 5)) & (HIST_SUB - 1));
}

/* Lowest value of bucket i. */
static uint64_t hist_low(int i)
{
	int e, sub;

	if (i < 64)
		return (uint64_t)i;
	e = (i - 64) / HIST_SUB + 6;
	sub = (i - 64) % HIST_SUB;
	return ((uint64_t)(HIST_SUB + sub)) << (e - 5);
}

static void hist_add(struct hist *h, uint64_t v)
{
	h->n[hist_idx(v)]++;
	h->total++;
}

static void hist_merge(struct hist *into, const struct hist *h)
{
	for (int i = 0; i < HIST_N; i++)
		into->n[i] += h->n[i];
	into->total += h->total;
}

/* The p-quantile (0 < p <= 1) in ns: the low edge of its bucket. */
static uint64_t hist_quantile(const struct hist *h, double p)
{
	uint64_t want = (uint64_t)((double)h->total * p), seen = 0;

	if (want == 0)
		want = 1;
	for (int i = 0; i < HIST_N; i++) {
		seen += h->n[i];
		if (seen >= want)
			return hist_low(i);
	}
	return 0;
}

/* ---------------------------------------------------------------------- */
/* the two implementations' primitives, chosen by use_weft */

union sem {
	weft_sem_t w;
	sem_t p;
};

struct reply_lock {
	weft_mutex_t wm;
	weft_cond_t wc;
	pthread_mutex_t pm;
	pthread_cond_t pc;
};

static void sem_make(union sem *s)
{
	if (use_weft)
		weft_sem_init(&s->w, 0);
	else
		sem_init(&s->p, 0, 0);
}

static void sem_up(union sem *s)
{
	if (use_weft)
		weft_sem_post(&s->w);
	else
		sem_post(&s->p);
}

static void sem_down(union sem *s)
{
	if (use_weft) {
		weft_sem_wait(&s->w);
	} else {
		while (sem_wait(&s->p) != 0)
			; /* EINTR */
	}
}

static void sem_unmake(union sem *s)
{
	if (use_weft)
		weft_sem_destroy(&s->w);
	else
		sem_destroy(&s->p);
}

static void lock_make(struct reply_lock *l)
{
	if (use_weft) {
		weft_mutex_init(&l->wm);
		weft_cond_init(&l->wc);
	} else {
		pthread_mutex_init(&l->pm, NULL);
		pthread_cond_init(&l->pc, NULL);
	}
}

static void lock_unmake(struct reply_lock *l)
{
	if (use_weft) {
		weft_cond_destroy(&l->wc);
		weft_mutex_destroy(&l->wm);
	} else {
		pthread_cond_destroy(&l->pc);
		pthread_mutex_destroy(&l->pm);
	}
}

static void lock_take(struct reply_lock *l)
{
	if (use_weft)
		weft_mutex_lock(&l->wm);
	else
		pthread_mutex_lock(&l->pm);
}

static void lock_drop(struct reply_lock *l)
{
	if (use_weft)
		weft_mutex_unlock(&l->wm);
	else
		pthread_mutex_unlock(&l->pm);
}

static void lock_wait(struct reply_lock *l)
{
	if (use_weft)
		weft_cond_wait(&l->wc, &l->wm);
	else
		pthread_cond_wait(&l->pc, &l->pm);
}

static void lock_signal(struct reply_lock *l)
{
	if (use_weft)
		weft_cond_signal(&l->wc);
	else
		pthread_cond_signal(&l->pc);
}

/* ---------------------------------------------------------------------- */
/* servers and dispatchers */

struct dispatcher;

struct server {
	union sem req;          /* request doorbell, posted by the dispatcher */
	_Atomic int quit;       /* set (release) before the last post */
	struct dispatcher *d;
	int local;              /* index among d's servers */
	unsigned char *buf;     /* private, buf_bytes */
	uint64_t sink;          /* keeps the busy work live */
	weft_thread_t wt;
	pthread_t pt;
} __attribute__((aligned(64)));

struct dispatcher {
	/* reply queue: ring of local server indices, under lk */
	struct reply_lock lk;
	int *ring;
	unsigned head, tail;    /* tail - head = replies waiting */
	bool waiting;           /* the dispatcher sleeps on lk's cond */

	/* owned by the dispatcher thread */
	int nserv;
	struct server **serv;
	uint64_t *t_issue;      /* per local server: when its request went out */
	int *idle;              /* FIFO of idle local servers, nserv slots */
	unsigned idle_head, idle_tail;
	int depth;
	struct hist hist;
	uint64_t tx;
	weft_thread_t wt;
	pthread_t pt;
} __attribute__((aligned(64)));

static struct server *servers;
static struct dispatcher *disps;
static union sem start_gate;
/* Set by main at the end of the window; read by the dispatchers.
 * release/acquire: nothing is published through it, but it keeps the
 * reading simple. */
static _Atomic int stop_flag;

static void touch(struct server *s)
{
	for (uint64_t i = 0; i < buf_bytes; i += 64)
		s->buf[i] = (unsigned char)(s->buf[i] + 1);
}

static void *server_main(void *arg)
{
	struct server *s = arg;
	struct dispatcher *d = s->d;
	uint64_t iters = (uint64_t)((double)work_ns * iters_per_ns);

	for (;;) {
		sem_down(&s->req);
		/* acquire: pairs with the dispatcher's release store before
		 * its final post (I1: no request is in flight then) */
		if (atomic_load_explicit(&s->quit, memory_order_acquire))
			break;
		s->sink = burn(iters, s->sink);
		touch(s);

		lock_take(&d->lk);
		d->ring[d->tail % (unsigned)d->nserv] = s->local;
		d->tail++;
		if (d->waiting)
			lock_signal(&d->lk);
		lock_drop(&d->lk);
	}
	return NULL;
}

static void issue(struct dispatcher *d, int *inflight)
{
	while (*inflight < d->depth && d->idle_head != d->idle_tail) {
		int s = d->idle[d->idle_head++ % (unsigned)d->nserv];

		d->t_issue[s] = bench_now_ns();
		sem_up(&d->serv[s]->req);
		(*inflight)++;
	}
}

static void *dispatcher_main(void *arg)
{
	struct dispatcher *d = arg;
	int inflight = 0, got[1024];
	bool stopping = false;

	sem_down(&start_gate);
	for (;;) {
		unsigned n = 0;
		uint64_t now;

		if (!stopping)
			issue(d, &inflight);
		if (inflight == 0)
			break;
		lock_take(&d->lk);
		while (d->head == d->tail) {
			d->waiting = true;
			lock_wait(&d->lk);
			d->waiting = false;
		}
		while (d->head != d->tail && n < sizeof(got) / sizeof(got[0]))
			got[n++] = d->ring[d->head++ % (unsigned)d->nserv];
		lock_drop(&d->lk);

		now = bench_now_ns();
		for (unsigned i = 0; i < n; i++) {
			int s = got[i];

			if (!stopping) {
				hist_add(&d->hist, now - d->t_issue[s]);
				d->tx++;
			}
			d->idle[d->idle_tail++ % (unsigned)d->nserv] = s;
			inflight--;
		}
		/* I2: what was taken before this load counted */
		stopping = atomic_load_explicit(&stop_flag, memory_order_acquire);
	}
	for (int i = 0; i < d->nserv; i++) {
		/* release: pairs with the server's acquire load after the post */
		atomic_store_explicit(&d->serv[i]->quit, 1, memory_order_release);
		sem_up(&d->serv[i]->req);
	}
	return NULL;
}

/* ---------------------------------------------------------------------- */
/* setup, run, report */

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "dispatcher: out of memory\n");
		exit(1);
	}
	return p;
}

static void spawn(weft_thread_t *wt, pthread_t *pt, void *(*fn)(void *), void *arg)
{
	int rc = use_weft ? weft_spawn(wt, fn, arg, NULL) : pthread_create(pt, NULL, fn, arg);

	if (rc) {
		fprintf(stderr, "dispatcher: spawn: %s\n", strerror(rc));
		exit(1);
	}
}

static void join(weft_thread_t wt, pthread_t pt)
{
	if (use_weft)
		weft_join(wt, NULL);
	else
		pthread_join(pt, NULL);
}

static void setup(void)
{
	servers = aligned_alloc(64, sizeof(*servers) * (size_t)n_serv);
	disps = aligned_alloc(64, sizeof(*disps) * (size_t)n_disp);
	if (!servers || !disps) {
		fprintf(stderr, "dispatcher: out of memory\n");
		exit(1);
	}
	memset(servers, 0, sizeof(*servers) * (size_t)n_serv);
	memset(disps, 0, sizeof(*disps) * (size_t)n_disp);
	sem_make(&start_gate);
	for (int k = 0; k < n_disp; k++) {
		struct dispatcher *d = &disps[k];

		d->nserv = n_serv / n_disp + (k < n_serv % n_disp);
		d->serv = xcalloc((size_t)d->nserv, sizeof(*d->serv));
		d->ring = xcalloc((size_t)d->nserv, sizeof(*d->ring));
		d->idle = xcalloc((size_t)d->nserv, sizeof(*d->idle));
		d->t_issue = xcalloc((size_t)d->nserv, sizeof(*d->t_issue));
		d->depth = depth > 0 && depth < d->nserv ? depth : d->nserv;
		lock_make(&d->lk);
	}
	for (int s = 0; s < n_serv; s++) {
		struct server *sv = &servers[s];
		struct dispatcher *d = &disps[s % n_disp];

		sv->d = d;
		sv->local = s / n_disp;
		d->serv[sv->local] = sv;
		d->idle[d->idle_tail++] = sv->local;
		sv->buf = buf_bytes ? xcalloc(1, (size_t)buf_bytes) : NULL;
		sem_make(&sv->req);
	}
}

static void teardown(void)
{
	for (int s = 0; s < n_serv; s++) {
		sem_unmake(&servers[s].req);
		free(servers[s].buf);
	}
	for (int k = 0; k < n_disp; k++) {
		lock_unmake(&disps[k].lk);
		free(disps[k].serv);
		free(disps[k].ring);
		free(disps[k].idle);
		free(disps[k].t_issue);
	}
	sem_unmake(&start_gate);
	free(servers);
	free(disps);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: dispatcher [--impl=weft|pthread] [-d DISPATCHERS] [-n SERVERS] [-q DEPTH]\n"
		"                  [-w WORK_NS] [-b BUF_BYTES] [-s SECONDS]\n"
		"  --impl  weft (light threads, weft_sem/mutex/cond; default) or pthread\n"
		"          (OS threads, sem_t/pthread mutex/cond): the same program\n"
		"  -d N    dispatcher threads (default 1)\n"
		"  -n N    server threads, split round robin over the dispatchers (default 16)\n"
		"  -q N    requests in flight per dispatcher (default: all its servers)\n"
		"  -w NS   busy work per request in ns, calibrated at start (default 5000)\n"
		"  -b B    bytes of a private per-server buffer touched per request (default 0)\n"
		"  -s S    seconds to measure, fractions allowed (default 5)\n"
		"Workers: WEFT_WORKERS; placement switches: WEFT_FEATURES (e.g. NO_WAKE_WIDE).\n");
}

static bool parse_u64(const char *s, uint64_t *v, uint64_t max)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || end == s || *end || x > max || *s == '-')
		return false;
	*v = x;
	return true;
}

static int parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t x;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(a, "--impl=weft")) {
			use_weft = true;
		} else if (!strcmp(a, "--impl=pthread")) {
			use_weft = false;
		} else if (a[0] == '-' && a[1] && strchr("dnqwbs", a[1]) && !a[2] && v) {
			i++;
			if (a[1] == 's') {
				char *end;

				secs = strtod(v, &end);
				if (end == v || *end || !(secs > 0.0) || secs > 3600.0)
					return -1;
				continue;
			}
			if (!parse_u64(v, &x, a[1] == 'w' ? 1000000000u : a[1] == 'b' ? 1u << 30 : 65536))
				return -1;
			switch (a[1]) {
			case 'd': n_disp = (int)x; break;
			case 'n': n_serv = (int)x; break;
			case 'q': depth = (int)x; break;
			case 'w': work_ns = x; break;
			case 'b': buf_bytes = x; break;
			}
		} else {
			return -1;
		}
	}
	if (n_disp < 1 || n_serv < n_disp)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct wake_bench_stats s0, s1, ds;
	struct hist all;
	uint64_t t0, t1, tx = 0;
	double el, tps;
	int depth_shown;

	if (parse_args(argc, argv)) {
		fprintf(stderr, "dispatcher: bad arguments (need DISPATCHERS >= 1, "
				"SERVERS >= DISPATCHERS, numbers in range)\n");
		usage(stderr);
		return 2;
	}
	calibrate();
	if (use_weft)
		wake_bench_start("dispatcher");
	setup();
	depth_shown = disps[0].depth;
	for (int s = 0; s < n_serv; s++)
		spawn(&servers[s].wt, &servers[s].pt, server_main, &servers[s]);
	for (int k = 0; k < n_disp; k++)
		spawn(&disps[k].wt, &disps[k].pt, dispatcher_main, &disps[k]);

	wake_bench_snap(&s0);
	t0 = bench_now_ns();
	for (int k = 0; k < n_disp; k++)
		sem_up(&start_gate);
	{
		struct timespec ts = { (time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9) };

		while (nanosleep(&ts, &ts) != 0)
			; /* EINTR: sleep the rest */
	}
	/* release: see stop_flag */
	atomic_store_explicit(&stop_flag, 1, memory_order_release);
	t1 = bench_now_ns();
	wake_bench_snap(&s1);
	wake_bench_delta(&ds, &s0, &s1);

	for (int k = 0; k < n_disp; k++)
		join(disps[k].wt, disps[k].pt);
	for (int s = 0; s < n_serv; s++)
		join(servers[s].wt, servers[s].pt);

	memset(&all, 0, sizeof(all));
	for (int k = 0; k < n_disp; k++) {
		hist_merge(&all, &disps[k].hist);
		tx += disps[k].tx;
	}
	el = (double)(t1 - t0) / 1e9;
	tps = (double)tx / el;

	printf("dispatcher: %s, %d workers, %d dispatcher(s), %d servers, depth %d, "
	       "work %llu ns, buffer %llu B, %.2f s\n",
	       use_weft ? "weft" : "pthread", use_weft ? weft_workers() : bench_cpu_count(), n_disp,
	       n_serv, depth_shown, (unsigned long long)work_ns, (unsigned long long)buf_bytes, el);
	printf("  transactions         %llu\n", (unsigned long long)tx);
	printf("  transactions/s       %.0f\n", tps);
	printf("  latency p50 / p99    %.1f / %.1f us\n", (double)hist_quantile(&all, 0.50) / 1e3,
	       (double)hist_quantile(&all, 0.99) / 1e3);
	wake_bench_table(stdout, &ds, use_weft, (double)tx, "tx");

	/* work and buffer size are in param= below: a key like work_ns=
	 * here would be collected as a metric (bench-report.sh collect) */
	printf("bench=dispatcher impl=%s workers=%d dispatchers=%d servers=%d depth=%d "
	       "secs=%.3f tx=%llu tps=%.1f p50_us=%.2f p99_us=%.2f",
	       use_weft ? "weft" : "pthread", use_weft ? weft_workers() : bench_cpu_count(), n_disp,
	       n_serv, depth_shown, el,
	       (unsigned long long)tx, tps, (double)hist_quantile(&all, 0.50) / 1e3,
	       (double)hist_quantile(&all, 0.99) / 1e3);
	wake_bench_keys(stdout, &ds, use_weft, (double)tx, "tx");
	printf(" wake_wide=%s wake_affine=%s", use_weft ? wake_bench_feature("WAKE_WIDE") : "-",
	       use_weft ? wake_bench_feature("WAKE_AFFINE") : "-");
	/* the generic keys (bench.h), which make bench collects */
	printf(" param=workers=%d,dispatchers=%d,servers=%d,depth=%d,work_ns=%llu,buf=%llu "
	       "value=%.1f unit=tx/s\n", use_weft ? weft_workers() : bench_cpu_count(), n_disp,
	       n_serv, depth_shown, (unsigned long long)work_ns, (unsigned long long)buf_bytes, tps);
	fflush(stdout);

	teardown();
	if (use_weft)
		weft_shutdown();
	return tx > 0 ? 0 : 1;
}
