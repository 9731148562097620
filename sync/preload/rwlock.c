/* libweft-preload.so: pthread_rwlock_*.
 *
 * state: reader count in bits 0-29, WP_RW_W while a writer holds it. One
 * futex on state for every sleeper; nwait counts sleepers, wwait the
 * writers that want the lock. Writers do not starve: a reader does not
 * enter while a writer waits, unless this thread already holds a read lock
 * of some rwlock (a per-thread count, so that recursive read locks cannot
 * deadlock behind a waiting writer) and the lock is not the writer-
 * preferring nonrecursive kind (flags 2), which never lets readers pass.
 *
 * No lost wakeup: a sleeper increments nwait and then sleeps with
 * futex_wait(state, the value it saw); an unlocker changes state and then
 * reads nwait (both seq_cst), so either the unlocker sees the sleeper and
 * wakes all, or the sleeper's futex_wait sees the new state and returns.
 * A reader held back only by a waiting writer (state has no writer bit)
 * sleeps on wwait instead, with the value it read: the writer's wake when
 * it stops waiting (it got the lock or timed out) changes no bit of state,
 * so a reader that read state and wwait just before and then slept on the
 * unchanged state would miss it for good (state 0, nobody left to change
 * it). Such a reader counts itself in rsleep before its futex_wait, and
 * every wwait-- is followed by a wake of the wwait word when rsleep says
 * someone sleeps there (rsleep++ then the kernel's read of wwait, against
 * wwait-- then the rsleep load, all seq_cst: either the writer sees the
 * reader and wakes it, or the reader's futex_wait finds wwait changed and
 * returns at once).
 */
#include "config.h"

#include <errno.h>

#include "preload.h"

#define PR(r) ((struct wp_rwlock *)(r))
#define OFF(r) (__builtin_expect(wp_off, 0) || \
		__atomic_load_n(&PR(r)->shared, __ATOMIC_RELAXED) != 0)

/* read locks this thread holds, over all rwlocks */
static __thread unsigned rd_held __attribute__((tls_model("initial-exec")));

static void rw_wake(struct wp_rwlock *r)
{
	/* seq_cst: the Dekker pairing with the sleeper (top of file) */
	if (__atomic_load_n(&r->nwait, __ATOMIC_SEQ_CST))
		wp_futex_wake(&r->state, INT_MAX, 0);
}

static int rd_may_pass(struct wp_rwlock *r)
{
	/* seq_cst, not a mere hint: a reader that sees a waiting writer goes
	 * to sleep (on wwait, see rd_lock), and the wake it gets when that
	 * writer stops waiting comes from the Dekker pairing of rd_lock's
	 * nwait++ then its wwait load with wr_lock's wwait-- then nwait load
	 * (all four seq_cst, so that one side sees the other; C11 allows a
	 * relaxed load to miss the decrement while the writer misses our
	 * nwait++). rd_lock decides with its own seq_cst load of wwait; this
	 * one must agree with it. On x86 a plain load, on AArch64 an LDAR. */
	if (__atomic_load_n(&r->wwait, __ATOMIC_SEQ_CST) == 0)
		return 1;
	return rd_held > 0 && r->flags != PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP;
}

static int rd_try(struct wp_rwlock *r, int ignore_writers)
{
	/* relaxed load, acquire on the CAS that takes the read lock */
	unsigned s = __atomic_load_n(&r->state, __ATOMIC_RELAXED);
	for (;;) {
		if (s & WP_RW_W)
			return EBUSY;
		if (!ignore_writers && !rd_may_pass(r))
			return EBUSY;
		if ((s & WP_RW_READERS) == WP_RW_READERS - 1)
			return EAGAIN;
		if (__atomic_compare_exchange_n(&r->state, &s, s + 1, 1, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			rd_held++;
			wp_count(WP_RWLOCK, WP_ACQ);
			return 0;
		}
	}
}

static int rd_lock(struct wp_rwlock *r, clockid_t clk, const struct timespec *abs)
{
	/* relaxed: only this thread stores its own id as writer */
	if (__atomic_load_n(&r->writer, __ATOMIC_RELAXED) == wp_self())
		return EDEADLK;
	int e = rd_try(r, 0);
	if (e != EBUSY)
		return e;
	if ((e = wp_check_abstime(abs)))
		return e;
	for (;;) {
		/* seq_cst: the Dekker pairing with the unlocker and with the
		 * writer's wwait-- (top of file) */
		__atomic_fetch_add(&r->nwait, 1, __ATOMIC_SEQ_CST);
		unsigned s = __atomic_load_n(&r->state, __ATOMIC_SEQ_CST);
		/* seq_cst: as in rd_may_pass */
		unsigned w = __atomic_load_n(&r->wwait, __ATOMIC_SEQ_CST);
		e = rd_try(r, 0);
		if (e == EBUSY) {
			/* What held us back: a writer holding the lock (its
			 * unlock changes state) or, with no writer bit in the s
			 * we read, a waiting writer (only wwait changes when it
			 * stops waiting). Neither per s and w (the lock changed
			 * in between): try again without sleeping. */
			unsigned *word = &r->state, val = s;
			int pass = w == 0 || (rd_held > 0 &&
				   r->flags != PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
			if (!(s & WP_RW_W)) {
				word = pass ? NULL : &r->wwait;
				val = w;
			}
			if (word == &r->wwait) {
				/* seq_cst: the pairing with wr_lock's wwait--
				 * (top of file) */
				__atomic_fetch_add(&r->rsleep, 1, __ATOMIC_SEQ_CST);
				wp_count(WP_RWLOCK, WP_PARKS);
				e = wp_futex_wait(word, val, abs, clk, 0);
				/* relaxed: only a count; nothing is published */
				__atomic_fetch_sub(&r->rsleep, 1, __ATOMIC_RELAXED);
			} else if (word) {
				wp_count(WP_RWLOCK, WP_PARKS);
				e = wp_futex_wait(word, val, abs, clk, 0);
			}
			if (e != ETIMEDOUT)
				e = EBUSY;
		}
		__atomic_fetch_sub(&r->nwait, 1, __ATOMIC_SEQ_CST);
		if (e != EBUSY)
			return e;
	}
}

static int wr_try(struct wp_rwlock *r)
{
	unsigned z = 0;
	/* acquire: the critical section reads after the lock is ours */
	if (!__atomic_compare_exchange_n(&r->state, &z, WP_RW_W, 0, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return EBUSY;
	/* relaxed: read only by this thread (EDEADLK) */
	__atomic_store_n(&r->writer, wp_self(), __ATOMIC_RELAXED);
	wp_count(WP_RWLOCK, WP_ACQ);
	return 0;
}

static int wr_lock(struct wp_rwlock *r, clockid_t clk, const struct timespec *abs)
{
	if (__atomic_load_n(&r->writer, __ATOMIC_RELAXED) == wp_self())
		return EDEADLK;
	if (wr_try(r) == 0)
		return 0;
	int e = wp_check_abstime(abs);
	if (e)
		return e;
	/* seq_cst: readers must see us waiting before we sleep */
	__atomic_fetch_add(&r->wwait, 1, __ATOMIC_SEQ_CST);
	for (;;) {
		__atomic_fetch_add(&r->nwait, 1, __ATOMIC_SEQ_CST);
		unsigned s = __atomic_load_n(&r->state, __ATOMIC_SEQ_CST);
		e = EBUSY;
		if (s == 0)
			e = wr_try(r);
		if (e == EBUSY) {
			wp_count(WP_RWLOCK, WP_PARKS);
			if (wp_futex_wait(&r->state, s, abs, clk, 0) == ETIMEDOUT)
				e = ETIMEDOUT;
		}
		__atomic_fetch_sub(&r->nwait, 1, __ATOMIC_SEQ_CST);
		if (e != EBUSY)
			break;
	}
	/* seq_cst: the Dekker pairing with readers that sleep on wwait (top
	 * of file): they write rsleep and then the kernel reads wwait, we
	 * write wwait and then read rsleep. Readers held back by us may enter
	 * now (we timed out) or must go back to sleeping on state (we hold
	 * the lock). */
	__atomic_fetch_sub(&r->wwait, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&r->rsleep, __ATOMIC_SEQ_CST))
		wp_futex_wake(&r->wwait, INT_MAX, 0);
	if (e == ETIMEDOUT)
		rw_wake(r);
	return e;
}

static int rw_unlock(struct wp_rwlock *r)
{
	/* relaxed: a hint to tell the writer's unlock from a reader's */
	unsigned s = __atomic_load_n(&r->state, __ATOMIC_RELAXED);
	if (s & WP_RW_W) {
		if (__atomic_load_n(&r->writer, __ATOMIC_RELAXED) != wp_self())
			return EPERM;
		__atomic_store_n(&r->writer, 0, __ATOMIC_RELAXED);
		/* seq_cst: release for the critical section, and the Dekker
		 * pairing with sleepers (top of file) */
		__atomic_store_n(&r->state, 0, __ATOMIC_SEQ_CST);
		rw_wake(r);
		return 0;
	}
	if (s == 0)
		return 0; /* not locked: glibc returns 0 too */
	/* seq_cst: release for the read section, Dekker with sleepers */
	unsigned n = __atomic_sub_fetch(&r->state, 1, __ATOMIC_SEQ_CST);
	if (rd_held)
		rd_held--;
	if (n == 0)
		rw_wake(r);
	return 0;
}

/* ---- exported ---- */

WP_EXPORT int pthread_rwlock_init(pthread_rwlock_t *rw, const pthread_rwlockattr_t *a)
{
	if (wp_off)
		return WP_REAL(rw_init)(rw, a);
	int ps = 0, kind = 0;
	if (a) {
		if (pthread_rwlockattr_getpshared(a, &ps) == 0 && ps == PTHREAD_PROCESS_SHARED)
			return WP_REAL(rw_init)(rw, a);
		pthread_rwlockattr_getkind_np(a, &kind);
	}
	struct wp_rwlock *r = PR(rw);
	/* plain stores: init runs before the object is shared */
	*r = (struct wp_rwlock){ 0 };
	r->flags = (unsigned)kind;
	return 0;
}

WP_EXPORT int pthread_rwlock_destroy(pthread_rwlock_t *rw)
{
	if (OFF(rw))
		return WP_REAL(rw_destroy)(rw);
	return 0;
}

WP_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *rw)
{
	if (OFF(rw))
		return WP_REAL(rw_rdlock)(rw);
	return rd_lock(PR(rw), CLOCK_REALTIME, NULL);
}

WP_EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t *rw)
{
	if (OFF(rw))
		return WP_REAL(rw_tryrdlock)(rw);
	return rd_try(PR(rw), 0);
}

WP_EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *restrict rw,
					 const struct timespec *restrict abs)
{
	if (OFF(rw))
		return WP_REAL(rw_timedrdlock)(rw, abs);
	if (!abs)
		return EINVAL;
	return rd_lock(PR(rw), CLOCK_REALTIME, abs);
}

WP_EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t *restrict rw, clockid_t clk,
					 const struct timespec *restrict abs)
{
	if (OFF(rw))
		return WP_REAL(rw_clockrdlock)(rw, clk, abs);
	if (!wp_clock_ok(clk) || !abs)
		return EINVAL;
	return rd_lock(PR(rw), clk, abs);
}

WP_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *rw)
{
	if (OFF(rw))
		return WP_REAL(rw_wrlock)(rw);
	return wr_lock(PR(rw), CLOCK_REALTIME, NULL);
}

WP_EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t *rw)
{
	if (OFF(rw))
		return WP_REAL(rw_trywrlock)(rw);
	return wr_try(PR(rw));
}

WP_EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *restrict rw,
					 const struct timespec *restrict abs)
{
	if (OFF(rw))
		return WP_REAL(rw_timedwrlock)(rw, abs);
	if (!abs)
		return EINVAL;
	return wr_lock(PR(rw), CLOCK_REALTIME, abs);
}

WP_EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t *restrict rw, clockid_t clk,
					 const struct timespec *restrict abs)
{
	if (OFF(rw))
		return WP_REAL(rw_clockwrlock)(rw, clk, abs);
	if (!wp_clock_ok(clk) || !abs)
		return EINVAL;
	return wr_lock(PR(rw), clk, abs);
}

WP_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *rw)
{
	if (OFF(rw))
		return WP_REAL(rw_unlock)(rw);
	return rw_unlock(PR(rw));
}
