/*
 * runtime/drain.c - giving CPUs back under contention (the DRAIN switch,
 * off by default: an experiment, see "Status").
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
 *   1 ms). Measured (session 9, 10 connections, 3 s runs alternating,
 *   medians of 8): weft with 2 workers 55k round trips/s, the epoll server
 *   90k (its EPOLLEXCLUSIVE accept hands every connection to one of its two
 *   threads, so it runs on one CPU already), weft with DRAIN 83k; in an
 *   earlier run of 5 rounds WEFT_WORKERS=1 gave 80-107k against 58-63k.
 *   At 100 connections (6 rounds): 66k, 73k and 80k, p99 7.0, 5.6 and
 *   4.5 ms.
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
 * The rule (run by the worker whose CAS moves rt.drain_next, so at most
 * one is elected per DRAIN_PERIOD_NS; a controller preempted past the next
 * period may run alongside the next one, harmlessly: each writes ndrain
 * one step from a value it read in range, so it stays in [0, n - 1])
 *   D = the sum of the fresh delay_pm of the active workers (not draining).
 *   - D >= DRAIN_RAISE_PM (our workers together wait half a CPU or more):
 *     one more worker drains (ndrain++, at most nworkers - 1); hold it for
 *     rt.drain_hold.
 *   - D < DRAIN_LOWER_PM and the hold is over: one fewer drains (ndrain--).
 *   - A raise within 2 x hold of the last lowering doubles the hold (up to
 *     DRAIN_HOLD_MAX_NS), so a contention that comes back as soon as the
 *     worker does makes the worker stay out longer; a raise after a quiet
 *     spell starts again from DRAIN_HOLD_NS.
 *   The draining workers are the ndrain highest ids (wft_worker_draining):
 *   no per-worker state to keep consistent, and worker 0 never drains.
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
 *   cooperative limit of README "Limits worth knowing").
 *   DRAIN needs STEAL (WFT_DRAIN_ON): without it idle workers do not tick,
 *   and a draining worker asleep for good would never lower ndrain.
 *
 * Status
 *   Off by default (WEFT_FEATURES=DRAIN turns it on), because the rule is
 *   not right yet: run delay says the CPUs are shared, not whether our
 *   share of them is worth taking. It pays when the other runnable work is
 *   what feeds us and is the bottleneck (the echo client above). It loses
 *   when the server needs more than one CPU and the load generator can
 *   spare some: examples/run-http.sh (wrk -t2, 50 connections, median of
 *   2, session 9) gave weft 67.8k requests/s without DRAIN and 47.9k with
 *   it (nginx 59-63k); at 1,000 connections 68.7k and 47.1k in one run.
 *   Next: keep a worker only while it adds throughput (compare the
 *   runtime's completed work per second with and without it, the way an
 *   adaptive GOMAXPROCS would), rather than a threshold on waiting. Also
 *   open: the CI runs the suites in parallel on two loaded CPUs, where it
 *   would drain worker 1 for most of the run; and the rule has only been
 *   measured on two workers.
 *
 * Atomics: delay_pm/delay_at, ndrain, drain_next and the drain_hold
 * fields are hints, all relaxed: a stale value makes one decision one
 * period late, and every decision is taken again at the next period.
 */
#include "runtime/wft.h"

#include <fcntl.h>
#include <unistd.h>

#define DRAIN_SAMPLE_NS 1000000ull
#define DRAIN_PERIOD_NS 2000000ull
#define DRAIN_FRESH_NS (4 * DRAIN_PERIOD_NS)
#define DRAIN_RAISE_PM 500
#define DRAIN_LOWER_PM 100
#define DRAIN_HOLD_NS 20000000ull
#define DRAIN_HOLD_MAX_NS 640000000ull

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

/* The rule (see above). Context: the elected worker's idle loop. */
static void control(weft_time_t now)
{
	int n = wft_rt.nworkers;
	/* relaxed, all five: hints (see "Atomics") */
	int nd = atomic_load_explicit(&wft_rt.ndrain, memory_order_relaxed);
	uint64_t hold_until = atomic_load_explicit(&wft_rt.drain_hold_until, memory_order_relaxed);
	uint64_t hold = atomic_load_explicit(&wft_rt.drain_hold, memory_order_relaxed);
	uint64_t lowered = atomic_load_explicit(&wft_rt.drain_lowered, memory_order_relaxed);
	unsigned d = 0;

	for (int i = 0; i < n - nd; i++) {
		struct wft_worker *v = wft_rt.workers[i];
		/* relaxed: a sample and its time; a torn pair (new time, old
		 * value) counts one old sample once */
		uint64_t at = atomic_load_explicit(&v->delay_at, memory_order_relaxed);

		if (at && span(now, at) < (int64_t)DRAIN_FRESH_NS)
			d += atomic_load_explicit(&v->delay_pm, memory_order_relaxed);
	}
	if (d >= DRAIN_RAISE_PM && nd < n - 1) {
		if (!hold || !lowered || span(now, lowered) > (int64_t)(2 * hold))
			hold = DRAIN_HOLD_NS;
		else if (hold < DRAIN_HOLD_MAX_NS)
			hold *= 2;
		/* relaxed: hints, as above */
		atomic_store_explicit(&wft_rt.drain_hold, hold, memory_order_relaxed);
		atomic_store_explicit(&wft_rt.drain_hold_until, now + hold, memory_order_relaxed);
		atomic_store_explicit(&wft_rt.ndrain, nd + 1, memory_order_relaxed);
	} else if (nd > 0 && d < DRAIN_LOWER_PM && span(now, hold_until) >= 0) {
		/* relaxed: hints, as above */
		atomic_store_explicit(&wft_rt.drain_lowered, now, memory_order_relaxed);
		atomic_store_explicit(&wft_rt.ndrain, nd - 1, memory_order_relaxed);
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
	/* relaxed: the CAS only elects this period's controller; what it
	 * reads is hints */
	next = atomic_load_explicit(&wft_rt.drain_next, memory_order_relaxed);
	if (span(now, next) >= 0 && atomic_compare_exchange_strong_explicit(&wft_rt.drain_next, &next,
			now + DRAIN_PERIOD_NS, memory_order_relaxed, memory_order_relaxed))
		control(now);
}
