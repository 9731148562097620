/*
 * sync/sem.c - weft_sem_t: counting semaphore with direct hand-off to FIFO
 * waiters and batched wakeups (wake queues).
 *
 * What it owns
 *   The semaphore word, its wait queue, and the post paths that grant units
 *   to waiters and collect them in a wake queue (SEEDS.md A1 sembench, B3:
 *   "all work is done by the waker; the woken task does not even take a
 *   lock").
 *
 * State word (s->v, 64 bits)
 *
 *   bits 63..33 | bit 32  | bits 31..0
 *   0           | WAITERS | value (0 .. WEFT_SEM_VALUE_MAX)
 *
 *   value     Units available. Taken by a CAS (value - 1) without the lock
 *             while WAITERS is clear.
 *   WAITERS   The queue is non-empty. Posters must take the slow path and
 *             grant their units to queued waiters first (no barging past a
 *             waiter). Set under qlock by a waiter's CAS that saw value 0;
 *             cleared under qlock when the queue empties.
 *
 *   I1. WAITERS => value == 0. (It is set only by a CAS that saw value 0;
 *       while it is set no lockless CAS succeeds: waits need value > 0,
 *       posts need WAITERS clear; so the word changes only under qlock.)
 *   I2. Under qlock: WAITERS <=> queue non-empty.
 *   I3. A granted waiter owns its unit from the moment a poster wins the
 *       claim CAS on its record (under qlock, just before the unlink); it
 *       returns 0 even if its deadline passed meanwhile.
 *   I4. A waiter that cancelled its record (claim CAS WAITING ->
 *       CANCELLED after its deadline) is counted until it has taken qlock
 *       once more: its record is still on s->q, or a poster that met it
 *       there unlinked it into s->leaving. Destroy returns EBUSY while
 *       either is non-zero, so the cancelled waiter's qlock is never a use
 *       after free.
 *
 * Protocol
 *   "Wait": CAS value -> value - 1 (acquire) while value > 0. Else under
 *   qlock: CAS to take a unit, or CAS to set WAITERS; queue the record;
 *   park. On wake: the unit is ours (result GRANTED); return 0 without
 *   touching s (s may even be destroyed by then: the poster may destroy and
 *   free it right after its post returns, see "Timeout" for the timed-out
 *   path, which keeps this promise too).
 *   "Post n": while WAITERS is clear, CAS value -> value + n (release).
 *   Else under qlock: grant one unit each to up to n waiters (pick: head,
 *   or a cache-hot one among the first few), unlinking them into the wake
 *   queue; if that empties the queue, store value = the remaining units with
 *   WAITERS clear (a store is safe by I1). Then flush (post, post_n) or
 *   leave the flush to the caller (post_wq).
 *
 *     waiter                              poster
 *     ------                              ------
 *     qlock                               CAS v: value += n, only if
 *     CAS v: WAITERS on, only if            WAITERS clear (RMW)
 *       value == 0 (RMW)                  else: qlock; grant; qunlock
 *     queue; qunlock; park                flush (wake)
 *
 *   Either the waiter's CAS sees the poster's units (it takes one instead of
 *   queueing) or the poster's CAS sees WAITERS (it goes to qlock, which it
 *   gets after the waiter's qunlock, and grants the record), because both
 *   are RMWs of the same word. No StoreLoad fence is needed.
 *
 *   Linearisation points: wait = the CAS that decrements, or a poster's
 *   claim CAS on its record (I3); post = its CAS, or its grant under qlock;
 *   timed-out wait = its own cancel CAS.
 *
 *   "Timeout": the park returned ETIMEDOUT. Before touching s the waiter
 *   CASes its record's claim WAITING -> CANCELLED (sync/waitq.h).
 *     won:  no poster can grant it any more, and s counts it (I4): under
 *           qlock unlink it (still queued; fix WAITERS) or decrement
 *           s->leaving (a poster unlinked it); ETIMEDOUT, no unit taken.
 *     lost: a poster granted it (I3): wait for the flush's WOKEN, never
 *           touching s, and return 0.
 *
 *     waiter (timed out)               poster (holds qlock)
 *     CAS claim WAITING->CANCELLED     CAS claim WAITING->CLAIMED
 *     won: qlock; unlink or leaving--  won: unlink; GRANTED; wake_q add
 *     lost: wait for WOKEN             lost: unlink; leaving++; next one
 *
 *   Either the waiter's CAS sees WAITING (no unit is granted to it, and it
 *   takes qlock while I4 keeps s alive) or the poster's CAS sees WAITING
 *   (the waiter owns a unit and never touches s again), because both CAS
 *   the same byte and only WAITING can change. So no unit is ever lost or
 *   doubled, and the old window - the waiter saw its deadline, a post
 *   granted and the poster destroyed s, the waiter then took s->qlock - is
 *   closed.
 *
 *   Interleavings considered: post racing a waiter's queueing (above); post
 *   racing a waiter's timeout (sembench -T; "Timeout"); a post that meets a
 *   cancelled record at the head (unlinked into leaving, the unit goes to
 *   the next one or to value); a post_wq whose flush is late (the waiter
 *   waits for it, wake_q.c I3, and does not touch s meanwhile); destroy
 *   after a post_wq and before its flush (0: the granted waiter is
 *   decided); posts larger than the queue (the rest becomes value);
 *   overflow (checked before anything changes).
 *
 * Rejected alternatives
 *   - Waking waiters to retry the decrement (2.2-era semaphores, seed 003):
 *     a herd, and a woken waiter can lose its unit to a barger.
 *   - A negative count for waiters (old kernel semaphores): the grant then
 *     needs a second word for who got what; with direct hand-off the
 *     queue already says it.
 */
#include "sync/waitq.h"

#define WFT_SEM_WAITERS ((uint64_t)1 << 32)
#define WFT_SEM_VALUE   ((uint64_t)0xffffffffu)

struct wft_sem {
	_Atomic uint64_t v;           /* value | WAITERS */
	struct wft_slock qlock;
	uint32_t leaving;             /* I4: cancelled records a poster
	                               * unlinked, owners not yet back; qlock */
	struct wft_waitq q;           /* FIFO; qlock */
};
_Static_assert(sizeof(struct wft_sem) <= sizeof(weft_sem_t), "sem fits its public type");

#define sem_of(ps) ((struct wft_sem *)(void *)(ps))

/*
 * Context: any; no concurrent use of s. May park: no.
 * Returns: 0, EINVAL (s NULL, value > WEFT_SEM_VALUE_MAX).
 */
int weft_sem_init(weft_sem_t *ps, unsigned value)
{
	if (!ps || value > WEFT_SEM_VALUE_MAX)
		return EINVAL;
	*ps = (weft_sem_t){ { 0 } };
	/* relaxed: not shared yet */
	wft_store(&sem_of(ps)->v, value, relaxed);
	return 0;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (s NULL), EBUSY (waiters, including a timed-out one
 * that has not yet left, I4).
 */
int weft_sem_destroy(weft_sem_t *ps)
{
	struct wft_sem *s = sem_of(ps);
	bool busy;

	if (!ps)
		return EINVAL;
	wft_slock_lock(&s->qlock);
	busy = !wft_waitq_empty(&s->q) || s->leaving != 0;
	wft_slock_unlock(&s->qlock);
	return busy ? EBUSY : 0;
}

static inline bool try_take(struct wft_sem *s)
{
	/* relaxed: acted on only through the CAS */
	uint64_t v = wft_load(&s->v, relaxed);

	while (v & WFT_SEM_VALUE) {
		/* acquire: what the poster did before posting happens before
		 * what we do after; pairs with the release CAS in post */
		if (wft_cas_weak(&s->v, &v, v - 1, acquire))
			return true;
	}
	return false;
}

__attribute__((noinline, cold))
static int wait_slow(struct wft_sem *s, weft_time_t deadline)
{
	struct wft_swaiter sw;
	uint64_t v;
	int r;

	wft_swaiter_init(&sw, 0);
	wft_slock_lock(&s->qlock);
	/* relaxed: acted on through the CAS */
	v = wft_load(&s->v, relaxed);
	for (;;) {
		if (v & WFT_SEM_VALUE) {
			/* acquire: as in try_take */
			if (wft_cas(&s->v, &v, v - 1, acquire)) {
				wft_slock_unlock(&s->qlock);
				return 0;
			}
			continue;
		}
		if (deadline != WEFT_TIME_INFINITE && wft_now() >= deadline) {
			wft_slock_unlock(&s->qlock);
			return ETIMEDOUT;
		}
		/* relaxed: the RMW pairs with the poster's CAS (argument above);
		 * the record is published by qunlock */
		if (wft_cas(&s->v, &v, v | WFT_SEM_WAITERS, relaxed))
			break;
	}
	wft_waitq_push_back(&s->q, &sw);
	wft_slock_unlock(&s->qlock);

	r = wft_waiter_wait(&sw.w, deadline);
	if (r == ETIMEDOUT) {
		/* "Timeout": decide on our own record before touching s. */
		if (wft_swaiter_cancel(&sw)) {
			/* I4: s still counts us, so it is alive */
			wft_slock_lock(&s->qlock);
			if (sw.queued) {
				wft_waitq_remove(&s->q, &sw);
				if (wft_waitq_empty(&s->q))
					/* relaxed: under qlock; value is 0 (I1) */
					wft_fand(&s->v, ~WFT_SEM_WAITERS, relaxed);
			} else {
				s->leaving--;
			}
			wft_slock_unlock(&s->qlock);
			return ETIMEDOUT;
		}
		/* Granted first (I3): wait for the flush's WOKEN store without
		 * touching s, which may be destroyed by now. */
		while (wft_waiter_wait(&sw.w, WEFT_TIME_INFINITE) != 0)
			;
	}
	return 0;
}

/*
 * Context: any. May park: yes.
 * Returns: 0, EINVAL (s NULL).
 */
int weft_sem_wait(weft_sem_t *ps)
{
	if (!ps)
		return EINVAL;
	if (wft_likely(try_take(sem_of(ps))))
		return 0;
	return wait_slow(sem_of(ps), WEFT_TIME_INFINITE);
}

/*
 * Context: any. May park: yes.
 * Returns: 0, EINVAL (s NULL), ETIMEDOUT.
 */
int weft_sem_timedwait(weft_sem_t *ps, weft_time_t deadline)
{
	if (!ps)
		return EINVAL;
	if (try_take(sem_of(ps)))
		return 0;
	return wait_slow(sem_of(ps), deadline);
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (s NULL), EAGAIN (value 0).
 */
int weft_sem_trywait(weft_sem_t *ps)
{
	if (!ps)
		return EINVAL;
	return try_take(sem_of(ps)) ? 0 : EAGAIN;
}

/* Grant under qlock. Returns 0 or EOVERFLOW. */
__attribute__((noinline))
static int post_slow(struct wft_sem *s, unsigned n, struct wft_wake_q *wq)
{
	struct wft_swaiter *sw;
	uint64_t v;

	wft_slock_lock(&s->qlock);
	/* relaxed: with WAITERS set the word only changes under qlock (I1) */
	v = wft_load(&s->v, relaxed);
	if (!(v & WFT_SEM_WAITERS)) {
		/* Every waiter left (timeouts) since our look: post lockless. */
		wft_slock_unlock(&s->qlock);
		return -1;
	}
	while (n && (sw = wft_wake_q_pick(&s->q, WFT_PICK_AFFINE)) != NULL) {
		wft_waitq_remove(&s->q, sw);
		if (!wft_swaiter_claim_locked(sw)) {
			/* its owner timed out and cancelled it: it gets no unit;
			 * it still comes for qlock (I4) */
			s->leaving++;
			continue;
		}
		sw->w.result = WFT_SW_GRANTED;
		wft_wake_q_add(wq, &sw->w);
		n--;
	}
	if (wft_waitq_empty(&s->q))
		/* release: the units we add are published like a lockless post;
		 * a store is safe by I1 (value 0, no lockless writer) */
		wft_store(&s->v, (uint64_t)n, release);
	wft_slock_unlock(&s->qlock);
	return 0;
}

static int post_common(struct wft_sem *s, unsigned n, struct wft_wake_q *wq)
{
	uint64_t v;
	int r;

	if (n > WEFT_SEM_VALUE_MAX)
		return EINVAL;
	if (n == 0)
		return 0;
	for (;;) {
		/* relaxed: acted on only through the CAS */
		v = wft_load(&s->v, relaxed);
		while (!(v & WFT_SEM_WAITERS)) {
			if ((v & WFT_SEM_VALUE) + n > WEFT_SEM_VALUE_MAX)
				return EOVERFLOW;
			/* release: publishes what we did before posting to the
			 * thread that takes the unit (acquire CAS in try_take) */
			if (wft_cas_weak(&s->v, &v, v + n, release))
				return 0;
		}
		r = post_slow(s, n, wq);
		if (r >= 0)
			return r;
	}
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (s NULL), EOVERFLOW.
 */
int weft_sem_post(weft_sem_t *ps)
{
	struct wft_wake_q wq = { 0 };
	int r;

	if (!ps)
		return EINVAL;
	r = post_common(sem_of(ps), 1, &wq);
	wft_wake_q_flush(&wq);
	return r;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (s NULL, n > WEFT_SEM_VALUE_MAX), EOVERFLOW.
 */
int weft_sem_post_n(weft_sem_t *ps, unsigned n)
{
	struct wft_wake_q wq = { 0 };
	int r;

	if (!ps)
		return EINVAL;
	r = post_common(sem_of(ps), n, &wq);
	wft_wake_q_flush(&wq);
	return r;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (s or wq NULL, n > WEFT_SEM_VALUE_MAX), EOVERFLOW.
 */
int weft_sem_post_wq(weft_sem_t *ps, unsigned n, weft_wakeq_t *wq)
{
	if (!ps || !wq)
		return EINVAL;
	return post_common(sem_of(ps), n, wft_wake_q_of(wq));
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (s or v NULL).
 */
int weft_sem_getvalue(weft_sem_t *ps, int *v)
{
	if (!ps || !v)
		return EINVAL;
	/* relaxed: a snapshot */
	*v = (int)(wft_load(&sem_of(ps)->v, relaxed) & WFT_SEM_VALUE);
	return 0;
}
