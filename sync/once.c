/*
 * sync/once.c - weft_once(): run an initialiser exactly once.
 *
 * What it owns
 *   The once word and the queue of threads waiting for a running
 *   initialiser.
 *
 * State word (o->state)
 *   0 NEW      nobody has started fn.
 *   1 RUNNING  one thread (o->runner) is running fn; others queue and park.
 *   2 DONE     fn has returned; weft_once returns at once (one acquire load).
 *   NEW -> RUNNING by CAS (the winner runs fn); RUNNING -> DONE by the
 *   runner, stored under qlock. Never goes back.
 *
 * Invariants
 *   I1. A record is queued only while the state is RUNNING (checked under
 *       qlock); the runner stores DONE under qlock and then unlinks every
 *       record, so no waiter is left behind.
 *
 * Protocol
 *   Fast: load state (acquire: fn's effects happen before the caller's next
 *   step; pairs with the release store of DONE) == DONE -> return 0.
 *   The winner of the NEW -> RUNNING CAS runs fn, then under qlock stores
 *   DONE and takes the queue, and wakes the waiters after qlock (one wake
 *   queue). A waiter, under qlock: DONE -> return; else queue and park.
 *   Both look at the state under the same qlock, so either the waiter sees
 *   DONE or the runner sees its record (I1); no fence beyond the lock.
 *   Interleavings considered: many first callers (one CAS wins); a waiter
 *   arriving as the runner finishes (qlock orders them); fn calling
 *   weft_once on the same object (EDEADLK: the runner's id is recorded);
 *   fn that never returns (its waiters wait forever, as with pthread_once).
 *
 * Rejected alternatives
 *   - Spinning until DONE: fn may take arbitrarily long or park itself.
 */
#include "sync/waitq.h"

enum { ONCE_NEW = 0, ONCE_RUNNING = 1, ONCE_DONE = 2 };

struct wft_once {
	_Atomic uint32_t state;
	struct wft_slock qlock;
	_Atomic uintptr_t runner;     /* owner id of the thread running fn */
	struct wft_waitq q;           /* waiters while RUNNING; qlock */
};
_Static_assert(sizeof(struct wft_once) <= sizeof(weft_once_t), "once fits its public type");

#define once_of(p) ((struct wft_once *)(void *)(p))

__attribute__((noinline))
static int once_slow(struct wft_once *o, void (*fn)(void))
{
	struct wft_wake_q q = { 0 };
	struct weft_thread *self;
	struct wft_swaiter sw, *p;
	uint32_t z = ONCE_NEW;
	uintptr_t id = wft_sync_self_id(&self);

	/* relaxed: the RMW only elects the runner (one modification order,
	 * one winner). Nothing is read on its strength (no earlier writer has
	 * anything to publish), and fn's effects reach the others through the
	 * release store of DONE below, paired with their acquire loads; the
	 * losers never read fn's data before that. */
	if (wft_cas(&o->state, &z, ONCE_RUNNING, relaxed)) {
		/* relaxed: read only by ourselves for EDEADLK (others compare
		 * it with their own ids, which never match) */
		wft_store(&o->runner, id, relaxed);
		fn();
		wft_store(&o->runner, 0, relaxed);
		wft_slock_lock(&o->qlock);
		/* release: publishes fn's effects; pairs with the acquire load
		 * of the fast path */
		wft_store(&o->state, ONCE_DONE, release);
		while ((p = wft_waitq_pop_front(&o->q)) != NULL) {
			p->w.result = WFT_SW_GRANTED;
			wft_wake_q_add(&q, &p->w);
		}
		wft_slock_unlock(&o->qlock);
		wft_wake_q_flush(&q);
		return 0;
	}
	/* relaxed: see above */
	if (wft_load(&o->runner, relaxed) == id)
		return EDEADLK;
	wft_swaiter_init(&sw, id);
	wft_slock_lock(&o->qlock);
	/* relaxed: under qlock, which the runner's DONE store is also under */
	if (wft_load(&o->state, relaxed) == ONCE_DONE) {
		wft_slock_unlock(&o->qlock);
		return 0;
	}
	wft_waitq_push_back(&o->q, &sw);
	wft_slock_unlock(&o->qlock);
	wft_waiter_wait(&sw.w, WEFT_TIME_INFINITE);
	return 0;
}

/*
 * Context: any. May park: yes (while another thread runs fn).
 * Returns: 0, EINVAL (o or fn NULL), EDEADLK (called from inside fn).
 */
int weft_once(weft_once_t *po, void (*fn)(void))
{
	struct wft_once *o = once_of(po);

	if (!po || !fn)
		return EINVAL;
	/* acquire: pairs with the release store of DONE (fn's effects) */
	if (wft_likely(wft_load(&o->state, acquire) == ONCE_DONE))
		return 0;
	return once_slow(o, fn);
}
