/*
 * runtime/tcb.h - the pool of thread control blocks: slabs that are never
 * freed, a global lock-free free list and a per-worker cache
 * (runtime/tcb.c); the cache's pop is inline, as every spawn takes it.
 */
#ifndef WFT_TCB_H
#define WFT_TCB_H

#include "runtime/thread.h"
#include "runtime/worker.h"

/* A free TCB from the global pool, growing it by a slab if it is empty;
 * NULL if no memory. Context: any. */
struct weft_thread *wft_tcb_alloc_slow(void);

/* A free TCB: from w's cache (inline: every spawn takes this path), else
 * from the global pool. w is the caller's worker, or NULL on an OS
 * thread. Returns NULL if no memory. Context: any (w's owner for w). */
static inline struct weft_thread *wft_tcb_alloc(struct wft_worker *w)
{
	struct weft_thread *t;

	if (w && w->tcb_cache) {
		t = w->tcb_cache;
		w->tcb_cache = t->link;
		w->ntcb--;
		if (t->stack)
			w->ntcb_stacked--;
		return t;
	}
	return wft_tcb_alloc_slow();
}

/* Give t back: to w's cache (with its stack, up to a bound: see "Stacks
 * that stay with their TCB" in tcb.c), else to the global pool. Context:
 * w's owner, or any with w NULL. */
void wft_tcb_release(struct wft_worker *w, struct weft_thread *t);
/* Shutdown: free every exited TCB that was never reaped (the slabs stay).
 * Context: weft_shutdown, the workers joined. */
void wft_tcb_pool_fini_unsafe(void);
/* Return w's cache to the global pool (worker exit, before the stack
 * cache goes). Owner worker. */
void wft_tcb_cache_flush(struct wft_worker *w);
/* Move the stacks still held by cached TCBs into the stack cache (whose
 * bound and trim then apply). Returns how many it had to unmap (cache and
 * pool full). Owner worker. */
unsigned wft_tcb_cache_drop_stacks(struct wft_worker *w);
/* Visit every TCB ever allocated (the slabs are kept for the life of the
 * process: thread.c I1). fn may read the TCB racily (a snapshot).
 * Context: any; takes the slab lock. */
void wft_tcb_foreach(void (*fn)(struct weft_thread *t, void *arg), void *arg);

#endif
