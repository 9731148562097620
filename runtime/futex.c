/*
 * runtime/futex.c - the futex calls every sleeping part of weft makes: an
 * idle worker without io_uring (idle.c), an OS thread waiting on a waiter
 * (waiter.c), start-up and shutdown (init.c, worker.c).
 *
 * Private futexes only: every word lives in this process. The wait takes
 * an absolute CLOCK_MONOTONIC deadline (weft's clock, wft_now) through
 * FUTEX_WAIT_BITSET, so a retry after a spurious wakeup does not stretch
 * the timeout. Both calls are async-signal-safe system calls.
 */
#include "runtime/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

void wft_futex_wait(_Atomic uint32_t *addr, uint32_t val, weft_time_t deadline)
{
	struct timespec ts, *tp = NULL;

	if (deadline != WEFT_TIME_INFINITE) {
		ts.tv_sec = (time_t)(deadline / 1000000000ull);
		ts.tv_nsec = (long)(deadline % 1000000000ull);
		tp = &ts;
	}
	/* returns at once when *addr != val (checked in the kernel, under
	 * the futex bucket lock): a store + wake before the sleep is not lost */
	syscall(SYS_futex, addr, FUTEX_WAIT_BITSET_PRIVATE, val, tp, NULL, FUTEX_BITSET_MATCH_ANY);
}

void wft_futex_wake(_Atomic uint32_t *addr, int n)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}
