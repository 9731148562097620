/*
 * runtime/runq.c - the per-worker runqueue: a split queue.
 *
 * What it owns: the runnable threads of one worker, in FIFO order, split in
 * two parts:
 *
 *   [ public ring (oldest) ] [ private list (newest) ]
 *     owner pops, thieves       owner only: push at the tail, pop at the
 *     steal half with CAS       head when the ring is empty
 *
 * Why split (the design decision): owner push and pop without an atomic
 * read-modify-write, so that a yield costs about a dozen ns. A Go-style ring
 * where owner and thieves both consume with CAS on head costs the owner one
 * lock cmpxchg (~6 ns) on every pop; a Chase-Lev deque avoids it only with a
 * StoreLoad fence (same cost) and pops LIFO. Here the owner pushes and pops
 * the private list with plain loads and stores, and exposes work in the
 * public ring only when someone can use it (the split-deque idea of
 * work-stealing schedulers such as Lace): when a thief asks (split_req) or
 * when idle workers exist (wft_idle_wake_one publishes before kicking).
 * Pops take the ring first (it is older), so FIFO holds across both parts,
 * and a yielding thread goes behind every runnable thread of its worker.
 *
 * The price: work sitting in the private part cannot be stolen until the
 * owner reaches a scheduling point. Cooperative threads reach one at every
 * block, yield or spawn, and a thread that computes without any of those
 * holds its worker anyway. Idle workers set split_req and sleep; the owner
 * publishes at its next pick and leaves the work to their tick or the
 * strand check (see runtime/idle.c "Surplus"). A yield
 * that leaves an unpinned yielder queued behind another thread publishes
 * at once (worker.c offer_yielder): the thread it yielded to may never
 * reach a scheduling point.
 *
 * Objects and states: ring[head .. tail) (indices mod WFT_RUNQ_RING, free
 * running 32-bit counters) is the public part; phead..ptail (linked through
 * t->link) the private part, pcount its length, npriv a copy of pcount that
 * thieves may read.
 *
 * Invariants:
 *   I1 tail - head <= WFT_RUNQ_RING (the owner publishes only into free slots).
 *   I2 Only the owner writes tail and ring slots; consumers only advance
 *      head, by CAS.
 *   I3 Pinned threads (t->pin >= 0) are never published: a thief must not
 *      take them. The price: a publish moves unpinned threads ahead of
 *      older pinned ones (the ring is popped first), so FIFO, and a
 *      yield's place behind every runnable thread, hold among threads of
 *      one kind only when both kinds share a worker while a thief asks
 *      (test config/randomize_shuffles_next_slot, under NO_MAILBOX).
 *   I4 With NO_MAILBOX the private list is also written by remote wakers,
 *      so every private-list access then holds w->rqlock.
 *
 * Concurrency table:
 *                  push/pop_owner  publish   steal
 *   push/pop_owner no (owner)      no        yes
 *   publish        no              no        yes
 *   steal          yes             yes       yes
 *
 * Steal (Go's runqgrab, written from the description): read head (acquire)
 * and tail (acquire: pairs with the release store of tail in publish, so
 * the slots below tail are written), take n = half of the victim's whole
 * queue (ring plus npriv, rounded up; at most the ring and at most
 * WFT_RUNQ_RING / 2) slot values
 * (relaxed atomic loads: the owner may be reusing a slot that an older head
 * covered; the CAS below then fails and the values are thrown away), then
 * CAS head from h to h + n (acq_rel). Linearisation point: that CAS.
 * The owner's pop from the ring is the same CAS with n = 1.
 *
 * Choice of WFT_RUNQ_RING = 256: the ring only holds work offered to
 * thieves; 256 entries (2 KiB) cover a half-steal of any realistic burst
 * while keeping the structure in a few cache lines' reach (Go uses 256).
 */
#include "runtime/runq.h"
#include "runtime/worker.h"

/* rq_lock, rq_unlock, priv_append and the owner push/pop fast paths are
 * inline in runtime/runq.h. */

void wft_runq_init_unsafe(struct wft_runq *q)
{
	atomic_init(&q->head, 0);
	atomic_init(&q->tail, 0);
	atomic_init(&q->split_req, 0);
	atomic_init(&q->npriv, 0);
	for (unsigned i = 0; i < WFT_RUNQ_RING; i++)
		atomic_init(&q->ring[i], NULL);
	q->phead = q->ptail = NULL;
	q->pcount = 0;
}

/* Append a chain from another thread (NO_MAILBOX baseline). */
void wft_runq_push_locked_remote(struct wft_worker *w, struct weft_thread *first,
				 struct weft_thread *last, uint32_t n)
{
	/* acquire: pairs with the release clear in rq_unlock */
	while (atomic_flag_test_and_set_explicit(&w->rqlock, memory_order_acquire))
		wft_cpu_relax();
	wft_rq_priv_append(&w->rq, first, last, n);
	atomic_flag_clear_explicit(&w->rqlock, memory_order_release);
}

/* Take half (rounded up) of the unpinned threads of w's private list, the
 * oldest, for another worker (NO_MAILBOX only: the list is then under
 * w->rqlock, I4, so a rescuer may unlink from it; with MAILBOX the owner
 * touches it without a lock and no one else may). Half, as a steal takes:
 * the list also holds the owner's own local work, which it will run when
 * it gets to it. The others stay in order (I3 for the pinned ones).
 * Returns how many, the chain in *taken. Used by idle.c's
 * stranded-mail rescue: the locked insert of a remote wake is this mode's
 * mailbox. */
uint32_t wft_runq_take_private_locked(struct wft_worker *w, struct wft_chain *taken)
{
	struct wft_runq *q = &w->rq;
	struct wft_chain stay;
	struct weft_thread *t;
	uint32_t want = 0;

	WFT_ASSERT(!wft_feat(MAILBOX));
	wft_rq_lock(w);
	for (t = q->phead; t; t = t->link)
		want += t->pin < 0;
	wft_chain_split(q->phead, NULL, (want + 1) / 2, taken, &stay);
	q->phead = stay.first;
	q->ptail = stay.last;
	q->pcount = stay.n;
	/* relaxed: a hint for thieves deciding whether to set split_req */
	atomic_store_explicit(&q->npriv, q->pcount, memory_order_relaxed);
	wft_rq_unlock(w);
	return taken->n;
}

/* Take one thread from the public ring. Owner or thief. */
struct weft_thread *wft_runq_ring_pop(struct wft_runq *q)
{
	/* acquire: pairs with the acq_rel CAS of other consumers */
	uint32_t h = atomic_load_explicit(&q->head, memory_order_acquire);

	for (;;) {
		/* acquire: pairs with the release store of tail in publish */
		uint32_t t = atomic_load_explicit(&q->tail, memory_order_acquire);
		struct weft_thread *th;

		if (h == t)
			return NULL;
		/* relaxed: validated by the CAS below (see Steal above) */
		th = atomic_load_explicit(&q->ring[h % WFT_RUNQ_RING], memory_order_relaxed);
		/* acq_rel: claims slot h; the release pairs with the owner's
		 * acquire load of head in publish (slot reuse), the acquire with
		 * other consumers' CAS */
		if (atomic_compare_exchange_weak_explicit(&q->head, &h, h + 1,
				memory_order_acq_rel, memory_order_acquire))
			return th;
	}
}

uint32_t wft_runq_publish_owner(struct wft_worker *w)
{
	struct wft_runq *q = &w->rq;
	struct weft_thread **pp, *t;
	/* acquire: pairs with the consumers' head CAS (release half): their
	 * relaxed reads of the slots they took happen before we overwrite
	 * those slots (without it C11 allows load buffering: a consumer's slot
	 * read returning our new value, the same thread handed out twice; the
	 * hardware's control dependency alone is not a C11 guarantee). Only
	 * consumers move head, so the ring has at least this much room. */
	uint32_t h = atomic_load_explicit(&q->head, memory_order_acquire);
	uint32_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
	uint32_t room = WFT_RUNQ_RING - (tail - h);
	uint32_t quota, moved = 0;

	/* relaxed: the request is a hint; clearing it first means a request
	 * that arrives during the publish is seen at the next pick */
	atomic_store_explicit(&q->split_req, 0, memory_order_relaxed);
	wft_rq_lock(w);
	quota = (q->pcount + 1) / 2;
	if (quota > room)
		quota = room;
	/* Walk from the oldest private thread, moving unpinned ones (I3). */
	struct weft_thread *kept = NULL;   /* last pinned thread left in place */

	pp = &q->phead;
	while ((t = *pp) && quota) {
		if (t->pin >= 0) {
			kept = t;
			pp = &t->link;
			continue;
		}
		*pp = t->link;
		/* relaxed: the slot is published by the release store of tail */
		atomic_store_explicit(&q->ring[tail % WFT_RUNQ_RING], t, memory_order_relaxed);
		tail++;
		q->pcount--;
		quota--;
		moved++;
	}
	if (!*pp)
		q->ptail = kept;   /* walked to the end: the tail is the last kept one */
	/* relaxed: hint */
	atomic_store_explicit(&q->npriv, q->pcount, memory_order_relaxed);
	wft_rq_unlock(w);
	/* release: publishes the slots written above; pairs with the acquire
	 * load of tail in ring_pop / wft_runq_steal */
	atomic_store_explicit(&q->tail, tail, memory_order_release);
	return moved;
}

struct weft_thread *wft_runq_steal(struct wft_worker *w, struct wft_worker *victim)
{
	struct wft_runq *vq = &victim->rq;
	struct weft_thread *grab[WFT_RUNQ_RING / 2];
	/* acquire: pairs with the acq_rel CAS of other consumers */
	uint32_t h = atomic_load_explicit(&vq->head, memory_order_acquire);
	uint32_t n;

	for (;;) {
		/* acquire: pairs with the release store of tail in publish */
		uint32_t t = atomic_load_explicit(&vq->tail, memory_order_acquire);

		n = t - h;
		if (n == 0 || n > WFT_RUNQ_RING) {
			if (n == 0) {
				/* Nothing public. If the owner hides work in its
				 * private list, ask it to publish (relaxed: a hint the
				 * owner polls at every pick). */
				if (atomic_load_explicit(&vq->npriv, memory_order_relaxed) > 1 &&
				    !atomic_load_explicit(&vq->split_req, memory_order_relaxed))
					atomic_store_explicit(&vq->split_req, 1, memory_order_relaxed);
				return NULL;
			}
			/* inconsistent snapshot (head moved past our tail read) */
			h = atomic_load_explicit(&vq->head, memory_order_acquire);
			continue;
		}
		{
			/* Half of the victim's queue, not half of its ring: the
			 * owner publishes half of its private list when asked
			 * (publish_owner), so half of the ring is a quarter of
			 * the work. relaxed: npriv is a hint; a stale value
			 * only sizes the batch. */
			uint32_t priv = atomic_load_explicit(&vq->npriv, memory_order_relaxed);
			uint32_t half = (uint32_t)(((uint64_t)n + priv + 1) / 2);

			if (half < n)
				n = half;
			if (n > WFT_RUNQ_RING / 2)
				n = WFT_RUNQ_RING / 2;   /* grab[]'s size */
		}
		for (uint32_t i = 0; i < n; i++)
			/* relaxed: validated by the CAS (see Steal above) */
			grab[i] = atomic_load_explicit(&vq->ring[(h + i) % WFT_RUNQ_RING],
						       memory_order_relaxed);
		/* acq_rel: claims [h, h+n); the release pairs with the owner's
		 * acquire load of head in publish (slot reuse), the acquire with
		 * other consumers' CAS */
		if (atomic_compare_exchange_weak_explicit(&vq->head, &h, h + n,
				memory_order_acq_rel, memory_order_acquire))
			break;
	}
	/* Keep the first to run now; the rest go to our private list in order. */
	if (n > 1) {
		for (uint32_t i = 1; i + 1 < n; i++)
			grab[i]->link = grab[i + 1];
		wft_rq_lock(w);
		wft_rq_priv_append(&w->rq, grab[1], grab[n - 1], n - 1);
		wft_rq_unlock(w);
	}
	wft_stat_add(w, steals, n);
	return grab[0];
}

bool wft_runq_has_work(struct wft_worker *v)
{
	struct wft_runq *q = &v->rq;

	/* seq_cst: stronger than the pattern needs (the writers store tail
	 * with release and npriv relaxed, so there is no StoreLoad partner on
	 * their side); a stale answer here only delays stealing, bounded by
	 * the "Surplus" rule of runtime/idle.c. Kept seq_cst: off the fast
	 * path (the idle re-check only). */
	return atomic_load_explicit(&q->tail, memory_order_seq_cst) !=
	       atomic_load_explicit(&q->head, memory_order_seq_cst) ||
	       atomic_load_explicit(&q->npriv, memory_order_seq_cst) > 0;
}
