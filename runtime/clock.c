/*
 * runtime/clock.c - the runtime's clocks: CLOCK_MONOTONIC in nanoseconds
 * (wft_now, every deadline and timer; weft_now_ns, the public face) and
 * its coarse variant (wft_coarse_now: the thread dump's "blocked since"
 * stamps, a few ms resolution for a few ns a read).
 *
 * Both go through the vDSO: no syscall, no shared state, callable from
 * anywhere (a weft thread, a scheduler loop, an OS thread, a signal
 * handler).
 */
#include "runtime/clock.h"

#include <time.h>

static inline weft_time_t ns_of(const struct timespec *ts)
{
	return (weft_time_t)ts->tv_sec * 1000000000ull + (weft_time_t)ts->tv_nsec;
}

weft_time_t wft_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ns_of(&ts);
}

weft_time_t weft_now_ns(void)
{
	return wft_now();
}

weft_time_t wft_coarse_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return ns_of(&ts);
}
