/*
 * runtime/panic.h - what every private header of the runtime builds on: the
 * C library basics, the public types, the atomics vocabulary, and how a
 * broken internal invariant stops the process (WFT_DEBUG, wft_panic,
 * WFT_ASSERT; wft_panic_at is defined in runtime/init.c).
 */
#ifndef WFT_PANIC_H
#define WFT_PANIC_H

#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <weft.h>

#include "runtime/atomic.h"

#ifdef WFT_DEBUG_BUILD
#define WFT_DEBUG 1
#else
#define WFT_DEBUG 0
#endif

/* Broken internal invariant: print where, then abort (Go's throw). */
#define wft_panic(...) wft_panic_at(__FILE__, __LINE__, __VA_ARGS__)
__attribute__((noreturn, format(printf, 3, 4), cold))
void wft_panic_at(const char *file, int line, const char *fmt, ...);

#define WFT_ASSERT(c) do { \
	if (WFT_DEBUG && !(c)) \
		wft_panic("assertion failed: %s", #c); \
	else \
		(void)sizeof(c); \
} while (0)

#endif
