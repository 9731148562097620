/*
 * runtime/runq.h - the per-worker runqueue: a public ring that thieves take
 * half of with one CAS, and a private FIFO only the owner touches; chains of
 * threads and how they split between movable and pinned (runtime/runq.c).
 * The owner's inline fast paths need the worker and are in
 * runtime/runq_owner.h.
 */
#ifndef WFT_RUNQ_H
#define WFT_RUNQ_H

#include "runtime/thread.h"

struct wft_worker;

#define WFT_RUNQ_RING 256   /* public ring slots; see runq.c for the choice */

struct wft_runq {
	/* Public ring: consumers (owner and thieves) CAS head; only the owner
	 * writes tail and slots. */
	_Atomic uint32_t head wft_cacheline_aligned;
	_Atomic uint32_t tail;
	_Atomic int split_req;            /* a thief asks the owner to publish work */
	_Atomic uint32_t npriv;           /* size of the private list, a hint for thieves */
	struct weft_thread *_Atomic ring[WFT_RUNQ_RING];
	/* Private FIFO: owner only (or under lock with NO_MAILBOX). */
	struct weft_thread *phead wft_cacheline_aligned;
	struct weft_thread *ptail;
	uint32_t pcount;
};

void wft_runq_init_unsafe(struct wft_runq *q);
/* Owner push/pop/size: inline in runtime/runq.h (included below struct
 * wft_worker). */
/* NO_MAILBOX baseline: a remote waker appends under the target's rqlock. */
void wft_runq_push_locked_remote(struct wft_worker *w, struct weft_thread *first,
				 struct weft_thread *last, uint32_t n);
/* Move up to half of the private list into the public ring (pinned threads
 * stay). Returns how many moved. Owner. */
uint32_t wft_runq_publish_owner(struct wft_worker *w);
/* Steal about half of victim's public ring into w's runqueue; returns one
 * thread to run now (or NULL). Context: w's own worker (the thief). See
 * wft_worker_steal_next() for the victim's next slot. */
struct weft_thread *wft_runq_steal(struct wft_worker *w, struct wft_worker *victim);

/* A chain of threads linked through t->link: first..last, n of them. */
struct wft_chain {
	struct weft_thread *first, *last;
	uint32_t n;
};
/* Split the chain from t (to NULL, or through end) into the unpinned
 * threads that may move to another worker (at most quota of them, the
 * first ones) and the others, each in its order; both NULL-terminated.
 * Context: the caller owns every thread of the chain. */
static inline void wft_chain_split(struct weft_thread *t, struct weft_thread *end, uint32_t quota,
				   struct wft_chain *move, struct wft_chain *stay)
{
	struct weft_thread *next;

	*move = (struct wft_chain){ NULL, NULL, 0 };
	*stay = (struct wft_chain){ NULL, NULL, 0 };
	for (; t; t = next) {
		struct wft_chain *c = t->pin < 0 && move->n < quota ? move : stay;

		next = t == end ? NULL : t->link;
		t->link = NULL;
		if (c->last)
			c->last->link = t;
		else
			c->first = t;
		c->last = t;
		c->n++;
	}
}
/* True if a thief could find work in victim (public or private non-empty). */
bool wft_runq_has_work(struct wft_worker *victim);
uint32_t wft_runq_take_private_locked(struct wft_worker *w, struct wft_chain *taken);

#endif
