/*
 * runtime/stack.h - the bulk memory behind thread stacks and TCBs
 * (runtime/stack.c "Chunks" and "Bulk memory").
 */
#ifndef WFT_STACK_H
#define WFT_STACK_H

#include <stddef.h>

/* size bytes of zeroed memory, cache-line aligned, from 2 MiB-aligned
 * regions advised for transparent huge pages; NULL if none can be mapped.
 * Never freed: the caller keeps and reuses it (TCB slabs).
 * Context: any; takes a mutex. */
void *wft_bulk_alloc(size_t size);

/* Start of a runtime (weft_init, before the workers start): the guard
 * fallback's count starts again ("Guard fallback" in stack.c), and
 * fault_guard > 0 makes the next fault_guard guard-marker installs fail
 * with ENOMEM (WEFT_FAULT=guard:N, a test knob). Context: weft_init;
 * takes a mutex. */
void wft_stack_runtime_init(long fault_guard);

#endif
