/*
 * sync/cond.c - weft_cond_t: condition variable for weft_mutex_t, with wait
 * morphing (no stampede on broadcast).
 *
 * What it owns
 *   The cond's FIFO of waiting records and the move of signalled records
 *   onto the mutex (the idea of the kernel's FUTEX_CMP_REQUEUE, done in one
 *   address space under the two objects' small locks).
 *
 * Objects and states
 *   struct wft_cond: qlock, the queue, the mutex current waiters use, and an
 *   atomic count of queued records (a lockless "anyone waiting?" check).
 *   A waiter's record (struct wft_swaiter on its stack) is in one of:
 *     ON_COND   queued on the cond (where = ON_COND, queued = 1);
 *     ON_MUTEX  moved to the mutex by a signal: queued on the mutex, or
 *               woken by it (COMPETE or HANDED), or by the signal itself as
 *               the mutex's woken waiter when the mutex was free.
 *   `where` changes ON_COND -> ON_MUTEX only with both the cond's and the
 *   mutex's qlock held (wft_mutex_requeue runs under the cond's qlock), so
 *   either lock is enough to read it.
 *
 * Invariants
 *   I1. c->nwait = number of ON_COND records; c->mutex != NULL iff
 *       nwait > 0 (then it is the mutex all waiters passed).
 *   I2. A record leaves the cond queue only under c->qlock: by a signal
 *       (-> ON_MUTEX) or by its own timeout (it returns ETIMEDOUT).
 *   I3. Lock order: c->qlock, then m->qlock; never the reverse.
 *
 * Protocol
 *   "Wait": check that the caller owns m; under c->qlock queue the record
 *   (tail) and count it; drop c->qlock; unlock m; park. The record is queued
 *   before m is released, so a signaller that takes m afterwards (or just
 *   reads nwait after taking m) sees it: the classic "no lost signal"
 *   argument rests on m, not on a fence.
 *   After the park: woken by the mutex -> finish acquiring m
 *   (wft_mutex_relock: HANDED means we own it, COMPETE means compete as the
 *   mutex's woken waiter). Timed out -> under c->qlock: still ON_COND ->
 *   unlink, relock m, return ETIMEDOUT; already ON_MUTEX -> the signal won
 *   (the wait succeeded); keep waiting, now for the mutex, with no deadline.
 *
 *   "Signal"/"Broadcast": lockless check nwait == 0 -> nothing to do. Under
 *   c->qlock unlink one record (wft_wake_q_pick: the head, or a cache-hot
 *   one among the first few) or all of them, and hand them to
 *   wft_mutex_requeue(): if m is free (and has no woken waiter) the first
 *   becomes its woken waiter and is woken after the locks are dropped; the
 *   rest are queued on m with WAITERS set, so each later unlock of m wakes
 *   exactly one (no herd, no wake-to-block-again).
 *
 *   Concurrency: signal, broadcast, wait, timeout of a waiter, and the
 *   mutex's own lock/unlock may all overlap. Linearisation: a wait joins the
 *   cond when its record is queued (under c->qlock, while holding m); a
 *   signal takes effect when it unlinks records (under c->qlock); a timeout
 *   when it unlinks its own record.
 *
 *     waiter                        signaller (holding m or not)
 *     ------                        ---------
 *     (holds m)                     lock m (optional)
 *     qlock c; queue; qunlock c     read nwait (relaxed)
 *     unlock m (release) -------->  if 0: return  [if it holds m, it took m
 *     park                                          after our unlock, so it
 *                                                   reads our increment]
 *                                   qlock c; unlink; requeue; qunlock c
 *
 *   Either the signaller's nwait read sees our record, or the signal
 *   happened before our wait (it did not hold m across our queueing), which
 *   POSIX allows to be missed, because the increment is ordered before the
 *   unlock of m that the signaller's lock of m synchronises with.
 *   Interleavings considered: timeout racing a signal (`where` decides under
 *   c->qlock); timeout after the requeue (wait on for m); broadcast while m
 *   is being released (the requeue's CAS re-checks the owner); a signal
 *   without holding m, m free (the first record is woken as m's woken
 *   waiter); waiters passing two different mutexes (EINVAL for the second).
 *
 * Rejected alternatives
 *   - Waking all waiters on broadcast and letting them fight for m: each
 *     wakes, finds m held, parks again (the thundering herd of seed 003).
 *   - A sequence-number futex cond (glibc's old design): needs the waker to
 *     wake and the wakee to block again on the mutex; the requeue avoids
 *     both because we own both queues.
 */
#include "sync/mutex.h"

struct wft_cond {
	struct wft_slock qlock;
	_Atomic uint32_t nwait;       /* ON_COND records; written under qlock */
	struct wft_mutex *mutex;      /* the waiters' mutex (I1); qlock */
	struct wft_waitq q;           /* ON_COND records, FIFO; qlock */
};
_Static_assert(sizeof(struct wft_cond) <= sizeof(weft_cond_t), "cond fits its public type");

#define cond_of(pc) ((struct wft_cond *)(void *)(pc))

/*
 * Context: any; no concurrent use of c. May park: no.
 * Returns: 0, EINVAL (c NULL).
 */
int weft_cond_init(weft_cond_t *c)
{
	if (!c)
		return EINVAL;
	*c = (weft_cond_t)WEFT_COND_INITIALIZER;
	return 0;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (c NULL), EBUSY (waiters).
 */
int weft_cond_destroy(weft_cond_t *pc)
{
	struct wft_cond *c = cond_of(pc);
	bool busy;

	if (!pc)
		return EINVAL;
	wft_slock_lock(&c->qlock);
	/* relaxed: under qlock */
	busy = wft_load(&c->nwait, relaxed) != 0;
	wft_slock_unlock(&c->qlock);
	return busy ? EBUSY : 0;
}

static int wait_common(weft_cond_t *pc, weft_mutex_t *pm, weft_time_t deadline)
{
	struct wft_cond *c = cond_of(pc);
	struct wft_mutex *m = wft_mutex_of(pm);
	struct weft_thread *self;
	struct wft_swaiter sw;
	uintptr_t id;
	int r;

	if (!pc || !pm)
		return EINVAL;
	id = wft_sync_self_id(&self);
	/* relaxed: only the owner itself can make this true */
	if (wft_mutex_owner(wft_load(&m->state, relaxed)) != id)
		return EPERM;
	wft_swaiter_init(&sw, id);

	wft_slock_lock(&c->qlock);
	if (c->mutex && c->mutex != m) {
		wft_slock_unlock(&c->qlock);
		return EINVAL;
	}
	c->mutex = m;
	wft_waitq_push_back(&c->q, &sw);
	/* relaxed: ordered before signallers by our unlock of m (see above) */
	wft_store(&c->nwait, wft_load(&c->nwait, relaxed) + 1, relaxed);
	wft_slock_unlock(&c->qlock);

	if (wft_mutex_unlock_id(m, id) != 0)
		wft_panic("cond: unlock of an owned mutex failed");

	r = wft_waiter_wait(&sw.w, deadline);
	if (r == ETIMEDOUT) {
		wft_slock_lock(&c->qlock);
		if (sw.where == WFT_SW_ON_COND) {
			wft_waitq_remove(&c->q, &sw);
			/* relaxed: under qlock */
			wft_store(&c->nwait, wft_load(&c->nwait, relaxed) - 1, relaxed);
			if (wft_waitq_empty(&c->q))
				c->mutex = NULL;
			wft_slock_unlock(&c->qlock);
			wft_mutex_lock_id(m, id, self);
			return ETIMEDOUT;
		}
		wft_slock_unlock(&c->qlock);
		/* Signalled before the deadline: now a mutex waiter (or its
		 * woken one); wait for the mutex's WOKEN store. */
		wft_waiter_wait(&sw.w, WEFT_TIME_INFINITE);
	}
	return wft_mutex_relock(m, &sw, self);
}

/*
 * Context: any. May park: yes.
 * Returns: 0, EINVAL (c or m NULL, or a different mutex than the current
 * waiters'), EPERM (m not owned by the caller).
 */
int weft_cond_wait(weft_cond_t *c, weft_mutex_t *m)
{
	return wait_common(c, m, WEFT_TIME_INFINITE);
}

/*
 * Context: any. May park: yes.
 * Returns: as weft_cond_wait, plus ETIMEDOUT (m is relocked).
 */
int weft_cond_timedwait(weft_cond_t *c, weft_mutex_t *m, weft_time_t deadline)
{
	return wait_common(c, m, deadline);
}

/* Unlink one record (all = false) or all of them, and requeue them on the
 * mutex; wakees go into wq. Context: any. May park: no. */
static void signal_common(struct wft_cond *c, bool all, struct wft_wake_q *wq)
{
	struct wft_waitq list = { NULL, NULL };
	struct wft_swaiter *sw;
	struct wft_mutex *m;

	/* relaxed: see "Signal" above (m orders it for a signaller holding m) */
	if (wft_load(&c->nwait, relaxed) == 0)
		return;
	wft_slock_lock(&c->qlock);
	m = c->mutex;
	if (all) {
		wft_waitq_splice_back(&list, &c->q);
		/* relaxed: under qlock */
		wft_store(&c->nwait, 0, relaxed);
	} else if ((sw = wft_wake_q_pick(&c->q, WFT_PICK_RUN_NOW)) != NULL) {
		wft_waitq_remove(&c->q, sw);
		wft_waitq_push_back(&list, sw);
		/* relaxed: under qlock */
		wft_store(&c->nwait, wft_load(&c->nwait, relaxed) - 1, relaxed);
	}
	if (wft_waitq_empty(&c->q))
		c->mutex = NULL;
	if (!wft_waitq_empty(&list))
		wft_mutex_requeue(m, &list, wq);   /* I3: cond, then mutex */
	wft_slock_unlock(&c->qlock);
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (c NULL).
 */
int weft_cond_signal(weft_cond_t *c)
{
	struct wft_wake_q wq = { 0 };

	if (!c)
		return EINVAL;
	signal_common(cond_of(c), false, &wq);
	wft_wake_q_flush(&wq);
	return 0;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (c NULL).
 */
int weft_cond_broadcast(weft_cond_t *c)
{
	struct wft_wake_q wq = { 0 };

	if (!c)
		return EINVAL;
	signal_common(cond_of(c), true, &wq);
	wft_wake_q_flush(&wq);
	return 0;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (c or wq NULL).
 */
int weft_cond_signal_wq(weft_cond_t *c, weft_wakeq_t *wq)
{
	if (!c || !wq)
		return EINVAL;
	signal_common(cond_of(c), false, wft_wake_q_of(wq));
	return 0;
}
