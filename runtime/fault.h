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
/* Feature refusals: what a kernel without an io_uring feature answers,
 * forced on a kernel that has it, so the tests reach every fallback of
 * runtime/uring.c and runtime/io.c (runtime/fault.c lists the knobs).
 * Read at ring setup and when an SQE that uses the feature is prepared;
 * relaxed loads: test knobs set before the workers start, nothing is
 * published with them. */
extern _Atomic unsigned wft_fault_ringflags;   /* IORING_SETUP_* refused (EINVAL) */
extern _Atomic unsigned long long wft_fault_noops; /* IORING_OP_* (bit = op) not in the probe */
extern _Atomic unsigned wft_fault_refuse;      /* WFT_FAULT_* below */
enum {
	WFT_FAULT_KICK_MULTISHOT = 1,   /* the kick's multishot poll: EINVAL (before 5.13) */
	WFT_FAULT_ACCEPT_DONTWAIT = 2,  /* IORING_ACCEPT_DONTWAIT: EINVAL (before 6.10) */
	WFT_FAULT_POLL_FIRST = 4,       /* IORING_RECVSEND_POLL_FIRST: EINVAL (before 5.19) */
	WFT_FAULT_RING_FD = 8,          /* registering the ring fd fails (before 5.18) */
	/* not a refusal but a race forced: a CPU frees between the kick
	 * gate's decision and its recheck (runtime/idle.c gate_leave) */
	WFT_FAULT_GATE_FREE = 16,
};
/* A bit that no kernel defines in the fields the refusals above set it in
 * (an SQE's ioprio flags, a poll's len flags): the kernel rejects the SQE
 * with EINVAL, as a kernel that does not know the real flag does. */
#define WFT_FAULT_BAD_FLAG (1u << 15)
static inline bool wft_fault_refused(unsigned what)
{
	return wft_unlikely(atomic_load_explicit(&wft_fault_refuse, memory_order_relaxed) & what);
}
/* WEFT_FAULT=trimslow:US: microseconds added to each slot of a deep
 * stack trim (runtime/stack.c "Scavenge"); 0 = off. relaxed loads: a
 * test knob set before the workers start. */
extern _Atomic long wft_fault_trimslow_us;
/* WEFT_FAULT=rescueslow:US: microseconds a stranded-mail rescue waits
 * between taking a victim's mailbox and giving its pinned threads back
 * (runtime/idle.c mail_rescue), as a rescuer that the host preempts
 * there does; 0 = off. relaxed loads, as trimslow. */
extern _Atomic long wft_fault_rescueslow_us;
/* WEFT_FAULT=drainfix:N: the DRAIN controller (runtime/drain.c) never
 * runs and the N highest-id workers drain from the start, as after a
 * probe that won (which a test cannot force on a quiet host); 0 = off.
 * Read once by weft_init and the controller's entry; relaxed, as above. */
extern _Atomic long wft_fault_drainfix;
/* Sleep (the OS thread, nanosleep) for the microseconds *knob holds, if
 * any: the delay of trimslow and rescueslow. */
void wft_fault_delay(_Atomic long *knob);
void *wft_malloc(size_t n);  /* malloc through the fault injector */
/* Arm the knobs that e (WEFT_FAULT's value, or NULL) names, disarm the
 * others. Context: weft_init, under init_lock, no worker running. */
void wft_fault_reset_unsafe(const char *e);

#endif
