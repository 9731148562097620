/*
 * runtime/tcb.c - the pool of thread control blocks (struct weft_thread).
 *
 * What it owns: the TCB slabs (from malloc, then from the huge-page bulk
 * memory of runtime/stack.c), the global free list and each worker's TCB
 * cache, and the stacks that cached TCBs keep. What a TCB holds and how a
 * thread uses it is runtime/thread.c; this file only hands TCBs out and
 * takes them back.
 *
 * Invariant (thread.c I1, kept here): TCB memory is type-stable. Slabs are
 * never freed, not even by weft_shutdown(), so a stale pointer reads a TCB,
 * never unmapped memory; a freed TCB's t->seq changes when it is reused
 * (the spawn bumps it).
 *
 * Pool: a per-worker cache (owner only, no atomics) over a global
 * ABA-safe stack. The global stack uses libatomic_ops' double-word CAS
 * (cmpxchg16b): {top, version} changes together, so a pop that read
 * top->link before another thread popped and re-pushed top fails its CAS.
 * C11 <stdatomic.h> gives no lock-free 16-byte CAS (GCC routes it through
 * libatomic's locks), which is why libatomic_ops is used here. (AO_stack
 * itself is not used: its implementation is in libatomic_ops_gpl, and weft
 * does not link GPL code.)
 *
 * On aarch64 the CAS itself is GCC's 16-byte __sync builtin (dcas below),
 * not libatomic_ops': its ldaxp and stlxp are two asm statements, and the
 * compare between them is compiled code. At -O0 (--enable-debug) that
 * code keeps the loaded pair in stack slots: stores and loads between the
 * load-exclusive and the store-exclusive, which the architecture allows to
 * clear the exclusive monitor every time (Arm ARM, "Load-Exclusive and
 * Store-Exclusive instruction usage restrictions": a loop with explicit
 * memory accesses inside the exclusive window has no forward-progress
 * guarantee), so a push or pop could spin forever on some cores. qemu
 * cannot show it: it emulates the pair by comparing values. The builtin is
 * libgcc's __aarch64_cas16_sync: caspal with LSE, else one ldxp/stlxp loop
 * with nothing in between, then dmb ish, whatever the optimisation level.
 * tests/cross-aarch64.sh checks libweft.a for memory accesses or calls
 * inside any exclusive window.
 */
#include "runtime/tcb.h"
#include "runtime/fault.h"
#include "runtime/stack.h"
#include "runtime/sanitizer.h"

#include <atomic_ops.h>
#include <stdlib.h>
#include <string.h>

/* TCBs per slab: 64 KiB-ish slabs amortise malloc while keeping the first
 * spawn cheap. */
#define TCB_SLAB 256
/* Per-worker TCB cache bound: twice the slab churn of a spawn burst. */
#define TCB_CACHE_MAX 512

struct tcb_slab {
	struct tcb_slab *next;
	struct weft_thread tcbs[TCB_SLAB];
};

/* Slabs from malloc before the rest come from huge-page regions
 * (runtime/stack.c "Bulk memory"): 2,048 TCBs. */
#define TCB_SLABS_SMALL 8

static AO_double_t tcb_free __attribute__((aligned(16)));  /* {top, version} */
static pthread_mutex_t slab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tcb_slab *slabs;   /* slab_lock: from malloc */
static struct tcb_slab *bulk_slabs;   /* slab_lock: from bulk memory (kept apart: a
				       * leak checker does not scan bulk memory, so
				       * malloc'd slabs linked only from there looked
				       * leaked under LeakSanitizer) */
static _Atomic unsigned nslabs;  /* slabs made (they stay: see wft_tcb_pool_fini_unsafe) */

/* The double-word CAS of tcb_free, {o1, o2} -> {n1, n2}, a full barrier
 * (acquire and release: what the push publishes and the pop reads). */
#if defined(__aarch64__)
__extension__ typedef unsigned __int128 dword;

static inline bool dcas(AO_t o1, AO_t o2, AO_t n1, AO_t n2)
{
	dword o = ((dword)o2 << 64) | o1;
	dword n = ((dword)n2 << 64) | n1;

	/* AO_val1 is the low half of AO_whole on little-endian aarch64 */
	return __sync_bool_compare_and_swap(&tcb_free.AO_whole, o, n);
}
#else
static inline bool dcas(AO_t o1, AO_t o2, AO_t n1, AO_t n2)
{
	return AO_compare_double_and_swap_double_full(&tcb_free, o1, o2, n1, n2);
}
#endif

static void global_push(struct weft_thread *first, struct weft_thread *last)
{
	AO_t top, ver;

	do {
		/* acquire loads of both halves; the double CAS validates them */
		ver = AO_load_acquire(&tcb_free.AO_val2);
		top = AO_load_acquire(&tcb_free.AO_val1);
		last->link = (struct weft_thread *)top;
		/* TSan cannot see the double CAS (inline asm): the release it
		 * performs, covering the link just written */
		wft_san_release(&tcb_free);
		/* full barrier CAS: publishes the chain's links (release) */
	} while (!dcas(top, ver, (AO_t)first, ver + 1));
}

/* t->link of a top that another thread may have popped and be relinking
 * meanwhile: a race by design, made harmless by the version CAS (I1 keeps
 * the read itself safe); hidden from TSan, which would report it. */
static WFT_NO_TSAN struct weft_thread *stale_link(struct weft_thread *t)
{
	return __atomic_load_n(&t->link, __ATOMIC_RELAXED);
}

static struct weft_thread *global_pop(void)
{
	AO_t top, ver;
	struct weft_thread *t;

	do {
		ver = AO_load_acquire(&tcb_free.AO_val2);
		top = AO_load_acquire(&tcb_free.AO_val1);
		t = (struct weft_thread *)top;
		if (!t)
			return NULL;
		/* TSan: pairs with the release in global_push (the TCB's memory
		 * and link were written before it was pushed) */
		wft_san_acquire(&tcb_free);
		/* t->link may be stale if t was popped meanwhile; the version
		 * half makes the CAS fail then (I1 makes the read safe) */
	} while (!dcas(top, ver, (AO_t)stale_link(t), ver + 1));
	return t;
}

static int slab_grow(void)
{
	struct tcb_slab *s;

	if (wft_fault_alloc())
		return ENOMEM;
	/* cache-line aligned: a TCB's first two lines are what a switch
	 * touches (see struct weft_thread) */
	/* relaxed: a count that only picks the allocator */
	struct tcb_slab **list = &bulk_slabs;

	if (atomic_fetch_add_explicit(&nslabs, 1, memory_order_relaxed) < TCB_SLABS_SMALL ||
	    (s = wft_bulk_alloc(sizeof(*s))) == NULL) {   /* bulk: zeroed by the kernel */
		if (posix_memalign((void **)&s, WFT_CACHELINE, sizeof(*s)))
			return ENOMEM;
		memset(s, 0, sizeof(*s));
		list = &slabs;
	}
	for (unsigned i = 0; i < TCB_SLAB; i++) {
		s->tcbs[i].link = i + 1 < TCB_SLAB ? &s->tcbs[i + 1] : NULL;
		atomic_init(&s->tcbs[i].jstate, WFT_JS(WFT_J_FREE, 0));
	}
	pthread_mutex_lock(&slab_lock);
	s->next = *list;
	*list = s;
	pthread_mutex_unlock(&slab_lock);
	global_push(&s->tcbs[0], &s->tcbs[TCB_SLAB - 1]);
	return 0;
}

/*
 * Stacks that stay with their TCB. A thread whose TCB is freed by a weft
 * thread right after its exit (detached: by the exit switch; joined by a
 * weft thread already waiting: by that joiner) keeps its stack: the TCB
 * goes to the worker's TCB cache with it, and the next spawn that takes
 * the TCB and asks for the same stack size and guard runs on it without a
 * stack-cache round trip (spawn+join: ~70 instructions of the ~700 it
 * cost). Bound: at most TCB_STACKED_MAX cached TCBs per worker hold a
 * stack; past it, and whenever a TCB leaves the worker's cache (global
 * pool, worker exit), the stack goes to the stack cache, whose bound and
 * trim (runtime/stack.c) apply; a parking worker moves them all there
 * (wft_tcb_cache_drop_stacks) before trimming. TCBs in the global pool
 * never hold a stack. A thread exiting with nobody waiting (joinable, or
 * joined from an OS thread) returns its stack at exit as before: its TCB
 * may wait long for a join, and a burst of such exits must recycle one
 * stack instead of holding one each.
 */
#define TCB_STACKED_MAX 16

struct weft_thread *wft_tcb_alloc_slow(void)
{
	struct weft_thread *t;

	while (!(t = global_pop())) {
		if (slab_grow())
			return NULL;
	}
	return t;
}

void wft_tcb_release(struct wft_worker *w, struct weft_thread *t)
{
	if (w && w->ntcb < TCB_CACHE_MAX) {
		if (t->stack) {
			if (w->ntcb_stacked < TCB_STACKED_MAX)
				w->ntcb_stacked++;
			else
				wft_stack_release(w, t);
		}
		t->link = w->tcb_cache;
		w->tcb_cache = t;
		w->ntcb++;
		return;
	}
	if (t->stack)
		wft_stack_release(w, t);
	global_push(t, t);
}

unsigned wft_tcb_cache_drop_stacks(struct wft_worker *w)
{
	unsigned unmapped = 0;

	for (struct weft_thread *t = w->tcb_cache; t && w->ntcb_stacked; t = t->link) {
		if (t->stack) {
			unmapped += (unsigned)wft_stack_release(w, t);
			w->ntcb_stacked--;
		}
	}
	return unmapped;
}

/* Return a worker's cache to the global pool (worker exit; before the
 * stack cache goes). */
void wft_tcb_cache_flush(struct wft_worker *w)
{
	while (w->tcb_cache) {
		struct weft_thread *t = w->tcb_cache;

		w->tcb_cache = t->link;
		if (t->stack)
			wft_stack_release(w, t);
		global_push(t, t);
	}
	w->ntcb = 0;
	w->ntcb_stacked = 0;
}

/*
 * Shutdown: the slabs stay (I1 holds for the life of the process, so a
 * handle used after weft_shutdown reads a TCB, never freed memory), and
 * every TCB that was never reaped (a joinable thread that exited and was
 * not joined: EXITED) is freed here: FREE with its generation, back into the global pool. A
 * join or detach of such a stale handle then finds FREE and returns
 * EINVAL, where before it read freed memory, returned 0 and pushed the
 * TCB into the next runtime's pool. A stale handle whose TCB a later
 * runtime reuses is the dangling-handle case of weft_join (undefined, as
 * in pthreads). The worker caches were flushed to the global pool by the
 * workers' exits. Context: weft_shutdown, the workers joined.
 */
static void tcb_fini_one(struct weft_thread *t, void *arg)
{
	/* relaxed: the workers are joined (pthread_join orders) */
	uintptr_t js = atomic_load_explicit(&t->jstate, memory_order_relaxed);

	(void)arg;
	/* EXITED only: an EXITED_T belongs to a joiner that was woken and
	 * will reap it itself (an OS thread whose join races the shutdown);
	 * freeing it here too would push it twice */
	if (WFT_JS_IS_JOINER(js) || WFT_JS_CODE(js) != WFT_J_EXITED)
		return;
	if (t->specific) {
		free(t->specific);
		t->specific = NULL;
		t->nspecific = 0;
	}
	if (t->stack)
		wft_stack_release(NULL, t);
	atomic_store_explicit(&t->jstate, WFT_JS(WFT_J_FREE, t->seq), memory_order_relaxed);
	global_push(t, t);
}

void wft_tcb_pool_fini_unsafe(void)
{
	wft_tcb_foreach(tcb_fini_one, NULL);
}

/* Every TCB of every slab, malloc'd and bulk. */
void wft_tcb_foreach(void (*fn)(struct weft_thread *t, void *arg), void *arg)
{
	struct tcb_slab *lists[2];

	pthread_mutex_lock(&slab_lock);
	lists[0] = slabs;
	lists[1] = bulk_slabs;
	for (int l = 0; l < 2; l++)
		for (struct tcb_slab *s = lists[l]; s; s = s->next)
			for (unsigned i = 0; i < TCB_SLAB; i++)
				fn(&s->tcbs[i], arg);
	pthread_mutex_unlock(&slab_lock);
}
