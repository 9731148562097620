/*
 * examples/sync-micro.c - micro benchmarks of the sync primitives' fast
 * paths and cross-worker wakeups (issue targets of the sync work), each
 * with its baseline in the same binary and the same run.
 *
 *   sync-micro [--bench=NAME[,NAME...]] [--runs=N]
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
			p->lat_ns += bench_now_ns() -                                 \
				atomic_load_explicit(&p->t_unlock, memory_order_relaxed);     \
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

int main(int argc, char **argv)
{
	const char *benches = NULL;
	char param[64];

	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--bench=", 8) == 0) {
			benches = argv[i] + 8;
		} else if (strncmp(argv[i], "--runs=", 7) == 0) {
			runs = atoi(argv[i] + 7);
		} else {
			fprintf(stderr, "usage: %s [--bench=a,b] [--runs=N]\n"
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
		struct weft_pair_arg wa = { weft_ho_party, 0 };
		struct pthread_pair_arg pa = { pthread_ho_party, 0 };

		snprintf(param, sizeof(param), "turns=%d,busy=1", HO_TURNS);
		bench_result(NULL, "mutex_handoff", "weft", param, run_median(weft_pair, &wa), "ns");
		bench_result(NULL, "mutex_handoff", "pthread", param, run_median(pthread_pair, &pa), "ns");
	}
	if (bench_want(benches, "sem_wake")) {
		struct weft_pair_arg wa = { weft_sw_party, 2.0 * SW_ROUNDS };
		struct pthread_pair_arg pa = { pthread_sw_party, 2.0 * (SW_ROUNDS / 4) };

		snprintf(param, sizeof(param), "rounds=%d,busy=1", SW_ROUNDS);
		bench_result(NULL, "sem_wake", "weft", param, run_median(weft_pair, &wa), "ns");
		snprintf(param, sizeof(param), "rounds=%d,busy=1", SW_ROUNDS / 4);
		bench_result(NULL, "sem_wake", "pthread", param, run_median(pthread_pair, &pa), "ns");
	}
	weft_shutdown();
	return 0;
}
