/*
 * runtime/waiter.c - waiters: what every blocking primitive parks.
 *
 * What it owns: struct wft_waiter (runtime/waiter.h), the one abstraction that
 * lets every primitive work from weft threads and from plain OS threads.
 * A waiter is either
 *   - a weft thread: it waits with wft_thread_park() and is woken through
 *     the runtime's wake path (weft_unpark: mailbox, never a target lock); or
 *   - a plain OS thread: it waits with futex_wait on its own state word and
 *     is woken with futex_wake on that word.
 *
 * States: WAITING -> WOKEN, written once by the waker (release: publishes
 * result/data and whatever the primitive handed over).
 *
 * Wait protocol (no lost wakeup):
 *
 *   waiter                                waker
 *   ----------------------------------    --------------------------------
 *   loop: load state (acquire)            t = wt->thread       (read first!)
 *     WOKEN? done                         store state = WOKEN  (release)
 *     weft thread: park(deadline)         weft thread: weft_unpark(t)
 *     OS thread: futex_wait(state,        OS thread:   futex_wake(&state)
 *                WAITING, deadline)
 *
 * Weft thread: either the waiter's state load sees WOKEN, or the unpark
 * comes after that load; the unpark token (Park protocol, runtime/thread.c)
 * then makes the next park return, and the loop re-reads the state.
 * OS thread: futex_wait compares state with WAITING inside the kernel, so a
 * store + wake that comes before the sleep makes it return at once.
 *
 * Lifetime: the waiter usually lives on the waiting thread's stack and may
 * vanish as soon as WOKEN is stored. So the waker reads wt->thread before
 * the store, and after it touches only the thread (type-stable TCB,
 * runtime/thread.c I1; a late unpark of a thread that moved on is a
 * spurious, harmless token) or, for an OS thread, makes a futex_wake on an
 * address that may already be reused: the kernel finds no waiter or wakes
 * one that re-checks its word (the same accepted pattern as glibc's).
 */
#include "runtime/waiter.h"
#include "runtime/futex.h"
#include "runtime/wake.h"

void wft_waiter_init(struct wft_waiter *wt)
{
	wt->thread = wft_thread_self();
	atomic_init(&wt->state, WFT_WAITER_WAITING);
	wft_dlist_init(&wt->node);
	wt->data = 0;
	wt->result = 0;
}

static int waiter_wait(struct wft_waiter *wt, weft_time_t deadline)
{
	for (;;) {
		/* acquire: pairs with the release store of WOKEN in wake */
		if (atomic_load_explicit(&wt->state, memory_order_acquire) != WFT_WAITER_WAITING)
			return 0;
		if (wt->thread) {
			if (wft_thread_park(deadline) == ETIMEDOUT &&
			    atomic_load_explicit(&wt->state, memory_order_acquire) == WFT_WAITER_WAITING)
				return ETIMEDOUT;
		} else {
			if (deadline != WEFT_TIME_INFINITE && wft_now() >= deadline)
				return ETIMEDOUT;
			wft_futex_wait(&wt->state, WFT_WAITER_WAITING, deadline);
		}
	}
}

int wft_waiter_wait(struct wft_waiter *wt, weft_time_t deadline)
{
	struct weft_thread *t = wt->thread;
	int r;

	/* weft_dump: what we block on: the blocking call's own note, else
	 * where the primitive called us from */
	/* acquire: as in waiter_wait (already woken: no note needed) */
	if (!t || t->wait_what ||
	    atomic_load_explicit(&wt->state, memory_order_acquire) != WFT_WAITER_WAITING)
		return waiter_wait(wt, deadline);
	wft_wait_note(t, "sync", __builtin_return_address(0));
	r = waiter_wait(wt, deadline);
	wft_wait_clear(t);
	return r;
}

static void waiter_wake(struct wft_waiter *wt, int flags)
{
	struct weft_thread *t = wt->thread;

	/* release: publishes result/data; pairs with the acquire load in wait.
	 * After this store the waiter may be gone (see Lifetime). */
	atomic_store_explicit(&wt->state, WFT_WAITER_WOKEN, memory_order_release);
	if (!t) {
		wft_futex_wake(&wt->state, 1);
		return;
	}
	if (wft_unpark_token(t))
		wft_wake(t, WFT_WAKE_NORMAL | flags);
}

void wft_waiter_wake_sync(struct wft_waiter *wt)
{
	waiter_wake(wt, WFT_WAKE_F_SYNC);
}

struct weft_thread *wft_waiter_claim(struct wft_waiter *wt)
{
	struct weft_thread *t = wt->thread;

	/* release: as in waiter_wake */
	atomic_store_explicit(&wt->state, WFT_WAITER_WOKEN, memory_order_release);
	if (!t) {
		wft_futex_wake(&wt->state, 1);
		return NULL;
	}
	if (!wft_unpark_token(t))
		return NULL;
	return wft_wake_claim(t, WFT_WAKE_NORMAL) ? t : NULL;
}

void wft_waiter_wake(struct wft_waiter *wt)
{
	waiter_wake(wt, 0);
}

/*
 * Hand-off wake. Why: a mutex in hand-off mode gives the lock to a parked
 * waiter and the lock stays idle until that waiter runs. Woken where it last
 * ran, that costs a remote wake and, if its worker sleeps, a kick and the
 * kernel's wake-up latency (tens of us on a VM) per hand-off; with 128
 * waiters every head has waited 1 ms, hand-off mode never ends, and
 * examples/test-mutex V 128 fell to a fraction of its throughput
 * (docs/design.md "Measured alternatives"). Here the wakee runs next on
 * the caller's worker, at the price of one switch: a queue of N waiters then
 * cycles in N switches plus holds, well under the 1 ms that keeps hand-off
 * mode going, so the mode ends by itself. Where the wakee may go is wake
 * placement's call (runtime/wake.c "Hand-off").
 */
void wft_waiter_wake_yield(struct wft_waiter *wt)
{
	struct weft_thread *t;

	if (!wft_wake_handoff_ok()) {
		waiter_wake(wt, 0);
		return;
	}
	t = wft_waiter_claim(wt);
	/* NULL: an OS thread, or not parked yet: nothing to place */
	if (t && wft_wake_handoff(t))
		weft_yield();
}
