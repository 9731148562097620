/* libweft-preload.so: pthread_mutex_* and C11 mtx_*.
 *
 * The lock word is glibc's lowlevellock: 0 free, 1 locked, 2 locked and
 * maybe sleepers. Lock: CAS 0->1; else spin while the owner may be running
 * (bounded by time), then xchg(2) and futex-sleep while the old value was
 * not 0. Unlock: xchg(0); a 2 means there may be sleepers, wake one.
 *
 * Why no wakeup is lost: a sleeper only sleeps with futex_wait(lock, 2),
 * which the kernel compares atomically with its queueing; it stored the 2
 * itself (xchg) before, so an unlock after that store sees 2 and wakes,
 * and an unlock before it made the xchg return 0 (acquired). A thread woken
 * re-takes the lock with xchg(2), never with CAS 0->1, so the 2 stays while
 * anyone may still sleep (this is also what the condvar requeue relies on).
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <threads.h>

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

/* spins in a row without the lock before a lock is no longer spun on */
#define WP_SPIN_FAILS_MAX 4

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
	/* acquire: as above; the 2 tells the unlocker a sleeper may exist */
	while (__atomic_exchange_n(&m->lock, 2, __ATOMIC_ACQUIRE) != 0) {
		wp_count(WP_MUTEX, WP_PARKS);
		if (wp_futex_wait((unsigned *)&m->lock, 2, abs, clk, 0) == ETIMEDOUT)
			return ETIMEDOUT;
	}
	return 0;
}

/* After a condvar wait: take the lock with the contended value (2), since
 * requeued waiters may sleep on the word. */
int wp_mutex_relock(struct wp_mutex *m)
{
	if (wp_mutex_is_glibc(m))
		return WP_REAL(mutex_lock)((pthread_mutex_t *)m);
	/* acquire: the critical section reads after the lock is ours */
	while (__atomic_exchange_n(&m->lock, 2, __ATOMIC_ACQUIRE) != 0) {
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

int wp_mutex_timed(struct wp_mutex *m, clockid_t clk, const struct timespec *abs)
{
	int type = mx_type(m);
	uint64_t self = wp_self();
	/* relaxed: only this thread can have stored its own id there */
	uint64_t owner = __atomic_load_n(&m->owner, __ATOMIC_RELAXED);
	if (type == PTHREAD_MUTEX_RECURSIVE && owner == self) {
		if (m->count == UINT_MAX)
			return EAGAIN;
		m->count++;
		return 0;
	}
	if (type == PTHREAD_MUTEX_ERRORCHECK && owner == self)
		return EDEADLK;
	int e = mx_acquire(m, clk, abs);
	if (e)
		return e;
	wp_count(WP_MUTEX, WP_ACQ);
	/* relaxed: see wp_mutex_relock */
	__atomic_store_n(&m->owner, self, __ATOMIC_RELAXED);
	if (type == PTHREAD_MUTEX_RECURSIVE)
		m->count = 1;
	note_cpu(m);
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
	/* relaxed: see wp_mutex_timed */
	uint64_t owner = __atomic_load_n(&m->owner, __ATOMIC_RELAXED);
	if (type == PTHREAD_MUTEX_RECURSIVE && owner == self) {
		if (m->count == UINT_MAX)
			return EAGAIN;
		m->count++;
		return 0;
	}
	int z = 0;
	/* acquire: the critical section reads after the lock is ours */
	if (!__atomic_compare_exchange_n(&m->lock, &z, 1, 0, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return EBUSY;
	wp_count(WP_MUTEX, WP_ACQ);
	__atomic_store_n(&m->owner, self, __ATOMIC_RELAXED);
	if (type == PTHREAD_MUTEX_RECURSIVE)
		m->count = 1;
	note_cpu(m);
	return 0;
}

int wp_mutex_unlock(struct wp_mutex *m)
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
	/* release: the critical section's writes before the lock is free */
	if (__atomic_exchange_n(&m->lock, 0, __ATOMIC_RELEASE) == 2)
		wp_futex_wake((unsigned *)&m->lock, 1, 0);
	return 0;
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
	m->pad0 = 0;
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

WP_EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
	if (OFF(m))
		return WP_REAL(mutex_lock)(m);
	return wp_mutex_timed(PM(m), CLOCK_REALTIME, NULL);
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
	return wp_mutex_unlock(PM(m));
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
