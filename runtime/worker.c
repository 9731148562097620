/*
 * runtime/worker.c - workers and the scheduling loop.
 *
 * What it owns: the worker OS threads, the switch from one light thread to
 * the next, the next slot, and the order in which a worker looks for work.
 * docs/design.md "Scheduling loop" has the picture.
 *
 * Objects: struct wft_worker (runtime/worker.h). w->current is the running
 * thread (NULL while the scheduler loop runs on the worker's OS stack,
 * w->sched_ctx). Switches go directly from thread to thread; the scheduler
 * loop only runs when a worker has nothing to do.
 *
 * Invariants:
 *   I1 Only w's own OS thread reads or writes w->current, w->prev,
 *      w->rq's private part (except NO_MAILBOX, see runq.c) and w's caches;
 *      only it sets w->next (a thief may only take it, I5).
 *   I2 A thread runs on at most one worker at a time: a worker that picked t
 *      waits until t->on_cpu is 0 before switching to it.
 *   I3 The next slot holds at most one thread; a newer local wakee displaces
 *      the older one to the runqueue tail.
 *   I4 NEXT_STREAK_MAX consecutive next-slot picks, then the runqueue goes
 *      first once: two threads waking each other cannot starve the queue.
 *   I5 The next slot can be stolen, but only from a worker that has kept
 *      running the same thread since the wakee was put there (Go's runnext
 *      rule): a waker that blocks soon runs the wakee here with its cache
 *      warm; a waker that keeps running (a mutex unlocker in a loop) would
 *      strand it. Protocol below ("Next-slot steal").
 *
 * Pick order (every scheduling point): drain the mailbox into the runqueue
 * tail (FIFO), reap io_uring completions, fire due timers, publish work if a
 * thief asked, then the next slot (bounded by I4), then the runqueue.
 *
 * Finishing a switch. A thread that blocks marks itself PARKED *before* it
 * switches away, so a waker on another worker may queue it, and another
 * worker may pick it, while its registers are still being saved. So:
 *   - the switching side records w->prev = itself and keeps on_cpu = 1;
 *   - the context that resumes on this worker (the next thread, or the
 *     scheduler loop) calls wft_worker_finish_switch(), which, now that the
 *     previous context is fully saved, stores on_cpu = 0 (release; pairs with
 *     the acquire spin of I2), and for an exited thread returns its stack to
 *     the cache and frees a detached TCB.
 * The spin of I2 lasts at most the few instructions between the switch and
 * finish_switch on the other worker.
 *
 * Timer check cost: reading the clock costs ~20 ns, more than a yield, so a
 * running worker checks its timer heap only when it is non-empty and only on
 * every TIMER_CHECK_EVERY-th switch; the idle loop checks every time and
 * sleeps until the nearest deadline.
 *
 * Next-slot steal (I5). w->next is an atomic (tagged) pointer. The owner sets it
 * only when it reads NULL (a plain release store: no thief writes a NULL
 * slot, thieves only take a non-NULL one) and otherwise exchanges; it takes
 * it with an exchange (the pick), so owner and thief race only through
 * RMWs on the slot, and exactly one of them gets the thread: either the
 * owner's exchange comes first in the slot's modification order (the
 * thief's CAS then fails: the value is no longer t) or the thief's CAS does
 * (the owner's exchange then returns NULL and it picks from the runqueue).
 * The slot value carries a pinned tag (worker.h WFT_NEXT_PINNED): a thief
 * skips pinned threads without reading the TCB, and its CAS on a TCB
 * reused meanwhile by a pinned thread fails.
 * The cost is one locked exchange per next-slot pick (not per switch).
 * Staleness: a thief looking at victim v notes (v, t, v's switch counter,
 * time); if a later look finds the same thread in the slot and the same
 * switch count after NEXT_STEAL_DELAY_NS, v has been running one thread
 * all that time, and the thief takes t with a CAS (acquire: pairs with
 * the owner's release store of the slot, so t's state is visible). A
 * wrong guess (v switched twice and put the same t back) only steals a
 * runnable thread early. An idle worker that sees an occupied next slot
 * when it parks sleeps with a short timeout (idle.c) so that it looks again.
 *
 * Rejected: switching through the scheduler context on every block (Go's
 * mcall to g0): it costs a second switch per block; the direct switch needs
 * only the on_cpu hand-shake above (the kernel's p->on_cpu).
 */
#include "runtime/wft.h"
#include "runtime/diag.h"
#include "runtime/sanitizer.h"
#include "runtime/uring.h"
#include "runtime/os_policy.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

__thread struct wft_worker *wft_tls_worker __attribute__((tls_model("initial-exec")));

struct wft_worker *wft_worker_self_slow(void)
{
	return wft_tls_worker;
}

/* I4: a ping-pong pair runs at most this many times in a row ahead of the
 * queue. 32 switches of ~10 ns: the queue waits at most ~0.5 us extra. */
#define NEXT_STREAK_MAX 32
/* See "Timer check cost" above: 8 switches of a busy worker are well under
 * the 200 us timer precision target. */
#define TIMER_CHECK_EVERY 8
/* I/O check cost: wft_uring_poll() reads the CQ tail, the SQ flags and the
 * SQ head (shared with the kernel), ~3 ns, 11% of a yield measured with
 * perf. While other threads are runnable here, completions only wait a
 * few switches longer (~8 x 15 ns), and SQEs were batched anyway (the
 * Batching rule of uring.c submits when nothing else is runnable, which
 * is always checked). */
#define IO_CHECK_EVERY 8

/* Surplus: work queued here beyond what this worker will run next.
 * A freshly spawned child alone is not surplus: its spawner usually joins
 * it soon (spawn then join) and runs it here at once; publishing it and
 * kicking a sleeper instead made every spawn+join a futex syscall plus a
 * cross-worker join (spawn_join_seq 142 ns before), and fib(30) a storm of
 * kicks. So a spawn counts as surplus from two queued threads on, and a
 * scheduling point (pick, mailbox drain, a thief's request) likewise
 * (the pick itself takes one). A thread woken onto the runqueue of a
 * waker that keeps running is surplus at once (min 1): nothing here will
 * run it until the waker blocks, and a waker that never blocks (a mutex
 * unlocker in a loop) would strand it while another worker sleeps.
 * Pinned threads can never move, so they are not surplus either. */
static inline bool have_surplus_n(struct wft_worker *w, uint32_t min)
{
	return wft_runq_size(w) + (wft_next_peek(w) != NULL) >= min;
}

static inline bool have_surplus(struct wft_worker *w)
{
	return have_surplus_n(w, 2);
}

/* If workers sleep and none is looking while w has (stealable) surplus of
 * at least min queued threads, get one. relaxed: hints (see "Surplus" in
 * runtime/idle.c); wake_one() decides by its own CAS. */
static inline void maybe_wake_idle(struct wft_worker *w, bool stealable, uint32_t min)
{
	if (stealable &&
	    wft_unlikely(atomic_load_explicit(&wft_rt.nidle, memory_order_relaxed) > 0) &&
	    have_surplus_n(w, min) &&
	    atomic_load_explicit(&wft_rt.nspinning, memory_order_relaxed) == 0)
		wft_idle_wake_one(w);
}

/* A yielder queued behind another thread (wft_worker_schedule): make it
 * stealable. Only the owner can move its private list to the ring, and
 * the thread it yielded to may not reach a scheduling point for a long
 * time; a worker that goes idle meanwhile and sees private work only can
 * just ask (split_req) and sleep. So publish at every such yield (Go puts
 * a yielding goroutine on its global queue, under a lock), then, after a
 * seq_cst fence, read the spinner and idle counts. The race to survive:
 * a worker deciding to sleep while we decide nobody looks. It marks
 * itself idle, fences, then re-checks every ring; by the two fences it
 * sees the yielder in our ring, or we see it idle and wake one
 * (wake_pick's CAS on nspinning: at most one kick per yield, none while a
 * spinner looks, since a spinner steals from the ring). The cost, paid
 * only by unpinned yields that leave the yielder behind another thread
 * with more than one worker: the publish, the fence, and ring pops by CAS
 * instead of the private list's plain loads. */
static __attribute__((noinline)) void offer_yielder(struct wft_worker *w)
{
	wft_runq_publish_owner(w);
	atomic_thread_fence(memory_order_seq_cst);
	/* relaxed after the fence: the Dekker argument above */
	if (atomic_load_explicit(&wft_rt.nspinning, memory_order_relaxed) == 0 &&
	    atomic_load_explicit(&wft_rt.nidle, memory_order_relaxed) > 0)
		wft_idle_wake_one(w);
}

/* Move the mailbox into the runqueue. Work that arrived from outside may be
 * surplus while other workers sleep (nobody else will notice it: remote
 * wakers kick only the target, which is busy), so when some worker is idle
 * and none is looking, get one (the "Surplus" bound of runtime/idle.c).
 * Without this, threads unparked from an OS thread onto a busy worker
 * would run there one after another while the other worker slept. */
static __attribute__((noinline)) void drain_mailbox(struct wft_worker *w)
{
	struct weft_thread *last;
	uint32_t n;
	bool stealable;
	/* One pass over the (cold) list, then a splice: pushing them one by
	 * one walked the chain a second time (sembench: every wake is remote,
	 * and MAILBOX on measured 0.78x of off, whose waker splices). */
	struct weft_thread *first = wft_mailbox_take_all(&w->mailbox, &last, &n, &stealable);

	if (!first)
		return;
	wft_runq_push_chain_owner(w, first, last, n);
	maybe_wake_idle(w, stealable, 2);   /* some left after this pick */
}

/* Fire due timers (the heap is non-empty). Out of line: the fast path of
 * pick() only tests the heap's minimum. */
static __attribute__((noinline)) void check_timers(struct wft_worker *w, weft_time_t next)
{
	weft_time_t now = wft_now();

	if (next <= now)
		wft_timer_run(w, now);
}

/* A thief asked for work (relaxed: a hint; see runq.c). Honoured when there
 * is surplus (one queued thread is what this pick runs next); otherwise it
 * stays set for a later pick. */
static __attribute__((noinline)) void answer_split_req(struct wft_worker *w)
{
	if (!have_surplus(w))
		return;
	/* The thief that asked is idle (or, under NO_MAILBOX, a remote
	 * waker asked for the sleepers: wake.c push_locked): an idle worker
	 * ticks (its park re-check reads every ring, so it finds what we
	 * publish within a tick), or it dozes or sleeps deep, which the
	 * strand check covers (it relies on the looker or gets a deep or
	 * dozing worker going; DOZE_NS in the races idle.c "Idle tick"
	 * leaves to the dozers). A kick here woke it at once, which a chain
	 * of stages paid for in splits (offer_displaced below;
	 * docs/wake-path.md "Displaced wakees"). Only if something was
	 * published: with only pinned threads queued, getting a sleeper
	 * going made it wake, find nothing, ask again and sleep, ~40k times
	 * a second (the yield benchmark's pinned pair; test
	 * sched/pinned_no_kicks). */
	if (wft_runq_publish_owner(w) ||
	    /* relaxed: our own ring's bounds (a thief only makes it emptier);
	     * work already public (the ring was full, or only pinned threads
	     * are private) still needs a looker */
	    atomic_load_explicit(&w->rq.tail, memory_order_relaxed) !=
	    atomic_load_explicit(&w->rq.head, memory_order_relaxed))
		wft_idle_strand_check(w);
}

/* The rare half of stack_offer: the stacks that cached TCBs keep (tcb.c
 * "Stacks that stay with their TCB") go to the stack cache first, then
 * the cache to the pool. */
static __attribute__((noinline)) void stack_offer_slow(struct wft_worker *w)
{
	wft_tcb_cache_drop_stacks(w);
	wft_stack_share(w);
}

/* While some thread waits for a stack, give it the ones w has cached: the
 * waiter's worker finds them in the pool when it retries ("Stack
 * shortage" below). Called at every pick (a worker picks before it
 * parks; one that was parked already is kicked). Owner worker. */
static inline __attribute__((always_inline)) void stack_offer(struct wft_worker *w)
{
	/* relaxed: a hint read on every pick. A stale 0 delays the offer to
	 * a later pick (the increment's kick makes sure a parked peer has
	 * one); a stale count gives this cache to the pool needlessly (it
	 * comes back through pool_get on a cache miss) */
	if (wft_unlikely(atomic_load_explicit(&wft_stack_waiters.n, memory_order_relaxed) > 0) &&
	    (w->nstacks > 0 || w->ntcb_stacked > 0))
		stack_offer_slow(w);
}

/* A pick's side work: drain the mailbox, reap io_uring completions, fire
 * due timers, answer a thief, offer cached stacks to a thread waiting for
 * one. force (the direct switches' periodic call, see "Direct
 * switches") does the I/O and timer checks without waiting for their
 * tick. */
static inline __attribute__((always_inline)) void side_work(struct wft_worker *w, bool force)
{
	if (wft_unlikely(!wft_mailbox_empty(&w->mailbox)))
		drain_mailbox(w);
	/* I/O: every IO_CHECK_EVERY-th pick while other threads are runnable
	 * here, and always when nothing else is (see "I/O check cost"). */
	if (w->ring && (force || (++w->io_tick % IO_CHECK_EVERY) == 0 ||
			(!wft_next_peek(w) && wft_runq_size(w) == 0))) {
		/* wakes from completions are not the running thread's */
		w->in_side_work = true;
		wft_uring_poll(w);
		w->in_side_work = false;
	}
	{
		/* relaxed: the heap's minimum, a hint written under the heap lock
		 * (a canceller on another worker may change it concurrently) */
		weft_time_t next = atomic_load_explicit(&w->timers.next, memory_order_relaxed);

		if (wft_unlikely(next != WEFT_TIME_INFINITE) &&
		    (force || !w->current || (++w->tick % TIMER_CHECK_EVERY) == 0)) {
			w->in_side_work = true;   /* nor are timeouts */
			check_timers(w, next);
			w->in_side_work = false;
		}
	}
	/* relaxed: a thief's hint, see answer_split_req() */
	if (wft_unlikely(atomic_load_explicit(&w->rq.split_req, memory_order_relaxed)))
		answer_split_req(w);
	stack_offer(w);
}

/*
 * Direct switches. Two switches skip the pick: a thread exiting straight
 * into its joiner (wft_worker_exit_to) and a join switching straight to
 * the child at the head of its queue (wft_worker_take_head). They are a
 * return and a call: which thread runs is what the pick would choose, so
 * they do not count in the next slot's streak (I4). Counting them there
 * broke fork-join: fib's exits reached the bound every 32 switches, and
 * I4 then sent the joiner behind the queue, whose head is an unstarted
 * sibling: the computation went breadth first, 21,000 threads lived at
 * once and their stacks were mapped and unmapped 35,000 times a run
 * (fib(30) 60 ms -> 1,100 ms). What skipping the pick must still bound
 * is its side work: every DIRECT_SIDE_EVERY-th direct switch does it.
 */
#define DIRECT_SIDE_EVERY 32

static __attribute__((noinline)) void direct_side_work(struct wft_worker *w)
{
	w->nopick = 0;
	side_work(w, true);
}

static inline void direct_tick(struct wft_worker *w)
{
	if (wft_unlikely(++w->nopick >= DIRECT_SIDE_EVERY))
		direct_side_work(w);
}

/* The runqueue pops below treat w->next specially (I3, I4). Inline: a
 * yield is this, a push and a switch (the 12 ns budget); the rare cases
 * are out-of-line calls behind one test each. */
static inline __attribute__((always_inline)) struct weft_thread *pick(struct wft_worker *w)
{
	struct weft_thread *t;

	w->nopick = 0;
	side_work(w, false);
	/* I5: exchange, a thief may be taking it (relaxed: only the RMW's
	 * atomicity matters; we set the slot ourselves) */
	if (wft_next_peek(w) &&
	    (t = wft_next_untag(atomic_exchange_explicit(&w->next, 0, memory_order_relaxed)))) {
		/* a lone spawned child is not a ping-pong wakee: no streak */
		if (wft_unlikely(t == w->spawn_next)) {
			w->spawn_next = NULL;
			return t;
		}
		if (w->next_streak < NEXT_STREAK_MAX) {
			w->next_streak++;
			wft_stat_inc(w, next_slot);
			return t;
		}
		/* I4: the pair had its turn; it goes behind the queue */
		wft_runq_push_owner(w, t);
	}
	w->next_streak = 0;
	return wft_runq_pop_owner(w);
}

/* The rare halves of finishing a switch: prev exited, or parked with a
 * commit. Returns true if prev's on_cpu was already dealt with. */
static __attribute__((noinline)) bool finish_switch_slow(struct wft_worker *w,
							 struct weft_thread *prev)
{
	/* relaxed: set by the thread itself before it switched away */
	if (atomic_load_explicit(&prev->state, memory_order_relaxed) == WFT_T_DONE) {
		/* counted before on_cpu = 0 lets a joiner return: after a join
		 * the exit counter (weft_stats_get) includes the thread; the
		 * worker finishing this switch needs nothing shutdown frees */
		wft_count_death(w);
		/* keep_stack: written by prev itself before its exit switch, on
		 * this OS thread (see tcb.c "Stacks that stay with their TCB") */
		if (!prev->keep_stack)
			wft_stack_release(w, prev);
		/* TSan: the fiber dies with the run (see runtime/sanitizer.h);
		 * prepare() gives the TCB's next thread a new one */
		wft_san_fiber_destroy(prev->san_fiber);
		prev->san_fiber = NULL;
		if (prev->free_on_exit) {
			/* detached: nobody else holds it (thread.c I2) */
			atomic_store_explicit(&prev->on_cpu, 0, memory_order_relaxed);
			wft_thread_free(prev);
		} else {
			/* release: pairs with the joiner's acquire spin */
			atomic_store_explicit(&prev->on_cpu, 0, memory_order_release);
		}
		return true;
	}
	if (prev->park_commit) {
		/* The thread parked with a commit (weft_join): now that its
		 * context is saved, publish it; the commit may wake it at once
		 * (it then waits in our queue until on_cpu is cleared below). */
		void (*fn)(struct weft_thread *, void *) = prev->park_commit;

		prev->park_commit = NULL;
		fn(prev, prev->park_arg);
	}
	return false;
}

static inline __attribute__((always_inline)) void finish_switch(struct wft_worker *w)
{
	struct weft_thread *prev = w->prev;

	if (!prev)
		return;
	WFT_ASSERT(prev != w->current);
	w->prev = NULL;
	/* relaxed: both written by the thread itself before it switched away */
	if (wft_unlikely(atomic_load_explicit(&prev->state, memory_order_relaxed) == WFT_T_DONE ||
			 prev->park_commit) &&
	    finish_switch_slow(w, prev))
		return;
	/* release: publishes prev's saved context; pairs with the acquire spin
	 * in switch_to (I2) */
	atomic_store_explicit(&prev->on_cpu, 0, memory_order_release);
}

void wft_worker_finish_switch(struct wft_worker *w)
{
	finish_switch(w);
}

/* The initial context of a thread that has its stack. colouring: start
 * below the top by the stack's colour (stack.c). */
static inline __attribute__((always_inline)) void make_start_ctx(struct weft_thread *next)
{
	wft_ctx_make(&next->ctx, wft_stack_lo(next), wft_stack_len(next) - wft_stack_colour(next),
		     wft_thread_start, next, next->fpenv);
	next->started = 1;
}

/*
 * Stack shortage. Stacks are mapped when a thread first runs, after its
 * spawn returned 0. A thread whose stack cannot be had (vm.max_map_count,
 * RLIMIT_AS, no memory) goes back to the runqueue tail and is retried
 * later: it must not be lost. So that a program that keeps spawning
 * learns of the shortage (EAGAIN, as pthread_create reports when it
 * cannot get a stack) instead of queueing threads that cannot run, such a
 * thread is counted in wft_stack_waiters from its first failure until it
 * gets a stack, on whichever worker, and weft_spawn refuses threads that
 * would need a new stack while the count is not 0. (A flag set on failure
 * and cleared on a mapping or a free would stay set when the waiter got a
 * cached stack elsewhere, refusing spawns with nobody waiting.) relaxed: a
 * count that only gates spawns; the increment and the decrement are RMWs,
 * so the count is exact.
 *
 * The stack a waiter needs may sit in another worker's cache (or with one
 * of its cached TCBs), which only its owner touches. While the count is
 * not 0, every worker hands its cached stacks to the global pool at its
 * next pick (stack_offer), a waiter's first failure kicks the parked
 * workers so that they pick too, and the waiter's retry looks in the
 * pool. Without this, a waiter pinned to its worker, or on a worker whose
 * peers are busy and never steal, or parked, would wait until memory was
 * freed (tests thread/stack_shortage_peer_cache). Not covered: a pool
 * already full of stacks of other sizes (STACK_POOL_MAX of them) takes no
 * more, and the waiter then waits for a free or a mapping.
 */
struct wft_padded_count wft_stack_waiters;

/*
 * Give a thread that never ran its stack and initial context: the rare
 * half (no stack yet, or a sanitizer or Valgrind must hear of the fresh
 * stack). On failure (no memory for a stack) the thread waits (above).
 */
static __attribute__((noinline)) bool prepare_slow(struct wft_worker *w, struct weft_thread *next)
{
	if (!next->stack && wft_stack_alloc(w, next)) {
		if (!next->stack_wait) {
			next->stack_wait = true;
			/* relaxed: a count that only gates spawns (above) */
			atomic_fetch_add_explicit(&wft_stack_waiters.n, 1, memory_order_relaxed);
			/* peers parked before we waited never pick: wake them
			 * so that they offer their caches (stack_offer) */
			wft_idle_kick_peers(w);
		}
		wft_runq_push_owner(w, next);
		return false;
	}
	if (wft_unlikely(next->stack_wait)) {
		next->stack_wait = false;
		/* relaxed: as the increment */
		atomic_fetch_sub_explicit(&wft_stack_waiters.n, 1, memory_order_relaxed);
	}
	wft_san_stack_fresh(wft_stack_lo(next), wft_stack_len(next));
	if (WFT_TSAN && !next->san_fiber)
		next->san_fiber = wft_san_fiber_create();
	make_start_ctx(next);
	return true;
}

/* The common first run reuses the stack its TCB kept (tcb.c "Stacks
 * that stay with their TCB"): only the context is made. */
static inline __attribute__((always_inline)) bool prepare(struct wft_worker *w,
							  struct weft_thread *next)
{
	if (wft_likely(next->started))
		return true;
	if (wft_unlikely(!next->stack || WFT_ASAN || WFT_TSAN || WFT_VG_RUNNING()))
		return prepare_slow(w, next);
	make_start_ctx(next);
	return true;
}

/*
 * Waiting for a switch. A woken thread may be dispatched while its previous
 * worker is still switching it out (I2); the dispatcher waits for its
 * on_cpu to drop. The window is the tail of that worker's switch, a few
 * nanoseconds, so a spin is right, as in the kernel's wakeup (which spins
 * on the task's on_cpu with preemption off). Here the switcher is an OS
 * thread the kernel may preempt inside the window, and oversubscribed it
 * often is: the kick that woke us preempts whatever ran on its CPU, often
 * that switcher. Two rules follow.
 *
 * 1. Spin ON_CPU_SPIN_NS, then give the CPU back between looks
 *    (sched_yield lets the preempted switcher run). Spinning on burnt our
 *    time slice while the thread we waited for waited for a CPU, and every
 *    worker that dispatched a thread of the preempted one joined the
 *    convoy (oversubscribed sembench spent most of its time in that spin:
 *    docs/design.md "Measured alternatives"). 50 us: the task that
 *    preempted the switcher is often a kicked worker that parks again
 *    within microseconds, and a yield hands the CPU to anything runnable
 *    for a whole slice, CPU hogs included (with a much shorter spin, a
 *    program sharing its 2 CPUs with CPU hogs ran faster on one worker
 *    than on two); a real preemption lasts milliseconds.
 *
 * 2. Never wait while holding a thread. The dispatcher's own current
 *    thread has on_cpu = 1 until this switch finishes, and it may already
 *    be PARKED and woken onto another worker, which then waits for it:
 *    two workers each waiting for the other's thread (DRAIN moves a
 *    thread off its awake last worker, and a sync wake keeps one on a
 *    draining worker). So a dispatch from a thread that finds next still
 *    on a CPU after the spin switches to the scheduler loop first
 *    (finishing its own thread's switch there, as when nothing is
 *    runnable), and the loop waits for next holding nothing
 *    (w->held). A wait with nothing held cannot be part of a cycle.
 * The reaper of an exited thread waits for the same store (thread.c I3)
 * with rule 1; the exiting thread's worker never waits for the reaper.
 */
#define ON_CPU_SPIN_NS 50000

/* Rule 1's spin: true once t is off its CPU (acquire, as in switch_to). */
static bool off_cpu_soon(struct weft_thread *t)
{
	weft_time_t end = wft_now() + ON_CPU_SPIN_NS;

	do {
		for (int i = 0; i < 16; i++)
			wft_cpu_relax();
		if (!atomic_load_explicit(&t->on_cpu, memory_order_acquire))
			return true;
	} while (wft_now() < end);
	return false;
}

void wft_wait_off_cpu(struct weft_thread *t)
{
	/* acquire, all loads: as in switch_to (I2) */
	if (!atomic_load_explicit(&t->on_cpu, memory_order_acquire) || off_cpu_soon(t))
		return;
	wft_stat_inc_any(wft_worker_self(), oncpu_yields);
	while (atomic_load_explicit(&t->on_cpu, memory_order_acquire))
		sched_yield();
}

/* A context switched away from has been resumed, maybe on another worker
 * (migration): end the sanitizer's switch and finish the one that brought
 * us here. Context: the resumed context, on its (re-read) worker. */
static inline __attribute__((always_inline)) void resumed(void)
{
	struct wft_worker *w = wft_worker_self();

	if (w->current)
		wft_san_switch_end(w->current->san_fake_stack);
	else
		wft_san_switch_end(w->sched_fake_stack);
	finish_switch(w);
}

/* Switch from cur to the scheduler loop on the OS stack (nothing to run
 * here, or rule 2 below); done: cur has exited and never resumes. Returns
 * when cur is resumed, maybe on another worker. Context: cur on w. */
static void to_loop(struct wft_worker *w, struct weft_thread *cur, bool done)
{
	w->current = NULL;
	w->prev = cur;
	wft_san_switch_begin(done ? NULL : &cur->san_fake_stack, w->san_fiber, w->san_stack_bottom,
			     w->san_stack_size);
	if (done)
		wft_ctx_jump(&cur->ctx, &w->sched_ctx);
	wft_ctx_switch(&cur->ctx, &w->sched_ctx);
	resumed();
}

/* Rule 2: cur must not wait for next. Leave next in w->held and switch to
 * the scheduler loop, which dispatches it once it is off its CPU. Returns
 * when cur is resumed (never, if cur exited). Context: cur on w. */
static __attribute__((noinline)) void switch_via_loop(struct wft_worker *w, struct weft_thread *cur,
						      struct weft_thread *next)
{
	w->held = next;
	/* relaxed: cur's own state, set by itself */
	to_loop(w, cur, atomic_load_explicit(&cur->state, memory_order_relaxed) == WFT_T_DONE);
}

/* Dispatch next (prepared) from the context from_ctx (a thread's or the
 * scheduler's). */
static inline __attribute__((always_inline)) void switch_to(struct wft_worker *w, struct weft_thread *cur,
		      struct wft_ctx *from_ctx, struct weft_thread *next)
{
	struct wft_worker *last;

	/* I2. acquire: pairs with the release store in finish_switch, so
	 * next->ctx is completely saved before we load it ("Waiting for a
	 * switch": from a thread, spin only; from the loop, wait) */
	if (wft_unlikely(atomic_load_explicit(&next->on_cpu, memory_order_acquire))) {
		if (cur && !off_cpu_soon(next)) {
			switch_via_loop(w, cur, next);
			return;
		}
		wft_wait_off_cpu(next);
	}
	/* only a runnable thread is dispatched (a waker's or the spawn's
	 * RUNNABLE, or the yielder's own) and never the one switching away.
	 * relaxed: the queue that handed us next ordered its state */
	WFT_ASSERT(next != cur && w->prev == NULL &&
		   atomic_load_explicit(&next->state, memory_order_relaxed) == WFT_T_RUNNABLE);
	/* relaxed: read by mutex spinners as a hint */
	atomic_store_explicit(&next->on_cpu, 1, memory_order_relaxed);
	atomic_store_explicit(&next->state, WFT_T_RUNNING, memory_order_relaxed);
	/* relaxed: hint for spinners and wake placement */
	last = atomic_load_explicit(&next->worker, memory_order_relaxed);
	if (last != w) {
		if (last)
			wft_stat_inc(w, migrations);
		atomic_store_explicit(&next->worker, w, memory_order_relaxed);
	}
	wft_stat_inc(w, switches);
	w->current = next;
	w->prev = cur;
	if (WFT_ASAN || WFT_TSAN) {
		void **fake = cur ? (cur->state == WFT_T_DONE ? NULL : &cur->san_fake_stack)
				  : &w->sched_fake_stack;
		wft_san_switch_begin(fake, next->san_fiber, wft_stack_lo(next),
				     wft_stack_len(next));
	}
	/* relaxed: cur's own state, set by itself */
	if (cur && atomic_load_explicit(&cur->state, memory_order_relaxed) == WFT_T_DONE)
		wft_ctx_jump(from_ctx, &next->ctx);   /* cur finished */
	wft_ctx_switch(from_ctx, &next->ctx);
	resumed();
}

/* I5: how long a thread must sit in a busy worker's next slot before a
 * thief takes it. Go uses 3 us; a switch here costs ~10-50 ns, so a waker
 * that has not switched for 5 us is running a long stretch. */
#define NEXT_STEAL_DELAY_NS 5000

/* The steal candidate w last noted (nx_*) is still what v's slot holds,
 * and v has not switched since: v is running one thread all along. */
static inline bool nx_unchanged(struct wft_worker *w, struct wft_worker *v,
				struct weft_thread *t, uint64_t sw)
{
	return w->nx_victim == v && w->nx_thread == t && w->nx_switches == sw;
}

/* Note t in v's slot (v at switch count sw, seen at now) as w's steal
 * candidate: the one nx_unchanged compares against. */
static inline void nx_note(struct wft_worker *w, struct wft_worker *v, struct weft_thread *t,
			   uint64_t sw, weft_time_t now)
{
	w->nx_victim = v;
	w->nx_thread = t;
	w->nx_switches = sw;
	w->nx_seen = now;
}

#define switches_of wft_worker_switches

bool wft_worker_next_stranded(struct wft_worker *w, struct wft_worker *v)
{
	return wft_worker_next_look(w, v, false) == WFT_NX_CONFIRMED;
}

int wft_worker_next_look(struct wft_worker *w, struct wft_worker *v, bool may_note)
{
	/* relaxed: hints, re-validated by wft_worker_steal_next */
	uintptr_t val = atomic_load_explicit(&v->next, memory_order_relaxed);
	struct weft_thread *t = wft_next_untag(val);
	uint64_t sw;

	if (!t || (val & WFT_NEXT_PINNED))
		return WFT_NX_NONE;
	sw = switches_of(v);
	if (nx_unchanged(w, v, t, sw))
		return WFT_NX_CONFIRMED;
	if (may_note && (!w->nx_victim || w->nx_victim == v))
		nx_note(w, v, t, sw, wft_now());
	return WFT_NX_SEEN;
}

struct weft_thread *wft_worker_steal_next(struct wft_worker *w, struct wft_worker *v)
{
	/* relaxed: the value alone decides (pinned tag, identity); the CAS
	 * below acquires what the owner published with it */
	uintptr_t val = atomic_load_explicit(&v->next, memory_order_relaxed);
	struct weft_thread *t = wft_next_untag(val);
	uint64_t sw;
	weft_time_t now;

	if (!t || (val & WFT_NEXT_PINNED) || !wft_feat(STEAL))
		return NULL;
	sw = switches_of(v);
	now = wft_now();
	if (!nx_unchanged(w, v, t, sw)) {
		nx_note(w, v, t, sw, now);
		return NULL;
	}
	if (now - w->nx_seen < NEXT_STEAL_DELAY_NS)
		return NULL;
	w->nx_victim = NULL;
	/* acquire: pairs with the owner's release store or exchange of the
	 * slot (t's state and context are visible); claims t against the
	 * owner's exchange (I5). The thief publishes nothing through the
	 * slot, so no release. Failure: the owner took it, or the slot holds
	 * another value (including this TCB reused by a pinned thread). */
	if (!atomic_compare_exchange_strong_explicit(&v->next, &val, 0,
			memory_order_acquire, memory_order_relaxed))
		return NULL;
	wft_stat_inc(w, steals);
	wft_stat_inc(w, next_steals);
	return t;
}

/*
 * Exit the running thread cur straight into j, a thread this exit made
 * runnable (its joiner): the same outcome as delivering j into this
 * worker's next slot and picking it at once, minus the push and the pick
 * (a return, see "Direct switches": not counted in the streak of I4).
 * Only when that is where j would run: j may run here (unpinned or pinned
 * here), the next slot is free, and j last ran here or this worker has
 * nothing else (the sync wakeup rule of runtime/wake.c). Every
 * DIRECT_SIDE_EVERY-th direct switch does the pick's side work first.
 * Returns false without doing anything else otherwise; never returns
 * when it switched.
 * Context: cur, on w. j: state RUNNABLE, claimed by the caller (nobody
 * else may queue it).
 */
bool wft_worker_exit_to(struct wft_worker *w, struct weft_thread *cur, struct weft_thread *j)
{
	if (!wft_feat(NEXT_SLOT))
		return false;
	direct_tick(w);   /* may fill the next slot: checked below */
	if (wft_next_peek(w) || (j->pin >= 0 && j->pin != w->id))
		return false;
	/* relaxed: a placement hint (see wft_wake_target) */
	if (atomic_load_explicit(&j->worker, memory_order_relaxed) != w &&
	    (!wft_feat(SYNC_WAKE) || wft_worker_has_work(w)))
		return false;
	wft_stat_inc(w, next_slot);
	wft_stat_inc(w, wakes_local);
	/* relaxed: read on this worker only, by finish_switch after the
	 * switch (the joiner reads t's jstate, published with release) */
	atomic_store_explicit(&cur->state, WFT_T_DONE, memory_order_relaxed);
	switch_to(w, cur, &cur->ctx, j);
	wft_panic("exited thread resumed");
}

/*
 * Direct join (a thread that joins the thread at the head of its own
 * worker's private runqueue, typically the child it has just spawned):
 * take the child off the queue, and the caller then switches straight to
 * it, skipping the pick and the park commit (thread.c "Direct join"). The
 * same outcome as a pick would have (the child is what the pick returns
 * next, unless the public ring holds something: that waits one child
 * longer, as behind a function call), minus the pick (a
 * call, see "Direct switches"; every DIRECT_SIDE_EVERY-th direct switch
 * does the side work). Returns false and takes nothing when t is not the
 * head.
 * Race: only w's own OS thread removes from the private list (I1; thieves
 * only ask, through split_req, and the owner publishes), so once t is
 * found at the head no one else can run it; under NO_MAILBOX a remote
 * waker may append (writing the tail's link), hence the lock.
 * Context: a thread of w.
 */
bool wft_worker_take_head(struct wft_worker *w, struct weft_thread *t)
{
	struct wft_runq *q = &w->rq;
	bool ok = false;

	if (!wft_feat(NEXT_SLOT))
		return false;
	direct_tick(w);
	/* A lone child waits in the next slot (wft_worker_push_spawn): take
	 * it back with the pick's exchange (relaxed, as the pick's: we set
	 * the slot ourselves; a thief may have taken it, then the slot reads
	 * NULL and t runs there) */
	if (wft_next_peek(w) == t) {
		w->spawn_next = NULL;
		return wft_next_untag(atomic_exchange_explicit(&w->next, 0, memory_order_relaxed)) == t;
	}
	/* Another thread in the next slot runs first (the pick's order);
	 * skipping it would also leave t's exit no free slot to return
	 * through, and the joiner's wake would push it to the tail (I3) */
	if (wft_next_peek(w))
		return false;
	wft_rq_lock(w);
	if (q->phead == t) {
		wft_rq_priv_unlink_head(q, t);
		ok = true;
	}
	wft_rq_unlock(w);
	return ok;
}

/* Second half of a direct join: cur has parked (its state and its waker
 * are arranged), t was taken by wft_worker_take_head. Switch to t; if t
 * cannot get a stack now, prepare_slow() queues it again and cur parks
 * through the scheduler (t's exit wakes it as usual).
 * Context: cur on w. Returns when cur is woken, maybe on another worker. */
void wft_worker_park_to(struct wft_worker *w, struct weft_thread *cur, struct weft_thread *t)
{
	if (!prepare(w, t)) {
		wft_worker_schedule(w, WFT_SCHED_PARK);
		return;
	}
	switch_to(w, cur, &cur->ctx, t);
}

void wft_worker_schedule(struct wft_worker *w, int how)
{
	struct weft_thread *cur = w->current;
	struct weft_thread *next;

	if (how == WFT_SCHED_YIELD) {
		/* Behind every runnable thread of this worker, the ones still
		 * in its mailbox included: queued first, they came after the
		 * yielder (else a thread unparked from an OS thread would run
		 * only after the yielder's next turn) */
		if (wft_unlikely(!wft_mailbox_empty(&w->mailbox)))
			drain_mailbox(w);
		atomic_store_explicit(&cur->state, WFT_T_RUNNABLE, memory_order_relaxed);
		wft_runq_push_owner(w, cur);
	}
	next = pick(w);
	if (next == cur) {
		atomic_store_explicit(&cur->state, WFT_T_RUNNING, memory_order_relaxed);
		return;
	}
	/* The yielder now waits behind next, which may never block (a mutex
	 * waiter handed the lock, then running uncontended): it is surplus at
	 * once, as a thread woken onto a busy waker's queue is, and only a
	 * thief can reach it, once it is out of the private list (test
	 * wake/stranded_yielder: 300 ms behind a computation before, one
	 * steal after). A yielder alone on its worker picks itself and never
	 * gets here. */
	if (how == WFT_SCHED_YIELD && cur->pin < 0 && wft_rt.nworkers > 1)
		offer_yielder(w);
	if (next && prepare(w, next)) {
		switch_to(w, cur, &cur->ctx, next);
		return;
	}
	/* Nothing runnable: go to the scheduler loop on the OS stack. */
	to_loop(w, cur, how == WFT_SCHED_EXIT);
}

/*
 * Spawn order. A thread spawned by a thread of this worker goes to the head
 * of the private list: children run newest first (depth first, the order
 * of a Cilk deque's owner), while wakeups and yields go to the tail (FIFO).
 * Why: with FIFO spawns a recursive program (fib, quicksort) starts its
 * children breadth first, and every started child that blocks in a join
 * holds a stack: fib(30) then needs hundreds of thousands of stacks at once
 * and runs out of VMAs (vm.max_map_count). Newest-first keeps the started
 * set to about the recursion depth. Threads that were queued before keep
 * their order among themselves. The price (work-first, as in Cilk): a
 * thread that keeps spawning and joining runs ahead of them, on one
 * worker until it stops, as a thread that computes without blocking
 * would; other workers steal them.
 */
void wft_worker_push_spawn(struct wft_worker *w, struct weft_thread *t)
{
	/* A lone child (nothing else queued here) goes to the next slot: its
	 * spawner usually joins it soon and takes it back from there
	 * (wft_worker_take_head), but if the spawner computes on instead,
	 * an idle worker takes it from the slot (I5) within a tick, where in
	 * the private list it would wait for the spawner's next scheduling
	 * point (a thread spawned by a busy thread could start 300 ms late) */
	struct weft_thread *c = w->spawn_next;

	if (wft_unlikely(c != NULL)) {
		/* A second spawn: the lone child leaves the slot for the
		 * private list, so that children keep their newest-first order
		 * (see "Spawn order"); it sat there for one spawn, too short
		 * for a thief (I5). relaxed, as the pick's exchange: we wrote
		 * the value ourselves and a thief publishes nothing; NULL
		 * back: a thief took it */
		w->spawn_next = NULL;
		if (wft_next_peek(w) == c &&
		    wft_next_untag(atomic_exchange_explicit(&w->next, 0, memory_order_relaxed)) == c)
			wft_runq_push_front_owner(w, c);
	}
	if (t->pin < 0 && wft_feat(NEXT_SLOT) && wft_feat(STEAL) && !wft_next_peek(w) &&
	    wft_runq_size(w) == 0) {
		/* release: publishes t to a thief's acquire CAS (I5); a NULL
		 * slot is written by nobody else */
		atomic_store_explicit(&w->next, wft_next_tag(t), memory_order_release);
		w->spawn_next = t;
		wft_idle_strand_check(w);
		return;
	}
	wft_runq_push_front_owner(w, t);
	maybe_wake_idle(w, t->pin < 0, 2);
}

/*
 * A displaced wakee (I3). It was woken by the running thread, which has
 * just woken another into the next slot. Most such wakers block within
 * a few hundred ns: a pipeline stage takes an item (waking the stage
 * before it, blocked on a full queue), passes it on (waking the stage
 * after it) and waits for the next. Both wakees then run here, one after
 * the other, cache-warm. The surplus rule's kick (a waker that keeps
 * running, min 1) got an idle worker to steal the displaced one instead,
 * and every steal split the chain across workers, each hand-off over
 * the split a remote wake and, when the other side ran dry, a park and a
 * kick (docs/wake-path.md "Displaced wakees" has the measurements).
 *
 * So while workers idle and none spins, the private list is published
 * (its older half: the displaced thread itself when it is alone there,
 * as in wake_pick's publish) and the work is left to the looker: a
 * ticking idle worker's park re-check reads every ring and finds it
 * within a tick; the strand check, made after the publish so that its
 * RELIED CAS (when it makes one) orders the ring store before the look,
 * gets a deep or dozing worker going when nobody ticks. A waker that
 * keeps running delays the published work by up to one idle tick where
 * the kick cost a wake syscall; a thread left private waits for the
 * owner's next pick, as before. While a worker spins, nothing is
 * published, as the old rule did not kick then: a spinner would steal
 * the stage at once and split the chain. While no worker idles, nothing
 * either: one that goes idle later finds private work only, asks for it
 * (split_req) and is answered at our next pick. Both counts are relaxed
 * hints, as in maybe_wake_idle: a stale one costs parallelism for a
 * while, never the thread (it is queued here). Cost: a publish and the
 * strand check's load, O(1) in the number of workers.
 */
static __attribute__((noinline)) void offer_displaced(struct wft_worker *w, bool slot_movable)
{
	bool published = atomic_load_explicit(&wft_rt.nidle, memory_order_relaxed) > 0 &&
			 (atomic_load_explicit(&wft_rt.nspinning, memory_order_relaxed) == 0 ||
			  !wft_wake_chain_waker(w)) &&
			 wft_runq_publish_owner(w) > 0;

	/* for the published work, and for the thread in the slot (I5) */
	if (published || slot_movable)
		wft_idle_strand_check(w);
}

void wft_worker_push_local(struct wft_worker *w, struct weft_thread *t, bool next_slot)
{
	/* Read before the slot is set: from then on a thief may take t (I5),
	 * run it to its exit and its TCB be spawned again. */
	bool movable = t->pin < 0;

	/* RANDOMIZE (a debug switch): every other local wake, at random,
	 * goes to the tail instead, so tests cannot lean on next-slot order
	 * (victims are always tried in random order, idle.c try_steal) */
	if (wft_unlikely(wft_feat(RANDOMIZE)) && (wft_xorshift(&w->rng) & 1))
		next_slot = false;
	if (next_slot && wft_feat(NEXT_SLOT)) {
		struct weft_thread *old = wft_next_peek(w);
		bool steal = wft_feat(STEAL);

		if (!old) {
			/* release: publishes t to a thief's acquire CAS (I5); a
			 * NULL slot is written by nobody else */
			atomic_store_explicit(&w->next, wft_next_tag(t), memory_order_release);
		} else {
			/* release: as above; the old value may be taken
			 * meanwhile (then NULL comes back; a thief publishes
			 * nothing, so no acquire) */
			old = wft_next_untag(atomic_exchange_explicit(&w->next, wft_next_tag(t),
								      memory_order_release));
		}
		if (old && old->pin < 0 && steal) {
			/* I3: the displaced one goes to the tail; unpinned: it
			 * may be published (offer_displaced) */
			wft_runq_push_owner(w, old);
			offer_displaced(w, movable);
			return;
		}
		/* t may be stranded here if we keep running (I5), whichever
		 * path put it in, the displacing one included */
		if (movable && steal)
			wft_idle_strand_check(w);
		if (!old)
			return;
		/* I3: the displaced one goes to the tail (pinned, or STEAL
		 * off: its pin read here, before the push) */
		t = old;
		movable = t->pin < 0;
	}
	wft_runq_push_owner(w, t);
	maybe_wake_idle(w, movable, 1);
}

/* ---------------------------------------------------------------------- */
/* Worker threads */

static void *worker_main(void *arg)
{
	struct wft_worker *w = arg;
	char name[16];
	uint32_t stackless = 0;   /* picks in a row that found no stack (below) */

	wft_tls_worker = w;
	wft_segv_altstack();   /* the stack-overflow report's stack (segv.c) */
	wft_drain_worker_start(w);
	snprintf(name, sizeof(name), "weft-w%d", w->id);
	prctl(PR_SET_NAME, name);
	/* 1 ns timer slack: the futex timeouts of the idle loop are the
	 * runtime's timers (200 us precision target; the default is 50 us) */
	prctl(PR_SET_TIMERSLACK, 1UL);
	wft_os_policy_worker();   /* runtime/os_policy.c */
	if (wft_rt.pin) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(wft_rt.cpus[w->id], &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	w->san_fiber = wft_san_fiber_current();
	{
		pthread_attr_t a;
		void *lo;
		size_t sz;

		if (pthread_getattr_np(pthread_self(), &a) == 0) {
			pthread_attr_getstack(&a, &lo, &sz);
			w->san_stack_bottom = lo;
			w->san_stack_size = sz;
			pthread_attr_destroy(&a);
		}
	}
	wft_ctx_init_current(&w->sched_ctx);
	wft_uring_setup(w);
	/* Start barrier: weft_init() returns only after every worker has set
	 * up its ring and kick descriptors, so nothing the application does
	 * after weft_init() races with that setup (descriptor numbers it just
	 * closed being reused under it; wft_idle_kick_force() reading w->ring).
	 * release: publishes the setup to the initialising thread (acquire);
	 * seq_cst for the idle tick's ndeep pattern (idle.c someone_awake:
	 * nobody ticks before every worker has started). */
	atomic_fetch_add_explicit(&wft_rt.nready, 1, memory_order_seq_cst);
	wft_futex_wake(&wft_rt.nready, 1);

	/* acquire: the stop flag, re-read every round (shutdown's writes
	 * before it are seen here); the kick wakes a sleeper */
	for (;;) {
		struct weft_thread *t = w->held;

		if (wft_unlikely(t != NULL)) {
			/* prepared by the dispatch that left it here */
			w->held = NULL;
			switch_to(w, NULL, &w->sched_ctx, t);
			continue;
		}
		if (atomic_load_explicit(&wft_rt.stopping, memory_order_acquire))
			break;
		t = pick(w);
		if (t) {
			wft_idle_found_work(w);
			if (prepare(w, t)) {
				stackless = 0;
				switch_to(w, NULL, &w->sched_ctx, t);
			} else if (++stackless > wft_runq_size(w)) {
				/* Out of memory for stacks, and a whole round of
				 * the queue found no thread that could run: back
				 * off 1 ms, then retry. A thread that cannot get a
				 * stack went to the queue's tail, so the threads
				 * that have theirs run first; before, every pick
				 * of a stackless thread slept 1 ms, and the others
				 * ran at one per millisecond (test
				 * stack/wait_does_not_slow_others). */
				uint32_t zero = 0;
				_Atomic uint32_t dummy = 0;

				stackless = 0;
				wft_futex_wait(&dummy, zero, wft_now() + 1000000);
			}
			continue;
		}
		wft_idle_run(w);
	}
	wft_uring_teardown(w);
	wft_tcb_cache_flush(w);   /* first: it returns stacks to the stack cache */
	wft_stack_cache_fini(w);
	wft_drain_worker_stop(w);
	wft_tls_worker = NULL;
	return NULL;
}

static struct wft_worker *worker_new(int id)
{
	struct wft_worker *w;

	if (posix_memalign((void **)&w, WFT_CACHELINE, sizeof(*w)))
		return NULL;
	memset(w, 0, sizeof(*w));
	w->id = id;
	/* splitmix64 of seed + id: distinct, non-zero (xorshift needs it) */
	{
		uint64_t z = wft_rt.seed + 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		w->rng = z ? z : 1;
	}
	atomic_flag_clear(&w->rqlock);
	wft_runq_init_unsafe(&w->rq);
	atomic_init(&w->mailbox.head, NULL);
	atomic_init(&w->sleep, WFT_W_AWAKE);
	wft_timer_heap_init_unsafe(&w->timers);
	if (wft_stack_cache_init(w)) {
		free(w);
		return NULL;
	}
	return w;
}

/* Wait until n workers passed the start barrier in worker_main. acquire:
 * pairs with their release increments; the value is re-read around the
 * futex, so an increment before we sleep is not lost (the futex compares
 * it). */
static void wait_ready(uint32_t n)
{
	for (;;) {
		uint32_t r = atomic_load_explicit(&wft_rt.nready, memory_order_acquire);

		if (r >= n)
			break;
		wft_futex_wait(&wft_rt.nready, r, wft_now() + 100000000ull);
	}
}

int wft_worker_start_all(void)
{
	int n = wft_rt.nworkers;

	wft_rt.workers = calloc((size_t)n, sizeof(*wft_rt.workers));
	if (!wft_rt.workers)
		return EAGAIN;
	atomic_store_explicit(&wft_rt.nready, 0, memory_order_relaxed); /* no worker runs yet */
	for (int i = 0; i < n; i++) {
		wft_rt.workers[i] = worker_new(i);
		if (!wft_rt.workers[i])
			goto fail;
	}
	for (int i = 0; i < n; i++) {
		pthread_attr_t a;
		int rc;

		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, 1 << 20);
		rc = pthread_create(&wft_rt.workers[i]->os, &a, worker_main, wft_rt.workers[i]);
		pthread_attr_destroy(&a);
		if (rc) {
			/* stop the ones already started, after they finished their
			 * setup (the kick reads w->ring, which setup writes) */
			wait_ready((uint32_t)i);
			atomic_store_explicit(&wft_rt.stopping, 1, memory_order_release);
			for (int j = 0; j < i; j++) {
				wft_idle_kick_force(wft_rt.workers[j]);
				pthread_join(wft_rt.workers[j]->os, NULL);
			}
			goto fail;
		}
	}
	wait_ready((uint32_t)n);
	return 0;
fail:
	for (int i = 0; i < n; i++) {
		if (wft_rt.workers[i]) {
			wft_timer_heap_fini_unsafe(&wft_rt.workers[i]->timers);
			free(wft_rt.workers[i]->stack_cache);
			free(wft_rt.workers[i]);
		}
	}
	free(wft_rt.workers);
	wft_rt.workers = NULL;
	return EAGAIN;
}

void wft_worker_stop_all(void)
{
	/* release: pairs with the acquire load in worker_main's loop */
	atomic_store_explicit(&wft_rt.stopping, 1, memory_order_release);
	for (int i = 0; i < wft_rt.nworkers; i++)
		wft_idle_kick_force(wft_rt.workers[i]);
	for (int i = 0; i < wft_rt.nworkers; i++)
		pthread_join(wft_rt.workers[i]->os, NULL);
}

void wft_worker_free_all_unsafe(void)
{
	for (int i = 0; i < wft_rt.nworkers; i++) {
		wft_stats_retire(wft_rt.workers[i]);
		wft_timer_heap_fini_unsafe(&wft_rt.workers[i]->timers);
		free(wft_rt.workers[i]);
	}
	free(wft_rt.workers);
	wft_rt.workers = NULL;
}
