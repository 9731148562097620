/*
 * runtime/worker.h - the worker: struct wft_worker, its next slot, the
 * scheduler entry points, the live-thread counts and the owner's queries
 * (runtime/worker.c; its idle side is runtime/idle.h).
 */
#ifndef WFT_WORKER_H
#define WFT_WORKER_H

#include "runtime/context.h"
#include "runtime/init.h"
#include "runtime/mailbox.h"
#include "runtime/runq.h"
#include "runtime/stats.h"
#include "runtime/thread.h"
#include "runtime/timer.h"

/* xorshift64: a worker's cheap PRNG (victim choice, RANDOMIZE). Owner only. */
static inline uint64_t wft_xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

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
	bool looker;                      /* this worker holds rt.looker (idle.c); owner */
	bool look_cleared;                /* its last look cleared RELIED (idle.c); owner */
	uint64_t tick_switches;           /* stats.switches at that park (owner only) */
	_Atomic weft_time_t park_until;   /* the current park's deadline, 0 while awake or
	                                   * not yet known (idle.c "Kick gate"); written
	                                   * by the owner, read by wakers */
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

#include "runtime/runq_owner.h"

/* The next slot holds a TCB pointer (cache-line aligned, so bit 0 is free)
 * tagged with WFT_NEXT_PINNED if the thread is pinned: a thief decides
 * from the slot value alone and never reads a TCB it does not own, and a
 * TCB reused by a pinned thread has another slot value, so a stale CAS
 * fails (worker.c I5). */
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
/* The park re-check's look at victim's next slot (worker.c I5): NONE (no
 * unpinned thread), SEEN (one; noted for the next look if may_note and w
 * has no other note), CONFIRMED (the noted thread, victim not switched
 * since). */
enum { WFT_NX_NONE, WFT_NX_SEEN, WFT_NX_CONFIRMED };
int wft_worker_next_look(struct wft_worker *w, struct wft_worker *victim, bool may_note);
/* v's switch counter. relaxed: a counter the owner bumps at every switch
 * (a hint: has v switched since a look?) */
static inline uint64_t wft_worker_switches(struct wft_worker *v)
{
	return atomic_load_explicit((_Atomic uint64_t *)&v->stats.switches, memory_order_relaxed);
}
/* Is w awake (running, or looking for work)? relaxed: a placement hint; a
 * stale answer costs one kick or one wait in a queue, never a lost wakeup
 * (the push decides the kick with its own seq_cst protocol, idle.c). */
static inline bool wft_worker_awake(struct wft_worker *w)
{
	return atomic_load_explicit(&w->sleep, memory_order_relaxed) == WFT_W_AWAKE;
}
/* Is w one of the draining workers? relaxed ndrain: a hint (a stale value
 * makes one placement or one steal decision with the previous count).
 * Any context. */
static inline bool wft_worker_draining(const struct wft_worker *w)
{
	return WFT_DRAIN_ON() &&
	       w->id >= wft_rt.nworkers - atomic_load_explicit(&wft_rt.ndrain, memory_order_relaxed);
}
void wft_worker_finish_switch(struct wft_worker *w);
/* Wait until t's previous worker has finished switching it out (on_cpu
 * 0, acquire): spins briefly, then yields the CPU (worker.c). Any context. */
void wft_wait_off_cpu(struct weft_thread *t);
void wft_worker_free_all_unsafe(void);

int wft_worker_start_all(void);
void wft_worker_stop_all(void);

#endif
