/*
 * runtime/timer.h - deadlines: struct wft_timer (embedded in the TCB for
 * timed parks, and in the I/O and gang code) and the per-worker timer heap
 * that fires them (runtime/timer.c).
 */
#ifndef WFT_TIMER_H
#define WFT_TIMER_H

#include "runtime/panic.h"

struct wft_worker;

/* A deadline registered in a worker's timer heap. */
/* Timer states (tm->tstate): IDLE -> ARMED (arm, under the heap lock) ->
 * FIRING (popped by the owner, under the lock) -> IDLE (after fn returned,
 * release). wft_timer_cancel() waits out FIRING, so after it returns fn is
 * neither running nor pending (the kernel's del_timer_sync). */
enum { WFT_TM_IDLE = 0, WFT_TM_ARMED, WFT_TM_FIRING };

struct wft_timer {
	weft_time_t deadline;
	int idx;                          /* heap index; heap lock */
	_Atomic int tstate;               /* see above */
	struct wft_worker *heap;          /* worker whose heap it was armed on; written
	                                   * and read only by the arming thread */
	void (*fn)(struct wft_timer *);   /* runs on the heap's worker, heap lock not held */
};

/* Timers (runtime/timer.c): a binary min-heap per worker. The owner runs
 * it; a thread that resumes elsewhere cancels its own timer under the
 * heap's small lock (never on a wake path). */

struct wft_timer_heap {
	atomic_flag lock;
	unsigned n, cap;
	struct wft_timer **v;
	_Atomic weft_time_t next;         /* earliest deadline, a hint for the idle loop */
};

void wft_timer_heap_init_unsafe(struct wft_timer_heap *h);
void wft_timer_heap_fini_unsafe(struct wft_timer_heap *h);
/* Arm tm on w's heap. Returns 0 or ENOMEM. Context: owner worker. */
int wft_timer_arm(struct wft_worker *w, struct wft_timer *tm, weft_time_t deadline);
/* Disarm tm wherever it is. Returns true if it was still armed. Context: any. */
bool wft_timer_cancel(struct wft_timer *tm);
/* Fire every timer due at now. Returns how many fired. Owner worker. */
unsigned wft_timer_run(struct wft_worker *w, weft_time_t now);

#endif
