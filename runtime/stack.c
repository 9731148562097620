/*
 * runtime/stack.c - thread stacks: slots of shared mappings (or a mapping
 * of their own), guard page by default, allocated when a thread first
 * runs, cached per worker when it finishes; and the bulk memory of TCB
 * slabs.
 *
 * What it owns: the chunks and legacy mappings of thread stacks, each
 * worker's stack cache (an owner-only array of {base, size, guard}
 * entries), the overflow pool, and the bulk regions.
 *
 * Layout of one stack (a chunk slot or a mapping of its own; grows down):
 *
 *   base                base+page                               base+map_size
 *   | guard (PROT_NONE) | usable stack ............................ |
 *
 * Without a guard page the slot is just the usable part. The guard is a
 * guard marker in a chunk, a PROT_NONE page in a mapping of its own.
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
 * Mappings. Stacks of the usual sizes are slots of shared mappings, with
 * their guard page as a guard marker ("Chunks" below): a million live
 * stacks take about 4,000 mappings, so vm.max_map_count (65,530 by
 * default) does not cap live threads near 30,000 (as one or two mappings
 * per stack would). Threads that have not run yet hold no stack at all,
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
 *   I5 Chunks, classes and the chunk index are touched only under
 *      chunk_lock; a slot is in exactly one place: a thread, a cache, the
 *      pool, its chunk's free list, or a scavenger's batch ("Scavenge").
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
#include "runtime/stack.h"

#include <fcntl.h>
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

/* Set on first use by any thread (see wft_page_size in stack.h). */
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

/*
 * Chunks. A stack of the usual sizes is a slot of a chunk: one mapping of
 * n slots of equal size (at most CHUNK_STACKS_MAX and CHUNK_BYTES), so a
 * million live stacks cost about 4,000 mappings instead of one (no guard)
 * or two (guard) each, and vm.max_map_count (65,530 by default) does not
 * cap live threads near 30,000. A slot has the layout above (guard page,
 * usable part). The guard page is a guard marker installed with
 * madvise(MADV_GUARD_INSTALL) (Linux 6.13): an access faults as a
 * PROT_NONE page would, but the marker lives in the page table and does
 * not split the mapping. Where the kernel refuses it (older kernels), or
 * accepts it and does nothing (qemu-user: Guard probe below), guarded
 * stacks keep a mapping of their own as before (the "legacy" mapping: two
 * VMAs each) and only guard = 0 stacks come from chunks.
 * Stacks too big for CHUNK_STACKS_MIN slots per chunk are legacy too.
 *
 * A chunk's slots are carved in address order on first use (the guard
 * marker is installed then, once: it survives MADV_DONTNEED) and come
 * back to a free list when a stack leaves the caches and the pool. A
 * freed slot is dirty (its touched pages stay resident) until a deep
 * trim (every worker asleep, or shutdown) gives its pages back with
 * MADV_DONTNEED; a chunk whose every carved slot is free is unmapped at
 * once. Guard markers survive MADV_DONTNEED, so a reused slot is still
 * guarded.
 *
 * All of it is under chunk_lock: it is reached only past the worker's
 * cache and the overflow pool (a miss of both, or both full). The system
 * calls on one slot (a fresh slot's populate, the trim's MADV_DONTNEED)
 * are made outside it, on a slot in no free list (Scavenge below): a
 * lock that every thread's first run may need must not be held across
 * page allocation by a worker the host can preempt.
 *
 * Rejected: a guard-free default with canaries (an overflow of a
 * guard-free stack silently writes into the stack below, which holds
 * another thread's frames; a canary finds it only after the damage);
 * stacks that grow (needs a copying or segmented stack the compiler
 * does not give C); lazily committed stacks alone (they already are:
 * MAP_NORESERVE; the limit was the mapping count, not memory).
 */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

#define CHUNK_BYTES ((size_t)64 << 20)
#define CHUNK_STACKS_MAX 256u
#define CHUNK_STACKS_MIN 8u

struct chunk_class;

struct chunk {
	char *base;
	struct chunk_class *cls;
	struct chunk *next, *prev;   /* cls->partial: a free or uncarved slot */
	bool on_partial;
	unsigned ncarved, nfree, ndirty;
	uint64_t dirty[CHUNK_STACKS_MAX / 64];   /* free slots still resident */
	uint16_t free[CHUNK_STACKS_MAX];         /* free slot indices */
};

struct chunk_class {
	struct chunk_class *next;
	size_t size, slot;
	int guard;
	unsigned n;                  /* slots per chunk */
	struct chunk *partial;
};

static pthread_mutex_t chunk_lock = PTHREAD_MUTEX_INITIALIZER;
static struct chunk_class *classes;       /* chunk_lock */
static struct chunk **chunks;             /* chunk_lock; sorted by base */
static unsigned nchunks, chunks_cap;      /* chunk_lock */
/* 1: MADV_GUARD_INSTALL works, -1: it does not (or chunks are locked),
 * 0: not tried yet. For the life of the process (Guard fallback below).
 * chunk_lock. */
static int guard_markers;

/*
 * Guard fallback. A guard install that fails with EINVAL says the kernel
 * will refuse every later one too (no guard markers, or locked chunks):
 * guarded stacks go legacy for the life of the process at once. Any other
 * failure (ENOMEM: no memory for the page tables; EPERM or ENOSYS from a
 * seccomp filter that knows no MADV_GUARD_INSTALL) may be passing, so the
 * stack at hand goes legacy and the next one tries again, but a failure
 * that persists would make every new guarded stack pay for a 64 MiB chunk
 * mapped and unmapped, a failed madvise and then its own mapping anyway.
 * So GUARD_STRIKES_MAX failures in a row (guard_strikes; a success
 * resets it) send guarded stacks legacy for the rest of the runtime, with
 * one line on stderr; the next weft_init tries guard markers again
 * (wft_stack_runtime_init). Three is a judgement, not a measurement: it
 * lets one or two passing failures by, and waiting for the third costs
 * two wasted chunk mappings.
 *
 * What the legacy path does when its own guard (mprotect) fails is not
 * changed: that stack is ENOMEM and its thread waits for one
 * (docs/stacks.md "When stacks do run out"). At the mapping limit the
 * only way on would be a stack without the guard page the caller asked
 * for, which weft does not choose behind the caller's back (glibc's
 * pthread_create is EAGAIN there too).
 */
#define GUARD_STRIKES_MAX 3

static unsigned guard_strikes;   /* chunk_lock; reset by weft_init */
/* WEFT_FAULT=guard:N: the next n guard installs fail with ENOMEM.
 * chunk_lock. */
static long fault_guard_left;

/*
 * Guard probe. qemu-user (7.2) answers madvise with 0 for every advice,
 * MADV_GUARD_INSTALL included, and installs nothing: taken at its word,
 * every guarded stack would run without a guard page. So the first
 * install that succeeds (guard_markers still 0) is checked: one byte is
 * written from the guard page into a pipe. The kernel's copy from user
 * memory takes the guard fault and the write fails with EFAULT, with no
 * signal; under qemu the emulator checks the guest page protection it
 * keeps, which madvise left readable, and the write succeeds. A write
 * that succeeds means the marker does nothing: guard markers count as
 * unsupported, as for EINVAL. If the probe cannot run (no pipe: EMFILE)
 * the install counts as a failure of its own (Guard fallback above).
 *
 * Rejected probes: touching the page under a temporary SIGSEGV handler
 * (process-wide state, racing the program's own handler and weft's
 * overflow report, and a real fault of another thread in that window
 * would be taken for the probe's); process_vm_readv on ourselves (qemu-
 * user lacks it, ENOSYS, and seccomp profiles may deny it); a read of
 * /proc/self/mem (needs /proc, and qemu-user places guest addresses at an
 * offset in the host's); mincore (it says nothing about guard markers);
 * a child process that touches the page (a fork of a threaded runtime
 * from inside the scheduler).
 */
static int marker_probe(const char *p)
{
	int fds[2], err;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return errno;
	err = write(fds[1], p, 1) == 1 ? EINVAL : errno == EFAULT ? 0 : errno;
	close(fds[0]);
	close(fds[1]);
	return err;
}

/* Install the guard marker of the slot at p: 0, else -1 and errno, after
 * which the slot must not be handed out guarded. Keeps guard_markers and
 * guard_strikes (Guard fallback and Guard probe above). chunk_lock held. */
static int guard_install(char *p)
{
	int err = 0;

	if (fault_guard_left > 0) {
		fault_guard_left--;
		err = ENOMEM;
	} else if (madvise(p, wft_page_size(), MADV_GUARD_INSTALL) != 0) {
		err = errno;
	} else if (guard_markers == 0) {
		/* EINVAL: accepted but not enforced */
		err = marker_probe(p);
	}
	if (!err) {
		guard_markers = 1;
		guard_strikes = 0;
		return 0;
	}
	if (err == EINVAL)
		guard_markers = -1;
	else if (++guard_strikes == GUARD_STRIKES_MAX)
		fprintf(stderr, "weft: guard markers failed %u times in a row (%s); guarded "
			"stacks get mappings of their own for the rest of this runtime\n",
			GUARD_STRIKES_MAX, strerror(err));
	errno = err;
	return -1;
}

/* Guarded stacks come from chunks (guard markers not known to fail). */
static bool guard_markers_usable(void)
{
	return guard_markers >= 0 && guard_strikes < GUARD_STRIKES_MAX;
}

void wft_stack_runtime_init(long fault_guard)
{
	pthread_mutex_lock(&chunk_lock);
	guard_strikes = 0;
	fault_guard_left = fault_guard;
	pthread_mutex_unlock(&chunk_lock);
}

static void partial_add(struct chunk *c)
{
	if (c->on_partial)
		return;
	c->on_partial = true;
	c->prev = NULL;
	c->next = c->cls->partial;
	if (c->next)
		c->next->prev = c;
	c->cls->partial = c;
}

static void partial_del(struct chunk *c)
{
	if (!c->on_partial)
		return;
	c->on_partial = false;
	if (c->prev)
		c->prev->next = c->next;
	else
		c->cls->partial = c->next;
	if (c->next)
		c->next->prev = c->prev;
}

/* Index in chunks[] of the chunk holding p, or of the insertion point
 * (*found false). */
static unsigned chunk_find(const char *p, bool *found)
{
	unsigned lo = 0, hi = nchunks;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		struct chunk *c = chunks[mid];

		if (p < c->base) {
			hi = mid;
		} else if (p >= c->base + (size_t)c->cls->n * c->cls->slot) {
			lo = mid + 1;
		} else {
			*found = true;
			return mid;
		}
	}
	*found = false;
	return lo;
}

/* The class of (size, guard), made on first use; NULL if such stacks do
 * not come from chunks (too big, or guarded without guard markers) or
 * there is no memory. chunk_lock held. */
static struct chunk_class *class_of(size_t size, int guard)
{
	struct chunk_class *k;
	size_t slot = map_size(size, guard);

	if (guard && !guard_markers_usable())
		return NULL;
	if (slot > CHUNK_BYTES / CHUNK_STACKS_MIN)
		return NULL;
	for (k = classes; k; k = k->next)
		if (k->size == size && k->guard == guard)
			return k;
	k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->size = size;
	k->guard = guard;
	k->slot = slot;
	k->n = (unsigned)(CHUNK_BYTES / slot < CHUNK_STACKS_MAX ? CHUNK_BYTES / slot : CHUNK_STACKS_MAX);
	k->next = classes;
	classes = k;
	return k;
}

/* A new chunk of class k, on its partial list; NULL if none can be
 * mapped. chunk_lock held. */
static struct chunk *chunk_new(struct chunk_class *k)
{
	struct chunk *c;
	bool found;
	unsigned at;
	void *p;

	if (nchunks == chunks_cap) {
		unsigned cap = chunks_cap ? 2 * chunks_cap : 64;
		struct chunk **a = realloc(chunks, cap * sizeof(*a));

		if (!a)
			return NULL;
		chunks = a;
		chunks_cap = cap;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	p = mmap(NULL, (size_t)k->n * k->slot, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
	if (p == MAP_FAILED) {
		free(c);
		return NULL;
	}
	c->base = p;
	c->cls = k;
	at = chunk_find(c->base, &found);
	memmove(&chunks[at + 1], &chunks[at], (nchunks - at) * sizeof(*chunks));
	chunks[at] = c;
	nchunks++;
	partial_add(c);
	return c;
}

static void chunk_free(struct chunk *c)
{
	bool found;
	unsigned at = chunk_find(c->base, &found);

	WFT_ASSERT(found && chunks[at] == c);

	partial_del(c);
	wft_san_unmapping(c->base, (size_t)c->cls->n * c->cls->slot);
	munmap(c->base, (size_t)c->cls->n * c->cls->slot);
	memmove(&chunks[at], &chunks[at + 1], (nchunks - at - 1) * sizeof(*chunks));
	nchunks--;
	free(c);
}

/* A slot of class k: a free one (newest first), else the next uncarved
 * one, guard marker installed (*fresh: it was carved now). NULL if none
 * can be had. chunk_lock held. */
static char *chunk_get(struct chunk_class *k, bool *fresh)
{
	struct chunk *c = k->partial;
	char *p;
	unsigned i;

	if (!c && !(c = chunk_new(k)))
		return NULL;
	if (c->nfree) {
		i = c->free[--c->nfree];
		if (c->dirty[i / 64] & (1ull << (i % 64))) {
			c->dirty[i / 64] &= ~(1ull << (i % 64));
			c->ndirty--;
		}
		p = c->base + (size_t)i * k->slot;
	} else {
		p = c->base + (size_t)c->ncarved * k->slot;
		if (k->guard && guard_install(p) != 0) {
			/* this stack goes legacy (Guard fallback above: EINVAL
			 * or a run of other failures sends every later one
			 * there too). A chunk with no slot carved is
			 * unreachable from any stack: unmap it, whatever the
			 * cause (under mlockall(MCL_FUTURE) it is locked and
			 * populated in full). */
			if (c->ncarved == 0 && c->nfree == 0)
				chunk_free(c);
			return NULL;
		}
		c->ncarved++;
		*fresh = true;
	}
	if (!c->nfree && c->ncarved == k->n)
		partial_del(c);
	return p;
}

/* Give the slot at p back to its chunk c (dirty); unmap the chunk if no
 * slot of it is in use. chunk_lock held. */
static void chunk_put(struct chunk *c, char *p)
{
	unsigned i = (unsigned)((size_t)(p - c->base) / c->cls->slot);

	c->free[c->nfree++] = (uint16_t)i;
	c->dirty[i / 64] |= 1ull << (i % 64);
	c->ndirty++;
	if (c->nfree == c->ncarved)
		chunk_free(c);
	else
		partial_add(c);
}

/*
 * Scavenge: MADV_DONTNEED every dirty free slot (usable part: the guard
 * marker stays), with chunk_lock held only to take slots out of their
 * free lists and to put them back, never across the system calls.
 * Why: the deep trim runs in a worker's park path, and every worker that
 * parks deep runs one; with the madvise loop under the lock, a trimmer
 * the host preempted mid-loop held chunk_lock for up to hundreds of
 * milliseconds, and every worker that needed a stack (a thread's first
 * run) or freed one waited behind it in futex_wait: the runtime stood
 * still with threads runnable (figures: docs/wake-path.md "Collapsed
 * runs").
 * A slot taken out (SCAVENGE_BATCH at a time) is in no free list, so no
 * chunk_get hands it out while its pages are dropped, and its chunk
 * cannot be unmapped under us (nfree < ncarved while it is out, so
 * chunk_put's "every carved slot free" never holds; a full chunk that
 * loses its last free slot leaves the partial list meanwhile, as
 * chunk_get's invariant wants: a chunk on it has a free or uncarved
 * slot). Back under the lock, the slots return clean, and a chunk whose
 * every slot is then free is unmapped, as chunk_put would. One
 * scavenger at a time (scavenging, a try-flag). The scavenger counts its
 * budget when it begins, so slots another worker makes dirty afterwards
 * (its own cache trim, just before it lost the flag) are not its; the
 * loser is told (*skipped) and tries again later, so no dirty slot stays
 * resident for the rest of an idle period. Returns how many. */
#define SCAVENGE_BATCH 32

struct scav_slot {
	struct chunk *c;
	unsigned i;
};

/* Take up to SCAVENGE_BATCH dirty free slots out of their chunks into
 * out[]. chunk_lock held. */
static unsigned scavenge_take(struct scav_slot *out)
{
	unsigned n = 0;

	for (unsigned k = 0; k < nchunks && n < SCAVENGE_BATCH; k++) {
		struct chunk *c = chunks[k];

		for (unsigned j = 0; c->ndirty && j < c->nfree && n < SCAVENGE_BATCH;) {
			unsigned i = c->free[j];

			if (!(c->dirty[i / 64] & (1ull << (i % 64)))) {
				j++;
				continue;
			}
			c->dirty[i / 64] &= ~(1ull << (i % 64));
			c->ndirty--;
			/* the last free slot fills the gap: the newest-first
			 * order of reuse is lost for that one slot only */
			c->free[j] = c->free[--c->nfree];
			out[n].c = c;
			out[n].i = i;
			n++;
		}
		if (!c->nfree && c->ncarved == c->cls->n)
			partial_del(c);
	}
	return n;
}

/* Put scavenged slots back, clean. chunk_lock held. */
static void scavenge_put(struct scav_slot *in, unsigned n)
{
	for (unsigned j = 0; j < n; j++) {
		struct chunk *c = in[j].c;

		c->free[c->nfree++] = (uint16_t)in[j].i;
		if (c->nfree == c->ncarved)
			chunk_free(c);
		else
			partial_add(c);
	}
}

static atomic_flag scavenging = ATOMIC_FLAG_INIT;

static unsigned chunk_scavenge(bool *skipped)
{
	struct scav_slot batch[SCAVENGE_BATCH];
	unsigned n, total = 0, budget = 0;

	/* acquire/release: only elects one scavenger; the slots themselves
	 * are handed over under chunk_lock */
	if (atomic_flag_test_and_set_explicit(&scavenging, memory_order_acquire)) {
		*skipped = true;
		return 0;
	}
	/* Only as many slots as were dirty when it began: threads that exit
	 * meanwhile (the lock is free now) free more, and a scavenger
	 * chasing them would stay in its park path, where its own mail
	 * waits. They wait for the next deep trim, as a slot freed just
	 * after a trim always did. */
	pthread_mutex_lock(&chunk_lock);
	for (unsigned k = 0; k < nchunks; k++)
		budget += chunks[k]->ndirty;
	pthread_mutex_unlock(&chunk_lock);
	while (total < budget) {
		pthread_mutex_lock(&chunk_lock);
		n = scavenge_take(batch);
		pthread_mutex_unlock(&chunk_lock);
		for (unsigned j = 0; j < n; j++) {
			struct chunk *c = batch[j].c;
			size_t g = c->cls->guard ? wft_page_size() : 0;

			madvise(c->base + (size_t)batch[j].i * c->cls->slot + g, c->cls->slot - g,
				MADV_DONTNEED);
			wft_fault_delay(&wft_fault_trimslow_us);   /* WEFT_FAULT=trimslow:US */
		}
		if (n) {
			pthread_mutex_lock(&chunk_lock);
			scavenge_put(batch, n);
			pthread_mutex_unlock(&chunk_lock);
		}
		total += n;
		if (n < SCAVENGE_BATCH)
			break;
	}
	atomic_flag_clear_explicit(&scavenging, memory_order_release);
	return total;
}

/* Free the classes that have no chunk left. chunk_lock held. */
static void classes_prune(void)
{
	struct chunk_class **pp = &classes;

	while (*pp) {
		struct chunk_class *k = *pp;
		bool used = false;

		for (unsigned i = 0; i < nchunks && !used; i++)
			used = chunks[i]->cls == k;
		if (used) {
			pp = &k->next;
		} else {
			*pp = k->next;
			free(k);
		}
	}
}

static void stack_unmap(struct stack_entry *e)
{
	bool found = false;
	unsigned at;

	WFT_VG_STACK_DEREGISTER(e->vg);
	pthread_mutex_lock(&chunk_lock);
	at = nchunks ? chunk_find(e->base, &found) : 0;
	if (found)
		chunk_put(chunks[at], e->base);
	pthread_mutex_unlock(&chunk_lock);
	if (!found) {
		wft_san_unmapping(e->base, map_size(e->size, e->guard));
		munmap(e->base, map_size(e->size, e->guard));
	}
}

/* A stack from a chunk for t; false if t's kind does not come from
 * chunks or none can be had. */
static bool chunk_alloc(struct weft_thread *t)
{
	struct chunk_class *k;
	char *p = NULL;
	size_t slot = 0;
	bool fresh = false;

	pthread_mutex_lock(&chunk_lock);
	k = class_of(t->stack_size, t->guard);
	if (k) {
		p = chunk_get(k, &fresh);
		slot = k->slot;
	}
	pthread_mutex_unlock(&chunk_lock);
	/* A fresh slot's top page, which the thread's first frames touch: a
	 * syscall populates it for less than the fault would cost. Outside
	 * chunk_lock: the slot is ours now, and a page allocation under the
	 * lock made every other stack allocation wait for it (Scavenge). */
	if (fresh)
		madvise(p + slot - wft_page_size(), wft_page_size(), MADV_POPULATE_WRITE);
	t->stack = p;
	return p != NULL;
}

/*
 * Canary (debug builds). A stack without a guard page (guard = 0) that
 * overflows silently writes into whatever lies below it: in a chunk, the
 * slot below, another thread's stack. In a debug build (--enable-debug)
 * such a stack carries a canary in its lowest 8 bytes, written when the
 * stack is handed to a thread and checked when it leaves the thread
 * (wft_stack_release; a TCB that keeps its stack defers the check to when
 * the stack leaves it): a changed canary panics, naming the thread. It
 * finds an overflow after the fact, and only one that ran through the
 * stack's bottom; the guard page is the real protection.
 */
#define STACK_CANARY 0x5745465443414e59ull   /* "WEFTCANY" */
/* not under ASan: it checks stack accesses itself, and the bottom of a
 * stack may lie in a redzone it poisoned */
#define STACK_CANARY_ON (WFT_DEBUG && !WFT_ASAN)

static void canary_set(struct weft_thread *t)
{
	if (STACK_CANARY_ON && !t->guard)
		*(uint64_t *)wft_stack_lo(t) = STACK_CANARY;
}

static void canary_check(const struct weft_thread *t)
{
	if (STACK_CANARY_ON && !t->guard && *(const uint64_t *)wft_stack_lo(t) != STACK_CANARY)
		wft_panic("stack overflow in weft thread '%s' (%p, stack size %zu, guard = 0): "
			  "the canary at the bottom of its stack was overwritten",
			  t->name, (const void *)t, t->stack_size);
}

int wft_stack_alloc(struct wft_worker *w, struct weft_thread *t)
{
	struct stack_entry *cache = (struct stack_entry *)w->stack_cache;
	size_t len;
	void *p;

	if (take_entry(cache, &w->nstacks, t) || pool_get(t)) {
		canary_set(t);
		return 0;
	}
	if (wft_fault_alloc())
		return ENOMEM;
	len = map_size(t->stack_size, t->guard);
	if (chunk_alloc(t)) {
		p = t->stack;
	} else {
		/* legacy: a mapping of its own */
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
		if (p == MAP_FAILED)
			return ENOMEM;
		if (t->guard && mprotect(p, wft_page_size(), PROT_NONE) != 0) {
			munmap(p, len);
			return ENOMEM;
		}
		t->stack = p;
	}
	wft_stat_inc(w, stack_maps);
	/* Valgrind: register the usable part; the id travels with the stack */
	t->stack_vg = WFT_VG_STACK_REGISTER(wft_stack_lo(t), (char *)p + len);
	canary_set(t);
	return 0;
}

int wft_stack_release(struct wft_worker *w, struct weft_thread *t)
{
	struct stack_entry e = { t->stack, t->stack_size, t->guard, t->stack_vg };

	if (!t->stack)
		return 0;
	canary_check(t);
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

/* The deep half of a trim: dirty free slots give their pages back, and
 * classes without chunks go. Returns the slots scavenged; *skipped set
 * if another scavenger ran (see chunk_scavenge). */
static unsigned chunk_trim(bool *skipped)
{
	unsigned n;

	n = chunk_scavenge(skipped);
	pthread_mutex_lock(&chunk_lock);
	classes_prune();
	if (!nchunks) {
		free(chunks);
		chunks = NULL;
		chunks_cap = 0;
	}
	pthread_mutex_unlock(&chunk_lock);
	return n;
}

unsigned wft_stack_pool_trim(bool *skipped)
{
	struct stack_entry *out;
	unsigned n;
	bool dummy;

	if (!skipped)
		skipped = &dummy;
	*skipped = false;
	if (!atomic_load_explicit(&npool_hint, memory_order_relaxed))
		return chunk_trim(skipped);
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
	return n + chunk_trim(skipped);
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

/*
 * Bulk memory. TCB slabs beyond the first few come from 2 MiB-aligned
 * regions advised MADV_HUGEPAGE: a million TCBs are 320 MB, and faulting
 * that in 4 KiB pages cost more per TCB than the whole spawn and join
 * (docs/stacks.md "TCB memory" has the figures). With huge pages
 * it is one fault per 2 MiB (6,500 TCBs). The first
 * slabs stay on malloc so that a small program does not pay a 2 MiB page
 * for its first spawn. Regions are never unmapped: TCB memory stays
 * type-stable for the life of the process, and a bulk slab a runtime
 * leaves at shutdown serves the next runtime (thread.c bulk_slab).
 */
#define BULK_REGION ((size_t)2 << 20)

static pthread_mutex_t bulk_lock = PTHREAD_MUTEX_INITIALIZER;
static char *bulk_cur, *bulk_end;          /* bulk_lock */

/* Make a fresh region of at least size bytes, 2 MiB-aligned, the current
 * one (what was left of the last one is abandoned: less than a slab).
 * false if none can be mapped. bulk_lock held. */
static bool bulk_map(size_t size)
{
	size_t len = (size + BULK_REGION - 1) & ~(BULK_REGION - 1);
	char *p, *a;

	if (wft_fault_alloc())
		return false;
	p = mmap(NULL, len + BULK_REGION, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return false;
	a = (char *)(((uintptr_t)p + BULK_REGION - 1) & ~(uintptr_t)(BULK_REGION - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (a + len < p + len + BULK_REGION)
		munmap(a + len, (size_t)(p + len + BULK_REGION - (a + len)));
#ifdef MADV_HUGEPAGE
	madvise(a, len, MADV_HUGEPAGE);   /* a hint: without THP, 4 KiB pages */
#endif
	bulk_cur = a;
	bulk_end = a + len;
	return true;
}

void *wft_bulk_alloc(size_t size)
{
	void *p = NULL;

	size = (size + WFT_CACHELINE - 1) & ~(size_t)(WFT_CACHELINE - 1);
	pthread_mutex_lock(&bulk_lock);
	if ((size_t)(bulk_end - bulk_cur) < size && !bulk_map(size))
		goto out;
	p = bulk_cur;
	bulk_cur += size;
out:
	pthread_mutex_unlock(&bulk_lock);
	return p;
}
