/*
 * runtime/wake.c - the wake path, weft's try_to_wake_up.
 *
 * What it owns: the PARKED -> RUNNABLE transition and the choice of where
 * a woken thread runs. See DESIGN.md "Wake path" and seed 000.
 *
 * wake(t):
 *   1. CAS t->state PARKED -> RUNNABLE. A waker (unpark), a timeout (timer
 *      fn) and a cancel may race here: exactly one CAS succeeds, and only
 *      the winner continues, so a thread is queued at most once
 *      (mailbox.c I1). Linearisation point: the successful CAS.
 *   2. The winner writes t->wake_reason (read by the wakee after it resumes;
 *      the queue hand-off publishes it: release push / acquire take).
 *   3. Placement: wft_wake_target() (the hook for the wake-placement issue:
 *      wake_affine / wake_wide / idle siblings). Today: the pinned worker,
 *      else the thread's last worker, else the waker's.
 *   4. Target is the waker's own worker -> next slot (ping-pong locality);
 *      otherwise the target's mailbox, with a kick only if the target
 *      announced idle (runtime/idle.c). A waker never takes a lock of the
 *      target (except with NO_MAILBOX, the A/B baseline).
 *
 * The thread may still be switching out on its old worker when it is
 * queued; the worker that picks it waits for on_cpu == 0 (worker.c I2).
 */
#include "runtime/wft.h"

struct wft_worker *wft_wake_target(struct weft_thread *t, struct wft_worker *self)
{
	struct wft_worker *last;

	if (t->pin >= 0)
		return wft_rt.workers[t->pin];
	/* relaxed: a placement hint */
	last = atomic_load_explicit(&t->worker, memory_order_relaxed);
	if (last && WFT_DRAIN_ON()) {
		/* DRAIN: a thread of a draining worker (one of the ndrain
		 * highest ids, as in wft_worker_draining) moves to an active one
		 * (runtime/drain.c); relaxed: a hint, read once here */
		int active = wft_rt.nworkers - atomic_load_explicit(&wft_rt.ndrain, memory_order_relaxed);

		if (last->id >= active) {
			wft_stat_inc_any(self, drain_moves);
			return wft_rt.workers[last->id % active];
		}
	}
	if (last)
		return last;
	return self ? self : wft_rt.workers[0];
}

bool wft_wake_claim(struct weft_thread *t, int reason)
{
	int expected = WFT_T_PARKED;

	/* seq_cst: the load half of the Park protocol's StoreLoad pair when
	 * called after weft_unpark's token xchg (runtime/thread.c); acq_rel
	 * would do for the race between wakers themselves */
	if (!atomic_compare_exchange_strong_explicit(&t->state, &expected, WFT_T_RUNNABLE,
			memory_order_seq_cst, memory_order_relaxed))
		return false;
	t->wake_reason = reason & ~WFT_WAKE_F_SYNC;
	return true;
}

void wft_wake_deliver(struct weft_thread *t, int flags)
{
	struct wft_worker *self = wft_worker_self(), *target;

	/* Sync wakeup (the kernel's WF_SYNC with nr_running == 1, Go's runnext):
	 * the waker is about to block and its worker has nothing else to run,
	 * so the wakee takes the waker's place at once. Gated on an empty worker
	 * because nothing preempts the waker, and a thief takes a thread from
	 * the next slot only after it has sat there a while (worker.c I5). */
	if ((flags & WFT_WAKE_F_SYNC) && self && t->pin < 0 && wft_feat(SYNC_WAKE) &&
	    !wft_worker_has_work(self))
		target = self;
	else
		target = wft_wake_target(t, self);
	if (target == self) {
		wft_stat_inc(self, wakes_local);
		wft_worker_push_local(self, t, true);
	} else {
		wft_worker_push_remote(target, t, t, 1);
	}
}

int wft_wake(struct weft_thread *t, int reason)
{
	if (!wft_wake_claim(t, reason))
		return 0;
	wft_wake_deliver(t, reason & WFT_WAKE_F_SYNC);
	return 1;
}
