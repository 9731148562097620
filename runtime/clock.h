/*
 * runtime/clock.h - the runtime's clocks (runtime/clock.c).
 */
#ifndef WFT_CLOCK_H
#define WFT_CLOCK_H

#include "runtime/panic.h"

/* CLOCK_MONOTONIC in ns. Context: any. */
weft_time_t wft_now(void);
/* CLOCK_MONOTONIC_COARSE (a few ms resolution, a few ns to read): the
 * dump's "blocked since" stamps. Context: any. */
weft_time_t wft_coarse_now(void);

#endif
