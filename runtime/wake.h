/*
 * runtime/wake.h - the wake path: claim a parked thread, choose its worker
 * (placement), deliver it there, alone, in a chain or in a batch, and the
 * hand-off wake (runtime/wake.c).
 */
#ifndef WFT_WAKE_H
#define WFT_WAKE_H

#include "runtime/thread.h"

struct wft_worker;
struct wft_wake_burst;

/* Make a PARKED thread runnable (the wake path, runtime/wake.c).
 * Returns 1 if this call won the PARKED -> RUNNABLE transition, 0 otherwise.
 * reason is stored for the wakee. Never blocks; never takes a target lock.
 * Context: any. */
int wft_wake(struct weft_thread *t, int reason);
/* Flag or-ed into reason: the waker is about to block (see wake.c). */
#define WFT_WAKE_F_SYNC 0x100
/* The two halves of wft_wake, for batched wakeups (wake queues): win the
 * PARKED -> RUNNABLE CAS and store the reason (returns false if another
 * waker won or t was not parked), then deliver t to its target worker.
 * A caller that claims many threads may instead link them through t->link
 * and hand each target one chain with wft_wake_push(). */
bool wft_wake_claim(struct weft_thread *t, int reason);
void wft_wake_deliver(struct weft_thread *t, int flags);

/* Deliver a chain of threads (all targeting w) from another thread. */
void wft_wake_push(struct wft_worker *w, struct weft_thread *first,
			    struct weft_thread *last, unsigned n);
/* The same inside a batch: the kick is left to wft_wake_burst_end (one
 * wake syscall per batch, idle.c "Kick chain"). */
void wft_wake_push_burst(struct wft_worker *w, struct weft_thread *first,
				  struct weft_thread *last, unsigned n, struct wft_wake_burst *burst);
void wft_wake_burst_end(struct wft_wake_burst *burst);
/* Wake placement (runtime/wake.c): choose the worker a woken thread runs
 * on. burst: NULL for a single wake; for a batch (wake-queue flush) the
 * caller's zeroed struct, so that one batch wakes at most one parked
 * worker for its unpinned wakees. Context: the waker (any). */
struct wft_wake_burst {
	struct wft_worker *parked;        /* the parked worker this batch kicks */
	struct wft_worker *head;          /* the target the batch kicks itself;
	                                   * the others go to the kick chain */
	bool head_stealable;              /* the head's chain has unpinned threads */
	unsigned ndirect;                 /* targets kicked at once besides the head */
};
struct wft_worker *wft_wake_place(struct weft_thread *t, struct wft_worker *self,
				  struct wft_wake_burst *burst);
static inline struct wft_worker *wft_wake_target(struct weft_thread *t, struct wft_worker *self)
{
	return wft_wake_place(t, self, NULL);
}

/* The thread running on self (a light thread, not side work) has woken
 * only its last two partners lately (no wakee flips): a stage of a chain,
 * which wakes the stage after it and the one before it and then waits.
 * False without flip records (WAKE_WIDE off). Context: self's owner. */
bool wft_wake_chain_waker(struct wft_worker *self);

/* The hand-off placement of wft_waiter_wake_yield (runtime/wake.c): may
 * the calling context take a hand-off wakee into its own next slot? */
bool wft_wake_handoff_ok(void);
/* Place t, claimed by the caller, for a hand-off: the caller's worker,
 * next slot (returns true: the caller yields to it), or its pinned
 * worker elsewhere (false). Context: a weft thread (handoff_ok true). */
bool wft_wake_handoff(struct weft_thread *t);

#endif
