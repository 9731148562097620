/*
 * runtime/fault.h - fault injection for the tests (WEFT_FAULT) and the
 * allocator that goes through it (runtime/fault.c).
 */
#ifndef WFT_FAULT_H
#define WFT_FAULT_H

#include "runtime/panic.h"

/* Fault injection: WEFT_FAULT=alloc:N fails the N-th internal allocation. */
bool wft_fault_alloc(void);
/* WEFT_FAULT=sqfull:N: inline, as it sits on every SQE request:
 * one relaxed load when off (a test knob; nothing is published with it). */
extern _Atomic long wft_fault_sqfull_left;
bool wft_fault_sqfull_take(void);
static inline bool wft_fault_sqfull(void)
{
	return wft_unlikely(atomic_load_explicit(&wft_fault_sqfull_left, memory_order_relaxed) > 0) &&
	       wft_fault_sqfull_take();
}
/* WEFT_FAULT=trimslow:US: microseconds added to each slot of a deep
 * stack trim (runtime/stack.c "Scavenge"); 0 = off. relaxed loads: a
 * test knob set before the workers start. */
extern _Atomic long wft_fault_trimslow_us;
void *wft_malloc(size_t n);  /* malloc through the fault injector */
/* Arm the knobs that e (WEFT_FAULT's value, or NULL) names, disarm the
 * others. Context: weft_init, under init_lock, no worker running. */
void wft_fault_reset_unsafe(const char *e);

#endif
