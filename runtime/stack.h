/*
 * runtime/stack.h - thread stacks: allocation from the per-worker cache,
 * the global pool or a new mapping, the stack-shortage count, the page
 * size, colouring, and the bulk memory behind stacks and TCB slabs
 * (runtime/stack.c "Chunks" and "Bulk memory").
 */
#ifndef WFT_STACK_H
#define WFT_STACK_H

#include "runtime/thread.h"

struct wft_worker;

/* Give t a stack from w's cache or a new mapping. Returns 0 or ENOMEM. Owner worker. */
int wft_stack_alloc(struct wft_worker *w, struct weft_thread *t);
/* Return t's stack to w's cache, else to the overflow pool, else unmap it.
 * Returns 1 if it unmapped it, else 0. Owner worker (w may be NULL). */
int wft_stack_release(struct wft_worker *w, struct weft_thread *t);
/* Threads that could not get a stack at their first run and wait for one
 * (worker.c "Stack shortage"): while any does, weft_spawn returns EAGAIN
 * for a thread that would need a new stack. Alone on its line: every pick
 * of every worker reads it (aligning the variable alone let io.c's
 * wait_hint, written on hot I/O calls, share its line). */
struct wft_padded_count {
	_Atomic long n;
	char pad[WFT_CACHELINE - sizeof(long)];
} wft_cacheline_aligned;
extern struct wft_padded_count wft_stack_waiters;
/* Hand w's cached stacks to the global pool (stack.c), unless it is full.
 * Owner worker. */
void wft_stack_share(struct wft_worker *w);
/* Unmap cached stacks down to keep; returns how many. Owner worker or
 * teardown. */
unsigned wft_stack_trim(struct wft_worker *w, unsigned keep);
/* Unmap every stack in the global overflow pool and give the pages of
 * dirty free chunk slots back (stack.c). Context: any OS thread; takes the
 * pool's mutex. Returns how many it unmapped or scavenged; *skipped (if
 * not NULL) is set when another thread was scavenging, so the slots made
 * dirty since it began are left for a later call. */
unsigned wft_stack_pool_trim(bool *skipped);
/* The page size: set on first use by any thread (spawns from OS threads
 * race there; every racer stores the same value). */
extern _Atomic size_t wft_page_size_v;
size_t wft_page_size_slow(void);
static inline size_t wft_page_size(void)
{
	/* relaxed: a constant once set; nothing is published with it */
	size_t p = atomic_load_explicit(&wft_page_size_v, memory_order_relaxed);

	return wft_likely(p) ? p : wft_page_size_slow();
}

/* t's usable stack [lo, lo + len): the requested size plus one colour page
 * on top (see "Colouring" in runtime/stack.c). */
static inline char *wft_stack_lo(const struct weft_thread *t)
{
	return (char *)t->stack + (t->guard ? wft_page_size() : 0);
}

static inline size_t wft_stack_len(const struct weft_thread *t)
{
	return t->stack_size + wft_page_size();
}

/* Bytes left unused at the top of t's stack: 0..15 x 256, a hash of the
 * mapping's address, fixed for the life of the mapping. */
static inline size_t wft_stack_colour(const struct weft_thread *t)
{
	return (size_t)((((uintptr_t)t->stack >> 12) * 0x9E3779B1u) >> 28 & 15) << 8;
}
int wft_stack_cache_init(struct wft_worker *w);
void wft_stack_cache_fini(struct wft_worker *w);
unsigned wft_stack_cache_keep(void);

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
