/*
 * runtime/runq_owner.h - the owner's fast paths of the per-worker
 * runqueue, inline: a yield is a push and a pop, and out-of-line calls for
 * them cost a measurable share of the 12 ns budget. The types and the
 * thieves' side are declared in runtime/runq.h, the design and invariants
 * are in runtime/runq.c. These functions take the worker, so this header
 * is included by runtime/worker.h after struct wft_worker (not on its own).
 */
#ifndef WFT_RUNQ_OWNER_H
#define WFT_RUNQ_OWNER_H

#ifndef WFT_WORKER_H
#error "runtime/runq_owner.h is included by runtime/worker.h"
#endif

/* Take one thread from the public ring (owner or thief; runq.c). */
struct weft_thread *wft_runq_ring_pop(struct wft_runq *q);

static inline void wft_rq_lock(struct wft_worker *w)
{
	if (!wft_feat(MAILBOX)) {
		/* acquire: pairs with the release clear in rq_unlock */
		while (atomic_flag_test_and_set_explicit(&w->rqlock, memory_order_acquire))
			wft_cpu_relax();
	}
}

static inline void wft_rq_unlock(struct wft_worker *w)
{
	if (!wft_feat(MAILBOX))
		atomic_flag_clear_explicit(&w->rqlock, memory_order_release);
}

/* Private list append; caller holds rq_lock when NO_MAILBOX. */
static inline void wft_rq_priv_append(struct wft_runq *q, struct weft_thread *first,
			       struct weft_thread *last, uint32_t n)
{
	WFT_ASSERT(n > 0 && (q->phead == NULL) == (q->ptail == NULL));
	last->link = NULL;
	if (q->ptail)
		q->ptail->link = first;
	else
		q->phead = first;
	q->ptail = last;
	q->pcount += n;
	/* relaxed: a hint for thieves deciding whether to set split_req */
	atomic_store_explicit(&q->npriv, q->pcount, memory_order_relaxed);
}

static inline void wft_runq_push_owner(struct wft_worker *w, struct weft_thread *t)
{
	wft_rq_lock(w);
	wft_rq_priv_append(&w->rq, t, t, 1);
	wft_rq_unlock(w);
}

static inline void wft_runq_push_chain_owner(struct wft_worker *w, struct weft_thread *first,
			       struct weft_thread *last, uint32_t n)
{
	wft_rq_lock(w);
	wft_rq_priv_append(&w->rq, first, last, n);
	wft_rq_unlock(w);
}

static inline void wft_runq_push_front_owner(struct wft_worker *w, struct weft_thread *t)
{
	struct wft_runq *q = &w->rq;

	wft_rq_lock(w);
	t->link = q->phead;
	q->phead = t;
	if (!q->ptail)
		q->ptail = t;
	q->pcount++;
	/* relaxed: a hint for thieves deciding whether to set split_req */
	atomic_store_explicit(&q->npriv, q->pcount, memory_order_relaxed);
	wft_rq_unlock(w);
}

/* Unlink the private list's head t (non-NULL); caller holds rq_lock when
 * NO_MAILBOX. */
static inline void wft_rq_priv_unlink_head(struct wft_runq *q, struct weft_thread *t)
{
	WFT_ASSERT(q->phead == t && q->pcount > 0);
	q->phead = t->link;
	if (!q->phead)
		q->ptail = NULL;
	q->pcount--;
	/* relaxed: a hint for thieves deciding whether to set split_req */
	atomic_store_explicit(&q->npriv, q->pcount, memory_order_relaxed);
}
static inline struct weft_thread *wft_runq_pop_owner(struct wft_worker *w)
{
	struct wft_runq *q = &w->rq;
	struct weft_thread *t;

	/* relaxed loads: head may only grow (thieves), tail is ours; a stale
	 * "non-empty" is resolved by ring_pop, a stale "empty" only means a
	 * thief emptied it */
	if (atomic_load_explicit(&q->head, memory_order_relaxed) !=
	    atomic_load_explicit(&q->tail, memory_order_relaxed)) {
		t = wft_runq_ring_pop(q);
		if (t)
			return t;
	}
	/* The unlocked peek only with MAILBOX: without it remote wakers write
	 * phead under rqlock, and even a discarded plain read is a data race
	 * (TSan, WEFT_FEATURES=NO_MAILBOX) */
	if (wft_feat(MAILBOX) && !q->phead)
		return NULL;
	wft_rq_lock(w);
	t = q->phead;
	if (t)
		wft_rq_priv_unlink_head(q, t);
	wft_rq_unlock(w);
	return t;
}

/* Runnable threads (approximate for non-owners). */
static inline uint32_t wft_runq_size(struct wft_worker *w)
{
	struct wft_runq *q = &w->rq;

	/* relaxed: approximate by contract */
	return atomic_load_explicit(&q->tail, memory_order_relaxed) -
	       atomic_load_explicit(&q->head, memory_order_relaxed) +
	       atomic_load_explicit(&q->npriv, memory_order_relaxed);
}

#endif
