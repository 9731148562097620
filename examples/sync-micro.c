/*
 * examples/sync-micro.c - micro benchmarks of the sync primitives' fast
 * paths and cross-worker wakeups (issue targets of the sync work), each
 * with its baseline in the same binary and the same run.
 *
 *   sync-micro [--bench=NAME[,NAME...]] [--runs=N] [--samples=DIR]
 *
 * Benchmarks (each prints one line per impl, the median of --runs runs):
 *   mutex_uncontended  lock + unlock of a free mutex in a loop, one thread;
 *                      ns per pair. impl=weft (weft_mutex_t in a weft thread),
 *                      weft-os (the same from a plain OS thread), cas_store (a
 *                      bare compare-and-swap to take an int and a release store
 *                      to give it back: the floor of any lock), pthread (glibc's
 *                      default pthread_mutex_t).
 *   mutex_handoff      two threads on two workers (two CPUs) alternate: the
 *                      holder takes the mutex, waits until the peer has called
 *                      lock (and ~2 us more, so that it spins or parks), reads
 *                      the clock and unlocks; the peer notes when its lock
 *                      returned. ns from unlock to the peer's acquisition (mean).
 *                      Both workers are busy (each also runs a thread that keeps
 *                      yielding; pthread: a sched_yield loop pinned to each CPU),
 *                      so a wake needs no kick.
 *   sem_wake           a token handed back and forth between two workers through
 *                      two semaphores (weft_sem_t; pthread: sem_t), both workers
 *                      busy as above; ns per wake (half a round trip).
 *
 * Output lines: bench=NAME impl=IMPL param=K=V,... value=X unit=U
 *
 * --samples=DIR: after the runs above, one more run of mutex_handoff and
 * sem_wake per impl records every wake's latency and writes it to
 * DIR/NAME-IMPL.txt, one value in ns per line (for a latency CDF): for
 * mutex_handoff the unlock -> peer acquisition time of each turn, for
 * sem_wake the time from a post to the waiter running after its wait
 * (samples_sem_wake: both directions of each round). It also prints
 *   bench=NAME_p50 / NAME_p99 / NAME_max impl=IMPL ... unit=ns
 * from those samples. Without --samples nothing changes.
 */
#include "examples/bench_weft.h"

#include <semaphore.h>

static int runs = 5;

static double run_median(double (*one)(void *), void *arg)
{
	double v[64];
	int n = runs < 64 ? runs : 64;

	for (int i = 0; i < n; i++)
		v[i] = one(arg);
	return bench_median(v, (size_t)n);
}

/* ---------------------------------------------------------------------- */
/* mutex_uncontended */

enum { UNC_N = 20000000 };

static weft_mutex_t unc_m = WEFT_MUTEX_INITIALIZER;

static double unc_weft_loop(void)
{
	uint64_t t0 = bench_now_ns();

	for (int i = 0; i < UNC_N; i++) {
		weft_mutex_lock(&unc_m);
		weft_mutex_unlock(&unc_m);
	}
	return (double)(bench_now_ns() - t0) / UNC_N;
}

static void *unc_weft_thread(void *arg)
{
	(void)arg;
	return bench_dret(unc_weft_loop());
}

static double unc_weft(void *arg)
{
	(void)arg;
	return bench_in_weft(unc_weft_thread, NULL);
}

static double unc_weft_os(void *arg)
{
	(void)arg;
	return unc_weft_loop();
}

static _Atomic int unc_word;

static double unc_cas_store(void *arg)
{
	uint64_t t0 = bench_now_ns();

	(void)arg;
	for (int i = 0; i < UNC_N; i++) {
		int z = 0;

		/* acquire: a lock's acquisition; the loop never fails it */
		while (!atomic_compare_exchange_weak_explicit(&unc_word, &z, 1,
				memory_order_acquire, memory_order_relaxed))
			z = 0;
		/* release: a lock's release */
		atomic_store_explicit(&unc_word, 0, memory_order_release);
	}
	return (double)(bench_now_ns() - t0) / UNC_N;
}

static pthread_mutex_t unc_pm = PTHREAD_MUTEX_INITIALIZER;

static double unc_pthread(void *arg)
{
	uint64_t t0 = bench_now_ns();

	(void)arg;
	for (int i = 0; i < UNC_N; i++) {
		pthread_mutex_lock(&unc_pm);
		pthread_mutex_unlock(&unc_pm);
	}
	return (double)(bench_now_ns() - t0) / UNC_N;
}

/* ---------------------------------------------------------------------- */
/* mutex_handoff and sem_wake: two parties on two workers (two CPUs), both
 * busy */

enum { HO_TURNS = 20000, SW_ROUNDS = 200000 };

struct pair {
	/* mutex_handoff */
	weft_mutex_t m;
	pthread_mutex_t pm;
	_Atomic int stage;        /* see HO_BODY */
	_Atomic uint64_t t_unlock;
	uint64_t lat_ns;          /* sum of unlock -> acquisition, written by the waiter
	                           * of each turn (turns are sequential) */
	uint64_t *samples;        /* --samples: one latency per turn or wake, else NULL */
	uint64_t t_post[2];       /* samples_sem_wake: when party k posted; read by the
	                           * peer after its wait (the semaphore orders them) */
	/* sem_wake */
	weft_sem_t s[2];
	sem_t ps[2];
};

struct party {
	struct pair *p;
	int me;
};

/* mutex_handoff: i even -> party 0 holds, party 1 waits; odd: reverse.
 * stage: 0 idle, 1 holder has the lock, 2 waiter is calling lock, 3 the
 * waiter got it. */
static void ho_spin_ns(uint64_t ns)
{
	uint64_t end = bench_now_ns() + ns;

	while (bench_now_ns() < end)
		;
}

#define HO_BODY(LOCK, UNLOCK, M, N)                                                   \
	for (int i = 0; i < (N); i++) {                                               \
		if ((i & 1) == a->me) {                                               \
			LOCK(M);                                                      \
			atomic_store_explicit(&p->stage, 1, memory_order_release);    \
			while (atomic_load_explicit(&p->stage, memory_order_acquire) != 2) \
				;                                                     \
			ho_spin_ns(2000);                                             \
			atomic_store_explicit(&p->t_unlock, bench_now_ns(), memory_order_relaxed); \
			UNLOCK(M);                                                    \
			while (atomic_load_explicit(&p->stage, memory_order_acquire) != 3) \
				;                                                     \
			atomic_store_explicit(&p->stage, 0, memory_order_release);    \
		} else {                                                              \
			while (atomic_load_explicit(&p->stage, memory_order_acquire) != 1) \
				;                                                     \
			atomic_store_explicit(&p->stage, 2, memory_order_release);    \
			LOCK(M);                                                      \
			uint64_t lat_ = bench_now_ns() -                              \
				atomic_load_explicit(&p->t_unlock, memory_order_relaxed);     \
			p->lat_ns += lat_;                                            \
			if (p->samples)                                               \
				p->samples[i] = lat_;                                 \
			UNLOCK(M);                                                    \
			atomic_store_explicit(&p->stage, 3, memory_order_release);    \
			while (atomic_load_explicit(&p->stage, memory_order_acquire) != 0) \
				;                                                     \
		}                                                                     \
	}

static void *weft_ho_party(void *arg)
{
	struct party *a = arg;
	struct pair *p = a->p;

	HO_BODY(weft_mutex_lock, weft_mutex_unlock, &p->m, HO_TURNS)
	return NULL;
}

static void *pthread_ho_party(void *arg)
{
	struct party *a = arg;
	struct pair *p = a->p;

	HO_BODY(pthread_mutex_lock, pthread_mutex_unlock, &p->pm, HO_TURNS)
	return NULL;
}

/* samples_sem_wake: the sem_wake ping-pong with each wake timed from the
 * post to the waiter's return from its wait; samples[2i + k] is party k's
 * wake of round i. */
enum { SW_SAMPLE_ROUNDS = 10000 };

#define SW_SAMPLE_BODY(POST, WAIT, sems)                                              \
	for (int i = 0; i < SW_SAMPLE_ROUNDS; i++) {                                  \
		if (a->me == 0) {                                                     \
			p->t_post[0] = bench_now_ns();                                \
			POST(&(sems)[1]);                                             \
			WAIT(&(sems)[0]);                                             \
			p->samples[2 * i] = bench_now_ns() - p->t_post[1];            \
		} else {                                                              \
			WAIT(&(sems)[1]);                                             \
			p->samples[2 * i + 1] = bench_now_ns() - p->t_post[0];        \
			p->t_post[1] = bench_now_ns();                                \
			POST(&(sems)[0]);                                             \
		}                                                                     \
	}

static void *weft_sws_party(void *arg)
{
	struct party *a = arg;
	struct pair *p = a->p;

	SW_SAMPLE_BODY(weft_sem_post, weft_sem_wait, p->s)
	return NULL;
}

static void *pthread_sws_party(void *arg)
{
	struct party *a = arg;
	struct pair *p = a->p;

	SW_SAMPLE_BODY(sem_post, sem_wait, p->ps)
	return NULL;
}

static void *weft_sw_party(void *arg)
{
	struct party *a = arg;
	struct pair *p = a->p;

	BENCH_SEM_PINGPONG(a->me, SW_ROUNDS, weft_sem_post, weft_sem_wait, p->s)
	return NULL;
}

static void *pthread_sw_party(void *arg)
{
	struct party *a = arg;
	struct pair *p = a->p;

	BENCH_SEM_PINGPONG(a->me, SW_ROUNDS / 4, sem_post, sem_wait, p->ps)
	return NULL;
}

/* The weft form: a party and a busy yielder pinned to each of workers 0
 * and 1; returns ns per turn (fn = weft_ho_party) or per wake. */
struct weft_pair_arg {
	void *(*fn)(void *);
	double per;               /* events per run; 0: return the mean hand-off latency */
	uint64_t *samples;        /* NULL, or room for one latency per turn or wake */
};

static void *weft_pair_run(void *arg)
{
	struct weft_pair_arg *pa = arg;
	struct pair p;
	struct party a[2];
	struct bench_busy busy;
	weft_thread_t t[2];
	uint64_t t0;

	memset(&p, 0, sizeof(p));
	p.samples = pa->samples;
	weft_mutex_init(&p.m);
	weft_sem_init(&p.s[0], 0);
	weft_sem_init(&p.s[1], 0);
	bench_busy_start(&busy, true);
	t0 = bench_now_ns();
	for (int i = 0; i < 2; i++) {
		a[i] = (struct party){ &p, i };
		bench_spawn_on(&t[i], pa->fn, &a[i], i);
	}
	weft_join(t[0], NULL);
	weft_join(t[1], NULL);
	t0 = bench_now_ns() - t0;
	bench_busy_stop(&busy);
	weft_mutex_destroy(&p.m);
	weft_sem_destroy(&p.s[0]);
	weft_sem_destroy(&p.s[1]);
	return bench_dret(pa->per ? (double)t0 / pa->per : (double)p.lat_ns / HO_TURNS);
}

static double weft_pair(void *arg)
{
	return bench_in_weft(weft_pair_run, arg);
}

struct pthread_pair_arg {
	void *(*fn)(void *);
	double per;
	uint64_t *samples;
};

static double pthread_pair(void *arg)
{
	struct pthread_pair_arg *pa = arg;
	struct pair p;
	struct party a[2];
	struct bench_busy busy;
	pthread_t t[2];
	uint64_t t0;

	memset(&p, 0, sizeof(p));
	p.samples = pa->samples;
	pthread_mutex_init(&p.pm, NULL);
	sem_init(&p.ps[0], 0, 0);
	sem_init(&p.ps[1], 0, 0);
	bench_busy_start(&busy, false);
	t0 = bench_now_ns();
	for (int i = 0; i < 2; i++) {
		a[i] = (struct party){ &p, i };
		pthread_create(&t[i], NULL, pa->fn, &a[i]);
		bench_pin_thread(t[i], bench_cpu_nth(i));
	}
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	t0 = bench_now_ns() - t0;
	bench_busy_stop(&busy);
	pthread_mutex_destroy(&p.pm);
	sem_destroy(&p.ps[0]);
	sem_destroy(&p.ps[1]);
	return pa->per ? (double)t0 / pa->per : (double)p.lat_ns / HO_TURNS;
}

/* ---------------------------------------------------------------------- */
/* --samples */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Write v[0..n-1] to DIR/NAME-IMPL.txt, one per line, and print the p50,
 * p99 and max lines. Returns 0, or -1 if the file cannot be written. */
static int samples_write(const char *dir, const char *name, const char *impl,
			 const char *param, uint64_t *v, size_t n)
{
	char path[4096], bname[64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s-%s.txt", dir, name, impl);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "sync-micro: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%llu\n", (unsigned long long)v[i]);
	if (fclose(f) != 0) {
		fprintf(stderr, "sync-micro: %s: %s\n", path, strerror(errno));
		return -1;
	}
	qsort(v, n, sizeof(*v), cmp_u64);
	snprintf(bname, sizeof(bname), "%s_p50", name);
	bench_result(NULL, bname, impl, param, (double)v[n / 2], "ns");
	snprintf(bname, sizeof(bname), "%s_p99", name);
	bench_result(NULL, bname, impl, param, (double)v[n * 99 / 100], "ns");
	snprintf(bname, sizeof(bname), "%s_max", name);
	bench_result(NULL, bname, impl, param, (double)v[n - 1], "ns");
	return 0;
}

/* One sampled run of mutex_handoff and sem_wake per impl (those in
 * benches). Returns 0, or 1 if a file could not be written. */
static int samples_run(const char *dir, const char *benches)
{
	size_t n = HO_TURNS > 2 * SW_SAMPLE_ROUNDS ? HO_TURNS : 2 * SW_SAMPLE_ROUNDS;
	uint64_t *v = calloc(n, sizeof(*v));
	char param[64];
	int bad = 0;

	if (!v) {
		fprintf(stderr, "sync-micro: out of memory for samples\n");
		return 1;
	}
	if (bench_want(benches, "mutex_handoff")) {
		struct weft_pair_arg wa = { weft_ho_party, 0, v };
		struct pthread_pair_arg pa = { pthread_ho_party, 0, v };

		snprintf(param, sizeof(param), "turns=%d,busy=1,samples=1", HO_TURNS);
		weft_pair(&wa);
		bad |= samples_write(dir, "mutex_handoff", "weft", param, v, HO_TURNS);
		pthread_pair(&pa);
		bad |= samples_write(dir, "mutex_handoff", "pthread", param, v, HO_TURNS);
	}
	if (bench_want(benches, "sem_wake")) {
		struct weft_pair_arg wa = { weft_sws_party, 1, v };
		struct pthread_pair_arg pa = { pthread_sws_party, 1, v };

		snprintf(param, sizeof(param), "rounds=%d,busy=1,samples=1", SW_SAMPLE_ROUNDS);
		weft_pair(&wa);
		bad |= samples_write(dir, "sem_wake", "weft", param, v, 2 * SW_SAMPLE_ROUNDS);
		pthread_pair(&pa);
		bad |= samples_write(dir, "sem_wake", "pthread", param, v, 2 * SW_SAMPLE_ROUNDS);
	}
	free(v);
	return bad ? 1 : 0;
}

/* ---------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	const char *benches = NULL, *samples_dir = NULL;
	char param[64];
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--bench=", 8) == 0) {
			benches = argv[i] + 8;
		} else if (strncmp(argv[i], "--runs=", 7) == 0) {
			runs = atoi(argv[i] + 7);
		} else if (strncmp(argv[i], "--samples=", 10) == 0 && argv[i][10]) {
			samples_dir = argv[i] + 10;
		} else {
			fprintf(stderr, "usage: %s [--bench=a,b] [--runs=N] [--samples=DIR]\n"
				"  benches: mutex_uncontended mutex_handoff sem_wake\n", argv[0]);
			return 2;
		}
	}
	if (runs < 1)
		runs = 1;
	bench_weft_start(2);
	if (bench_want(benches, "mutex_uncontended")) {
		snprintf(param, sizeof(param), "n=%d", UNC_N);
		bench_result(NULL, "mutex_uncontended", "weft", param, run_median(unc_weft, NULL), "ns");
		bench_result(NULL, "mutex_uncontended", "weft-os", param,
			     run_median(unc_weft_os, NULL), "ns");
		bench_result(NULL, "mutex_uncontended", "cas_store", param,
			     run_median(unc_cas_store, NULL), "ns");
		bench_result(NULL, "mutex_uncontended", "pthread", param,
			     run_median(unc_pthread, NULL), "ns");
	}
	if (bench_want(benches, "mutex_handoff")) {
		struct weft_pair_arg wa = { weft_ho_party, 0, NULL };
		struct pthread_pair_arg pa = { pthread_ho_party, 0, NULL };

		snprintf(param, sizeof(param), "turns=%d,busy=1", HO_TURNS);
		bench_result(NULL, "mutex_handoff", "weft", param, run_median(weft_pair, &wa), "ns");
		bench_result(NULL, "mutex_handoff", "pthread", param, run_median(pthread_pair, &pa), "ns");
	}
	if (bench_want(benches, "sem_wake")) {
		struct weft_pair_arg wa = { weft_sw_party, 2.0 * SW_ROUNDS, NULL };
		struct pthread_pair_arg pa = { pthread_sw_party, 2.0 * (SW_ROUNDS / 4), NULL };

		snprintf(param, sizeof(param), "rounds=%d,busy=1", SW_ROUNDS);
		bench_result(NULL, "sem_wake", "weft", param, run_median(weft_pair, &wa), "ns");
		snprintf(param, sizeof(param), "rounds=%d,busy=1", SW_ROUNDS / 4);
		bench_result(NULL, "sem_wake", "pthread", param, run_median(pthread_pair, &pa), "ns");
	}
	if (samples_dir)
		rc = samples_run(samples_dir, benches);
	weft_shutdown();
	return rc;
}
