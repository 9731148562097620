/*
 * runtime/stack.c - thread stacks: mmap'd, guard page by default, allocated
 * when a thread first runs, cached per worker when it finishes.
 *
 * What it owns: the mapping of each thread stack and each worker's stack
 * cache (an owner-only array of {base, size, guard} entries).
 *
 * Layout of one stack mapping (grows down):
 *
 *   base                base+page                               base+map_size
 *   | guard (PROT_NONE) | usable stack ............................ |
 *
 * Without a guard page the mapping is just the usable part.
 *
 * Colouring. The usable part is the requested size plus one page, and a
 * thread starts 0..3840 bytes (wft_stack_colour: 16 colours, 256 bytes
 * apart, a hash of the mapping's address) below the top. Stacks are
 * page-aligned mappings of equal size, so without it every stack's hot top
 * lines fall into the same L1 set (the low 12 address bits agree): a
 * recursion that keeps ~30 stacks live (fib) missed L1 about once per
 * spawn (cachegrind: 1.19 M D1 misses for fib(30) on one worker, 5.5 k with
 * colouring). The extra page costs address space only (MAP_NORESERVE; the
 * colour gap shares the top page with the stack's first frames).
 *
 * Each stack with
 * a guard costs two VMAs (the mprotect splits the mapping), so the default
 * vm.max_map_count of 65530 allows roughly 32,000 simultaneously live
 * guarded stacks in a process (minus what the program maps itself).
 * attr.guard = 0 halves that cost to one VMA per stack, at the price of no
 * overflow detection. Threads that have not run yet hold no stack at all,
 * so 1,000,000 spawned-but-unstarted threads cost only their TCBs.
 *
 * Invariants:
 *   I1 A cached stack's usable size and guard flag are recorded with it; a
 *      thread gets a cached stack only if both match what it asked for.
 *   I2 The cache of worker w is touched only by w (owner only), so no lock.
 *   I3 The cache holds at most STACK_CACHE_MAX entries; the idle loop trims
 *      it to STACK_CACHE_KEEP once the worker has been idle a while or the
 *      whole runtime sleeps (idle.c "Cache trim": memory goes back to the
 *      kernel when the program stops spawning).
 *   I4 The overflow pool (below) is touched only under pool_lock.
 *
 * Overflow pool. Stacks are usually allocated and freed on the same worker
 * (spawn/exit churn), and the per-worker caches hit without sharing a cache
 * line. But fork-join across workers is a producer/consumer pair: a thief
 * runs a stolen subtree whose threads are joined, and their TCBs and stacks
 * freed, on the worker that spawned them, or the reverse, so one worker's
 * cache overflowed (munmap) while the other's ran dry (mmap): fib(30) on 2
 * workers mapped 500-770 stacks a run, 30 on one worker (WEFT_STATS
 * "thread stacks mapped"). A full cache now hands the stack to a global
 * pool of STACK_POOL_MAX entries under a mutex, and a cache miss looks
 * there before mapping: both are the rare paths (a full or an empty
 * cache), so the lock is not on the spawn/exit fast path. The pool is
 * emptied when every worker sleeps and at shutdown.
 *
 * Rejected: a global lock-free stack cache for every allocation (the
 * common case hits the per-worker cache without sharing a cache line);
 * MAP_GROWSDOWN (unreliable, and it cannot coexist with a guard page the
 * runtime controls).
 */
#include "runtime/wft.h"
#include "runtime/sanitizer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Enough for the spawn/exit churn of a worker (a burst of short threads
 * recycles the same few stacks); bounded so a burst of 100,000 threads
 * does not pin 100,000 stacks. */
#define STACK_CACHE_MAX 64
/* What a parked worker keeps. */
#define STACK_CACHE_KEEP 8
/* Overflow pool: 4 caches' worth; beyond it stacks are unmapped. */
#define STACK_POOL_MAX 256

struct stack_entry {
	void *base;
	size_t size;
	int guard;
	unsigned vg;
};

/* Give t the newest of the n entries of a that matches its size and guard
 * (I1), removing it. false if none does. */
static bool take_entry(struct stack_entry *a, unsigned *n, struct weft_thread *t)
{
	for (unsigned i = *n; i-- > 0;) {
		if (a[i].size == t->stack_size && a[i].guard == t->guard) {
			t->stack = a[i].base;
			t->stack_vg = a[i].vg;
			a[i] = a[--*n];
			return true;
		}
	}
	return false;
}

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stack_entry pool[STACK_POOL_MAX];
static unsigned npool;                 /* under pool_lock */
/* npool as a hint for a lock-free "empty" test on the miss path (relaxed:
 * a stale value costs one lock round or one mmap, never correctness) */
static _Atomic unsigned npool_hint;

/* Give e to the pool. false if full. */
static bool pool_put(const struct stack_entry *e)
{
	bool ok = false;

	pthread_mutex_lock(&pool_lock);
	if (npool < STACK_POOL_MAX) {
		pool[npool++] = *e;
		ok = true;
		atomic_store_explicit(&npool_hint, npool, memory_order_relaxed);
	}
	pthread_mutex_unlock(&pool_lock);
	return ok;
}

/* Take a pooled stack of t's size and guard into t. false if none. */
static bool pool_get(struct weft_thread *t)
{
	bool ok;

	if (!atomic_load_explicit(&npool_hint, memory_order_relaxed))
		return false;
	pthread_mutex_lock(&pool_lock);
	ok = take_entry(pool, &npool, t);
	atomic_store_explicit(&npool_hint, npool, memory_order_relaxed);
	pthread_mutex_unlock(&pool_lock);
	return ok;
}

/* Set on first use by any thread (see wft_page_size in wft.h). */
_Atomic size_t wft_page_size_v;

size_t wft_page_size_slow(void)
{
	size_t p = (size_t)sysconf(_SC_PAGESIZE);

	/* relaxed: every racing writer stores the same value, and nothing
	 * else is published with it */
	atomic_store_explicit(&wft_page_size_v, p, memory_order_relaxed);
	return p;
}

static size_t map_size(size_t size, int guard)
{
	return size + wft_page_size() + (guard ? wft_page_size() : 0);   /* + colour page */
}

static void stack_unmap(struct stack_entry *e)
{
	WFT_VG_STACK_DEREGISTER(e->vg);
	munmap(e->base, map_size(e->size, e->guard));
}

int wft_stack_alloc(struct wft_worker *w, struct weft_thread *t)
{
	struct stack_entry *cache = (struct stack_entry *)w->stack_cache;
	size_t len;
	void *p;

	if (take_entry(cache, &w->nstacks, t) || pool_get(t))
		return 0;
	if (wft_fault_alloc())
		return ENOMEM;
	len = map_size(t->stack_size, t->guard);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (p == MAP_FAILED)
		return ENOMEM;
	if (t->guard && mprotect(p, wft_page_size(), PROT_NONE) != 0) {
		munmap(p, len);
		return ENOMEM;
	}
	t->stack = p;
	wft_stat_inc(w, stack_maps);
	/* Valgrind: register the usable part; the id travels with the stack */
	t->stack_vg = WFT_VG_STACK_REGISTER(wft_stack_lo(t), (char *)p + len);
	return 0;
}

int wft_stack_release(struct wft_worker *w, struct weft_thread *t)
{
	struct stack_entry e = { t->stack, t->stack_size, t->guard, t->stack_vg };

	if (!t->stack)
		return 0;
	t->stack = NULL;
	if (w && w->nstacks < w->stack_cache_cap) {
		((struct stack_entry *)w->stack_cache)[w->nstacks++] = e;
		return 0;
	}
	if (pool_put(&e))
		return 0;
	stack_unmap(&e);
	return 1;
}

/* Hand w's cached stacks to the pool, for a thread that waits for a
 * stack on another worker (worker.c "Stack shortage"); what the pool has
 * no room for stays. Context: w's owner. */
void wft_stack_share(struct wft_worker *w)
{
	struct stack_entry *cache = (struct stack_entry *)w->stack_cache;

	/* relaxed: a hint; full, the pool would refuse under its lock at
	 * every pick while the shortage lasts */
	if (atomic_load_explicit(&npool_hint, memory_order_relaxed) >= STACK_POOL_MAX)
		return;
	while (w->nstacks > 0 && pool_put(&cache[w->nstacks - 1]))
		w->nstacks--;
}

unsigned wft_stack_pool_trim(void)
{
	struct stack_entry *out;
	unsigned n;

	if (!atomic_load_explicit(&npool_hint, memory_order_relaxed))
		return 0;
	out = malloc(sizeof(pool));
	pthread_mutex_lock(&pool_lock);
	n = npool;
	if (out)
		memcpy(out, pool, n * sizeof(*out));
	else
		n = 0;   /* no memory to unmap outside the lock: keep them */
	npool -= n;
	atomic_store_explicit(&npool_hint, npool, memory_order_relaxed);
	pthread_mutex_unlock(&pool_lock);
	for (unsigned i = 0; i < n; i++)
		stack_unmap(&out[i]);
	free(out);
	return n;
}

unsigned wft_stack_trim(struct wft_worker *w, unsigned keep)
{
	struct stack_entry *cache = (struct stack_entry *)w->stack_cache;
	unsigned n = 0;

	for (; w->nstacks > keep; n++)
		stack_unmap(&cache[--w->nstacks]);
	return n;
}

int wft_stack_cache_init(struct wft_worker *w)
{
	w->stack_cache = calloc(STACK_CACHE_MAX, sizeof(struct stack_entry));
	if (!w->stack_cache)
		return ENOMEM;
	w->stack_cache_cap = STACK_CACHE_MAX;
	w->nstacks = 0;
	return 0;
}

void wft_stack_cache_fini(struct wft_worker *w)
{
	wft_stack_trim(w, 0);
	free(w->stack_cache);
	w->stack_cache = NULL;
	w->stack_cache_cap = 0;
}

unsigned wft_stack_cache_keep(void)
{
	return STACK_CACHE_KEEP;
}
