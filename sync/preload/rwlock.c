/* libweft-preload.so: pthread_rwlock_*.
 *
 * Owns the rwlock object (struct wp_rwlock, preload.h): one 64-bit lock
 * word, the count of waiting writers, the writer's id and glibc's flags.
 *
 * Lock word (word, changed only by atomic read-modify-writes):
 *   bits 0-29   read locks held. A reader adds 1 with a CAS that sees no
 *               writer; RW_READERS held gives EAGAIN.
 *   bit 30      RW_W: a writer holds the lock (its id in writer). Set by
 *               a CAS from "no readers, no writer".
 *   bit 31      always 0.
 *   bits 32-62  generation: bumped (mod 2^31) by every RMW that clears
 *               RW_SLEEPERS, never otherwise.
 *   bit 63      RW_SLEEPERS: a thread may be asleep (or about to sleep) on
 *               the futex half. Whoever makes a change that can let a
 *               sleeper in (a writer's unlock, the last reader's unlock, a
 *               waiting writer giving up) and finds it set must, in the
 *               same RMW, bump the generation and clear it, and then wake
 *               every sleeper.
 * The futex half is the high 32 bits (generation | RW_SLEEPERS): offset 4
 * on a little-endian machine, 0 on a big-endian one (futex_word()).
 * wwait counts the writers inside wrlock's slow path.
 *
 * Waiting writers and new readers (the kinds):
 *   writer-nonrecursive (flags 2, glibc's writer preference): while wwait
 *     is not 0 no reader enters. Writers do not starve; a thread that asks
 *     again for a read lock it holds while a writer waits deadlocks, as
 *     with glibc.
 *   the default kinds (flags 0, PTHREAD_RWLOCK_PREFER_READER_NP, and 1,
 *     which glibc treats the same): a reader holds back for waiting
 *     writers, so that a steady stream of readers cannot starve them, but
 *     for at most RW_HOLD_NS (1 ms, the mutexes' anti-starvation bound),
 *     and not at all if the thread already holds a read lock on this
 *     rwlock (a per-thread table, rd_held: recursive read locks pass at
 *     once; read locks on other rwlocks do not count, or a thread that
 *     keeps one held would pass the writers of every other lock). Held back longer,
 *     it enters as a reader would with glibc's reader preference. So a
 *     program that is correct under glibc (A holds a read lock and waits
 *     for C; B waits to write; C asks for a read lock) still runs: C waits
 *     1 ms, not for ever; and a writer waits at most for the read sections
 *     that began before it plus those of readers held back over 1 ms,
 *     which happens only while read sections last longer than that.
 *
 * Invariants:
 *   I1  The state half changes only by a CAS (acquire) or an RMW (unlock)
 *       on word; a taker's CAS succeeds only on the exact value it
 *       examined, so it decides on the current state, never a stale one.
 *   I2  RW_SLEEPERS is set only by a sleeper's CAS and cleared only
 *       together with a generation bump, so the futex half never returns
 *       to a value a sleeper saw before 2^31 more bumps.
 *   I3  After the RMW that releases the lock, pthread_rwlock_unlock
 *       touches no byte of the object: all it has left is a futex wake on
 *       the futex half, decided from the value that RMW replaced.
 *
 * Acquire. Reader: CAS word to word + 1 while RW_W is clear and the
 * waiting writers let it pass. Writer: CAS word to word | RW_W while the
 * state half is 0. The CASes are acquire: the critical section reads after
 * the lock is ours, pairing with the release RMW of the previous unlock.
 *
 * Sleep (rw_sleep). A thread that found the lock closed in value w:
 *   CAS word w -> w | RW_SLEEPERS   (seq_cst; also when already set)
 *   reader held back only by wwait: load wwait (seq_cst); 0: retry
 *   futex_wait(futex half, high half of w | RW_SLEEPERS)
 * and then retries from a fresh load. The CAS fails if anything in the
 * word changed since w was read; the sleeper then looks again.
 *
 * Release (rw_unlock). One CAS replaces w by
 *   w - (1 or RW_W), and if that leaves the lock free (a writer's unlock or
 *   the last reader's) and w has RW_SLEEPERS: generation + 1, no SLEEPERS
 * (release order: publishes the critical section to the next taker). If
 * it cleared RW_SLEEPERS, futex_wake(futex half, all). Nothing else.
 *
 * Writer gives up (a timed writer's ETIMEDOUT). wwait - 1 (seq_cst), load
 * word (seq_cst); if RW_SLEEPERS: CAS in the bump (seq_cst) and wake all:
 * readers may have waited only because of this writer.
 *
 *   sleeper (rw_sleep)                 releaser / writer giving up
 *   CAS word: set SLEEPERS  [seq_cst]  [writer gives up: wwait-- seq_cst]
 *   [reader: load wwait     seq_cst]   RMW word: release; if SLEEPERS:
 *   futex_wait(hi, seen hi)              bump gen, clear it [release/seq_cst]
 *                                      if it cleared SLEEPERS: futex_wake
 *
 * The races this must survive, and why each cannot happen:
 *
 * Lost wakeup: a sleeper decides to sleep, and the lock is released before
 * its futex_wait starts. The sleeper's CAS and the release's RMW are RMWs
 * on the same word, so one precedes the other in its modification order.
 * Either the CAS comes first: then the release reads RW_SLEEPERS (nothing
 * clears it without a bump, I2), bumps the generation and wakes, and the
 * futex_wait either finds the futex half changed and returns at once or
 * is asleep when the wake comes. Or the release comes first: then the CAS,
 * which expected the closed value it saw before the release, fails (the
 * state half changed), and the sleeper looks again and sees the release.
 * Every change that can let a sleeper in is such an RMW that looks at
 * RW_SLEEPERS: a writer's unlock, the last reader's unlock (an unlock
 * that leaves readers in opens nothing: writers wait for 0, readers only
 * for RW_W and wwait), and a writer giving up. A writer that takes the
 * lock and lowers wwait opens nothing either: RW_W now closes the lock
 * to readers, and its unlock will look at RW_SLEEPERS.
 *
 * Writer timeout: a reader held back only by a waiting writer (lock free
 * or read-held) sleeps; that writer times out. Its wwait decrement is not
 * an RMW on word, so this is a store-buffering pairing, all seq_cst:
 *   reader:  CAS word (SLEEPERS)  ;  load wwait
 *   writer:  wwait--              ;  load word
 * Either the reader's wwait load sees the decrement (it does not sleep and
 * enters), or the writer's word load comes after the reader's CAS in the
 * single total order of seq_cst operations and so reads that CAS's value
 * or a later one: RW_SLEEPERS, and the writer bumps and wakes, or a value
 * already bumped by someone else since, and the futex_wait returns at once.
 * The CAS is done even when RW_SLEEPERS is already set, so that the
 * reader's side always has a seq_cst RMW before its wwait load.
 *
 * ABA: the closed value a sleeper saw comes back before it sleeps (a
 * writer unlocks, another locks). Sleeping on the state itself lost this
 * way: a reader held back by a waiting writer saw state 0, the writer took
 * the lock, released it (0 again) and woke everyone before the reader
 * slept, and the reader slept on 0 with nobody left to wake it (CI:
 * std::shared_mutex hung with state 0 and four sleepers). Here the
 * futex half changes by a bump whenever a release finds RW_SLEEPERS, and
 * a sleeper waits only after its CAS published RW_SLEEPERS, so the futex
 * half could only come back after 2^31 bumps between the sleeper's CAS
 * and its futex_wait (I2). If the whole word comes back without a bump
 * (nobody had published RW_SLEEPERS), the CAS succeeds on a lock that is
 * indeed closed at that moment, and its next release will see the flag.
 *
 * Use after free by a destroyer: POSIX lets a thread destroy an rwlock as
 * soon as it is unlocked, and programs free one right after the last
 * unlock they see (a refcounted object); that thread may run between the
 * unlocker's release and its return. By I3 the unlocker then only calls
 * futex_wake on an address inside the freed object. The kernel looks a
 * private futex up by address and does not touch the memory: on an
 * unmapped page the wake finds nobody, and on memory already reused the
 * wake is a spurious wakeup for whoever waits there, which every futex
 * waiter tolerates (it rechecks its condition; ours reload the word). The
 * lock paths themselves may touch the object to the end: a thread blocked
 * in or still inside a call on the lock keeps it alive (destroying it then
 * is undefined), and a thread that took the lock holds it.
 *
 * Concurrency: any thread may call any function, with any number of
 * takers, sleepers and releasers at once (misuse excepted: an unlock by a
 * thread that does not hold the lock, destroy while in use). The
 * linearisation points are the successful CASes on word (taking,
 * releasing); a timed writer's give-up linearises at its wwait decrement.
 * Interleavings considered: a release between a sleeper's load and its
 * CAS, and between its CAS and its futex_wait; a release and a re-lock
 * (ABA) in either window; a writer timing out in each window of a
 * reader's sleep; two releases bumping in a row; a sleeper timing out
 * (RW_SLEEPERS stays set: the next release makes one spare futex_wake);
 * the lock destroyed and unmapped between a release and its wake.
 *
 * Rejected: a separate sequence word and sleeper count bumped and read
 * after the release (the previous design): the releaser wrote and read
 * the object after another thread could free it. fetch_sub for a reader's
 * unlock: whether the last reader must bump is known only from the old
 * value, and a second RMW would come after the release. FUTEX_WAKE_OP,
 * which changes a word and wakes in one call: a system call in every
 * unlock.
 */
#include "config.h"

#include <errno.h>

#include "preload.h"

#define PR(r) ((struct wp_rwlock *)(r))
#define OFF(r) (__builtin_expect(wp_off, 0) || \
		__atomic_load_n(&PR(r)->shared, __ATOMIC_RELAXED) != 0)

/* Lock word bits (top of file). */
#define RW_READERS 0x3fffffffull
#define RW_W (1ull << 30)
#define RW_GEN_ONE (1ull << 32)
#define RW_GEN (0x7fffffffull << 32)
#define RW_SLEEPERS (1ull << 63)

/* How long a reader of a default-kind lock holds back for waiting writers
 * (top of file). */
#define RW_HOLD_NS 1000000

/* The read locks this thread holds (top of file: recursive readers pass
 * waiting writers), as up to RD_SLOTS (lock, count) pairs. A lock is
 * recorded only while a slot is free: a thread holding more distinct read
 * locks than that is not told it holds the others, and a recursive read
 * lock of one of them waits the hold-back (1 ms) for a waiting writer,
 * which is slower but never deadlocks. The lock address is only a key:
 * nothing here reads the object. */
#define RD_SLOTS 8
static __thread struct {
	struct wp_rwlock *lock;
	unsigned n;
} rd_held[RD_SLOTS] __attribute__((tls_model("initial-exec")));

/* Whether this thread holds a read lock on r (as far as rd_held knows). */
static int rd_holds(struct wp_rwlock *r)
{
	for (int i = 0; i < RD_SLOTS; i++)
		if (rd_held[i].lock == r)
			return 1;
	return 0;
}

/* This thread took a read lock on r. */
static void rd_note(struct wp_rwlock *r)
{
	int f = -1;
	for (int i = 0; i < RD_SLOTS; i++) {
		if (rd_held[i].lock == r) {
			rd_held[i].n++;
			return;
		}
		if (f < 0 && !rd_held[i].lock)
			f = i;
	}
	if (f >= 0) {
		rd_held[f].lock = r;
		rd_held[f].n = 1;
	}
}

/* This thread released a read lock on r (one it may not have recorded:
 * slots were full, or another thread took it, a misuse). */
static void rd_forget(struct wp_rwlock *r)
{
	for (int i = 0; i < RD_SLOTS; i++)
		if (rd_held[i].lock == r) {
			if (--rd_held[i].n == 0)
				rd_held[i].lock = NULL;
			return;
		}
}

/* The futex half of word, as the kernel's 32-bit futex sees it. Computes
 * an address and reads nothing (it may be called on freed memory, I3). */
static inline unsigned *futex_word(struct wp_rwlock *r)
{
	return (unsigned *)((char *)r + offsetof(struct wp_rwlock, word) +
			    (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? 4 : 0));
}

static inline unsigned futex_val(uint64_t w)
{
	return (unsigned)(w >> 32);
}

/* w with the generation bumped and RW_SLEEPERS cleared if it was set. */
static inline uint64_t bumped(uint64_t w)
{
	if (!(w & RW_SLEEPERS))
		return w;
	return (w & ~(RW_GEN | RW_SLEEPERS)) | ((w + RW_GEN_ONE) & RW_GEN);
}

/* Whether a reader may enter, given a value of wwait; late: it has held
 * back for RW_HOLD_NS already (top of file). flags is written by init (or
 * a static initializer) before the lock is shared: a plain read. */
static int rd_may_pass(struct wp_rwlock *r, unsigned wwait, int late)
{
	if (wwait == 0)
		return 1;
	if (r->flags == PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP)
		return 0;
	return late || rd_holds(r);
}

/* Take a read lock without sleeping, starting from *w, a value of word the
 * caller loaded. Returns 0, EAGAIN (too many readers) or EBUSY, with *w
 * the value that showed the lock closed. */
static int rd_take(struct wp_rwlock *r, uint64_t *w, int late)
{
	for (;;) {
		if (*w & RW_W)
			return EBUSY;
		/* relaxed: a hint. A stale value only lets this reader pass a
		 * writer that is just arriving, or holds it back for a writer
		 * that just left: then it goes to rw_sleep, which rereads wwait
		 * seq_cst after publishing RW_SLEEPERS (Writer timeout). The
		 * lock itself is taken by the CAS below. */
		if (!rd_may_pass(r, __atomic_load_n(&r->wwait, __ATOMIC_RELAXED), late))
			return EBUSY;
		if ((*w & RW_READERS) == RW_READERS)
			return EAGAIN;
		/* acquire: pairs with the release RMW of the previous unlock;
		 * the read section reads after the lock is ours (Acquire).
		 * relaxed on failure: *w is examined again before any use */
		if (__atomic_compare_exchange_n(&r->word, w, *w + 1, 1, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			rd_note(r);
			wp_count(WP_RWLOCK, WP_ACQ);
			return 0;
		}
	}
}

/* Take the write lock without sleeping, from *w as rd_take. */
static int wr_take(struct wp_rwlock *r, uint64_t *w)
{
	do {
		if (*w & (RW_READERS | RW_W))
			return EBUSY;
		/* acquire: pairs with the release RMW of the previous unlock
		 * (Acquire). relaxed on failure: *w is examined again */
	} while (!__atomic_compare_exchange_n(&r->word, w, *w | RW_W, 1, __ATOMIC_ACQUIRE,
					      __ATOMIC_RELAXED));
	/* relaxed: read only by this thread (EDEADLK, EPERM) */
	__atomic_store_n(&r->writer, wp_self(), __ATOMIC_RELAXED);
	wp_count(WP_RWLOCK, WP_ACQ);
	return 0;
}

/* Sleep section (top of file): w is the value that showed the lock closed
 * to this thread. Returns 0 to look again (woken, word changed, signal) or
 * ETIMEDOUT. */
static int rw_sleep(struct wp_rwlock *r, uint64_t w, int reader, int late, clockid_t clk,
		    const struct timespec *abs)
{
	uint64_t s = w | RW_SLEEPERS;
	/* seq_cst: ordered against the release's RMW by word's modification
	 * order (Lost wakeup), and the store half of the store-buffering
	 * pairing with a writer giving up (Writer timeout). relaxed on
	 * failure: the caller reloads and looks again */
	if (!__atomic_compare_exchange_n(&r->word, &w, s, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return 0;
	/* seq_cst: the load half of that pairing; its writer half is the
	 * seq_cst wwait decrement and word load in wr_lock */
	if (reader && !(w & RW_W) &&
	    rd_may_pass(r, __atomic_load_n(&r->wwait, __ATOMIC_SEQ_CST), late))
		return 0;
	wp_count(WP_RWLOCK, WP_PARKS);
	return wp_futex_wait(futex_word(r), futex_val(s), abs, clk, 0) == ETIMEDOUT ? ETIMEDOUT
										 : 0;
}

static int rd_lock(struct wp_rwlock *r, clockid_t clk, const struct timespec *abs)
{
	/* relaxed: only this thread stores its own id as writer */
	if (__atomic_load_n(&r->writer, __ATOMIC_RELAXED) == wp_self())
		return EDEADLK;
	/* relaxed: a first guess; the CAS in rd_take or rw_sleep checks it */
	uint64_t w = __atomic_load_n(&r->word, __ATOMIC_RELAXED);
	int e = rd_take(r, &w, 0), late = 0;
	struct timespec hold;   /* CLOCK_MONOTONIC: the end of the hold-back */
	if (e != EBUSY)
		return e;
	if ((e = wp_check_abstime(abs)))
		return e;
	late = r->flags == PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP;   /* no hold-back */
	if (!late) {
		clock_gettime(CLOCK_MONOTONIC, &hold);
		hold.tv_nsec += RW_HOLD_NS;
		if (hold.tv_nsec >= 1000000000) {
			hold.tv_sec++;
			hold.tv_nsec -= 1000000000;
		}
	}
	for (;;) {
		if (!late && !(w & RW_W)) {
			/* held back by waiting writers only: sleep until the
			 * hold-back ends at the latest, then enter past them.
			 * The caller's own deadline is checked by the next
			 * sleep (it can be missed by at most RW_HOLD_NS). */
			e = rw_sleep(r, w, 1, 0, CLOCK_MONOTONIC, &hold);
			if (e == ETIMEDOUT)
				late = 1;
		} else if ((e = rw_sleep(r, w, 1, late, clk, abs))) {
			return e;
		}
		/* relaxed: as above */
		w = __atomic_load_n(&r->word, __ATOMIC_RELAXED);
		if ((e = rd_take(r, &w, late)) != EBUSY)
			return e;
	}
}

static int wr_lock(struct wp_rwlock *r, clockid_t clk, const struct timespec *abs)
{
	if (__atomic_load_n(&r->writer, __ATOMIC_RELAXED) == wp_self())
		return EDEADLK;
	/* relaxed: as in rd_lock */
	uint64_t w = __atomic_load_n(&r->word, __ATOMIC_RELAXED);
	if (wr_take(r, &w) == 0)
		return 0;
	int e = wp_check_abstime(abs);
	if (e)
		return e;
	/* relaxed: readers read wwait as a hint in rd_take, and for a
	 * decision only after their seq_cst CAS (Writer timeout), which
	 * pairs with the decrement, not with this increment; a reader that
	 * misses it just enters before this writer waits */
	__atomic_fetch_add(&r->wwait, 1, __ATOMIC_RELAXED);
	for (;;) {
		if ((e = rw_sleep(r, w, 0, 0, clk, abs)))
			break;
		/* relaxed: the CAS in wr_take or rw_sleep checks it */
		w = __atomic_load_n(&r->word, __ATOMIC_RELAXED);
		if (wr_take(r, &w) == 0)
			break;
	}
	if (!e) {
		/* relaxed: the lock is ours and RW_W holds readers back; the
		 * unlock will look at RW_SLEEPERS (Lost wakeup) */
		__atomic_fetch_sub(&r->wwait, 1, __ATOMIC_RELAXED);
		return 0;
	}
	/* Writer gives up. seq_cst, this decrement and the load: the writer
	 * half of the store-buffering pairing with rw_sleep (Writer timeout) */
	__atomic_fetch_sub(&r->wwait, 1, __ATOMIC_SEQ_CST);
	w = __atomic_load_n(&r->word, __ATOMIC_SEQ_CST);
	while (w & RW_SLEEPERS) {
		/* seq_cst: a reader whose CAS reads this bump comes after it,
		 * and after the decrement, in the total order, so its wwait
		 * load sees the decrement. relaxed on failure: reexamined */
		if (__atomic_compare_exchange_n(&r->word, &w, bumped(w), 1, __ATOMIC_SEQ_CST,
						__ATOMIC_RELAXED)) {
			wp_futex_wake(futex_word(r), INT_MAX, 0);
			break;
		}
	}
	return e;
}

static int rw_unlock(struct wp_rwlock *r)
{
	/* relaxed: a first guess, checked by the CAS; it tells the writer's
	 * unlock from a reader's (only the writer clears RW_W) */
	uint64_t w = __atomic_load_n(&r->word, __ATOMIC_RELAXED), n;
	if (w & RW_W) {
		/* relaxed: only this thread stores its own id */
		if (__atomic_load_n(&r->writer, __ATOMIC_RELAXED) != wp_self())
			return EPERM;
		__atomic_store_n(&r->writer, 0, __ATOMIC_RELAXED);
		/* release: publishes the critical section to the next taker's
		 * acquire CAS; the releasing RMW of Release, and the last
		 * access to *r (I3). relaxed on failure: only the high half
		 * can have changed (a sleeper's CAS); recomputed */
		do
			n = bumped(w & ~RW_W);
		while (!__atomic_compare_exchange_n(&r->word, &w, n, 1, __ATOMIC_RELEASE,
						    __ATOMIC_RELAXED));
	} else {
		do {
			if ((w & RW_READERS) == 0)
				return 0; /* not locked: glibc returns 0 too */
			n = w - 1;
			if ((n & RW_READERS) == 0)
				n = bumped(n);
			/* release: as above, for the read section (I3) */
		} while (!__atomic_compare_exchange_n(&r->word, &w, n, 1, __ATOMIC_RELEASE,
						      __ATOMIC_RELAXED));
		rd_forget(r);   /* the address only (I3) */
	}
	/* *r may be freed from here on (I3): only its futex half's address */
	if ((w & ~n) & RW_SLEEPERS)
		wp_futex_wake(futex_word(r), INT_MAX, 0);
	return 0;
}

/* ---- exported ---- */

WP_EXPORT int pthread_rwlock_init(pthread_rwlock_t *rw, const pthread_rwlockattr_t *a)
{
	if (wp_off)
		return WP_REAL(rw_init)(rw, a);
	int ps = 0, kind = 0;
	if (a) {
		if (pthread_rwlockattr_getpshared(a, &ps) == 0 && ps == PTHREAD_PROCESS_SHARED)
			return WP_REAL(rw_init)(rw, a);
		pthread_rwlockattr_getkind_np(a, &kind);
	}
	struct wp_rwlock *r = PR(rw);
	/* plain stores: init runs before the object is shared */
	*r = (struct wp_rwlock){ 0 };
	r->flags = (unsigned)kind;
	return 0;
}

WP_EXPORT int pthread_rwlock_destroy(pthread_rwlock_t *rw)
{
	if (OFF(rw))
		return WP_REAL(rw_destroy)(rw);
	return 0;
}

WP_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *rw)
{
	if (OFF(rw))
		return WP_REAL(rw_rdlock)(rw);
	return rd_lock(PR(rw), CLOCK_REALTIME, NULL);
}

WP_EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t *rw)
{
	if (OFF(rw))
		return WP_REAL(rw_tryrdlock)(rw);
	/* relaxed: a first guess; the CAS in rd_take checks it */
	uint64_t w = __atomic_load_n(&PR(rw)->word, __ATOMIC_RELAXED);
	return rd_take(PR(rw), &w, 0);
}

WP_EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t *restrict rw,
					 const struct timespec *restrict abs)
{
	if (OFF(rw))
		return WP_REAL(rw_timedrdlock)(rw, abs);
	if (!abs)
		return EINVAL;
	return rd_lock(PR(rw), CLOCK_REALTIME, abs);
}

WP_EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t *restrict rw, clockid_t clk,
					 const struct timespec *restrict abs)
{
	if (OFF(rw))
		return WP_REAL(rw_clockrdlock)(rw, clk, abs);
	if (!wp_clock_ok(clk) || !abs)
		return EINVAL;
	return rd_lock(PR(rw), clk, abs);
}

WP_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *rw)
{
	if (OFF(rw))
		return WP_REAL(rw_wrlock)(rw);
	return wr_lock(PR(rw), CLOCK_REALTIME, NULL);
}

WP_EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t *rw)
{
	if (OFF(rw))
		return WP_REAL(rw_trywrlock)(rw);
	/* relaxed: a first guess; the CAS in wr_take checks it */
	uint64_t w = __atomic_load_n(&PR(rw)->word, __ATOMIC_RELAXED);
	return wr_take(PR(rw), &w);
}

WP_EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t *restrict rw,
					 const struct timespec *restrict abs)
{
	if (OFF(rw))
		return WP_REAL(rw_timedwrlock)(rw, abs);
	if (!abs)
		return EINVAL;
	return wr_lock(PR(rw), CLOCK_REALTIME, abs);
}

WP_EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t *restrict rw, clockid_t clk,
					 const struct timespec *restrict abs)
{
	if (OFF(rw))
		return WP_REAL(rw_clockwrlock)(rw, clk, abs);
	if (!wp_clock_ok(clk) || !abs)
		return EINVAL;
	return wr_lock(PR(rw), clk, abs);
}

WP_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t *rw)
{
	if (OFF(rw))
		return WP_REAL(rw_unlock)(rw);
	return rw_unlock(PR(rw));
}
