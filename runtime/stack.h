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

#endif
