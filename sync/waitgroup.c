/*
 * sync/waitgroup.c - weft_waitgroup_t: Go's sync.WaitGroup.
 *
 * What it owns
 *   The counter word and the queue of waiters for counter == 0.
 *
 * State word (wg->state, 64 bits)
 *
 *   bits 63..32       | bits 31..1 | bit 0
 *   counter (int32)   | 0          | WAITERS
 *
 *   counter   The number of outstanding tasks. Changed by CAS in add; never
 *             negative (an add that would make it so returns EINVAL).
 *   WAITERS   The queue is non-empty. Set under qlock by a waiter's CAS that
 *             saw counter != 0; cleared under qlock, together with taking
 *             the whole queue, by the add that brought the counter to 0.
 *
 *   I1. Under qlock: WAITERS <=> queue non-empty.
 *
 * Protocol
 *     waiter                            last add (counter -> 0)
 *     ------                            --------
 *     qlock                             CAS: counter -> 0 (RMW, reads the
 *     CAS: WAITERS on, only if            latest value: WAITERS or not)
 *       counter != 0 (RMW)              if WAITERS: qlock; if counter is
 *     queue; qunlock; park                still 0: clear WAITERS, take all;
 *                                         qunlock; wake them
 *   Either the waiter's CAS sees counter 0 (it returns at once) or the add's
 *   CAS sees WAITERS (it takes qlock after the waiter's qunlock and wakes
 *   the record), because both are RMWs of the same word.
 *   Linearisation: the add = its CAS; the wait = its CAS seeing 0, or the
 *   unlink of its record by the zeroing add.
 *   Interleavings considered: the zeroing add racing a new waiter (above);
 *   an add raising the counter again before the zeroing add got qlock
 *   (misuse in Go's terms: the queued waiters then keep waiting for the
 *   next zero, and WAITERS stays set for them); concurrent dones (CAS).
 *
 * Rejected alternatives
 *   - A mutex + cond pair: two objects and a herd on the final done.
 */
#include "sync/waitq.h"

#define WFT_WG_WAITERS ((uint64_t)1)
#define WFT_WG_SHIFT 32

struct wft_waitgroup {
	_Atomic uint64_t state;
	struct wft_slock qlock;
	uint32_t pad;
	struct wft_waitq q;           /* qlock */
};
_Static_assert(sizeof(struct wft_waitgroup) <= sizeof(weft_waitgroup_t), "waitgroup fits");

#define wg_of(p) ((struct wft_waitgroup *)(void *)(p))

static inline int64_t counter(uint64_t v)
{
	return (int32_t)(uint32_t)(v >> WFT_WG_SHIFT);
}

/*
 * Context: any; no concurrent use. May park: no.
 * Returns: 0, EINVAL (wg NULL).
 */
int weft_waitgroup_init(weft_waitgroup_t *wg)
{
	if (!wg)
		return EINVAL;
	*wg = (weft_waitgroup_t)WEFT_WAITGROUP_INITIALIZER;
	return 0;
}

static void wake_all(struct wft_waitgroup *wg)
{
	struct wft_wake_q q = { 0 };
	struct wft_swaiter *sw;
	uint64_t v;

	wft_slock_lock(&wg->qlock);
	/* relaxed: acted on through the CAS */
	v = wft_load(&wg->state, relaxed);
	while (counter(v) == 0 && (v & WFT_WG_WAITERS)) {
		/* release: publishes the done tasks' effects to the waiters
		 * (who also get them through WOKEN) */
		if (wft_cas(&wg->state, &v, v & ~WFT_WG_WAITERS, release)) {
			while ((sw = wft_waitq_pop_front(&wg->q)) != NULL) {
				sw->w.result = WFT_SW_GRANTED;
				wft_wake_q_add(&q, &sw->w);
			}
			break;
		}
	}
	wft_slock_unlock(&wg->qlock);
	wft_wake_q_flush(&q);
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (wg NULL, counter would leave 0..INT32_MAX).
 */
int weft_waitgroup_add(weft_waitgroup_t *pwg, long delta)
{
	struct wft_waitgroup *wg = wg_of(pwg);
	uint64_t v, nv;
	int64_t c;

	if (!pwg || delta < -(long)INT32_MAX || delta > (long)INT32_MAX)
		return EINVAL;
	/* relaxed: acted on through the CAS */
	v = wft_load(&wg->state, relaxed);
	for (;;) {
		c = counter(v) + delta;
		if (c < 0 || c > INT32_MAX)
			return EINVAL;
		nv = ((uint64_t)c << WFT_WG_SHIFT) | (v & WFT_WG_WAITERS);
		/* acq_rel: release publishes this task's effects to whoever
		 * sees the counter reach 0; acquire makes the zeroing add see
		 * all earlier dones before it wakes the waiters */
		if (wft_cas(&wg->state, &v, nv, acq_rel))
			break;
	}
	if (c == 0 && (v & WFT_WG_WAITERS))
		wake_all(wg);
	return 0;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (wg NULL, counter already 0).
 */
int weft_waitgroup_done(weft_waitgroup_t *wg)
{
	return weft_waitgroup_add(wg, -1);
}

/*
 * Context: any. May park: yes.
 * Returns: 0, EINVAL (wg NULL).
 */
int weft_waitgroup_wait(weft_waitgroup_t *pwg)
{
	struct wft_waitgroup *wg = wg_of(pwg);
	struct wft_swaiter sw;
	uint64_t v;

	if (!pwg)
		return EINVAL;
	/* acquire: the tasks' effects before their dones happen before our
	 * return; pairs with the acq_rel CAS in add */
	v = wft_load(&wg->state, acquire);
	if (counter(v) == 0)
		return 0;
	wft_swaiter_init(&sw, 0);
	wft_slock_lock(&wg->qlock);
	for (;;) {
		if (counter(v) == 0) {
			wft_slock_unlock(&wg->qlock);
			/* acquire: as above (the value came from a CAS or load
			 * below; make it an acquire for the return path) */
			wft_fence(acquire);
			return 0;
		}
		/* relaxed: the RMW pairs with the zeroing add's CAS (argument
		 * above); the record is published by qunlock */
		if (wft_cas(&wg->state, &v, v | WFT_WG_WAITERS, relaxed))
			break;
	}
	wft_waitq_push_back(&wg->q, &sw);
	wft_slock_unlock(&wg->qlock);
	wft_waiter_wait(&sw.w, WEFT_TIME_INFINITE);
	return 0;
}
