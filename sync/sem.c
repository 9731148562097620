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
 *   doubled, and the old window - the waiter saw its deadline, a post
 *   granted and the poster destroyed s, the waiter then took s->qlock - is
 *   closed.
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
 *   So no post ever waits for qlock. A post whose lockless CAS sees WAITERS
 *   tries qlock once (CAS 0 -> 1); if that fails it adds its units to
 *   s->deferred, a lock-free counter, and tries once more; if that fails
 *   too it returns 0, and the thread that holds qlock grants the units
 *   before it is done (holders call drain_locked() right after taking
 *   qlock and again after every unlock, in sem_unlock()). The rest of a
 *   post is lock-free already: the wake queue's flush CASes mailboxes and
 *   kicks with futex or eventfd syscalls.
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
 *     poster P (maybe in a handler)        holder H
 *     -----------------------------        --------
 *     fadd deferred += n     (seq_cst)     xchg qlock = 0 (unlock, seq_cst)
 *     CAS qlock 0 -> 1       (seq_cst,     load deferred  (seq_cst)
 *                 success and failure)
 *       won: drain, sem_unlock               != 0: CAS qlock 0 -> 1;
 *       lost: return 0                             won: drain, repeat
 *
 *   Why no deferred unit is stranded: if P's CAS fails it read a qlock
 *   value that precedes, in qlock's modification order, the unlock U of
 *   some holder H. Then P's CAS is coherence-ordered before U, and both
 *   are seq_cst, so the CAS precedes U in the single total order S (this
 *   is where the *failed* CAS must be seq_cst: a relaxed failure is not in
 *   S at all). P's fadd is sequenced before its CAS and U before H's load,
 *   so fadd < CAS < U < load in S, and H's seq_cst load sees P's units (or
 *   a later value from which a drainer subtracted them, which it does only
 *   after granting them). The unlock is a seq_cst exchange followed by a
 *   seq_cst load rather than a release exchange and a seq_cst fence: the
 *   same pairing, without a fence instruction (x86: the locked exchange
 *   is already a full barrier and the load a plain move; a fence would
 *   add an mfence to every unlock, two per wakeup: the waiter's and the
 *   poster's). If H's own retry CAS then
 *   fails, a later holder H' took qlock after U; its unlock is also later
 *   than P's CAS in qlock's order, so the same argument applies to H'
 *   (by induction the last holder before qlock goes free drains). A
 *   handler that interrupts H on H's own thread: before H's unlock its
 *   CAS fails and H's later check (program order) sees its units; after
 *   the unlock its CAS succeeds.
 *   A drain reads deferred (acquire: pairs with the release half of the
 *   poster's fadd, so what the poster did before the post happens before
 *   the wakee's return, through the flush's WOKEN), grants that many
 *   units and only then subtracts them (release), so a unit is always in
 *   deferred, in the value or with a waiter: a trywait that reads
 *   deferred 0 (acquire) and then the value misses none.
 *   What a deferred post gives up: it cannot report EOVERFLOW (a drain
 *   caps the value at WEFT_SEM_VALUE_MAX), and until a drain a trywait
 *   does not see it as value (trywait then takes qlock and drains).
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
	struct wft_slock qlock;
	uint32_t leaving;             /* I4: cancelled records a poster
	                               * unlinked, owners not yet back; qlock */
	_Atomic uint32_t deferred;    /* units posted while qlock was held,
	                               * not yet granted ("signal handlers") */
	struct wft_waitq q;           /* FIFO; qlock */
};
_Static_assert(sizeof(struct wft_sem) <= sizeof(weft_sem_t), "sem fits its public type");

#define sem_of(ps) ((struct wft_sem *)(void *)(ps))

/* One attempt at qlock, never a wait: what a post (maybe in a signal
 * handler) may do.
 * seq_cst on success: it acquires the previous holder's critical section,
 * like wft_slock_lock.
 * seq_cst on failure too: in post_slow the *failed* CAS is the load half
 * of the deferred-post pair ("Posts from signal handlers"). The argument
 * that the holder's post-unlock load sees the poster's fadd needs that
 * load (which read qlock held) in the single total order S; a relaxed
 * failure is not in S and C11 would allow the holder to read deferred 0
 * while the poster read qlock 1: units stranded. (Common code generators
 * emit the same instructions for both, which is why it never showed; the
 * model is what we argue from.) sem_unlock's retry does not need it and
 * shares the helper. */
static inline bool sem_trylock(struct wft_sem *s)
{
	uint32_t z = 0;

	return atomic_compare_exchange_strong_explicit(&s->qlock.v, &z, 1,
			memory_order_seq_cst, memory_order_seq_cst);
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

/* Grant every deferred unit. Context: any, holding qlock.
 * The units stay counted in deferred until they are granted: read, grant,
 * then subtract. (Exchanging deferred to 0 first left them in neither
 * deferred nor the value while the grant ran, and a trywait that looked
 * then returned EAGAIN right after its own thread's post.) qlock makes us
 * the only drainer and posters only add, so deferred >= d at the
 * subtraction and what is left is what came in meanwhile. */
static void drain_locked(struct wft_sem *s, struct wft_wake_q *wq)
{
	/* acquire: pairs with the posters' seq_cst fadd (its release half):
	 * what a poster did before posting happens before the grant, hence
	 * before the wakee's return (through the flush's WOKEN) */
	uint32_t d = wft_load(&s->deferred, acquire);

	if (wft_likely(d == 0))
		return;
	(void)grant_locked(s, d, wq, true);
	/* release: the grant (the value's CAS or store, the claimed records)
	 * happens before any acquire load of deferred that reads this value
	 * or a later one (every later write is an RMW, so it continues the
	 * release sequence): trywait's check relies on it */
	wft_fsub(&s->deferred, d, release);
}

/* Take qlock (may wait: not for a poster) and grant deferred units. */
static void sem_lock(struct wft_sem *s, struct wft_wake_q *wq)
{
	wft_slock_lock(&s->qlock);
	drain_locked(s, wq);
}

/* Drop qlock; then take it back and drain as long as deferred units came
 * in meanwhile and nobody else holds it ("Posts from signal handlers"). */
static void sem_unlock(struct wft_sem *s, struct wft_wake_q *wq)
{
	for (;;) {
		drain_locked(s, wq);
		/* seq_cst unlock and seq_cst load: the holder's half of the
		 * deferred-post pair ("Posts from signal handlers"), against
		 * the poster's fadd before its CAS on qlock; drain_locked's
		 * own load acquires what the posters published */
		wft_slock_unlock_seq_cst(&s->qlock);
		if (wft_load(&s->deferred, seq_cst) == 0 || !sem_trylock(s))
			return;
	}
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
	sem_lock(s, &wq);
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
	sem_lock(s, &wq);
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
			sem_lock(s, &wq);
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
	/* Deferred units count until granted (drain_locked). Read deferred
	 * before the value: 0 means every unit deferred before this load
	 * (our own thread's earlier post included: coherence) was granted,
	 * and the acquire makes the grant visible to the try_take below; a
	 * unit in a drainer's hands is still in deferred, and we take qlock,
	 * which the drainer holds, and look after it is done. (Value first,
	 * then deferred, could read the value before a grant and deferred
	 * after it.)
	 * acquire: pairs with drain_locked's release fetch_sub */
	if (wft_load(&s->deferred, acquire) != 0) {
		struct wft_wake_q wq = { 0 };

		sem_lock(s, &wq);
		sem_unlock(s, &wq);
		wft_wake_q_flush(&wq);
	}
	if (try_take(s))
		return 0;
	/* relaxed: a snapshot for the error code */
	return (wft_load(&s->v, relaxed) & WFT_SEM_DESTROYED) ? EINVAL : EAGAIN;
}

/* The slow post: WAITERS was set. Never waits for qlock (see "Posts from
 * signal handlers"). Returns 0 or EOVERFLOW. */
__attribute__((noinline))
static int post_slow(struct wft_sem *s, unsigned n, struct wft_wake_q *wq)
{
	int r;

	if (!sem_trylock(s)) {
		/* seq_cst: the fadd half of the deferred-post pair; its release
		 * half publishes what we did before the post to the drainer */
		wft_fadd(&s->deferred, n, seq_cst);
		if (!sem_trylock(s))
			return 0;   /* the holder drains our units */
		n = 0;              /* ours are in deferred now */
	}
	drain_locked(s, wq);
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
