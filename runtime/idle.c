/*
 * runtime/idle.c - what a worker does when it has nothing to run: steal,
 * spin briefly, then park in the kernel without losing a wakeup.
 *
 * What it owns: w->sleep (the futex word), the global idle mask and the
 * spinning/idle/kicked counts, each worker's published park deadline
 * (w->park_until), the kick, the kick chain and the kick gate (below).
 *
 * States of w->sleep (bit by bit it is a small enum):
 *   AWAKE    - running or looking for work; wakers need not do anything.
 *   SLEEPING - announced idle: the worker has re-checked every source and
 *              will sleep (or is sleeping) in futex_wait / its io_uring.
 *              A waker that adds work for it must kick.
 *   KICKED   - a waker won SLEEPING -> KICKED and is making (or made) the
 *              one wake syscall. Later wakers do nothing. The worker stores
 *              AWAKE when it wakes.
 *
 * Order of an idle round (wft_idle_run):
 *   1. steal from a random victim (half of its queue, from its public ring; runq.c);
 *   2. spin: poll mailbox, victims, the io_uring and timers for IDLE_SPIN_NS, if fewer
 *      than spinners_max() workers are already spinning (Go's rule:
 *      spinning workers cost CPU, a few suffice to pick up new work);
 *   3. park (below).
 *
 * Park (the lost-wakeup argument):
 *
 *   idle worker w                          waker (mailbox push to w)
 *   ------------------------------------   ------------------------------------
 *   xchg w->sleep = SLEEPING   (seq_cst)    CAS mailbox head     (seq_cst)
 *   load mailbox head          (seq_cst)    load w->sleep        (seq_cst)
 *   empty? -> futex_wait(sleep, SLEEPING)   SLEEPING? -> CAS to KICKED, futex_wake
 *
 * Either the worker's load sees the pushed thread, or the waker's load sees
 * SLEEPING, because both sides store then load with seq_cst operations: in
 * the single total order of seq_cst operations one of the two stores comes
 * first, and the other side's later load observes it. If the waker sees
 * SLEEPING, its futex_wake either finds the worker asleep or makes the
 * worker's futex_wait return at once (the word is no longer SLEEPING), so
 * the wake cannot fall between the re-check and the sleep. The same pattern
 * covers timers (the worker sleeps with the nearest deadline as timeout,
 * read after the announcement; only the owner arms timers on its heap while
 * awake, so no timer is added behind its back) and io_uring (the ring wait
 * is the sleep, and a kick reaches it through wft_uring_kick).
 * Interleavings considered: push before the announcement (re-check sees
 * it); push between announcement and re-check (both may see each other:
 * the worker does not sleep and the kick is a harmless extra syscall);
 * push after the re-check (waker sees SLEEPING and kicks); two pushers (one
 * wins SLEEPING -> KICKED, at most one syscall); a kick while the worker
 * is already waking from a timeout (the worker stores AWAKE; the kick is
 * spurious, it costs one syscall and nothing else).
 *
 * Surplus (work sitting on a busy worker while others sleep). The owner
 * pushes to its private runqueue with no fence (a fence per push would
 * double the cost of a yield), so an idle worker's re-check may miss work
 * pushed concurrently into a private list. That is not a lost wakeup - the
 * thread is queued and its worker will run it - but lost parallelism. It is
 * bounded: the owner checks for surplus (runtime/worker.c, have_surplus_n)
 * when it pushes a spawned or woken thread, drains its mailbox, or finds a
 * thief's split_req at a pick (a NO_MAILBOX remote insert sets split_req
 * when workers sleep); then, if some worker is idle and none is spinning,
 * wft_idle_wake_one() publishes half of the private queue and kicks one
 * idle worker. An idle worker that finds only private work on a victim
 * also sets the victim's split_req; the owner answers at its next pick
 * with surplus by publishing and running the strand check, not a kick:
 * the asker ticks (its park re-check reads every ring) or the check gets
 * a deep or dozing worker going. So the delay is at most until the
 * owner's next scheduling point with surplus (a lone spawned child is not
 * surplus: see worker.c), plus a tick, or DOZE_NS in the races that
 * "Idle tick" leaves to the dozers' timeout (an answer made between the
 * asker's request and its park). A local wakee displaced from the next
 * slot is published instead of kicked for (worker.c offer_displaced):
 * while a worker idles and none spins it waits at most as a next-slot
 * thread does, for the looker's tick or a strand-check wake (DOZE_NS in
 * the same races). With a spinner and a chain waker it stays private
 * and waits for the owner's next pick, as it did before.
 */
#include "runtime/wft.h"
#include "runtime/topology.h"
#include "runtime/uring.h"

#include <time.h>

/* Spin budget before parking: a futex sleep + wake round trip costs
 * ~5-10 us here; spinning up to 20 us catches the wakeups of a ping-pong
 * workload without a syscall while costing < 2 round trips of CPU. */
#define IDLE_SPIN_NS 20000

/* Timer precision: a worker whose next timer is due sleeps in the kernel
 * only until TIMER_EARLY_NS before it, then polls (its scheduling loop
 * returns here and finds the timer due). The kernel's own wakeup from a
 * timed sleep can arrive tens of us late on a VM (weft-micro's timer
 * bench; docs/design.md "Measured alternatives"); the early wake hides
 * that latency for at most 50 us of polling per timer expiry, and an
 * idle runtime with no timers still sleeps for good. */
#define TIMER_EARLY_NS 50000
/* Contended CPUs. Spinning for work only pays when the worker's CPU is
 * otherwise free: on a machine with more runnable OS threads than CPUs (a
 * poster thread outside the runtime, a load generator, other processes),
 * the spinner takes CPU time from whoever would produce the work, and the
 * kernel shares the CPU fairly between them (sembench -o 3, a plain OS
 * thread posting to 2 workers on 2 CPUs, ran much faster with the spin
 * off: docs/design.md "Measured alternatives"). So every
 * SPIN_SAMPLE_EVERY-th spin phase measures how much of its wall time the
 * worker was really on its CPU (CLOCK_THREAD_CPUTIME_ID at both ends, two
 * ~0.2 us syscalls against a spin of up to 20 us); if it lost more than a
 * quarter (and over SPIN_LOST_MIN_NS), the kernel ran someone else on this
 * CPU while we spun, and the worker does not spin for SPIN_BACKOFF_NS;
 * contended again within one back-off's length of its end, it backs off
 * twice as long (up to SPIN_BACKOFF_MAX_NS); later, it starts over at
 * SPIN_BACKOFF_NS. Quiet samples do not shorten a back-off: a 20 us phase
 * fits inside one kernel time slice, so even on CPUs busy all the time
 * most sampled phases are quiet and only some see a preemption;
 * shortening on a quiet sample (tried: halving, and halving after four
 * quiet ones in a row) kept the back-off short and renewed every few
 * samples. When the contention ends,
 * spinning resumes at the end of the current back-off, at most
 * SPIN_BACKOFF_MAX_NS later.
 * The back-off is the runtime's, not the sampling worker's: the CPUs are
 * shared by all workers, so when one finds them contended, none should
 * spin. Per worker, oversubscribed (16 workers on 2 CPUs), each worker
 * had to find the contention for itself while the others took the
 * spinning slot in turn, and a pinned sembench at 16 workers spent a
 * large share of its time in the spin's PAUSE loop (docs/design.md
 * "Measured alternatives"). A sample whose
 * phase began before the back-off in force was set is ignored: it
 * measured what another worker already judged. Cost: one shared line,
 * read by every idle round and written only by a contended sample.
 * Rejected: counting involuntary context switches (getrusage): a worker
 * that kicks a parked peer is often preempted by it on its own CPU (the
 * kernel's wakeup preemption), so cross-worker ping-pong (weft-micro
 * pingpong_idle) backed off and its round trip about doubled. */
#define SPIN_SAMPLE_EVERY 4
#define SPIN_LOST_MIN_NS 5000
#define SPIN_BACKOFF_NS 10000000
#define SPIN_BACKOFF_MAX_NS 320000000

/* How many workers may spin for work at once: half of the workers (Go's
 * rule: spinners cost CPU, a few find new work), but no more than half of
 * the CPUs the process may use. Oversubscribed (64 workers on 2 CPUs),
 * 32 spinners would take the CPUs from the workers that have work and
 * from the wakers that make it; one spinner per two CPUs still picks up
 * a burst, and the ones it finds chain the next (found_work). */
static int spinners_max(void)
{
	int n = wft_rt.nworkers < wft_rt.ncpu ? wft_rt.nworkers : wft_rt.ncpu;

	return n / 2 > 1 ? n / 2 : 1;
}

/* Steal from the victims' public rings, then (I5 of runtime/worker.c)
 * from a busy victim's next slot. Victims of the thief's own LLC domain
 * come first (runtime/topology.c), each group in a random rotation; at
 * most STEAL_TRIES victims a call, so that a call costs O(1) remote lines
 * whatever the number of workers (64 workers spinning on 2 CPUs read 63
 * runqueue lines per poll otherwise: 120 M steal attempts in a 3 s
 * sembench). The spin loop calls it again and again, and the rotation
 * covers every victim within a few calls; the park re-check looks at all
 * of them once (below) and leaves the one it saw work on as w->steal_hint,
 * tried first. */
#define STEAL_TRIES 8

static struct weft_thread *steal_from(struct wft_worker *w, struct wft_worker *v)
{
	struct weft_thread *t;

	wft_stat_inc(w, steal_attempts);
	t = wft_runq_steal(w, v);
	if (!t)
		t = wft_worker_steal_next(w, v);
	return t;
}

static struct weft_thread *try_steal(struct wft_worker *w)
{
	int n = wft_rt.nworkers, dom, dn, tries = STEAL_TRIES;
	const int *mem;
	unsigned r;
	struct weft_thread *t;

	if (n < 2 || !wft_feat(STEAL) || wft_worker_draining(w))
		return NULL;
	if (w->steal_hint) {
		struct wft_worker *v = w->steal_hint;

		w->steal_hint = NULL;
		if ((t = steal_from(w, v)) != NULL)
			return t;
		tries--;
	}
	r = (unsigned)wft_xorshift(&w->rng);
	dom = wft_topo.dom_of[w->id];
	mem = &wft_topo.members[wft_topo.start[dom]];
	dn = wft_topo_dom_size(dom);
	/* own domain (w itself is one of them) */
	for (int i = 0; i < dn && tries > 0; i++) {
		struct wft_worker *v = wft_rt.workers[mem[(r + (unsigned)i) % (unsigned)dn]];

		if (v == w)
			continue;
		tries--;
		if ((t = steal_from(w, v)) != NULL)
			return t;
	}
	if (dn == n)
		return NULL;
	/* then the others, by worker id from a random point */
	r >>= 8;
	for (int i = 0; i < n && tries > 0; i++) {
		int j = (int)((r + (unsigned)i) % (unsigned)n);

		/* by index: a worker's own lines are touched only to steal */
		if (wft_topo.dom_of[j] == dom)
			continue;
		tries--;
		if ((t = steal_from(w, wft_rt.workers[j])) != NULL)
			return t;
	}
	return NULL;
}

/*
 * Stranded mail. A thread woken onto a worker that is awake but runs one
 * light thread for a long time (a computation that does not yield, a plain
 * blocking syscall) sits in that worker's mailbox until the worker's next
 * scheduling point: only the owner drains it in the normal course. An idle
 * worker that finds a victim with mail and no switch for MAIL_STUCK_NS
 * takes the whole mailbox itself (wft_mailbox_take_all is one exchange,
 * so a second taker gets a disjoint list, see runtime/mailbox.c), keeps
 * the unpinned threads and gives the pinned ones back to the victim's
 * mailbox. While it watches, it parks for MAIL_LOOK_AGAIN_NS at a time
 * instead of the idle tick. So a wakee runs within about MAIL_STUCK_NS
 * plus a wake whenever a worker is idle (the bound: 1 ms plus a
 * steal). Race: the victim's own drain and the thief's take meet only in
 * the exchange, so each thread goes to exactly one of them; the pinned
 * ones pushed back are a normal push (with the normal kick check). Cost:
 * one look at each victim's mailbox line per park, next to the runqueue
 * look the park re-check makes anyway.
 */
#define MAIL_STUCK_NS 500000
#define MAIL_LOOK_AGAIN_NS 100000

enum { MAIL_NONE, MAIL_WATCHING, MAIL_TAKEN };

/* The kick gate applies (see "Kick gate" below): KICK_GATE on and more
 * workers than CPUs. Both are fixed while the runtime runs. */
static inline bool gate_on(void)
{
	return wft_feat(KICK_GATE) && wft_rt.nworkers > wft_rt.ncpu;
}

/* Is some worker awake (running or looking) with threads to run? Not
 * while weft_init starts the workers: no light thread runs before every
 * worker has passed the start barrier (nready == nworkers), so nothing can
 * be stranded, and a worker that parks then parks for good. Counting the
 * workers not yet started as awake made the first ones tick while the
 * main thread created the rest (256 workers: 27,000 parks and 0.9 s of
 * start-up here, 35 s under qemu). seq_cst, both loads: the load half of
 * the ndeep pattern ("Idle tick"). The last nready increment is seq_cst
 * (worker.c) and happens before any thread runs (weft_init waits for it),
 * so a parker that read an earlier count precedes it, and the first
 * strand check after start-up sees the parker's ndeep. */
static inline bool someone_awake(void)
{
	return (int)atomic_load_explicit(&wft_rt.nready, memory_order_seq_cst) >= wft_rt.nworkers &&
	       atomic_load_explicit(&wft_rt.nidle, memory_order_seq_cst) < wft_rt.nworkers;
}


/* rt.looker: (holder id + 1) << 1, or 0; bit 0 (LOOKER_RELIED): a worker
 * stranded a thread after the holder's last look and left it to the
 * holder ("Idle tick"). */
#define LOOKER_RELIED 1

static inline int looker_word(struct wft_worker *w)
{
	return (w->id + 1) << 1;
}

/* Take the looker role if nobody holds it (or w does already). seq_cst:
 * one RMW of the role word's modification order (see "Idle tick"). */
static bool looker_claim(struct wft_worker *w)
{
	int v;

	if (w->looker)
		return true;
	/* relaxed pre-check: a held role costs a shared read, not an RMW
	 * (every park of a busy runtime comes here). A stale holder read
	 * here makes us doze with nobody ticking: a strander then finds the
	 * role empty and kicks, so only the DOZE_NS case of "Idle tick" can
	 * come of it. */
	v = atomic_load_explicit(&wft_rt.looker, memory_order_relaxed);
	if (v & ~LOOKER_RELIED)
		return false;
	/* an orphan RELIED (a strander that found the role empty and left
	 * its thread to a spinner) comes with the role: we owe that look */
	w->looker = atomic_compare_exchange_strong_explicit(&wft_rt.looker, &v, looker_word(w) | v,
							    memory_order_seq_cst,
							    memory_order_relaxed);
	return w->looker;
}

/* How long a noted next-slot thread must have sat there before a looker
 * called away hands it on: the thief's own delay (worker.c I5). */
#define NEXT_HAND_ON_NS 5000

/* Does w leave idle with a stranded thread it was timing for a steal (a
 * victim's next slot, worker.c I5) or mail it was watching ("Stranded
 * mail") still there, after it sat there a while? A worker that noticed
 * it and is called away to its own work before its next look must not
 * take the notice with it: a strander relied on it, and the other idle
 * workers may sleep for good. The next-slot note is forgotten (handed
 * on or stale); the mail watch stays (it resumes where it was when w
 * idles again). relaxed loads: hints, as in the looks themselves; O(1)
 * remote lines. */
static bool left_stranded(struct wft_worker *w)
{
	struct wft_worker *nv = w->nx_victim, *mv = w->mw_victim;
	weft_time_t now = wft_now();
	bool left = false;

	/* Only what has sat there a while: a thread or mail seen a moment
	 * ago is more often picked up by its own worker (sembench at 16
	 * workers: +3 kicks per 1,000 wakes and -7% when every fresh note
	 * was handed on). */
	if (nv) {
		/* handed on or stale: forget it either way (the next idle
		 * period notes afresh) */
		left = now - w->nx_seen >= NEXT_HAND_ON_NS && wft_worker_next_stranded(w, nv);
		w->nx_victim = NULL;
	}
	if (mv) {
		if (atomic_load_explicit(&mv->mailbox.head, memory_order_relaxed) &&
		    wft_worker_switches(mv) == w->mw_switches)
			/* kept: the watch goes on when we idle */
			left = left || now - w->mw_seen >= MAIL_LOOK_AGAIN_NS;
		else
			w->mw_victim = NULL;
	}
	return left;
}

/* Give the looker role up (w found work of its own, every worker is
 * idle, or w drains). Returns whether w owes a look: a strander relied
 * on w since its last look, or w cleared a RELIED and no complete
 * re-check since found the victims clean (look_cleared, see "Idle
 * tick"); the caller then gets a deep or dozing worker going, or keeps
 * looking itself. seq_cst exchange: an RMW of the role word, so it sees
 * every RELIED set before it, and a strander's CAS after it fails and
 * kicks unless someone spins. Context: w's owner. */
static bool looker_drop(struct wft_worker *w)
{
	bool owed = false;

	if (w->looker) {
		w->looker = false;
		owed = atomic_exchange_explicit(&wft_rt.looker, 0, memory_order_seq_cst) &
		       LOOKER_RELIED;
		owed |= w->look_cleared;
		w->look_cleared = false;
		owed |= left_stranded(w);
	}
	return owed;
}

/* The looker is about to look (its tick): stranders from now on must
 * mark the role again. seq_cst RMW: reads from the stranders' CAS, so
 * their slot stores are seen by the look that follows (see "Idle tick").
 * Context: w's owner. */
static void looker_look(struct wft_worker *w)
{
	/* relaxed: only a set bit needs clearing; a RELIED set after this
	 * load stays for the next look (or the drop) */
	if (!w->looker ||
	    !(atomic_load_explicit(&wft_rt.looker, memory_order_relaxed) & LOOKER_RELIED))
		return;
	atomic_fetch_and_explicit(&wft_rt.looker, ~LOOKER_RELIED, memory_order_seq_cst);
	/* owed until a complete re-check finds the victims clean
	 * (park_recheck_victims): one look may not take everything */
	w->look_cleared = true;
}

/* The strand check's slow path (idle.h): ndeep > 0. Leave the thread to
 * the looker (marking the role RELIED, also when someone spins: a
 * spinner may end its spin without having seen it), or to a spinner if
 * nobody holds the role, or get a deep or dozing worker going. No fence:
 * see "Idle tick" for why a strander that finds RELIED already set needs
 * none. Context: self's owner. */
void wft_idle_strand_slow(struct wft_worker *self)
{
	/* relaxed: the CAS below is the RMW that orders our slot store
	 * before the looker's next look */
	int v = atomic_load_explicit(&wft_rt.looker, memory_order_relaxed);

	/* Mark RELIED: on the holder, or, if nobody holds the role, as an
	 * orphan that the next claimer takes with the role (looker_claim) */
	while (!(v & LOOKER_RELIED)) {
		/* seq_cst: an RMW of the role word (see "Idle tick") */
		if (atomic_compare_exchange_weak_explicit(&wft_rt.looker, &v, v | LOOKER_RELIED,
							  memory_order_seq_cst,
							  memory_order_relaxed)) {
			v |= LOOKER_RELIED;
			break;
		}
	}
	if (v != LOOKER_RELIED)
		return;   /* a holder will look, or hand on */
	/* Nobody holds the role. A spinner will claim it when it parks (and
	 * owe the orphan), or, called away first, run this check itself
	 * (wft_idle_found_work); with nobody spinning, get a deep or dozing
	 * worker going to claim it. relaxed: a hint, as everywhere nspinning
	 * is read; a spinner that stops meanwhile runs the check above. */
	if (atomic_load_explicit(&wft_rt.nspinning, memory_order_relaxed) == 0)
		wft_idle_wake_deep(self);
}

/* Take v's mailbox; w keeps the unpinned threads. Returns how many.
 * With NO_MAILBOX, remote wakes are inserted into v's private list under
 * its lock instead, and the rescue takes the unpinned threads from there
 * under the same lock (runq.c wft_runq_take_private_locked). */
static unsigned mail_rescue(struct wft_worker *w, struct wft_worker *v)
{
	struct wft_chain move, stay;
	struct weft_thread *t, *last;
	uint32_t n;
	bool stealable;

	if (!wft_feat(MAILBOX)) {
		wft_runq_take_private_locked(v, &move);
	} else {
		t = wft_mailbox_take_all(&v->mailbox, &last, &n, &stealable);
		wft_chain_split(t, last, UINT32_MAX, &move, &stay);
		wft_fault_delay(&wft_fault_rescueslow_us);   /* WEFT_FAULT=rescueslow:US */
		/* pinned ones back home: a normal push, with its kick check;
		 * a kick made for the wakers of that mail, so chained */
		if (stay.first && wft_mailbox_push_chain(&v->mailbox, stay.first, stay.last, stay.n) &&
		    wft_idle_kick_r(v) == WFT_KICK_SENT)
			wft_stat_inc(w, chain_kicks);
	}
	if (move.first) {
		wft_runq_push_chain_owner(w, move.first, move.last, move.n);
		wft_stat_add(w, steals, move.n);
	}
	return move.n;
}

/* What changes when mail arrives at v: the mailbox head (a push replaces
 * it), or with NO_MAILBOX the private list's length. relaxed: a hint. */
static inline uintptr_t mail_sig(struct wft_worker *v)
{
	if (wft_feat(MAILBOX))
		return (uintptr_t)atomic_load_explicit(&v->mailbox.head, memory_order_relaxed);
	return atomic_load_explicit(&v->rq.npriv, memory_order_relaxed);
}

/* The park re-check's look at v's mailbox (see "Stranded mail"). One
 * victim is watched at a time (the first seen with mail). */
static int mail_watch(struct wft_worker *w, struct wft_worker *v)
{
	uint64_t sw;

	if (w->mw_victim && w->mw_victim != v)
		return MAIL_NONE;
	/* relaxed npriv: a hint; the rescue itself reads under v's lock */
	if (wft_feat(MAILBOX) ? wft_mailbox_empty(&v->mailbox)
			      : atomic_load_explicit(&v->rq.npriv, memory_order_relaxed) == 0) {
		w->mw_victim = NULL;
		return MAIL_NONE;
	}
	/* Kick gate: mail of a victim that sleeps or is being kicked is not
	 * stuck behind a running thread: its kick was made, is pending, or
	 * its park ends within the tick ("Kick gate"). Oversubscribed, the
	 * gate leaves such mail on purpose; watching it would wake this
	 * worker every MAIL_LOOK_AGAIN_NS for nothing. relaxed: a hint. */
	if (gate_on() && atomic_load_explicit(&v->sleep, memory_order_relaxed) != WFT_W_AWAKE) {
		w->mw_victim = NULL;
		return MAIL_NONE;
	}
	sw = wft_worker_switches(v);
	/* its stuck mail was all pinned at the last rescue: nothing for us
	 * until it switches or new mail arrives (without this, the watch
	 * would take and give back the same pinned mail every 0.5 ms while
	 * the victim stays busy, and keep this worker waking every 0.1 ms) */
	if (w->mw_pinned == v && w->mw_pinned_sw == sw && w->mw_pinned_sig == mail_sig(v))
		return MAIL_NONE;
	if (w->mw_victim != v || w->mw_switches != sw) {
		w->mw_victim = v;
		w->mw_switches = sw;
		w->mw_seen = wft_now();
		return MAIL_WATCHING;
	}
	if (wft_now() - w->mw_seen < MAIL_STUCK_NS)
		return MAIL_WATCHING;
	w->mw_victim = NULL;
	if (mail_rescue(w, v))
		return MAIL_TAKEN;
	w->mw_pinned = v;
	w->mw_pinned_sw = sw;
	w->mw_pinned_sig = mail_sig(v);
	return MAIL_NONE;
}

/* Park timeout (ns) while a victim's next slot holds a thread this worker
 * is timing for a steal (worker.c I5): look again instead of sleeping
 * until a kick that will not come (the victim does not know it strands
 * the thread). Only when the last look saw the same thread and the same
 * switch count, i.e. not for a pair ping-ponging on the victim. */
#define NEXT_LOOK_AGAIN_NS 20000

/* Idle tick. Work a busy worker holds without knowing others could use it
 * (a thread stranded in its next slot by a waker that keeps running,
 * runtime/worker.c I5; mail for a worker that computes, "Stranded mail")
 * produces no kick. So while some worker is awake, an idle worker parks
 * for at most IDLE_TICK_NS, then looks at the victims (try_steal, then
 * the park re-check of every victim: the kernel's periodic load
 * balancing, in its idle-CPU form). An idle runtime sleeps for good
 * ("deep", counted in rt.ndeep), and so does a worker that parks while
 * weft_init is still starting the others (someone_awake).
 *
 * One looker. Only one idle worker needs to tick: the one that holds
 * rt.looker. A worker that parks while another is awake claims the role
 * if nobody holds it (looker_claim) and ticks; the others doze: they park
 * for DOZE_NS (IDLE_TICK_NS x nworkers), counted in ndeep like deep
 * sleepers. So the runtime makes about one looking wake-up per
 * millisecond plus the dozers' (nworkers - 2) / nworkers, whatever the
 * number of workers: O(1) wake-ups, O(N) victim lines per millisecond,
 * where every idle worker ticking made nworkers - 1 wake-ups and O(N^2)
 * lines (figures in docs/wake-path.md "The idle tick while one worker is
 * busy"). The looker keeps the role across its quiet ticks and gives it
 * up (looker_drop) when it finds work (the scheduler loop's pick,
 * wft_idle_found_work), when every worker is idle (it parks deep like the
 * others), or when it drains (a draining worker does not look at
 * victims, runtime/drain.c: it ticks for the drain rule without the
 * role). The next worker that parks while one is awake claims it. With
 * the Kick gate on (more workers than CPUs) the gate may leave a kick
 * pending only for a target whose park ends within the tick, so a worker
 * without the role still ticks where a gated kick may wait for it: in the
 * first tick of an idle period while the CPUs are taken, and while an OS
 * thread makes bursts of wakes (gate_wants_tick); with one busy thread
 * the others doze there too.
 *
 * The strand check (wft_idle_strand_check, by a worker that leaves an
 * unpinned thread in its next slot or mail on an awake worker) is where
 * the others rely on the looker. With ndeep > 0 it marks the role word
 * LOOKER_RELIED (a CAS, once per look period): on the holder, or, if
 * nobody holds the role, as an orphan that the next claimer takes with
 * the role; in that case, with nobody spinning, it also gets a deep or
 * dozing worker going (wft_idle_wake_deep) to claim it.
 * What a worker owes, and how it is handed on: the holder owes a look
 * from a RELIED until a complete park re-check finds no unpinned thread
 * in any victim's next slot and no mail watched (look_cleared, cleared
 * there, not by the look itself: one look may not take everything, a
 * next-slot steal needs two looks, worker.c I5, and try_steal visits 8
 * victims). The holder also owes what its re-check noted (a next slot it
 * is timing, mail it watches) once that has sat there a while, and so
 * does a worker without the role while nobody holds it (a spinner the
 * strander relied on: left_stranded, O(1)). A worker that leaves idle
 * owing (wft_idle_found_work), a holder that drains, and a worker that
 * leaves its park for a due timer while an orphan RELIED waits, wake a
 * deep or dozing worker in their place; a holder that finds every worker
 * idle but owes drops the role and ticks once more instead of going deep
 * (the strander may have woken after its nidle load, and it may be the
 * only idle worker).
 * Races it must survive:
 *   - A worker that parked deep, then another wakes by itself (a timer,
 *     I/O) and strands. The ndeep pattern: the parker does ndeep++ then
 *     reads nidle; the waking worker did nidle-- before it ran anything
 *     and reads ndeep before it leaves the slot; all seq_cst, so one of
 *     the two loads sees the other's update (the parker ticks or dozes
 *     under a looker, or the strander sees it deep and goes on above).
 *   - The looker is called away before it looks (a kick for its own
 *     mail, a timer, I/O) or drains. All changes of rt.looker are RMWs
 *     (claim CAS, RELIED CAS, the look's fetch_and, the drop's exchange),
 *     so they have one modification order: a strander's RELIED comes
 *     before the drop's exchange (which sees it: the holder owes) or
 *     after it (the CAS leaves an orphan, see above).
 *   - The looker looks while a thread is being stranded. A strander that
 *     finds the role without RELIED sets it with a CAS: the look's clear
 *     (a seq_cst fetch_and) reads from that CAS or a later RMW, so the
 *     strander's slot store happens before the look, or the bit stays
 *     set for the next look or the drop. A strander that finds RELIED
 *     already set does nothing more (no fence: one cost 30-40 ns at every
 *     local wake here, 13% on an unpinned ping-pong while idle workers
 *     dozed); its slot store may be missed by the look that clears the
 *     bit (store buffering) and by the re-check right after it, so the
 *     holder owes until a complete re-check finds the victims clean: this
 *     relies on the store becoming visible before the holder stops
 *     looking (store buffers drain in nanoseconds; C11 asks for "a
 *     reasonable amount of time").
 *   - A strander that found the role empty and someone spinning: the
 *     orphan RELIED waits for the spinner's claim when it parks; a
 *     spinner that finds work instead hands on (found_work wakes one if
 *     it was the last spinner; wft_idle_found_work runs the strand check,
 *     which finds the orphan), and one that leaves for a due timer hands
 *     the orphan on (idle_park).
 * Left to the dozers' timeout (DOZE_NS): a strander that read ndeep == 0
 * while a dozer was on its way down relies on nobody, and a parker that
 * read a holder that had just left dozes with nobody ticking; the dozer
 * looks when its park ends, or a later strander (finding the role empty)
 * kicks one. A stranded thread also waits longer than a tick when the
 * victims' next slots are busy: each worker times one next-slot candidate
 * at a time.
 * None of this is a lost wakeup in the strict sense: a stranded thread is
 * queued, and its own worker runs it at its next scheduling point; the
 * bound is on how long it waits while a worker is idle. Cost on the
 * local-wake path: nothing new while ndeep == 0; then a call and a load
 * of the role (a CAS once per look period). While workers doze, ndeep >
 * 0 is the normal state of a busy runtime. The looker pays one RMW per
 * tick that follows a RELIED, and a kick when it leaves owing: with
 * local unpinned wakes going on, nearly every time it leaves (an open
 * cost: recording which strander relied would let a looker skip the
 * kick when that strander has switched since). */
#define IDLE_TICK_NS 1000000
#define DOZE_NS(nworkers) ((weft_time_t)IDLE_TICK_NS * (weft_time_t)(nworkers))

/* Kick chain (below): how many parked workers a woken worker wakes in
 * turn. Two makes a tree: 64 pinned targets are all awake after 6
 * rounds of wake latency, against 63 for a chain of one. */
#define KICK_CHAIN_FANOUT 2

/*
 * Kick gate (KICK_GATE). Oversubscribed (more workers than CPUs), a kick
 * does not always buy a CPU: when as many workers run (or have been
 * kicked and will run) as there are CPUs, the kicked worker only waits
 * in the kernel's run queue, and every kick of a burst adds one more OS
 * thread to share two CPUs with (sembench with 16 pinned workers on 2
 * CPUs: 70-90 kicks per 1,000 wakes, nearly every park woken again for
 * a handful of threads). Go does not start an M without an idle P
 * (wakep); our P is a CPU. So a waker that finds its target SLEEPING
 * with no CPU free leaves the kick pending (the Kick chain's bit) when
 * the target's park is bounded by the idle tick, and the next worker
 * that parks hands its CPU to one pending worker just before it sleeps.
 * A target that comes later gets its mail with more of it, in one wake.
 *
 * Demand: nworkers - nidle (awake: running or looking) + nkicked (kicked,
 * not yet awake). nkicked is counted by the kicker that wins SLEEPING ->
 * KICKED and uncounted by the worker whose AWAKE exchange returns KICKED
 * (a forced kick counts itself the same way).
 *
 * Why no wakeup is lost. A kick is left pending only if the target's
 * current park ends by park_until <= now + KICK_GATE_WAIT_NS: the worker
 * stores park_until (relaxed) after its SLEEPING exchange and clears it
 * before its AWAKE exchange, and the waker reads it after a seq_cst load
 * that saw SLEEPING, which synchronises with that exchange: so it reads 0
 * (kick now) or the deadline of the park it saw, or of a later one (then
 * the worker has stored AWAKE after our load and its next re-check sees
 * the mail, "Park"). A park with no such deadline (deep, a far timer, no
 * STEAL) is always kicked. The worker wakes by its deadline, and its
 * scheduler loop drains the mailbox first. So the gate delays a wakee by
 * at most KICK_GATE_WAIT_NS; it cannot lose one. The pending bit is for
 * promptness, and the Kick chain's argument covers it: a bit stays until
 * a chain step takes it, and the target's own wake (by its deadline) runs
 * one.
 * Promptness (hand-over), a Dekker pair:
 *
 *   waker (gated)                        parker
 *   -----------------------------------  ---------------------------------
 *   fetch_or pending bit     (seq_cst)    nidle++ (idle_set)      (seq_cst)
 *   load nidle, nkicked      (seq_cst)    load pending (kick_take) (seq_cst)
 *   demand < ncpu? take a bit, kick it    a bit? kick that worker
 *
 * Either the waker sees the parker's nidle++ (a CPU is free: it kicks a
 * pending worker itself), or the parker sees the bit and kicks it,
 * because both store then load with seq_cst operations. If demand stays
 * at ncpu because every awake worker computes without parking, the
 * target wakes by its deadline (above).
 * Interleavings considered: two gated wakers of one target (one bit, set
 * twice; a taker kicks once, the CAS elects one); a gated target that
 * wakes by its deadline (its bit is taken later by someone: its sleep
 * word is AWAKE, no syscall, the step takes another bit); a parker that
 * cancels its park after idle_set (the waker may have seen the transient
 * free CPU and kicked: an extra kick, never a missing one); a forced kick
 * at shutdown (ungated).
 * Cost: one load of the shared nidle/nkicked lines and one clock read per
 * gated decision, one RMW on the pending word per deferred kick and per
 * take; only while oversubscribed, never a scan.
 * With no more workers than CPUs a SLEEPING target means a free CPU, and
 * the gate never applies.
 */
#define KICK_GATE_WAIT_NS IDLE_TICK_NS

/*
 * Outside waker (with the Kick gate). A plain OS thread that wakes light
 * threads in bursts (sembench's poster) makes work the runtime cannot
 * see coming: between two of its waves every worker may be idle, and a
 * worker that parks then finds nidle == nworkers and parks deep (Idle
 * tick). The gate must kick a deep park at once (it has no deadline to
 * bound a pending kick), so the Kick chain step of every worker that
 * woke went on kicking deep-parked peers, each for a few threads
 * (sembench -o 3 oversubscribed: the second source of kicks after the
 * hand-over; figures in docs/wake-path.md "Where the kicks come from").
 * So while an OS thread has made a burst of wakes within the last idle
 * tick (os_waker_mark, written by os_burst), a worker that would park
 * deep parks with the idle tick instead; its kick may then be left
 * pending for a hand-over, and it wakes with more mail.
 * Why no wakeup is lost: the rule only turns a deep park into a park
 * with a deadline, which is the ordinary case of "Park" and "Kick gate":
 * a waker that sees SLEEPING kicks, or leaves the kick pending only if
 * the park ends within KICK_GATE_WAIT_NS, and the worker's own wake by
 * its deadline drains its mailbox. The ndeep pattern of "Idle tick" is
 * untouched: ndeep++ then the load of nidle as before; a worker that
 * then decides to tick undoes its ndeep (a tick parker looks by itself,
 * so it needs no strand check's kick).
 * Interleavings considered: the OS thread stops for good right after a
 * burst (the mark is stale one tick later: each idle worker re-parks
 * once more, then deep, so an idle runtime still sleeps for good); the
 * mark is read just before an OS thread refreshes it (the worker parks
 * deep as before: kicked at once, a kick more, never a lost one); two OS
 * threads in bursts (one mark; either refreshes it); an OS thread that
 * wakes once and blocks (not a burst: no mark, no change).
 * Cost: one relaxed load per park that reaches the tick's choice (only
 * with the gate on; it uses the park's own clock read), one store per
 * OS_MARK_EVERY_NS by a bursting OS thread, and at most one tick wake-up
 * per idle period of a worker (outside_tick: a worker that slept a tick
 * without running anything parks deep).
 * Rejected: counting the OS waker in every gate decision's demand (the
 * workers' chain steps too). It changed nothing: those kicks were not let
 * through for want of demand but because their targets parked deep.
 * Only with the gate on: with no more workers than CPUs nothing changes.
 */

static int kick_now(struct wft_worker *w, uint32_t s);
static int kick_take(void);

/* CPUs taken: workers running or about to run, plus the caller if it is
 * a plain OS thread in a burst of wakes (os_busy): it runs on a CPU too,
 * outside the runtime's counts (sembench's poster: without it the gate
 * sees a free CPU the poster holds, and sembench at 16 workers on 2 CPUs
 * loses about a third). Only in a burst: an OS thread that wakes once and
 * then blocks (a post then a wait, an offload or poller thread going back
 * to sleep) never hands its CPU over, and counting it left its wakee
 * waiting for the tick (figures: docs/design.md "Measured
 * alternatives"). seq_cst: the load half of the hand-over pair (above). */
static inline int cpu_demand(bool os_busy)
{
	return wft_rt.nworkers - atomic_load_explicit(&wft_rt.nidle, memory_order_seq_cst) +
	       atomic_load_explicit(&wft_rt.nkicked, memory_order_seq_cst) + os_busy;
}

/* An OS thread's last gated decision, for os_burst (its own variable:
 * __thread belongs to the OS thread, and only OS threads use it). */
static __thread weft_time_t os_last_wake;
#define OS_BURST_NS 50000

/* When a plain OS thread last made a wake of a burst (os_burst), for the
 * park's choice between the idle tick and a deep sleep (park_again_at,
 * "Outside waker"). One value shared by all OS wakers; written only by
 * OS threads in a burst, at most once per OS_MARK_EVERY_NS (a quarter
 * of the burst window: fresh to within 25 us of a 1 ms tick, and one
 * shared-line write per 25 us instead of one per wake); read once per
 * park that would go deep. A value left from an earlier weft_init lasts
 * one tick. */
static struct {
	/* a line of its own (the struct's size is its alignment): read by
	 * parkers, written by OS wakers, apart from the gate's take_from,
	 * written at every take */
	_Alignas(64) _Atomic weft_time_t t;
} os_waker_mark;
#define OS_MARK_EVERY_NS 25000

/* Is the caller a plain OS thread that already woke someone within
 * OS_BURST_NS (so it is likely to keep its CPU a while)? If so, mark
 * it for park_again_at. relaxed, load and store of the mark: a hint
 * about who makes work, ordered with nothing ("Outside waker"). */
static inline bool os_burst(weft_time_t now)
{
	bool busy;

	if (wft_worker_self() != NULL)
		return false;
	busy = now - os_last_wake < OS_BURST_NS;
	os_last_wake = now;
	/* one write per OS_MARK_EVERY_NS, not one per wake; signed: another
	 * OS thread may have stored a time later than our clock read */
	if (busy && (int64_t)(now - atomic_load_explicit(&os_waker_mark.t, memory_order_relaxed)) >
		    OS_MARK_EVERY_NS)
		atomic_store_explicit(&os_waker_mark.t, now, memory_order_relaxed);
	return busy;
}

/* Did a plain OS thread make a burst of wakes within the last idle tick? */
static inline bool os_waker_recent(weft_time_t now)
{
	/* signed: a mark stored after our clock read is recent */
	return (int64_t)(now - atomic_load_explicit(&os_waker_mark.t, memory_order_relaxed)) <
	       IDLE_TICK_NS;
}

/* May w's kick wait for a CPU? w was seen SLEEPING (seq_cst load). */
static bool gate_defer(struct wft_worker *w)
{
	weft_time_t until, now;

	if (!gate_on())
		return false;
	now = wft_now();
	if (cpu_demand(os_burst(now)) < wft_rt.ncpu)
		return false;
	/* relaxed: ordered by the caller's seq_cst load of SLEEPING (above) */
	until = atomic_load_explicit(&w->park_until, memory_order_relaxed);
	return until && until <= now + KICK_GATE_WAIT_NS;
}

/* Both halves of the hand-over: take pending bits until one's worker is
 * not already awake (a worker that woke by its deadline leaves a stale
 * bit) and kick it, ungated. A bit of skip (a parker's own) ends the
 * search unkicked. Returns the worker of the last bit taken (NULL: none
 * pending) and its kick's result in *r. */
static struct wft_worker *kick_one_pending(struct wft_worker *skip, int *r)
{
	int b;

	while ((b = kick_take()) >= 0) {
		struct wft_worker *v = wft_rt.workers[b];

		if (v == skip)
			return v;
		/* seq_cst: as in wft_idle_kick_r */
		*r = kick_now(v, atomic_load_explicit(&v->sleep, memory_order_seq_cst));
		if (*r != WFT_KICK_AWAKE)
			return v;
	}
	return NULL;
}

/* Leave w's kick pending; if a CPU freed meanwhile, kick one pending
 * worker ourselves (the waker's half of the hand-over). The take goes
 * round robin, so the bit taken is often another's: that kick is made
 * for another wake (counted as chained), and w's own stays pending. */
static int gate_leave(struct wft_worker *w)
{
	struct wft_worker *self = wft_worker_self(), *v;
	int r;

	wft_idle_kick_defer(w);   /* seq_cst: the store half */
	if (!wft_fault_refused(WFT_FAULT_GATE_FREE) && cpu_demand(self == NULL) >= wft_rt.ncpu)
		return WFT_KICK_UNDERWAY;
	/* a CPU is free: kick one pending worker ourselves */
	v = kick_one_pending(NULL, &r);
	if (v == w && r == WFT_KICK_SENT)
		return WFT_KICK_SENT;
	if (v && r == WFT_KICK_SENT)
		wft_stat_inc_any(self, chain_kicks);
	return WFT_KICK_UNDERWAY;
}

/* The parker's half of the hand-over: w is about to sleep (its idle_set
 * done); give its CPU to one pending worker, ungated. Skips bits of
 * workers that turn out awake. Returns true if the bit it took was w's
 * own: a waker left w's kick pending after w's re-checks, so w has mail
 * and must not sleep (kicking itself would cost a syscall and an idle
 * round). Context: w's owner. */
static bool gate_hand_over(struct wft_worker *w)
{
	struct wft_worker *v;
	int r;

	if (!gate_on())
		return false;
	v = kick_one_pending(w, &r);
	if (v == w)
		return true;
	if (v && r == WFT_KICK_SENT)
		wft_stat_inc(w, chain_kicks);
	return false;
}


static void idle_set(struct wft_worker *w)
{
	/* seq_cst: part of the announcement (see Park) */
	atomic_fetch_or_explicit(&wft_rt.idle_mask[w->id / 64], 1ull << (w->id % 64),
				 memory_order_seq_cst);
	atomic_fetch_add_explicit(&wft_rt.nidle, 1, memory_order_seq_cst);
}

/* The domain's spinner hint (topology.h, read by wake placement R3). Set
 * when w takes a spinning slot; cleared by w when it gives the slot up,
 * unless another spinner of the domain has overwritten it. relaxed: a
 * hint; a wake placed on a worker that stopped spinning meanwhile gets
 * the mailbox push's own kick check (see Park), so it is never lost. */
static void spinner_hint_set(struct wft_worker *w)
{
	atomic_store_explicit(&wft_topo.spinner[wft_topo.dom_of[w->id]].id, w->id + 1,
			      memory_order_relaxed);
}

static void spinner_hint_clear(struct wft_worker *w)
{
	int me = w->id + 1;

	atomic_compare_exchange_strong_explicit(&wft_topo.spinner[wft_topo.dom_of[w->id]].id, &me, 0,
						memory_order_relaxed, memory_order_relaxed);
}

/* Leave the idle set. If our bit was already clear, a wake_one() claimed
 * us: it has counted us out of nidle and handed us its spinning slot
 * (nspinning stays 1 on our behalf), so we take the slot here, on our own
 * thread. (If wake_one stored v->spinning = 1 itself, that store could
 * land after v had already left idle, or v could sleep holding the slot
 * without anyone knowing, and nspinning would stay 1 forever: every later
 * wake_one would assume somebody was looking.) */
static void idle_clear(struct wft_worker *w)
{
	/* relaxed: the bit's owner is decided by the RMWs themselves (ours
	 * or wake_one's CAS); no other data travels with it */
	uint64_t old = atomic_fetch_and_explicit(&wft_rt.idle_mask[w->id / 64],
						 ~(1ull << (w->id % 64)), memory_order_relaxed);

	if (old & (1ull << (w->id % 64))) {
		/* seq_cst: the store half of the ndeep pattern (see Idle tick) */
		atomic_fetch_sub_explicit(&wft_rt.nidle, 1, memory_order_seq_cst);
	} else {
		atomic_store_explicit(&w->spinning, 1, memory_order_relaxed);
		spinner_hint_set(w);
	}
}

/* Still in the idle set? seq_cst: the load half of the claim pattern
 * (see Park: a claimed worker must not sleep through its claim). */
static bool idle_claimed(struct wft_worker *w)
{
	return !(atomic_load_explicit(&wft_rt.idle_mask[w->id / 64], memory_order_seq_cst) &
		 (1ull << (w->id % 64)));
}

/* w->spinning is written by w only (a slot that wake_one() hands w is taken
 * up in idle_clear(), on w's thread); relaxed: it only mirrors w's share of
 * nspinning. */
static inline int spinning(struct wft_worker *w)
{
	return atomic_load_explicit(&w->spinning, memory_order_relaxed);
}

void wft_idle_spin_stop(struct wft_worker *w)
{
	if (spinning(w)) {
		spinner_hint_clear(w);
		atomic_store_explicit(&w->spinning, 0, memory_order_relaxed);
		/* relaxed: a count of lookers, a hint for wake_one */
		atomic_fetch_sub_explicit(&wft_rt.nspinning, 1, memory_order_relaxed);
	}
}

/* Found work: if we were the last spinner, make sure someone else keeps
 * looking (there may be more where ours came from; Go's resetspinning). */
static void found_work(struct wft_worker *w, struct weft_thread *t)
{
	bool was_spinning = spinning(w);

	wft_idle_spin_stop(w);
	if (t)
		wft_runq_push_owner(w, t);
	if (was_spinning && atomic_load_explicit(&wft_rt.nspinning, memory_order_relaxed) == 0 &&
	    atomic_load_explicit(&wft_rt.nidle, memory_order_relaxed) > 0)
		wft_idle_wake_one(w);
}

/* The scheduler loop's pick found work. A looker gives its role up and
 * hands on what it owes (looker_drop); a worker without the role hands
 * on what its re-check noted if nobody holds the role (a strander then
 * relied on spinners, and it may have been one: "Idle tick"). If w held
 * the spinning slot (a worker claimed by wake_one holds it when it
 * wakes), it gives it back; if a worker sleeps without the idle tick, it
 * may be the only one that would look at a stranded next slot, so get it
 * going. Not found_work()'s
 * "last spinner wakes any idle worker": that would kick the peer worker
 * on every round trip of a cross-worker ping-pong, whose workers park
 * with the tick (weft-micro pingpong_idle 21 -> 45 us). */
void wft_idle_found_work(struct wft_worker *w)
{
	bool owed = looker_drop(w);

	/* relaxed: a held role carries RELIED for the stranders; a stale
	 * "nobody" costs at most one kick (a stale holder: "Idle tick") */
	if (!owed && wft_unlikely(w->nx_victim || w->mw_victim) &&
	    !(atomic_load_explicit(&wft_rt.looker, memory_order_relaxed) & ~LOOKER_RELIED))
		owed = left_stranded(w);

	if (spinning(w)) {
		wft_idle_spin_stop(w);
		wft_idle_strand_check(w);
	}
	if (wft_unlikely(owed))
		wft_idle_wake_deep(w);
}

/* This OS thread's CPU time (ns), or 0 if unavailable. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Start a spin phase: sampled ones note the wall and CPU clocks. */
static void spin_sample_start(struct wft_worker *w, weft_time_t now)
{
	w->spin_sampled = ++w->spin_phases % SPIN_SAMPLE_EVERY == 0;
	if (w->spin_sampled) {
		w->spin_wall0 = now;
		w->spin_cpu0 = thread_cpu_ns();
	}
}

/* End a spin phase (see "Contended CPUs"). */
static void spin_sample_end(struct wft_worker *w)
{
	uint64_t wall, cpu;

	if (!w->spin_sampled)
		return;
	w->spin_sampled = false;
	cpu = thread_cpu_ns();
	if (!cpu || !w->spin_cpu0)
		return;
	/* A phase that began before the back-off now in force (or one set
	 * while it ran) measured what another worker's sample already
	 * judged: oversubscribed, many workers end overlapping samples at
	 * once, and each would double the back-off or halve it again. */
	if ((uint64_t)atomic_load_explicit(&wft_rt.spin_off_until, memory_order_relaxed) >
	    (uint64_t)w->spin_wall0)
		return;
	wall = wft_now() - w->spin_wall0;
	cpu -= w->spin_cpu0;
	/* relaxed, all: hints shared by the workers; a lost update between
	 * two samplers costs one back-off step or one spin phase */
	if (wall > cpu && wall - cpu > SPIN_LOST_MIN_NS && wall - cpu > wall / 4) {
		/* contended within one back-off's length of the last one's
		 * end: back off twice as long; later: start over */
		uint64_t b = atomic_load_explicit(&wft_rt.spin_backoff, memory_order_relaxed);
		uint64_t until = atomic_load_explicit(&wft_rt.spin_off_until, memory_order_relaxed);
		weft_time_t now = wft_now();

		b = b && now - until < b ? 2 * b : SPIN_BACKOFF_NS;
		if (b > SPIN_BACKOFF_MAX_NS)
			b = SPIN_BACKOFF_MAX_NS;
		atomic_store_explicit(&wft_rt.spin_backoff, b, memory_order_relaxed);
		atomic_store_explicit(&wft_rt.spin_off_until, now + b, memory_order_relaxed);
		wft_stat_inc(w, spin_backoffs);
	}
}

/* Whether idle workers may spin now (not backed off: "Contended CPUs"). */
static bool spin_allowed(void)
{
	/* relaxed: a hint (above) */
	uint64_t until = atomic_load_explicit(&wft_rt.spin_off_until, memory_order_relaxed);

	return !until || wft_now() >= until;
}

/* Cache trim. A parking worker gives its cached stacks back to the kernel
 * (stack.c I3) only once it has been idle, with no switch, for
 * STACK_TRIM_IDLE_NS, and the shared overflow pool only if every worker
 * sleeps by then (deep). Trimming at every park unmapped the stacks the
 * next burst mapped again: fib(30) on 2 workers parks between steals and
 * made 617 munmap and 634 mmap calls a run (TLB shootdown IPIs and
 * mmap_lock contention in its profile), and a program whose main thread
 * joins between rounds had all its stacks unmapped at every round. The
 * idle tick's re-parks (IDLE_TICK_NS) reach the bound; a worker that
 * would sleep without a deadline sleeps until the trim is due instead,
 * once per idle period. Returns that time, or WEFT_TIME_INFINITE. */
#define STACK_TRIM_IDLE_NS 10000000

static weft_time_t cache_trim(struct wft_worker *w, bool deep)
{
	/* our own counter (only this worker writes it) */
	uint64_t sw = w->stats.switches;
	weft_time_t now = wft_now();
	unsigned n;

	if (sw != w->idle_switches || !w->idle_since) {
		w->idle_switches = sw;
		w->idle_since = now;
		w->idle_trimmed = false;
	}
	if (w->idle_trimmed)
		return WEFT_TIME_INFINITE;
	if (now - w->idle_since < STACK_TRIM_IDLE_NS)
		return w->idle_since + STACK_TRIM_IDLE_NS;
	/* counts what it unmaps too: with the cache and the pool full */
	n = wft_tcb_cache_drop_stacks(w);
	n += wft_stack_trim(w, wft_stack_cache_keep());
	if (deep) {
		bool skipped;

		n += wft_stack_pool_trim(&skipped);
		if (skipped) {
			/* another worker was scavenging, with a budget counted
			 * before our cache trim made more slots dirty: again
			 * after another STACK_TRIM_IDLE_NS */
			wft_stat_add(w, stack_trims, n);
			w->idle_since = now;
			return now + STACK_TRIM_IDLE_NS;
		}
	}
	wft_stat_add(w, stack_trims, n);
	w->idle_trimmed = true;
	return WEFT_TIME_INFINITE;
}

/* The spin phase of an idle round: take a spinning slot if fewer than
 * spinners_max() are taken, then look for work for up to IDLE_SPIN_NS.
 * Returns true if work was found (found_work() done). */
static bool idle_spin(struct wft_worker *w)
{
	struct weft_thread *t;
	int max = spinners_max();

	if (!spinning(w)) {
		/* Take a spinning slot if fewer than max are taken. A CAS
		 * loop, not a load and an add: two workers that both saw
		 * one slot left took it both (the limit overshot by one per
		 * racer). relaxed: a count of lookers, a hint for wake_one,
		 * whose own 0 -> 1 CAS needs no order with ours */
		int n = atomic_load_explicit(&wft_rt.nspinning, memory_order_relaxed);

		while (n < max && !atomic_compare_exchange_weak_explicit(&wft_rt.nspinning,
				&n, n + 1, memory_order_relaxed, memory_order_relaxed))
			;
		if (n < max) {
			atomic_store_explicit(&w->spinning, 1, memory_order_relaxed);
			spinner_hint_set(w);
		}
	}
	/* relaxed: checks the count alone; every slot is taken by this
	 * CAS or by wake_one's 0 -> 1, so no value read exceeds max */
	WFT_ASSERT(atomic_load_explicit(&wft_rt.nspinning, memory_order_relaxed) <= max);
	if (spinning(w)) {
		weft_time_t end = wft_now() + IDLE_SPIN_NS;

		spin_sample_start(w, end - IDLE_SPIN_NS);
		do {
			for (int i = 0; i < 16; i++)
				wft_cpu_relax();
			if (wft_worker_has_work(w) ||
			    atomic_load_explicit(&wft_rt.stopping, memory_order_relaxed)) {
				found_work(w, NULL);
				spin_sample_end(w);
				return true;
			}
			t = try_steal(w);
			if (t) {
				found_work(w, t);
				spin_sample_end(w);
				return true;
			}
			/* I/O: with DEFER_TASKRUN the kernel only flags
			 * completions; they become CQEs (and wake their
			 * threads) when this worker reaps, so a spinning
			 * worker that did not look would sit out the spin
			 * (request of the I/O work: 1-worker echo ping-pong
			 * 19-21k -> 24-25k round trips/s) */
			if (w->ring && wft_uring_poll(w)) {
				found_work(w, NULL);
				spin_sample_end(w);
				return true;
			}
			if (atomic_load_explicit(&w->timers.next, memory_order_relaxed) <= wft_now())
				break;
		} while (wft_now() < end);
		wft_idle_spin_stop(w);
		spin_sample_end(w);
	}
	return false;
}

/* The park's re-check of the other workers (part of the load half of the
 * Park pattern, with STEAL): a victim's stranded next slot asks for a
 * look again soon (*look_again), a mailbox being taken for a watch
 * (*watch_mail); private-only work gets a split request. Returns true if
 * the park must be cancelled: there is work to take now. */
static bool park_recheck_victims(struct wft_worker *w, bool *look_again, bool *watch_mail)
{
	bool clean = true;   /* no unpinned next-slot thread, no mail watched */
	struct wft_worker *stale = NULL;

	if (w->nx_victim && !wft_worker_next_stranded(w, w->nx_victim)) {
		/* stale: let this scan note another, not the same victim
		 * again (a ping-pong there would take the note every scan
		 * and hide a real strander behind it) */
		stale = w->nx_victim;
		w->nx_victim = NULL;
	}
	for (int i = 0; i < wft_rt.nworkers; i++) {
		struct wft_worker *v = wft_rt.workers[i];

		if (v == w)
			continue;
		switch (wft_worker_next_look(w, v, v != stale)) {
		case WFT_NX_CONFIRMED:
			*look_again = true;
			/* try_steal's first victim: with more than STEAL_TRIES
			 * victims its rotation may not reach this one soon */
			if (!w->steal_hint)
				w->steal_hint = v;
			/* fall through */
		case WFT_NX_SEEN:
			clean = false;
			break;
		}
		switch (mail_watch(w, v)) {
		case MAIL_TAKEN:
			return true;
		case MAIL_WATCHING:
			*watch_mail = true;
			clean = false;
			break;
		}
		if (wft_runq_has_work(v)) {
			/* private-only work: ask the owner to publish at its
			 * next pick; our tick or the strand check brings us
			 * back to it (see Surplus) */
			if (atomic_load_explicit(&v->rq.tail, memory_order_relaxed) !=
			    atomic_load_explicit(&v->rq.head, memory_order_relaxed)) {
				w->steal_hint = v;   /* try_steal's first victim */
				return true;
			}
			atomic_store_explicit(&v->rq.split_req, 1, memory_order_relaxed);
		}
	}
	/* a complete look found nothing stranded: what a cleared RELIED
	 * stood for is done ("Idle tick") */
	if (clean)
		w->look_cleared = false;
	return false;
}

/* w's idle period (cache_trim's: no switch since it began) is not yet a
 * tick old. Our own counter and idle period (only this worker writes
 * them). */
static inline bool idle_fresh(struct wft_worker *w, weft_time_t now)
{
	return w->stats.switches != w->idle_switches || now - w->idle_since < IDLE_TICK_NS;
}

/* Park with the tick although every worker is idle ("Outside waker"):
 * the gate is on, an OS thread made a burst of wakes within the last
 * tick, and this worker's idle period (cache_trim's: no switch since it
 * began) is not yet a tick old. A worker that already slept a tick
 * without running anything goes deep: without that bound, 64 idle
 * workers on 2 CPUs woke every millisecond while the poster ran, which
 * cost an unpinned sembench at 64 workers about half its throughput. */
static bool outside_tick(struct wft_worker *w, weft_time_t now)
{
	return gate_on() && os_waker_recent(now) && idle_fresh(w, now);
}

/* With the Kick gate on, a worker that cannot hold the looker role still
 * ticks (instead of dozing) where a gated kick may have to wait for it:
 * while an OS thread makes bursts of wakes ("Outside waker"), and in the
 * first tick of its idle period when the CPUs are taken (the gate defers
 * kicks only then, and only for a park bounded by the tick). Not later:
 * a worker awake for its tick counts in the demand, and 255 idle workers
 * on 2 CPUs kept each other ticking that way (90 wake-ups per ms with one
 * busy thread). One busy thread among idle workers takes fewer CPUs than
 * there are: they doze. cpu_demand: seq_cst loads, a hint here (a wrong
 * guess costs a kick that was not deferred, or a tick). */
static bool gate_wants_tick(struct wft_worker *w, bool outside, weft_time_t now)
{
	return gate_on() &&
	       (outside || (idle_fresh(w, now) && cpu_demand(false) >= wft_rt.ncpu));
}

/* park_again_at counted w in ndeep, and w ticks after all: undo it.
 * relaxed: as in cancel_deep (only the increment's order matters). */
static weft_time_t tick_instead(bool *deep, weft_time_t now)
{
	atomic_fetch_sub_explicit(&wft_rt.ndeep, 1, memory_order_relaxed);
	*deep = false;
	return now + IDLE_TICK_NS;
}

/* When to look again without news of work: soon while a victim strands a
 * thread in its next slot or its mail; otherwise, while some worker is
 * awake, at least every IDLE_TICK_NS for the looker (and, with the kick
 * gate on, for a worker gate_wants_tick keeps ticking) and every DOZE_NS
 * for the others (relaxed: a hint, see "Idle tick"); WEFT_TIME_INFINITE
 * when every worker is idle (unless the holder owes a look). *deep: this worker counted itself in ndeep
 * (undone after the sleep), deep or dozing; *doze: dozing (someone is
 * awake: not a time to trim the shared stack pool). */
static weft_time_t park_again_at(struct wft_worker *w, bool look_again, bool watch_mail, bool *deep,
				 bool *doze)
{
	weft_time_t again = WEFT_TIME_INFINITE;

	if (look_again) {
		again = wft_now() + NEXT_LOOK_AGAIN_NS;
	} else if (watch_mail) {
		weft_time_t now = wft_now();

		again = now + MAIL_LOOK_AGAIN_NS;
		/* Kick gate: one look when the watch can decide (mw_seen +
		 * MAIL_STUCK_NS), not every MAIL_LOOK_AGAIN_NS: a victim that
		 * switches meanwhile restarts the watch anyway, and the rescue
		 * comes as early as before */
		if (gate_on() && w->mw_seen + MAIL_STUCK_NS > again)
			again = w->mw_seen + MAIL_STUCK_NS;
	} else if (wft_feat(STEAL)) {
		/* seq_cst, both: count ourselves deep first, then look
		 * whether anyone is awake; a worker that wakes up does
		 * nidle-- (seq_cst, idle_clear) and later reads ndeep
		 * (seq_cst) before leaving a thread in its next slot:
		 * either we see it awake and tick (or doze under a
		 * looker), or it sees us deep and kicks someone
		 * (wft_idle_strand_check). */
		atomic_fetch_add_explicit(&wft_rt.ndeep, 1, memory_order_seq_cst);
		*deep = true;
		/* ... or an OS thread makes bursts of wakes: tick too (see
		 * "Outside waker"; only with the Kick gate on) */
		weft_time_t now = wft_now();
		bool outside = outside_tick(w, now);

		if (outside || someone_awake()) {
			/* a draining worker does not look at victims
			 * (runtime/drain.c): it ticks for the drain rule,
			 * but must not hold the role others rely on */
			bool draining = wft_worker_draining(w);

			if (draining && looker_drop(w))
				wft_idle_wake_deep(w);
			if (draining || looker_claim(w) || gate_wants_tick(w, outside, now))
				return tick_instead(deep, now);
			again = now + DOZE_NS(wft_rt.nworkers);
			*doze = true;
		} else if (looker_drop(w)) {
			/* all idle, but a strander relied on us since our
			 * last clean look: it may have woken after our nidle
			 * load, with us the only idle worker to wake. Wake
			 * another if there is one, and look again anyway */
			wft_idle_wake_deep(w);
			return tick_instead(deep, now);
		}
		/* relaxed: a preference hint for wake_deep */
		atomic_store_explicit(&w->deep, true, memory_order_relaxed);
	}
	return again;
}

/* When the stack cache trim is due (cache_trim). The pool goes when every
 * worker sleeps: "deep" says so where STEAL counts it; without STEAL
 * nobody counts deep (the tick is a steal look), and the pool was never
 * trimmed while the runtime ran (test thread/stack_cache_trimmed_when_idle
 * under NO_STEAL). relaxed: a hint; a stale count trims a little early
 * (the next burst maps again) or at the next idle period. */
static weft_time_t park_trim_at(struct wft_worker *w, bool deep)
{
	bool all_idle = deep ||
		(!wft_feat(STEAL) &&
		 atomic_load_explicit(&wft_rt.nidle, memory_order_relaxed) >= wft_rt.nworkers);

	return cache_trim(w, all_idle);
}

/* The park's deadline: the next timer (TIMER_EARLY_NS ahead), a look
 * again soon, the idle tick, or the stack cache trim, whichever comes
 * first. *deep: this worker counted itself in ndeep (undone after the
 * sleep). Returns 0 if the next timer is too close to sleep at all. */
static weft_time_t park_deadline(struct wft_worker *w, bool look_again, bool watch_mail,
				 bool *deep)
{
	weft_time_t deadline, again, trim_at;
	bool doze = false;

	/* relaxed: only the owner arms timers on its heap, and it is here */
	deadline = atomic_load_explicit(&w->timers.next, memory_order_relaxed);
	if (deadline != WEFT_TIME_INFINITE) {
		/* Wake TIMER_EARLY_NS ahead and poll the rest (see there). */
		if (deadline <= wft_now() + TIMER_EARLY_NS)
			return 0;
		deadline -= TIMER_EARLY_NS;
	}
	again = park_again_at(w, look_again, watch_mail, deep, &doze);
	if (again < deadline) {
		deadline = again;
		w->tick_parked = !look_again && !watch_mail;
		w->tick_switches = wft_worker_switches(w);
	}
	trim_at = park_trim_at(w, *deep && !doze);
	/* Not tick_parked: the flag means the periodic look of the idle
	 * tick. A trim wakeup comes once per idle period; when the trim
	 * comes first but the flag was set above, that wakeup skips the spin
	 * too (nothing ran: it is not news of work either). */
	if (trim_at < deadline)
		deadline = trim_at;
	return deadline;
}

/* The park phase of the idle loop: announce idle, re-check every place
 * work could have arrived, sleep until the deadline or a kick, then
 * announce awake (see "Park" above). Context: w's owner. */
static void idle_park(struct wft_worker *w)
{
	weft_time_t deadline;
	bool look_again = false, watch_mail = false, deep = false;

	/* A worker that wake_one() handed the spinning slot gives it back
	 * first, also when IDLE_SPIN is off: a parked worker that kept it
	 * would leave nspinning at 1 forever, and every later wake_one()
	 * would assume someone is looking (with NO_IDLE_SPIN, stealing then
	 * never happened again). */
	wft_idle_spin_stop(w);
	idle_set(w);
	/* seq_cst: the store half of the Park pattern */
	atomic_exchange_explicit(&w->sleep, WFT_W_SLEEPING, memory_order_seq_cst);
	/* seq_cst fence: the re-checks below include relaxed loads (npriv in
	 * wft_runq_size with NO_MAILBOX, whose remote pushers fence and then
	 * read sleep). On aarch64 without LSE a seq_cst exchange is
	 * ldaxr/stlxr, which does not keep a later plain load from being
	 * satisfied before the SLEEPING store is visible; the fence does. */
	atomic_thread_fence(memory_order_seq_cst);
	/* Claimed by a wake_one() since idle_set(): it cleared our bit with a
	 * seq_cst CAS and then reads sleep (seq_cst, in the kick). Either it
	 * sees SLEEPING and kicks, or we see the bit clear here and do not
	 * sleep: we hold its spinning slot and must go looking. */
	if (idle_claimed(w))
		goto cancel;
	/* seq_cst loads: the load half (mailbox, victims, stop flag) */
	if (atomic_load_explicit(&w->mailbox.head, memory_order_seq_cst) || wft_next_peek(w) ||
	    wft_runq_size(w) > 0 ||
	    atomic_load_explicit(&wft_rt.stopping, memory_order_seq_cst))
		goto cancel;
	if (wft_feat(STEAL) && !wft_worker_draining(w) &&
	    park_recheck_victims(w, &look_again, &watch_mail))
		goto cancel;
	deadline = park_deadline(w, look_again, watch_mail, &deep);
	if (!deadline) {
		/* a timer is due: we will run it, not claim the role; an
		 * orphan RELIED left to spinners (we may have been one) goes
		 * to a deep or dozing worker. relaxed: as in found_work */
		if (atomic_load_explicit(&wft_rt.looker, memory_order_relaxed) == LOOKER_RELIED)
			wft_idle_wake_deep(w);
		goto cancel;
	}
	wft_stat_inc(w, parks);
	/* relaxed: read by gated wakers after their seq_cst load of our
	 * SLEEPING ("Kick gate"); only a bounded park may be left waiting */
	atomic_store_explicit(&w->park_until, deadline, memory_order_relaxed);
	if (gate_hand_over(w)) {
		/* relaxed: as below */
		atomic_store_explicit(&w->park_until, 0, memory_order_relaxed);
		goto cancel_deep;
	}
	if (w->ring)
		wft_uring_wait(w, deadline);
	else
		wft_futex_wait(&w->sleep, WFT_W_SLEEPING, deadline);
	/* relaxed: before our AWAKE exchange below ("Kick gate") */
	atomic_store_explicit(&w->park_until, 0, memory_order_relaxed);
cancel_deep:
	if (deep) {
		/* relaxed: a hint (see wft_idle_wake_deep) */
		atomic_store_explicit(&w->deep, false, memory_order_relaxed);
		/* relaxed: a count; the protocol needs only the increment's
		 * order (a stale high value costs one extra wake) */
		atomic_fetch_sub_explicit(&wft_rt.ndeep, 1, memory_order_relaxed);
	}
cancel:
	/* seq_cst: our own word, and the store half of the Kick chain
	 * pattern (a chain kicker that saw SLEEPING or KICKED relies on our
	 * chain step's load coming after it). A late kicker's CAS fails
	 * harmlessly. A kick is news of work: the next idle round may spin
	 * again. */
	if (atomic_exchange_explicit(&w->sleep, WFT_W_AWAKE, memory_order_seq_cst) == WFT_W_KICKED) {
		w->tick_parked = false;
		/* relaxed: the kicker's count ("Kick gate") */
		atomic_fetch_sub_explicit(&wft_rt.nkicked, 1, memory_order_relaxed);
	}
	idle_clear(w);
	wft_idle_kick_chain(w, KICK_CHAIN_FANOUT);
}

/* One round of the idle loop, in its phases: DRAIN's check, steal, spin
 * (idle_spin), park (idle_park). Context: w's owner, from the scheduler
 * loop when nothing is runnable. */
void wft_idle_run(struct wft_worker *w)
{
	struct weft_thread *t;
	bool quiet_tick;

	wft_drain_idle(w);
	looker_look(w);
	t = try_steal(w);
	if (t) {
		found_work(w, t);
		return;
	}

	/* After a park that only had the idle tick as deadline, look once
	 * (the steal above) and park again without spinning: the tick is a
	 * periodic look, not news of work (see "Idle tick"). Unless this
	 * worker ran a thread since that park: work that came without a kick
	 * (an I/O completion's wakeup, mail its own pick found) is news of
	 * work like a kick, and the round spins as usual. Not with the kick
	 * gate on: there a tick wake that finds mail is often a kick the gate
	 * left pending because no CPU was free, and a spin would take a CPU
	 * from a worker that has work (oversubscribed, as before). */
	quiet_tick = w->tick_parked &&
		     (gate_on() || wft_worker_switches(w) == w->tick_switches);
	w->tick_parked = false;
	/* a draining worker would not steal (runtime/drain.c): no spin */
	if (!quiet_tick && wft_feat(IDLE_SPIN) && !wft_worker_draining(w) && spin_allowed() &&
	    idle_spin(w))
		return;
	idle_park(w);
}

/* The kick proper: elect one kicker (SLEEPING -> KICKED) and make the
 * wake syscall. s: w->sleep as just read (seq_cst) by the caller. */
static int kick_now(struct wft_worker *w, uint32_t s)
{
	if (s != WFT_W_SLEEPING)
		return s == WFT_W_AWAKE ? WFT_KICK_AWAKE : WFT_KICK_UNDERWAY;
	/* seq_cst on success: the CAS elects one kicker. The chain argument
	 * ("Kick chain") rests on the caller's seq_cst load: it read SLEEPING,
	 * so it precedes the worker's AWAKE exchange in the total order, and
	 * an UNDERWAY reported by a failed CAS (relaxed: a value to report
	 * only) was seen after that load. seq_cst on the CAS is not needed by
	 * it; kept, as the syscall that follows costs far more. */
	if (!atomic_compare_exchange_strong_explicit(&w->sleep, &s, WFT_W_KICKED,
			memory_order_seq_cst, memory_order_relaxed))
		return s == WFT_W_AWAKE ? WFT_KICK_AWAKE : WFT_KICK_UNDERWAY;
	/* relaxed: a count for the Kick gate's demand, a hint (see there);
	 * undone by w when its AWAKE exchange returns KICKED */
	atomic_fetch_add_explicit(&wft_rt.nkicked, 1, memory_order_relaxed);
	wft_stat_inc_any(wft_worker_self(), kicks);
	if (w->ring)
		wft_uring_kick(w);
	else
		wft_futex_wake(&w->sleep, 1);
	return WFT_KICK_SENT;
}

int wft_idle_kick_r(struct wft_worker *w)
{
	/* seq_cst: the load half of the waker's side of the Park pattern */
	uint32_t s = atomic_load_explicit(&w->sleep, memory_order_seq_cst);

	if (s == WFT_W_SLEEPING && gate_defer(w))
		return gate_leave(w);
	return kick_now(w, s);
}

void wft_idle_kick(struct wft_worker *w)
{
	(void)wft_idle_kick_r(w);
}

/*
 * Kick chain: one wake syscall per burst, whatever the number of parked
 * targets (the pinned wakees of a wake-queue flush over many workers).
 * The waker pushes every group into its target's mailbox, as always; of
 * the targets it must kick (mailbox was empty, target SLEEPING) it kicks
 * two at most (the head, at the end, and the first other one at once:
 * wake.c KICK_BURST_DIRECT) and leaves the others in rt.kick_pending
 * (a bit each). A directly kicked target needs no argument: it is the
 * ordinary push-then-kick of "Park".
 * Every worker that leaves the park path (the cancel label above, after
 * its seq_cst store of AWAKE) takes up to KICK_CHAIN_FANOUT pending bits
 * and kicks those workers: a tree of wakes, log2(targets) deep, each
 * syscall made by a worker that was woken for it rather than by the
 * waker (Go's wakep chain, for workers that must wake because their
 * threads are pinned there).
 *
 * The race to survive: a pending bit that nobody will ever take, with
 * its worker asleep on a non-empty mailbox. The invariant: while a bit is
 * set, some chain step that has not yet read the pending word is still
 * to come. Each setter provides one: it sets its bits (seq_cst), then
 * kicks its head; if the head was SLEEPING or KICKED at the kick's
 * seq_cst load, the head has yet to store AWAKE, which comes after that
 * load in the single total order, and its chain step's load comes after
 * that, so it sees the bits (or whoever took them first took the duty
 * with them). If the head was AWAKE, it may never park again (a busy
 * worker), so the setter runs the chain step itself (fanout 1). A chain
 * step either finds the word empty or starts runners the same way (a
 * bit whose worker turns out AWAKE starts nobody, so the step takes
 * another bit instead), so the duty is passed on until the word is
 * empty. A bit for a worker that woke by itself costs one useless look
 * (its sleep word is AWAKE: no syscall); a kick for a worker that parked
 * again in between is a spurious wake, never a lost one (its own re-check
 * already saw its mail).
 * Cost: one RMW on the pending word per deferred target and per take
 * (O(1) per target, no scan); a chain step that finds nothing is one load.
 */
void wft_idle_kick_defer(struct wft_worker *w)
{
	/* seq_cst: the store half (see above) */
	atomic_fetch_or_explicit(&wft_rt.kick_pending[w->id / 64], 1ull << (w->id % 64),
				 memory_order_seq_cst);
}

/* Where the next take starts looking (the gate on: round robin). relaxed:
 * a hint; two takers that read the same value compete for the same bit,
 * and the CAS below elects one. */
static _Atomic unsigned take_from;

/* Take one pending bit, or -1. With the gate on the search starts after
 * the last bit taken, so that pending workers are handed CPUs in turn
 * (the lowest ids first would take every hand-over while the others wait
 * for their tick); otherwise from bit 0. */
static int kick_take(void)
{
	int nw = (wft_rt.nworkers + 63) / 64;
	unsigned from = 0;

	if (gate_on())
		from = atomic_load_explicit(&take_from, memory_order_relaxed) %
		       (unsigned)wft_rt.nworkers;
	/* nw + 1 words: the first word is looked at twice, from `from` up,
	 * then (at the end of the round) below it */
	for (int k = 0; k <= nw; k++) {
		int i = (int)((from / 64 + (unsigned)k) % (unsigned)nw);
		/* bits of word i still to look at in this round */
		uint64_t want = k == 0 ? ~0ull << (from % 64) :
				k == nw ? ~(~0ull << (from % 64)) : ~0ull;
		/* seq_cst: the load half of the chain pattern */
		uint64_t m = atomic_load_explicit(&wft_rt.kick_pending[i], memory_order_seq_cst);

		while (m & want) {
			int b = __builtin_ctzll(m & want);

			/* seq_cst: as the load; exactly one taker wins a bit */
			if (atomic_compare_exchange_weak_explicit(&wft_rt.kick_pending[i], &m,
					m & ~(1ull << b), memory_order_seq_cst, memory_order_seq_cst)) {
				if (gate_on())
					atomic_store_explicit(&take_from, (unsigned)(i * 64 + b + 1),
							      memory_order_relaxed);
				return i * 64 + b;
			}
		}
	}
	return -1;
}

void wft_idle_kick_chain(struct wft_worker *self, int runners)
{
	int b;

	while (runners > 0 && (b = kick_take()) >= 0) {
		int r = wft_idle_kick_r(wft_rt.workers[b]);

		if (r == WFT_KICK_SENT)
			wft_stat_inc_any(self, chain_kicks);
		if (r != WFT_KICK_AWAKE)
			runners--;
	}
}

int wft_idle_kick_burst(struct wft_worker *self, struct wft_worker *head)
{
	int r = wft_idle_kick_r(head);

	if (r == WFT_KICK_AWAKE)
		wft_idle_kick_chain(self, 1);
	return r;
}

/* A rare event concerns every worker (a thread waits for a stack: worker.c
 * "Stack shortage"): wake the ones that sleep, so that they pick. */
void wft_idle_kick_peers(struct wft_worker *self)
{
	for (int i = 0; i < wft_rt.nworkers; i++)
		if (wft_rt.workers[i] != self)
			wft_idle_kick(wft_rt.workers[i]);
}

void wft_idle_kick_force(struct wft_worker *w)
{
	/* seq_cst: stop/shutdown path; must not be lost either. An exchange,
	 * so that a SLEEPING worker is counted as kicked like any other
	 * ("Kick gate": it uncounts itself when it reads KICKED) */
	if (atomic_exchange_explicit(&w->sleep, WFT_W_KICKED, memory_order_seq_cst) == WFT_W_SLEEPING)
		atomic_fetch_add_explicit(&wft_rt.nkicked, 1, memory_order_relaxed);
	if (w->ring)
		wft_uring_kick(w);
	wft_futex_wake(&w->sleep, 1);
}

/* wake_one's scan. prefer_deep: claim a worker parked without the idle
 * tick if there is one (a ticking worker will look by itself within a
 * millisecond; waking it instead would leave ndeep > 0, and every later
 * strand check would wake it again). */
static void wake_pick(struct wft_worker *self, bool prefer_deep)
{
	int zero = 0;

	/* Only one waker at a time gets a worker spinning (Go's wakep). */
	if (!atomic_compare_exchange_strong_explicit(&wft_rt.nspinning, &zero, 1,
			memory_order_seq_cst, memory_order_relaxed))
		return;
	if (self)
		wft_runq_publish_owner(self);
	for (int i = 0; i < (wft_rt.nworkers + 63) / 64; i++) {
		/* relaxed: the CAS below claims a bit */
		uint64_t m = atomic_load_explicit(&wft_rt.idle_mask[i], memory_order_relaxed);
		/* bits we pass over (ourselves, a draining worker): kept apart
		 * from m, which is the CAS's expected value (clearing them in m
		 * would make the CAS fail and reload them forever) */
		uint64_t skip = 0;

		while (m & ~skip) {
			uint64_t cand = m & ~skip;
			int b;
			struct wft_worker *v;

			if (prefer_deep) {
				uint64_t d = 0;

				for (uint64_t r = cand; r; r &= r - 1) {
					int k = __builtin_ctzll(r);

					/* relaxed: a preference hint */
					if (atomic_load_explicit(&wft_rt.workers[i * 64 + k]->deep,
								 memory_order_relaxed))
						d |= 1ull << k;
				}
				if (d)
					cand = d;
			}
			b = __builtin_ctzll(cand);
			v = wft_rt.workers[i * 64 + b];
			/* relaxed deep: a hint, as in the preference above */
			if (v == self || (wft_worker_draining(v) &&
					  !atomic_load_explicit(&v->deep, memory_order_relaxed))) {
				/* DRAIN: it would not steal, and it ticks, so it
				 * runs the drain rule by itself; a deep sleeper is
				 * woken (it may be the only one that would notice
				 * the drain is over, runtime/drain.c) */
				skip |= 1ull << b;
				continue;
			}
			/* seq_cst: the store half of the claim pattern; the kick's
			 * seq_cst load of v->sleep is the load half (see Park) */
			if (atomic_compare_exchange_weak_explicit(&wft_rt.idle_mask[i], &m,
					m & ~(1ull << b), memory_order_seq_cst, memory_order_relaxed)) {
				/* seq_cst: v's share of the nidle decrement that the
				 * ndeep pattern relies on (see Idle tick): v skips its
				 * own in idle_clear() */
				atomic_fetch_sub_explicit(&wft_rt.nidle, 1, memory_order_seq_cst);
				/* v inherits our spinning slot: it finds its bit
				 * clear in idle_clear() and sets its own flag */
				if (wft_idle_kick_r(v) == WFT_KICK_SENT)
					wft_stat_inc_any(self, chain_kicks);
				return;
			}
		}
	}
	/* nobody idle after all */
	atomic_fetch_sub_explicit(&wft_rt.nspinning, 1, memory_order_relaxed);
}

void wft_idle_wake_one(struct wft_worker *self)
{
	wake_pick(self, false);
}

void wft_idle_wake_deep(struct wft_worker *self)
{
	wake_pick(self, true);
}
