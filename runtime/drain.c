/*
 * runtime/drain.c - giving CPUs back under contention (the DRAIN switch,
 * on by default; WEFT_FEATURES=NO_DRAIN turns it off).
 *
 * What it owns
 *   The per-worker run-delay sample, the runtime's count of draining
 *   workers (rt.ndrain) and the rule that changes it.
 *
 * The problem
 *   One worker per CPU assumes the CPUs are ours. When they are shared (a
 *   load generator on the same machine, a build, another server), a worker
 *   that wakes takes its CPU share from whoever runs there, and the kernel
 *   time-slices them. On the 2-vCPU machines this project measures on, the
 *   echo ping-pong client (examples/echo-client, one busy epoll thread) and
 *   a 2-worker weft server are three runnable threads on two CPUs: every
 *   wake of the second worker preempts the client, which is the bottleneck,
 *   and connections on a descheduled worker wait a time slice (p99 above
 *   1 ms). The measurements are in docs/design.md "DRAIN".
 *
 * The signal
 *   The kernel counts, per thread, the time it was runnable but waiting for
 *   a CPU (run_delay, field 2 of /proc/thread-self/schedstat). Each worker
 *   reads its own at most every DRAIN_SAMPLE_NS, when it enters its idle
 *   loop (a pread on a descriptor opened at worker start, ~1-2 us: under
 *   0.2% of a CPU), and publishes the waited fraction of the window in
 *   per-mille (delay_pm, with its time). A worker that never goes idle
 *   publishes nothing and counts as not waiting: the rule only ever drains
 *   on evidence. Rejected: the idle spin's lost-time sample (idle.c
 *   "Contended CPUs"): taken only while spinning, one phase in four, it saw
 *   contention in 5% of the decisions of the echo run above, where the
 *   run delay saw it in 77%.
 *
 * The rule (run by the worker that wins the CAS moving rt.drain_next, at
 * most one per DRAIN_PERIOD_NS, and then only if it also takes the try-lock
 * rt.drain_busy: the state below is plain memory owned by the lock holder;
 * a holder preempted for a while just leaves the rule unrun meanwhile)
 *   Run delay only says that the CPUs are shared, not whether our share is
 *   worth taking (docs/design.md "DRAIN" has the case that shows it: a
 *   server that needs more than one CPU). So the delay only starts an
 *   experiment, and throughput decides: the rate of thread switches,
 *   summed over all workers (every request of a server, every wake of a
 *   waiting thread, is one), measured over DRAIN_WIN_NS with the
 *   current number of draining workers (the base) and then again with one
 *   more (or one fewer) after DRAIN_SETTLE_NS for the threads to move (the
 *   trial). Fewer workers must win clearly (DRAIN_GAIN_PCT): on a tie the
 *   runtime keeps its workers, so a program that switches little (pure
 *   computation) never drains.
 *   D = the sum of the fresh delay_pm of the active workers (not draining).
 *   - NORMAL (nobody drains): D >= DRAIN_RAISE_PM (our workers together
 *     wait half a CPU or more) and the backoff is over -> probe +1.
 *     D < DRAIN_RAISE_PM resets the backoff (the contention went away).
 *   - probe +1 won -> HELD for rt.drain.hold (from DRAIN_HOLD_NS when it
 *     starts from NORMAL); lost -> back, and from NORMAL the next probe
 *     waits the backoff, which doubles (DRAIN_BACKOFF_NS up to
 *     DRAIN_BACKOFF_MAX_NS) so a server that needs its CPUs loses a
 *     DRAIN_WIN_NS trial every few seconds at most.
 *   - HELD, once the hold is over: D still >= DRAIN_RAISE_PM, a worker
 *     left to drain and the last probe was not a +1 that lost -> probe +1;
 *     else probe -1. A probe that confirms the drain as it is (a -1 that
 *     loses: the drained runtime was faster; a +1 that loses) doubles the
 *     hold (up to DRAIN_HOLD_MAX_NS); a -1 that wins goes to NORMAL (with
 *     the backoff) or stays HELD with one fewer.
 *   - A window that ran much longer than planned (no worker went idle to
 *     close it: the runtime slept, or was busy throughout) says nothing:
 *     the probe is dropped and ndrain goes back to where it began.
 *   The controller reads the clock under the try-lock, so its windows are
 *   measured with one clock read per boundary, in order.
 *   The draining workers are the ndrain highest ids (wft_worker_draining):
 *   no per-worker state to keep consistent, and worker 0 never drains.
 *   Rejected: a threshold rule alone (drain at D >= 500, undrain at
 *   D < 100): right for the echo client, 30% wrong for wrk.
 *
 * What a draining worker does
 *   - Wakes of an unpinned thread whose last worker drains go to an active
 *     worker instead (wake.c wft_wake_target; the id modulo the active
 *     count, so several draining workers spread their threads). Its I/O
 *     completions, timers and wakes from elsewhere all pass there, so its
 *     threads leave as they block and wake; the next I/O they submit goes
 *     to their new worker's ring. Counted in the stat drain_moves.
 *   - It does not steal or spin when idle, and wake_one does not kick it
 *     for surplus unless it sleeps deep (idle.c wake_pick: a ticking one
 *     runs the rule by itself at its tick; a deep one may be the only
 *     worker left to notice that the drain is over).
 *   - Pinned threads stay (the pin wins), and so do threads running or
 *     queued there now, sync wakeups (the wakee takes the waker's place,
 *     wake.c) and an exit straight into a joiner (worker.c).
 *   Nothing here can lose a thread: the switch only chooses the target of
 *   the normal wake path and skips optional work (steals, spins, surplus
 *   kicks); active workers' idle ticks still look at every victim, draining
 *   ones included, so a thread queued on a draining worker is stolen if it
 *   waits there. It can delay one: a moved thread goes to the target's
 *   mailbox, which thieves do not take from, so it waits for the target's
 *   next scheduling point, where on its own idle worker it would have run
 *   at once (a thread that never yields holds the target that long: the
 *   cooperative limit of README "Limits worth knowing"). The same limit
 *   hit locks: with every contender of a mutex on the one active worker,
 *   a woken waiter sits in the unlocker's next slot while the unlocker
 *   relocks, and a probe's trial (2 x DRAIN_WIN_NS + DRAIN_SETTLE_NS)
 *   left a long wait queue advancing one waiter per millisecond (I7's
 *   PICKUP). The mutex hands such a waiter the lock after a short turn
 *   (sync/mutex.c "Stuck woken waiter"), so a probe does not strand it.
 *   DRAIN needs STEAL (WFT_DRAIN_ON): without it idle workers do not tick,
 *   and a draining worker asleep for good would never lower ndrain.
 *
 * Limits
 *   Measured on two workers only (figures: docs/design.md "DRAIN"); the
 *   first probe costs the first ~0.2-0.5 s of a contended run. On a
 *   machine with nothing else running the run delay stays low and the
 *   rule never probes.
 *
 * Atomics: delay_pm/delay_at, ndrain, drain_next and the switch counters
 * are hints, all relaxed: a stale value makes one decision one period late
 * or skews one window by a few switches. rt.drain_busy is a try-lock
 * (acquire CAS, release store) around the controller state rt.drain.
 */
#include "runtime/wft.h"

#include <fcntl.h>
#include <unistd.h>

#define DRAIN_SAMPLE_NS 1000000ull
#define DRAIN_PERIOD_NS 2000000ull
#define DRAIN_FRESH_NS (4 * DRAIN_PERIOD_NS)
#define DRAIN_RAISE_PM 500
/* Windows: long enough to hold a few thousand switches of a server at
 * tens of thousands of requests per second, and to average over the
 * kernel's time slices (a few ms); short enough that a losing trial costs
 * little. The settle time lets the moved threads wake once. */
#define DRAIN_WIN_NS 50000000ull
#define DRAIN_SETTLE_NS 10000000ull
#define DRAIN_GAIN_PCT 10
#define DRAIN_HOLD_NS 200000000ull
#define DRAIN_HOLD_MAX_NS 3200000000ull
#define DRAIN_BACKOFF_NS 500000000ull
#define DRAIN_BACKOFF_MAX_NS 8000000000ull
#define DRAIN_QUIET_NS 1000000000ull

enum { DRAIN_NORMAL, DRAIN_HELD, DRAIN_WINDOW, DRAIN_SETTLE };

void wft_drain_worker_start(struct wft_worker *w)
{
	w->ss_fd = WFT_DRAIN_ON() ? open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC) : -1;
	w->ss_wall = 0;
	w->ss_delay = 0;
}

void wft_drain_worker_stop(struct wft_worker *w)
{
	if (w->ss_fd >= 0)
		close(w->ss_fd);
	w->ss_fd = -1;
}

/* Our run delay so far (ns), or -1. */
static int64_t read_delay(struct wft_worker *w)
{
	char buf[96];
	ssize_t k = pread(w->ss_fd, buf, sizeof(buf) - 1, 0);
	unsigned long long run, delay;

	if (k <= 0)
		return -1;
	buf[k] = 0;
	if (sscanf(buf, "%llu %llu", &run, &delay) != 2)
		return -1;
	return (int64_t)delay;
}

/* a - b as a signed span: a sample taken after our clock read is fresh,
 * not 584 years old */
static int64_t span(uint64_t a, uint64_t b)
{
	return (int64_t)(a - b);
}

/* Thread switches so far, all workers. */
static uint64_t switches(void)
{
	uint64_t sum = 0;

	for (int i = 0; i < wft_rt.nworkers; i++)
		/* relaxed: a counter its worker bumps with relaxed stores
		 * (wft_stat_add); a window is off by a few switches at most */
		sum += atomic_load_explicit((_Atomic uint64_t *)&wft_rt.workers[i]->stats.switches,
					    memory_order_relaxed);
	return sum;
}

/* D: the fresh run-delay per-mille of the active workers, summed. */
static unsigned delay_sum(weft_time_t now, int nd)
{
	unsigned d = 0;

	for (int i = 0; i < wft_rt.nworkers - nd; i++) {
		struct wft_worker *v = wft_rt.workers[i];
		/* relaxed: a sample and its time; a torn pair (new time, old
		 * value) counts one old sample once */
		uint64_t at = atomic_load_explicit(&v->delay_at, memory_order_relaxed);

		if (at && span(now, at) < (int64_t)DRAIN_FRESH_NS)
			d += atomic_load_explicit(&v->delay_pm, memory_order_relaxed);
	}
	return d;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* relaxed: ndrain is a hint for the workers (see "Atomics"); only the
 * lock holder writes it */
static void set_ndrain(int nd)
{
	atomic_store_explicit(&wft_rt.ndrain, nd, memory_order_relaxed);
}

/* A probe's windows, in order: the current ndrain (A), the changed one
 * (B) twice, A again. ABBA: a load that drifts linearly over the probe
 * weighs on both sides alike. */
static int probe_cfg(int k)
{
	return k == 1 || k == 2;
}

/* Start a probe: its first window, with the current ndrain. */
static void probe(struct wft_worker *w, struct wft_drain_ctl *c, int dir, int nd, weft_time_t now)
{
	wft_stat_inc(w, drain_probes);
	c->dir = dir;
	c->nd0 = nd;
	c->k = 0;
	c->sw[0] = c->sw[1] = 0;
	c->ns[0] = c->ns[1] = 0;
	c->phase = DRAIN_WINDOW;
	c->t0 = now;
	c->s0 = switches();
}

/* The probe's windows are over (ndrain is back at nd0): keep the change
 * or not. */
static void decide(struct wft_worker *w, struct wft_drain_ctl *c, weft_time_t now)
{
	/* rates of A (the old ndrain) and B (the changed one), compared
	 * without dividing (whole switches per ms are too coarse at low
	 * rates): ra ~ sw[0] * ns[1], rb ~ sw[1] * ns[0].
	 * Under 2^64: switches per window times window ns stays far below
	 * it (10^7 switches x 10^8 ns x 110 = 10^17). */
	uint64_t ra = c->sw[0] * c->ns[1], rb = c->sw[1] * c->ns[0];
	/* To drain one more, the configuration with fewer workers must win
	 * by DRAIN_GAIN_PCT (and by something: 0 switches against 0 is a
	 * tie); to stay drained, it must not lose (hysteresis: a drain that
	 * paid is not dropped on a noisy tie). */
	bool drained_wins = c->dir > 0 ? rb > ra && rb * 100 >= ra * (100 + DRAIN_GAIN_PCT)
				       : ra > 0 && ra >= rb;
	int nd = c->nd0 + (drained_wins ? (c->dir > 0) : -(c->dir < 0));

	set_ndrain(nd);
	if (nd > c->nd0)
		wft_stat_inc(w, drain_raises);
	if (nd == 0) {
		/* a +1 from NORMAL that lost backs off further; a -1 that won
		 * starts the backoff where it is */
		c->phase = DRAIN_NORMAL;
		c->until = now + c->backoff;
		if (c->dir > 0)
			c->backoff = min_u64(c->backoff * 2, DRAIN_BACKOFF_MAX_NS);
		return;
	}
	if (c->dir > 0 && drained_wins && c->nd0 == 0)
		c->hold = DRAIN_HOLD_NS;          /* a new drain */
	else if (!(c->dir > 0 && drained_wins))
		/* the drain as it is was confirmed: by a -1 that lost, or a
		 * +1 that lost (more than two workers; then the next probe
		 * goes down rather than repeat the losing +1) */
		c->hold = min_u64(c->hold * 2, DRAIN_HOLD_MAX_NS);
	c->down_next = c->dir > 0 && !drained_wins;
	c->phase = DRAIN_HELD;
	c->until = now + c->hold;
}

/* The rule (see above). Context: the worker holding rt.drain_busy. */
static void control(struct wft_worker *w, weft_time_t now)
{
	struct wft_drain_ctl *c = &wft_rt.drain;
	int n = wft_rt.nworkers;
	/* relaxed: only we write it (see "Atomics") */
	int nd = atomic_load_explicit(&wft_rt.ndrain, memory_order_relaxed);
	unsigned d;
	uint64_t sw;

	if (!c->backoff)
		c->backoff = DRAIN_BACKOFF_NS;
	/* A window or settle time much longer than planned spanned a spell
	 * without idle entries (the runtime went idle for good, or busy for
	 * good): its rate says nothing about the configuration (a +1 probe's
	 * A window stretched over a quiet spell would look slow, and drain
	 * for nothing). Drop the probe, back to where it began. */
	if (c->phase >= DRAIN_WINDOW && now - c->t0 > 2 * DRAIN_WIN_NS) {
		set_ndrain(c->nd0);
		c->phase = c->nd0 ? DRAIN_HELD : DRAIN_NORMAL;
		c->until = now + DRAIN_BACKOFF_NS;   /* let the load settle first */
		return;
	}
	switch (c->phase) {
	case DRAIN_NORMAL:
	case DRAIN_HELD:
		d = delay_sum(now, nd);
		/* the backoff restarts after DRAIN_QUIET_NS without
		 * contention (one low sample among high ones is noise) */
		if (d >= DRAIN_RAISE_PM)
			c->quiet_since = 0;
		else if (!c->quiet_since)
			c->quiet_since = now;
		else if (c->phase == DRAIN_NORMAL && span(now, c->quiet_since) >= (int64_t)DRAIN_QUIET_NS)
			c->backoff = DRAIN_BACKOFF_NS;
		if (span(now, c->until) < 0)
			break;
		if (d >= DRAIN_RAISE_PM && nd < n - 1 && !c->down_next)
			probe(w, c, +1, nd, now);
		else if (nd > 0)
			probe(w, c, -1, nd, now);
		c->down_next = false;
		break;
	case DRAIN_WINDOW:
		if (now - c->t0 < DRAIN_WIN_NS)
			break;
		sw = switches();
		c->sw[probe_cfg(c->k)] += sw - c->s0;
		c->ns[probe_cfg(c->k)] += now - c->t0;
		if (++c->k == 4) {
			decide(w, c, now);
			break;
		}
		c->t0 = now;
		c->s0 = sw;
		if (probe_cfg(c->k) != probe_cfg(c->k - 1)) {
			set_ndrain(c->nd0 + (probe_cfg(c->k) ? c->dir : 0));
			c->phase = DRAIN_SETTLE;
		}
		break;
	case DRAIN_SETTLE:
		if (now - c->t0 < DRAIN_SETTLE_NS)
			break;
		c->phase = DRAIN_WINDOW;
		c->t0 = now;
		c->s0 = switches();
		break;
	}
}

void wft_drain_idle(struct wft_worker *w)
{
	weft_time_t now;
	uint64_t next;
	int64_t delay;

	if (w->ss_fd < 0)
		return;
	now = wft_now();
	if (now - w->ss_wall < DRAIN_SAMPLE_NS)
		return;
	delay = read_delay(w);
	if (delay < 0) {
		/* unreadable after all: stop sampling (this worker then counts
		 * as not waiting) */
		wft_drain_worker_stop(w);
		return;
	}
	/* a window much longer than a sample period (the worker was busy, or
	 * asleep, meanwhile) says little about now: start a new one */
	if (w->ss_wall && now - w->ss_wall <= DRAIN_FRESH_NS && (uint64_t)delay >= w->ss_delay) {
		uint64_t pm = ((uint64_t)delay - w->ss_delay) * 1000 / (now - w->ss_wall);

		/* relaxed: hints for the controller (see "Atomics") */
		atomic_store_explicit(&w->delay_pm, (uint32_t)(pm > 1000 ? 1000 : pm),
				      memory_order_relaxed);
		atomic_store_explicit(&w->delay_at, now, memory_order_relaxed);
	}
	w->ss_delay = (uint64_t)delay;
	w->ss_wall = now;
	/* WEFT_FAULT=drainfix:N holds ndrain (runtime/fault.h) */
	if (wft_unlikely(atomic_load_explicit(&wft_fault_drainfix, memory_order_relaxed)))
		return;
	/* relaxed: the CAS only elects this period's controller; what it
	 * reads is hints */
	next = atomic_load_explicit(&wft_rt.drain_next, memory_order_relaxed);
	if (span(now, next) < 0 || !atomic_compare_exchange_strong_explicit(&wft_rt.drain_next,
			&next, now + DRAIN_PERIOD_NS, memory_order_relaxed, memory_order_relaxed))
		return;
	/* acquire: the previous holder's writes to rt.drain happen before
	 * ours; pairs with the release store below */
	if (atomic_exchange_explicit(&wft_rt.drain_busy, 1, memory_order_acquire))
		return;
	/* the clock again: we may have been preempted since the read above
	 * (likely: probes run when the workers wait for CPUs), and a window
	 * boundary a few ms off skews a 50 ms window. Later
	 * than every earlier holder's, which read theirs under the lock. */
	control(w, wft_now());
	/* release: publishes rt.drain to the next holder */
	atomic_store_explicit(&wft_rt.drain_busy, 0, memory_order_release);
}
