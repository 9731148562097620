/*
 * runtime/mailbox.h - a worker's mailbox: an intrusive MPSC lock-free LIFO
 * stack of threads, drained whole by the owner and reversed into FIFO order
 * (runtime/mailbox.c).
 */
#ifndef WFT_MAILBOX_H
#define WFT_MAILBOX_H

#include "runtime/thread.h"

struct wft_mpsc {
	struct weft_thread *_Atomic head;
};

/* Push the pre-linked chain first..last, oldest first (FIFO: they drain in
 * that order after what was pushed before; n threads; last->link is
 * rewritten). Returns
 * true if the mailbox was empty before. Context: any. */
bool wft_mailbox_push_chain(struct wft_mpsc *mb, struct weft_thread *first,
			    struct weft_thread *last, uint32_t n);
/* Take everything, in push (FIFO) order, linked through t->link; *last
 * and *n get the chain's last thread and length, *stealable whether any
 * of them is unpinned (for a one-step splice;
 * one pass over the list, which is cold on the taker's CPU). Returns NULL
 * if empty. Context: the owner worker only. */
struct weft_thread *wft_mailbox_take_all(struct wft_mpsc *mb, struct weft_thread **last,
					 uint32_t *n, bool *stealable);
static inline bool wft_mailbox_empty(struct wft_mpsc *mb)
{
	/* relaxed: a hint; the scheduler re-checks after the idle fence */
	return atomic_load_explicit(&mb->head, memory_order_relaxed) == NULL;
}

#endif
