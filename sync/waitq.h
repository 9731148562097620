/*
 * sync/waitq.h - pieces shared by the sync primitives (private).
 *
 *  - struct wft_swaiter: a primitive's wait record, on the waiter's stack,
 *    wrapping the generic struct wft_waiter of runtime/waiter.c.
 *  - struct wft_waitq: a FIFO of wait records, NULL-terminated so that an
 *    all-zero object is a valid empty queue (the public static initialisers
 *    are all zeros).
 *  - owner ids, used by the mutex and the rwlock.
 *  - the wake queue internals (struct wft_wake_q) and "pick", the choice of
 *    which waiter to wake (FIFO, or a cache-hot one among the first few).
 *
 * Every object's wait queue is protected by its slock (sync/slock.h).
 */
#ifndef WFT_SYNC_WAITQ_H
#define WFT_SYNC_WAITQ_H

#include "runtime/wft.h"
#include "sync/slock.h"
#include <weft/sync.h>

/* ---------------------------------------------------------------------- */
/* Wait records and queues. */

/* Outcomes stored in wft_waiter.result by the waker (before WOKEN). */
enum {
	WFT_SW_GRANTED = 1,   /* the waker gave us what we waited for (sem unit,
	                       * rwlock hold, barrier release, once done, ...) */
	WFT_SW_HANDED,        /* mutex: ownership was handed to us directly */
	WFT_SW_COMPETE,       /* mutex: the lock was released; go and compete
	                       * (we are the mutex's one "woken" waiter) */
	WFT_SW_RELOCK,        /* mutex: a cond signal could not queue us on the
	                       * mutex (store mode, mutex.c "Unlock mode"):
	                       * lock it afresh */
	WFT_SW_RETRY,         /* rwlock: a writer's turn came before its
	                       * patience ran out; it was unlinked and must
	                       * try again (rwlock.c "Bounded pass") */
};

/* sw->claim: who decides the fate of a queued record whose owner may time
 * out (cond.c, sem.c). One atomic byte on the record itself, so that a
 * timed-out owner can learn the outcome without touching the object (which
 * its waker may destroy and free as soon as the record is unlinked):
 *   WFT_SW_WAITING    queued, undecided. Initial value.
 *   WFT_SW_CLAIMED    a waker won (CAS, under the object's slock): it has
 *                     unlinked (or is about to unlink) the record and will
 *                     store WOKEN. cond: the record moved to the mutex
 *                     ("ON_MUTEX"); sem: a unit was granted. Final.
 *   WFT_SW_CANCELLED  the owner won (CAS, lockless, after its deadline): no
 *                     waker may grant it any more; the owner itself must
 *                     take the object's slock and account for the record.
 *                     Final.
 * Exactly one of the two CASes sees WAITING. The owner that loses never
 * touches the object again (it waits for WOKEN); the owner that wins is
 * still counted by the object (its queue, or a "leaving" count if a waker
 * met the cancelled record first and unlinked it), so destroy cannot
 * succeed before the owner has taken the slock and dropped that count.
 * The mutex's own waiters do not use it (mutex.c decides by `queued` under
 * m->qlock; a mutex is not destroyed while waited on). */
enum { WFT_SW_WAITING = 0, WFT_SW_CLAIMED = 1, WFT_SW_CANCELLED = 2 };

struct wft_swaiter {
	struct wft_waiter w;      /* w.node links the queue; w.result the outcome */
	uintptr_t id;             /* mutex/rwlock: the waiter's owner id */
	weft_time_t since;        /* mutex: when it first queued (hand-off) */
	uint8_t queued;           /* on a wait queue: that queue's slock */
	_Atomic uint8_t claim;    /* cond, sem: WFT_SW_*, CAS only (above) */
	uint8_t skips;            /* times pick() passed it over at the head */
	uint8_t kind;             /* rwlock: reader or writer */
};

/* Prepare a record for the calling thread. Context: any. */
static inline void wft_swaiter_init(struct wft_swaiter *sw, uintptr_t id)
{
	wft_waiter_init(&sw->w);
	sw->w.result = 0;
	sw->id = id;
	sw->since = 0;
	sw->queued = 0;
	/* relaxed: not shared until queued under the object's slock, whose
	 * release publishes it */
	wft_store(&sw->claim, WFT_SW_WAITING, relaxed);
	sw->skips = 0;
	sw->kind = 0;
}

#define wft_swaiter_of(n) wft_container_of((n), struct wft_swaiter, w.node)

/* Owner, after its deadline passed with the record still WAITING: try to
 * cancel it (see sw->claim above).
 * Returns: true - cancelled; the owner must take the object's slock and
 * unlink/uncount the record. false - a waker claimed it first; the owner
 * must wait for WOKEN and must not touch the object.
 * Context: the record's owner. May park: no. */
static inline bool wft_swaiter_cancel(struct wft_swaiter *sw)
{
	uint8_t exp = WFT_SW_WAITING;

	/* relaxed: pairs with the claim CAS in wft_swaiter_claim_locked(); the
	 * RMWs alone decide (one modification order, one winner). Nothing is
	 * read on the strength of it: a winner then takes the slock (ordered
	 * with every waker by the slock), a loser reads the outcome after its
	 * acquire load of WOKEN. */
	return wft_cas(&sw->claim, &exp, WFT_SW_CANCELLED, relaxed);
}

/* Waker, holding the object's slock, about to grant or move sw: try to
 * claim it. Returns: true - claimed (grant it, wake it later); false - its
 * owner cancelled it (unlink it and count it as leaving, or leave it).
 * Context: any. May park: no. Locks: the slock of the queue sw is on. */
static inline bool wft_swaiter_claim_locked(struct wft_swaiter *sw)
{
	uint8_t exp = WFT_SW_WAITING;

	/* relaxed: pairs with the cancel CAS in wft_swaiter_cancel(); see
	 * there. The outcome the waker then writes (w.result) is published by
	 * its later WOKEN release store. */
	return wft_cas(&sw->claim, &exp, WFT_SW_CLAIMED, relaxed);
}

/* A FIFO of wait records linked through w.node, NULL-terminated at both
 * ends (so all zeros = empty). Protected by the owning object's slock. */
struct wft_waitq {
	struct wft_dlist *head, *tail;
};

static inline bool wft_waitq_empty(const struct wft_waitq *q)
{
	return q->head == NULL;
}

static inline void wft_waitq_push_back(struct wft_waitq *q, struct wft_swaiter *sw)
{
	struct wft_dlist *n = &sw->w.node;

	n->next = NULL;
	n->prev = q->tail;
	if (q->tail)
		q->tail->next = n;
	else
		q->head = n;
	q->tail = n;
	sw->queued = 1;
}

static inline void wft_waitq_push_front(struct wft_waitq *q, struct wft_swaiter *sw)
{
	struct wft_dlist *n = &sw->w.node;

	n->prev = NULL;
	n->next = q->head;
	if (q->head)
		q->head->prev = n;
	else
		q->tail = n;
	q->head = n;
	sw->queued = 1;
}

static inline void wft_waitq_remove(struct wft_waitq *q, struct wft_swaiter *sw)
{
	struct wft_dlist *n = &sw->w.node;

	if (n->prev)
		n->prev->next = n->next;
	else
		q->head = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		q->tail = n->prev;
	n->next = n->prev = NULL;
	sw->queued = 0;
}

static inline struct wft_swaiter *wft_waitq_first(const struct wft_waitq *q)
{
	return q->head ? wft_swaiter_of(q->head) : NULL;
}

static inline struct wft_swaiter *wft_waitq_next(const struct wft_swaiter *sw)
{
	return sw->w.node.next ? wft_swaiter_of(sw->w.node.next) : NULL;
}

static inline struct wft_swaiter *wft_waitq_pop_front(struct wft_waitq *q)
{
	struct wft_swaiter *sw = wft_waitq_first(q);

	if (sw)
		wft_waitq_remove(q, sw);
	return sw;
}

/* Move every record of src to the tail of dst (src becomes empty). The
 * records keep queued = 1. */
static inline void wft_waitq_splice_back(struct wft_waitq *dst, struct wft_waitq *src)
{
	if (!src->head)
		return;
	if (dst->tail) {
		dst->tail->next = src->head;
		src->head->prev = dst->tail;
	} else {
		dst->head = src->head;
	}
	dst->tail = src->tail;
	src->head = src->tail = NULL;
}

/* ---------------------------------------------------------------------- */
/* Owner ids (mutex, rwlock writer): a weft thread is identified by its TCB
 * address; a plain OS thread by the address of a thread-local byte, tagged
 * with WFT_ID_OS so that nobody dereferences it as a TCB. Both are 8-byte
 * aligned, which leaves bits 0..2 for the tag and the lock-word flags. */

#define WFT_ID_OS ((uintptr_t)4)

/* initial-exec: its address is fs-relative, no __tls_get_addr call on the
 * uncontended lock path (libweft is linked, not dlopen'ed, like libpthread) */
extern __thread uint64_t wft_mutex_os_id __attribute__((tls_model("initial-exec")));

/* Owner id of the caller; *tp receives the TCB (NULL on an OS thread).
 * Inline wft_thread_self(): this is on every lock and unlock.
 * Context: any. */
static inline uintptr_t wft_sync_self_id(struct weft_thread **tp)
{
	struct wft_worker *w = wft_worker_self();
	struct weft_thread *t = w ? w->current : NULL;

	*tp = t;
	if (wft_likely(t != NULL))
		return (uintptr_t)t;
	return (uintptr_t)&wft_mutex_os_id | WFT_ID_OS;
}

/* ---------------------------------------------------------------------- */
/* Wake queue internals (sync/wake_q.c). The public weft_wakeq_t is this
 * struct; records are linked through their w.node.next once they are off
 * their primitive's queue (the primitive's slock gave that up). */

struct wft_wake_q {
	struct wft_waiter *first, *last;
	uint32_t n;
	uint32_t pad;
	uint64_t reserved;
};
_Static_assert(sizeof(struct wft_wake_q) <= sizeof(weft_wakeq_t), "wake_q fits the public type");

#define wft_wake_q_of(wq) ((struct wft_wake_q *)(void *)(wq))

/* Append a granted waiter (result already stored, record already off its
 * queue). It stays blocked until the flush. Context: any; the caller may
 * hold the primitive's slock. */
static inline void wft_wake_q_add(struct wft_wake_q *q, struct wft_waiter *wt)
{
	wt->node.next = NULL;
	if (q->last)
		q->last->node.next = &wt->node;
	else
		q->first = wt;
	q->last = wt;
	q->n++;
}

/* Wake everything in q (the body of weft_wakeq_flush). Context: any, no
 * slock held. */
void wft_wake_q_flush(struct wft_wake_q *q);

/* How "pick" scores candidates (see "Pick" in sync/wake_q.c):
 *   AFFINE   - cache-hot first: last ran on the waker's worker, then on an
 *              idle worker (sem posts: the wakee's data is where it ran);
 *   RUN_NOW  - soonest to run first: an idle worker, then any other worker
 *              or an OS thread, the waker's own worker last (mutex and cond:
 *              the waker keeps running, so a wakee queued behind it cannot
 *              take the lock before the waker blocks). */
enum { WFT_PICK_AFFINE, WFT_PICK_RUN_NOW };

/* Choose which of q's waiters to wake when any one of them can proceed
 * (sem post, cond signal, mutex unlock in normal mode): the head, unless one
 * of the first WFT_PICK_WINDOW records scores better and the head has not
 * been passed over too often. Returns NULL if q is empty. Does not remove
 * it. Context: any, q's slock held. */
struct wft_swaiter *wft_wake_q_pick_slow(struct wft_waitq *q, int how);

static inline struct wft_swaiter *wft_wake_q_pick(struct wft_waitq *q, int how)
{
	struct wft_swaiter *head = wft_waitq_first(q);

	/* one waiter (the common case, e.g. sembench's one per semaphore) */
	if (!head || !head->w.node.next)
		return head;
	return wft_wake_q_pick_slow(q, how);
}

#endif
