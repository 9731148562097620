/*
 * runtime/uring.c - one io_uring per worker: batched submission, reaping in
 * the scheduling loop, the idle sleep and the kick.
 *
 * What it owns: struct wft_uring (runtime/uring.h), one per worker, set up
 * and torn down on the worker's own OS thread; the decision of when a worker
 * enters the kernel for I/O; the kick that wakes a worker sleeping in its
 * ring. The I/O calls themselves are in runtime/io.c, the no-io_uring
 * fallback in runtime/offload.c. docs/design.md "Scheduling loop" shows
 * where the reaping (step 2) and the idle sleep in the ring (step 4) sit.
 *
 * Objects and states. A ring belongs to one worker (w->ring) and only that
 * worker's OS thread touches its SQ and CQ (the ring is created with
 * SINGLE_ISSUER when the kernel accepts it, so the kernel checks this).
 * Light threads running on the worker queue SQEs into it directly (they run
 * on the worker's OS thread). An SQE's user_data is the address of the
 * struct wft_waiter of the weft thread that waits for it, or a tag below
 * WFT_URING_TAG_MAX (uring.h). Per ring:
 *   queued    - SQEs prepared but not submitted: sqe_tail - khead
 *               (io_uring_sq_ready);
 *   in flight - submitted, completion not reaped; the waiting thread is
 *               parked on its waiter;
 *   reaped    - the CQE was copied out and the waiter woken.
 *
 * Invariants:
 *   I1 Only the owner worker's OS thread submits to, enters or reaps its
 *      ring. Kickers touch only r->efd (and r->kickers / r->closing).
 *   I2 Every SQE that carries a waiter address is reaped exactly once, and
 *      its waiter stays valid until then: the thread that owns the waiter
 *      is parked in wft_waiter_wait() until the reaper stores WOKEN, and
 *      spurious unparks only make it re-check and park again.
 *   I3 A thread never keeps w across its park: it may resume on another
 *      worker; the completion arrives on the ring it submitted to, and the
 *      wake path (weft_unpark) finds the thread wherever it is.
 *   I4 A queued SQE is submitted within FLUSH_HOLD_MAX polls of its worker,
 *      or at once when the worker runs out of local work or goes to sleep
 *      (see Batching), so no completion waits for an unrelated event.
 *   I5 The ring's eventfd is closed only after every kicker that could have
 *      seen it open has finished writing to it (see Kick lifetime).
 *
 * Setup (probing). The kernel is asked for the best mode first and we step
 * down on EINVAL (an older kernel rejecting a flag):
 *   1. SINGLE_ISSUER | DEFER_TASKRUN | TASKRUN_FLAG   (6.1+): completions
 *      are only processed when the owner enters the kernel - no IPIs or
 *      task-work interrupts while the worker runs light threads, and the
 *      TASKRUN flag in the SQ ring says when entering would produce CQEs;
 *   2. SINGLE_ISSUER | COOP_TASKRUN | TASKRUN_FLAG    (6.0);
 *   3. COOP_TASKRUN | TASKRUN_FLAG                    (5.19);
 *   4. no flags.
 * WEFT_FEATURES=NO_URING_DEFER skips mode 1, so a kernel that has
 * DEFER_TASKRUN runs mode 2: the A/B of where completions are processed,
 * and the step-down path that older kernels take, testable on new ones
 * (check_io uring_defer_switch).
 *
 * Completion delivery in the two modes, and why none is lost. A socket
 * receive that has to wait arms a poll in the kernel; the data's arrival
 * (softirq, on any CPU) queues task work for the worker's OS thread, and
 * running that task work performs the receive and posts the CQE.
 *   DEFER_TASKRUN: the task work waits in the ring's own list until the
 *     owner enters (flush or wait); the kernel sets IORING_SQ_TASKRUN when
 *     it queues some, which flush_due() reads, and a worker asleep in
 *     io_uring_enter is woken by the queueing itself.
 *   COOP_TASKRUN: the task work is run at the thread's next kernel entry of
 *     any kind - a light thread's direct send or fcntl, or the enter - and
 *     posts its CQE there; the reaper finds it at its next poll by loading
 *     the CQ tail (liburing's acquire, pairing with the kernel's release).
 *     IORING_SQ_TASKRUN is set while such work is queued and cleared when
 *     it runs, so flush_due() enters only for work no syscall ran.
 * The race either mode must survive is the worker going to sleep while a
 * completion is on its way: wft_uring_wait() checks the CQ and then sleeps
 * in io_uring_enter(GETEVENTS, 1). Task work queued before the enter is
 * run by the enter before it would sleep (the kernel runs pending task
 * work and re-checks the CQ inside its wait loop); task work queued after
 * the task went to sleep wakes it (DEFER: the ring's waitqueue wake when
 * the pending count reaches the wait's target; COOP: the notify-signal
 * wake of an interruptible sleeper). In both, the kernel re-checks after
 * setting the task state, so a queueing between check and sleep wakes it.
 *
 * Each with SUBMIT_ALL (an SQE that fails to prepare does not stall the rest
 * of the batch; tried without it if rejected), CQSIZE (URING_CQ_ENTRIES) and
 * CLAMP. Any other error (EPERM from io_uring_disabled or seccomp, ENOSYS,
 * ENOMEM from a memlock limit) leaves w->ring NULL: the worker sleeps on its
 * futex and its threads' I/O takes the fallback of runtime/io.c. The choice
 * is reported by wft_uring_describe() (weft_io_backend(), WEFT_STATS). The
 * opcodes the I/O layer uses are probed too; an unsupported one falls back
 * per call. Features met missing after setup (the kick's multishot poll,
 * accept's DONTWAIT, a receive's POLL_FIRST, the registered ring fd) are
 * recorded in wft_uring_refused (uring.h), used by the whole runtime from
 * then on, and reported too. WEFT_FAULT's refusals (runtime/fault.c) make
 * a kernel that has a feature answer as one without it, for each of
 * these (check_io feature_refusals).
 *
 * Batching. A weft thread that does I/O only queues its SQE and parks. Its
 * worker's scheduling loop calls wft_uring_poll() at every pick, which
 *   1. reaps the CQ (no syscall: a load of the CQ tail when it is empty) and
 *      wakes the waiters' threads (local wakes: they go to this worker's
 *      next slot / runqueue);
 *   2. enters the kernel (io_uring_submit_and_get_events: submit + run
 *      deferred completions, one syscall) if something is due - SQEs are
 *      queued, or the kernel flagged TASKRUN or CQ_OVERFLOW - AND one of:
 *      the worker has no other local work (runqueue and next slot empty),
 *      FLUSH_BATCH SQEs are queued, or the flush was postponed for
 *      FLUSH_HOLD_MAX polls (I4); then reaps again.
 * So a worker with many runnable connection threads runs them all, each
 * queueing its recv/send, and then submits the whole batch with one
 * io_uring_enter - the shape of an event loop, in blocking style. A worker
 * about to sleep submits in the same syscall as the sleep (wft_uring_wait).
 *
 * Wait. The idle protocol (runtime/idle.c, "Park") announces SLEEPING,
 * re-checks all sources and calls wft_uring_wait(w, deadline), which
 * submits what is queued and waits for one CQE with the nearest timer as
 * timeout (EXT_ARG timespec, relative; liburing falls back to a timeout SQE
 * on kernels without EXT_ARG). A CQE, the kick, or the deadline end it; the
 * scheduling loop then reaps in its next poll. So timers and I/O share one
 * sleep. If a CQE is already waiting or a kicker already moved w->sleep to
 * KICKED, it does not sleep at all.
 *
 * Kick. A waker that moved w->sleep from SLEEPING to KICKED calls
 * wft_uring_kick(w) (one kick per sleep). It writes 1 to the ring's
 * eventfd, on which the ring keeps a multishot IORING_OP_POLL_ADD (user
 * data WFT_URING_TAG_KICK). The write completes the poll, which posts a CQE
 * (with DEFER_TASKRUN: queues task work and wakes the owner, which runs it
 * in its wait and finds the CQE), so the wait returns. No kick is lost if
 * it comes before the worker enters the kernel: the poll is level-armed
 * from setup, the write's wakeup is recorded as a pending completion (task
 * work or CQE) that the wait processes before it would sleep. The eventfd
 * counter is never read; the multishot poll fires once per write (it is
 * driven by wakeups, not by the level), and a 64-bit count cannot
 * saturate in practice (a saturated count would only mean a kick is
 * already pending). If the multishot poll ends (a CQE without F_MORE, e.g.
 * after a CQ overflow) it is re-armed before the next wait; a kernel
 * without multishot poll gets a one-shot poll plus a read of the counter
 * per kick.
 *
 *   Rejected: IORING_OP_MSG_RING from the kicker's own ring. It measured
 *   slower than the eventfd write on examples/kick-pingpong, with more
 *   worker wakeups than kicks (docs/design.md "Measured alternatives").
 *   The eventfd write is one plain syscall on the kicker's side; MSG_RING
 *   is an io_uring_enter that also submits and completes on the kicker's
 *   ring. MSG_RING also needs a ring on the kicking side, but kicks come
 *   from plain OS threads too (weft_unpark from main, the offload helpers
 *   and the fallback poller completing work, weft_shutdown), so it would
 *   need the eventfd anyway as a second path, and a kick from inside
 *   wft_uring_poll would re-enter the kicker's SQ.
 *
 * Kick lifetime (I5). wft_idle_kick_force() (shutdown) may kick a worker
 * that has already left its loop and is tearing its ring down. Kickers and
 * teardown use a StoreLoad pair:
 *
 *   kicker                                 teardown (owner)
 *   -----------------------------------    -----------------------------------
 *   fetch_add(kickers, 1)      (seq_cst)   store(closing, 1)          (seq_cst)
 *   load(closing)              (seq_cst)   while load(kickers) != 0   (seq_cst)
 *   0? write(efd)                          close(efd)
 *   fetch_sub(kickers, 1)      (release)
 *
 * Either the kicker sees closing == 1 and does not touch efd, or teardown
 * sees kickers != 0 and waits for the write to finish, because both sides
 * store then load with seq_cst operations: in their single total order one
 * store comes first and the other side's later load sees it. The struct
 * wft_uring itself lives in a static array indexed by worker id, so a late
 * kicker never reads freed memory. Interleavings considered: kick before
 * teardown (normal); kick during teardown (one of the two waits for or
 * skips the other); kick after teardown (sees closing); two kickers (both
 * counted).
 *
 * Completion of a waiter (the reaper's side of runtime/waiter.c's Wait
 * protocol): copy res into wt->result, then wft_waiter_wake(wt), which
 * stores WOKEN (release: publishes result) and unparks wt->thread (read
 * before the store: the waiter may vanish right after it). The thread is
 * normally parked on this worker, so the wake is local and goes to the
 * next slot. If it was unparked spuriously and runs elsewhere, the unpark
 * token makes its next park return and it re-reads WOKEN (no lost wakeup).
 *
 * Rejected alternatives:
 *   - one io_uring_enter per operation (submit at queue time): one syscall
 *     per recv/send, the cost that makes thread-per-connection lose to an
 *     event loop; batching per round is the point.
 *   - a shared ring for all workers: needs a lock or an MPSC SQ, loses
 *     SINGLE_ISSUER/DEFER_TASKRUN, and completions would wake threads on
 *     the wrong worker.
 *   - SQPOLL: a kernel thread spinning on each SQ costs a CPU per ring on a
 *     2-CPU machine; batching gets most of the syscall savings for free.
 *   - reaping CQEs from the waiting thread itself (after its park): the
 *     CQE could belong to any thread of the worker, and the thread may
 *     have migrated (I3); the scheduling loop is the one place that owns
 *     the ring.
 */
#include "runtime/wft.h"
#include "runtime/uring.h"
#include "runtime/sanitizer.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <weft/io.h>

/* SQ size: 256 SQEs. A round rarely queues more (FLUSH_BATCH flushes at
 * 64), and a full SQ only costs an early submit (wft_uring_get_sqe). */
#define URING_SQ_ENTRIES 256
/* CQ size: in-flight operations are bounded by threads, not by the SQ: the
 * 1,000-connection test keeps ~1,000 recvs in flight per worker. 4096 CQEs
 * (64 KiB) keep overflow (which forces an extra enter) out of the normal
 * case. */
#define URING_CQ_ENTRIES 4096
/* Flush when this many SQEs are queued even if local work remains: one
 * io_uring_enter (~1-2 us here) amortised to < 30 ns per SQE, and the
 * first SQE of the batch waits at most ~64 thread runs. */
#define FLUSH_BATCH 64
/* ... or when a due flush has been postponed this many polls (I4). Same
 * reasoning: ~64 switches of delay at most for a completion the kernel
 * already has (DEFER_TASKRUN) or an SQE we hold. */
#define FLUSH_HOLD_MAX 64
/* CQEs copied out per batch before waking their threads (stack array). */
#define REAP_CHUNK 32

/* One slot per worker id, never freed (Kick lifetime). */
static struct wft_uring slots[WEFT_WORKERS_MAX];

/* What each worker chose, for wft_uring_describe(): written by the worker
 * at setup, read by anyone (relaxed: a report, not a protocol). */
enum { SLOT_UNUSED = 0, SLOT_RING, SLOT_FALLBACK };
static _Atomic int slot_state[WEFT_WORKERS_MAX];
static _Atomic unsigned last_flags;     /* setup flags of the last ring made */
static _Atomic int last_err;            /* errno of the last failed setup */
/* Why no worker has a ring although the kernel may have io_uring: */
enum { OFF_NOT = 0, OFF_FEATURE, OFF_VALGRIND };
static _Atomic int disabled_by; /* OFF_*: NO_URING, or running on Valgrind */

/* Features the kernel refused after setup (uring.h wft_uring_refused). */
_Atomic unsigned wft_uring_refused;

static const struct {
	unsigned bit;
	const char *name;
} refused_names[] = {
	{ WFT_URING_NO_KICK_MULTISHOT, "multishot kick poll" },
	{ WFT_URING_NO_ACCEPT_DONTWAIT, "ACCEPT_DONTWAIT" },
	{ WFT_URING_NO_POLL_FIRST, "RECVSEND_POLL_FIRST" },
	{ WFT_URING_NO_RING_FD, "registered ring fd" },
};

void wft_uring_reset_unsafe(void)
{
	/* relaxed: no worker runs yet */
	atomic_store_explicit(&wft_uring_refused, 0, memory_order_relaxed);
}

static const struct {
	unsigned flag;
	const char *name;
} flag_names[] = {
	{ IORING_SETUP_SINGLE_ISSUER, "SINGLE_ISSUER" },
	{ IORING_SETUP_DEFER_TASKRUN, "DEFER_TASKRUN" },
	{ IORING_SETUP_COOP_TASKRUN, "COOP_TASKRUN" },
	{ IORING_SETUP_TASKRUN_FLAG, "TASKRUN_FLAG" },
	{ IORING_SETUP_SUBMIT_ALL, "SUBMIT_ALL" },
};

/* Setup modes, best first (see Setup). */
static const unsigned setup_modes[] = {
	IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
	IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
	IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
	0,
};

/* ---------------------------------------------------------------------- */
/* Setup and teardown */

static int ring_create(struct wft_uring *r)
{
	struct io_uring_params p;
	int rc = -EINVAL;

	for (size_t i = 0; i < sizeof(setup_modes) / sizeof(setup_modes[0]); i++) {
		/* NO_URING_DEFER: start one mode down (see Setup) */
		if ((setup_modes[i] & IORING_SETUP_DEFER_TASKRUN) && !wft_feat(URING_DEFER))
			continue;
		for (int all = 1; all >= 0; all--) {
			memset(&p, 0, sizeof(p));
			p.flags = setup_modes[i] | IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP |
				  (all ? IORING_SETUP_SUBMIT_ALL : 0);
			p.cq_entries = URING_CQ_ENTRIES;
			/* WEFT_FAULT=ringflags: a kernel without these flags */
			if (p.flags & atomic_load_explicit(&wft_fault_ringflags, memory_order_relaxed))
				rc = -EINVAL;
			else
				rc = io_uring_queue_init_params(URING_SQ_ENTRIES, &r->ring, &p);
			if (rc == 0) {
				r->setup_flags = p.flags & ~(unsigned)(IORING_SETUP_CQSIZE |
								       IORING_SETUP_CLAMP);
				return 0;
			}
			if (rc != -EINVAL)
				return rc;   /* EPERM, ENOSYS, ENOMEM...: no ring at all */
		}
	}
	return rc;
}

static void probe_ops(struct wft_uring *r)
{
	struct io_uring_probe *p = io_uring_get_probe_ring(&r->ring);

	memset(r->ops, 0, sizeof(r->ops));
	if (!p)
		return;   /* pre-5.6 kernel: every call takes the fallback */
	for (unsigned op = 0; op < IORING_OP_LAST && op <= p->last_op; op++)
		if (io_uring_opcode_supported(p, (int)op))
			r->ops[op / 64] |= 1ull << (op % 64);
	io_uring_free_probe(p);
	/* WEFT_FAULT=noops: a kernel without these opcodes */
	r->ops[0] &= ~(uint64_t)atomic_load_explicit(&wft_fault_noops, memory_order_relaxed);
}

/* Queue the kick poll on efd (see Kick). Owner. Returns false if the SQ has
 * no room (the next wait retries). */
static bool arm_kick(struct wft_uring *r)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);

	if (!sqe)
		return false;
	if (r->kick_oneshot)
		io_uring_prep_poll_add(sqe, r->efd, POLLIN);
	else
		io_uring_prep_poll_multishot(sqe, r->efd, POLLIN);
	/* WEFT_FAULT=nokickmulti: a flag the kernel does not know makes it
	 * refuse the poll with EINVAL, as one without multishot poll does */
	if (!r->kick_oneshot && wft_fault_refused(WFT_FAULT_KICK_MULTISHOT))
		sqe->len |= WFT_FAULT_BAD_FLAG;
	io_uring_sqe_set_data64(sqe, WFT_URING_TAG_KICK);
	r->kick_armed = true;
	return true;
}

/* Give w a ring (or leave w->ring NULL: NO_URING or no io_uring), and take
 * a reference on the offload pool.
 * Context: w's own OS thread, before it runs threads. May park: no.
 * Returns: 0 (a missing io_uring is not an error). */
int wft_uring_setup(struct wft_worker *w)
{
	struct wft_uring *r = &slots[w->id];
	int rc;

	w->ring = NULL;
	wft_offload_ref();
	/* Valgrind serialises threads and cannot run the others while one is
	 * blocked in io_uring_enter: a worker waiting in its ring for a kick
	 * hung the whole program (weft-micro never finished under Memcheck
	 * or Callgrind). So under Valgrind every worker takes the offload
	 * path, as with NO_URING. */
	if (!wft_feat(URING) || WFT_VG_RUNNING()) {
		/* relaxed: a report, as slot_state */
		atomic_store_explicit(&disabled_by, wft_feat(URING) ? OFF_VALGRIND : OFF_FEATURE,
				      memory_order_relaxed);
		atomic_store_explicit(&slot_state[w->id], SLOT_FALLBACK, memory_order_relaxed);
		return 0;
	}
	/* relaxed: a report, as slot_state */
	atomic_store_explicit(&disabled_by, OFF_NOT, memory_order_relaxed);
	/* No kicker can see this slot yet: w->ring is NULL until the end. */
	memset(&r->ring, 0, sizeof(r->ring));
	r->held = 0;
	r->kick_armed = false;
	r->kick_oneshot = false;
	atomic_store_explicit(&r->kickers, 0, memory_order_relaxed);
	atomic_store_explicit(&r->closing, 0, memory_order_relaxed);

	rc = ring_create(r);
	if (rc < 0)
		goto fallback;
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->efd < 0) {
		rc = -errno;
		io_uring_queue_exit(&r->ring);
		goto fallback;
	}
	probe_ops(r);
	if (!wft_uring_has_op(r, IORING_OP_POLL_ADD)) {
		rc = -ENOSYS;
		close(r->efd);
		io_uring_queue_exit(&r->ring);
		goto fallback;
	}
	/* A registered ring fd saves the fd lookup of every io_uring_enter
	 * (5.18+); without it everything still works (WEFT_FAULT=noringfd
	 * skips it, as a refusal would). */
	if (wft_fault_refused(WFT_FAULT_RING_FD) || io_uring_register_ring_fd(&r->ring) != 1)
		wft_uring_refuse(WFT_URING_NO_RING_FD);
	arm_kick(r);
	atomic_store_explicit(&last_flags, r->setup_flags, memory_order_relaxed);
	atomic_store_explicit(&slot_state[w->id], SLOT_RING, memory_order_relaxed);
	/* Plain store, published to kickers by the seq_cst exchange of
	 * w->sleep that precedes this worker's first sleep (idle.c, Park): a
	 * kicker that saw SLEEPING also sees the ring. */
	w->ring = r;
	return 0;

fallback:
	atomic_store_explicit(&last_err, -rc, memory_order_relaxed);
	atomic_store_explicit(&slot_state[w->id], SLOT_FALLBACK, memory_order_relaxed);
	return 0;
}

/* Close w's ring (Kick lifetime) and drop the pool reference; the last
 * worker's drop joins the pool's helper threads.
 * Context: w's own OS thread, after its loop ended (no thread runs). May park: no. */
void wft_uring_teardown(struct wft_worker *w)
{
	struct wft_uring *r = w->ring;

	if (r) {
		/* seq_cst: StoreLoad pair with the kicker (Kick lifetime) */
		atomic_store_explicit(&r->closing, 1, memory_order_seq_cst);
		/* seq_cst load (includes acquire): pairs with the kicker's release
		 * fetch_sub, so its write(efd) is finished before the close */
		while (atomic_load_explicit(&r->kickers, memory_order_seq_cst))
			wft_cpu_relax();
		/* In-flight operations cannot exist (every thread has exited);
		 * the kick poll is cancelled by the exit. */
		io_uring_queue_exit(&r->ring);
		close(r->efd);
		r->efd = -1;
		/* w->ring keeps pointing at the closed slot: a late kick sees
		 * closing (I5); the worker itself never polls again. */
	}
	wft_offload_unref();
}

/* ---------------------------------------------------------------------- */
/* Submission and reaping (owner) */

/* Submit what is queued and run deferred completions: one io_uring_enter. */
static void flush(struct wft_worker *w, struct wft_uring *r)
{
	int rc;

	r->held = 0;
	rc = io_uring_submit_and_get_events(&r->ring);
	wft_stat_inc(w, io_enters);
	if (rc > 0)
		wft_stat_add(w, io_sqes, (uint64_t)rc);
	/* rc < 0: EBUSY/EAGAIN (CQ overflow backlog, no memory for requests)
	 * or EINTR. The SQEs stay queued; the next poll reaps (freeing CQ
	 * room) and retries. */
}

/* Is an io_uring_enter due: SQEs queued, or the kernel holding
 * completions (TASKRUN) or overflowed CQEs? */
static inline bool flush_due(struct wft_uring *r)
{
	/* relaxed: a hint written by the kernel; the enter re-checks it */
	unsigned kf = __atomic_load_n(r->ring.sq.kflags, __ATOMIC_RELAXED);

	return io_uring_sq_ready(&r->ring) > 0 ||
	       (kf & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW));
}

static void kick_cqe(struct wft_uring *r, int res, unsigned flags)
{
	if (r->kick_oneshot) {
		uint64_t v;

		/* reset the count, or the next one-shot poll fires at once */
		if (read(r->efd, &v, sizeof(v)) < 0)
			(void)0;   /* EAGAIN: already reset */
		r->kick_armed = false;
		return;
	}
	if (!(flags & IORING_CQE_F_MORE)) {
		r->kick_armed = false;
		/* EINVAL: no multishot poll in this kernel; use one-shot */
		if (res == -EINVAL) {
			r->kick_oneshot = true;
			wft_uring_refuse(WFT_URING_NO_KICK_MULTISHOT);
		}
	}
}

/* Copy out and complete every CQE. Returns the waiters woken. Owner. */
static unsigned reap(struct wft_worker *w, struct wft_uring *r)
{
	struct {
		uint64_t ud;
		int32_t res;
		uint32_t flags;
	} c[REAP_CHUNK];
	unsigned woken = 0, n;

	do {
		struct io_uring_cqe *cqe;
		unsigned head;

		n = 0;
		io_uring_for_each_cqe(&r->ring, head, cqe) {
			c[n].ud = cqe->user_data;
			c[n].res = cqe->res;
			c[n].flags = cqe->flags;
			if (++n == REAP_CHUNK)
				break;
		}
		if (!n)
			break;
		/* Release the CQ slots before waking anyone: a wake may kick
		 * another worker, and nothing below touches the CQ again. */
		io_uring_cq_advance(&r->ring, n);
		wft_stat_add(w, io_cqes, n);
		for (unsigned i = 0; i < n; i++) {
			struct wft_waiter *wt;

			if (c[i].ud < WFT_URING_TAG_MAX || c[i].ud == LIBURING_UDATA_TIMEOUT) {
				if (c[i].ud == WFT_URING_TAG_KICK)
					kick_cqe(r, c[i].res, c[i].flags);
				continue;
			}
			wt = (struct wft_waiter *)(uintptr_t)c[i].ud;
			wt->result = c[i].res;
			wft_waiter_wake(wt);   /* see "Completion of a waiter" */
			woken++;
		}
	} while (n == REAP_CHUNK);
	return woken;
}

/* Nothing else to run here: the runqueue and the next slot are empty (the
 * mailbox was drained just before the poll). Owner. */
static inline bool local_idle(struct wft_worker *w)
{
	return !w->next && wft_runq_size(w) == 0;
}

/* Reap, and submit what is due (see Batching).
 * Context: owner worker (its scheduler or the thread switching away).
 * May park: no. Returns: the number of waiters woken. */
unsigned wft_uring_poll(struct wft_worker *w)
{
	struct wft_uring *r = w->ring;
	unsigned woken = 0;

	if (io_uring_cq_ready(&r->ring))
		woken = reap(w, r);
	if (!flush_due(r))
		return woken;
	if (woken == 0 && local_idle(w)) {
		flush(w, r);
	} else if (io_uring_sq_ready(&r->ring) >= FLUSH_BATCH || ++r->held >= FLUSH_HOLD_MAX) {
		flush(w, r);
	} else {
		return woken;   /* postponed (Batching) */
	}
	if (io_uring_cq_ready(&r->ring))
		woken += reap(w, r);
	return woken;
}

/* Context: weft thread running on w. May park: only if the SQ stays full
 * after a flush (it yields, and resumes on w). Returns: a free SQE of
 * w's ring, never NULL; room for need SQEs. */
struct io_uring_sqe *wft_uring_get_sqe(struct wft_worker *w, unsigned need)
{
	struct wft_uring *r = w->ring;
	struct io_uring_sqe *sqe;

	for (;;) {
		/* a test's fault: the SQ is full and the flush refused */
		bool fault = wft_fault_sqfull();

		if (wft_likely(!fault && io_uring_sq_space_left(&r->ring) >= need))
			break;
		/* SQ full: submit now, from this thread (it runs on w's OS
		 * thread, so SINGLE_ISSUER holds). If the kernel refuses (CQ
		 * backlog), make room by reaping - the wakes are local - and let
		 * the woken threads run before trying again. */
		if (!fault) {
			flush(w, r);
			if (io_uring_sq_space_left(&r->ring) >= need)
				break;
		}
		reap(w, r);
		{
			/* Stay on w across the yield: a temporary pin (pinned
			 * threads are never published to thieves, runq.c I3).
			 * The caller takes its linked timeout's SQE from
			 * w->ring right after this one (uop_wait), and the
			 * worker it could move to may have no ring at all
			 * (reloading w after the yield could put the two
			 * halves of a link on two rings). */
			struct weft_thread *self = wft_thread_self();
			int pin = self->pin;

			self->pin = w->id;
			weft_yield();
			self->pin = pin;
		}
	}
	sqe = io_uring_get_sqe(&r->ring);
	return sqe;
}

/* ---------------------------------------------------------------------- */
/* Idle sleep and kick */

/* The idle sleep (see Wait): submit what is queued and sleep until a CQE,
 * a kick or deadline (absolute CLOCK_MONOTONIC, WEFT_TIME_INFINITE = none).
 * Context: owner worker, w->sleep announced SLEEPING. May park: the OS
 * thread sleeps in io_uring_enter. */
void wft_uring_wait(struct wft_worker *w, weft_time_t deadline)
{
	struct wft_uring *r = w->ring;
	struct io_uring_cqe *cqe;
	unsigned queued;

	if (!r->kick_armed)
		arm_kick(r);
	queued = io_uring_sq_ready(&r->ring);
	/* relaxed: our own word; a kicker's KICKED means its eventfd write is
	 * on the way, so sleeping now would only be woken at once */
	if (io_uring_cq_ready(&r->ring) ||
	    atomic_load_explicit(&w->sleep, memory_order_relaxed) != WFT_W_SLEEPING) {
		if (queued)
			flush(w, r);
		return;
	}
	r->held = 0;
	wft_stat_inc(w, io_enters);
	wft_stat_add(w, io_sqes, queued);
	if (deadline == WEFT_TIME_INFINITE) {
		(void)io_uring_submit_and_wait(&r->ring, 1);
	} else {
		weft_time_t now = wft_now();
		struct __kernel_timespec ts;

		if (deadline <= now) {
			(void)io_uring_submit(&r->ring);
			return;
		}
		ts.tv_sec = (long long)((deadline - now) / 1000000000ull);
		ts.tv_nsec = (long long)((deadline - now) % 1000000000ull);
		/* -ETIME at the deadline, -EINTR on a signal: either way the
		 * loop re-checks everything */
		(void)io_uring_submit_and_wait_timeout(&r->ring, &cqe, 1, &ts, NULL);
	}
}

/* Wake w from wft_uring_wait (see Kick). Called once per sleep by the
 * waker that moved w->sleep from SLEEPING to KICKED, and by shutdown.
 * Context: any. May park: no (one write syscall). */
void wft_uring_kick(struct wft_worker *w)
{
	struct wft_uring *r = w->ring;

	if (!r)
		return;
	/* seq_cst: the store half of the Kick lifetime pair; pairs with the
	 * seq_cst load of kickers in teardown */
	atomic_fetch_add_explicit(&r->kickers, 1, memory_order_seq_cst);
	/* seq_cst: the load half; pairs with the seq_cst store of closing */
	if (!atomic_load_explicit(&r->closing, memory_order_seq_cst)) {
		uint64_t one = 1;

		/* EAGAIN only if the count is saturated: a kick is pending */
		if (write(r->efd, &one, sizeof(one)) < 0)
			(void)0;
	}
	/* release: our write(efd) happens before teardown's close; pairs with
	 * the seq_cst load of kickers in teardown */
	atomic_fetch_sub_explicit(&r->kickers, 1, memory_order_release);
}

/* ---------------------------------------------------------------------- */
/* Report */

int wft_uring_describe(char *buf, size_t len)
{
	int n = wft_rt.nworkers, rings = 0, used = 0, off = 0, why;
	unsigned fl = atomic_load_explicit(&last_flags, memory_order_relaxed);
	char names[128] = "";

	for (int i = 0; i < n && i < WEFT_WORKERS_MAX; i++) {
		int s = atomic_load_explicit(&slot_state[i], memory_order_relaxed);

		rings += s == SLOT_RING;
		used += s != SLOT_UNUSED;
	}
	if (!buf || !len)
		return rings > 0;
	for (size_t i = 0; i < sizeof(flag_names) / sizeof(flag_names[0]); i++)
		if (fl & flag_names[i].flag)
			off += snprintf(names + off, sizeof(names) - (size_t)off, "%s%s",
					off ? "|" : "", flag_names[i].name);
	if (rings) {
		unsigned ref = atomic_load_explicit(&wft_uring_refused, memory_order_relaxed);
		char refused[128] = "";
		int roff = 0;

		for (size_t i = 0; i < sizeof(refused_names) / sizeof(refused_names[0]); i++)
			if (ref & refused_names[i].bit)
				roff += snprintf(refused + roff, sizeof(refused) - (size_t)roff, "%s%s",
						 roff ? ", " : "; refused: ", refused_names[i].name);
		snprintf(buf, len, "io_uring on %d/%d workers (%s; kick=eventfd%s%s)", rings, used,
			 off ? names : "no flags",
			 (ref & WFT_URING_NO_KICK_MULTISHOT) ? " one-shot" : "", refused);
	} else if ((why = atomic_load_explicit(&disabled_by, memory_order_relaxed)) != OFF_NOT) {
		snprintf(buf, len, "offload pool (io_uring disabled: %s)",
			 why == OFF_FEATURE ? "WEFT_FEATURES=NO_URING" : "running on Valgrind");
	} else if (used) {
		snprintf(buf, len, "offload pool (io_uring unavailable: %s)",
			 strerror(atomic_load_explicit(&last_err, memory_order_relaxed)));
	} else {
		snprintf(buf, len, "none (runtime not started)");
	}
	return rings > 0;
}

int weft_io_backend(char *buf, size_t len)
{
	return wft_uring_describe(buf, len);
}
