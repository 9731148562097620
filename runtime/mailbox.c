/*
 * runtime/mailbox.c - the per-worker mailbox: remote wakeups without the
 * target's lock (seed 000, the kernel's ttwu_queue / wake_list).
 *
 * What it owns: an intrusive multi-producer single-consumer (MPSC) stack of
 * threads linked through t->link. Any thread pushes (a single thread or a
 * pre-linked chain, one CAS either way); only the owning worker takes, and
 * it takes everything at once with one exchange.
 *
 * Objects and states: head == NULL (empty) or the most recently pushed
 * thread; each thread's link points to the one pushed before it.
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
 * Take: exchange head with NULL (acquire), then reverse the detached list so
 * that threads come out in push order (FIFO, as the issue requires; the
 * kernel's llist_del_all + llist_reverse_order). Linearisation point: the
 * exchange.
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
#include "runtime/wft.h"

bool wft_mailbox_push_chain(struct wft_mpsc *mb, struct weft_thread *first,
			    struct weft_thread *last)
{
	struct weft_thread *old, *prev = NULL, *t = first;

	/* The chain comes oldest first (FIFO, as wft_runq_push_locked_remote
	 * takes it too); the mailbox is a stack whose head is the newest, and
	 * take_all reverses it. So reverse the chain here, before the CAS
	 * loop, our own threads still: last becomes the top, first the
	 * bottom. (Pushing it unreversed drained a batch newest-first: x,c,b,a
	 * for a single push x followed by the chain a->b->c; found by review.) */
	while (t != last) {
		struct weft_thread *n = t->link;

		t->link = prev;
		prev = t;
		t = n;
	}
	last->link = prev;
	/* relaxed: only a guess for the CAS below, which validates it */
	old = atomic_load_explicit(&mb->head, memory_order_relaxed);
	do {
		first->link = old;
		/* seq_cst (a release CAS is enough to publish the chain; seq_cst
		 * also orders it before the waker's seq_cst load of w->sleep:
		 * the StoreLoad of the kick protocol, runtime/idle.c) */
	} while (!atomic_compare_exchange_weak_explicit(&mb->head, &old, last,
			memory_order_seq_cst, memory_order_relaxed));
	return old == NULL;
}

struct weft_thread *wft_mailbox_take_all(struct wft_mpsc *mb)
{
	struct weft_thread *t, *rev = NULL;

	/* acquire: pairs with the release (seq_cst) CAS in push; makes every
	 * pushed thread's link and wake data visible */
	t = atomic_exchange_explicit(&mb->head, NULL, memory_order_acquire);
	while (t) {
		struct weft_thread *n = t->link;

		t->link = rev;
		rev = t;
		t = n;
	}
	return rev;
}
