/*
 * runtime/thread.h - the light thread: its control block (struct
 * weft_thread, the TCB), run and join states, the park primitive and the
 * unpark token, and the wait notes that weft_dump prints
 * (runtime/thread.c; the TCB pool is runtime/tcb.h).
 */
#ifndef WFT_THREAD_H
#define WFT_THREAD_H

#include "runtime/panic.h"
#include "runtime/clock.h"
#include "runtime/context.h"
#include "runtime/timer.h"

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
	                                   * the stack stays with it (see tcb.c "Stacks
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
	 * moves this one line between CPUs, not two (a cross-worker
	 * ping-pong is slower with state and worker on the first line:
	 * docs/design.md "Measured alternatives"). Aligned:
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
	struct weft_thread *prev_wakee;   /* the wakee before last_wakee; compared, never dereferenced */
	_Atomic uint32_t wakee_flips;     /* wakes of a third partner, halved every decay period */
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
	/* The thread's fast read hold of an rwlock (sync/rwlock.c "Read
	 * bias"): the lock and the per-worker counter slot its read lock
	 * incremented, so that the unlock decrements that slot on whatever
	 * worker the thread runs by then. NULL lock: none. Written and read
	 * only by the thread itself; cleared by spawn. */
	const void *rw_fast_lock;
	void *rw_fast_slot;
} wft_cacheline_aligned;   /* TCB slabs are cache-line aligned (thread.c) */

/* The calling light thread, or NULL (OS thread or scheduler loop). */
struct weft_thread *wft_thread_self(void);

/* Park the calling thread with an optional deadline (WEFT_TIME_INFINITE).
 * Consumes the unpark token. Returns 0 or ETIMEDOUT. Context: weft thread. */
int wft_thread_park(weft_time_t deadline);

/* Free a finished thread's TCB (after its switch-out completed). */
void wft_thread_free(struct weft_thread *t);

/* Entry point of every new context. */
void wft_thread_start(struct wft_ctx *prev, void *arg);

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

/* Wait notes: what a light thread blocks on, printed by weft_dump
 * (runtime/dump.c). */

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

#endif
