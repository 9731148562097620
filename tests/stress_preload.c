/* tests/stress_preload: bounded, seeded stress of libweft-preload.so with
 * 64 OS threads (issue 15).
 *
 * Linked against libweft-preload.so (before libc, as under LD_PRELOAD).
 * Each thread draws operations from its own xorshift stream (seed printed;
 * WEFT_TEST_SEED replays the choices, not the interleaving) until
 * WEFT_STRESS_SECONDS (default 15) pass or the thread's share of
 * WEFT_STRESS_OPS (default 10^7) is done:
 *   - lock/trylock/timedlock with random short timeouts on one mutex of
 *     each kind (NORMAL, RECURSIVE, ERRORCHECK, ADAPTIVE), counter++;
 *   - rwlock: writers bump two fields, readers check they are equal;
 *   - a bounded queue under a mutex and two conds: producers and consumers
 *     wait untimed or with random timeouts, wake with signal or broadcast
 *     (signal and broadcast storms);
 *   - semaphore tokens: post, trywait, timedwait;
 *   - spinlock counter; C11 mtx counter.
 * At the end every counter is exact: the sum of each thread's own count,
 * produced == consumed + left in the queue, posted == taken + the value.
 * A lost wakeup leaves an untimed waiter asleep: the watchdog (alarm) fails
 * the run instead of hanging. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 64
#define QCAP 16

static pthread_mutex_t mtx[4];
static long mcount[4];
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static long rw_a, rw_b;
static pthread_mutex_t qm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static int qlen, qstop;
static sem_t sem;
static pthread_spinlock_t spin;
static long spin_count;
static mtx_t cm;
static long c11_count;

static atomic_int stop;
static atomic_long errors;
static long ops_quota;
static uint64_t seed;

struct tstate {
	long mine[4], rw_writes, produced, consumed, posted, taken, spins, c11, ops;
	uint64_t rng;
};
static struct tstate ts[NTHREADS];

static uint64_t next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static struct timespec in_us(clockid_t clk, long us)
{
	struct timespec t;
	clock_gettime(clk, &t);
	t.tv_nsec += us * 1000;
	while (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); atomic_fetch_add(&errors, 1); } while (0)

static void op_mutex(struct tstate *t, int k, uint64_t r)
{
	int e;
	switch ((r >> 8) % 4) {
	case 0:
		e = pthread_mutex_trylock(&mtx[k]);
		if (e == EBUSY)
			return;
		break;
	case 1: {
		struct timespec d = in_us((r >> 12) & 1 ? CLOCK_MONOTONIC : CLOCK_REALTIME,
					  (long)((r >> 16) % 200));
		e = (r >> 12) & 1 ? pthread_mutex_clocklock(&mtx[k], CLOCK_MONOTONIC, &d)
				  : pthread_mutex_timedlock(&mtx[k], &d);
		if (e == ETIMEDOUT)
			return;
		break;
	}
	default:
		e = pthread_mutex_lock(&mtx[k]);
	}
	if (e) {
		FAIL("mutex %d lock: %d\n", k, e);
		return;
	}
	if (k == 1 && pthread_mutex_lock(&mtx[k]) != 0)
		FAIL("recursive relock\n");
	mcount[k]++;
	t->mine[k]++;
	if (k == 1)
		pthread_mutex_unlock(&mtx[k]);
	if ((e = pthread_mutex_unlock(&mtx[k])))
		FAIL("mutex %d unlock: %d\n", k, e);
}

static void op_rw(struct tstate *t, uint64_t r)
{
	if (r % 4 == 0) {
		pthread_rwlock_wrlock(&rw);
		rw_a++;
		rw_b++;
		t->rw_writes++;
		pthread_rwlock_unlock(&rw);
	} else {
		int e = (r % 4 == 1) ? pthread_rwlock_tryrdlock(&rw) : pthread_rwlock_rdlock(&rw);
		if (e == EBUSY)
			return;
		if (e)
			FAIL("rdlock: %d\n", e);
		else if (rw_a != rw_b)
			FAIL("rwlock: reader saw %ld != %ld\n", rw_a, rw_b);
		pthread_rwlock_unlock(&rw);
	}
}

/* timed: wait with a random deadline and give up on timeout */
static void op_queue(struct tstate *t, uint64_t r)
{
	int produce = r & 1, timed = (r >> 1) & 1, bcast = ((r >> 2) & 7) == 0;
	struct timespec d = in_us(CLOCK_REALTIME, (long)((r >> 8) % 500));
	pthread_mutex_lock(&qm);
	if (produce) {
		while (qlen == QCAP && !qstop) {
			int e = timed ? pthread_cond_timedwait(&not_full, &qm, &d)
				      : pthread_cond_wait(&not_full, &qm);
			if (e == ETIMEDOUT)
				goto out;
		}
		if (qstop)
			goto out;
		qlen++;
		t->produced++;
		if (bcast)
			pthread_cond_broadcast(&not_empty);
		else
			pthread_cond_signal(&not_empty);
	} else {
		while (qlen == 0 && !qstop) {
			int e = timed ? pthread_cond_timedwait(&not_empty, &qm, &d)
				      : pthread_cond_wait(&not_empty, &qm);
			if (e == ETIMEDOUT)
				goto out;
		}
		if (qstop)
			goto out;
		qlen--;
		t->consumed++;
		if (bcast)
			pthread_cond_broadcast(&not_full);
		else
			pthread_cond_signal(&not_full);
	}
out:
	pthread_mutex_unlock(&qm);
}

static void op_sem(struct tstate *t, uint64_t r)
{
	switch (r % 3) {
	case 0:
		if (sem_post(&sem) == 0)
			t->posted++;
		break;
	case 1:
		if (sem_trywait(&sem) == 0)
			t->taken++;
		break;
	default: {
		struct timespec d = in_us(CLOCK_MONOTONIC, (long)((r >> 8) % 300));
		if (sem_clockwait(&sem, CLOCK_MONOTONIC, &d) == 0)
			t->taken++;
		else if (errno != ETIMEDOUT && errno != EINTR)
			FAIL("sem_clockwait: %d\n", errno);
	}
	}
}

static void *worker(void *p)
{
	struct tstate *t = p;
	while (!atomic_load_explicit(&stop, memory_order_relaxed) && t->ops < ops_quota) {
		uint64_t r = next(&t->rng);
		unsigned pick = (unsigned)(r % 100);
		r >>= 7;
		if (pick < 40)
			op_mutex(t, (int)(r % 4), r >> 2);
		else if (pick < 55)
			op_rw(t, r);
		else if (pick < 70)
			op_queue(t, r);
		else if (pick < 82)
			op_sem(t, r);
		else if (pick < 91) {
			pthread_spin_lock(&spin);
			spin_count++;
			pthread_spin_unlock(&spin);
			t->spins++;
		} else {
			mtx_lock(&cm);
			c11_count++;
			mtx_unlock(&cm);
			t->c11++;
		}
		t->ops++;
	}
	return NULL;
}

static void watchdog(int sig)
{
	static const char msg[] = "stress_preload: FAIL: watchdog expired (hang or lost wakeup)\n";
	if (write(2, msg, sizeof msg - 1) < 0) {
	}
	_exit(1);
}

int main(void)
{
	const char *s = getenv("WEFT_STRESS_SECONDS");
	int secs = s ? atoi(s) : 15;
	if (secs < 1)
		secs = 1;
	s = getenv("WEFT_STRESS_OPS");
	long total = s ? atol(s) : 10000000L;
	ops_quota = total / NTHREADS + 1;
	s = getenv("WEFT_TEST_SEED");
	seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
	printf("stress_preload: seed=%llu threads=%d seconds=%d ops<=%ld\n",
	       (unsigned long long)seed, NTHREADS, secs, total);
	fflush(stdout);
	signal(SIGALRM, watchdog);
	alarm((unsigned)secs + 60);

	static const int kinds[4] = { PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_RECURSIVE,
				      PTHREAD_MUTEX_ERRORCHECK, PTHREAD_MUTEX_ADAPTIVE_NP };
	for (int k = 0; k < 4; k++) {
		pthread_mutexattr_t a;
		pthread_mutexattr_init(&a);
		pthread_mutexattr_settype(&a, kinds[k]);
		pthread_mutex_init(&mtx[k], &a);
		pthread_mutexattr_destroy(&a);
	}
	sem_init(&sem, 0, 0);
	pthread_spin_init(&spin, 0);
	mtx_init(&cm, mtx_plain);

	pthread_t th[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		ts[i].rng = seed * 0x9e3779b97f4a7c15ull + (uint64_t)i * 7919 + 1;
		if (pthread_create(&th[i], NULL, worker, &ts[i])) {
			fprintf(stderr, "pthread_create failed\n");
			return 1;
		}
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	long done = 0;
	for (int tick = 0; tick < secs * 20; tick++) {
		usleep(50000);
		done = 0;
		for (int i = 0; i < NTHREADS; i++)
			done += __atomic_load_n(&ts[i].ops, __ATOMIC_RELAXED);
		if (done >= total)
			break;
	}
	atomic_store(&stop, 1);
	/* wake untimed queue waiters for good */
	pthread_mutex_lock(&qm);
	qstop = 1;
	pthread_cond_broadcast(&not_empty);
	pthread_cond_broadcast(&not_full);
	pthread_mutex_unlock(&qm);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);

	struct tstate sum = { 0 };
	for (int i = 0; i < NTHREADS; i++) {
		for (int k = 0; k < 4; k++)
			sum.mine[k] += ts[i].mine[k];
		sum.rw_writes += ts[i].rw_writes;
		sum.produced += ts[i].produced;
		sum.consumed += ts[i].consumed;
		sum.posted += ts[i].posted;
		sum.taken += ts[i].taken;
		sum.spins += ts[i].spins;
		sum.c11 += ts[i].c11;
		sum.ops += ts[i].ops;
	}
	for (int k = 0; k < 4; k++)
		if (mcount[k] != sum.mine[k])
			FAIL("mutex %d: counter %ld, threads counted %ld\n", k, mcount[k], sum.mine[k]);
	if (rw_a != sum.rw_writes || rw_b != sum.rw_writes)
		FAIL("rwlock: %ld/%ld, writes %ld\n", rw_a, rw_b, sum.rw_writes);
	if (sum.produced != sum.consumed + qlen)
		FAIL("queue: produced %ld != consumed %ld + left %d\n", sum.produced, sum.consumed, qlen);
	int v;
	sem_getvalue(&sem, &v);
	if (sum.posted != sum.taken + v)
		FAIL("sem: posted %ld != taken %ld + value %d\n", sum.posted, sum.taken, v);
	if (spin_count != sum.spins)
		FAIL("spin: %ld != %ld\n", spin_count, sum.spins);
	if (c11_count != sum.c11)
		FAIL("c11: %ld != %ld\n", c11_count, sum.c11);
	double el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("stress_preload: %ld ops in %.2f s (%.0f ops/s): mutex %ld/%ld/%ld/%ld rw-writes %ld "
	       "queue %ld/%ld sem %ld/%ld spin %ld c11 %ld\n",
	       sum.ops, el, (double)sum.ops / el, sum.mine[0], sum.mine[1], sum.mine[2],
	       sum.mine[3], sum.rw_writes, sum.produced, sum.consumed, sum.posted, sum.taken,
	       sum.spins, sum.c11);
	long errs = atomic_load(&errors);
	printf("%d passed, %d failed\n", errs ? 0 : 1, errs ? 1 : 0);
	return errs ? 1 : 0;
}
