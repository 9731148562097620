/*
 * runtime/waiter.h - the waiter: what every blocking primitive parks, a weft
 * thread or a plain OS thread (runtime/waiter.c).
 */
#ifndef WFT_WAITER_H
#define WFT_WAITER_H

#include "runtime/panic.h"
#include "runtime/list.h"

struct weft_thread;

enum { WFT_WAITER_WAITING = 0, WFT_WAITER_WOKEN = 1 };

struct wft_waiter {
	struct weft_thread *thread;       /* NULL: OS thread */
	_Atomic uint32_t state;           /* WAITING -> WOKEN by exactly one waker */
	struct wft_dlist node;            /* wait-queue link; the queue's lock protects it */
	uintptr_t data;                   /* primitive-specific (e.g. a requested count) */
	int result;                       /* primitive-specific outcome, set before WOKEN */
};

/* Prepare a waiter for the calling thread. Context: any. */
void wft_waiter_init(struct wft_waiter *wt);
/* Block until WOKEN or the deadline passes. Returns 0 (woken) or ETIMEDOUT;
 * after ETIMEDOUT the caller must resolve the race with a concurrent wake
 * under its own lock (the waker may have won meanwhile). Context: any. */
int wft_waiter_wait(struct wft_waiter *wt, weft_time_t deadline);
/* Mark WOKEN (release: publishes result/data) and wake its thread. The
 * waiter may be gone as soon as the state is stored; nothing else of it is
 * touched after. Context: any. */
void wft_waiter_wake(struct wft_waiter *wt);
/* Like wft_waiter_wake(), but the caller hints that it is about to block
 * (a rendezvous hand-off): the wakee may take the caller's place on its
 * worker (sync wakeup, runtime/wake.c). Context: any. May park: no. */
void wft_waiter_wake_sync(struct wft_waiter *wt);
/* Batched wake, step 1: mark wt WOKEN (release) and, for a weft thread,
 * give its unpark token and win its PARKED -> RUNNABLE transition without
 * enqueueing it. Returns the thread the caller must now deliver (with
 * wft_wake_deliver, or in a chain through wft_wake_push /
 * wft_worker_push_local), or NULL when there is nothing to deliver: an OS
 * thread (woken here by futex), or a thread that had not parked yet (it
 * sees WOKEN / its token by itself). Nothing of *wt is touched after the
 * WOKEN store. Context: any. May park: no. */
struct weft_thread *wft_waiter_claim(struct wft_waiter *wt);
/* Hand-off wake (Go's semrelease with handoff): the caller has just given
 * the wakee something it must act on at once (a mutex it now owns). From a
 * weft thread (and with SYNC_WAKE on) the wakee goes to the caller's worker,
 * next slot, and the caller yields to it, so the hand-off costs a switch and
 * not a remote wake and kick; otherwise as wft_waiter_wake(). Context: any.
 * May park: no (a weft-thread caller may be switched out and resumed). */
void wft_waiter_wake_yield(struct wft_waiter *wt);

#endif
