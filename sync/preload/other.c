/* libweft-preload.so: pthread_spin_*, pthread_barrier_*, unnamed sem_*.
 *
 * Spinlock: glibc's format (an int, 0 free), test and test-and-set.
 *
 * Barrier: arrived counts this round's threads; the last one resets it and
 * bumps gen (the futex word) and wakes everyone. No lost wakeup: a waiter
 * sleeps with futex_wait(gen, the round's value), compared by the kernel,
 * and the last arrival changes gen before it wakes. out counts the
 * threads still inside pthread_barrier_wait, so that destroy can wait for
 * them to leave before the memory is reused.
 *
 * Semaphore: glibc's layout (value, nwaiters, private word), value and
 * nwaiters read and written as one 64-bit word (SEM_WORD). post: one CAS
 * adds 1 to value, and the nwaiters it replaced says whether to wake one.
 * wait: CAS value down while > 0, else add 1 to nwaiters and
 * futex_wait(value, 0). No lost wakeup: the post's CAS and the waiter's
 * nwaiters increment are RMWs on the same word, so one is ordered before
 * the other: either the post sees the waiter counted (and wakes one), or
 * the waiter's later take or futex_wait sees value > 0. Nothing is read
 * after the release: a waiter that takes the unit may destroy and free
 * the semaphore at once (a completion on its stack), and a post that read
 * nwaiters after its increment would read freed memory.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>

#include "preload.h"

/* ---- spinlock ---- */

WP_EXPORT int pthread_spin_init(pthread_spinlock_t *l, int pshared)
{
	/* same format as glibc's whatever pshared: a plain store */
	*l = 0;
	return 0;
}

WP_EXPORT int pthread_spin_destroy(pthread_spinlock_t *l)
{
	return 0;
}

WP_EXPORT int pthread_spin_lock(pthread_spinlock_t *l)
{
	/* acquire: the critical section reads after the lock is ours */
	if (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE) == 0) {
		wp_count(WP_SPIN, WP_ACQ);
		return 0;
	}
	wp_count(WP_SPIN, WP_SPINS);
	for (;;) {
		/* relaxed: polling; the exchange below orders */
		while (__atomic_load_n(l, __ATOMIC_RELAXED) != 0)
			wp_pause();
		if (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE) == 0)
			break;
	}
	wp_count(WP_SPIN, WP_ACQ);
	return 0;
}

WP_EXPORT int pthread_spin_trylock(pthread_spinlock_t *l)
{
	/* acquire: as in pthread_spin_lock */
	if (__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE) != 0)
		return EBUSY;
	wp_count(WP_SPIN, WP_ACQ);
	return 0;
}

WP_EXPORT int pthread_spin_unlock(pthread_spinlock_t *l)
{
	/* release: the critical section's writes before the lock is free */
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
	return 0;
}

/* ---- barrier ---- */

#define PB(b) ((struct wp_barrier *)(b))
#define BAR_OFF(b) (__builtin_expect(wp_off, 0) || \
		    __atomic_load_n(&PB(b)->shared, __ATOMIC_RELAXED) != 0)

WP_EXPORT int pthread_barrier_init(pthread_barrier_t *restrict b,
				   const pthread_barrierattr_t *restrict a, unsigned count)
{
	int ps = PTHREAD_PROCESS_PRIVATE;
	if (a)
		pthread_barrierattr_getpshared(a, &ps);
	if (wp_off || ps == PTHREAD_PROCESS_SHARED)
		return WP_REAL(barrier_init)(b, a, count);
	if (count == 0 || count > INT_MAX)
		return EINVAL;
	struct wp_barrier *pb = PB(b);
	/* plain stores: init runs before the object is shared */
	*pb = (struct wp_barrier){ 0 };
	pb->count = count;
	return 0;
}

WP_EXPORT int pthread_barrier_destroy(pthread_barrier_t *b)
{
	if (BAR_OFF(b))
		return WP_REAL(barrier_destroy)(b);
	struct wp_barrier *pb = PB(b);
	/* acquire: pairs with the leaving waiters' release decrement */
	if (__atomic_load_n(&pb->arrived, __ATOMIC_ACQUIRE) != 0)
		return EBUSY;
	while (__atomic_load_n(&pb->out, __ATOMIC_ACQUIRE) != 0)
		sched_yield();
	return 0;
}

WP_EXPORT int pthread_barrier_wait(pthread_barrier_t *b)
{
	if (BAR_OFF(b))
		return WP_REAL(barrier_wait)(b);
	struct wp_barrier *pb = PB(b);
	/* relaxed: out only holds destroy back */
	__atomic_fetch_add(&pb->out, 1, __ATOMIC_RELAXED);
	/* acquire: the round we join is the one gen names; the arrival
	 * increment (acq_rel) orders our writes before the last arrival's
	 * release of gen */
	unsigned g = __atomic_load_n(&pb->gen, __ATOMIC_ACQUIRE);
	unsigned n = __atomic_add_fetch(&pb->arrived, 1, __ATOMIC_ACQ_REL);
	int ret = 0;
	wp_count(WP_BARRIER, WP_ACQ);
	if (n == pb->count) {
		/* relaxed: nobody can arrive for the next round before gen moves */
		__atomic_store_n(&pb->arrived, 0, __ATOMIC_RELAXED);
		/* release: every arrival's writes (gathered by the acq_rel
		 * increments) before the waiters return */
		__atomic_store_n(&pb->gen, g + 1, __ATOMIC_RELEASE);
		wp_futex_wake(&pb->gen, INT_MAX, 0);
		ret = PTHREAD_BARRIER_SERIAL_THREAD;
	} else {
		/* acquire: pairs with the release of gen */
		while (__atomic_load_n(&pb->gen, __ATOMIC_ACQUIRE) == g) {
			wp_count(WP_BARRIER, WP_PARKS);
			wp_futex_wait(&pb->gen, g, NULL, CLOCK_MONOTONIC, 0);
		}
	}
	/* release: our last read of the barrier before destroy may return */
	__atomic_fetch_sub(&pb->out, 1, __ATOMIC_RELEASE);
	return ret;
}

/* ---- semaphore ---- */

#define PS(s) ((struct wp_sem *)(s))
#define SEM_WORD(ps) ((uint64_t *)(void *)(ps))
#define SEM_WAITER ((uint64_t)1 << 32)
#define SEM_OFF(s) (__builtin_expect(wp_off, 0) || \
		    (__atomic_load_n(&PS(s)->priv, __ATOMIC_RELAXED) & WP_SEM_GLIBC_SHARED))

WP_EXPORT int sem_init(sem_t *s, int pshared, unsigned value)
{
	if (wp_off || pshared)
		return WP_REAL(sem_init)(s, pshared, value);
	if (value > SEM_VALUE_MAX) {
		errno = EINVAL;
		return -1;
	}
	struct wp_sem *ps = PS(s);
	/* plain stores: init runs before the object is shared */
	*ps = (struct wp_sem){ 0 };
	ps->value = value;
	return 0;
}

WP_EXPORT int sem_destroy(sem_t *s)
{
	if (SEM_OFF(s))
		return WP_REAL(sem_destroy)(s);
	return 0;
}

static int sem_take(struct wp_sem *s)
{
	/* relaxed load, acquire on the CAS (pairs with post's release) */
	uint64_t w = __atomic_load_n(SEM_WORD(s), __ATOMIC_RELAXED);
	while ((uint32_t)w > 0)
		if (__atomic_compare_exchange_n(SEM_WORD(s), &w, w - 1, 1, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			wp_count(WP_SEM, WP_ACQ);
			return 1;
		}
	return 0;
}

struct sem_cl {
	struct wp_sem *s;
};

/* Cancellation in sem_wait. sem_post wakes one sleeper per token; if the
 * cancel acts after that wake chose this thread (the futex returned while
 * the cancel type is still asynchronous), the token stays in value and the
 * other sleepers sleep on. So pass the wake on when a token is there and
 * other waiters remain (at worst a spurious wakeup: the woken thread finds
 * no token and sleeps again). The decision comes from the word our leaving
 * RMW replaced (an RMW reads the latest value, so it sees that post's
 * token unless a taker already has it), never from a later read, as in
 * sem_post. */
static void sem_cancelled(void *arg)
{
	struct sem_cl *cl = arg;
	/* relaxed: what orders this RMW against the posts' CASes is that they
	 * are all RMWs on this one word, which have a single modification
	 * order whatever their memory orders; this one reads the value just
	 * before it there. A post whose wake chose us did its CAS before that
	 * wake, and we run after the wake returned, so ours comes later and
	 * sees its token (unless a taker has it). seq_cst would add nothing:
	 * the posts' CAS is not seq_cst, and the decision reads only the value
	 * this RMW replaced; it publishes nothing and acquires nothing. */
	uint64_t old = __atomic_fetch_sub(SEM_WORD(cl->s), SEM_WAITER, __ATOMIC_RELAXED);
	if ((uint32_t)old > 0 && (old >> 32) > 1)
		wp_futex_wake(&cl->s->value, 1, 0);
}

static int sem_wait_slow(struct wp_sem *s, clockid_t clk, const struct timespec *abs)
{
	int e = wp_check_abstime(abs);
	if (e) {
		errno = e;
		return -1;
	}
	/* relaxed: an RMW on the post's word, so the two are ordered (top of
	 * file); the take that follows acquires the unit */
	__atomic_fetch_add(SEM_WORD(s), SEM_WAITER, __ATOMIC_RELAXED);
	struct sem_cl cl = { s };
	int oldtype;
	e = 0;
	pthread_cleanup_push(sem_cancelled, &cl);
	for (;;) {
		if (sem_take(s))
			break;
		wp_count(WP_SEM, WP_PARKS);
		pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &oldtype);
		int r = wp_futex_wait(&s->value, 0, abs, clk, 0);
		pthread_setcanceltype(oldtype, NULL);
		if (r == ETIMEDOUT || r == EINTR) {
			/* a post that raced with us may have left a unit */
			if (sem_take(s))
				break;
			e = r;
			break;
		}
	}
	pthread_cleanup_pop(0);
	/* relaxed: as in sem_cancelled */
	__atomic_fetch_sub(SEM_WORD(s), SEM_WAITER, __ATOMIC_RELAXED);
	if (e) {
		errno = e;
		return -1;
	}
	return 0;
}

WP_EXPORT int sem_wait(sem_t *s)
{
	if (SEM_OFF(s))
		return WP_REAL(sem_wait)(s);
	pthread_testcancel();
	if (sem_take(PS(s)))
		return 0;
	return sem_wait_slow(PS(s), CLOCK_REALTIME, NULL);
}

WP_EXPORT int sem_trywait(sem_t *s)
{
	if (SEM_OFF(s))
		return WP_REAL(sem_trywait)(s);
	if (sem_take(PS(s)))
		return 0;
	errno = EAGAIN;
	return -1;
}

WP_EXPORT int sem_timedwait(sem_t *restrict s, const struct timespec *restrict abs)
{
	if (SEM_OFF(s))
		return WP_REAL(sem_timedwait)(s, abs);
	/* glibc checks the nanoseconds before anything else */
	if (!abs || abs->tv_nsec < 0 || abs->tv_nsec >= 1000000000L) {
		errno = EINVAL;
		return -1;
	}
	pthread_testcancel();
	if (sem_take(PS(s)))
		return 0;
	return sem_wait_slow(PS(s), CLOCK_REALTIME, abs);
}

WP_EXPORT int sem_clockwait(sem_t *restrict s, clockid_t clk,
			    const struct timespec *restrict abs)
{
	if (SEM_OFF(s))
		return WP_REAL(sem_clockwait)(s, clk, abs);
	if (!wp_clock_ok(clk) || !abs || abs->tv_nsec < 0 || abs->tv_nsec >= 1000000000L) {
		errno = EINVAL;
		return -1;
	}
	pthread_testcancel();
	if (sem_take(PS(s)))
		return 0;
	return sem_wait_slow(PS(s), clk, abs);
}

WP_EXPORT int sem_post(sem_t *s)
{
	if (SEM_OFF(s))
		return WP_REAL(sem_post)(s);
	struct wp_sem *ps = PS(s);
	/* relaxed load, release CAS: publishes the poster's writes to the
	 * taker's acquire; the waiters it replaced decide the wake, with no
	 * read of ps after it (top of file) */
	uint64_t w = __atomic_load_n(SEM_WORD(ps), __ATOMIC_RELAXED);
	do {
		if ((uint32_t)w >= SEM_VALUE_MAX) {
			errno = EOVERFLOW;
			return -1;
		}
	} while (!__atomic_compare_exchange_n(SEM_WORD(ps), &w, w + 1, 1, __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
	/* futex_wake on memory freed meanwhile is harmless: the kernel
	 * compares nothing, and at worst a waiter on a reused address
	 * wakes spuriously, which every futex waiter tolerates */
	if (w >> 32)
		wp_futex_wake(&ps->value, 1, 0);
	return 0;
}

WP_EXPORT int sem_getvalue(sem_t *restrict s, int *restrict sval)
{
	if (SEM_OFF(s))
		return WP_REAL(sem_getvalue)(s, sval);
	/* relaxed: a snapshot */
	*sval = (int)__atomic_load_n(&PS(s)->value, __ATOMIC_RELAXED);
	return 0;
}
