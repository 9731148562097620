/*
 * runtime/wake.c - the wake path, weft's try_to_wake_up, and wake
 * placement, weft's select_task_rq.
 *
 * What it owns: the PARKED -> RUNNABLE transition, the choice of where a
 * woken thread runs (and of a mutex hand-off's wakee), each thread's
 * record as a waker (wakee flips), the push into another worker's mailbox
 * and the decision whom to kick (the kick and the kick chain themselves
 * are runtime/idle.c's, next to the park they pair with).
 * docs/wake-path.md has the argument and the measurements; the rules are
 * stated here next to their code.
 *
 * wake(t):
 *   1. CAS t->state PARKED -> RUNNABLE. A waker (unpark), a timeout (timer
 *      fn) and a cancel may race here: exactly one CAS succeeds, and only
 *      the winner continues, so a thread is queued at most once
 *      (mailbox.c I1). Linearisation point: the successful CAS.
 *   2. The winner writes t->wake_reason (read by the wakee after it resumes;
 *      the queue hand-off publishes it: release push / acquire take).
 *   3. Placement: wft_wake_place() (below).
 *   4. Target is the waker's own worker -> next slot (ping-pong locality);
 *      otherwise the target's mailbox, with a kick only if the target
 *      announced idle (runtime/idle.c). A waker never takes a lock of the
 *      target (except with NO_MAILBOX, the A/B baseline).
 *
 * The thread may still be switching out on its old worker when it is
 * queued; the worker that picks it waits for on_cpu == 0 (worker.c I2).
 *
 * Placement (wft_wake_place), first rule that applies:
 *   R0 pinned: the pinned worker. DRAIN: a thread of a draining worker
 *      moves to an active one (runtime/drain.c).
 *   R1 last worker awake (running or looking for work), or the waker's
 *      own: the last worker. Its caches hold the thread's lines and no
 *      syscall is needed (the kernel's prev_cpu / wake_affine_idle).
 *   The last worker is parked: running the thread there costs a kick (a
 *   futex or io_uring syscall, then 5-50 us until the worker runs).
 *   R2 WAKE_AFFINE, a waker on an active worker that is not wide (R2'):
 *      a weft thread, or the worker itself reaping an I/O completion or
 *      a timer (side work: no waker thread, never wide). The waker's
 *      worker, which is awake by definition
 *      (wake_affine). If the waker keeps running, the wakee is surplus
 *      there and the surplus rule gets one idle worker to steal it
 *      (worker.c maybe_wake_idle): one kick per burst, not one per wakee.
 *   R2' WAKE_WIDE (seed 002, wake_wide): a waker that switches between
 *      many wakees (a dispatcher) is not pulled toward, or it would pile
 *      its wakees onto its own worker and run them one after another.
 *      With master = the larger and slave = the smaller of the waker's and
 *      the wakee's flips, wide iff master >= F and master >= slave * F,
 *      F = the waker's domain size (at least 2). The kernel also asks
 *      slave >= F, which never holds for a single dispatcher whose servers
 *      each wake only it (slave 0): in the kernel wake_affine's load
 *      comparison then keeps the dispatcher's CPU from filling up; weft
 *      has no preemption and no load comparison, so the rule spreads a
 *      1:N waker itself (the seed's WAKE_WIDE_IDLE went the same way).
 *   R3 a worker of the last worker's domain (then of the waker's) that is
 *      spinning for work: it sees the mailbox at its next poll, no kick
 *      (select_idle_sibling). One hint word per domain (topology.h).
 *   R4 a batch (wake-queue flush, burst != NULL): the one parked worker
 *      this batch already chose, if it is in the same domain; the first
 *      such wakee chooses it. So a post_n or broadcast over many parked
 *      workers' threads kicks one worker, which finds surplus and chains
 *      the next (Go's wakep: idle workers join by demand, idle.c).
 *   R5 the last worker, kicked.
 *   Cost per wake, whatever the number of workers: t's waker line (already
 *   held by the claim CAS), last->sleep, the waker's own TCB, the wakee's
 *   flips, at most two spinner hints: O(1) remote lines, no scan, no
 *   lock, and at most one kick (none in R1-R4).
 *
 * Wide wakers: wakee flips are the kernel's record_wakee, with a memory of
 * two. Each wake by a weft thread counts a flip when the wakee is neither
 * of the last two it woke, once it has woken two (the kernel's counts one
 * whenever the wakee is not the last): a thread that alternates between
 * two partners, a pipeline stage waking its successor and then its
 * predecessor, makes no flips, so its wakes are wide only against a
 * wakee that flips itself. At one flip per change every middle stage of
 * examples/pipeline looked wide against the source and the sink (flips
 * 0) and the chain spread over both workers (figures: docs/wake-path.md
 * "Wide wakers"). The cost: a dispatcher over exactly two servers is
 * never wide either (history cannot tell it from a pipeline stage; its
 * wakes are pulled, and an idle worker steals the surplus). One over
 * three or more flips at nearly every wake, as before (at every wake in
 * strict rotation; about (N - 2) / N of them in random order).
 * The count halves every FLIP_DECAY_NS (per period elapsed). Reading the clock
 * costs ~20 ns, so the waker looks at it every FLIP_CLOCK_EVERY wakes.
 */
#include "runtime/wft.h"
#include "runtime/topology.h"

/* 10 ms: the kernel halves flips every second; a light-thread wake costs
 * ~100x less than a task wake, so the same relationships show ~100x more
 * wakes per second, and a period 100x shorter keeps the counts comparable
 * and lets a thread that stopped dispatching turn affine again quickly. */
#define FLIP_DECAY_NS 10000000ull
#define FLIP_CLOCK_EVERY 32

/* relaxed: flips are read by wakers as a hint; only the owner writes */
static inline uint32_t flips_of(struct weft_thread *t)
{
	return atomic_load_explicit(&t->wakee_flips, memory_order_relaxed);
}

/* The kernel's record_wakee. Context: waker is the calling thread. */
static void record_wakee(struct weft_thread *waker, struct weft_thread *wakee)
{
	uint32_t f = flips_of(waker);

	if (wft_unlikely(++waker->flip_wakes >= FLIP_CLOCK_EVERY)) {
		weft_time_t now = wft_now();
		uint64_t periods = (now - waker->flip_decay) / FLIP_DECAY_NS;

		waker->flip_wakes = 0;
		if (!waker->flip_decay) {
			waker->flip_decay = now;   /* first look: start the period */
		} else if (periods) {
			f = periods >= 32 ? 0 : f >> periods;
			waker->flip_decay = now;
		}
	}
	if (waker->last_wakee != wakee) {
		/* a third partner: not the last two, and two were seen */
		if (waker->prev_wakee != wakee && waker->prev_wakee != NULL)
			f++;
		waker->prev_wakee = waker->last_wakee;
		waker->last_wakee = wakee;
	}
	atomic_store_explicit(&waker->wakee_flips, f, memory_order_relaxed);
}

bool wft_wake_chain_waker(struct wft_worker *self)
{
	struct weft_thread *cur = self->current;

	return wft_feat(WAKE_WIDE) && cur && !self->in_side_work && flips_of(cur) == 0;
}

/* R2' spreads a wide waker's wakees only where spreading can use a CPU
 * that would idle otherwise. With no more workers than CPUs a parked
 * worker is an idle CPU (the kernel's case: wake_wide then finds an idle
 * sibling). Oversubscribed, fewer workers running than CPUs says the
 * same; with as many running as there are CPUs, kicking a parked worker
 * only adds an OS context switch on a busy CPU, and the wakee is better
 * run by the waker's worker (examples/dispatcher oversubscribed ran
 * slower, with three times the kicks, under the unconditional rule:
 * docs/design.md "Measured alternatives"). relaxed nidle: a hint, one
 * read-mostly line per wide wake. */
static inline bool idle_cpu_likely(void)
{
	int n = wft_rt.nworkers;

	return n <= wft_rt.ncpu ||
	       n - atomic_load_explicit(&wft_rt.nidle, memory_order_relaxed) < wft_rt.ncpu;
}

/* R2': wake_wide. */
static bool wake_wide(struct weft_thread *waker, struct weft_thread *wakee, struct wft_worker *self)
{
	uint32_t master = flips_of(waker), slave = flips_of(wakee);
	uint32_t factor = (uint32_t)wft_topo_dom_size(wft_topo.dom_of[self->id]);

	if (factor < 2)
		factor = 2;
	if (master < slave) {
		uint32_t x = master;

		master = slave;
		slave = x;
	}
	return master >= factor && (uint64_t)master >= (uint64_t)slave * factor;
}

/* R3: a worker spinning for work in domain dom, or NULL. relaxed: a hint
 * (topology.h); a worker that stopped spinning meanwhile gets the mailbox
 * push's normal kick check, so a stale hint costs one kick at most. */
static struct wft_worker *spinner_in(int dom)
{
	int id = atomic_load_explicit(&wft_topo.spinner[dom].id, memory_order_relaxed);

	return id > 0 && id <= wft_rt.nworkers ? wft_rt.workers[id - 1] : NULL;
}

/* R0's DRAIN part: a thread of a draining worker (one of the ndrain
 * highest ids, as in wft_worker_draining) moves to an active one. */
static struct wft_worker *drain_redirect(struct wft_worker *last, struct wft_worker *self)
{
	/* relaxed: a hint, read once here */
	int active = wft_rt.nworkers - atomic_load_explicit(&wft_rt.ndrain, memory_order_relaxed);

	if (last->id < active)
		return last;
	wft_stat_inc_any(self, drain_moves);
	return wft_rt.workers[last->id % active];
}

struct wft_worker *wft_wake_place(struct weft_thread *t, struct wft_worker *self,
				  struct wft_wake_burst *burst)
{
	/* the waking thread: not the one a completion or a timer is reaped
	 * under (worker.c side work), and none from an OS thread */
	struct weft_thread *waker = self && !self->in_side_work ? self->current : NULL;
	struct wft_worker *last, *s;
	bool wide = false;
	int dom;

	if (waker && waker != t && wft_feat(WAKE_WIDE))
		record_wakee(waker, t);
	if (t->pin >= 0)
		return wft_rt.workers[t->pin];
	/* relaxed: a placement hint */
	last = atomic_load_explicit(&t->worker, memory_order_relaxed);
	if (!last)
		return self ? self : wft_rt.workers[0];
	if (WFT_DRAIN_ON())
		last = drain_redirect(last, self);
	/* both switches off: always the last worker */
	if (!wft_feat(WAKE_AFFINE) && !wft_feat(WAKE_WIDE))
		return last;
	if (last == self || wft_worker_awake(last))
		return last;                                    /* R1 */
	if (waker && wft_feat(WAKE_WIDE))
		wide = wake_wide(waker, t, self) && idle_cpu_likely();
	if (wide)
		wft_stat_inc(self, place_wide);                 /* R2' */
	else if (self && wft_feat(WAKE_AFFINE) && !wft_worker_draining(self)) {
		wft_stat_inc(self, place_affine);
		return self;                                    /* R2 */
	}
	dom = wft_topo.dom_of[last->id];
	s = spinner_in(dom);
	if (!s && self && wft_topo.dom_of[self->id] != dom)
		s = spinner_in(wft_topo.dom_of[self->id]);
	if (s && s != self && !wft_worker_draining(s)) {
		wft_stat_inc_any(self, place_awake);
		return s;                                       /* R3 */
	}
	if (burst) {
		if (!burst->parked)
			burst->parked = last;
		else if (burst->parked != last && wft_topo.dom_of[burst->parked->id] == dom) {
			wft_stat_inc_any(self, place_awake);
			return burst->parked;                   /* R4 */
		}
	}
	return last;                                            /* R5 */
}

/* ---------------------------------------------------------------------- */
/* Push and kick: a woken thread into another worker's mailbox (or, with
 * NO_MAILBOX, its locked runqueue), and the kick decision. The kick itself
 * and the kick chain are the idle protocol's (runtime/idle.c "Park",
 * "Kick chain"); the owner's local push is worker.c's. */

/* Sleeping targets of one batch that the waker kicks itself, the head
 * included; the others are left to the kick chain (idle.c). Two: a batch
 * over two workers (the common small machine) wakes both at once, as
 * before the chain; sixteen targets still cost the waker two syscalls,
 * not sixteen. */
#define KICK_BURST_DIRECT 2

/* NO_MAILBOX: the pre-2011 kernel, lock the target's queue and insert.
 * The caller kicks (or defers the kick of) the target afterwards. */
static void push_locked(struct wft_worker *target, struct weft_thread *first,
			struct weft_thread *last, unsigned n)
{
	wft_stat_add_any(wft_worker_self(), wakes_locked, n);
	wft_runq_push_locked_remote(target, first, last, n);
	/* Surplus (runtime/idle.c): the target cannot notice work inserted
	 * behind its back as it does when it drains a mailbox, so if workers
	 * sleep, ask it to publish at its next pick (which leaves the work to
	 * their tick or the strand check when there is surplus). relaxed: a
	 * hint, like a thief's request. */
	if (atomic_load_explicit(&wft_rt.nidle, memory_order_relaxed) > 0)
		atomic_store_explicit(&target->rq.split_req, 1, memory_order_relaxed);
	/* seq_cst fence: StoreLoad between the insert and reading target->sleep
	 * in the kick (the lock's release does not order a later load); an
	 * idle worker's park re-check reads npriv after its own fence */
	atomic_thread_fence(memory_order_seq_cst);
}

/* Put first..last (n threads) into target's mailbox, or with NO_MAILBOX
 * its locked runqueue. Returns whether target may need a kick: false when
 * the mailbox already held mail (its kick, if one was needed, was made
 * by whoever found it empty: mailbox.c). */
static inline bool deliver(struct wft_worker *target, struct weft_thread *first,
			   struct weft_thread *last, unsigned n)
{
	if (!wft_feat(MAILBOX)) {
		push_locked(target, first, last, n);
		return true;
	}
	wft_stat_add_any(wft_worker_self(), wakes_remote, n);
	return wft_mailbox_push_chain(&target->mailbox, first, last, n);
}

/* Mail for an awake worker may sit there while it runs one thread for a
 * long time; an idle worker rescues it (idle.c "Stranded mail"), but only
 * a worker that ticks looks. If every other worker sleeps deep (they
 * parked while all were idle, and this worker woke later), get one going:
 * the strand check of the next slot, for the mailbox. Only for threads
 * that can move. */
static inline void mail_on_awake(bool movable)
{
	if (movable && wft_feat(STEAL))
		wft_idle_strand_check(wft_worker_self());
}

void wft_wake_push_burst(struct wft_worker *target, struct weft_thread *first,
				  struct weft_thread *last, unsigned n, struct wft_wake_burst *burst)
{
	/* Kick only when the mailbox was empty (mailbox.c; with NO_MAILBOX
	 * always). The batch's first such target is its head, the others go
	 * to the kick chain if they sleep (seq_cst load: the Park pattern's
	 * load half, as in the kick; AWAKE there means the target's re-check
	 * will see this mail). The chain does not depend on the mailbox: the
	 * NO_MAILBOX A/B changes how the threads get in, not who is kicked.
	 * first->pin is read before the push: once pushed, first may run,
	 * exit and its TCB be spawned again (nothing is read after). */
	bool movable = first->pin < 0;

	if (!deliver(target, first, last, n))
		return;
	if (!burst->head) {
		burst->head = target;
		burst->head_stealable = movable;
		return;
	}
	switch (atomic_load_explicit(&target->sleep, memory_order_seq_cst)) {
	case WFT_W_SLEEPING:
		/* the first KICK_BURST_DIRECT - 1 besides the head are kicked
		 * at once: a chain step costs a wake latency, which a few
		 * targets would wait for longer than the waker's syscalls */
		if (burst->ndirect < KICK_BURST_DIRECT - 1) {
			burst->ndirect++;
			wft_idle_kick(target);
		} else {
			wft_idle_kick_defer(target);
		}
		break;
	case WFT_W_AWAKE:
		mail_on_awake(movable);
		break;
	}
}

void wft_wake_push(struct wft_worker *target, struct weft_thread *first,
			    struct weft_thread *last, unsigned n)
{
	/* read before the push (see wft_wake_push_burst) */
	bool movable = first->pin < 0;

	if (!deliver(target, first, last, n))
		return;
	if (wft_idle_kick_r(target) == WFT_KICK_AWAKE)
		mail_on_awake(movable);
}

void wft_wake_burst_end(struct wft_wake_burst *burst)
{
	struct wft_worker *self = wft_worker_self();

	if (burst->head && wft_idle_kick_burst(self, burst->head) == WFT_KICK_AWAKE &&
	    burst->head_stealable && wft_feat(STEAL))
		wft_idle_strand_check(self);   /* as mail_on_awake above */
	burst->head = NULL;
	burst->ndirect = 0;
}

bool wft_wake_claim(struct weft_thread *t, int reason)
{
	int expected = WFT_T_PARKED;

	/* seq_cst: the load half of the Park protocol's StoreLoad pair when
	 * called after weft_unpark's token xchg (runtime/thread.c); acq_rel
	 * would do for the race between wakers themselves */
	if (!atomic_compare_exchange_strong_explicit(&t->state, &expected, WFT_T_RUNNABLE,
			memory_order_seq_cst, memory_order_relaxed))
		return false;
	t->wake_reason = reason & ~WFT_WAKE_F_SYNC;
	return true;
}

void wft_wake_deliver(struct weft_thread *t, int flags)
{
	struct wft_worker *self = wft_worker_self(), *target;

	/* Sync wakeup (the kernel's WF_SYNC with nr_running == 1, Go's runnext):
	 * the waker is about to block and its worker has nothing else to run,
	 * so the wakee takes the waker's place at once. Gated on an empty worker
	 * because nothing preempts the waker, and a thief takes a thread from
	 * the next slot only after it has sat there a while (worker.c I5). */
	if ((flags & WFT_WAKE_F_SYNC) && self && t->pin < 0 && wft_feat(SYNC_WAKE) &&
	    !wft_worker_has_work(self)) {
		target = self;
		if (self->current && self->current != t && !self->in_side_work && wft_feat(WAKE_WIDE))
			record_wakee(self->current, t);   /* a wake all the same */
	} else
		target = wft_wake_target(t, self);
	if (target == self) {
		wft_stat_inc(self, wakes_local);
		wft_worker_push_local(self, t, true);
	} else {
		wft_wake_push(target, t, t, 1);
	}
}

/*
 * Hand-off (runtime/waiter.c wft_waiter_wake_yield): a mutex unlocker that
 * gave the lock to a parked waiter runs it next on its own worker and
 * yields to it. Not from an OS thread; not with SYNC_WAKE off; not without
 * the next slot (plain FIFO: the wakee would queue at the tail, and the
 * push would kick an idle worker to steal it); not on a
 * draining worker (DRAIN sends threads away from it). A wakee pinned
 * elsewhere goes to its own worker (R0).
 */
bool wft_wake_handoff_ok(void)
{
	struct wft_worker *w = wft_worker_self();

	return w && w->current && wft_feat(SYNC_WAKE) && wft_feat(NEXT_SLOT) &&
	       !wft_worker_draining(w);
}

bool wft_wake_handoff(struct weft_thread *t)
{
	struct wft_worker *w = wft_worker_self();

	if (t->pin >= 0 && t->pin != w->id) {
		wft_wake_deliver(t, 0);
		return false;
	}
	wft_stat_inc(w, wakes_local);
	wft_worker_push_local(w, t, true);
	return true;
}

int wft_wake(struct weft_thread *t, int reason)
{
	if (!wft_wake_claim(t, reason))
		return 0;
	wft_wake_deliver(t, reason & WFT_WAKE_F_SYNC);
	return 1;
}
