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
 *   atomic count of queued records (a lockless "anyone waiting?" check),
 *   the count of cancelled records on their way out (leaving) and the
 *   destroy waiting for them (drainer).
 *   A waiter's record (struct wft_swaiter on its stack) is in one of these
 *   states, kept in its atomic sw->claim (sync/waitq.h):
 *     ON_COND    claim WAITING: queued on the cond (queued = 1).
 *     ON_MUTEX   claim CLAIMED: a signal won the CAS WAITING -> CLAIMED
 *                (under c->qlock) and moved it to the mutex: queued on the
 *                mutex, or woken by it (COMPETE or HANDED), or by the signal
 *                itself as the mutex's woken waiter when the mutex was free.
 *                Its owner never touches c again.
 *     CANCELLED  claim CANCELLED: the owner's deadline passed and it won the
 *                CAS WAITING -> CANCELLED (lockless, before touching c). It
 *                is still on c->q, or a signaller met it there and unlinked
 *                it into c->leaving; either way c counts it (I4) until the
 *                owner takes c->qlock once more.
 *   The claim byte is written by CAS only, never under "both locks": the
 *   CAS is what decides between a signal and a timeout, so the owner can
 *   read the outcome without c->qlock (c may be gone by then).
 *
 * Invariants
 *   I1. c->nwait = number of records on c->q (ON_COND or CANCELLED);
 *       c->mutex != NULL iff c->q is non-empty (then it is the mutex all
 *       those waiters passed).
 *   I2. A record leaves c->q only under c->qlock: claimed by a signal (->
 *       ON_MUTEX), or CANCELLED and unlinked by a signaller (-> leaving) or
 *       by its owner.
 *   I3. Lock order: c->qlock, then m->qlock; never the reverse.
 *   I4. Every CANCELLED record whose owner has not yet taken c->qlock after
 *       its cancel is counted: on c->q (nwait) or in c->leaving. So while
 *       an owner may still touch c, c->q is non-empty or c->leaving > 0,
 *       and destroy does not return (see "Destroy").
 *
 * Protocol
 *   "Wait": check that the caller owns m; under c->qlock queue the record
 *   (tail) and count it; drop c->qlock; unlock m; park. The record is queued
 *   before m is released, so a signaller that takes m afterwards (or just
 *   reads nwait after taking m) sees it: the classic "no lost signal"
 *   argument rests on m, not on a fence.
 *   After the park: woken by the mutex -> finish acquiring m
 *   (wft_mutex_relock: HANDED means we own it, COMPETE means compete as the
 *   mutex's woken waiter).
 *
 *   "Timeout": the park returned ETIMEDOUT. Before touching c the owner
 *   CASes its claim WAITING -> CANCELLED.
 *     won:  no signal can take the record any more, and c still counts it
 *           (I4), so c is alive: under c->qlock unlink it (still queued) or
 *           decrement c->leaving (a signaller unlinked it), wake a waiting
 *           destroy if that drained c, drop c->qlock, then relock m (c is
 *           not touched again) and return ETIMEDOUT.
 *     lost: a signal claimed it first: it is a mutex waiter now, and the
 *           wait succeeded. Wait for the mutex's WOKEN with no deadline and
 *           never touch c: POSIX lets the signaller destroy and free c
 *           right after its broadcast.
 *
 *     owner (timed out)              signaller (holds c->qlock)
 *     CAS claim WAITING->CANCELLED   CAS claim WAITING->CLAIMED
 *     won: qlock c; unlink or        won: unlink; requeue on m
 *          leaving--; qunlock c      lost: unlink; leaving++
 *     lost: wait for WOKEN (m)
 *
 *   Either the owner's CAS sees WAITING (no signal will ever move it, and
 *   it takes c->qlock while I4 keeps c alive) or the signaller's CAS sees
 *   WAITING (the owner never touches c again), because both CAS the same
 *   byte and only WAITING can be changed.
 *
 *   "Signal"/"Broadcast": lockless check nwait == 0 -> nothing to do. Under
 *   c->qlock claim one record (wft_wake_q_pick: the head, or a cache-hot
 *   one among the first few; a CANCELLED one met on the way is unlinked
 *   into c->leaving and the pick repeated) or all of them, and hand the
 *   claimed ones to
 *   wft_mutex_requeue(): if m is free (and has no woken waiter) the first
 *   becomes its woken waiter and is woken after the locks are dropped; the
 *   rest are queued on m with WAITERS set, so each later unlock of m wakes
 *   exactly one (no herd, no wake-to-block-again).
 *
 *   Concurrency: signal, broadcast, wait, timeout of a waiter, and the
 *   mutex's own lock/unlock may all overlap. Linearisation: a wait joins the
 *   cond when its record is queued (under c->qlock, while holding m); a
 *   signal takes effect when its claim CAS succeeds (under c->qlock); a
 *   timeout when the owner's cancel CAS succeeds.
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
 *   "Destroy": under c->qlock. Nothing queued and nothing leaving: 0. A
 *   record still WAITING on c->q (a waiter no signal took): EBUSY. Only
 *   CANCELLED records counted (I4): their owners are running and need only
 *   c->qlock, so destroy records itself as c->drainer, drops c->qlock and
 *   parks; the owner whose unlink empties c->q with c->leaving == 0 takes
 *   the drainer under c->qlock and wakes it after its qunlock, after which
 *   nobody touches c. This is what makes "lock m; broadcast; destroy; free"
 *   safe when a timed waiter's deadline fired just before the broadcast
 *   (glibc's pthread_cond_destroy waits for such waiters the same way).
 *   EBUSY instead would leave the caller nothing to do but retry, and the
 *   POSIX idiom ignores the return value.
 *   A successful destroy sets c->destroyed (under c->qlock; when it waits
 *   for leaving owners, before it parks): later waits and destroys check
 *   it under c->qlock, signals after their lockless nwait look finds no
 *   waiter (a destroyed cond has none), and return EINVAL.
 *
 *   Interleavings considered: timeout racing a signal (the claim CAS
 *   decides, see "Timeout"); timeout after the requeue (the cancel CAS
 *   fails: wait on for m without touching c); a broadcast that meets a
 *   CANCELLED record (unlinked into leaving; destroy waits for its owner);
 *   destroy racing a cancelling owner (the owner is counted, I4, from its
 *   CAS on); broadcast while m
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
	_Atomic uint32_t nwait;       /* records on q (I1); written under qlock */
	struct wft_mutex *mutex;      /* the waiters' mutex (I1); qlock */
	struct wft_waitq q;           /* queued records, FIFO; qlock */
	uint32_t leaving;             /* I4: cancelled records a signaller
	                               * unlinked, owners not yet back; qlock */
	_Atomic uint32_t destroyed;   /* 1 after a successful destroy, until
	                               * init; written under qlock */
	struct wft_waiter *drainer;   /* destroy waiting for I4 to drain; qlock */
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

/* If the cond is drained (I4: no record queued, none leaving) and destroy
 * waits for that, hand its waiter to the caller to wake after qunlock.
 * Locks: c->qlock. */
static struct wft_waiter *drained_locked(struct wft_cond *c)
{
	struct wft_waiter *d = c->drainer;

	if (d == NULL || !wft_waitq_empty(&c->q) || c->leaving != 0)
		return NULL;
	c->drainer = NULL;
	return d;
}

/*
 * See "Destroy" above.
 * Context: any. May park: yes, briefly (only while cancelled records are
 * still counted, I4; their owners need nothing but c->qlock).
 * After 0, c->destroyed makes every call but init return EINVAL.
 * Returns: 0, EINVAL (c NULL or already destroyed), EBUSY (a live waiter is queued, or another
 * destroy is already draining c).
 */
int weft_cond_destroy(weft_cond_t *pc)
{
	struct wft_cond *c = cond_of(pc);
	struct wft_swaiter *sw;
	struct wft_waiter self;
	int err = 0;

	if (!pc)
		return EINVAL;
	wft_slock_lock(&c->qlock);
	/* relaxed: under qlock */
	if (wft_load(&c->destroyed, relaxed)) {
		err = EINVAL;
		goto out;
	}
	if (wft_waitq_empty(&c->q) && c->leaving == 0) {
		/* relaxed: under qlock; signal's lockless look at it is a
		 * use-after-destroy check, racing only with a caller's bug */
		wft_store(&c->destroyed, 1, relaxed);
		goto out;
	}
	if (c->drainer != NULL) {
		err = EBUSY;
		goto out;
	}
	for (sw = wft_waitq_first(&c->q); sw; sw = wft_waitq_next(sw)) {
		/* relaxed: WAITING may turn CANCELLED right after (the owner's
		 * lockless CAS) but never back; a WAITING record is a waiter
		 * no signal took, and destroying c under it is EBUSY */
		if (wft_load(&sw->claim, relaxed) == WFT_SW_WAITING) {
			err = EBUSY;
			goto out;
		}
	}
	/* Only cancelled records are left: their owners are running (their
	 * deadline passed) and each takes c->qlock once more; the last one
	 * wakes us (drained_locked). */
	wft_waiter_init(&self);
	c->drainer = &self;
	/* relaxed: as above. Marked now, while we wait: the owners still
	 * leaving only unlink themselves, which does not look at it */
	wft_store(&c->destroyed, 1, relaxed);
	wft_slock_unlock(&c->qlock);
	while (wft_waiter_wait(&self, WEFT_TIME_INFINITE) != 0)
		;
	return 0;
out:
	wft_slock_unlock(&c->qlock);
	return err;
}

static int wait_common(weft_cond_t *pc, weft_mutex_t *pm, weft_time_t deadline)
{
	struct wft_cond *c = cond_of(pc);
	struct wft_mutex *m = wft_mutex_of(pm);
	struct wft_waiter *d;
	struct weft_thread *self;
	struct wft_swaiter sw;
	uintptr_t id;
	int r;

	if (!pc || !pm)
		return EINVAL;
	id = wft_lock_self_id(&self);
	/* relaxed: only the owner itself can make this true */
	if (wft_mutex_owner(wft_load(&m->state, relaxed)) != id)
		/* relaxed: a destroyed mutex's word never changes */
		return wft_load(&m->state, relaxed) == WFT_MUTEX_DESTROYED ? EINVAL : EPERM;
	wft_swaiter_init(&sw, id);

	wft_slock_lock(&c->qlock);
	/* relaxed: under qlock */
	if ((c->mutex && c->mutex != m) || wft_load(&c->destroyed, relaxed)) {
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
		/* "Timeout": decide on our own record before touching c. */
		if (wft_swaiter_cancel(&sw)) {
			/* I4: still counted by c, so c is alive */
			wft_slock_lock(&c->qlock);
			if (sw.queued) {
				wft_waitq_remove(&c->q, &sw);
				/* relaxed: under qlock */
				wft_store(&c->nwait, wft_load(&c->nwait, relaxed) - 1, relaxed);
			} else {
				c->leaving--;
			}
			if (wft_waitq_empty(&c->q))
				c->mutex = NULL;
			d = drained_locked(c);
			wft_slock_unlock(&c->qlock);
			/* from here on c may be freed: touch only m and d */
			if (d != NULL)
				wft_waiter_wake(d);
			/* a relock that took m over from a dead owner says so:
			 * EOWNERDEAD outranks ETIMEDOUT (the caller must repair
			 * what the owner left before trusting it) */
			return wft_mutex_lock_id(m, id, self) == EOWNERDEAD ? EOWNERDEAD : ETIMEDOUT;
		}
		/* A signal claimed us before the deadline: we are a mutex waiter
		 * (or its woken one) now. Wait for the mutex's WOKEN store
		 * without touching c, which may already be destroyed. */
		while (wft_waiter_wait(&sw.w, WEFT_TIME_INFINITE) != 0)
			;
	}
	return wft_mutex_relock(m, &sw, self);
}

/*
 * Context: any. May park: yes.
 * Returns: 0, EINVAL (c or m NULL or destroyed, or a different mutex than
 * the current waiters'), EPERM (m not owned by the caller), EOWNERDEAD (m's
 * owner exited holding it while we waited; we own m, see weft_mutex_lock).
 */
int weft_cond_wait(weft_cond_t *c, weft_mutex_t *m)
{
	return wait_common(c, m, WEFT_TIME_INFINITE);
}

/*
 * Context: any. May park: yes.
 * Returns: as weft_cond_wait, plus ETIMEDOUT (m is relocked); EOWNERDEAD
 * when the relock after a timeout took m over from a dead owner.
 */
int weft_cond_timedwait(weft_cond_t *c, weft_mutex_t *m, weft_time_t deadline)
{
	return wait_common(c, m, deadline);
}

/* Take sw off c->q (a signaller, sw met at the head or picked). Returns
 * true if it was claimed (append it to list), false if its owner had
 * cancelled it (now counted in c->leaving, I4).
 * Locks: c->qlock. */
static bool take_locked(struct wft_cond *c, struct wft_swaiter *sw, struct wft_waitq *list)
{
	bool claimed = wft_swaiter_claim_locked(sw);

	wft_waitq_remove(&c->q, sw);
	/* relaxed: under qlock */
	wft_store(&c->nwait, wft_load(&c->nwait, relaxed) - 1, relaxed);
	if (claimed)
		wft_waitq_push_back(list, sw);
	else
		c->leaving++;
	return claimed;
}

/* Claim one record (all = false) or all of them, and requeue them on the
 * mutex; wakees go into wq. Cancelled records met on the way are unlinked
 * and counted as leaving (I4). Context: any. May park: no.
 * Returns: 0, EINVAL (c destroyed). */
static int signal_common(struct wft_cond *c, bool all, struct wft_wake_q *wq)
{
	struct wft_waitq list = { NULL, NULL };
	struct wft_swaiter *sw;
	struct wft_mutex *m;

	/* relaxed: see "Signal" above (m orders it for a signaller holding m).
	 * A destroyed cond has no waiters, so its check costs nothing here:
	 * relaxed, use after destroy races only with the caller's own bug */
	if (wft_load(&c->nwait, relaxed) == 0)
		return wft_load(&c->destroyed, relaxed) ? EINVAL : 0;
	wft_slock_lock(&c->qlock);
	m = c->mutex;
	if (all) {
		while ((sw = wft_waitq_first(&c->q)) != NULL)
			take_locked(c, sw, &list);
	} else {
		while ((sw = wft_wake_q_pick(&c->q, WFT_PICK_RUN_NOW)) != NULL)
			if (take_locked(c, sw, &list))
				break;
	}
	if (wft_waitq_empty(&c->q))
		c->mutex = NULL;
	if (!wft_waitq_empty(&list))
		wft_mutex_requeue(m, &list, wq);   /* I3: cond, then mutex */
	wft_slock_unlock(&c->qlock);
	return 0;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (c NULL or destroyed).
 */
int weft_cond_signal(weft_cond_t *c)
{
	struct wft_wake_q wq = { 0 };

	int r;

	if (!c)
		return EINVAL;
	r = signal_common(cond_of(c), false, &wq);
	wft_wake_q_flush(&wq);
	return r;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (c NULL or destroyed).
 */
int weft_cond_broadcast(weft_cond_t *c)
{
	struct wft_wake_q wq = { 0 };

	int r;

	if (!c)
		return EINVAL;
	r = signal_common(cond_of(c), true, &wq);
	wft_wake_q_flush(&wq);
	return r;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (c or wq NULL, or c destroyed).
 */
int weft_cond_signal_wq(weft_cond_t *c, weft_wakeq_t *wq)
{
	if (!c || !wq)
		return EINVAL;
	return signal_common(cond_of(c), false, wft_wake_q_of(wq));
}
