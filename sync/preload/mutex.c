/* libweft-preload.so: pthread_mutex_* and C11 mtx_*.
 *
 * The lock word is glibc's lowlevellock: 0 free, 1 locked, 2 locked and
 * maybe sleepers; and 3 (WP_LOCK_HANDED), released to the sleepers only.
 * Lock: CAS 0->1; else spin while the owner may be running (bounded by
 * time), then xchg(2) and futex-sleep while the old value was neither 0
 * nor HANDED. Unlock: xchg(0); a 2 means there may be sleepers, wake one.
 *
 * Why no wakeup is lost: a sleeper only sleeps with futex_wait(lock, 2),
 * which the kernel compares atomically with its queueing; it stored the 2
 * itself (xchg) before, so an unlock after that store sees 2 and wakes,
 * and an unlock before it made the xchg return 0 (acquired). A thread woken
 * re-takes the lock with xchg(2), never with CAS 0->1, so the 2 stays while
 * anyone may still sleep (this is also what the condvar requeue relies on).
 *
 * Fair hand-off
 *   A barging lock lets a running thread that relocks at once beat the
 *   sleeper its unlock woke, for as long as it keeps relocking (two threads
 *   passing the lock by spinning kept a third out for up to 135 ms in
 *   tests/check_preload.c mutex_fair_handoff). So, as weft's light-thread
 *   mutex does after 1 ms: a sleeper that wakes without the lock and has
 *   waited WP_MUTEX_STARVE_NS counts itself in m->starving (once; it
 *   uncounts when it gets the lock or gives up). While m->starving is not
 *   0, an unlock that finds sleepers (2) does not free the lock: it CASes
 *   2 -> HANDED and wakes one. HANDED is not 0, so the CAS fast path, the
 *   spinners and trylock cannot take it; a thread that arrives and sees
 *   HANDED sleeps (futex_wait(lock, HANDED)) behind the sleepers; a thread
 *   that has slept (woken, or its wait found the word changed) and a
 *   condvar relock take it with their xchg(2), which returns HANDED. The
 *   kernel wakes a futex's sleepers in order, so the lock goes down the
 *   queue until the starving sleeper has it: its wait is bounded by the
 *   sleepers ahead of it, not by how often others relock.
 *   The race it must survive: the last starving sleeper gives up (timeout)
 *   while an unlock hands the lock to the sleepers, and nobody is left to
 *   take it: the lock would stay HANDED for ever and every later locker
 *   would sleep. The unlock CASes the word to HANDED and then reads
 *   m->starving; the leaver decrements m->starving and then reads the
 *   word; all four are seq_cst, so at least one of them sees the other's
 *   write (Dekker): the unlock finds no starving sleeper and undoes its
 *   hand-off (CAS HANDED -> 0, wake one, as a plain unlock of a 2), or the
 *   leaver finds HANDED and takes the lock (its timed lock then succeeds).
 *   If both happen, only one of the two CASes on the word succeeds. A
 *   HANDED word with a starving sleeper left is taken: the sleeper is in
 *   the kernel's queue (the unlock's wake reaches it or a sleeper ahead of
 *   it, and whoever wakes takes the lock), or it is on its way to the xchg
 *   or to the futex wait, which fails at once on a changed word.
 *   glibc's condvars: a cond of glibc's (process-shared) waited on with one
 *   of our mutexes relocks it inside glibc, with glibc's xchg(2) loop, which
 *   sleeps until it reads 0: it would store 2 over a HANDED word and sleep,
 *   and the lock would belong to nobody. So such a wait first marks its
 *   mutex (WP_STARVING_NOFAIR, the top bit of m->starving, kept until the
 *   next init), and an unlock does not hand a marked mutex off. The mark is
 *   set by the mutex's holder, so every later unlock (a later holder's)
 *   sees it, and no HANDED word is outstanding when it is set (a HANDED
 *   word has no holder).
 *   Fork: a child forked while some sleeper was counted (in any mutex) does
 *   without the hand-off (core.c fork_child): its counts are stale, and a
 *   hand-off that trusted them could wait for sleepers that do not exist.
 *   Cost: one relaxed load of m->starving (on the lock word's own cache
 *   line) per unlock, nothing per lock; a lock that hands off is idle for
 *   a wake latency per hand-off, which is why it starts only after 1 ms.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <threads.h>
#include <unistd.h>

#include "preload.h"

static int mx_type(const struct wp_mutex *m)
{
	/* relaxed: the kind is written by init before the object is shared */
	return __atomic_load_n(&m->kind, __ATOMIC_RELAXED) & 3;
}

static void note_cpu(struct wp_mutex *m)
{
	/* relaxed: a hint for spinners, any stale value only costs a spin */
	if (wp_spin_ns)
		__atomic_store_n(&m->cpu, (short)wp_cpu(), __ATOMIC_RELAXED);
}

/* The lock word is ours: the owner's fields, for a mutex of type type. */
static inline void mx_took(struct wp_mutex *m, int type, uint64_t self)
{
	wp_count(WP_MUTEX, WP_ACQ);
	/* relaxed: owner and count are read only by the owner or as hints,
	 * published to the next holder by the lock word's release/acquire */
	__atomic_store_n(&m->owner, self, __ATOMIC_RELAXED);
	if (type == PTHREAD_MUTEX_RECURSIVE)
		m->count = 1;
	note_cpu(m);
}

/* spins in a row without the lock before a lock is no longer spun on */
#define WP_SPIN_FAILS_MAX 4

/* "Fair hand-off": the word's value while the lock is handed to the
 * sleepers, and how long a sleeper waits before it asks for that (Go's and
 * weft_mutex's 1 ms: long against a critical section, short against a
 * human). */
#define WP_LOCK_HANDED 3
#define WP_MUTEX_STARVE_NS 1000000L
/* in m->starving: the mutex was waited on with a cond of glibc's */
#define WP_STARVING_NOFAIR 0x80000000u

static long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* Spin for the lock while its owner may be running, one spinner at a time,
 * at most wp_spin_ns. The owner is certainly not running when it took the
 * lock on the CPU this thread runs on now (a running owner would have to
 * be on another CPU); that is the cheap test user space has (rseq cpu id),
 * checked before spinning and every 64 pauses. Returns 1 with the lock. */
static int mx_spin(struct wp_mutex *m)
{
	if (!wp_spin_ns)
		return 0;
	int me = wp_cpu();
	/* relaxed: hint */
	if (__atomic_load_n(&m->cpu, __ATOMIC_RELAXED) == me)
		return 0;
	/* A lock whose last spins all failed (the owner holds it long, or
	 * sleeps or yields inside) is not spun on, except one attempt in 16 to
	 * notice when that changes. relaxed: hints, lost updates only shift the
	 * estimate */
	unsigned short fails = __atomic_load_n(&m->fails, __ATOMIC_RELAXED);
	if (fails >= WP_SPIN_FAILS_MAX) {
		unsigned short p = __atomic_load_n(&m->probe, __ATOMIC_RELAXED);
		__atomic_store_n(&m->probe, (unsigned short)(p + 1), __ATOMIC_RELAXED);
		if ((p & 15) != 15)
			return 0;
	}
	short zero = 0;
	/* relaxed: the spinner flag only limits spinning, it guards no data */
	if (!__atomic_compare_exchange_n(&m->spinner, &zero, 1, 0, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED))
		return 0;
	wp_count(WP_MUTEX, WP_SPINS);
	long t0 = now_ns();
	int won = 0;
	for (;;) {
		for (int i = 0; i < 64; i++) {
			/* relaxed read, acquire on the CAS that takes the lock */
			int v = __atomic_load_n(&m->lock, __ATOMIC_RELAXED);
			if (v == WP_LOCK_HANDED)
				goto out;   /* handed to the sleepers */
			if (v == 0) {
				int z = 0;
				if (__atomic_compare_exchange_n(&m->lock, &z, 1, 0,
								__ATOMIC_ACQUIRE,
								__ATOMIC_RELAXED)) {
					won = 1;
					goto out;
				}
			}
			wp_pause();
		}
		if (__atomic_load_n(&m->cpu, __ATOMIC_RELAXED) == me ||
		    now_ns() - t0 > wp_spin_ns)
			break;
	}
out:
	__atomic_store_n(&m->spinner, 0, __ATOMIC_RELAXED);
	if (won) {
		wp_count(WP_MUTEX, WP_SPIN_WINS);
		if (fails)
			__atomic_store_n(&m->fails, 0, __ATOMIC_RELAXED);
	} else if (fails < WP_SPIN_FAILS_MAX) {
		__atomic_store_n(&m->fails, (unsigned short)(fails + 1), __ATOMIC_RELAXED);
	}
	return won;
}

/* A sleeper has waited since t0 without the lock: count it as starving
 * once ("Fair hand-off"). relaxed: the count only needs to be seen by
 * later unlocks, which read it again (seq_cst) before relying on it. */
static void mx_note_wait(struct wp_mutex *m, long t0, int *counted)
{
	if (*counted || now_ns() - t0 < WP_MUTEX_STARVE_NS)
		return;
	/* relaxed: read only by the fork child handler (core.c). The
	 * process-wide count goes up first (and down last, mx_uncount): a fork
	 * between the two adds then sees it counted and turns the hand-off
	 * off in the child, where the other order would leave a stale
	 * m->starving with the hand-off on */
	__atomic_add_fetch(&wp_starving_now, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&m->starving, 1, __ATOMIC_RELAXED);
	*counted = 1;
}

/* Uncount a counted sleeper; order: as the caller's. */
static void mx_uncount(struct wp_mutex *m, int order)
{
	__atomic_sub_fetch(&m->starving, 1, order);
	/* relaxed: as in mx_note_wait */
	__atomic_sub_fetch(&wp_starving_now, 1, __ATOMIC_RELAXED);
}

/* The timed wait of a counted sleeper is over: uncount, then take the lock
 * if an unlock handed it over meanwhile ("Fair hand-off": the leaver's side
 * of the Dekker pair, so both accesses are seq_cst). Returns 0 with the
 * lock, or ETIMEDOUT. */
static int mx_give_up(struct wp_mutex *m, int counted)
{
	int h = WP_LOCK_HANDED;

	if (!counted)
		return ETIMEDOUT;
	mx_uncount(m, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&m->lock, __ATOMIC_SEQ_CST) == WP_LOCK_HANDED &&
	    __atomic_compare_exchange_n(&m->lock, &h, 2, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return 0;
	return ETIMEDOUT;
}

/* Sleep until the lock is ours: the xchg(2) loop, plus the fair hand-off's
 * rules (see the top of the file): an arrival sleeps behind a HANDED word,
 * a sleeper takes it, and a long sleeper counts itself as starving.
 * Returns 0 or ETIMEDOUT. */
static int mx_sleep(struct wp_mutex *m, clockid_t clk, const struct timespec *abs)
{
	int slept = 0, counted = 0, v;
	long t0 = 0;

	for (;;) {
		/* relaxed: a look only; the xchg below decides */
		v = __atomic_load_n(&m->lock, __ATOMIC_RELAXED);
		if (v != WP_LOCK_HANDED || slept) {
			/* acquire: the critical section reads after the lock is
			 * ours; the 2 tells the unlocker a sleeper may exist */
			v = __atomic_exchange_n(&m->lock, 2, __ATOMIC_ACQUIRE);
			if (v == 0 || v == WP_LOCK_HANDED)
				break;
		}
		if (!slept)
			t0 = now_ns();
		else
			mx_note_wait(m, t0, &counted);
		wp_count(WP_MUTEX, WP_PARKS);
		slept = 1;
		/* v: 2 (we stored it) or HANDED (an arrival behind the sleepers) */
		if (wp_futex_wait((unsigned *)&m->lock, v == WP_LOCK_HANDED ? v : 2, abs, clk, 0) ==
		    ETIMEDOUT)
			return mx_give_up(m, counted);
	}
	if (counted)
		/* relaxed: we hold the lock; see mx_note_wait */
		mx_uncount(m, __ATOMIC_RELAXED);
	return 0;
}

/* Take the lock word, sleeping as needed; 0 or ETIMEDOUT. */
static int mx_acquire(struct wp_mutex *m, clockid_t clk, const struct timespec *abs)
{
	int z = 0;
	/* acquire: the critical section reads after the lock is ours */
	if (__atomic_compare_exchange_n(&m->lock, &z, 1, 0, __ATOMIC_ACQUIRE,
					__ATOMIC_RELAXED))
		return 0;
	if (mx_spin(m))
		return 0;
	if (abs) {
		int e = wp_check_abstime(abs);
		if (e)
			return e;
	}
	return mx_sleep(m, clk, abs);
}

/* After a condvar wait: take the lock with the contended value (2), since
 * requeued waiters may sleep on the word. */
int wp_mutex_relock(struct wp_mutex *m)
{
	if (wp_mutex_is_glibc(m))
		return WP_REAL(mutex_lock)((pthread_mutex_t *)m);
	/* acquire: the critical section reads after the lock is ours; a
	 * requeued waiter has slept, so a HANDED word is ours too */
	for (int v; (v = __atomic_exchange_n(&m->lock, 2, __ATOMIC_ACQUIRE)) != 0 &&
		    v != WP_LOCK_HANDED;) {
		wp_count(WP_MUTEX, WP_PARKS);
		wp_futex_wait((unsigned *)&m->lock, 2, NULL, CLOCK_MONOTONIC, 0);
	}
	wp_count(WP_MUTEX, WP_ACQ);
	/* relaxed: owner and count are read only by the owner or as hints */
	__atomic_store_n(&m->owner, wp_self(), __ATOMIC_RELAXED);
	if (mx_type(m) == PTHREAD_MUTEX_RECURSIVE)
		m->count = 1;
	note_cpu(m);
	return 0;
}

/* m is held by the calling thread self. relaxed: only this thread can
 * have stored its own id there, and any other value is not self. */
static inline bool mx_owned_by(const struct wp_mutex *m, uint64_t self)
{
	return __atomic_load_n(&m->owner, __ATOMIC_RELAXED) == self;
}

/* One more hold of a recursive mutex its owner holds: 0, or EAGAIN when
 * the count would overflow. Context: the owner. */
static inline int mx_relock(struct wp_mutex *m)
{
	if (m->count == UINT_MAX)
		return EAGAIN;
	m->count++;
	return 0;
}

int wp_mutex_timed(struct wp_mutex *m, clockid_t clk, const struct timespec *abs)
{
	int type = mx_type(m);
	uint64_t self = wp_self();
	int r;

	if (mx_owned_by(m, self)) {
		if (type == PTHREAD_MUTEX_RECURSIVE)
			return mx_relock(m);
		if (type == PTHREAD_MUTEX_ERRORCHECK)
			return EDEADLK;
	}
	r = mx_acquire(m, clk, abs);
	if (r)
		return r;
	mx_took(m, type, self);
	return 0;
}

int wp_mutex_lock(struct wp_mutex *m)
{
	return wp_mutex_timed(m, CLOCK_REALTIME, NULL);
}

int wp_mutex_trylock(struct wp_mutex *m)
{
	int type = mx_type(m);
	uint64_t self = wp_self();

	if (type == PTHREAD_MUTEX_RECURSIVE && mx_owned_by(m, self))
		return mx_relock(m);
	int z = 0;
	/* acquire: the critical section reads after the lock is ours */
	if (!__atomic_compare_exchange_n(&m->lock, &z, 1, 0, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return EBUSY;
	mx_took(m, type, self);
	return 0;
}

/* Unlock by handing the lock to the sleepers ("Fair hand-off"): 2 ->
 * HANDED, then the Dekker re-check of m->starving. Returns 0 if the word
 * was not 2 (no sleeper: unlock normally), 1 when the lock was handed over
 * or released. */
static __attribute__((noinline)) int mx_hand_off(struct wp_mutex *m)
{
	int v = 2;

	/* relaxed: set once, in a fork child, before it has threads */
	if (__atomic_load_n(&wp_fair_off, __ATOMIC_RELAXED))
		return 0;
	/* seq_cst: the unlock's side of the Dekker pair with mx_give_up; also
	 * a release of the critical section to the sleeper that takes it */
	if (!__atomic_compare_exchange_n(&m->lock, &v, WP_LOCK_HANDED, 0, __ATOMIC_SEQ_CST,
					 __ATOMIC_RELAXED))
		return 0;
	unsigned s = __atomic_load_n(&m->starving, __ATOMIC_SEQ_CST);
	if (s == 0 || (s & WP_STARVING_NOFAIR)) {
		/* the starving sleepers gave up, or the mutex was marked since
		 * the hint (a wait of glibc's must never find HANDED; a mark is
		 * a holder's, so this is a second line of defence): undo, as a
		 * plain unlock of a 2 (unless a sleeper took the lock; then it
		 * owns it) */
		v = WP_LOCK_HANDED;
		if (!__atomic_compare_exchange_n(&m->lock, &v, 0, 0, __ATOMIC_RELEASE,
						 __ATOMIC_RELAXED))
			return 1;
	}
	wp_futex_wake((unsigned *)&m->lock, 1, 0);
	return 1;
}

/* inline in pthread_mutex_unlock: no stack frame on the common path (the
 * hand-off is out of line) */
static inline int mx_unlock(struct wp_mutex *m)
{
	int type = mx_type(m);
	if (type == PTHREAD_MUTEX_RECURSIVE || type == PTHREAD_MUTEX_ERRORCHECK) {
		/* relaxed: only the owner finds its own id there */
		if (__atomic_load_n(&m->owner, __ATOMIC_RELAXED) != wp_self() ||
		    __atomic_load_n(&m->lock, __ATOMIC_RELAXED) == 0)
			return EPERM;
		if (type == PTHREAD_MUTEX_RECURSIVE && --m->count)
			return 0;
	}
	__atomic_store_n(&m->owner, 0, __ATOMIC_RELAXED);
	/* relaxed: a hint; mx_hand_off reads it again (seq_cst). A marked
	 * mutex (NOFAIR) is never handed off: the mark was set by an earlier
	 * holder, before the release that we acquired the lock from */
	unsigned starving = __atomic_load_n(&m->starving, __ATOMIC_RELAXED);
	if (starving != 0 && starving < WP_STARVING_NOFAIR && mx_hand_off(m))
		return 0;
	/* release: the critical section's writes before the lock is free */
	if (__atomic_exchange_n(&m->lock, 0, __ATOMIC_RELEASE) == 2)
		wp_futex_wake((unsigned *)&m->lock, 1, 0);
	return 0;
}

int wp_mutex_unlock(struct wp_mutex *m)
{
	return mx_unlock(m);
}

/* Before a wait on a cond of glibc's with m: no hand-off for this mutex
 * from now on ("Fair hand-off", glibc's condvars), and, if the caller holds
 * m, the owner field in glibc's format ("glibc's owner field" below).
 * Returns 1 when the owner field was converted: the caller then calls
 * wp_mutex_glibc_cond_done when glibc's wait has returned or unwound.
 *
 * glibc's owner field
 *   glibc's wait unlocks and relocks the mutex with its own code. Its
 *   unlock of an ERRORCHECK or RECURSIVE mutex compares the 32-bit owner
 *   field at offset 8 with the caller's kernel tid and answers EPERM when
 *   they differ (the wait then returns EPERM at once); its unlock of every
 *   kind stores 0 there (32 bits), and its relock stores the tid there
 *   (and RECURSIVE's count 1 at offset 4, as ours). Ours holds wp_self()
 *   (64 bits, the same in a fork child), so for the span of
 *   glibc's wait the holder stores its tid, zero-extended, instead: glibc
 *   sees its own format, its unlock leaves 0 in all 64 bits (it does not
 *   touch offset 12 in a wait), and a later holder of ours stores and
 *   clears all 64 bits, so glibc's relock leaves exactly the tid. After
 *   the wait (returned, failed, or cancelled: then glibc relocked the
 *   mutex before our cleanup runs) the holder puts its wp_self() back.
 *   A caller that does not hold m is left alone, and glibc answers
 *   EPERM for the kinds that check, as it would for its own mutex. Both
 *   directions are safe: a tid (zero-extended, below 2^31) never equals a
 *   wp_self() (bit 31 set), so no thread of ours mistakes it for its own
 *   id (wp_mutex_timed, wp_mutex_unlock); and glibc, which compares only
 *   the low 32 bits, never takes another holder's wp_self() (a negative
 *   int) for a waiter's tid when it relocks. relaxed, every access: the
 *   holder's own field, published to the next holder by the lock word's
 *   release and acquire.
 *   The NOFAIR mark: relaxed, as our unlock (in glibc's wait) releases it
 *   to every later holder, and only holders unlock. */
int wp_mutex_glibc_cond(struct wp_mutex *m)
{
	int type = mx_type(m);
	int held = __atomic_load_n(&m->owner, __ATOMIC_RELAXED) == wp_self() &&
		   __atomic_load_n(&m->lock, __ATOMIC_RELAXED) != 0;

	/* The kinds glibc checks answer a non-holder EPERM without touching
	 * m: no mark then (only a holder may set it, "Fair hand-off"). The
	 * other kinds keep no owner we could check; their caller holds m or
	 * the wait is undefined, in glibc too. */
	if (held || (type != PTHREAD_MUTEX_ERRORCHECK && type != PTHREAD_MUTEX_RECURSIVE)) {
		if (!(__atomic_load_n(&m->starving, __ATOMIC_RELAXED) & WP_STARVING_NOFAIR))
			__atomic_fetch_or(&m->starving, WP_STARVING_NOFAIR, __ATOMIC_RELAXED);
	}
	if (!held)
		return 0;
	__atomic_store_n(&m->owner, (uint64_t)(uint32_t)gettid(), __ATOMIC_RELAXED);
	return 1;
}

/* After glibc's wait, by the thread that converted the owner field (it
 * holds m again): our owner format back ("glibc's owner field"). */
void wp_mutex_glibc_cond_done(struct wp_mutex *m)
{
	__atomic_store_n(&m->owner, wp_self(), __ATOMIC_RELAXED);
}

int wp_mutex_init_kind(struct wp_mutex *m, int type)
{
	/* plain stores: init runs before the object is shared */
	m->lock = 0;
	m->count = 0;
	m->owner = 0;
	m->kind = type;
	m->cpu = -1;
	m->spinner = 0;
	m->fails = 0;
	m->probe = 0;
	m->starving = 0;
	memset(m->pad, 0, sizeof(m->pad));
	return 0;
}

/* ---- exported ---- */

#define PM(m) ((struct wp_mutex *)(m))
#define OFF(m) (__builtin_expect(wp_off, 0) || wp_mutex_is_glibc(PM(m)))

WP_EXPORT int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a)
{
	if (wp_off)
		return WP_REAL(mutex_init)(m, a);
	int type = PTHREAD_MUTEX_NORMAL;
	if (a) {
		int v;
		if (pthread_mutexattr_getpshared(a, &v) == 0 && v == PTHREAD_PROCESS_SHARED)
			return WP_REAL(mutex_init)(m, a);
		if (pthread_mutexattr_getrobust(a, &v) == 0 && v == PTHREAD_MUTEX_ROBUST)
			return WP_REAL(mutex_init)(m, a);
		if (pthread_mutexattr_getprotocol(a, &v) == 0 && v != PTHREAD_PRIO_NONE)
			return WP_REAL(mutex_init)(m, a);
		if (pthread_mutexattr_gettype(a, &type) != 0)
			return EINVAL;
		if (type < 0 || type > 3)
			return EINVAL;
	}
	return wp_mutex_init_kind(PM(m), type);
}

WP_EXPORT int pthread_mutex_destroy(pthread_mutex_t *m)
{
	if (OFF(m))
		return WP_REAL(mutex_destroy)(m);
	/* relaxed: a destroy racing with users is the caller's bug; this only
	 * reports the locked case glibc reports */
	if (__atomic_load_n(&PM(m)->lock, __ATOMIC_RELAXED) != 0)
		return EBUSY;
	return 0;
}

/* The uncontended lock is most of a server's locking (memcached and
 * MariaDB: over 99% of acquisitions), so it is taken here, with no call
 * and no stack frame: a CAS 0 -> 1 that succeeds means that no thread,
 * this one included, held the mutex, so a RECURSIVE or ERRORCHECK mutex
 * has nothing to check. Any other case goes the full way, which reads
 * everything again. */
WP_EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
	struct wp_mutex *w = PM(m);
	/* relaxed: see mx_type */
	int kind = __atomic_load_n(&w->kind, __ATOMIC_RELAXED);
	int z = 0;

	/* acquire: the critical section reads after the lock is ours */
	if (__builtin_expect(!wp_off && !(kind & WP_KIND_GLIBC), 1) &&
	    __atomic_compare_exchange_n(&w->lock, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
		mx_took(w, kind & 3, wp_self());
		return 0;
	}
	if (OFF(m))
		return WP_REAL(mutex_lock)(m);
	return wp_mutex_timed(w, CLOCK_REALTIME, NULL);
}

WP_EXPORT int pthread_mutex_trylock(pthread_mutex_t *m)
{
	if (OFF(m))
		return WP_REAL(mutex_trylock)(m);
	return wp_mutex_trylock(PM(m));
}

WP_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abs)
{
	if (OFF(m))
		return WP_REAL(mutex_timedlock)(m, abs);
	if (!abs)
		return EINVAL;
	return wp_mutex_timed(PM(m), CLOCK_REALTIME, abs);
}

WP_EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clk,
				      const struct timespec *abs)
{
	if (OFF(m))
		return WP_REAL(mutex_clocklock)(m, clk, abs);
	if (!wp_clock_ok(clk) || !abs)
		return EINVAL;
	return wp_mutex_timed(PM(m), clk, abs);
}

WP_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
	if (OFF(m))
		return WP_REAL(mutex_unlock)(m);
	return mx_unlock(PM(m));
}

/* Robust mutexes are glibc's; ours are not robust (glibc: EINVAL). */
WP_EXPORT int pthread_mutex_consistent(pthread_mutex_t *m)
{
	if (OFF(m))
		return WP_REAL(mutex_consistent)(m);
	return EINVAL;
}

/* pthread.h redirects the _np name to the plain one; define it by its
 * symbol name for binaries linked against GLIBC_2.4's pthread_mutex_consistent_np */
WP_EXPORT int wp_mutex_consistent_np(pthread_mutex_t *m) __asm__("pthread_mutex_consistent_np");
WP_EXPORT int wp_mutex_consistent_np(pthread_mutex_t *m)
{
	return pthread_mutex_consistent(m);
}

/* Priority-ceiling mutexes are glibc's; ours have none (glibc: EINVAL). */
WP_EXPORT int pthread_mutex_getprioceiling(const pthread_mutex_t *m, int *ceiling)
{
	if (OFF(m))
		return WP_REAL(mutex_getprioceiling)(m, ceiling);
	return EINVAL;
}

WP_EXPORT int pthread_mutex_setprioceiling(pthread_mutex_t *m, int ceiling, int *old)
{
	if (OFF(m))
		return WP_REAL(mutex_setprioceiling)(m, ceiling, old);
	return EINVAL;
}

/* ---- C11 ---- */

static int thrd_result(int e)
{
	switch (e) {
	case 0: return thrd_success;
	case EBUSY: return thrd_busy;
	case ETIMEDOUT: return thrd_timedout;
	case ENOMEM: return thrd_nomem;
	default: return thrd_error;
	}
}

WP_EXPORT int mtx_init(mtx_t *m, int type)
{
	int kind;
	switch (type) {
	case mtx_plain:
	case mtx_timed:
		kind = PTHREAD_MUTEX_NORMAL;
		break;
	case mtx_plain | mtx_recursive:
	case mtx_timed | mtx_recursive:
		kind = PTHREAD_MUTEX_RECURSIVE;
		break;
	default:
		return thrd_error;
	}
	if (wp_off) {
		pthread_mutexattr_t a;
		pthread_mutexattr_init(&a);
		pthread_mutexattr_settype(&a, kind);
		int e = WP_REAL(mutex_init)((pthread_mutex_t *)m, &a);
		pthread_mutexattr_destroy(&a);
		return thrd_result(e);
	}
	return thrd_result(wp_mutex_init_kind(PM(m), kind));
}

WP_EXPORT void mtx_destroy(mtx_t *m)
{
	pthread_mutex_destroy((pthread_mutex_t *)m);
}

WP_EXPORT int mtx_lock(mtx_t *m)
{
	if (OFF(m))
		return thrd_result(WP_REAL(mutex_lock)((pthread_mutex_t *)m));
	return thrd_result(wp_mutex_timed(PM(m), CLOCK_REALTIME, NULL));
}

WP_EXPORT int mtx_trylock(mtx_t *m)
{
	if (OFF(m))
		return thrd_result(WP_REAL(mutex_trylock)((pthread_mutex_t *)m));
	return thrd_result(wp_mutex_trylock(PM(m)));
}

WP_EXPORT int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict abs)
{
	if (OFF(m))
		return thrd_result(WP_REAL(mutex_timedlock)((pthread_mutex_t *)m, abs));
	if (!abs)
		return thrd_error;
	return thrd_result(wp_mutex_timed(PM(m), CLOCK_REALTIME, abs));
}

WP_EXPORT int mtx_unlock(mtx_t *m)
{
	if (OFF(m))
		return thrd_result(WP_REAL(mutex_unlock)((pthread_mutex_t *)m));
	return thrd_result(wp_mutex_unlock(PM(m)));
}

WP_EXPORT int cnd_init(cnd_t *c)
{
	if (wp_off)
		return thrd_result(WP_REAL(cond_init)((pthread_cond_t *)c, NULL));
	return thrd_result(wp_cond_init_clock((struct wp_cond *)c, 0));
}

WP_EXPORT void cnd_destroy(cnd_t *c)
{
	pthread_cond_destroy((pthread_cond_t *)c);
}

WP_EXPORT int cnd_signal(cnd_t *c)
{
	return thrd_result(pthread_cond_signal((pthread_cond_t *)c));
}

WP_EXPORT int cnd_broadcast(cnd_t *c)
{
	return thrd_result(pthread_cond_broadcast((pthread_cond_t *)c));
}

WP_EXPORT int cnd_wait(cnd_t *c, mtx_t *m)
{
	return thrd_result(pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m));
}

WP_EXPORT int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m,
			    const struct timespec *restrict abs)
{
	if (!abs)
		return thrd_error;
	/* C11: the time is TIME_UTC (CLOCK_REALTIME) whatever the cond */
	return thrd_result(pthread_cond_clockwait((pthread_cond_t *)c,
						  (pthread_mutex_t *)m, CLOCK_REALTIME, abs));
}
