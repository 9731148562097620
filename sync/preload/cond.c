/* libweft-preload.so: pthread_cond_*.
 *
 * A sequence condvar. seq is the futex word: signal, broadcast, destroy
 * and a cancelled waiter passing a signal on bump it. waiters counts the
 * threads between the start of a wait and their return; mutex is the first
 * mutex a waiter used; flags holds WP_COND_MIXED.
 *
 * Wait: holding the mutex, read seq, count itself in waiters, record its
 * mutex, unlock the mutex, futex_wait(seq, the value it read).
 * Signal: if waiters > 0, seq++ and FUTEX_WAKE one sleeper on seq.
 * Broadcast: if waiters > 0, s = ++seq. If every waiter so far used the
 * same mutex of ours (not MIXED, not a glibc mutex), one
 * FUTEX_CMP_REQUEUE(seq, wake 1, move up to INT_MAX to the mutex's lock
 * word, compare with s): the kernel, holding the hash-bucket locks of
 * both words, first compares seq with s. If seq moved since our increment
 * (another signal, broadcast, destroy or pass-on bumped it), it does
 * nothing and returns EAGAIN, and the broadcast falls back to a FUTEX_WAKE
 * of every sleeper on seq: the requeue acts only on the seq value this
 * broadcast produced. Otherwise it wakes one sleeper on seq and moves every
 * other one, still asleep, onto the mutex's lock word; it neither reads
 * nor changes that word. The moved sleepers are then woken as lock
 * waiters are, by an unlock that finds 2 in the lock word, one per unlock
 * (Requeue safety below), instead of a herd fighting for the mutex. In
 * every other case broadcast wakes every sleeper on seq.
 *
 * No lost wakeup. The race: a waiter found its predicate false under the
 * mutex and unlocked it; a signaller makes the predicate true and signals
 * before the waiter's futex_wait has queued it. Two pairings close it:
 * (1) the waiter's count reaches the signaller through the mutex (message
 *     passing, not store-buffering):
 *       waiter:    load seq (q) ; waiters++ ; unlock mutex (release)
 *       signaller: lock mutex (acquire) ; predicate = true ; [unlock] ;
 *                  load waiters ; seq++ ; FUTEX_WAKE
 *     A signaller whose critical section comes after the waiter's took the
 *     mutex the waiter's unlock released, so its waiters load sees the
 *     count, and its seq++ comes after the waiter read q. One whose
 *     critical section came first made the predicate true before the
 *     waiter looked: the waiter does not wait. (A predicate changed
 *     outside the mutex has no such guarantee, with glibc either.)
 * (2) the signaller's seq++ against the waiter's futex_wait, the
 *     store-buffering pairing, whose second half is in the kernel:
 *       waiter (FUTEX_WAIT):  queue itself on seq's bucket ; load seq, == q?
 *       signaller:            seq++ (an RMW) ; FUTEX_WAKE: look for queued
 *     Both kernel halves run under the bucket lock (the kernel's barriers
 *     order its waiter count against the word), so either the waiter's
 *     compare sees q + 1 and its wait returns at once, or the wake finds
 *     it queued and wakes (or requeues) it.
 * The seq_cst orders on the waiter's seq load and increment and on the
 * signaller's waiters load are more than (1) and (2) need (relaxed would
 * do for them); they cost nothing on x86-64 (plain loads, locked RMWs).
 *
 * Requeue safety: every sleeper requeued onto the mutex word is woken by an
 * unlock that finds 2 there. The one sleeper the broadcast wakes re-takes
 * the mutex with xchg(2) (wp_mutex_relock), and so does every requeued
 * sleeper after it, so the 2 stays until the last one unlocks. Requeue is
 * used only while every waiter since pthread_cond_init used the same mutex
 * of ours: the first waiter records its mutex in c->mutex, and a waiter
 * with another mutex sets WP_COND_MIXED before it can sleep. MIXED is
 * sticky (only init clears it, and c->mutex too): from then on broadcast
 * wakes all. A waiter with another mutex that read seq before the
 * broadcaster's seq++ sleeps on the old value, which the requeue's compare
 * does not move; one that read it after, and queued before the requeue,
 * is moved onto the wrong word: the broadcaster reads MIXED again after a
 * successful requeue and then wakes every sleeper on that word (see
 * wp_cond_broadcast). c->mutex is never cleared, so the first mutex must
 * outlive the cond's last broadcast and destroy.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>

#include "preload.h"

#define PC(c) ((struct wp_cond *)(c))
#define PM(m) ((struct wp_mutex *)(m))

static int cond_is_glibc(const struct wp_cond *c)
{
	/* relaxed: the flag is written by init before the object is shared */
	return (__atomic_load_n(&c->wrefs, __ATOMIC_RELAXED) & WP_COND_GLIBC_SHARED) != 0;
}

int wp_cond_init_clock(struct wp_cond *c, int mono)
{
	/* plain stores: init runs before the object is shared */
	c->seq = 0;
	c->waiters = 0;
	c->mutex = NULL;
	c->flags = 0;
	for (int i = 0; i < 4; i++)
		c->pad[i] = 0;
	c->wrefs = mono ? WP_COND_GLIBC_MONO : 0;
	c->pad2[0] = c->pad2[1] = 0;
	return 0;
}

struct cleanup {
	struct wp_cond *c;
	struct wp_mutex *m;
	unsigned seq;       /* the value the waiter read and slept on */
};

/* Cancellation in the wait: leave the waiters count and re-take the mutex,
 * as POSIX requires before the cleanup handlers run.
 *
 * POSIX also forbids a cancelled waiter to consume a signal while other
 * threads are blocked on the cond. The cancel can act after a signal's
 * FUTEX_WAKE(1) chose this thread (the futex returned, and the cancel type
 * is still asynchronous), or the wake and the cancel can race in the
 * kernel; the other sleepers would then sleep on with the predicate true.
 * So when seq moved since our read, a signal or broadcast came during this
 * wait and may have been ours: pass it on (seq++ and wake one), as glibc
 * sends a replacement signal. When the wake did not choose us, the extra
 * one is a spurious wakeup for someone, which POSIX allows. */
static void wait_cancelled(void *arg)
{
	struct cleanup *cl = arg;
	struct wp_cond *c = cl->c;
	/* seq_cst, like the waiter's read: a signal whose wake chose this
	 * thread bumped seq before its futex call, and the kernel's wake
	 * orders that bump before our futex return, so we see the change.
	 * Done before the waiters decrement: after it the cond may be
	 * destroyed. The increment is seq_cst as in wp_cond_signal, so that
	 * a waiter that reads seq later sleeps on the new value. */
	if (__atomic_load_n(&c->seq, __ATOMIC_SEQ_CST) != cl->seq) {
		__atomic_fetch_add(&c->seq, 1, __ATOMIC_SEQ_CST);
		wp_futex_wake(&c->seq, 1, 0);
	}
	/* release: our reads of the cond are done; pairs with destroy's acquire */
	__atomic_fetch_sub(&c->waiters, 1, __ATOMIC_RELEASE);
	wp_mutex_relock(cl->m);
}

int wp_cond_wait(struct wp_cond *c, struct wp_mutex *m, clockid_t clk,
		 const struct timespec *abs, int use_cond_clock)
{
	if (abs) {
		int e = wp_check_abstime(abs);
		if (e)
			return e;
	}
	if (use_cond_clock)
		clk = (__atomic_load_n(&c->wrefs, __ATOMIC_RELAXED) & WP_COND_GLIBC_MONO)
			? CLOCK_MONOTONIC : CLOCK_REALTIME;
	/* seq_cst (this read, the increment below and the MIXED store): the
	 * read and the increment are published to signallers by our mutex
	 * unlock (No lost wakeup, (1)), for which relaxed would do; the MIXED
	 * store is ordered before our futex_wait queues us (the broadcast's
	 * second flags load relies on that, see wp_cond_broadcast) */
	unsigned seq = __atomic_load_n(&c->seq, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&c->waiters, 1, __ATOMIC_SEQ_CST);
	struct wp_mutex *cur = __atomic_load_n(&c->mutex, __ATOMIC_SEQ_CST);
	/* A failed CAS NULL -> m would set MIXED even if the winner recorded
	 * m too; it cannot happen for the same m, since the waiters with m
	 * run this under m, one at a time. */
	if (cur != m) {
		struct wp_mutex *expect = NULL;
		if (cur != NULL || wp_mutex_is_glibc(m) ||
		    !__atomic_compare_exchange_n(&c->mutex, &expect, m, 0,
						 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			__atomic_fetch_or(&c->flags, WP_COND_MIXED, __ATOMIC_SEQ_CST);
	}
	int e = wp_mutex_is_glibc(m) ? WP_REAL(mutex_unlock)((pthread_mutex_t *)m)
				     : wp_mutex_unlock(m);
	if (e) {
		/* release: see wait_cancelled */
		__atomic_fetch_sub(&c->waiters, 1, __ATOMIC_RELEASE);
		return e;
	}
	wp_count(WP_COND, WP_PARKS);
	struct cleanup cl = { c, m, seq };
	int r, oldtype;
	pthread_cleanup_push(wait_cancelled, &cl);
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &oldtype);
	r = wp_futex_wait(&c->seq, seq, abs, clk, 0);
	pthread_setcanceltype(oldtype, NULL);
	pthread_cleanup_pop(0);
	/* ETIMEDOUT from the kernel does not prove that no wake chose this
	 * thread: a broadcast may have requeued it onto the mutex word before
	 * the deadline, and the kernel keeps the deadline across the requeue,
	 * so the timer can fire while the mutex is still held. A seq that moved
	 * since our read means a signal or broadcast came after this wait
	 * began: answer 0 then (at worst a spurious wakeup, which POSIX
	 * allows). Read before the waiters decrement: after it the cond may be
	 * destroyed. relaxed: seq is only compared with our own earlier read;
	 * a broadcast that requeued us bumped seq before its requeue syscall,
	 * and the futex calls order that bump before our return from the
	 * wait, so a requeued waiter always sees the change. */
	if (r == ETIMEDOUT && __atomic_load_n(&c->seq, __ATOMIC_RELAXED) != seq)
		r = 0;
	/* release: see wait_cancelled */
	__atomic_fetch_sub(&c->waiters, 1, __ATOMIC_RELEASE);
	wp_count(WP_COND, WP_ACQ);
	/* glibc's robust mutexes answer EOWNERDEAD here: pass it on */
	int le = wp_mutex_relock(m);
	if (le)
		return le;
	return r == ETIMEDOUT ? ETIMEDOUT : 0;
}

int wp_cond_signal(struct wp_cond *c)
{
	/* seq_cst, the load and the increment: more than No lost wakeup
	 * needs (the mutex orders the waiter's count before this load,
	 * pairing (1); the kernel orders the increment against its wait,
	 * pairing (2)) */
	if (__atomic_load_n(&c->waiters, __ATOMIC_SEQ_CST) == 0)
		return 0;
	__atomic_fetch_add(&c->seq, 1, __ATOMIC_SEQ_CST);
	wp_futex_wake(&c->seq, 1, 0);
	return 0;
}

int wp_cond_broadcast(struct wp_cond *c)
{
	/* seq_cst: as in wp_cond_signal (No lost wakeup) */
	if (__atomic_load_n(&c->waiters, __ATOMIC_SEQ_CST) == 0)
		return 0;
	unsigned s = __atomic_add_fetch(&c->seq, 1, __ATOMIC_SEQ_CST);
	struct wp_mutex *m = __atomic_load_n(&c->mutex, __ATOMIC_SEQ_CST);
	unsigned flags = __atomic_load_n(&c->flags, __ATOMIC_SEQ_CST);
	if (m && !(flags & WP_COND_MIXED) && !wp_mutex_is_glibc(m) &&
	    wp_futex_requeue(&c->seq, 1, (unsigned *)&m->lock, s) == 0) {
		/* The flags load above does not cover a waiter with another
		 * mutex X that reads seq after our increment (so it sleeps on
		 * s, which the requeue compares equal), sets MIXED after that
		 * load, and queues before our requeue: the kernel then moved it
		 * onto m's word. Nothing would wake it there (m may well be
		 * free), and the unlock chain of the m-waiters breaks when it is
		 * woken and takes X instead of m: sleepers left on m's word for
		 * good. So look again. Such a waiter did its fetch_or(MIXED)
		 * before its futex_wait queued it, and our requeue found it
		 * queued: both took the futex hash-bucket lock, so the fetch_or
		 * happens before this load and we see MIXED. seq_cst: the same
		 * Dekker pairing as the first load. Waking everything on m's
		 * word is then safe: requeued m-waiters re-take m with xchg(2)
		 * (which rebuilds the chain of wakes), a requeued X-waiter goes
		 * back to X, and plain lockers of m just retry. A waiter with
		 * another mutex that queues after our requeue sleeps on seq and
		 * is not moved. */
		if (__atomic_load_n(&c->flags, __ATOMIC_SEQ_CST) & WP_COND_MIXED)
			wp_futex_wake((unsigned *)&m->lock, INT_MAX, 0);
		return 0;
	}
	wp_futex_wake(&c->seq, INT_MAX, 0);
	return 0;
}

/* ---- exported ---- */

#define OFF(c) (__builtin_expect(wp_off, 0) || cond_is_glibc(PC(c)))

/* A wait on a cond of glibc's (process-shared), with glibc's own wait.
 * glibc unlocks and relocks the mutex with its own code: with a mutex of
 * ours, that code cannot take a mutex that an unlock handed to its
 * sleepers, so such a mutex is no longer handed off (mutex.c "Fair
 * hand-off"), and it reads and writes the owner field in its own format
 * (the kernel tid), so the holder converts the field for the span of the
 * wait (mutex.c "glibc's owner field"). The wait is a cancellation point:
 * glibc's cancellation relocks the mutex and unwinds through this frame,
 * whose cleanup converts the field back before the caller's handlers run
 * (this file is built with -fexceptions). */
enum glibc_wait_kind { GW_WAIT, GW_TIMED, GW_CLOCK };

static void glibc_wait_unwound(void *m)
{
	wp_mutex_glibc_cond_done(m);
}

static __attribute__((noinline)) int glibc_wait_converted(pthread_cond_t *c, pthread_mutex_t *m,
							 enum glibc_wait_kind k, clockid_t clk,
							 const struct timespec *abs);

/* The plain path (no conversion) calls glibc in tail position, with no
 * cleanup frame of ours: a frame with one on the way of glibc's
 * cancellation unwind made GCC 12's ASan abort in the caller's cleanup
 * (its CHECK on the caller's stack frame; check_preload's cancel tests
 * with WEFT_PRELOAD=off under ASan). */
static int glibc_wait(pthread_cond_t *c, pthread_mutex_t *m, enum glibc_wait_kind k,
		      clockid_t clk, const struct timespec *abs)
{
	if (!wp_off && !wp_mutex_is_glibc(PM(m)) && wp_mutex_glibc_cond(PM(m)))
		return glibc_wait_converted(c, m, k, clk, abs);
	if (k == GW_WAIT)
		return WP_REAL(cond_wait)(c, m);
	if (k == GW_TIMED)
		return WP_REAL(cond_timedwait)(c, m, abs);
	return WP_REAL(cond_clockwait)(c, m, clk, abs);
}

static int glibc_wait_converted(pthread_cond_t *c, pthread_mutex_t *m, enum glibc_wait_kind k,
				clockid_t clk, const struct timespec *abs)
{
	int r;

	pthread_cleanup_push(glibc_wait_unwound, m);
	if (k == GW_WAIT)
		r = WP_REAL(cond_wait)(c, m);
	else if (k == GW_TIMED)
		r = WP_REAL(cond_timedwait)(c, m, abs);
	else
		r = WP_REAL(cond_clockwait)(c, m, clk, abs);
	pthread_cleanup_pop(1);
	return r;
}

WP_EXPORT int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a)
{
	if (wp_off)
		return WP_REAL(cond_init)(c, a);
	int mono = 0;
	if (a) {
		int ps;
		clockid_t clk;
		if (pthread_condattr_getpshared(a, &ps) == 0 && ps == PTHREAD_PROCESS_SHARED)
			return WP_REAL(cond_init)(c, a);
		if (pthread_condattr_getclock(a, &clk) == 0 && clk == CLOCK_MONOTONIC)
			mono = 1;
	}
	return wp_cond_init_clock(PC(c), mono);
}

/* Wakes every waiter and waits for them to leave the cond, so that the
 * memory may be freed on return (glibc waits too). Requeued waiters sleep
 * on the mutex word: they are woken there as well and re-sleep on the
 * mutex without touching the cond again. c->mutex is the first mutex ever
 * used with the cond (never cleared, MIXED or not): it is read here when
 * waiters remain, so it must still be valid (docs/preload.md says so). */
WP_EXPORT int pthread_cond_destroy(pthread_cond_t *c)
{
	if (OFF(c))
		return WP_REAL(cond_destroy)(c);
	struct wp_cond *pc = PC(c);
	/* acquire: pairs with the waiters' release decrements, so their last
	 * reads of the cond are done when we see 0 */
	if (__atomic_load_n(&pc->waiters, __ATOMIC_ACQUIRE) == 0)
		return 0;
	__atomic_fetch_add(&pc->seq, 1, __ATOMIC_SEQ_CST);
	wp_futex_wake(&pc->seq, INT_MAX, 0);
	struct wp_mutex *m = __atomic_load_n(&pc->mutex, __ATOMIC_SEQ_CST);
	if (m && !wp_mutex_is_glibc(m))
		wp_futex_wake((unsigned *)&m->lock, INT_MAX, 0);
	while (__atomic_load_n(&pc->waiters, __ATOMIC_ACQUIRE) != 0)
		sched_yield();
	return 0;
}

WP_EXPORT int pthread_cond_signal(pthread_cond_t *c)
{
	if (OFF(c))
		return WP_REAL(cond_signal)(c);
	return wp_cond_signal(PC(c));
}

WP_EXPORT int pthread_cond_broadcast(pthread_cond_t *c)
{
	if (OFF(c))
		return WP_REAL(cond_broadcast)(c);
	return wp_cond_broadcast(PC(c));
}

WP_EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	if (OFF(c))
		return glibc_wait(c, m, GW_WAIT, CLOCK_REALTIME, NULL);
	return wp_cond_wait(PC(c), PM(m), CLOCK_REALTIME, NULL, 1);
}

WP_EXPORT int pthread_cond_timedwait(pthread_cond_t *restrict c,
				     pthread_mutex_t *restrict m,
				     const struct timespec *restrict abs)
{
	if (OFF(c))
		return glibc_wait(c, m, GW_TIMED, CLOCK_REALTIME, abs);
	if (!abs)
		return EINVAL;
	return wp_cond_wait(PC(c), PM(m), CLOCK_REALTIME, abs, 1);
}

WP_EXPORT int pthread_cond_clockwait(pthread_cond_t *restrict c,
				     pthread_mutex_t *restrict m, clockid_t clk,
				     const struct timespec *restrict abs)
{
	if (OFF(c))
		return glibc_wait(c, m, GW_CLOCK, clk, abs);
	if (!wp_clock_ok(clk) || !abs)
		return EINVAL;
	return wp_cond_wait(PC(c), PM(m), clk, abs, 0);
}
