/*
 * runtime/tcb.h - the pool of thread control blocks: slabs that are never
 * freed, a global lock-free free list and a per-worker cache
 * (runtime/tcb.c).
 */
#ifndef WFT_TCB_H
#define WFT_TCB_H

#include "runtime/thread.h"

struct wft_worker;

struct weft_thread *wft_tcb_alloc(struct wft_worker *w);
void wft_tcb_release(struct wft_worker *w, struct weft_thread *t);
void wft_tcb_pool_fini_unsafe(void);
void wft_tcb_cache_flush(struct wft_worker *w);
/* Move the stacks still held by cached TCBs into the stack cache (whose
 * bound and trim then apply). Returns how many it had to unmap (cache and
 * pool full). Owner worker. */
unsigned wft_tcb_cache_drop_stacks(struct wft_worker *w);
/* Visit every TCB ever allocated (the slabs are kept for the life of the
 * process: tcb.c I1). fn may read the TCB racily (a snapshot).
 * Context: any; takes the slab lock. */
void wft_tcb_foreach(void (*fn)(struct weft_thread *t, void *arg), void *arg);

#endif
