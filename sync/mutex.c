/*
 * sync/mutex.c - weft_mutex_t: adaptive spin-then-park mutex with a FIFO
 * wait queue and hand-off to starving waiters.
 *
 * What it owns
 *   The lock word, the owner-spin policy, the mutex's wait queue and the
 *   hand-off rule; plus the wait-morphing entry points that cond.c uses to
 *   move signalled waiters onto a mutex (sync/mutex.h). docs/design.md
 *   "Mutex"; docs/seeds.md "Seed 001" (test-mutex, adaptive spinning).
 *
 * State word (m->state, one uintptr_t)
 *
 *   bits 63..3 | bit 2   | bit 1    | bit 0
 *   owner id              | HANDOFF  | WAITERS
 *   (bit 2 belongs to the owner id: WFT_ID_OS marks an OS-thread owner)
 *
 *   owner id  0: free. Otherwise the owner's TCB address (a weft thread) or
 *             the address of its thread-local id byte | WFT_ID_OS (an OS
 *             thread). Set by the acquiring CAS, or by a contended unlock
 *             that hands the lock over (I4); cleared only by the owner.
 *   WAITERS   Someone is waiting: the queue is non-empty or a woken waiter
 *             is on its way (I1). Unlock must take the slow path (under
 *             qlock: hand off, or release and maybe wake one). Set by CAS
 *             (atomic with seeing the lock owned) by a thread about to queue,
 *             under qlock; cleared under qlock when the last record leaves
 *             the queue and no woken waiter is in flight.
 *   HANDOFF   Starvation mode, known in advance: the head waiter has been
 *             at the head ("Head time") more than WFT_MUTEX_STARVE_NS.
 *             Unlock must not release: it writes the head waiter's id into the owner field and wakes it
 *             (result HANDED), so nobody can barge past it; spinners stop.
 *             Set by a woken waiter that lost the race and has waited that
 *             long, together with requeueing itself at the head, under
 *             qlock; kept across a hand-off while the next head is starving
 *             too; cleared under qlock when the head leaves by timeout or
 *             the queue empties. (The unlocker also checks wait times itself,
 *             I5 and I7, so the flag is an early notice, not the only
 *             trigger.)
 *
 *   m->woken (under qlock): the record of the one waiter that was woken with
 *   result COMPETE and has not yet resolved (taken the lock, gone back to
 *   the queue, or timed out), or NULL.
 *
 * Invariants
 *   I1. Under qlock: WAITERS <=> (queue non-empty or m->woken != NULL).
 *   I2. HANDOFF => queue non-empty and owner != 0: it is set only by a CAS
 *       that saw an owner, and while it is set unlock never writes owner 0.
 *   I3. At most one woken waiter is in flight. While it is, a normal-mode
 *       unlock wakes nobody else (Go's mutexWoken): the woken waiter will
 *       own the lock (and its unlock deals with the queue) or resolve under
 *       qlock after re-checking the lock word, so a wake is never lost and
 *       never doubled.
 *   I4. No other thread writes the state word while the owner id is set,
 *       except under qlock (flag changes) and the owner itself: every
 *       lockless CAS expects owner 0 or is the owner's own unlock. So the
 *       contended unlock, which holds qlock, may store the new word.
 *   I5. A queued waiter is never passed over for much longer than
 *       WFT_MUTEX_STARVE_NS once it is at the head: every contended unlock
 *       looks at the head's wait time under qlock and hands off when it is
 *       reached.
 *   I6. While a thread spins on the lock word (m->spinner), a normal-mode
 *       unlock wakes nobody (Go's mutexWoken, set by spinners) unless the
 *       head has waited WFT_MUTEX_ROTATE_NS: the spinner takes the lock,
 *       and its unlock deals with the queue; if it gives up instead, it
 *       re-runs the queueing CAS under qlock, which takes the lock if it is
 *       free. So the wake is deferred, never lost.
 *   I7. The woken waiter in flight is covered like the head (it was ahead
 *       of it): once it has waited WFT_MUTEX_STARVE_NS, a contended unlock
 *       stores its id as the owner without waking anything (it is awake
 *       already) and it finds the lock its own (owner == its id) wherever it
 *       looks next - the kernel's PICKUP. I5 and I7 must not depend on the
 *       waiter running: with cooperative scheduling an unlocker that relocks
 *       at once never lets a wakee queued on its own worker run; handing it
 *       the lock makes the unlocker's next lock park, which lets it run.
 *
 * Normal mode vs hand-off mode (as Go's sync/mutex.go explains its modes)
 *   In normal mode waiters queue FIFO, but a woken waiter does not own the
 *   lock: it competes with new arrivals, which are running on a worker right
 *   now and often win (the lock is re-taken while it is cache-hot, and no
 *   switch is needed). That is what makes a contended mutex fast, and it is
 *   unfair: the woken waiter goes back to the head of the queue. Once a
 *   waiter has been at the head more than WFT_MUTEX_STARVE_NS (1 ms; its
 *   "head time", the record's since field, not its time in the queue),
 *   the mutex hands
 *   off: unlock passes ownership straight to that waiter, newcomers queue at
 *   the tail and do not spin. Hand-off mode ends when the waiter that
 *   receives the lock is the last one or the next head has not waited 1 ms.
 *   Normal mode is much faster; hand-off mode bounds the longest wait
 *   (tests/check_mutex.c measures it).
 *
 * Protocol
 *   "Lock": CAS 0 -> id (acquire). One atomic, no syscall, no allocation.
 *   Slow path: retry while the owner field is 0 (barging is allowed in
 *   normal mode); spin (below); then queue: under qlock, CAS the lock word
 *   to either take it (owner 0) or set WAITERS, push the record (tail, or
 *   head for a woken waiter that lost), drop qlock and park. A woken waiter
 *   also accepts owner == its own id as acquired (I7) at each of those
 *   looks.
 *
 *   "Unlock": CAS id -> 0 (release). If flags are set, take qlock (the
 *   word is stable now, I4) and decide: the woken waiter in flight is
 *   starving -> store owner = its id (I7); else the head is starving
 *   (HANDOFF, or I5) -> unlink the head, store owner = its id, drop qlock,
 *   wake it (HANDED) onto our own worker and yield to it if we are a weft
 *   thread (runtime/waiter.c wft_waiter_wake_yield: the lock is idle until
 *   the new owner runs, so it must not wait for a remote wake and kick). Normal mode -> if no woken waiter is in flight and
 *   nobody spins (I3, I6), unlink one (pick RUN_NOW: the head, or one that
 *   can run at once on an idle worker) and make it m->woken; store owner 0
 *   with WAITERS per I1 (the lock is free from here on); drop qlock; wake
 *   it (COMPETE).
 *
 *   The lost-wakeup argument. Concurrency: any number of lockers, one
 *   owner unlocking, waiters timing out, a cond requeueing, all at once.
 *
 *     waiter (about to park)              owner (unlocking)
 *     ----------------------              -----------------
 *     qlock                               CAS state: id -> 0 (RMW, reads
 *     CAS state: v -> v|WAITERS (RMW,       the latest value; fails if any
 *       only if owner(v) != 0)              flag is set)
 *     push record                         failed: qlock; pop + woken;
 *     qunlock                               store owner 0; qunlock; wake
 *     park
 *
 *   Either the waiter's CAS sees the owner field cleared (it takes the lock
 *   instead of queueing) or the owner's CAS sees WAITERS (it fails, takes
 *   qlock, which it gets only after the waiter's qunlock, and finds the
 *   record), because both are read-modify-writes of the same word:
 *   whichever comes second in its modification order reads the other's
 *   write. No fence is needed beyond the RMWs. The woken waiter that loses
 *   re-runs the same CAS under qlock before it stops being m->woken (I3),
 *   so an unlock that skipped its wake because of it is covered by the same
 *   argument; likewise a spinner that gives up (I6).
 *
 *   Linearisation points: lock = the CAS that writes our id (or, for a
 *   hand-off, the unlocker's store of our id); unlock = the CAS or store
 *   that removes our id; a timed-out lock = the unlink of its record under
 *   qlock (or, for the woken waiter, the clearing of m->woken).
 *
 *   Interleavings considered: unlock racing a waiter's queueing (above);
 *   a timeout racing the wake (the waiter looks at `queued` under qlock:
 *   still queued -> it unlinks itself and fixes the flags; already unlinked
 *   -> it waits for the WOKEN store, then owns the lock (HANDED) or competes
 *   (COMPETE), see sync/wake_q.c I3); a timeout of the head while HANDOFF is
 *   set (the flag is cleared under qlock; the unlocker decides under qlock
 *   too, so it sees either the old head or the new one); a woken waiter
 *   whose worker is monopolised by the unlocker (I7); a hand-off to the
 *   woken waiter while it spins, barges or is about to requeue or time out
 *   (each of those looks checks owner == its id first; the requeue and the
 *   timeout decide under qlock, where the hand-off is made); a woken waiter
 *   that times out before competing (it still tries once under qlock, and
 *   clears woken); a barger taking the lock between the release and the
 *   wake (the woken waiter loses and requeues at the head); a cond
 *   broadcast requeueing onto a mutex that is being released
 *   (wft_mutex_requeue re-checks the owner in its CAS loop).
 *
 * Spinning ("Spin")
 *   Weft thread: only with OWNER_SPIN on, only while the owner is a weft
 *   thread with on_cpu set (it is running on some worker, so it will release
 *   soon), only while our own worker has nothing else to run (need_resched:
 *   mailbox non-empty, runqueue non-empty or a next-slot thread; seed 001's
 *   break), never in hand-off mode, and at most WFT_MUTEX_SPIN_NS. One
 *   spinner at a time (m->spinner, the kernel's OSQ idea in its simplest
 *   form): the others park at once instead of bouncing the lock word's
 *   cache line between spinners.
 *   OS thread: the same, except that the budget adapts: an estimate of how
 *   long recent spins took to get the lock (an EWMA, glibc's adaptive mutex
 *   idea, which tracks the remaining hold time), doubled, plus a floor; a
 *   spin that fails decays the estimate, so long holds stop spinning. An
 *   OS-thread owner cannot be checked for on_cpu; the budget bounds it.
 *
 * Head time (sw->since)
 *   Starvation is measured from the moment a waiter becomes the head of
 *   the queue (or is picked to be woken from behind it), not from when it
 *   queued: sw->since is set when the record is pushed onto an empty queue,
 *   when the record ahead of it leaves (hand-off, wake, timeout), when pick
 *   takes it from behind the head, and when a cond requeue makes it woken
 *   or head; 0 means "not at the head yet". A woken waiter that loses keeps
 *   it (it goes back to the head). Why: a FIFO of N waiters makes every one
 *   of them wait about N hand-overs whatever the mutex does; measured from
 *   queueing, every waiter of a long queue (1,024 tasks) was "starving", the
 *   mutex stayed in hand-off mode for good, and every acquisition cost a
 *   park and a switch (test-mutex M 1024 fell to half of M 128, M 10000 to
 *   a quarter). Hand-off cannot shorten a wait that is the queue's length;
 *   it can only stop a waiter from being passed over, which is what head
 *   time measures. I5 and I7 bound exactly that: once at the head (or
 *   woken), a waiter is passed over for at most WFT_MUTEX_STARVE_NS.
 *
 * Owner death
 *   Owner ids carry a generation (sync/mutex.h): a thread that exits
 *   holding m leaves its old id in the lock word, which no later thread
 *   (not even one on the same TCB) matches. A locker that is about to
 *   queue (lock_slow step 3, under qlock) or a trylock that finds m held
 *   asks owner_dead(): the owner is a weft thread whose TCB has exited,
 *   is free, or belongs to another generation. It then CASes the dead id
 *   to its own (flags kept, under qlock) and returns EOWNERDEAD: it owns m,
 *   and the state m protects may be half-updated (as a robust pthread
 *   mutex's EOWNERDEAD, without the "consistent" step: the next unlock
 *   makes m normal again). Why this is safe: I4 - the dead owner never
 *   writes the word again, every other lockless CAS expects owner 0, and
 *   the takeover holds qlock. Limits: waiters that queued while the owner
 *   was alive are not woken by its exit; the first locker that comes later
 *   takes m over and its unlock wakes them. An OS-thread owner's exit is
 *   not detected (no cheap liveness test); its reused TLS block gets a new
 *   generation, so at least nobody inherits it.
 *
 * Destroy
 *   A destroyed mutex holds WFT_MUTEX_DESTROYED (sync/mutex.h), an owner id
 *   nobody has: the fast path's CAS from 0 fails and every slow path
 *   checks for it first, so lock, trylock, timedlock, unlock and a second
 *   destroy return EINVAL at no cost on the fast paths.
 *
 * Rejected alternatives
 *   - A plain store for unlock (a spinlock's release): no way to see a
 *     waiter that queued just before without a StoreLoad fence, which costs
 *     as much as the CAS; so unlock is one CAS, like the kernel's.
 *   - A separate owner field next to a 0/1/2 futex word (2009 kernel): two
 *     stores on the fast path and a window where spinners see no owner.
 *   - Waking every waiter, or the head unconditionally at each unlock: a
 *     herd, or several woken waiters in flight; m->woken gives at most one.
 *   - Detecting starvation only in the woken waiter (Go): it may never run
 *     while the unlocker keeps its worker (no preemption here), so the
 *     unlocker checks (I5, I7).
 *   - Yielding instead of parking when our worker has other work and the
 *     owner runs (a spinner whose PAUSE is a switch, bounded to 16 yields /
 *     20 us, then queue): tried for test-mutex V, where a waiter whose
 *     worker has runnable threads parks at once. One sitting, 5 alternating
 *     runs, medians: V 16 220k vs 346k ops/s, V 128 410k vs 455k (worse);
 *     M 1024 2.07 M vs 1.12 M (better, ranges overlapping). Not kept.
 *   - An MCS queue of spinners: the single spinner slot gets the main win
 *     (no lock-word bouncing) on machines with few workers; others park.
 */
#include "sync/mutex.h"

/* Spin budget of a weft thread, in ns (PAUSE costs 25-35 ns here, so the
 * budget is time, not iterations). The spinner's worker has nothing else to
 * run; if it parks instead, its worker goes idle and the unlocker's wake has
 * to push into its mailbox and kick it out of the kernel: a futex wake plus
 * a wake-up latency of several microseconds on this VM class, and a switch
 * on each side. Spinning for about that long (the classic 2-competitive
 * spin-then-block rule) loses at most a factor of two against an oracle. */
#define WFT_MUTEX_SPIN_NS 10000

/* OS-thread adaptive spin: budget = floor + 2 * estimate, capped. The floor
 * (~30 PAUSEs) catches critical sections of a few hundred ns, the usual
 * case; the cap is the weft budget above (a futex sleep costs about that). */
#define WFT_MUTEX_OS_SPIN_MIN_NS 1000
#define WFT_MUTEX_OS_SPIN_MAX_NS 10000

/* Check the clock every this many spin iterations (~8 PAUSEs = ~250 ns, so
 * the ~20 ns clock read is under 10% of the spin). */
#define WFT_MUTEX_SPIN_CLOCK_EVERY 8

/* Starvation threshold: a waiter (the queue's head, or woken and in
 * flight) that has been at the head this long ("Head time") is handed the
 * lock by the next contended unlock (I5, I7), and a woken waiter that loses
 * the race after this long sets HANDOFF (Go's 1 ms: long against a critical
 * section, short against a human). */
#define WFT_MUTEX_STARVE_NS 1000000

/* Rotation: while a spinner is active (I6) queued waiters are not woken, so
 * two threads handing the lock to each other by spinning would leave the
 * queue to the hand-off at WFT_MUTEX_STARVE_NS, and a hand-off to a parked
 * thread costs a remote wake (often a kick) with the lock idle meanwhile.
 * So once the head has waited a quarter of that, a normal-mode unlock wakes
 * one waiter anyway: it comes back running and spinning, competes, and if
 * it still loses for the rest of the millisecond the hand-off finds it
 * awake (I7), which is cheap. A quarter leaves time for a wake with a kick
 * (tens of us on this VM class) and a few rounds of competition. */
#define WFT_MUTEX_ROTATE_NS (WFT_MUTEX_STARVE_NS / 4)

/* The OS-thread owner id lives here (waitq.h); its value is the thread's
 * lock generation (mutex.h), 0 until the thread first locks. */
__thread uint64_t wft_mutex_os_id __attribute__((tls_model("initial-exec")));

/* OS-thread lock generations; relaxed: only uniqueness matters */
static _Atomic uint64_t os_gens;

uint64_t wft_lock_os_gen(void)
{
	return wft_fadd(&os_gens, 1, relaxed) + 1;
}

/* Is generation counter value cur (a TCB's t->seq, or the generation in
 * its join word) newer than the generation in owner id o? 16-bit serial
 * number arithmetic: "newer" is up to 32,767 reuses ahead. An older value
 * (a stale read) is never "newer", so a stale read can only make a dead
 * owner look alive, never the reverse. */
static bool gen_newer(uint64_t cur, uintptr_t o)
{
	uint16_t d = (uint16_t)(cur - (uint64_t)(o >> WFT_LOCK_GEN_SHIFT));

	return d != 0 && d < 0x8000;
}

/*
 * Owner death ("Owner death" in the header comment): has the weft thread
 * named by owner id o exited, or has its TCB been reused since it locked?
 * The join word carries the TCB's current generation (runtime/thread.c
 * "Join protocol"): a newer one means reused; the owner's own one in an
 * exited or free state means exited. A join word that names a joiner has
 * no generation: then t->seq says whether the TCB was reused.
 * OS-thread owners cannot be checked: false.
 * Why a wrong "dead" cannot happen: the owner's generation was stored in
 * t->seq and the join word before the owner first ran, so no read that we
 * make after its lock can show an older owner as newer (gen_newer refuses
 * stale values), and the exited/free codes are written only at its exit.
 * Context: any. May park: no.
 */
static bool owner_dead(uintptr_t o)
{
	struct weft_thread *t;
	uintptr_t js;
	unsigned code;

	if (o == 0 || (o & WFT_ID_OS))
		return false;
	t = wft_lock_id_thread(o);
	/* acquire: a type-stable TCB (runtime/thread.c I1); pairs with the
	 * release of the exit's and the joiner's RMWs on the join word. The
	 * takeover that acts on a "dead" answer is a CAS that expects the dead
	 * owner's id, and a dead owner never writes the lock word again */
	js = wft_load(&t->jstate, acquire);
	if (WFT_JS_IS_JOINER(js))
		/* relaxed, and a plain field: it changes only when the TCB is
		 * respawned, which is what we look for; a torn or stale read
		 * is impossible for an aligned word on our targets and an old
		 * value reads as "alive" (gen_newer) */
		return gen_newer(__atomic_load_n(&t->seq, __ATOMIC_RELAXED), o);
	if (gen_newer(WFT_JS_GEN(js), o))
		return true;
	if ((uint16_t)WFT_JS_GEN(js) != (uint16_t)(o >> WFT_LOCK_GEN_SHIFT))
		return false;    /* an older generation: a stale read */
	code = WFT_JS_CODE(js);
	return code == WFT_J_EXITED || code == WFT_J_EXITED_T || code == WFT_J_FREE;
}

#define MSTAT(name) wft_stat_inc_any(wft_worker_self(), name)

static uint32_t os_budget(struct wft_mutex *m)
{
	/* relaxed: a hint; races between updaters lose a sample at worst */
	uint64_t b = WFT_MUTEX_OS_SPIN_MIN_NS + 2 * (uint64_t)wft_load(&m->os_spin_ns, relaxed);

	return b > WFT_MUTEX_OS_SPIN_MAX_NS ? WFT_MUTEX_OS_SPIN_MAX_NS : (uint32_t)b;
}

static void os_learn(struct wft_mutex *m, bool won, uint64_t spun)
{
	/* relaxed: a hint (see os_budget) */
	int64_t est = wft_load(&m->os_spin_ns, relaxed);

	if (won)
		est += ((int64_t)spun - est) / 8;
	else
		est -= est / 8;
	if (est < 0)
		est = 0;
	wft_store(&m->os_spin_ns, (uint32_t)est, relaxed);
}

/*
 * Spin for the lock (see "Spin" above). Returns true if we took it.
 * Context: any. May park: no.
 */
static bool try_spin(struct wft_mutex *m, uintptr_t id, struct weft_thread *self)
{
	struct wft_worker *w = NULL;
	uint64_t budget, start, now = 0;
	uintptr_t v, o;
	uint32_t z = 0;
	bool won = false;

	if (!wft_feat(OWNER_SPIN))
		return false;
	if (self) {
		w = wft_worker_self();
		if (wft_worker_has_work(w))
			return false;
		budget = WFT_MUTEX_SPIN_NS;
	} else {
		budget = os_budget(m);
	}
	/* relaxed test, then acquire CAS: the slot only serialises spinners;
	 * pairs with the release store that frees it */
	if (wft_load(&m->spinner, relaxed) || !wft_cas(&m->spinner, &z, 1, acquire))
		return false;
	MSTAT(mutex_spins);
	start = wft_now();
	for (unsigned i = 1;; i++) {
		/* relaxed: we only act on it through the CAS below */
		v = wft_load(&m->state, relaxed);
		o = wft_mutex_owner(v);
		if (o == id) {
			/* acquire: handed to us in flight (I7); pairs with the
			 * release store of the unlocker */
			wft_fence(acquire);
			won = true;
			break;
		}
		if (o == 0) {
			/* acquire: pairs with the release CAS of the unlock */
			if (wft_cas(&m->state, &v, v | id, acquire)) {
				won = true;
				break;
			}
			continue;
		}
		if (v & WFT_MUTEX_HANDOFF)
			break;           /* a starving waiter is owed the lock */
		/* relaxed: a hint re-read every iteration; the TCB memory is
		 * type-stable while the runtime runs, so a stale owner only
		 * makes us spin or stop one iteration late */
		if (!(o & WFT_ID_OS) &&
		    !wft_load(&wft_lock_id_thread(o)->on_cpu, relaxed))
			break;           /* owner not running: it will not release soon */
		if (w && wft_worker_has_work(w))
			break;           /* our worker has work: run it instead */
		if (i % WFT_MUTEX_SPIN_CLOCK_EVERY == 0) {
			now = wft_now();
			if (now - start > budget)
				break;
		}
		wft_cpu_relax();
	}
	/* release: orders our spin before the next spinner's; pairs with the
	 * acquire CAS above */
	wft_store(&m->spinner, 0, release);
	if (won)
		MSTAT(mutex_spin_wins);
	else
		MSTAT(mutex_spin_aborts);
	if (!self)
		os_learn(m, won, (won ? wft_now() : now) - start);
	return won;
}

/* "Head time": the record at the head of the queue (if any) gets its head
 * time now unless it has one. *now caches the clock (NULL: read it).
 * Locks: m->qlock. */
static void head_time_locked(struct wft_mutex *m, weft_time_t *now)
{
	struct wft_swaiter *h = wft_waitq_first(&m->q);
	weft_time_t t;

	if (!h || h->since != 0)
		return;
	if (now) {
		if (*now == 0)
			*now = wft_now();
		t = *now;
	} else {
		t = wft_now();
	}
	h->since = t;
}

/* Unlink a timed-out record and keep I1/I2. Locks: m->qlock. */
static void dequeue_locked(struct wft_mutex *m, struct wft_swaiter *sw)
{
	bool was_head = wft_waitq_first(&m->q) == sw;

	wft_waitq_remove(&m->q, sw);
	head_time_locked(m, NULL);
	/* relaxed: flag edits under qlock; the owner's release CAS is an RMW of
	 * the same word, so it sees the result either way (see above) */
	if (wft_waitq_empty(&m->q))
		wft_fand(&m->state, m->woken ? ~WFT_MUTEX_HANDOFF : ~WFT_MUTEX_FLAGS, relaxed);
	else if (was_head)
		wft_fand(&m->state, ~WFT_MUTEX_HANDOFF, relaxed);
}

/* The woken waiter resolved (took the lock, or gave up): stop being
 * m->woken and keep I1. Locks: m->qlock. */
static void unwoken_locked(struct wft_mutex *m)
{
	m->woken = NULL;
	if (wft_waitq_empty(&m->q))
		/* relaxed: under qlock, as in dequeue_locked */
		wft_fand(&m->state, ~WFT_MUTEX_FLAGS, relaxed);
}

/*
 * The contended lock. sw is the record to queue (the caller's, already
 * initialised when inited is true); woken says that we are m's woken waiter
 * (m->woken == sw, ours to clear, and the lock may be handed to us, I7).
 * Context: any. May park: yes.
 * Returns: 0, ETIMEDOUT, EINVAL (destroyed), EOWNERDEAD (taken over from an
 * owner that exited; we own m).
 */
__attribute__((noinline, cold))
static int lock_slow(struct wft_mutex *m, uintptr_t id, struct weft_thread *self,
		     weft_time_t deadline, struct wft_swaiter *sw, bool woken, bool inited)
{
	uintptr_t v, nv;
	weft_time_t now;
	int r;

	for (;;) {
		/* 1. Take it while the owner field is 0 (barging, normal mode),
		 * or find it handed to us (I7). */
		/* acquire: for the hand-off case, pairs with the unlocker's
		 * release store; otherwise acted on only through the CAS */
		v = wft_load(&m->state, acquire);
		if (woken && wft_mutex_owner(v) == id)
			goto got;
		if (wft_unlikely(v == WFT_MUTEX_DESTROYED))
			return EINVAL;   /* destroyed, so nobody waits on it */
		while (wft_mutex_owner(v) == 0) {
			/* acquire: pairs with the release CAS/store of the unlock */
			if (wft_cas(&m->state, &v, v | id, acquire))
				goto got;
		}
		/* 2. Spin while that is worth it. */
		if (!(v & WFT_MUTEX_HANDOFF) && try_spin(m, id, self))
			goto got;
		/* 3. Queue and park. */
		now = wft_now();
		if (!inited) {
			wft_swaiter_init(sw, id);
			inited = true;
		}
		wft_slock_lock(&m->qlock);
		/* relaxed: the CAS below decides; qlock orders a hand-off */
		v = wft_load(&m->state, relaxed);
		for (;;) {
			if (woken && wft_mutex_owner(v) == id) {
				/* acquire: the hand-off (I7) was made under qlock,
				 * which we hold; the fence pairs with its release
				 * store for the data it protects */
				wft_fence(acquire);
				unwoken_locked(m);
				wft_slock_unlock(&m->qlock);
				return 0;
			}
			if (wft_mutex_owner(v) == 0) {
				/* acquire: as in step 1 */
				if (wft_cas(&m->state, &v, v | id, acquire)) {
					if (woken)
						unwoken_locked(m);
					wft_slock_unlock(&m->qlock);
					return 0;
				}
				continue;
			}
			if (wft_unlikely(owner_dead(wft_mutex_owner(v)))) {
				/* "Owner death": take it over, flags kept (our
				 * unlock serves the queue). The CAS only elects
				 * us; the dead owner's writes, as far as they
				 * got, came with owner_dead's acquire load of its
				 * TCB's join word (acquire kept here as cheap
				 * insurance). Safe by I4: a dead owner never
				 * unlocks, and we hold qlock. */
				if (wft_cas(&m->state, &v, (v & WFT_MUTEX_FLAGS) | id, acquire)) {
					if (woken)
						unwoken_locked(m);
					wft_slock_unlock(&m->qlock);
					return EOWNERDEAD;
				}
				continue;
			}
			if (deadline != WEFT_TIME_INFINITE && now >= deadline) {
				if (woken)
					unwoken_locked(m);   /* I3: the owner's unlock wakes the next */
				wft_slock_unlock(&m->qlock);
				return ETIMEDOUT;
			}
			nv = v | WFT_MUTEX_WAITERS;
			if (woken && now - sw->since >= WFT_MUTEX_STARVE_NS)
				nv |= WFT_MUTEX_HANDOFF;
			/* relaxed: the RMW itself is the synchronisation with the
			 * owner's release CAS (lost-wakeup argument above); the
			 * record is published by qunlock */
			if (wft_cas(&m->state, &v, nv, relaxed))
				break;
		}
		if (woken) {
			/* back at the head, with its head time ("Head time");
			 * WAITERS stays set (I1: queue non-empty) */
			m->woken = NULL;
			woken = false;
			wft_waitq_push_front(&m->q, sw);
		} else {
			/* "Head time": starts now if we are the head */
			sw->since = wft_waitq_empty(&m->q) ? now : 0;
			wft_waitq_push_back(&m->q, sw);
		}
		wft_slock_unlock(&m->qlock);
		MSTAT(mutex_parks);

		r = wft_waiter_wait(&sw->w, deadline);
		if (r == ETIMEDOUT) {
			wft_slock_lock(&m->qlock);
			if (sw->queued) {
				dequeue_locked(m, sw);
				wft_slock_unlock(&m->qlock);
				return ETIMEDOUT;
			}
			wft_slock_unlock(&m->qlock);
			/* An unlocker unlinked us first: wait for its WOKEN store
			 * (sync/wake_q.c I3), then take what it gave us. */
			wft_waiter_wait(&sw->w, WEFT_TIME_INFINITE);
		}
		if (sw->w.result == WFT_SW_HANDED)
			return 0;        /* the unlocker stored our id (I4) */
		/* COMPETE: we are m->woken now (the unlocker set it). */
		woken = true;
		wft_waiter_init(&sw->w);
		sw->w.result = 0;
	}
got:
	if (woken) {
		wft_slock_lock(&m->qlock);
		unwoken_locked(m);
		wft_slock_unlock(&m->qlock);
	}
	return 0;
}

static int lock_common(weft_mutex_t *pm, weft_time_t deadline)
{
	struct wft_mutex *m = wft_mutex_of(pm);
	struct weft_thread *self;
	struct wft_swaiter sw;
	uintptr_t id, v = 0;

	if (!pm)
		return EINVAL;
	id = wft_lock_self_id(&self);
	/* acquire: the critical section must not start before we own the lock;
	 * pairs with the release CAS/store of the previous owner's unlock */
	if (wft_likely(wft_cas(&m->state, &v, id, acquire)))
		return 0;
	if (wft_mutex_owner(v) == id)
		return EDEADLK;
	if (wft_unlikely(v == WFT_MUTEX_DESTROYED))
		return EINVAL;
	return lock_slow(m, id, self, deadline, &sw, false, false);
}

/*
 * Context: any. May park: yes.
 * Returns: 0, EINVAL (m NULL or destroyed), EDEADLK (already owned by the
 * caller), EOWNERDEAD (the owner exited holding m; the caller owns it now).
 */
int weft_mutex_lock(weft_mutex_t *m)
{
	return lock_common(m, WEFT_TIME_INFINITE);
}

/*
 * Context: any. May park: yes.
 * Returns: as weft_mutex_lock, plus ETIMEDOUT.
 */
int weft_mutex_timedlock(weft_mutex_t *m, weft_time_t deadline)
{
	return lock_common(m, deadline);
}

/*
 * trylock found the owner dead: take m over under qlock, as lock_slow does.
 * Context: any. May park: no.
 * Returns: EOWNERDEAD (we own m), EBUSY (someone else took it first).
 */
static int take_dead(struct wft_mutex *m, uintptr_t id)
{
	uintptr_t v;
	int r = EBUSY;

	wft_slock_lock(&m->qlock);
	/* relaxed: acted on only through the CAS */
	v = wft_load(&m->state, relaxed);
	while (owner_dead(wft_mutex_owner(v))) {
		/* acquire: as in lock_slow's takeover (the visibility
		 * comes from owner_dead's acquire load) */
		if (wft_cas(&m->state, &v, (v & WFT_MUTEX_FLAGS) | id, acquire)) {
			r = EOWNERDEAD;
			break;
		}
	}
	wft_slock_unlock(&m->qlock);
	return r;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (m NULL or destroyed), EBUSY (owned by anyone,
 * including the caller), EOWNERDEAD (as weft_mutex_lock).
 */
int weft_mutex_trylock(weft_mutex_t *pm)
{
	struct wft_mutex *m = wft_mutex_of(pm);
	struct weft_thread *self;
	uintptr_t id, v = 0;

	if (!pm)
		return EINVAL;
	id = wft_lock_self_id(&self);
	/* acquire: as in lock_common */
	if (wft_likely(wft_cas(&m->state, &v, id, acquire)))
		return 0;
	while (wft_mutex_owner(v) == 0)
		/* acquire: as above (normal mode allows barging) */
		if (wft_cas(&m->state, &v, v | id, acquire))
			return 0;
	if (wft_unlikely(v == WFT_MUTEX_DESTROYED))
		return EINVAL;
	if (wft_unlikely(owner_dead(wft_mutex_owner(v))))
		return take_dead(m, id);
	return EBUSY;
}

int wft_mutex_lock_id(struct wft_mutex *m, uintptr_t id, struct weft_thread *self)
{
	struct wft_swaiter sw;
	uintptr_t v = 0;

	/* acquire: as in lock_common */
	if (wft_cas(&m->state, &v, id, acquire))
		return 0;
	if (wft_unlikely(v == WFT_MUTEX_DESTROYED))
		return EINVAL;
	return lock_slow(m, id, self, WEFT_TIME_INFINITE, &sw, false, false);
}

int wft_mutex_relock(struct wft_mutex *m, struct wft_swaiter *sw, struct weft_thread *self)
{
	if (sw->w.result == WFT_SW_HANDED)
		return 0;
	WFT_ASSERT(sw->w.result == WFT_SW_COMPETE);
	wft_waiter_init(&sw->w);
	sw->w.result = 0;
	return lock_slow(m, sw->id, self, WEFT_TIME_INFINITE, sw, true, true);
}

/* ---------------------------------------------------------------------- */
/* Unlock. */

/* Has sw been at the head long enough to be owed the lock (I5, I7)? */
static bool starving(struct wft_swaiter *sw, weft_time_t *now)
{
	if (*now == 0)
		*now = wft_now();
	return *now - sw->since >= WFT_MUTEX_STARVE_NS;
}

/* Has the head been at the head long enough to be woken despite a spinner
 * (I6)? */
static bool rotate(struct wft_swaiter *head, weft_time_t *now)
{
	if (*now == 0)
		*now = wft_now();
	return *now - head->since >= WFT_MUTEX_ROTATE_NS;
}

/*
 * The contended unlock: flags were set, so take qlock first and decide
 * there (the word is stable meanwhile: we own m and hold qlock, I4), in
 * this order:
 *  - the woken waiter in flight is starving: store its id as the owner; it
 *    is awake and picks the lock up (I7);
 *  - the head is starving (HANDOFF, or I5): unlink it, store its id as the
 *    owner, wake it with HANDED;
 *  - normal mode: store owner 0 (WAITERS per I1), and unless a woken waiter
 *    is in flight or someone spins (I3, I6) unlink one (pick) and wake it
 *    with COMPETE after qlock.
 * Context: any; the caller owns m. May park: no.
 * Returns: 0, EPERM.
 */
__attribute__((noinline, cold))
static int unlock_slow(struct wft_mutex *m, uintptr_t id, uintptr_t v)
{
	struct wft_swaiter *sw, *next;
	weft_time_t now = 0;
	uintptr_t nv;
	bool wake;

	if (wft_unlikely(v == WFT_MUTEX_DESTROYED))
		return EINVAL;
	if (wft_mutex_owner(v) != id)
		return EPERM;
	wft_slock_lock(&m->qlock);
	/* relaxed: stable while we own m and hold qlock (I4) */
	v = wft_load(&m->state, relaxed);
	sw = m->woken;
	wake = false;
	if (!sw || !starving(sw, &now)) {
		sw = wft_waitq_first(&m->q);
		if (sw && ((v & WFT_MUTEX_HANDOFF) || starving(sw, &now))) {
			wft_waitq_remove(&m->q, sw);
			head_time_locked(m, &now);
			sw->w.result = WFT_SW_HANDED;
			wake = true;
		} else {
			sw = NULL;
		}
	}
	if (sw) {
		/* Hand-off: to m->woken (stays m->woken until it picks the
		 * lock up) or to the head. */
		nv = sw->id;
		next = wft_waitq_first(&m->q);
		if (next || m->woken)
			nv |= WFT_MUTEX_WAITERS;
		if (next && starving(next, &now))
			nv |= WFT_MUTEX_HANDOFF;
		/* release: publishes our critical section to the new owner
		 * (which may also get it through a later WOKEN store) and to
		 * lockless readers of the word; a store is safe by I4 */
		wft_store(&m->state, nv, release);
		wft_slock_unlock(&m->qlock);
		MSTAT(mutex_handoffs);
		if (wake)
			wft_waiter_wake_yield(&sw->w);   /* runs next, here */
		return 0;
	}
	/* relaxed: a hint; a spinner that gives up re-checks the lock word
	 * under qlock before it parks (lock_slow step 3), so skipping the wake
	 * for it cannot strand the queue (I6). The head that has waited
	 * WFT_MUTEX_ROTATE_NS is woken anyway (see "Rotation"). */
	next = wft_waitq_first(&m->q);
	sw = NULL;
	if (!m->woken && next &&
	    (!wft_load(&m->spinner, relaxed) || rotate(next, &now)) &&
	    (sw = wft_wake_q_pick(&m->q, WFT_PICK_RUN_NOW)) != NULL) {
		wft_waitq_remove(&m->q, sw);
		/* a picked non-head starts its head time now; the new head
		 * (if the head was picked) too */
		if (sw->since == 0) {
			if (now == 0)
				now = wft_now();
			sw->since = now;
		}
		head_time_locked(m, &now);
		sw->w.result = WFT_SW_COMPETE;
		m->woken = sw;
	}
	/* release: publishes the critical section; pairs with the acquire CAS
	 * of the next owner. WAITERS per I1; HANDOFF cannot be set here (it
	 * would have sent us to the hand-off). A store is safe by I4. */
	wft_store(&m->state, (!wft_waitq_empty(&m->q) || m->woken) ? WFT_MUTEX_WAITERS : 0,
		  release);
	wft_slock_unlock(&m->qlock);
	if (sw)
		wft_waiter_wake(&sw->w);
	return 0;
}

int wft_mutex_unlock_id(struct wft_mutex *m, uintptr_t id)
{
	uintptr_t v = id;

	/* release: publishes the critical section; pairs with the acquire CAS
	 * of the next owner (lock_common, lock_slow, try_spin) */
	if (wft_likely(wft_cas(&m->state, &v, 0, release)))
		return 0;
	return unlock_slow(m, id, v);
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (m NULL or destroyed), EPERM (the caller does not own
 * m).
 */
int weft_mutex_unlock(weft_mutex_t *pm)
{
	struct weft_thread *self;
	uintptr_t id;

	if (!pm)
		return EINVAL;
	id = wft_lock_self_id(&self);
	return wft_mutex_unlock_id(wft_mutex_of(pm), id);
}

/* ---------------------------------------------------------------------- */
/* Wait morphing (cond.c). */

void wft_mutex_requeue(struct wft_mutex *m, struct wft_waitq *list, struct wft_wake_q *wq)
{
	struct wft_swaiter *sw;
	weft_time_t now;
	uintptr_t v;

	if (wft_waitq_empty(list))
		return;
	now = wft_now();
	for (sw = wft_waitq_first(list); sw; sw = wft_waitq_next(sw)) {
		/* sw->claim is already WFT_SW_CLAIMED ("on the mutex"): cond.c
		 * claimed each record by CAS before handing it over. Head time
		 * is set below for the one that becomes woken or head. */
		sw->since = 0;
		sw->skips = 0;
	}
	wft_slock_lock(&m->qlock);
	/* relaxed: acted on only through the CAS */
	v = wft_load(&m->state, relaxed);
	for (;;) {
		if (wft_mutex_owner(v) == 0 && !m->woken) {
			/* Free and nobody in flight: the first one competes now. */
			sw = wft_waitq_pop_front(list);
			sw->since = now;
			sw->w.result = WFT_SW_COMPETE;
			m->woken = sw;
			wft_wake_q_add(wq, &sw->w);
		}
		/* relaxed: as in lock_slow; WAITERS for the records we queue or
		 * the woken one (I1), set by an RMW that saw either an owner (its
		 * unlock will come through qlock) or owner 0 with m->woken set
		 * (which resolves under qlock, I3) */
		if (wft_cas(&m->state, &v, v | WFT_MUTEX_WAITERS, relaxed))
			break;
	}
	wft_waitq_splice_back(&m->q, list);
	head_time_locked(m, &now);
	wft_slock_unlock(&m->qlock);
}

/* ---------------------------------------------------------------------- */

/*
 * Context: any; no thread may use m concurrently. May park: no.
 * Returns: 0, EINVAL (m NULL).
 */
int weft_mutex_init(weft_mutex_t *m)
{
	if (!m)
		return EINVAL;
	*m = (weft_mutex_t)WEFT_MUTEX_INITIALIZER;
	return 0;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (m NULL or already destroyed), EBUSY (locked, waited
 * on, or a woken waiter or spinner is still on its way).
 * After 0 the lock word holds WFT_MUTEX_DESTROYED, so later calls (until
 * weft_mutex_init) return EINVAL instead of locking freed state.
 */
int weft_mutex_destroy(weft_mutex_t *pm)
{
	struct wft_mutex *m = wft_mutex_of(pm);
	uintptr_t v = 0;
	int r = 0;

	if (!pm)
		return EINVAL;
	wft_slock_lock(&m->qlock);
	/* relaxed: destroying a mutex in use is the caller's race; the CAS
	 * only keeps a racing lock from being overwritten */
	if (m->woken != NULL || !wft_waitq_empty(&m->q) || wft_load(&m->spinner, relaxed) != 0 ||
	    !wft_cas(&m->state, &v, WFT_MUTEX_DESTROYED, relaxed))
		r = v == WFT_MUTEX_DESTROYED ? EINVAL : EBUSY;
	wft_slock_unlock(&m->qlock);
	return r;
}
