/*
 * runtime/mailbox.c - the per-worker mailbox: remote wakeups without the
 * target's lock (seed 000, the kernel's ttwu_queue / wake_list).
 *
 * What it owns: an intrusive multi-producer single-consumer (MPSC) stack of
 * threads linked through t->link. Any thread pushes (a single thread or a
 * pre-linked chain, one CAS either way); only the owning worker takes, and
 * it takes everything at once with one exchange.
 *
 * Objects and states: head == NULL (empty) or the first thread of the most
 * recently pushed chain. Each pushed chain keeps its own order (oldest
 * first, linked through t->link) and its last thread links to the first
 * thread of the chain pushed before it: a stack of FIFO chains. The first
 * thread of each chain carries a header (mb_last, mb_n, mb_stealable),
 * written by the pusher before its CAS.
 *
 * Invariants:
 *   I1 A thread is in at most one mailbox, once: only the winner of its
 *      PARKED -> RUNNABLE CAS (or its spawner) pushes it (runtime/wake.c).
 *   I2 Between push and take, nobody but the pusher writes t->link; the
 *      pusher writes it before the release CAS that publishes t.
 *
 * Concurrency table:
 *                 push       take_all
 *   push          yes        yes
 *   take_all      yes        no (owner only)
 *
 * Push: read head (relaxed), last->link = head, CAS head from that value to
 * first (release: publishes the chain's links and everything the waker wrote
 * before, e.g. t->wake_reason; pairs with the acquire exchange in take_all).
 * The CAS is seq_cst: it is also the "publish" half of the kick protocol in
 * runtime/idle.c (the waker then reads w->sleep with a seq_cst load).
 * Linearisation point: the successful CAS.
 *
 * Take: exchange head with NULL (acquire), then reverse the order of the
 * chains (not of the threads: each chain is already FIFO) so that threads
 * come out in push order, FIFO as the issue requires (the kernel's
 * llist_del_all + llist_reverse_order, at chain granularity). The walk
 * touches two threads per chain (first, via its header, and last), not
 * every thread: the list is cold on the taker's CPU, and a wake queue
 * delivers hundreds of threads as one chain (sembench), which a
 * per-thread reversal walked twice with a cache miss per step; MAILBOX on
 * measured 0.78x of the locked baseline that way. Linearisation point:
 * the exchange.
 *
 * ABA: push never reads a node's link, and take detaches the whole list, so
 * the classic Treiber-stack ABA (pop reading a stale next) cannot happen: a
 * CAS that succeeds against a recycled head value still links a correct list.
 *
 * Return value of push: whether the mailbox was empty, so that a burst of
 * wakeups costs one kick at most (the kernel sends the IPI only when the
 * wake list was empty). Why that loses no wakeup: if the mailbox was not
 * empty, the earlier push's thread has not been taken yet; take_all is one
 * exchange, so the take that gets it gets ours too, and the pusher of the
 * earlier item did the kick check (see "Kick" in runtime/idle.c).
 *
 * Rejected: locking the target's runqueue for remote inserts (kept as the
 * NO_MAILBOX baseline in runtime/wake.c); a bounded ring (a wakeup must never
 * fail or block).
 */
#include "runtime/mailbox.h"

bool wft_mailbox_push_chain(struct wft_mpsc *mb, struct weft_thread *first,
			    struct weft_thread *last, uint32_t n)
{
	struct weft_thread *old;
	bool stealable = first->pin < 0;

	/* the chain header (our threads still: we won their wake CAS); the
	 * walk stops at the first unpinned thread, usually the first one */
	for (struct weft_thread *t = first; !stealable && t != last; t = t->link)
		stealable = t->link->pin < 0;
	first->mb_last = last;
	first->mb_n = n;
	first->mb_stealable = stealable;
	/* relaxed: only a guess for the CAS below, which validates it */
	old = atomic_load_explicit(&mb->head, memory_order_relaxed);
	do {
		last->link = old;
		/* seq_cst (a release CAS is enough to publish the chain and
		 * its header; seq_cst also orders it before the waker's seq_cst
		 * load of w->sleep: the StoreLoad of the kick protocol,
		 * runtime/idle.c) */
	} while (!atomic_compare_exchange_weak_explicit(&mb->head, &old, first,
			memory_order_seq_cst, memory_order_relaxed));
	return old == NULL;
}

struct weft_thread *wft_mailbox_take_all(struct wft_mpsc *mb, struct weft_thread **last,
					 uint32_t *n, bool *stealable)
{
	struct weft_thread *c, *rev = NULL;
	uint32_t k = 0;
	bool st = false;

	/* acquire: pairs with the release (seq_cst) CAS in push; makes every
	 * pushed chain's links, header and wake data visible */
	c = atomic_exchange_explicit(&mb->head, NULL, memory_order_acquire);
	*last = c ? c->mb_last : NULL;   /* the newest chain's last thread */
	while (c) {
		struct weft_thread *cl = c->mb_last, *next = cl->link;

		k += c->mb_n;
		st |= c->mb_stealable;
		cl->link = rev;   /* this chain goes before the later ones */
		rev = c;
		c = next;
	}
	*n = k;
	*stealable = st;
	return rev;
}
