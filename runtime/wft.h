/*
 * runtime/wft.h - private umbrella header of the weft runtime.
 *
 * Declares the core objects (thread, worker, runqueue, mailbox, timer heap,
 * waiter) and the internal calls between runtime/ and sync/. Everything here
 * is internal and named wft_* (the public API is weft_*). Most calls are
 * wft_<module>_<verb>() and are defined in runtime/<module>.c or
 * sync/<module>.c; the helpers every file uses (the clock wft_now, the
 * atomics of runtime/atomic.h, the stats macros, the wait notes) are not
 * named for a module, and the comment above each says where it lives.
 *
 * Contexts used in the function headers:
 *   any          - a weft thread, a worker's scheduler loop or a plain OS thread;
 *   weft thread  - code running on a light thread's stack;
 *   owner worker - the worker that owns the object, on its own OS thread;
 *   OS thread    - a thread that is not a weft thread.
 */
#ifndef WFT_H
#define WFT_H

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
#include "runtime/context.h"
#include "runtime/list.h"

/* ---------------------------------------------------------------------- */
/* Debug switches: constants tested with if (), so both builds type-check. */

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

/* ---------------------------------------------------------------------- */
/* Feature switches (runtime/features.def, runtime/features.c). */

enum {
#define WFT_FEAT(name, def, why) WFT_FEAT_BIT_##name,
#include "runtime/features.def"
#undef WFT_FEAT
	WFT_FEAT_COUNT
};

/* Written once by weft_init() before any worker starts and never again while
 * the runtime runs, so a plain load is safe (the worker threads are created
 * after the store: pthread_create orders it). */
extern uint64_t wft_features;
#define wft_feat(name) ((wft_features >> WFT_FEAT_BIT_##name) & 1)

/* xorshift64: a worker's cheap PRNG (victim choice, RANDOMIZE). Owner only. */
static inline uint64_t wft_xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Apply a WEFT_FEATURES-style string (NAME or NO_NAME, comma-separated) to
 * *mask, which holds the starting set. origin names the string's source in
 * the error message. Returns 0, or EINVAL (message on stderr, *mask
 * unchanged). */
int wft_features_parse(const char *s, const char *origin, uint64_t *mask);
uint64_t wft_features_default(void);

/* ---------------------------------------------------------------------- */
/* Stats (runtime/stats.def, runtime/stats.c). */

struct wft_stats {
#define WFT_STAT(name, desc) uint64_t name;
#include "runtime/stats.def"
#undef WFT_STAT
} wft_cacheline_aligned;

/* Counters are written only by their owner worker; readers sum with relaxed
 * loads. The owner uses a relaxed load plus store (not an RMW): cheap and
 * TSan-clean. */
#define wft_stat_inc(w, name) wft_stat_add(w, name, 1)
#define wft_stat_add(w, name, n) do { \
	_Atomic uint64_t *p_ = (_Atomic uint64_t *)&(w)->stats.name; \
	atomic_store_explicit(p_, atomic_load_explicit(p_, memory_order_relaxed) + (n), \
			      memory_order_relaxed); \
} while (0)

/* Counters bumped from plain OS threads (no worker) go here, with RMWs
 * (relaxed: counters, summed on read). */
extern struct wft_stats wft_stats_os;
#define wft_stat_os_add(name, n) \
	atomic_fetch_add_explicit((_Atomic uint64_t *)&wft_stats_os.name, (n), memory_order_relaxed)
#define wft_stat_os_inc(name) wft_stat_os_add(name, 1)

/* Either: w's counter, or the OS threads' one when w is NULL (the caller
 * is a plain OS thread). */
#define wft_stat_add_any(w, name, n) do { \
	struct wft_worker *wa_ = (w); \
	if (wa_) \
		wft_stat_add(wa_, name, n); \
	else \
		wft_stat_os_add(name, n); \
} while (0)
#define wft_stat_inc_any(w, name) wft_stat_add_any(w, name, 1)

/* ---------------------------------------------------------------------- */
/* Threads (runtime/thread.c). */

/*
 * Thread states. Transitions (all by CAS or by the running thread itself):
 *   NEW      -> RUNNING   first dispatch (the worker allocates the stack)
 *   RUNNING  -> RUNNABLE  yield (the thread queues itself)
 *   RUNNING  -> PARKED    park (the thread, before switching away)
 *   PARKED   -> RUNNABLE  wake: exactly one of waker / timeout / cancel wins the CAS
 *   RUNNABLE -> RUNNING   dispatch
 *   RUNNING  -> DONE      exit
 */
enum wft_tstate {
	WFT_T_NEW = 0,
	WFT_T_RUNNABLE,
	WFT_T_RUNNING,
	WFT_T_PARKED,
	WFT_T_DONE,
	WFT_T_PARKED_JOIN, /* parked in weft_join: only its join wakes it (thread.c) */
};

/* Why a parked thread was made runnable (written by the CAS winner). */
enum wft_wake_reason {
	WFT_WAKE_NORMAL = 0,
	WFT_WAKE_TIMEOUT,
};

/* Join states (t->jstate), see "Join protocol" in runtime/thread.c. The
 * word holds either a registered joiner's address (low 3 bits 0: an OS
 * thread's waiter; 1: a weft thread's TCB) or one of these codes in its
 * low 3 bits with the TCB's generation (t->seq) above them
 * (WFT_JS(code, gen)): claiming the join and naming the joiner is one CAS,
 * and a CAS that expects a generation fails on a reused TCB. */
enum {
	WFT_J_JOINABLE = 2,
	WFT_J_DETACHED,
	WFT_J_EXITED,    /* finished, result in t->ret, waiting to be joined */
	WFT_J_FREE,      /* TCB is in the free pool */
	WFT_J_EXITED_T,  /* exited with a registered joiner: reserved for it */
};
#define WFT_JS(code, gen) (((uintptr_t)(gen) << 3) | (uintptr_t)(code))
#define WFT_JS_CODE(js) ((unsigned)((js) & 7))
#define WFT_JS_GEN(js) ((uintptr_t)(js) >> 3)
#define WFT_JS_IS_JOINER(js) (((js) & 6) == 0)

struct wft_worker;
struct wft_waiter;

/* A deadline registered in a worker's timer heap. */
/* Timer states (tm->tstate): IDLE -> ARMED (arm, under the heap lock) ->
 * FIRING (popped by the owner, under the lock) -> IDLE (after fn returned,
 * release). wft_timer_cancel() waits out FIRING, so after it returns fn is
 * neither running nor pending (the kernel's del_timer_sync). */
enum { WFT_TM_IDLE = 0, WFT_TM_ARMED, WFT_TM_FIRING };

struct wft_timer {
	weft_time_t deadline;
	int idx;                          /* heap index; heap lock */
	_Atomic int tstate;               /* see above */
	struct wft_worker *heap;          /* worker whose heap it was armed on; written
	                                   * and read only by the arming thread */
	void (*fn)(struct wft_timer *);   /* runs on the heap's worker, heap lock not held */
};

struct weft_thread {
	/* --- first cache line: what only the thread's own worker touches
	 * (the switch's saved state and the owner's bookkeeping) --- */
	struct wft_ctx ctx;               /* saved registers; only the thread itself and
	                                   * the worker switching to it touch it */
	_Atomic int on_cpu;               /* 1 from dispatch until the next switch has
	                                   * finished saving ctx (see worker.c) */
	int started;                      /* has a stack and ran once; owner worker */
	bool free_on_exit;                /* detached at exit: the switch-out frees it */
	bool keep_stack;                  /* at exit: a weft thread frees the TCB at once, so
	                                   * the stack stays with it (see thread.c "Stacks
	                                   * that stay with their TCB") */
	bool stack_wait;                  /* counted in wft_stack_waiters (worker.c
	                                   * prepare_slow); the worker running it */
	bool in_gang;                     /* t->gang is set: weft_yield's test, on the
	                                   * line a switch touches anyway (gang.c);
	                                   * written and read by the thread itself
	                                   * (and cleared by spawn) */
	/* --- second cache line: everything a waker touches (state, token,
	 * reason, target worker, pin, queue link and mailbox chain header),
	 * plus the park commit; exactly 64 bytes on LP64. A remote wake
	 * moves this one line between CPUs, not two: with state and worker
	 * on the first line, pingpong_cross measured 415 ns a round trip
	 * against 389 ns with this layout (medians of 9, same run). Aligned:
	 * where ctx is larger than x86-64's and aarch64's 48 bytes (the
	 * ucontext build: 1,024) the first line spills over, and unaligned
	 * this one straddled two lines (link at 1,040, state at 1,092) --- */
	struct weft_thread *link wft_cacheline_aligned; /* runqueue / mailbox / free-list
	                                   * link; the queue that holds t owns it */
	/* Park commit: run by the worker once this thread is off its stack
	 * (wft_worker_finish_switch), to publish that it parked (join). */
	void (*park_commit)(struct weft_thread *self, void *arg);
	void *park_arg;
	/* Mailbox chain header, valid on the first thread of a pushed chain
	 * while it sits in a mailbox (written by the pusher before its
	 * publishing CAS): its last thread, length, and whether any of the
	 * chain is unpinned. See "Take" in runtime/mailbox.c. */
	struct weft_thread *mb_last;
	uint32_t mb_n;
	bool mb_stealable;
	_Atomic int token;                /* unpark token, see "Park protocol" in thread.c */
	int wake_reason;                  /* enum wft_wake_reason, written by the CAS winner */
	int pin;                          /* worker index, or -1 */
	_Atomic int state;                /* enum wft_tstate */
	struct wft_worker *_Atomic worker;/* last worker it ran on (mutex spinners read it) */

	wft_fpenv_t fpenv;                /* creator's FP control state (spawn) */
	weft_fn_t fn;
	void *arg;
	void *ret;

	/* Wake placement (runtime/wake.c "Wide wakers"): this thread's record
	 * as a waker. Written only by the thread itself; wakee_flips is read
	 * (relaxed, a hint) by the threads that wake it. Reset at spawn. */
	struct weft_thread *last_wakee;   /* compared, never dereferenced */
	_Atomic uint32_t wakee_flips;     /* wakee switches, halved every decay period */
	uint32_t flip_wakes;              /* wakes since the last decay check */
	weft_time_t flip_decay;           /* time of the last decay */

	void *stack;                      /* mapping base (guard page first), NULL until first
	                                   * run, or a previous run's (TCB cache) */
	size_t stack_size;                /* usable bytes */
	int guard;                        /* has a guard page */
	unsigned stack_vg;                /* Valgrind stack id */

	_Atomic uintptr_t jstate;         /* join state or joiner (WFT_J_*) */
	uintptr_t join_want;              /* a parked weft joiner: the JOINABLE word
	                                   * it saw (its commit expects it) */
	void **specific;                  /* key values, lazily allocated */
	unsigned nspecific;

	struct wft_timer timer;           /* deadline of a timed park */

	uint64_t seq;                     /* incremented each time the TCB is reused */
	void *san_fiber;                  /* TSan fiber, or NULL */
	void *san_fake_stack;             /* ASan fake-stack save slot */
	char name[16];
	/* What the thread blocks on, for weft_dump and the shutdown report
	 * (runtime/dump.c): set by the blocking call before it parks, cleared
	 * after; written only by the thread, read racily by the dump (a
	 * snapshot: the dump may print a stale pair). */
	const char *wait_what;            /* "sem", "join", "sleep", ... or NULL */
	const void *wait_obj;             /* the object (or the caller's pc) */
	weft_time_t wait_since;           /* coarse clock at the park (wft_coarse_now) */
	/* Gang membership (runtime/gang.c): set by the member itself when it
	 * starts, cleared when its function returns or it calls weft_exit;
	 * read only by the thread itself (weft_yield when in_gang, the gang
	 * calls). Valid only while in_gang: spawn clears in_gang, not this. */
	struct wft_gang_member *gang;
} wft_cacheline_aligned;   /* TCB slabs are cache-line aligned (thread.c) */

/* Gangs (runtime/gang.c). A gang scheduling point of the calling member
 * m (weft_yield): if its gang's slice is over, park until its next turn.
 * Context: m's own thread. */
struct wft_gang_member;
void wft_gang_yield_point(struct wft_gang_member *m);
/* weft_spawn with a gang in attr (weft_attr_setgang: attr->reserved[0]):
 * spawn the gang's next member. Returns weft_spawn's codes; EINVAL also
 * for a gang that is not live, joined, or full. Context: any. */
int wft_gang_spawn_attr(weft_thread_t *out, weft_fn_t fn, void *arg, const weft_attr_t *attr);
/* The calling member t (t->in_gang) calls weft_exit: it leaves its gang
 * as if its function had returned. Context: t's own thread. */
void wft_gang_exit(struct weft_thread *t);
/* Stop the slice ticker and forget the gang matrix (weft_shutdown, after
 * every light thread has finished). Context: the shutting-down OS thread. */
void wft_gang_shutdown_unsafe(void);

/* The calling light thread, or NULL (OS thread or scheduler loop). */
struct weft_thread *wft_thread_self(void);

/* Make a PARKED thread runnable (the wake path, runtime/wake.c).
 * Returns 1 if this call won the PARKED -> RUNNABLE transition, 0 otherwise.
 * reason is stored for the wakee. Never blocks; never takes a target lock.
 * Context: any. */
int wft_wake(struct weft_thread *t, int reason);
/* Flag or-ed into reason: the waker is about to block (see wake.c). */
#define WFT_WAKE_F_SYNC 0x100
/* The two halves of wft_wake, for batched wakeups (wake queues): win the
 * PARKED -> RUNNABLE CAS and store the reason (returns false if another
 * waker won or t was not parked), then deliver t to its target worker.
 * A caller that claims many threads may instead link them through t->link
 * and hand each target one chain with wft_wake_push(). */
bool wft_wake_claim(struct weft_thread *t, int reason);
void wft_wake_deliver(struct weft_thread *t, int flags);

/* Park the calling thread with an optional deadline (WEFT_TIME_INFINITE).
 * Consumes the unpark token. Returns 0 or ETIMEDOUT. Context: weft thread. */
int wft_thread_park(weft_time_t deadline);

/* Free a finished thread's TCB (after its switch-out completed). */
void wft_thread_free(struct weft_thread *t);

/* Entry point of every new context. */
void wft_thread_start(struct wft_ctx *prev, void *arg);

/* Run key destructors for t (at exit). */
void wft_key_run_destructors(struct weft_thread *t);

/* ---------------------------------------------------------------------- */
/* Stacks (runtime/stack.c). */

/* Give t a stack from w's cache or a new mapping. Returns 0 or ENOMEM. Owner worker. */
int wft_stack_alloc(struct wft_worker *w, struct weft_thread *t);
/* Return t's stack to w's cache, else to the overflow pool, else unmap it.
 * Returns 1 if it unmapped it, else 0. Owner worker (w may be NULL). */
int wft_stack_release(struct wft_worker *w, struct weft_thread *t);
/* Threads that could not get a stack at their first run and wait for one
 * (worker.c "Stack shortage"): while any does, weft_spawn returns EAGAIN
 * for a thread that would need a new stack. Alone on its line: every pick
 * of every worker reads it (aligning the variable alone let io.c's
 * wait_hint, written on hot I/O calls, share its line: found by review). */
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
/* Unmap every stack in the global overflow pool (stack.c). Context: any
 * OS thread; takes the pool's mutex. Returns how many it unmapped. */
unsigned wft_stack_pool_trim(void);
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

/* ---------------------------------------------------------------------- */
/* Runqueue (runtime/runq.c): owner pushes and pops without atomic RMW;
 * thieves take half of the queue (ring + private), from the ring, with one CAS. */

#define WFT_RUNQ_RING 256   /* public ring slots; see runq.c for the choice */

struct wft_runq {
	/* Public ring: consumers (owner and thieves) CAS head; only the owner
	 * writes tail and slots. */
	_Atomic uint32_t head wft_cacheline_aligned;
	_Atomic uint32_t tail;
	_Atomic int split_req;            /* a thief asks the owner to publish work */
	_Atomic uint32_t npriv;           /* size of the private list, a hint for thieves */
	struct weft_thread *_Atomic ring[WFT_RUNQ_RING];
	/* Private FIFO: owner only (or under lock with NO_MAILBOX). */
	struct weft_thread *phead wft_cacheline_aligned;
	struct weft_thread *ptail;
	uint32_t pcount;
};

void wft_runq_init_unsafe(struct wft_runq *q);
/* Owner push/pop/size: inline in runtime/runq.h (included below struct
 * wft_worker). */
/* NO_MAILBOX baseline: a remote waker appends under the target's rqlock. */
void wft_runq_push_locked_remote(struct wft_worker *w, struct weft_thread *first,
				 struct weft_thread *last, uint32_t n);
/* Move up to half of the private list into the public ring (pinned threads
 * stay). Returns how many moved. Owner. */
uint32_t wft_runq_publish_owner(struct wft_worker *w);
/* Steal about half of victim's public ring into w's runqueue; returns one
 * thread to run now (or NULL). Context: w's own worker (the thief). See
 * wft_worker_steal_next() for the victim's next slot. */
struct weft_thread *wft_runq_steal(struct wft_worker *w, struct wft_worker *victim);
/* True if a thief could find work in victim (public or private non-empty). */
/* A chain of threads linked through t->link: first..last, n of them. */
struct wft_chain {
	struct weft_thread *first, *last;
	uint32_t n;
};
/* Split the chain from t (to NULL, or through end) into the unpinned
 * threads that may move to another worker (at most quota of them, the
 * first ones) and the others, each in its order; both NULL-terminated.
 * Context: the caller owns every thread of the chain. */
static inline void wft_chain_split(struct weft_thread *t, struct weft_thread *end, uint32_t quota,
				   struct wft_chain *move, struct wft_chain *stay)
{
	struct weft_thread *next;

	*move = (struct wft_chain){ NULL, NULL, 0 };
	*stay = (struct wft_chain){ NULL, NULL, 0 };
	for (; t; t = next) {
		struct wft_chain *c = t->pin < 0 && move->n < quota ? move : stay;

		next = t == end ? NULL : t->link;
		t->link = NULL;
		if (c->last)
			c->last->link = t;
		else
			c->first = t;
		c->last = t;
		c->n++;
	}
}
bool wft_runq_has_work(struct wft_worker *victim);
uint32_t wft_runq_take_private_locked(struct wft_worker *w, struct wft_chain *taken);

/* ---------------------------------------------------------------------- */
/* Mailbox (runtime/mailbox.c): intrusive MPSC lock-free LIFO stack, drained
 * whole by the owner and reversed into FIFO order. */

struct wft_mpsc {
	struct weft_thread *_Atomic head;
};

/* Push the pre-linked chain first..last, oldest first (FIFO: they drain in
 * that order after what was pushed before; n threads; last->link is
 * rewritten). Returns
 * true if the mailbox was empty before. Context: any. */
bool wft_mailbox_push_chain(struct wft_mpsc *mb, struct weft_thread *first,
			    struct weft_thread *last, uint32_t n);
/* Take everything, in push (FIFO) order, linked through t->link; *last
 * and *n get the chain's last thread and length, *stealable whether any
 * of them is unpinned (for a one-step splice;
 * one pass over the list, which is cold on the taker's CPU). Returns NULL
 * if empty. Context: the owner worker only. */
struct weft_thread *wft_mailbox_take_all(struct wft_mpsc *mb, struct weft_thread **last,
					 uint32_t *n, bool *stealable);
static inline bool wft_mailbox_empty(struct wft_mpsc *mb)
{
	/* relaxed: a hint; the scheduler re-checks after the idle fence */
	return atomic_load_explicit(&mb->head, memory_order_relaxed) == NULL;
}

/* ---------------------------------------------------------------------- */
/* Timers (runtime/timer.c): a binary min-heap per worker. The owner runs
 * it; a thread that resumes elsewhere cancels its own timer under the
 * heap's small lock (never on a wake path). */

struct wft_timer_heap {
	atomic_flag lock;
	unsigned n, cap;
	struct wft_timer **v;
	_Atomic weft_time_t next;         /* earliest deadline, a hint for the idle loop */
};

void wft_timer_heap_init_unsafe(struct wft_timer_heap *h);
void wft_timer_heap_fini_unsafe(struct wft_timer_heap *h);
/* Arm tm on w's heap. Returns 0 or ENOMEM. Context: owner worker. */
int wft_timer_arm(struct wft_worker *w, struct wft_timer *tm, weft_time_t deadline);
/* Disarm tm wherever it is. Returns true if it was still armed. Context: any. */
bool wft_timer_cancel(struct wft_timer *tm);
/* Fire every timer due at now. Returns how many fired. Owner worker. */
unsigned wft_timer_run(struct wft_worker *w, weft_time_t now);

/* ---------------------------------------------------------------------- */
/* Workers (runtime/worker.c, idle.c). */

/* Values of w->sleep, the futex word a parked worker sleeps on. */
enum {
	WFT_W_AWAKE = 0,
	WFT_W_SLEEPING,   /* announced idle: a waker must kick */
	WFT_W_KICKED,     /* a kick is on its way; later wakers need not kick */
};

struct wft_uring;     /* runtime/uring.c */

struct wft_worker {
	/* --- owner-hot --- */
	struct weft_thread *current;      /* running thread, NULL in the scheduler loop */
	_Atomic uintptr_t next;           /* next slot: a just-woken thread, tagged with
	                                   * WFT_NEXT_PINNED; only the owner sets it, a
	                                   * thief may take it (worker.c I5) */
	unsigned next_streak;             /* consecutive next-slot picks (fairness bound) */
	unsigned nopick;                  /* direct switches since the last pick's side work */
	int id;
	struct wft_ctx sched_ctx;         /* the scheduler loop on the OS stack */
	struct weft_thread *prev;         /* thread switched away from, to be finished by
	                                   * the context that resumes (worker.c) */
	void *sched_fake_stack;           /* ASan save slot of the scheduler loop */
	unsigned tick;                    /* switches, for the cheap timer check */
	unsigned io_tick;                 /* picks, for the cheap I/O check */
	uint64_t rng;                     /* victim selection, RANDOMIZE (wft_xorshift) */
	_Atomic int spinning;             /* counted in rt.nspinning (idle.c) */
	struct wft_worker *steal_hint;    /* a victim the park re-check saw work on; owner */
	/* Stranded mail (idle.c): the victim this worker watches, its switch
	 * count and when first seen with mail. Owner only. */
	struct wft_worker *mw_victim;
	uint64_t mw_switches;
	weft_time_t mw_seen;
	struct wft_worker *mw_pinned;     /* a victim whose stuck mail was all pinned: */
	uint64_t mw_pinned_sw;            /* not watched again until it switches */
	uintptr_t mw_pinned_sig;          /* or new mail arrives (mail_sig) */
	bool in_side_work;                /* reaping completions or timers: wakes made
	                                   * now are not w->current's (wake.c); owner */
	struct weft_thread *held;         /* a thread to dispatch from the scheduler loop:
	                                   * its previous worker had not switched it out
	                                   * (worker.c "Waiting for a switch"); owner only */
	struct weft_thread *spawn_next;   /* a lone spawned child put in the next slot
	                                   * (worker.c wft_worker_push_spawn); owner, a
	                                   * hint compared with the slot, never followed */
	/* Next-slot steal (worker.c I5): what this worker, as a thief, last saw
	 * in a victim's next slot. Owner only. */
	struct wft_worker *nx_victim;
	struct weft_thread *nx_thread;
	uint64_t nx_switches;
	weft_time_t nx_seen;
	bool tick_parked;                 /* the last park's deadline was the idle tick */
	uint64_t idle_switches;           /* stats.switches when the idle period began */
	weft_time_t idle_since;           /* start of the current idle period (cache trim) */
	bool idle_trimmed;                /* the current idle period's trim was done */
	_Atomic bool deep;                /* parked without the idle tick (counted in
	                                   * rt.ndeep); read by wake_one's choice */
	/* Spin gate (idle.c "Contended CPUs"): owner only */
	unsigned spin_phases;             /* spin phases, for sampling every few */
	bool spin_sampled;                /* this phase is sampled: */
	weft_time_t spin_wall0;           /*   its start, wall clock */
	uint64_t spin_cpu0;               /*   and this thread's CPU time */
	/* DRAIN (runtime/drain.c): this worker's run-delay sample */
	int ss_fd;                        /* /proc/thread-self/schedstat, or -1; owner */
	uint64_t ss_wall, ss_delay;       /* last sample: wall time, run delay; owner */
	_Atomic uint32_t delay_pm;        /* waited fraction of the last window, per mille;
	                                   * written by the owner, read by the controller */
	_Atomic uint64_t delay_at;        /* when delay_pm was measured (0: never); the same */
	/* Light-thread births (spawns by threads of this worker) and deaths
	 * (exits finished here). Written only by the owner, with a plain
	 * load + release store (no locked RMW, no shared line: a global
	 * counter bumped twice per thread was a cache line bouncing between
	 * workers in fib); summed by shutdown (wft_live_threads). */
	_Atomic long nborn, ndead;
	atomic_flag rqlock;               /* NO_MAILBOX baseline only */

	struct wft_runq rq;

	/* --- written by other workers --- */
	struct wft_mpsc mailbox wft_cacheline_aligned;
	_Atomic uint32_t sleep wft_cacheline_aligned;

	struct wft_timer_heap timers wft_cacheline_aligned;
	struct wft_uring *ring;           /* NULL: no io_uring, park on the futex */

	/* stack cache: owner only */
	void **stack_cache;
	size_t *stack_cache_size;
	unsigned nstacks, stack_cache_cap;

	/* TCB cache: owner only */
	struct weft_thread *tcb_cache;
	unsigned ntcb;
	unsigned ntcb_stacked;            /* cached TCBs that still hold a stack */

	pthread_t os;
	void *san_fiber;                  /* TSan fiber of the scheduler loop */
	void *san_stack_bottom;           /* ASan: the OS stack */
	size_t san_stack_size;

	struct wft_stats stats;
};

/* The runtime (runtime/init.c). */
/* DRAIN's controller state (runtime/drain.c "The rule"). Written and read
 * only by the worker holding rt.drain_busy. */
struct wft_drain_ctl {
	int phase;            /* DRAIN_NORMAL, _HELD, _WINDOW, _SETTLE */
	int dir;              /* the probe: +1 one more worker drains, -1 one fewer */
	int nd0;              /* ndrain before the probe */
	int k;                /* the probe's window, 0..3 */
	uint64_t t0, s0;      /* current window: start time, switches then */
	uint64_t sw[2], ns[2]; /* switches and time, old ndrain [0] and changed [1] */
	uint64_t until;       /* NORMAL/HELD: no probe before this time */
	uint64_t hold;        /* HELD's length; doubles while the drain keeps winning */
	uint64_t backoff;     /* NORMAL's wait after a drain that did not pay */
	uint64_t quiet_since; /* D below the raise level since then, or 0 */
	bool down_next;       /* HELD: the next probe is -1 (a +1 just lost) */
};

/* wft_rt.state. weft_init and weft_shutdown pass through CHANGING with
 * init_lock held; only RUNNING means the workers exist. */
enum wft_rt_state {
	WFT_RT_STOPPED = 0,
	WFT_RT_CHANGING = 1,              /* starting or stopping */
	WFT_RT_RUNNING = 2,
};

struct wft_runtime {
	_Atomic int state;                /* enum wft_rt_state (runtime/init.c) */
	int nworkers;
	int ncpu;                         /* CPUs this process may run on (affinity) */
	uint64_t seed;                    /* of the workers' rng (WEFT_SEED, init.c) */
	size_t stack_size;
	int pin;
	struct wft_worker **workers;
	_Atomic int nspinning;            /* workers spinning for work */
	/* idle.c "Contended CPUs": no worker spins before spin_off_until;
	 * spin_backoff is the current back-off (ns, 0 = none). Hints. */
	_Atomic uint64_t spin_off_until;
	_Atomic uint64_t spin_backoff;
	_Atomic int nidle;                /* workers that announced idle (parked or parking) */
	_Atomic int ndeep;                /* idle workers parking without the idle tick
	                                   * (idle.c "Idle tick") */
	_Atomic uint64_t idle_mask[WEFT_WORKERS_MAX / 64]; /* bit i: worker i parked */
	/* bit i: worker i has mail and its kick is left to the kick chain
	 * (idle.c "Kick chain"); its own line, written by wakers */
	_Atomic uint64_t kick_pending[WEFT_WORKERS_MAX / 64] wft_cacheline_aligned;
	/* DRAIN (runtime/drain.c): the ndrain highest-id workers drain; its
	 * own line (read at every placement, kick_pending above is written
	 * by wakers) */
	_Atomic int ndrain wft_cacheline_aligned;
	_Atomic uint64_t drain_next;      /* the controller's next run */
	_Atomic int drain_busy;           /* the controller's try-lock */
	struct wft_drain_ctl drain;       /* the controller's state, under drain_busy */
	_Atomic long os_born;             /* spawns from plain OS threads */
	_Atomic int quiescing;            /* shutdown is waiting for the last exit */
	_Atomic int stopping;             /* workers exit their loop */
	pthread_mutex_t init_lock;        /* weft_init / weft_shutdown only */
	_Atomic uint32_t quiesce;         /* futex: an exit while quiescing (shutdown waits) */
	_Atomic uint32_t nready;          /* futex: workers done with their setup (init waits) */
	int cpus[WEFT_WORKERS_MAX];       /* CPU of worker i when pinning */
};
extern struct wft_runtime wft_rt;

#include "runtime/runq.h"

/* The next slot holds a TCB pointer (cache-line aligned, so bit 0 is free)
 * tagged with WFT_NEXT_PINNED if the thread is pinned: a thief decides
 * from the slot value alone and never reads a TCB it does not own, and a
 * TCB reused by a pinned thread has another slot value, so a stale CAS
 * fails (worker.c I5; found by review). */
#define WFT_NEXT_PINNED ((uintptr_t)1)

static inline uintptr_t wft_next_tag(struct weft_thread *t)
{
	return (uintptr_t)t | (t->pin >= 0 ? WFT_NEXT_PINNED : 0);
}

static inline struct weft_thread *wft_next_untag(uintptr_t v)
{
	return (struct weft_thread *)(v & ~WFT_NEXT_PINNED);
}

/* The owner's look at its next slot. relaxed: only the owner sets it, so
 * NULL is exact; a non-NULL value may have just been stolen (worker.c I5),
 * which only callers that take it must handle (they exchange). Context:
 * owner. */
static inline struct weft_thread *wft_next_peek(struct wft_worker *w)
{
	return wft_next_untag(atomic_load_explicit(&w->next, memory_order_relaxed));
}

/* Does w have anything to run besides its current thread (mailbox, next
 * slot, runqueue)? The kernel's need_resched: a mutex spinner gives up on
 * it, a sync wakeup and an exit into the joiner require it false, an idle
 * worker's spin stops on it. Hints (relaxed loads). Context: owner. */
static inline bool wft_worker_has_work(struct wft_worker *w)
{
	return !wft_mailbox_empty(&w->mailbox) || wft_next_peek(w) || wft_runq_size(w) > 0;
}

/*
 * The worker running the caller, or NULL on an OS thread.
 * Migration safety: a light thread may resume on another worker after any
 * switch, but a compiler assumes the address of a __thread variable never
 * changes inside a function and may compute it once. So the thread pointer
 * is read with a volatile asm each time (initial-exec TLS: the variable's
 * offset from the thread pointer is the same in every thread). Elsewhere an
 * out-of-line call, which a compiler without LTO cannot hoist either.
 */
extern __thread struct wft_worker *wft_tls_worker __attribute__((tls_model("initial-exec")));
struct wft_worker *wft_worker_self_slow(void);

static inline struct wft_worker *wft_worker_self(void)
{
#if defined(__x86_64__)
	struct wft_worker *w;

	__asm__ volatile("movq wft_tls_worker@gottpoff(%%rip), %0\n\t"
			 "movq %%fs:(%0), %0" : "=r"(w));
	return w;
#else
	return wft_worker_self_slow();
#endif
}

/* Switch the calling thread away. how: */
enum { WFT_SCHED_YIELD, WFT_SCHED_PARK, WFT_SCHED_EXIT };

/*
 * Live light threads (shutdown waits for 0): per-worker monotonic birth and
 * death counters, each written only by its owner (a plain load and a
 * release store), plus an atomic count of spawns from OS threads.
 * wft_live_threads() reads every ndead first (acquire), then every nborn
 * and os_born (acquire). Why a 0 result is exact: a death we counted
 * happened after its thread's birth (the thread ran in between), and our
 * acquire of that ndead makes the birth visible to the later nborn reads;
 * a thread born after our nborn reads was spawned by a thread we did not
 * see dead (its death would come after the spawn), which keeps the
 * difference positive. Spawning concurrently with weft_shutdown() from
 * an OS thread is the caller's error (as with any use after shutdown).
 * The last exit's wake: see wft_count_death().
 */
static inline void wft_count_birth(struct wft_worker *w)
{
	if (w)
		/* release: pairs with the acquire in wft_live_threads */
		atomic_store_explicit(&w->nborn,
				      atomic_load_explicit(&w->nborn, memory_order_relaxed) + 1,
				      memory_order_release);
	else
		/* release: as above; an RMW, any OS thread may spawn */
		atomic_fetch_add_explicit(&wft_rt.os_born, 1, memory_order_release);
}
/*
 * An exit finished on w (its TCB may be reused now). If shutdown is
 * waiting, wake it to recount. The StoreLoad between our ndead store and
 * the quiescing load is not fenced (that would cost every exit a locked
 * instruction): shutdown may miss this exit and we may miss its flag; it
 * then recounts after its futex timeout (1 ms), so the race costs at most
 * 1 ms of shutdown latency and nothing is lost.
 */
void wft_count_death_quiescing(void);
static inline void wft_count_death(struct wft_worker *w)
{
	/* release: the thread's effects happen before shutdown counts it */
	atomic_store_explicit(&w->ndead, atomic_load_explicit(&w->ndead, memory_order_relaxed) + 1,
			      memory_order_release);
	/* relaxed: a hint; the 1 ms timeout of weft_shutdown's wait covers an
	 * exit that misses it */
	if (wft_unlikely(atomic_load_explicit(&wft_rt.quiescing, memory_order_relaxed)))
		wft_count_death_quiescing();
}
long wft_live_threads(void);
void wft_worker_schedule(struct wft_worker *w, int how);

/* Make t runnable on w from w itself (local wake or spawn). */
void wft_worker_push_local(struct wft_worker *w, struct weft_thread *t, bool next_slot);
/* Queue a thread just spawned by a thread of w (see "Spawn order" in worker.c). */
void wft_worker_push_spawn(struct wft_worker *w, struct weft_thread *t);
/* Exit cur directly into j (its joiner); false if j should not run here
 * now (see worker.c). Context: cur on w; j RUNNABLE, owned by the caller. */
bool wft_worker_exit_to(struct wft_worker *w, struct weft_thread *cur, struct weft_thread *j);
/* Direct join (worker.c): take t if it heads w's private runqueue and the
 * next slot's streak allows a switch without a pick; then switch from the
 * parked cur straight to it. Context: a thread of w. */
bool wft_worker_take_head(struct wft_worker *w, struct weft_thread *t);
void wft_worker_park_to(struct wft_worker *w, struct weft_thread *cur, struct weft_thread *t);
/* Take the thread sitting in victim's next slot if it has sat there, with
 * victim running the same thread, for NEXT_STEAL_DELAY_NS (worker.c I5).
 * Returns it or NULL; on a first look it notes the candidate (w->nx_*).
 * Context: w's own worker (the thief). */
struct weft_thread *wft_worker_steal_next(struct wft_worker *w, struct wft_worker *victim);
/* Is w timing a candidate that victim still strands (same thread, no
 * switch since w noted it)? Then w should look again soon instead of
 * sleeping. Context: w's own worker. */
bool wft_worker_next_stranded(struct wft_worker *w, struct wft_worker *victim);
struct wft_wake_burst;
/* v's switch counter. relaxed: a counter the owner bumps at every switch
 * (a hint: has v switched since a look?) */
static inline uint64_t wft_worker_switches(struct wft_worker *v)
{
	return atomic_load_explicit((_Atomic uint64_t *)&v->stats.switches, memory_order_relaxed);
}
/* Deliver a chain of threads (all targeting w) from another thread. */
void wft_wake_push(struct wft_worker *w, struct weft_thread *first,
			    struct weft_thread *last, unsigned n);
/* The same inside a batch: the kick is left to wft_wake_burst_end (one
 * wake syscall per batch, idle.c "Kick chain"). */
void wft_wake_push_burst(struct wft_worker *w, struct weft_thread *first,
				  struct weft_thread *last, unsigned n, struct wft_wake_burst *burst);
void wft_wake_burst_end(struct wft_wake_burst *burst);
/* Wake placement (runtime/wake.c): choose the worker a woken thread runs
 * on. burst: NULL for a single wake; for a batch (wake-queue flush) the
 * caller's zeroed struct, so that one batch wakes at most one parked
 * worker for its unpinned wakees. Context: the waker (any). */
struct wft_wake_burst {
	struct wft_worker *parked;        /* the parked worker this batch kicks */
	struct wft_worker *head;          /* the target the batch kicks itself;
	                                   * the others go to the kick chain */
	bool head_stealable;              /* the head's chain has unpinned threads */
	unsigned ndirect;                 /* targets kicked at once besides the head */
};
struct wft_worker *wft_wake_place(struct weft_thread *t, struct wft_worker *self,
				  struct wft_wake_burst *burst);
static inline struct wft_worker *wft_wake_target(struct weft_thread *t, struct wft_worker *self)
{
	return wft_wake_place(t, self, NULL);
}
/* Is w awake (running, or looking for work)? relaxed: a placement hint; a
 * stale answer costs one kick or one wait in a queue, never a lost wakeup
 * (the push decides the kick with its own seq_cst protocol, idle.c). */
static inline bool wft_worker_awake(struct wft_worker *w)
{
	return atomic_load_explicit(&w->sleep, memory_order_relaxed) == WFT_W_AWAKE;
}

/* Idle protocol (runtime/idle.c). */
void wft_idle_kick(struct wft_worker *w);     /* wake w if it announced idle */
/* The same, saying what it found: */
enum {
	WFT_KICK_AWAKE,      /* w was awake: nothing to do */
	WFT_KICK_SENT,       /* w was asleep: this call woke it */
	WFT_KICK_UNDERWAY,   /* w was kicked by someone else and has not stored AWAKE yet */
};
int wft_idle_kick_r(struct wft_worker *w);
/* Kick chain (idle.c): leave w's kick to the chain; kick head and make
 * sure the chain runs (returns what the kick found); take up to runners
 * pending kicks. Context: any. */
void wft_idle_kick_defer(struct wft_worker *w);
int wft_idle_kick_burst(struct wft_worker *self, struct wft_worker *head);
void wft_idle_kick_chain(struct wft_worker *self, int runners);
void wft_idle_kick_peers(struct wft_worker *self); /* kick every other parked worker */
void wft_idle_wake_one(struct wft_worker *self);  /* there is surplus work: get a worker spinning */
/* wake_one, preferring a worker parked without the idle tick (deep). */
void wft_idle_wake_deep(struct wft_worker *self);
/* The scheduler loop found work while w held a spinning slot: give the
 * slot back and run the strand check (idle.c; not found_work's "last
 * spinner wakes another"). Context: w's owner. */
void wft_idle_found_work(struct wft_worker *w);

/* DRAIN (runtime/drain.c). Context: w's owner (start/stop/idle). */
void wft_drain_worker_start(struct wft_worker *w);
void wft_drain_worker_stop(struct wft_worker *w);
void wft_drain_idle(struct wft_worker *w);
/* DRAIN is in effect: it needs STEAL (a draining worker learns that the
 * drain is over at its idle tick, which only STEAL has). */
#define WFT_DRAIN_ON() \
	wft_unlikely((wft_features & ((1ull << WFT_FEAT_BIT_DRAIN) | (1ull << WFT_FEAT_BIT_STEAL))) == \
		     ((1ull << WFT_FEAT_BIT_DRAIN) | (1ull << WFT_FEAT_BIT_STEAL)))
/* Is w one of the draining workers? relaxed ndrain: a hint (a stale value
 * makes one placement or one steal decision the old way). Any context. */
static inline bool wft_worker_draining(const struct wft_worker *w)
{
	return WFT_DRAIN_ON() &&
	       w->id >= wft_rt.nworkers - atomic_load_explicit(&wft_rt.ndrain, memory_order_relaxed);
}
/* self just left an unpinned thread in its next slot: if workers sleep
 * without the idle tick and none spins, get one going (idle.c "Idle
 * tick"). Inline: it runs at every local wake. Context: self's owner. */
static inline void wft_idle_strand_check(struct wft_worker *self)
{
	/* seq_cst: the load half of the ndeep pattern (see Idle tick);
	 * relaxed nspinning: someone spinning will look at our next slot */
	if (wft_unlikely(atomic_load_explicit(&wft_rt.ndeep, memory_order_seq_cst) > 0) &&
	    atomic_load_explicit(&wft_rt.nspinning, memory_order_relaxed) == 0)
		wft_idle_wake_deep(self);
}
void wft_idle_run(struct wft_worker *w);      /* called by the scheduler loop when nothing is runnable */
void wft_idle_kick_force(struct wft_worker *w);  /* shutdown: wake w whatever its state */
void wft_idle_spin_stop(struct wft_worker *w);   /* w found work: give up its spinning slot */
void wft_worker_finish_switch(struct wft_worker *w);
/* Wait until t's previous worker has finished switching it out (on_cpu
 * 0, acquire): spins briefly, then yields the CPU (worker.c). Any context. */
void wft_wait_off_cpu(struct weft_thread *t);
void wft_worker_free_all_unsafe(void);
void wft_tcb_cache_flush(struct wft_worker *w);
/* Move the stacks still held by cached TCBs into the stack cache (whose
 * bound and trim then apply). Returns how many it had to unmap (cache and
 * pool full). Owner worker. */
unsigned wft_tcb_cache_drop_stacks(struct wft_worker *w);
/* Fold a worker's counters into the retired totals (before freeing it). */
void wft_stats_retire(struct wft_worker *w);

int wft_worker_start_all(void);
void wft_worker_stop_all(void);

/* io_uring hooks (runtime/uring.c). A worker without a ring sleeps on the futex. */
int wft_uring_setup(struct wft_worker *w);
void wft_uring_teardown(struct wft_worker *w);
unsigned wft_uring_poll(struct wft_worker *w);                 /* submit + reap; owner */
void wft_uring_wait(struct wft_worker *w, weft_time_t deadline); /* idle sleep; owner */
void wft_uring_kick(struct wft_worker *w);                     /* any */

/* ---------------------------------------------------------------------- */
/* Waiters (runtime/waiter.c): what every blocking primitive parks. A waiter
 * is a weft thread (woken through the wake path) or a plain OS thread
 * (woken with a futex on its own word). */

enum { WFT_WAITER_WAITING = 0, WFT_WAITER_WOKEN = 1 };

struct wft_waiter {
	struct weft_thread *thread;       /* NULL: OS thread */
	_Atomic uint32_t state;           /* WAITING -> WOKEN by exactly one waker */
	struct wft_dlist node;            /* wait-queue link; the queue's lock protects it */
	uintptr_t data;                   /* primitive-specific (e.g. a requested count) */
	int result;                       /* primitive-specific outcome, set before WOKEN */
};

/* Prepare a waiter for the calling thread. Context: any. */
void wft_waiter_init(struct wft_waiter *wt);
/* Block until WOKEN or the deadline passes. Returns 0 (woken) or ETIMEDOUT;
 * after ETIMEDOUT the caller must resolve the race with a concurrent wake
 * under its own lock (the waker may have won meanwhile). Context: any. */
int wft_waiter_wait(struct wft_waiter *wt, weft_time_t deadline);
/* Mark WOKEN (release: publishes result/data) and wake its thread. The
 * waiter may be gone as soon as the state is stored; nothing else of it is
 * touched after. Context: any. */
void wft_waiter_wake(struct wft_waiter *wt);
/* Like wft_waiter_wake(), but the caller hints that it is about to block
 * (a rendezvous hand-off): the wakee may take the caller's place on its
 * worker (sync wakeup, runtime/wake.c). Context: any. May park: no. */
void wft_waiter_wake_sync(struct wft_waiter *wt);
/* Batched wake, step 1: mark wt WOKEN (release) and, for a weft thread,
 * give its unpark token and win its PARKED -> RUNNABLE transition without
 * enqueueing it. Returns the thread the caller must now deliver (with
 * wft_wake_deliver, or in a chain through wft_wake_push /
 * wft_worker_push_local), or NULL when there is nothing to deliver: an OS
 * thread (woken here by futex), or a thread that had not parked yet (it
 * sees WOKEN / its token by itself). Nothing of *wt is touched after the
 * WOKEN store. Context: any. May park: no. */
struct weft_thread *wft_waiter_claim(struct wft_waiter *wt);
/* Hand-off wake (Go's semrelease with handoff): the caller has just given
 * the wakee something it must act on at once (a mutex it now owns). From a
 * weft thread (and with SYNC_WAKE on) the wakee goes to the caller's worker,
 * next slot, and the caller yields to it, so the hand-off costs a switch and
 * not a remote wake and kick; otherwise as wft_waiter_wake(). Context: any.
 * May park: no (a weft-thread caller may be switched out and resumed). */
void wft_waiter_wake_yield(struct wft_waiter *wt);

/* The unpark half of the Park protocol (runtime/thread.c "Park"), written
 * once for weft_unpark and the waiters: give t its token. Returns true when
 * the caller must now wake t (claim or wake it); false when a token was
 * already pending, whose giver is responsible for the wake. seq_cst: the
 * StoreLoad pair with the parker's state CAS / token exchange. Context:
 * any. */
static inline bool wft_unpark_token(struct weft_thread *t)
{
	return !atomic_exchange_explicit(&t->token, 1, memory_order_seq_cst);
}
/* The hand-off placement of wft_waiter_wake_yield (runtime/wake.c): may
 * the calling context take a hand-off wakee into its own next slot? */
bool wft_wake_handoff_ok(void);
/* Place t, claimed by the caller, for a hand-off: the caller's worker,
 * next slot (returns true: the caller yields to it), or its pinned
 * worker elsewhere (false). Context: a weft thread (handoff_ok true). */
bool wft_wake_handoff(struct weft_thread *t);

/* ---------------------------------------------------------------------- */
/* Clocks (runtime/clock.c) and wait notes (runtime/dump.c prints them). */

/* CLOCK_MONOTONIC in ns. Context: any. */
weft_time_t wft_now(void);
/* CLOCK_MONOTONIC_COARSE (a few ms resolution, a few ns to read): the
 * dump's "blocked since" stamps. Context: any. */
weft_time_t wft_coarse_now(void);
/* Note what the calling light thread t blocks on (weft_dump). */
static inline void wft_wait_note(struct weft_thread *t, const char *what, const void *obj)
{
	if (t) {
		t->wait_what = what;
		t->wait_obj = obj;
		t->wait_since = wft_coarse_now();
	}
}
/* The same without the time stamp (the join and park paths, where 5-9 ns
 * of a coarse clock read would show in spawn+join): the dump then prints
 * no duration. */
static inline void wft_wait_note_untimed(struct weft_thread *t, const char *what, const void *obj)
{
	if (t) {
		t->wait_what = what;
		t->wait_obj = obj;
		t->wait_since = 0;
	}
}
static inline void wft_wait_clear(struct weft_thread *t)
{
	if (t)
		t->wait_what = NULL;
}
/* Fault injection: WEFT_FAULT=alloc:N fails the N-th internal allocation. */
bool wft_fault_alloc(void);
/* WEFT_FAULT=sqfull:N (init.c): inline, as it sits on every SQE request:
 * one relaxed load when off (a test knob; nothing is published with it). */
extern _Atomic long wft_fault_sqfull_left;
bool wft_fault_sqfull_take(void);
static inline bool wft_fault_sqfull(void)
{
	return wft_unlikely(atomic_load_explicit(&wft_fault_sqfull_left, memory_order_relaxed) > 0) &&
	       wft_fault_sqfull_take();
}
void *wft_malloc(size_t n);  /* malloc through the fault injector */
void wft_futex_wait(_Atomic uint32_t *addr, uint32_t val, weft_time_t deadline);
void wft_futex_wake(_Atomic uint32_t *addr, int n);

/* Thread pool of TCBs. */
struct weft_thread *wft_tcb_alloc(struct wft_worker *w);
void wft_tcb_release(struct wft_worker *w, struct weft_thread *t);
void wft_tcb_pool_fini_unsafe(void);

#endif
