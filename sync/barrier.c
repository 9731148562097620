/*
 * sync/barrier.c - weft_barrier_t: count threads meet, one of them is told
 * it was the serial one, all leave together.
 *
 * What it owns
 *   The barrier's arrival count and its queue of waiting records.
 *
 * Objects and states
 *   struct wft_barrier: count (set by init; 0 = not initialised), arrived
 *   (of the current generation), gen (generations completed), and the
 *   queue of the current generation's parked records; all under qlock.
 *
 * Invariants
 *   I1. 0 <= arrived < count between calls; the queue holds exactly the
 *       `arrived` records of the current generation.
 *   I2. A woken waiter never touches the barrier again, so the barrier may
 *       be reused (next generation) or destroyed as soon as the last
 *       arrival has unlinked the records.
 *
 * Protocol
 *   "Wait": under qlock, count the arrival. Not the last: queue the record,
 *   drop qlock, park (no deadline, so no timeout race); return 0 when
 *   woken. The last: start the next generation (arrived = 0, gen + 1),
 *   unlink every record into a wake queue (result GRANTED), drop qlock,
 *   flush (one batch per target worker), return
 *   WEFT_BARRIER_SERIAL_THREAD.
 *   All transitions happen under qlock, so there is no lock-free protocol
 *   here; the release/acquire of qlock and of the WOKEN store order each
 *   waiter's work before the barrier against everyone's work after it.
 *   Interleavings considered: a fast thread arriving for generation g+1
 *   before the slow ones of generation g have run (their records are
 *   already unlinked and granted: I1, I2); destroy racing the last wakes
 *   (allowed by I2).
 *
 * Rejected alternatives
 *   - A sense-reversing spin barrier: wastes the worker that a parked
 *     weft thread would leave to others (gangs spin; barriers park).
 */
#include "sync/waitq.h"

struct wft_barrier {
	struct wft_slock qlock;
	uint32_t count;       /* 0 = not initialised; qlock after init */
	uint32_t arrived;     /* qlock */
	uint32_t gen;         /* qlock */
	struct wft_waitq q;   /* the current generation's records; qlock */
};
_Static_assert(sizeof(struct wft_barrier) <= sizeof(weft_barrier_t), "barrier fits");

#define barrier_of(p) ((struct wft_barrier *)(void *)(p))

/*
 * Context: any; no concurrent use. May park: no.
 * Returns: 0, EINVAL (b NULL, count 0).
 */
int weft_barrier_init(weft_barrier_t *pb, unsigned count)
{
	if (!pb || count == 0)
		return EINVAL;
	*pb = (weft_barrier_t){ { 0 } };
	barrier_of(pb)->count = count;
	return 0;
}

/*
 * Context: any. May park: yes.
 * Returns: WEFT_BARRIER_SERIAL_THREAD (one caller per generation), 0,
 * EINVAL (b NULL or not initialised).
 */
int weft_barrier_wait(weft_barrier_t *pb)
{
	struct wft_barrier *b = barrier_of(pb);
	struct wft_wake_q q = { 0 };
	struct wft_swaiter sw, *p;

	if (!pb)
		return EINVAL;
	wft_slock_lock(&b->qlock);
	if (b->count == 0) {
		wft_slock_unlock(&b->qlock);
		return EINVAL;
	}
	if (++b->arrived < b->count) {
		wft_swaiter_init(&sw, 0);
		wft_waitq_push_back(&b->q, &sw);
		wft_slock_unlock(&b->qlock);
		wft_waiter_wait(&sw.w, WEFT_TIME_INFINITE);
		return 0;
	}
	b->arrived = 0;
	b->gen++;
	while ((p = wft_waitq_pop_front(&b->q)) != NULL) {
		p->w.result = WFT_SW_GRANTED;
		wft_wake_q_add(&q, &p->w);
	}
	wft_slock_unlock(&b->qlock);
	wft_wake_q_flush(&q);
	return WEFT_BARRIER_SERIAL_THREAD;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (b NULL), EBUSY (threads are waiting).
 */
int weft_barrier_destroy(weft_barrier_t *pb)
{
	struct wft_barrier *b = barrier_of(pb);
	bool busy;

	if (!pb)
		return EINVAL;
	wft_slock_lock(&b->qlock);
	busy = b->arrived != 0;
	if (!busy)
		b->count = 0;
	wft_slock_unlock(&b->qlock);
	return busy ? EBUSY : 0;
}
