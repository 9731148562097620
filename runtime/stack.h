/*
 * runtime/stack.h - the bulk memory behind thread stacks and TCBs
 * (runtime/stack.c "Chunks" and "Bulk memory").
 */
#ifndef WFT_STACK_H
#define WFT_STACK_H

#include <stddef.h>

/* size bytes of zeroed memory, cache-line aligned, from 2 MiB-aligned
 * regions advised for transparent huge pages; NULL if none can be mapped.
 * Never freed one by one: wft_bulk_free_all() unmaps every region.
 * Context: any; takes a mutex. */
void *wft_bulk_alloc(size_t size);

/* Unmap every region of wft_bulk_alloc. Context: weft_shutdown, nothing
 * uses the memory any more. */
void wft_bulk_free_all(void);

#endif
