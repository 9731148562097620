/*
 * runtime/timer.c - per-worker timer heaps: deadlines of sleeps and timed parks.
 *
 * What it owns: one binary min-heap of struct wft_timer pointers per worker,
 * ordered by deadline, plus the heap's small spinlock.
 *
 * Objects and states: a timer is IDLE, ARMED (in exactly one heap, at
 * index idx) or FIRING (popped by the heap's owner, fn running). See the
 * state comment in runtime/timer.h.
 *
 * Invariants:
 *   I1 An ARMED timer is in the heap of tm->heap at index tm->idx; the heap's
 *      lock protects n, v[], idx and the ARMED/FIRING transitions.
 *   I2 Only the heap's owner worker pops and fires; fn runs without the lock.
 *   I3 h->next is the minimum deadline (or WEFT_TIME_INFINITE), updated under
 *      the lock; the idle loop reads it as a hint for its sleep timeout.
 *
 * Protocol:
 *   Arm: the thread about to park, on its current worker, inserts its timer
 *   into that worker's heap. A thread arms only its own timer, one at a time.
 *   Fire: the owner, in its scheduling loop, pops every timer whose deadline
 *   has passed, marks it FIRING under the lock, runs fn unlocked, then stores
 *   IDLE (release).
 *   Cancel: the thread, after it resumed (maybe on another worker: that is
 *   why there is a lock at all), removes its timer if still ARMED, or waits
 *   while it is FIRING. After cancel returns, fn is not running and will not
 *   run, so the thread may park again or exit without a stale timer waking
 *   the next user of its TCB.
 *
 * Why a lock and not a lock-free structure: cancel from another worker is
 * rare (a thread woken before its deadline that also migrated), the lock is
 * per worker and held for O(log n), and it is never taken on a wake path. A
 * waker never touches it: the timer's own fn goes through wft_wake().
 *
 * Rejected: lazy deletion (stale entries pile up at the rate of early
 * wakeups times the timeout length); a hashed timing wheel (the deadlines
 * here are few per worker and precision matters more than O(1) insertion).
 */
#include "runtime/timer.h"
#include "runtime/worker.h"
#include "runtime/fault.h"

#include <stdlib.h>

#define HEAP_INITIAL 64

static inline void heap_lock(struct wft_timer_heap *h)
{
	/* acquire: pairs with the release clear in heap_unlock */
	while (atomic_flag_test_and_set_explicit(&h->lock, memory_order_acquire))
		wft_cpu_relax();
}

static inline void heap_unlock(struct wft_timer_heap *h)
{
	/* release: publishes heap changes to the next locker */
	atomic_flag_clear_explicit(&h->lock, memory_order_release);
}

void wft_timer_heap_init_unsafe(struct wft_timer_heap *h)
{
	atomic_flag_clear(&h->lock);
	h->n = 0;
	h->cap = 0;
	h->v = NULL;
	atomic_init(&h->next, WEFT_TIME_INFINITE);
}

void wft_timer_heap_fini_unsafe(struct wft_timer_heap *h)
{
	free(h->v);
	h->v = NULL;
	h->n = h->cap = 0;
}

static void sift_up(struct wft_timer_heap *h, unsigned i)
{
	struct wft_timer *x = h->v[i];

	while (i > 0) {
		unsigned p = (i - 1) / 2;

		if (h->v[p]->deadline <= x->deadline)
			break;
		h->v[i] = h->v[p];
		h->v[i]->idx = (int)i;
		i = p;
	}
	h->v[i] = x;
	x->idx = (int)i;
}

static void sift_down(struct wft_timer_heap *h, unsigned i)
{
	struct wft_timer *x = h->v[i];

	for (;;) {
		unsigned c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && h->v[c + 1]->deadline < h->v[c]->deadline)
			c++;
		if (x->deadline <= h->v[c]->deadline)
			break;
		h->v[i] = h->v[c];
		h->v[i]->idx = (int)i;
		i = c;
	}
	h->v[i] = x;
	x->idx = (int)i;
}

static void heap_remove_locked(struct wft_timer_heap *h, unsigned i)
{
	h->n--;
	if (i != h->n) {
		h->v[i] = h->v[h->n];
		h->v[i]->idx = (int)i;
		sift_down(h, i);
		sift_up(h, (unsigned)h->v[i]->idx);
	}
}

static void update_next_locked(struct wft_timer_heap *h)
{
	/* relaxed: hint for the idle loop, which re-reads it after its fence */
	atomic_store_explicit(&h->next, h->n ? h->v[0]->deadline : WEFT_TIME_INFINITE,
			      memory_order_relaxed);
}

int wft_timer_arm(struct wft_worker *w, struct wft_timer *tm, weft_time_t deadline)
{
	struct wft_timer_heap *h = &w->timers;

	heap_lock(h);
	if (h->n == h->cap) {
		unsigned ncap = h->cap ? h->cap * 2 : HEAP_INITIAL;
		struct wft_timer **nv = NULL;

		if (!wft_fault_alloc())
			nv = realloc(h->v, ncap * sizeof(*nv));
		if (!nv) {
			heap_unlock(h);
			return ENOMEM;
		}
		h->v = nv;
		h->cap = ncap;
	}
	tm->deadline = deadline;
	tm->heap = w;
	h->v[h->n] = tm;
	tm->idx = (int)h->n;
	h->n++;
	sift_up(h, h->n - 1);
	/* relaxed: transitions are protected by the heap lock (I1) */
	atomic_store_explicit(&tm->tstate, WFT_TM_ARMED, memory_order_relaxed);
	update_next_locked(h);
	heap_unlock(h);
	return 0;
}

bool wft_timer_cancel(struct wft_timer *tm)
{
	struct wft_worker *w = tm->heap;
	bool was_armed = false;

	if (!w)
		return false;
	heap_lock(&w->timers);
	/* relaxed: under the heap lock (I1) */
	if (atomic_load_explicit(&tm->tstate, memory_order_relaxed) == WFT_TM_ARMED) {
		heap_remove_locked(&w->timers, (unsigned)tm->idx);
		atomic_store_explicit(&tm->tstate, WFT_TM_IDLE, memory_order_relaxed);
		update_next_locked(&w->timers);
		was_armed = true;
	}
	heap_unlock(&w->timers);
	/* acquire: pairs with the release store of IDLE after fn in
	 * wft_timer_run; once we see IDLE, fn is finished with the thread */
	while (atomic_load_explicit(&tm->tstate, memory_order_acquire) == WFT_TM_FIRING)
		wft_cpu_relax();
	tm->heap = NULL;
	return was_armed;
}

unsigned wft_timer_run(struct wft_worker *w, weft_time_t now)
{
	struct wft_timer_heap *h = &w->timers;
	unsigned fired = 0;

	for (;;) {
		struct wft_timer *tm;

		heap_lock(h);
		if (!h->n || h->v[0]->deadline > now) {
			update_next_locked(h);
			heap_unlock(h);
			break;
		}
		tm = h->v[0];
		heap_remove_locked(h, 0);
		/* relaxed: under the heap lock (I1) */
		atomic_store_explicit(&tm->tstate, WFT_TM_FIRING, memory_order_relaxed);
		heap_unlock(h);
		tm->fn(tm);
		/* release: fn's effects happen before a canceller sees IDLE */
		atomic_store_explicit(&tm->tstate, WFT_TM_IDLE, memory_order_release);
		fired++;
	}
	if (fired)
		wft_stat_add(w, timers_fired, fired);
	return fired;
}
