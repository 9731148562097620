/*
 * sync/wake_q.c - wake queues (the kernel's wake_q, batched per worker) and
 * the choice of which waiter to wake ("pick").
 *
 * What it owns
 *   weft_wakeq_t / struct wft_wake_q: a caller-local list of waiters that a
 *   primitive has already granted (result stored, record unlinked from the
 *   primitive's queue under its slock) but not yet woken. The release paths
 *   of every primitive collect wakees here while they hold their slock, drop
 *   the slock, then flush: no wake (and so no mailbox CAS, no kick syscall)
 *   ever happens under a sync object's lock (the kernel's wake_q from
 *   seed 000; docs/wake-path.md and docs/seeds.md).
 *
 * Objects and states
 *   A record in a wake queue is in the state "granted, not woken": its
 *   wft_waiter.state is still WAITING, its queued flag is 0, and its owner
 *   may be parked or may be on its way to park. The flush moves it to WOKEN
 *   (wft_waiter_wake, or wft_waiter_claim for batching).
 *
 * Invariants
 *   I1. A record is in at most one wake queue, and only after its
 *       primitive unlinked it under the primitive's slock (queued = 0).
 *   I2. Nothing touches a record after its WOKEN store: the flush reads the
 *       next link before waking a record.
 *   I3. A waiter whose record was granted (it finds queued = 0 under the
 *       slock after a timeout - mutex, rwlock - or loses its cancel CAS on
 *       sw->claim - cond, sem, see sync/waitq.h) must wait for WOKEN before
 *       returning: the flush still references its record (which lives on
 *       the waiter's stack).
 *
 * Protocol
 *   "Collect": wft_wake_q_add() appends; the primitive stored the outcome in
 *   wt->result before (under its slock); the flush's WOKEN store is a
 *   release, so the wakee that reads WOKEN with acquire sees the outcome.
 *
 *   "Flush": with BATCH_WAKE on (and more than one record), every
 *   record is claimed (WOKEN stored, the thread's PARKED -> RUNNABLE CAS
 *   won by us, not yet enqueued); each claimed thread goes to the placement
 *   target wft_wake_place(t, self, &burst): the batch wakes at most one
 *   parked worker for its unpinned wakees (rule R4 of runtime/wake.c). Threads for the flusher's own worker are
 *   pushed locally (no atomics); the others are linked through t->link into
 *   one chain per target worker, and each chain is spliced into that
 *   worker's mailbox with wft_wake_push(): one CAS and at most one
 *   kick per target, however many threads the chain holds. OS-thread
 *   waiters (thread NULL) are woken by futex inside the claim. With
 *   BATCH_WAKE off (or a one-record queue) each record goes through
 *   wft_waiter_wake(): one wake, one mailbox push, one kick each.
 *
 *   Concurrency table (which operations on one record can overlap):
 *
 *                      | flush (wake) | waiter timeout | another flush
 *     -----------------+--------------+----------------+--------------
 *     flush (wake)     |      -       |      yes       |   no (I1)
 *     waiter timeout   |     yes      |       -        |   no (I1)
 *
 *   Linearisation point of a wake: the WOKEN store (release) in
 *   wft_waiter_wake / wft_waiter_claim. The primitive's grant (the unlink
 *   under its slock) is the linearisation point of the operation that
 *   granted (post, unlock, ...), which is why a timeout that loses the race
 *   for the slock still returns success.
 *
 *     waker (flush)                     waiter (timed out)
 *     -------------                     ------------------
 *     slock; unlink; result=R; sunlock  park returns ETIMEDOUT
 *     ... (maybe much later) ...        slock; queued == 0 ?; sunlock
 *     store WOKEN (release)             wait for WOKEN (acquire), use R
 *
 *   Either the waiter sees queued == 1 under the slock (it unlinks itself
 *   and returns ETIMEDOUT; no waker can grant it any more), or the waker
 *   unlinked it first (the waiter sees queued == 0, waits for WOKEN and
 *   reports the grant), because both look at queued under the same slock.
 *   That is the mutex's and the rwlock's protocol. The cond and the
 *   semaphore decide the same race by a CAS on the record's claim byte
 *   instead (sync/waitq.h), so that a waiter whose grant won never takes
 *   the slock of an object its waker may already have destroyed; the
 *   diagram is the same with "CAS claim" in place of "slock; queued ?".
 *   The WOKEN wait cannot miss the wake: it is the park protocol of
 *   runtime/waiter.c (the unpark token).
 *
 *   Interleavings considered: a flush racing the wakee's timeout (above);
 *   a flush racing a wakee that has not parked yet (the claim loses the
 *   PARKED CAS, the wakee sees WOKEN before parking, nothing is enqueued);
 *   two records of one batch that target the same worker (one chain); a
 *   flush from an OS thread (no local pushes, every group is remote); a
 *   flush whose target is idle (push_remote kicks it once).
 *
 *   "Pick": when any one of several waiters could proceed, prefer the best
 *   of the first WFT_PICK_WINDOW records (the head on ties). Two scores:
 *   AFFINE (semaphores) prefers a thread that last ran on the waker's worker
 *   (it runs there next, cache-hot, no migration), then one whose last
 *   worker is idle (it runs at once, without queueing behind other work);
 *   RUN_NOW (mutex, cond) prefers an idle worker's thread, then any other
 *   worker's or an OS thread, and the waker's own worker last, because the
 *   waker keeps running after an unlock and a wakee queued behind it cannot
 *   take the lock until the waker blocks (cooperative scheduling; the
 *   lock would sit free while idle workers have waiters to run). This is
 *   seed 003's "wake_up with the goodness inside" (docs/seeds.md), bounded:
 *   the head is passed over at most WFT_PICK_MAX_SKIPS times, then it is
 *   taken whatever its score, so FIFO order is violated by a bounded amount
 *   and nobody starves.
 *
 * Rejected alternatives
 *   - Waking under the primitive's lock (simplest): every wake's mailbox CAS
 *     and kick syscall would lengthen the critical section that all posters
 *     and waiters serialise on (the pre-2010 ipc/sem.c problem).
 *   - Sorting the whole batch by target worker (Chris Mason's 2010 "order
 *     wakeups based on waiter CPU"): a fixed set of open groups gives the
 *     same one-CAS-per-target result without a sort; with more targets than
 *     open groups the oldest group is delivered early (still correct, just
 *     one more CAS for that worker).
 *   - Allocating anything: the links are intrusive (record node, t->link).
 *
 * The sync objects' internal lock (the slock) is sync/slock.h and .c.
 */
#include "sync/waitq.h"

#include <sched.h>

/* How many records "pick" looks at. Four covers the waiters of a 2- to
 * 4-worker machine's distinct workers in the common case while keeping the
 * scan (a few cache lines of parked threads' records) well under the cost of
 * the wake itself (~100 ns mailbox push). */
#define WFT_PICK_WINDOW 4

/* How often the head may be passed over before it is taken regardless:
 * bounds the unfairness of "pick" to a few wake-ups. */
#define WFT_PICK_MAX_SKIPS 4

/* Open per-worker groups during a flush. A wake queue rarely targets more
 * workers than that at once on the machines we run on (2 to 8 workers); a
 * full table delivers its oldest group early, which costs one extra CAS. */
#define WFT_WAKEQ_GROUPS 8

/* ---------------------------------------------------------------------- */
/* Pick. */

/* Higher is better; 2 is the best possible (stop scanning). */
static int score(struct wft_swaiter *sw, struct wft_worker *self, int how)
{
	struct weft_thread *t = sw->w.thread;
	struct wft_worker *w = NULL;
	bool idle;

	/* relaxed: placement hint only. A queued record does not mean t is
	 * parked: t may still be running toward its park (it queued, dropped
	 * the slock, and has not switched out yet), or be running again after
	 * a timeout. t->worker is then the worker it runs on, which is also
	 * where it will park; a stale value costs locality, not correctness.
	 * t is a type-stable TCB (runtime/thread.c I1), so the read is safe. */
	if (t)
		w = wft_load(&t->worker, relaxed);
	/* relaxed: hint only; a wrong guess costs locality, not correctness */
	idle = w && wft_load(&w->sleep, relaxed) != WFT_W_AWAKE;
	if (how == WFT_PICK_AFFINE)
		return (w && w == self) ? 2 : idle ? 1 : 0;
	/* RUN_NOW */
	if (idle)
		return 2;
	return (t && w == self) ? 0 : 1;
}

struct wft_swaiter *wft_wake_q_pick_slow(struct wft_waitq *q, int how)
{
	struct wft_swaiter *head = wft_waitq_first(q), *sw, *best;
	struct wft_worker *self;
	int s, best_s;
	unsigned i;

	if (!head || !wft_waitq_next(head) || head->skips >= WFT_PICK_MAX_SKIPS)
		return head;
	self = wft_worker_self();
	best = head;
	best_s = score(head, self, how);
	if (best_s == 2)
		return head;
	for (sw = wft_waitq_next(head), i = 1; sw && i < WFT_PICK_WINDOW;
	     sw = wft_waitq_next(sw), i++) {
		s = score(sw, self, how);
		if (s > best_s) {
			best = sw;
			best_s = s;
			if (s == 2)
				break;
		}
	}
	if (best != head)
		head->skips++;
	return best;
}

/* ---------------------------------------------------------------------- */
/* Flush. */

struct group {
	struct wft_worker *w;
	struct weft_thread *first, *last;
	unsigned n;
};

static struct wft_waiter *next_of(struct wft_waiter *wt)
{
	struct wft_dlist *n = wt->node.next;

	return n ? wft_container_of(n, struct wft_waiter, node) : NULL;
}

static void stat_inc_flush(struct wft_worker *self, unsigned batches)
{
	wft_stat_inc_any(self, wakeq_flushes);
	wft_stat_add_any(self, wakeq_batches, batches);
}

static void deliver(struct group *g, struct wft_wake_burst *burst)
{
	wft_wake_push_burst(g->w, g->first, g->last, g->n, burst);
	g->w = NULL;
	g->first = g->last = NULL;
	g->n = 0;
}

static void flush_batched(struct wft_waiter *wt, struct wft_worker *self)
{
	struct group g[WFT_WAKEQ_GROUPS];
	unsigned ng = 0, oldest = 0, batches = 0, i;
	struct wft_waiter *next;
	struct weft_thread *t;
	struct wft_worker *target;
	/* one parked worker per batch for its unpinned wakees (wake.c R4) */
	struct wft_wake_burst burst = { NULL, NULL, false, 0 };

	for (; wt; wt = next) {
		next = next_of(wt);   /* I2: read before the record is released */
		t = wft_waiter_claim(wt);
		if (!t)
			continue;     /* OS thread (futex-woken) or not parked yet */
		target = wft_wake_place(t, self, &burst);
		if (target == self && self) {
			/* no next slot: a batch must not displace the flusher's
			 * own ping-pong partner; FIFO behind it instead */
			wft_stat_inc(self, wakes_local);
			wft_worker_push_local(self, t, false);
			continue;
		}
		for (i = 0; i < ng; i++)
			if (g[i].w == target)
				break;
		if (i == ng) {
			if (ng == WFT_WAKEQ_GROUPS) {
				i = oldest;
				oldest = (oldest + 1) % WFT_WAKEQ_GROUPS;
				deliver(&g[i], &burst);
				batches++;
			} else {
				ng++;
			}
			g[i].w = target;
			g[i].first = g[i].last = NULL;
			g[i].n = 0;
		}
		/* t->link: t is ours until push_remote (we won its PARKED CAS) */
		t->link = NULL;
		if (g[i].last)
			g[i].last->link = t;
		else
			g[i].first = t;
		g[i].last = t;
		g[i].n++;
	}
	for (i = 0; i < ng; i++)
		if (g[i].n) {
			deliver(&g[i], &burst);
			batches++;
		}
	/* one kick for the batch; the kick chain wakes the other targets */
	wft_wake_burst_end(&burst);
	stat_inc_flush(self, batches);
}

void wft_wake_q_flush(struct wft_wake_q *q)
{
	struct wft_waiter *wt = q->first, *next;
	uint32_t n = q->n;

	q->first = q->last = NULL;
	q->n = 0;
	if (!wt)
		return;
	if (n > 1 && wft_feat(BATCH_WAKE)) {
		flush_batched(wt, wft_worker_self());
		return;
	}
	for (; wt; wt = next) {
		next = next_of(wt);   /* I2 */
		wft_waiter_wake(wt);
	}
	if (n > 1)
		stat_inc_flush(wft_worker_self(), 0);
}

/* ---------------------------------------------------------------------- */
/* Public API. */

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (wq NULL).
 */
int weft_wakeq_init(weft_wakeq_t *wq)
{
	if (!wq)
		return EINVAL;
	*wq = (weft_wakeq_t)WEFT_WAKEQ_INITIALIZER;
	return 0;
}

/*
 * Context: any; the caller should hold no sync object's lock (the point of
 * a wake queue). May park: no.
 * Returns: 0, EINVAL (wq NULL).
 */
int weft_wakeq_flush(weft_wakeq_t *wq)
{
	if (!wq)
		return EINVAL;
	wft_wake_q_flush(wft_wake_q_of(wq));
	return 0;
}
