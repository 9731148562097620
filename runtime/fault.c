/*
 * runtime/fault.c - fault injection for the tests: WEFT_FAULT=alloc:N
 * fails the N-th internal allocation, WEFT_FAULT=sqfull:N makes the next N
 * io_uring SQE requests find the SQ full, WEFT_FAULT=trimslow:US makes
 * every slot a deep stack trim gives back take US microseconds more
 * (guard:N is runtime/stack.c's). All are off (0) unless the variable
 * names them; weft_init resets them
 * (wft_fault_reset_unsafe) before any worker starts. Also wft_malloc, the
 * allocator that goes through the injector.
 */
#include "runtime/fault.h"

#include <stdlib.h>
#include <string.h>

/* Fault injection: WEFT_FAULT=alloc:N fails the N-th internal allocation
 * (counted from weft_init). 0 = off: one predictable branch. */
static _Atomic long fault_at;
static _Atomic long fault_count;

bool wft_fault_alloc(void)
{
	/* relaxed: a test knob, set before the workers start */
	long at = atomic_load_explicit(&fault_at, memory_order_relaxed);

	if (wft_likely(!at))
		return false;
	return atomic_fetch_add_explicit(&fault_count, 1, memory_order_relaxed) + 1 == at;
}

/* WEFT_FAULT=sqfull:N: the next N requests for an io_uring SQE behave as
 * if the SQ were full and the kernel refused the flush (uring.c
 * wft_uring_get_sqe), to reach the yield path a test cannot otherwise
 * force. 0 = off. */
_Atomic long wft_fault_sqfull_left;

bool wft_fault_sqfull_take(void)
{
	/* relaxed: a test knob and a counter, nothing published with it */
	long n = atomic_load_explicit(&wft_fault_sqfull_left, memory_order_relaxed);

	while (n > 0)
		if (atomic_compare_exchange_weak_explicit(&wft_fault_sqfull_left, &n, n - 1,
				memory_order_relaxed, memory_order_relaxed))
			return true;
	return false;
}

/* WEFT_FAULT=trimslow:US: the deep trim's scavenge (runtime/stack.c
 * "Scavenge") sleeps US microseconds after each slot, as a trimmer that
 * the host preempts does, which a test cannot otherwise force. 0 = off. */
_Atomic long wft_fault_trimslow_us;

void *wft_malloc(size_t n)
{
	return wft_fault_alloc() ? NULL : malloc(n);
}

void wft_fault_reset_unsafe(const char *e)
{
	atomic_store_explicit(&fault_at, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_fault_sqfull_left, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_fault_trimslow_us, 0, memory_order_relaxed);
	if (e && strncmp(e, "alloc:", 6) == 0) {
		atomic_store_explicit(&fault_count, 0, memory_order_relaxed);
		atomic_store_explicit(&fault_at, atol(e + 6), memory_order_relaxed);
	} else if (e && strncmp(e, "sqfull:", 7) == 0) {
		atomic_store_explicit(&wft_fault_sqfull_left, atol(e + 7), memory_order_relaxed);
	} else if (e && strncmp(e, "trimslow:", 9) == 0) {
		atomic_store_explicit(&wft_fault_trimslow_us, atol(e + 9), memory_order_relaxed);
	}
}
