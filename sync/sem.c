/*
 * sync/sem.c - weft_sem_t: counting semaphore with direct hand-off to FIFO
 * waiters and batched wakeups (wake queues).
 *
 * What it owns
 *   The semaphore word, its wait queue, and the post paths that grant units
 *   to waiters and collect them in a wake queue (docs/seeds.md "Seed 000":
 *   "all work is done by the waker; the woken task does not even take a
 *   lock").
 *
 * State word (s->v, 64 bits)
 *
 *   bits 63..34 | bit 33    | bit 32  | bits 31..0
 *   0           | DESTROYED | WAITERS | value (0 .. WEFT_SEM_VALUE_MAX)
 *
 *   value     Units available. Taken by a CAS (value - 1) without the lock
 *             while WAITERS is clear.
 *   WAITERS   The queue is non-empty. Posters must take the slow path and
 *             grant their units to queued waiters first (no barging past a
 *             waiter). Set under qlock by a waiter's CAS that saw value 0;
 *             cleared under qlock when the queue empties.
 *
 *   DESTROYED Set by a successful destroy (the whole word becomes DESTROYED)
 *             and cleared by init: every later call but init returns
 *             EINVAL. The fast paths need no extra test: a wait's CAS needs
 *             value > 0 (0 here), a post's needs the bits above value
 *             clear.
 *
 *   I1. WAITERS => value == 0. (It is set only by a CAS that saw value 0;
 *       while it is set no lockless CAS succeeds: waits need value > 0,
 *       posts need WAITERS clear; so the word changes only under qlock.)
 *   I2. Under qlock: WAITERS <=> queue non-empty.
 *   I3. A granted waiter owns its unit from the moment a poster wins the
 *       claim CAS on its record (under qlock, just before the unlink); it
 *       returns 0 even if its deadline passed meanwhile.
 *   I4. A waiter that cancelled its record (claim CAS WAITING ->
 *       CANCELLED after its deadline) is counted until it has taken qlock
 *       once more: its record is still on s->q, or a poster that met it
 *       there unlinked it into s->leaving. Destroy returns EBUSY while
 *       either is non-zero, so the cancelled waiter's qlock is never a use
 *       after free.
 *
 * Protocol
 *   "Wait": CAS value -> value - 1 (acquire) while value > 0. Else under
 *   qlock: CAS to take a unit, or CAS to set WAITERS; queue the record;
 *   park. On wake: the unit is ours (result GRANTED); return 0 without
 *   touching s (s may even be destroyed by then: the poster may destroy and
 *   free it right after its post returns, see "Timeout" for the timed-out
 *   path, which keeps this promise too).
 *   "Post n": while WAITERS is clear, CAS value -> value + n (release).
 *   Else under qlock: grant one unit each to up to n waiters (pick: head,
 *   or a cache-hot one among the first few), unlinking them into the wake
 *   queue; if that empties the queue, store value = the remaining units with
 *   WAITERS clear (a store is safe by I1). Then flush (post, post_n) or
 *   leave the flush to the caller (post_wq).
 *
 *     waiter                              poster
 *     ------                              ------
 *     qlock                               CAS v: value += n, only if
 *     CAS v: WAITERS on, only if            WAITERS clear (RMW)
 *       value == 0 (RMW)                  else: qlock; grant; qunlock
 *     queue; qunlock; park                flush (wake)
 *
 *   Either the waiter's CAS sees the poster's units (it takes one instead of
 *   queueing) or the poster's CAS sees WAITERS (it goes to qlock, which it
 *   gets after the waiter's qunlock, and grants the record), because both
 *   are RMWs of the same word. No StoreLoad fence is needed.
 *
 *   Linearisation points: wait = the CAS that decrements, or a poster's
 *   claim CAS on its record (I3); post = its CAS, or its grant under qlock;
 *   timed-out wait = its own cancel CAS.
 *
 *   "Timeout": the park returned ETIMEDOUT. Before touching s the waiter
 *   CASes its record's claim WAITING -> CANCELLED (sync/waitq.h).
 *     won:  no poster can grant it any more, and s counts it (I4): under
 *           qlock unlink it (still queued; fix WAITERS) or decrement
 *           s->leaving (a poster unlinked it); ETIMEDOUT, no unit taken.
 *     lost: a poster granted it (I3): wait for the flush's WOKEN, never
 *           touching s, and return 0.
 *
 *     waiter (timed out)               poster (holds qlock)
 *     CAS claim WAITING->CANCELLED     CAS claim WAITING->CLAIMED
 *     won: qlock; unlink or leaving--  won: unlink; GRANTED; wake_q add
 *     lost: wait for WOKEN             lost: unlink; leaving++; next one
 *
 *   Either the waiter's CAS sees WAITING (no unit is granted to it, and it
 *   takes qlock while I4 keeps s alive) or the poster's CAS sees WAITING
 *   (the waiter owns a unit and never touches s again), because both CAS
 *   the same byte and only WAITING can change. So no unit is ever lost or
 *   doubled, and the window where the waiter sees its deadline, a post
 *   grants and the poster destroys s, and the waiter then takes s->qlock
 *   is closed.
 *
 *   Interleavings considered: post racing a waiter's queueing (above); post
 *   racing a waiter's timeout (sembench -T; "Timeout"); a post that meets a
 *   cancelled record at the head (unlinked into leaving, the unit goes to
 *   the next one or to value); a post_wq whose flush is late (the waiter
 *   waits for it, wake_q.c I3, and does not touch s meanwhile); destroy
 *   after a post_wq and before its flush (0: the granted waiter is
 *   decided); posts larger than the queue (the rest becomes value);
 *   overflow (checked before anything changes).
 *
 * Posts from signal handlers (async-signal safety)
 *   weft_sem_post and weft_sem_post_n may be called from a signal handler,
 *   as sem_post(3). The danger is qlock: the handler may have interrupted
 *   a thread that holds it, and a handler that spins on it never returns.
 *   So no post ever waits for qlock: a post whose lockless CAS sees
 *   WAITERS makes one RMW on the lock word, which either takes qlock (it
 *   was free) or adds the post's units to the deferred count kept in the
 *   same word (it was held), and in the second case returns 0 at once;
 *   the thread that holds qlock grants the units before it lets go. The
 *   rest of a post is lock-free already: the wake queue's flush CASes
 *   mailboxes and kicks with futex or eventfd syscalls.
 *   Where the handler runs matters. Workers are created with every signal
 *   blocked except SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS,
 *   SIGABRT, SIGPIPE, SIGXFSZ, SIGXCPU, SIGPROF and SIGVTALRM
 *   (wft_sig_worker_set, runtime/segv.c). The handler of any other signal
 *   runs on one of the program's own OS threads, and that is the case the
 *   argument below covers. The handler of one of those twelve may run on
 *   a worker's OS thread (SIGPROF and SIGVTALRM from an interval timer
 *   go, in practice, to the thread that burns the CPU, often a worker),
 *   in the middle of its scheduler: a post there whose wakeup is placed
 *   on that worker does the owner-only runqueue push on top of the push
 *   or pick it interrupted (lost or doubled threads). Telling that case
 *   apart is not cheap on the post path, so it is a documented rule
 *   instead (weft/sync.h, weft_sem(3)): those handlers must not post.
 *   Nor is a post async-signal-safe with the NO_MAILBOX switch: the wake
 *   then takes the target worker's rqlock (spinning), and a handler that
 *   interrupted a holder of that lock on its own OS thread spins forever.
 *
 * Lock word (s->lk, 64 bits): qlock and the deferred count in one word
 *
 *   bits 63..32         | bits 31..0
 *   deferred (units)    | state: FREE 0, HELD 1, SLEEPERS 2
 *
 *   state     qlock: HELD, or SLEEPERS (held, and a locker may sleep on
 *             the futex: the holder must wake one when it lets go). The
 *             futex is the state half alone (sem_futex), so a post that
 *             only changes deferred does not disturb a sleeper's futex
 *             wait. The kernel reads that half by itself; C code only
 *             ever accesses the whole 64-bit word.
 *   deferred  Units posted while qlock was held, not yet granted.
 *
 *   L1. state FREE => deferred == 0. (A post adds units only with a CAS
 *       that saw qlock held; a holder lets go only with a CAS that saw
 *       deferred 0.) So whoever takes qlock has no units to drain.
 *   L2. After init, every write to lk is an RMW (CAS or fetch_sub). An
 *       RMW reads the last value before its own write in lk's
 *       modification order (C11 7.17.3), so RMWs on lk never miss one
 *       another; and the release sequence headed by any release RMW on lk
 *       runs through every later write (all are RMWs), so an acquire of lk
 *       synchronizes with every earlier release on it, whichever thread's
 *       RMW came in between.
 *
 *     operation            RMW on lk                         order
 *     lock (sem_lock)      CAS 0 -> HELD; slow path: spin,   acquire
 *                          CAS state HELD -> SLEEPERS        relaxed
 *                          keeping deferred, futex wait;
 *                          CAS FREE -> SLEEPERS              acquire
 *     post, qlock free     CAS 0 -> HELD (then as a holder)  acquire
 *     post, qlock held     CAS deferred += n, state kept     release
 *     drain (holder)       load; grant; fetch_sub deferred   acquire;
 *                                                            release
 *     unlock (holder)      CAS {state, 0} -> 0; if it fails  release
 *                          on deferred != 0: drain, retry;
 *                          if state was SLEEPERS: futex wake
 *
 *   The three races this must survive, and why none can happen:
 *
 *   Lost deferred unit. A post P adds units while H holds qlock, and H
 *   lets go without them. H lets go only by a CAS that expects deferred
 *   0, and P's add is a CAS that expects qlock held; both are RMWs of the
 *   same word, so one comes first in lk's modification order and the
 *   other reads its result (L2). P first: H's CAS reads deferred != 0 and
 *   fails, and H drains P's units before it tries again. H first: P's CAS
 *   reads FREE and fails; P retries, takes qlock itself and grants its
 *   own units. No fence and no seq_cst is needed, and no argument about
 *   the order of accesses to two different words.
 *
 *   Use after free by a destroyer. After a post's units can be seen, any
 *   thread may take them (trywait, the fast path, a waiter granted by a
 *   drain whose wake a flush already sent), call weft_sem_destroy and
 *   free s; POSIX allows it once no thread is blocked on s, so a post
 *   must not touch *s after the RMW that lets go of it. That RMW is the
 *   lockless CAS of a fast post (nothing follows), the deferred add of a
 *   post that found qlock held (nothing follows: return 0), or the unlock
 *   CAS of a post that held qlock (sem_unlock: only the futex wake
 *   follows, then the flush, which touches the waiters' records, not s).
 *   A destroyer that took a unit cannot free s before that RMW either:
 *   destroy takes qlock itself, and qlock is held until the unlock CAS;
 *   the deferred add leaves the holder to release. The futex wake after
 *   the unlock CAS is the one exception, and harmless: FUTEX_WAKE_PRIVATE
 *   computes its key from the address and never reads the memory, so on
 *   freed memory it wakes nobody, and on memory reused for another futex
 *   it wakes a thread spuriously, which every futex waiter allows (it
 *   re-checks its word). The other callers keep the same rule: wait_slow
 *   does not touch s after its unlock unless I4 keeps s alive (timeout);
 *   trywait takes its unit under qlock when it drains; destroy only
 *   flushes.
 *
 *   A handler posting while its own thread holds qlock. The handler's CAS
 *   reads HELD or SLEEPERS and adds to deferred; it never waits. The
 *   interrupted holder's own unlock CAS then fails on deferred != 0 and it
 *   drains. A handler that interrupts a thread between its unlock CAS and
 *   its futex wake finds qlock FREE and takes it (L1: nothing to drain); a
 *   handler that interrupts a thread spinning or sleeping in sem_lock
 *   takes qlock or defers to whoever holds it. A post's CAS loop is
 *   lock-free: each failure means another RMW on lk succeeded.
 *
 *   Order of a drain. The holder reads deferred (acquire: pairs with the
 *   posters' release CAS, so what a poster did before the post happens
 *   before the grant, hence before the wakee's return through the flush's
 *   WOKEN), grants that many units and only then subtracts them
 *   (release). So a unit is always in deferred, in the value or with a
 *   waiter, and a trywait that reads deferred 0 (acquire: the subtraction
 *   or a later RMW, L2) and then the value misses none; one that reads
 *   deferred != 0 takes qlock, whose previous holder drained everything
 *   before its unlock (L1), and looks under it.
 *
 *   Width of deferred. 32 bits hold 2^32 - 1 = 2 * WEFT_SEM_VALUE_MAX + 1
 *   units, and the add saturates there instead of wrapping. A drain hands
 *   one unit to each queued waiter and caps the value at
 *   WEFT_SEM_VALUE_MAX (the documented fate of a deferred post, which
 *   cannot report EOVERFLOW: its poster has returned), so a saturated
 *   count loses only units that the cap would drop anyway, unless more
 *   than 2^31 threads wait on s, which no process can hold (each needs its
 *   own stack).
 *
 *   Why 64 bits: a 32-bit word would leave 30 bits for deferred, fewer
 *   than one post_n of WEFT_SEM_VALUE_MAX needs. The futex stays 32-bit
 *   by waiting on the state half.
 *
 * Rejected alternatives
 *   - Waking waiters to retry the decrement (2.2-era semaphores, seed 003):
 *     a herd, and a woken waiter can lose its unit to a barger.
 *   - A negative count for waiters (old kernel semaphores): the grant then
 *     needs a second word for who got what; with direct hand-off the
 *     queue already says it.
 */
#include "sync/waitq.h"

#define WFT_SEM_WAITERS   ((uint64_t)1 << 32)
#define WFT_SEM_DESTROYED ((uint64_t)1 << 33)
#define WFT_SEM_VALUE     ((uint64_t)0xffffffffu)
/* Bits that send a post to the slow path. */
#define WFT_SEM_SLOW      (WFT_SEM_WAITERS | WFT_SEM_DESTROYED)

struct wft_sem {
	_Atomic uint64_t v;           /* value | WAITERS | DESTROYED */
	_Atomic uint64_t lk;          /* qlock state | deferred ("Lock word") */
	uint32_t leaving;             /* I4: cancelled records a poster
	                               * unlinked, owners not yet back; qlock */
	struct wft_waitq q;           /* FIFO; qlock */
};
_Static_assert(sizeof(struct wft_sem) <= sizeof(weft_sem_t), "sem fits its public type");

#define sem_of(ps) ((struct wft_sem *)(void *)(ps))

/* Lock word ("Lock word"). */
#define WFT_SEM_LK_FREE     ((uint64_t)0)
#define WFT_SEM_LK_HELD     ((uint64_t)1)
#define WFT_SEM_LK_SLEEPERS ((uint64_t)2)
#define WFT_SEM_LK_STATE    ((uint64_t)0xffffffffu)
#define WFT_SEM_LK_DSHIFT   32
#define WFT_SEM_LK_DMAX     ((uint64_t)0xffffffffu)

/* Bounded spin before a locker sleeps on the futex; the same trade-off
 * as the slock's (sync/wake_q.c WFT_SLOCK_SPINS): the critical sections
 * are queue edits of tens of ns. */
#define WFT_SEM_LOCK_SPINS 64

/* The futex word: the state half of lk. Address arithmetic only; the
 * kernel reads the 32 bits there, C code never does. */
static inline _Atomic uint32_t *sem_futex(struct wft_sem *s)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (_Atomic uint32_t *)(void *)&s->lk;
#else
	return (_Atomic uint32_t *)(void *)((char *)&s->lk + 4);
#endif
}

/* Give n units under qlock: to queued waiters first (into wq), the rest to
 * the value. cap: cap the value at WEFT_SEM_VALUE_MAX instead of failing
 * (a drain of deferred units, whose posters have returned). Returns 0 or
 * EOVERFLOW (nothing given). Context: any, holding qlock. */
static int grant_locked(struct wft_sem *s, uint64_t n, struct wft_wake_q *wq, bool cap)
{
	struct wft_swaiter *sw;
	/* relaxed: with WAITERS set the word only changes under qlock (I1);
	 * with it clear the CAS below re-checks */
	uint64_t v = wft_load(&s->v, relaxed);

	if (v & WFT_SEM_DESTROYED)
		return 0;   /* units deferred into a destroyed semaphore: dropped */
	if (v & WFT_SEM_WAITERS) {
		while (n && (sw = wft_wake_q_pick(&s->q, WFT_PICK_AFFINE)) != NULL) {
			wft_waitq_remove(&s->q, sw);
			if (!wft_swaiter_claim_locked(sw)) {
				/* its owner timed out and cancelled it: it gets
				 * no unit; it still comes for qlock (I4) */
				s->leaving++;
				continue;
			}
			sw->w.result = WFT_SW_GRANTED;
			wft_wake_q_add(wq, &sw->w);
			n--;
		}
		if (!wft_waitq_empty(&s->q))
			return 0;
		if (n > WEFT_SEM_VALUE_MAX)
			n = WEFT_SEM_VALUE_MAX;
		/* release: the units we add are published like a lockless post;
		 * a store is safe by I1 (value 0, no lockless writer) */
		wft_store(&s->v, n, release);
		return 0;
	}
	if (n == 0)
		return 0;
	/* No waiters: lockless takers and posters race us, so CAS. */
	for (;;) {
		uint64_t val = v & WFT_SEM_VALUE, nv = val + n;

		if (nv > WEFT_SEM_VALUE_MAX) {
			if (!cap)
				return EOVERFLOW;
			nv = WEFT_SEM_VALUE_MAX;
		}
		/* release: as the lockless post's CAS */
		if (wft_cas_weak(&s->v, &v, (v & ~WFT_SEM_VALUE) | nv, release))
			return 0;
		if (v & WFT_SEM_SLOW)   /* a waiter queued meanwhile (under qlock: */
			return grant_locked(s, n, wq, cap);   /* impossible; defensive) */
	}
}

/* Grant every deferred unit ("Order of a drain"). Context: any, holding
 * qlock. Returns the lock word after the subtraction.
 * The units stay counted in deferred until they are granted: read, grant,
 * then subtract. (Taking them out first left them in neither deferred nor
 * the value while the grant ran, and a trywait that looked then returned
 * EAGAIN right after its own thread's post.) qlock makes us the only
 * drainer and posters only add, so deferred >= d at the subtraction and
 * what is left is what came in meanwhile. */
static uint64_t drain_locked(struct wft_sem *s, struct wft_wake_q *wq)
{
	/* acquire: pairs with the posters' release CAS (L2: whichever RMW
	 * came in between): what a poster did before posting happens before
	 * the grant, hence before the wakee's return */
	uint64_t w = wft_load(&s->lk, acquire);
	uint64_t d = w >> WFT_SEM_LK_DSHIFT;

	(void)grant_locked(s, d, wq, true);
	/* release: the grant (the value's CAS or store, the claimed records)
	 * happens before any acquire load of lk that reads this value or a
	 * later one (L2): trywait's check relies on it. The state half is
	 * untouched (deferred >= d, so no borrow). */
	return wft_fsub(&s->lk, d << WFT_SEM_LK_DSHIFT, release) -
	       (d << WFT_SEM_LK_DSHIFT);
}

__attribute__((noinline, cold))
static void sem_lock_slow(struct wft_sem *s)
{
	uint64_t w;

	for (unsigned i = 0; i < WFT_SEM_LOCK_SPINS; i++) {
		wft_cpu_relax();
		/* relaxed: test before test-and-set, re-checked by the CAS */
		w = wft_load(&s->lk, relaxed);
		/* acquire: as in sem_lock */
		if ((w & WFT_SEM_LK_STATE) == WFT_SEM_LK_FREE &&
		    wft_cas(&s->lk, &w, w | WFT_SEM_LK_HELD, acquire))
			return;
	}
	/* relaxed: acted on only through the CASes below */
	w = wft_load(&s->lk, relaxed);
	for (;;) {
		switch (w & WFT_SEM_LK_STATE) {
		case WFT_SEM_LK_FREE:
			/* acquire: as in sem_lock. We keep SLEEPERS while we
			 * hold (we cannot know whether others sleep), which
			 * costs at most one spurious futex wake. (L1: w is 0;
			 * the OR keeps any deferred units for our unlock to
			 * drain all the same.) */
			if (wft_cas(&s->lk, &w, w | WFT_SEM_LK_SLEEPERS, acquire))
				return;
			continue;
		case WFT_SEM_LK_HELD:
			/* relaxed: only announces a sleeper to the holder's
			 * unlock CAS, which reads it (an RMW of the same word);
			 * the deferred half is kept */
			if (!wft_cas(&s->lk, &w, (w & ~WFT_SEM_LK_STATE) |
				     WFT_SEM_LK_SLEEPERS, relaxed))
				continue;
			break;
		default:
			break;
		}
		/* returns at once unless the state half is still SLEEPERS
		 * (the kernel compares it under its bucket lock): an unlock
		 * and its wake before this sleep are not lost */
		wft_futex_wait(sem_futex(s), (uint32_t)WFT_SEM_LK_SLEEPERS,
			       WEFT_TIME_INFINITE);
		/* relaxed: as above */
		w = wft_load(&s->lk, relaxed);
	}
}

/* Take qlock (may wait: never from a post). By L1 there is nothing to
 * drain. Context: any but a signal handler. */
static inline void sem_lock(struct wft_sem *s)
{
	uint64_t z = WFT_SEM_LK_FREE;

	/* acquire: the critical section reads what the previous holder wrote;
	 * pairs with the release CAS in sem_unlock */
	if (wft_likely(wft_cas(&s->lk, &z, WFT_SEM_LK_HELD, acquire)))
		return;
	sem_lock_slow(s);
}

/* Drop qlock, granting deferred units first ("Lock word"). The unlock
 * CAS is the last access to *s: the caller must not touch s afterwards
 * unless it otherwise knows s is alive (I4), and the futex wake below
 * may hit freed memory, harmlessly ("Use after free by a destroyer"). */
static void sem_unlock(struct wft_sem *s, struct wft_wake_q *wq)
{
	uint64_t w = WFT_SEM_LK_HELD;   /* the common case: no sleeper */

	for (;;) {
		if ((w >> WFT_SEM_LK_DSHIFT) != 0) {
			w = drain_locked(s, wq);
			continue;
		}
		/* release: publishes the critical section to the next
		 * holder's acquire CAS. Fails (relaxed: the new w is acted on
		 * only through the next CAS or the drain's acquire load) when
		 * a sleeper announced itself or units were deferred. */
		if (wft_cas(&s->lk, &w, WFT_SEM_LK_FREE, release))
			break;
	}
	if ((w & WFT_SEM_LK_STATE) == WFT_SEM_LK_SLEEPERS)
		wft_futex_wake(sem_futex(s), 1);
}

/*
 * Context: any; no concurrent use of s. May park: no.
 * Returns: 0, EINVAL (s NULL, value > WEFT_SEM_VALUE_MAX).
 */
int weft_sem_init(weft_sem_t *ps, unsigned value)
{
	if (!ps || value > WEFT_SEM_VALUE_MAX)
		return EINVAL;
	*ps = (weft_sem_t){ { 0 } };
	/* relaxed: not shared yet */
	wft_store(&sem_of(ps)->v, value, relaxed);
	return 0;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (s NULL or destroyed), EBUSY (waiters, including a
 * timed-out one that has not yet left, I4).
 */
int weft_sem_destroy(weft_sem_t *ps)
{
	struct wft_sem *s = sem_of(ps);
	struct wft_wake_q wq = { 0 };
	int r = 0;

	if (!ps)
		return EINVAL;
	sem_lock(s);
	/* relaxed: under qlock, the word's lockless writers are the caller's
	 * own concurrent use, which destroy forbids */
	if (wft_load(&s->v, relaxed) & WFT_SEM_DESTROYED)
		r = EINVAL;
	else if (!wft_waitq_empty(&s->q) || s->leaving != 0)
		r = EBUSY;
	else
		/* relaxed: later calls read it under qlock or through their
		 * CAS; using a destroyed semaphore concurrently with the destroy
		 * is the caller's race */
		wft_store(&s->v, WFT_SEM_DESTROYED, relaxed);
	sem_unlock(s, &wq);
	wft_wake_q_flush(&wq);
	return r;
}

static inline bool try_take(struct wft_sem *s)
{
	/* relaxed: acted on only through the CAS */
	uint64_t v = wft_load(&s->v, relaxed);

	while (v & WFT_SEM_VALUE) {
		/* acquire: what the poster did before posting happens before
		 * what we do after; pairs with the release CAS in post */
		if (wft_cas_weak(&s->v, &v, v - 1, acquire))
			return true;
	}
	return false;
}

__attribute__((noinline, cold))
static int wait_slow(struct wft_sem *s, weft_time_t deadline)
{
	struct wft_swaiter sw;
	struct wft_wake_q wq = { 0 };
	uint64_t v;
	int r;

	wft_swaiter_init(&sw, 0);
	sem_lock(s);
	/* relaxed: acted on through the CAS */
	v = wft_load(&s->v, relaxed);
	for (;;) {
		if (v & WFT_SEM_DESTROYED) {
			r = EINVAL;
			goto out;
		}
		if (v & WFT_SEM_VALUE) {
			/* acquire: as in try_take */
			if (wft_cas(&s->v, &v, v - 1, acquire)) {
				r = 0;
				goto out;
			}
			continue;
		}
		if (deadline != WEFT_TIME_INFINITE && wft_now() >= deadline) {
			r = ETIMEDOUT;
			goto out;
		}
		/* relaxed: the RMW pairs with the poster's CAS (argument above);
		 * the record is published by qunlock */
		if (wft_cas(&s->v, &v, v | WFT_SEM_WAITERS, relaxed))
			break;
	}
	wft_waitq_push_back(&s->q, &sw);
	/* a drain in the unlock may grant our own record: the wait below
	 * then returns at once */
	sem_unlock(s, &wq);
	wft_wake_q_flush(&wq);

	wft_wait_note(sw.w.thread, "sem", s);
	r = wft_waiter_wait(&sw.w, deadline);
	wft_wait_clear(sw.w.thread);
	if (r == ETIMEDOUT) {
		/* "Timeout": decide on our own record before touching s. */
		if (wft_swaiter_cancel(&sw)) {
			/* I4: s still counts us, so it is alive */
			wq = (struct wft_wake_q){ 0 };
			sem_lock(s);
			if (sw.queued) {
				wft_waitq_remove(&s->q, &sw);
				if (wft_waitq_empty(&s->q))
					/* relaxed: under qlock; value is 0 (I1) */
					wft_fand(&s->v, ~WFT_SEM_WAITERS, relaxed);
			} else {
				s->leaving--;
			}
			sem_unlock(s, &wq);
			wft_wake_q_flush(&wq);
			return ETIMEDOUT;
		}
		/* Granted first (I3): wait for the flush's WOKEN store without
		 * touching s, which may be destroyed by now. */
		while (wft_waiter_wait(&sw.w, WEFT_TIME_INFINITE) != 0)
			;
	}
	return 0;
out:
	sem_unlock(s, &wq);
	wft_wake_q_flush(&wq);
	return r;
}

/*
 * Context: any. May park: yes.
 * Returns: 0, EINVAL (s NULL or destroyed).
 */
int weft_sem_wait(weft_sem_t *ps)
{
	if (!ps)
		return EINVAL;
	if (wft_likely(try_take(sem_of(ps))))
		return 0;
	return wait_slow(sem_of(ps), WEFT_TIME_INFINITE);
}

/*
 * Context: any. May park: yes.
 * Returns: 0, EINVAL (s NULL or destroyed), ETIMEDOUT.
 */
int weft_sem_timedwait(weft_sem_t *ps, weft_time_t deadline)
{
	if (!ps)
		return EINVAL;
	if (try_take(sem_of(ps)))
		return 0;
	return wait_slow(sem_of(ps), deadline);
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (s NULL or destroyed), EAGAIN (value 0).
 */
int weft_sem_trywait(weft_sem_t *ps)
{
	struct wft_sem *s = sem_of(ps);

	if (!ps)
		return EINVAL;
	if (try_take(s))
		return 0;
	/* Deferred units count until granted ("Order of a drain"). Read
	 * deferred before the value: 0 means every unit deferred before this
	 * load (our own thread's earlier post included: coherence) was
	 * granted, and the acquire makes the grant visible to the try_take
	 * below. (Value first, then deferred, could read the value before a
	 * grant and deferred after it.) Non-zero: a holder has them; take
	 * qlock, whose previous holder drained them before letting go (L1),
	 * and look under it: after our unlock we must not touch s (a unit we
	 * drained may let another thread destroy it).
	 * acquire: pairs with drain_locked's release subtraction (L2) */
	if ((wft_load(&s->lk, acquire) >> WFT_SEM_LK_DSHIFT) != 0) {
		struct wft_wake_q wq = { 0 };
		int r;

		sem_lock(s);
		if (try_take(s))
			r = 0;
		else    /* relaxed: under qlock; a snapshot for the error code */
			r = (wft_load(&s->v, relaxed) & WFT_SEM_DESTROYED) ? EINVAL : EAGAIN;
		sem_unlock(s, &wq);
		wft_wake_q_flush(&wq);
		return r;
	}
	if (try_take(s))
		return 0;
	/* relaxed: a snapshot for the error code */
	return (wft_load(&s->v, relaxed) & WFT_SEM_DESTROYED) ? EINVAL : EAGAIN;
}

/* The slow post: WAITERS was set. One RMW on lk takes qlock or defers
 * our units to its holder; never a wait ("Posts from signal handlers").
 * Returns 0 or EOVERFLOW. */
__attribute__((noinline))
static int post_slow(struct wft_sem *s, unsigned n, struct wft_wake_q *wq)
{
	/* relaxed: acted on only through the CAS */
	uint64_t w = wft_load(&s->lk, relaxed);
	int r;

	for (;;) {
		if ((w & WFT_SEM_LK_STATE) == WFT_SEM_LK_FREE) {
			/* acquire: as in sem_lock (L1: w is 0) */
			if (wft_cas(&s->lk, &w, w | WFT_SEM_LK_HELD, acquire))
				break;
		} else {
			uint64_t d = (w >> WFT_SEM_LK_DSHIFT) + n;

			if (d > WFT_SEM_LK_DMAX)   /* "Width of deferred" */
				d = WFT_SEM_LK_DMAX;
			/* release: publishes what we did before the post to the
			 * drainer's acquire load. After it we do not touch s:
			 * the holder grants our units, and whoever takes them
			 * may destroy s ("Use after free by a destroyer") */
			if (wft_cas(&s->lk, &w, (d << WFT_SEM_LK_DSHIFT) |
				    (w & WFT_SEM_LK_STATE), release))
				return 0;
		}
	}
	r = grant_locked(s, n, wq, false);
	sem_unlock(s, wq);
	return r;
}

static int post_common(struct wft_sem *s, unsigned n, struct wft_wake_q *wq)
{
	/* relaxed: acted on only through the CAS */
	uint64_t v = wft_load(&s->v, relaxed);

	if (n > WEFT_SEM_VALUE_MAX)
		return EINVAL;
	if (n == 0)
		return (v & WFT_SEM_DESTROYED) ? EINVAL : 0;
	while (!(v & WFT_SEM_SLOW)) {
		if ((v & WFT_SEM_VALUE) + n > WEFT_SEM_VALUE_MAX)
			return EOVERFLOW;
		/* release: publishes what we did before posting to the
		 * thread that takes the unit (acquire CAS in try_take) */
		if (wft_cas_weak(&s->v, &v, v + n, release))
			return 0;
	}
	if (v & WFT_SEM_DESTROYED)
		return EINVAL;
	return post_slow(s, n, wq);
}

/*
 * Context: any, including a signal handler (not of a signal that workers
 * leave unblocked, not with NO_MAILBOX: "Posts from signal handlers").
 * May park: no.
 * Returns: 0, EINVAL (s NULL or destroyed), EOVERFLOW.
 */
int weft_sem_post(weft_sem_t *ps)
{
	struct wft_wake_q wq = { 0 };
	int r;

	if (!ps)
		return EINVAL;
	r = post_common(sem_of(ps), 1, &wq);
	wft_wake_q_flush(&wq);
	return r;
}

/*
 * Context: any, including a signal handler (not of a signal that workers
 * leave unblocked, not with NO_MAILBOX: "Posts from signal handlers").
 * May park: no.
 * Returns: 0, EINVAL (s NULL or destroyed, n > WEFT_SEM_VALUE_MAX),
 * EOVERFLOW.
 */
int weft_sem_post_n(weft_sem_t *ps, unsigned n)
{
	struct wft_wake_q wq = { 0 };
	int r;

	if (!ps)
		return EINVAL;
	r = post_common(sem_of(ps), n, &wq);
	wft_wake_q_flush(&wq);
	return r;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (s or wq NULL, s destroyed, n > WEFT_SEM_VALUE_MAX),
 * EOVERFLOW.
 */
int weft_sem_post_wq(weft_sem_t *ps, unsigned n, weft_wakeq_t *wq)
{
	if (!ps || !wq)
		return EINVAL;
	return post_common(sem_of(ps), n, wft_wake_q_of(wq));
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (s or v NULL, s destroyed).
 */
int weft_sem_getvalue(weft_sem_t *ps, int *v)
{
	uint64_t w;

	if (!ps || !v)
		return EINVAL;
	/* relaxed: a snapshot */
	w = wft_load(&sem_of(ps)->v, relaxed);
	if (w & WFT_SEM_DESTROYED)
		return EINVAL;
	*v = (int)(w & WFT_SEM_VALUE);
	return 0;
}
