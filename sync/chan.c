/*
 * sync/chan.c - channels (weft_chan_t) and select.
 *
 * What this file owns
 * -------------------
 * The channel object: a ring buffer of fixed-size elements, two wait queues
 * (blocked senders, blocked receivers), a closed flag, and the internal lock
 * that protects all of them (struct wft_slock of sync/slock.h, the lock of
 * every sync object: a bounded spin, then a futex sleep). And select: one waiter queued on several
 * channels at once, completed by exactly one of them. Parking itself (weft
 * thread or OS thread, deadlines) is runtime/waiter.c's struct wft_waiter.
 * Public contract: include/weft/chan.h. Design: docs/design.md "Wake path";
 * docs/seeds.md "pipe-bench", "pipeline" and seed 003 (wake-one).
 *
 * Objects and states
 * ------------------
 *   struct weft_chan   lock word, closed flag, ring (head, count, cap, esize),
 *                      sendq, recvq. Everything but esize/cap (immutable) is
 *                      protected by ch->lock.
 *   struct chan_sel    one per blocked call (a send, a receive or a whole
 *                      select): the parking waiter plus the state word below.
 *                      Lives on the blocked caller's stack.
 *   struct chan_wait   one per queued case: the link in one channel's sendq
 *                      or recvq, the element pointer and the case index. Also
 *                      on the caller's stack. Self-linked when not queued.
 *
 * sel->state, the one word that decides who completes a blocked call:
 *   SEL_WAITING    queued; any peer holding the lock of a channel where a
 *                  chan_wait of this sel is queued may claim it.
 *   SEL_CLAIMED    a peer won. It has already popped that chan_wait, copies
 *                  the element, writes wt.data (case index) and wt.result
 *                  (0 or EPIPE), and then wakes the waiter. Final.
 *   SEL_CANCELLED  the owner gave up (deadline). Peers that meet one of its
 *                  chan_waits pop it and move on. Final.
 * Only WAITING -> CLAIMED (a peer, by CAS) and WAITING -> CANCELLED (the
 * owner, by CAS) exist, so exactly one outcome per blocked call.
 *
 * Invariants (a queued chan_wait is *live* while its sel is SEL_WAITING;
 * stale ones may linger until someone pops them or the owner unlinks them)
 *   I1  Everything in a channel is read and written under ch->lock, except
 *       esize and cap (written once before the channel is shared).
 *   I2  A live receiver is queued only while the buffer is empty, and a live
 *       sender only while the buffer is full (count == cap; always true for a
 *       rendezvous channel). So a sender that finds a live receiver hands the
 *       element straight over, and a receiver that finds a live sender takes
 *       the buffer head (if any) and moves that sender's element to the tail.
 *   I3  No live chan_wait is queued on a closed channel: close claims every
 *       one, and nothing is queued after the flag is set (the flag is checked
 *       under the lock that the enqueue holds).
 *   I4  Besides its owner, a chan_wait is touched only by whoever pops it,
 *       under the lock of its channel (popping self-links it), and by the
 *       peer that claimed its sel, until that peer stores WOKEN (close reads
 *       wnext after its unlock, before that store). The owner's stack frame
 *       outlives every such access: before it returns it either takes each
 *       of those locks (unlink pass) or, if it was claimed, waits for WOKEN.
 *   I5  Lock order: a select holds the locks of all its channels at once,
 *       taken in increasing address order (it may sleep on a later lock's
 *       futex while holding earlier ones; the order keeps that deadlock-
 *       free); every other path holds one lock. No lock is held across a
 *       park or a wake, and a channel lock is never nested with the lock of
 *       another kind of sync object.
 *   I6  ch->owed counts the chan_waits whose owners may still take ch->lock
 *       because of them: +1 when queued (enqueue_locked); -1 when the owner
 *       unlinks it (wait_unlink, whether it was still queued or already
 *       popped as stale), or when a peer claims it (the owner skips the
 *       node it won in its unlink pass). Popping a stale node does not
 *       change it: that owner still comes. So an owner may touch ch only
 *       while ch->owed > 0, and destroy frees ch only at ch->owed == 0.
 *
 * Send (send_locked)
 * ------------------
 * Closed: EPIPE. Else pop recvq until a receiver is claimed: copy the element
 * into its buffer, done (a direct hand-off, see Sync wakeup). Else, room in
 * the ring: append. Else would block: the caller queues a chan_wait on sendq
 * (under the same lock hold) and parks.
 *
 * Receive (recv_locked)
 * ---------------------
 * Ring not empty: take the head; then, if a sender can be claimed, append
 * its element (I2: the ring was full, so FIFO per sender holds) and wake it.
 * Ring empty: claim a sender and copy its element directly (rendezvous).
 * Else closed: EPIPE (the ring is drained first, as documented). Else queue on
 * recvq and park.
 *
 * Claim protocol (claim_first_locked)
 * -----------------------------------
 * A peer holding ch->lock pops the first chan_wait of a queue and CASes its
 * sel from WAITING to CLAIMED. Failure means the node was stale (its select
 * completed on another channel, or timed out): it stays popped and the peer
 * tries the next one. Success is the linearisation point of the blocked call:
 * the peer then copies the element and fills wt.data/wt.result, releases the
 * lock, and calls wft_waiter_wake(), whose release store of WOKEN publishes
 * the copied element and the result to the woken owner.
 *
 *   concurrency of operations on one sel->state:
 *                     | claim (other ch) | cancel (owner) | unlink (owner)
 *   claim (peer, ch)  | CAS: one wins    | CAS: one wins  | serialised by ch->lock
 *   cancel (owner)    | CAS: one wins    | -              | after (same thread)
 *   destroy (ch)      | ch->lock         | lockless: ok   | ch->lock; waits (I6)
 *
 * The CASes on state are relaxed: they only decide who wins. Everything the
 * claimer reads of a chan_wait was written before it was queued, under
 * ch->lock; everything it writes for the owner is published by WOKEN.
 *
 * Timeout (sel_wait)
 * ------------------
 * wft_waiter_wait() returned ETIMEDOUT. The owner CASes WAITING -> CANCELLED.
 *   won:  nobody can claim it any more; it takes each channel's lock in turn
 *         and unlinks its chan_waits that are still queued (a peer may have
 *         popped some as stale meanwhile: they are self-linked). ETIMEDOUT.
 *   lost: a peer claimed it and may still be copying into the owner's buffer.
 *         The owner waits (no deadline) for WOKEN, then reports the result as
 *         if it had been woken in time: the operation did complete.
 * The race, as a two-column diagram:
 *
 *     owner (timed out)                   peer (holds ch->lock)
 *     CAS state WAITING->CANCELLED        CAS state WAITING->CLAIMED
 *     (fails: wait for WOKEN)             copy element, data, result
 *                                         unlock; store WOKEN (release)
 *     load WOKEN (acquire), read result
 *
 * Either the owner's CAS sees WAITING and no peer can ever claim the call,
 * or the peer's CAS sees WAITING and the owner waits for its WOKEN store,
 * because both CAS the same word and only WAITING is claimable.
 *
 * Lost wakeups: a blocked call checks (poll) and queues under the same
 * channel lock that every peer holds while it checks and pops, so either the
 * caller's poll sees the peer's element/node, or the peer sees the caller's
 * node, because the two critical sections are ordered by ch->lock. A select
 * holds all its locks across the poll of every case and the enqueue of every
 * case (I5), so it is atomic with respect to each of its channels. The wake
 * itself (WOKEN store vs. the waiter going to sleep) is waiter.c's protocol.
 *
 * Interleavings considered: two peers on two channels claiming one select
 * (CAS); a peer and the timeout (above); a peer popping a stale node while
 * its owner waits for that channel's lock to unlink it (the owner finds it
 * self-linked, and pays its owed count, I6); close popping such a node and
 * destroy following at once (destroy waits for the owner, see Destroy);
 * close racing a timeout (close claims under the lock, the
 * owner's CAS then fails and it reports EPIPE); close racing a select woken
 * elsewhere (the node is stale, close pops it, the owner sees it unlinked); a
 * select with a send and a receive case on the same channel (its own nodes
 * are queued only after its poll, so it never matches itself).
 *
 * Close
 * -----
 * Under the lock: set closed, claim every live chan_wait of both queues with
 * result EPIPE, chaining them through wnext, not through node: a popped node
 * must stay self-linked, because owners test node in their unlink pass (I4).
 * After the unlock,
 * wake them in FIFO order, reading wnext before each wake. Waking them all is
 * not a herd: each of them can complete (with EPIPE).
 *
 * Destroy
 * -------
 * Under the lock: owed == 0 (I6): nobody will touch ch again; free it. A
 * live chan_wait queued (its sel still WAITING: a blocked call): EBUSY,
 * nothing freed. Otherwise only stale chan_waits are owed: their selects
 * completed on another channel (the peer that claimed them has woken or is
 * waking them) or timed out, so their owners are runnable and need only
 * ch->lock to pay (wait_unlink). Destroy then records itself as ch->drainer,
 * unlocks and parks; the owner whose wait_unlink brings owed to 0 takes the
 * drainer under the lock and wakes it after its unlock, and touches ch no
 * more, so destroy frees ch. Without this, a select on {A, B} claimed
 * through A whose stale node on B was popped by close(B) would take B's
 * lock after destroy(B) had freed B. EBUSY in that case would be wrong: the
 * select has completed as far as the caller can see (the send on A
 * returned), and there is no moment at which a retry is known to succeed.
 *
 *     owner (claimed or timed out)        destroy
 *     lock; unlink; owed-- -> 0;          lock; owed > 0, none live:
 *       take drainer; unlock                drainer = self; unlock; park
 *     wake drainer (ch no longer used)    WOKEN: free(ch)
 *
 * Either the owner's decrement sees the drainer (it wakes it) or destroy
 * sees owed == 0 (it frees at once), because both run under ch->lock.
 *
 * Select
 * ------
 * Lock every distinct channel in address order (I5). Poll the cases starting
 * at a pseudo-random one (no case is starved; fairness beyond that is not
 * promised). A ready case completes at once. Otherwise queue one chan_wait per
 * enabled case, all pointing at one chan_sel, unlock everything and park. The
 * first peer to claim the sel wins (Claim protocol); after the wake the owner
 * unlinks its other chan_waits, one channel lock at a time.
 *
 * Sync wakeup
 * -----------
 * A sender that hands its element straight to a parked receiver (a
 * rendezvous hand-off: ping-pong, pipelines) has given its work away and
 * typically blocks next, waiting for the reply or the next input
 * (docs/seeds.md, "pipe-bench"). Such a wake asks the wake path to run the receiver on the sender's
 * worker (the kernel's WF_SYNC, Go's runnext): no remote wake, no kick, the
 * receiver runs as soon as the sender parks. A receiver that takes a parked
 * sender's element is about to work on it, not to block, so that wake uses
 * the normal placement. The hint goes through wake_peer(); the wake path
 * decides, and honours it only when the waker's worker has nothing else
 * to run (runtime/wake.c, feature switch SYNC_WAKE).
 *
 * Rejected alternatives
 * ---------------------
 * - A pthread mutex for the channel: the critical sections are a few list
 *   operations and one memcpy, for which the sync objects' wft_slock (an
 *   uncontended CAS, a bounded spin, then a futex for a preempted holder)
 *   is the right size, and it is shared with every other primitive.
 * - Select taking one channel lock at a time (no multi-lock): while the
 *   selector is already queued on channel A it may meet a ready peer on B,
 *   and must then claim both itself and the peer. With a transient BUSY state
 *   two such selectors can each skip the other and both park, complementary
 *   on two channels: a lost wakeup. Go's answer, all locks in address order,
 *   is deadlock-free and keeps the claim a single CAS.
 * - A lock-free ring for the buffered fast path: blocking senders and
 *   receivers still need the queues and the lock; two synchronisation schemes
 *   for one object doubles the proof for a few nanoseconds.
 * - Waking every receiver when an element arrives (a herd): each send or
 *   receive claims exactly one peer, the one that can complete with it.
 */
#include "runtime/wft.h"

#include <stdlib.h>
#include <string.h>

#include <weft/chan.h>

#include "sync/waitq.h"

/* sel->state values, see "Objects and states" above. */
enum {
	SEL_WAITING = 0,
	SEL_CLAIMED,
	SEL_CANCELLED,
};

/* A select with up to this many cases keeps its chan_waits on the stack;
 * more are allocated. 8 covers the select loops people write; the stack cost
 * is about 8 * 56 bytes, fine on the 16 KiB minimum stack. */
#define SEL_STACK_CASES 8

struct weft_chan {
	struct wft_slock lock;            /* chan_lock() */
	bool closed;                      /* lock */
	size_t esize;                     /* immutable */
	size_t cap;                       /* immutable; 0 = rendezvous */
	size_t head;                      /* lock: index of the oldest element */
	size_t count;                     /* lock: buffered elements */
	struct wft_dlist sendq;           /* lock: blocked senders (chan_wait) */
	struct wft_dlist recvq;           /* lock: blocked receivers (chan_wait) */
	size_t owed;                      /* lock: chan_waits still owed an unlink (I6) */
	struct wft_waiter *drainer;       /* lock: destroy waiting for owed == 0 */
	unsigned char buf[];              /* lock: cap * esize bytes */
};

struct chan_sel {
	_Atomic uint32_t state;           /* SEL_*, see above */
	struct wft_waiter wt;             /* data: winning case; result: 0 or EPIPE */
};

struct chan_wait {
	struct wft_dlist node;            /* sendq/recvq link; lock of ch (I4) */
	struct weft_chan *ch;             /* channel it is queued on; NULL: case disabled */
	struct chan_sel *sel;             /* immutable while queued */
	void *elem;                       /* send: source; recv: destination */
	size_t idx;                       /* case index reported to the owner */
	struct chan_wait *wnext;          /* close's wake chain; lock of ch */
};

/* A claimed peer to wake once the lock is dropped. */
struct chan_wake {
	struct wft_waiter *wt;            /* NULL: nobody */
	bool sync;                        /* rendezvous hand-off, see Sync wakeup */
};

/* ---------------------------------------------------------------------- */
/* Channel lock (I1, I5). Context: any. May park: no (it may sleep on the
 * lock's futex, which blocks the OS thread, never switches a weft thread).
 * Never held across a park or a wake. */

static inline void chan_lock(struct weft_chan *ch)
{
	wft_slock_lock(&ch->lock);
}

static inline void chan_unlock(struct weft_chan *ch)
{
	wft_slock_unlock(&ch->lock);
}

/* Debug builds check the Locks: contract of the _locked functions. */
#define chan_assert_held(ch) \
	WFT_ASSERT(atomic_load_explicit(&(ch)->lock.v, memory_order_relaxed) != 0)

/* ---------------------------------------------------------------------- */
/* Claim protocol. */

static inline unsigned char *slot(struct weft_chan *ch, size_t i)
{
	return ch->buf + i * ch->esize;
}

/* Pop chan_waits from q (a queue of ch) until one can be claimed (Claim
 * protocol). Stale ones are dropped (they stay self-linked, I4) and stay
 * owed (I6): their owners still come to unlink them. The claimed one is
 * no longer owed: its owner skips it in its unlink pass.
 * Context: any. May park: no. Locks: ch.
 * Returns: the claimed chan_wait (popped; its owner waits for our WOKEN), or
 * NULL if q held no live one. */
static struct chan_wait *claim_first_locked(struct weft_chan *ch, struct wft_dlist *q)
{
	struct wft_dlist *n;

	chan_assert_held(ch);
	while ((n = wft_dlist_pop_front(q)) != NULL) {
		struct chan_wait *w = wft_container_of(n, struct chan_wait, node);
		uint32_t exp = SEL_WAITING;

		/* relaxed: the linearisation point of w's blocked call; pairs
		 * with the claim CAS of peers on w's other channels and with the
		 * cancel CAS in sel_wait(): one modification order of state, one
		 * winner. No data flows through it: what we read of w was
		 * published by ch->lock (w was queued under it), and what we
		 * write for the owner (element, data, result) is published by
		 * the WOKEN release store in wft_waiter_wake(). */
		if (wft_cas(&w->sel->state, &exp, SEL_CLAIMED, relaxed)) {
			/* I6: a claimed chan_wait is not owed. This never
			 * drains the channel for a parked destroy: it parks
			 * only when no live chan_wait is queued, and none can
			 * be queued after destroy was called. */
			ch->owed--;
			return w;
		}
	}
	return NULL;
}

/* Record the outcome in a claimed chan_wait's waiter (the owner reads it
 * after WOKEN) and note whom to wake after the unlock.
 * Context: any. May park: no. Locks: w->ch (I4). */
static inline void claim_finish(struct chan_wait *w, int result, struct chan_wake *wk,
				bool sync)
{
	chan_assert_held(w->ch);
	w->sel->wt.data = w->idx;
	w->sel->wt.result = result;
	wk->wt = &w->sel->wt;
	wk->sync = sync;
}

/* Wake the peer claimed under the lock, after the unlock.
 * Context: any. May park: no. */
static inline void wake_peer(const struct chan_wake *wk)
{
	if (wk->wt == NULL)
		return;
	/* wk->sync asks for a sync wakeup (see Sync wakeup); the wake path
	 * honours it only when this worker has nothing else to run
	 * (wft_wake_deliver in runtime/wake.c, feature SYNC_WAKE). */
	if (wk->sync)
		wft_waiter_wake_sync(wk->wt);
	else
		wft_waiter_wake(wk->wt);
}

/* ---------------------------------------------------------------------- */
/* Send and Receive, see the sections above. */

/* Try to send *elem without blocking (Send).
 * Context: any. May park: no. Locks: ch.
 * Returns: 0 (sent; *wk may name a peer to wake after the unlock), EPIPE
 * (closed), EAGAIN (would block). */
static int send_locked(struct weft_chan *ch, const void *elem, struct chan_wake *wk)
{
	struct chan_wait *r;

	chan_assert_held(ch);
	if (ch->closed)
		return EPIPE;
	r = claim_first_locked(ch, &ch->recvq);
	if (r != NULL) {
		/* I2: a live receiver means an empty ring, so the direct hand-off
		 * keeps FIFO order */
		memcpy(r->elem, elem, ch->esize);
		claim_finish(r, 0, wk, true);
		return 0;
	}
	if (ch->count < ch->cap) {
		size_t tail = (ch->head + ch->count) % ch->cap;

		memcpy(slot(ch, tail), elem, ch->esize);
		ch->count++;
		return 0;
	}
	return EAGAIN;
}

/* Try to receive into *elem without blocking (Receive).
 * Context: any. May park: no. Locks: ch.
 * Returns: 0 (received; *wk may name a peer to wake after the unlock), EPIPE
 * (closed and drained), EAGAIN (would block). */
static int recv_locked(struct weft_chan *ch, void *elem, struct chan_wake *wk)
{
	struct chan_wait *s;

	chan_assert_held(ch);
	if (ch->count > 0) {
		memcpy(elem, slot(ch, ch->head), ch->esize);
		ch->head = (ch->head + 1) % ch->cap;
		ch->count--;
		/* I2: a live sender means the ring was full; its element goes to
		 * the tail, behind everything buffered before it */
		s = claim_first_locked(ch, &ch->sendq);
		if (s != NULL) {
			size_t tail = (ch->head + ch->count) % ch->cap;

			memcpy(slot(ch, tail), s->elem, ch->esize);
			ch->count++;
			claim_finish(s, 0, wk, false);
		}
		return 0;
	}
	s = claim_first_locked(ch, &ch->sendq);
	if (s != NULL) {
		memcpy(elem, s->elem, ch->esize);
		claim_finish(s, 0, wk, false);
		return 0;
	}
	/* I3: a closed channel has no live sender left to take from */
	return ch->closed ? EPIPE : EAGAIN;
}

static inline int op_locked(struct weft_chan *ch, int op, void *elem, struct chan_wake *wk)
{
	return op == WEFT_CHAN_SEND ? send_locked(ch, elem, wk) : recv_locked(ch, elem, wk);
}

/* Queue w (filled in) on the queue of its op, FIFO.
 * Context: any. May park: no. Locks: w->ch. */
static inline void enqueue_locked(struct chan_wait *w, int op)
{
	chan_assert_held(w->ch);
	wft_dlist_push_back(op == WEFT_CHAN_SEND ? &w->ch->sendq : &w->ch->recvq, &w->node);
	w->ch->owed++;                    /* I6 */
}

static inline bool deadline_passed(weft_time_t deadline)
{
	return deadline != WEFT_TIME_INFINITE && wft_now() >= deadline;
}

/* ---------------------------------------------------------------------- */
/* Waiting and Timeout. */

/* Prepare the calling thread's blocked call. Context: any. May park: no. */
static void sel_init(struct chan_sel *sel)
{
	/* relaxed: the sel is not shared until it is queued under a channel
	 * lock, whose release publishes it */
	wft_store(&sel->state, SEL_WAITING, relaxed);
	wft_waiter_init(&sel->wt);
}

/* Unlink w if it is still queued, and pay what w owes its channel (I6);
 * if that drains the channel for a waiting destroy, wake it. After the
 * unlock w->ch may be freed at once.
 * Context: the owner of w. May park: no. */
static void wait_unlink(struct chan_wait *w)
{
	struct weft_chan *ch = w->ch;
	struct wft_waiter *d = NULL;

	chan_lock(ch);
	/* I4: a peer that popped w self-linked it under this lock */
	if (w->node.next != &w->node)
		wft_dlist_del(&w->node);
	if (--ch->owed == 0 && ch->drainer != NULL) {
		d = ch->drainer;
		ch->drainer = NULL;
	}
	chan_unlock(ch);
	/* see Destroy: nothing touches ch after this unlock */
	if (d != NULL)
		wft_waiter_wake(d);
}

/* Park until a peer completes the call or the deadline passes; see Timeout.
 * ws[0..n) are the caller's chan_waits (ws[i].ch == NULL: not queued).
 * Returns the claimer's result (0 or EPIPE) with *chosen = its case, or
 * ETIMEDOUT. Context: any. May park: yes. */
static int sel_wait(struct chan_sel *sel, struct chan_wait *ws, size_t n, size_t *chosen,
		    weft_time_t deadline)
{
	size_t won;

	if (wft_waiter_wait(&sel->wt, deadline) == ETIMEDOUT) {
		uint32_t exp = SEL_WAITING;

		/* relaxed: pairs with the claim CAS in claim_first_locked();
		 * exactly one of the two sees WAITING (Timeout). Nothing is read
		 * on its strength: a winner unlinks under each channel lock, a
		 * loser reads the result after its acquire load of WOKEN. */
		if (wft_cas(&sel->state, &exp, SEL_CANCELLED, relaxed)) {
			for (size_t i = 0; i < n; i++)
				if (ws[i].ch != NULL)
					wait_unlink(&ws[i]);
			return ETIMEDOUT;
		}
		/* A peer claimed us and may still be copying into our buffer: wait
		 * for its WOKEN store, without a deadline (it comes after one
		 * critical section). */
		while (wft_waiter_wait(&sel->wt, WEFT_TIME_INFINITE) != 0)
			;
	}
	/* wft_waiter_wait() returned 0 after an acquire load of WOKEN, which
	 * pairs with the claimer's release store: data and result are its. The
	 * claimer popped ws[won]; the others may still be queued. */
	won = sel->wt.data;
	for (size_t i = 0; i < n; i++)
		if (i != won && ws[i].ch != NULL)
			wait_unlink(&ws[i]);
	*chosen = won;
	return sel->wt.result;
}

/* ---------------------------------------------------------------------- */
/* Single send and receive. */

/* One send or receive; the public calls below are its four forms.
 * Context: any. May park: yes, unless try.
 * Returns: 0, EPIPE, EAGAIN (try only), ETIMEDOUT, EINVAL. */
static int chan_op(struct weft_chan *ch, int op, void *elem, weft_time_t deadline, bool try)
{
	struct chan_wake wk = { NULL, false };
	struct chan_sel sel;
	struct chan_wait w;
	size_t chosen;
	bool poll;
	int err;

	if (ch == NULL || elem == NULL)
		return EINVAL;
	/* a deadline already past: poll once, and ETIMEDOUT if it would block */
	poll = try || deadline_passed(deadline);

	chan_lock(ch);
	err = op_locked(ch, op, elem, &wk);
	if (err != EAGAIN || poll) {
		chan_unlock(ch);
		wake_peer(&wk);
		return err == EAGAIN && !try ? ETIMEDOUT : err;
	}
	sel_init(&sel);
	w.ch = ch;
	w.sel = &sel;
	w.elem = elem;
	w.idx = 0;
	w.wnext = NULL;
	enqueue_locked(&w, op);
	chan_unlock(ch);

	return sel_wait(&sel, &w, 1, &chosen, deadline);
}

/* ---------------------------------------------------------------------- */
/* Public calls: create, destroy, close, send, receive. */

WEFT_API int weft_chan_create(weft_chan_t **chp, size_t elem_size, size_t capacity)
{
	struct weft_chan *ch;

	if (chp == NULL || elem_size == 0 || elem_size > WEFT_CHAN_ELEM_MAX)
		return EINVAL;
	if (capacity > (SIZE_MAX - sizeof(*ch)) / elem_size)
		return EINVAL;
	ch = wft_malloc(sizeof(*ch) + capacity * elem_size);
	if (ch == NULL)
		return EAGAIN;
	/* relaxed: not shared yet; the caller publishes ch by its own means */
	wft_store(&ch->lock.v, 0, relaxed);
	ch->closed = false;
	ch->esize = elem_size;
	ch->cap = capacity;
	ch->head = 0;
	ch->count = 0;
	wft_dlist_init(&ch->sendq);
	wft_dlist_init(&ch->recvq);
	ch->owed = 0;
	ch->drainer = NULL;
	*chp = ch;
	return 0;
}

/* Does q hold a live chan_wait (one whose select may still be claimed)?
 * Context: any. May park: no. Locks: the channel of q. */
static bool has_live_locked(struct wft_dlist *q)
{
	for (struct wft_dlist *n = q->next; n != q; n = n->next) {
		struct chan_wait *w = wft_container_of(n, struct chan_wait, node);

		/* relaxed: WAITING may become CLAIMED/CANCELLED right after,
		 * never the reverse; a WAITING node is a blocked call (EBUSY).
		 * The sel is alive: its owner cannot return before it unlinks
		 * this node under the lock we hold (I4). */
		if (wft_load(&w->sel->state, relaxed) == SEL_WAITING)
			return true;
	}
	return false;
}

/* See Destroy above. Context: any. May park: yes, briefly (only while
 * completed or timed-out selects still owe ch an unlink, I6). */
WEFT_API int weft_chan_destroy(weft_chan_t *ch)
{
	struct wft_waiter self;
	int err = 0;

	if (ch == NULL)
		return EINVAL;
	chan_lock(ch);
	if (ch->owed == 0)
		goto out;
	if (ch->drainer != NULL || has_live_locked(&ch->sendq) || has_live_locked(&ch->recvq)) {
		err = EBUSY;
		goto out;
	}
	/* Only stale chan_waits are owed: their owners were claimed or timed
	 * out, so they are runnable and need nothing but this lock. The last
	 * one wakes us (wait_unlink). */
	wft_waiter_init(&self);
	ch->drainer = &self;
	chan_unlock(ch);
	while (wft_waiter_wait(&self, WEFT_TIME_INFINITE) != 0)
		;
	free(ch);
	return 0;
out:
	chan_unlock(ch);
	if (err == 0)
		free(ch);
	return err;
}

WEFT_API int weft_chan_close(weft_chan_t *ch)
{
	struct chan_wait *first = NULL, **tail = &first, *w;
	struct chan_wake wk;

	if (ch == NULL)
		return EINVAL;
	chan_lock(ch);
	if (ch->closed) {
		chan_unlock(ch);
		return EPIPE;
	}
	ch->closed = true;
	/* I3: claim every live waiter; chain them through wnext, not node (see
	 * Close) */
	while ((w = claim_first_locked(ch, &ch->recvq)) != NULL ||
	       (w = claim_first_locked(ch, &ch->sendq)) != NULL) {
		claim_finish(w, EPIPE, &wk, false);
		w->wnext = NULL;
		*tail = w;
		tail = &w->wnext;
	}
	chan_unlock(ch);

	while (first != NULL) {
		/* read the link first: first's owner may return once woken */
		struct wft_waiter *wt = &first->sel->wt;

		first = first->wnext;
		wft_waiter_wake(wt);
	}
	return 0;
}

WEFT_API int weft_chan_send(weft_chan_t *ch, const void *elem)
{
	return chan_op(ch, WEFT_CHAN_SEND, (void *)elem, WEFT_TIME_INFINITE, false);
}

WEFT_API int weft_chan_trysend(weft_chan_t *ch, const void *elem)
{
	return chan_op(ch, WEFT_CHAN_SEND, (void *)elem, WEFT_TIME_INFINITE, true);
}

WEFT_API int weft_chan_timedsend(weft_chan_t *ch, const void *elem, weft_time_t deadline)
{
	return chan_op(ch, WEFT_CHAN_SEND, (void *)elem, deadline, false);
}

WEFT_API int weft_chan_recv(weft_chan_t *ch, void *elem)
{
	return chan_op(ch, WEFT_CHAN_RECV, elem, WEFT_TIME_INFINITE, false);
}

WEFT_API int weft_chan_tryrecv(weft_chan_t *ch, void *elem)
{
	return chan_op(ch, WEFT_CHAN_RECV, elem, WEFT_TIME_INFINITE, true);
}

WEFT_API int weft_chan_timedrecv(weft_chan_t *ch, void *elem, weft_time_t deadline)
{
	return chan_op(ch, WEFT_CHAN_RECV, elem, deadline, false);
}

WEFT_API size_t weft_chan_len(weft_chan_t *ch)
{
	size_t n;

	if (ch == NULL)
		return 0;
	chan_lock(ch);
	n = ch->count;
	chan_unlock(ch);
	return n;
}

WEFT_API size_t weft_chan_cap(weft_chan_t *ch)
{
	return ch == NULL ? 0 : ch->cap;   /* immutable (I1) */
}

/* ---------------------------------------------------------------------- */
/* Select, see the section above. */

/* Cheap per-OS-thread xorshift for the first case to poll. Read and written
 * in one go, never across a switch, so a weft thread may use whichever
 * worker's copy it runs on. */
static __thread uint32_t sel_rng;

static uint32_t sel_rand(void)
{
	uint32_t x = sel_rng;

	if (x == 0)
		x = (uint32_t)((uintptr_t)&x ^ wft_now()) | 1;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	sel_rng = x;
	return x;
}

static int cmp_chan(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(struct weft_chan *const *)a;
	uintptr_t y = (uintptr_t)*(struct weft_chan *const *)b;

	return (x > y) - (x < y);
}

/* Lock (unlock) each distinct channel of the address-sorted array (I5).
 * Context: any. May park: no. */
static void lock_all(struct weft_chan **order, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (i == 0 || order[i] != order[i - 1])
			chan_lock(order[i]);
}

static void unlock_all(struct weft_chan **order, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (i == 0 || order[i] != order[i - 1])
			chan_unlock(order[i]);
}

/* Check the cases: a case with a channel (an enabled case) needs a valid
 * op and an element. Returns 0 with *nen the number of enabled cases, or
 * EINVAL. */
static int sel_check(const weft_chan_case_t *cases, size_t n, size_t *nen)
{
	*nen = 0;
	for (size_t i = 0; i < n; i++) {
		if (cases[i].chan == NULL)
			continue;
		if ((cases[i].op != WEFT_CHAN_SEND && cases[i].op != WEFT_CHAN_RECV) ||
		    cases[i].elem == NULL)
			return EINVAL;
		(*nen)++;
	}
	return 0;
}

/* Fill order with the nen enabled cases' channels sorted by address: the
 * lock order of lock_all (I5). */
static void sel_order(const weft_chan_case_t *cases, size_t n, struct weft_chan **order, size_t nen)
{
	for (size_t i = 0, k = 0; i < n; i++)
		if (cases[i].chan != NULL)
			order[k++] = cases[i].chan;
	if (nen <= SEL_STACK_CASES) {
		/* insertion sort: a handful of pointers */
		for (size_t i = 1; i < nen; i++) {
			struct weft_chan *c = order[i];
			size_t j = i;

			for (; j > 0 && (uintptr_t)order[j - 1] > (uintptr_t)c; j--)
				order[j] = order[j - 1];
			order[j] = c;
		}
	} else {
		qsort(order, nen, sizeof(*order), cmp_chan);
	}
}

/* The polling pass: try each enabled case once, starting at a random one,
 * with every channel locked. Returns EAGAIN if none could complete (the
 * channels stay locked), else the completed case's result, with *chosen
 * set, the channels unlocked and the peer woken. Locks: every channel of
 * order. */
static int sel_poll_locked(weft_chan_case_t *cases, size_t n, size_t *chosen,
			   struct weft_chan **order, size_t nen)
{
	struct chan_wake wk = { NULL, false };
	size_t start = sel_rand() % n;

	for (size_t k = 0; k < n; k++) {
		size_t i = (start + k) % n;
		int err;

		if (cases[i].chan == NULL)
			continue;
		err = op_locked(cases[i].chan, cases[i].op, cases[i].elem, &wk);
		if (err != EAGAIN) {
			unlock_all(order, nen);
			wake_peer(&wk);
			*chosen = i;
			return err;
		}
	}
	return EAGAIN;
}

/* Queue one wait record of sel on every enabled case's channel (ws[i] for
 * case i). Locks: every channel of the cases. */
static void sel_enqueue_locked(weft_chan_case_t *cases, size_t n, struct chan_wait *ws,
			       struct chan_sel *sel)
{
	sel_init(sel);
	for (size_t i = 0; i < n; i++) {
		ws[i].ch = cases[i].chan;
		if (ws[i].ch == NULL)
			continue;
		ws[i].sel = sel;
		ws[i].elem = cases[i].elem;
		ws[i].idx = i;
		ws[i].wnext = NULL;
		enqueue_locked(&ws[i], cases[i].op);
	}
}

/* Select (see the section above); the two public calls are its forms:
 * check the cases, lock their channels in address order, poll each case
 * once, and unless polling, queue on every channel and wait.
 * Context: any. May park: yes, unless try.
 * Returns: as weft_chan_select() in include/weft/chan.h. */
static int chan_select(weft_chan_case_t *cases, size_t n, size_t *chosen,
		       weft_time_t deadline, bool try)
{
	struct chan_wait stack_ws[SEL_STACK_CASES];
	struct weft_chan *stack_order[SEL_STACK_CASES];
	struct chan_wait *ws = stack_ws;
	struct weft_chan **order = stack_order;
	struct chan_sel sel;
	size_t nen;
	bool poll;
	int err;

	if ((cases == NULL && n > 0) || chosen == NULL || n > WEFT_CHAN_SELECT_MAX)
		return EINVAL;
	if (sel_check(cases, n, &nen))
		return EINVAL;
	if (nen == 0) {
		/* nothing can ever complete: a poll fails, a timed select sleeps */
		if (try)
			return EAGAIN;
		if (deadline == WEFT_TIME_INFINITE)
			return EINVAL;
		weft_sleep_until(deadline);
		return ETIMEDOUT;
	}
	poll = try || deadline_passed(deadline);

	if (n > SEL_STACK_CASES) {
		ws = wft_malloc(n * (sizeof(*ws) + sizeof(*order)));
		if (ws == NULL)
			return EAGAIN;
		order = (struct weft_chan **)(ws + n);
	}
	sel_order(cases, n, order, nen);

	lock_all(order, nen);
	err = sel_poll_locked(cases, n, chosen, order, nen);
	if (err != EAGAIN)
		goto out;
	if (poll) {
		unlock_all(order, nen);
		err = try ? EAGAIN : ETIMEDOUT;
		goto out;
	}
	sel_enqueue_locked(cases, n, ws, &sel);
	unlock_all(order, nen);
	err = sel_wait(&sel, ws, n, chosen, deadline);
out:
	if (ws != stack_ws)
		free(ws);
	return err;
}

WEFT_API int weft_chan_select(weft_chan_case_t *cases, size_t ncases, size_t *chosen,
			      weft_time_t deadline)
{
	return chan_select(cases, ncases, chosen, deadline, false);
}

WEFT_API int weft_chan_tryselect(weft_chan_case_t *cases, size_t ncases, size_t *chosen)
{
	return chan_select(cases, ncases, chosen, WEFT_TIME_INFINITE, true);
}
