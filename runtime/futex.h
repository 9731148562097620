/*
 * runtime/futex.h - futex wait and wake on a 32-bit word (runtime/futex.c).
 */
#ifndef WFT_FUTEX_H
#define WFT_FUTEX_H

#include "runtime/panic.h"

void wft_futex_wait(_Atomic uint32_t *addr, uint32_t val, weft_time_t deadline);
void wft_futex_wake(_Atomic uint32_t *addr, int n);

#endif
