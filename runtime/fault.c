/*
 * runtime/fault.c - fault injection for the tests: WEFT_FAULT=alloc:N
 * fails the N-th internal allocation, WEFT_FAULT=sqfull:N makes the next N
 * io_uring SQE requests find the SQ full, WEFT_FAULT=trimslow:US makes
 * every slot a deep stack trim gives back take US microseconds more,
 * WEFT_FAULT=rescueslow:US makes a stranded-mail rescue wait US
 * microseconds before it gives the pinned threads back,
 * WEFT_FAULT=drainfix:N makes the N highest-id workers drain for good
 * (the DRAIN controller off) (guard:N is runtime/stack.c's).
 * The feature refusals make the kernel (or liburing) answer as one without
 * an io_uring feature would, so each fallback runs on a kernel that has
 * the feature:
 *   ringflags:MASK  io_uring_setup fails with EINVAL for every setup mode
 *                   whose flags include one of MASK (IORING_SETUP_* bits,
 *                   strtoul syntax: 0x2000 is DEFER_TASKRUN), as on a
 *                   kernel that lacks those flags (runtime/uring.c Setup);
 *   noops:MASK      the opcode probe reports the IORING_OP_* whose bit is
 *                   in MASK (opcodes below 64) unsupported;
 *   nokickmulti     the kick's multishot poll is refused (EINVAL);
 *   noacceptdontwait, nopollfirst   accept's IORING_ACCEPT_DONTWAIT and a
 *                   receive's IORING_RECVSEND_POLL_FIRST are refused (EINVAL);
 *   noringfd        the ring fd is not registered (as if the kernel
 *                   refused it).
 * And one race that a test cannot time:
 *   gatefree        the kick gate's recheck always finds a CPU free, so a
 *                   gated kick hands that CPU to a pending worker at once
 *                   (runtime/idle.c gate_leave), as when a worker parks
 *                   between the gate's decision and its recheck.
 * Knobs combine separated by commas (alloc, sqfull, trimslow, rescueslow,
 * drainfix and guard must come first). All are off unless the variable names them;
 * weft_init resets them (wft_fault_reset_unsafe) before any worker starts.
 * Also wft_malloc, the allocator that goes through the injector.
 */
#include "runtime/fault.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* The feature refusals (see the top of this file). 0 = off. */
_Atomic unsigned wft_fault_ringflags;
_Atomic unsigned long long wft_fault_noops;
_Atomic unsigned wft_fault_refuse;
/* WEFT_FAULT=trimslow:US: the deep trim's scavenge (runtime/stack.c
 * "Scavenge") sleeps US microseconds after each slot, as a trimmer that
 * the host preempts does, which a test cannot otherwise force. 0 = off. */
_Atomic long wft_fault_trimslow_us;
/* WEFT_FAULT=rescueslow:US: runtime/idle.c mail_rescue waits US
 * microseconds between its take and its push-back, the window in which
 * the victim may drain an empty mailbox and park. 0 = off. */
_Atomic long wft_fault_rescueslow_us;
/* WEFT_FAULT=drainfix:N: see fault.h. */
_Atomic long wft_fault_drainfix;

void wft_fault_delay(_Atomic long *knob)
{
	/* relaxed: a test knob, set before the workers start */
	long us = atomic_load_explicit(knob, memory_order_relaxed);

	if (wft_unlikely(us > 0)) {
		struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

		nanosleep(&ts, NULL);
	}
}

void *wft_malloc(size_t n)
{
	return wft_fault_alloc() ? NULL : malloc(n);
}

/* The refusals named in e, a comma-separated list (other names are
 * ignored: alloc, sqfull, trimslow, rescueslow and guard are read from
 * the start of e). */
static void parse_refusals(const char *e)
{
	static const struct {
		const char *name;
		unsigned bit;
	} names[] = {
		{ "nokickmulti", WFT_FAULT_KICK_MULTISHOT },
		{ "noacceptdontwait", WFT_FAULT_ACCEPT_DONTWAIT },
		{ "nopollfirst", WFT_FAULT_POLL_FIRST },
		{ "noringfd", WFT_FAULT_RING_FD },
		{ "gatefree", WFT_FAULT_GATE_FREE },
	};
	unsigned ringflags = 0, refuse = 0;
	unsigned long long noops = 0;

	while (e && *e) {
		size_t len = strcspn(e, ",");

		if (len > 10 && strncmp(e, "ringflags:", 10) == 0)
			ringflags |= (unsigned)strtoul(e + 10, NULL, 0);
		else if (len > 6 && strncmp(e, "noops:", 6) == 0)
			noops |= strtoull(e + 6, NULL, 0);
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (len == strlen(names[i].name) && strncmp(e, names[i].name, len) == 0)
				refuse |= names[i].bit;
		e += len;
		if (*e == ',')
			e++;
	}
	atomic_store_explicit(&wft_fault_ringflags, ringflags, memory_order_relaxed);
	atomic_store_explicit(&wft_fault_noops, noops, memory_order_relaxed);
	atomic_store_explicit(&wft_fault_refuse, refuse, memory_order_relaxed);
}

void wft_fault_reset_unsafe(const char *e)
{
	atomic_store_explicit(&fault_at, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_fault_sqfull_left, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_fault_trimslow_us, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_fault_rescueslow_us, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_fault_drainfix, 0, memory_order_relaxed);
	if (e && strncmp(e, "alloc:", 6) == 0) {
		atomic_store_explicit(&fault_count, 0, memory_order_relaxed);
		atomic_store_explicit(&fault_at, atol(e + 6), memory_order_relaxed);
	} else if (e && strncmp(e, "sqfull:", 7) == 0) {
		atomic_store_explicit(&wft_fault_sqfull_left, atol(e + 7), memory_order_relaxed);
	} else if (e && strncmp(e, "trimslow:", 9) == 0) {
		atomic_store_explicit(&wft_fault_trimslow_us, atol(e + 9), memory_order_relaxed);
	} else if (e && strncmp(e, "rescueslow:", 11) == 0) {
		atomic_store_explicit(&wft_fault_rescueslow_us, atol(e + 11), memory_order_relaxed);
	} else if (e && strncmp(e, "drainfix:", 9) == 0) {
		atomic_store_explicit(&wft_fault_drainfix, atol(e + 9), memory_order_relaxed);
	}
	parse_refusals(e);
}
