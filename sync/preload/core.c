/* libweft-preload.so: configuration, glibc's entry points, futex helpers
 * and statistics. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload.h"

int wp_off;
int wp_stats_on;
long wp_spin_ns = 4000;
unsigned long wp_stats[WP_NCLASS][WP_NSTAT];
struct wp_real wp_real;
static int wp_resolved;

static void *next_sym(const char *name, const char *version)
{
	void *p = NULL;
	if (version)
		p = dlvsym(RTLD_NEXT, name, version);
	if (!p)
		p = dlsym(RTLD_NEXT, name);
	return p;
}

#define R(field, name) wp_real.field = next_sym(name, NULL)
#define RV(field, name, ver) wp_real.field = next_sym(name, ver)

static void resolve(void)
{
	R(mutex_init, "pthread_mutex_init");
	R(mutex_destroy, "pthread_mutex_destroy");
	R(mutex_lock, "pthread_mutex_lock");
	R(mutex_trylock, "pthread_mutex_trylock");
	R(mutex_timedlock, "pthread_mutex_timedlock");
	R(mutex_clocklock, "pthread_mutex_clocklock");
	R(mutex_unlock, "pthread_mutex_unlock");
	R(mutex_consistent, "pthread_mutex_consistent");
	R(mutex_getprioceiling, "pthread_mutex_getprioceiling");
	R(mutex_setprioceiling, "pthread_mutex_setprioceiling");
	/* the current condvar, not the 2.2.5 compatibility one */
	RV(cond_init, "pthread_cond_init", "GLIBC_2.3.2");
	RV(cond_destroy, "pthread_cond_destroy", "GLIBC_2.3.2");
	RV(cond_wait, "pthread_cond_wait", "GLIBC_2.3.2");
	RV(cond_timedwait, "pthread_cond_timedwait", "GLIBC_2.3.2");
	R(cond_clockwait, "pthread_cond_clockwait");
	RV(cond_signal, "pthread_cond_signal", "GLIBC_2.3.2");
	RV(cond_broadcast, "pthread_cond_broadcast", "GLIBC_2.3.2");
	R(rw_init, "pthread_rwlock_init");
	R(rw_destroy, "pthread_rwlock_destroy");
	R(rw_rdlock, "pthread_rwlock_rdlock");
	R(rw_tryrdlock, "pthread_rwlock_tryrdlock");
	R(rw_timedrdlock, "pthread_rwlock_timedrdlock");
	R(rw_clockrdlock, "pthread_rwlock_clockrdlock");
	R(rw_wrlock, "pthread_rwlock_wrlock");
	R(rw_trywrlock, "pthread_rwlock_trywrlock");
	R(rw_timedwrlock, "pthread_rwlock_timedwrlock");
	R(rw_clockwrlock, "pthread_rwlock_clockwrlock");
	R(rw_unlock, "pthread_rwlock_unlock");
	R(spin_init, "pthread_spin_init");
	R(spin_destroy, "pthread_spin_destroy");
	R(spin_lock, "pthread_spin_lock");
	R(spin_trylock, "pthread_spin_trylock");
	R(spin_unlock, "pthread_spin_unlock");
	R(barrier_init, "pthread_barrier_init");
	R(barrier_destroy, "pthread_barrier_destroy");
	R(barrier_wait, "pthread_barrier_wait");
	R(sem_init, "sem_init");
	R(sem_destroy, "sem_destroy");
	R(sem_wait, "sem_wait");
	R(sem_trywait, "sem_trywait");
	R(sem_timedwait, "sem_timedwait");
	R(sem_clockwait, "sem_clockwait");
	R(sem_post, "sem_post");
	R(sem_getvalue, "sem_getvalue");
	/* release: the pointers above are complete before the flag is seen */
	__atomic_store_n(&wp_resolved, 1, __ATOMIC_RELEASE);
}

const struct wp_real *wp_glibc(void)
{
	/* acquire: pairs with the release in resolve(); two threads racing
	 * here before the constructor both resolve, writing the same values */
	if (__builtin_expect(!__atomic_load_n(&wp_resolved, __ATOMIC_ACQUIRE), 0))
		resolve();
	return &wp_real;
}

static const char *class_name[WP_NCLASS] = {
	"mutex", "cond", "rwlock", "spin", "barrier", "sem"
};

static void print_stats(void)
{
	fprintf(stderr, "weft-preload stats (pid %d):\n", (int)getpid());
	fprintf(stderr, "  %-8s %14s %14s %14s %14s\n", "class", "acquisitions",
		"spins", "spin-wins", "parks");
	for (int c = 0; c < WP_NCLASS; c++)
		fprintf(stderr, "  %-8s %14lu %14lu %14lu %14lu\n", class_name[c],
			/* relaxed: statistics, read at exit */
			__atomic_load_n(&wp_stats[c][WP_ACQ], __ATOMIC_RELAXED),
			__atomic_load_n(&wp_stats[c][WP_SPINS], __ATOMIC_RELAXED),
			__atomic_load_n(&wp_stats[c][WP_SPIN_WINS], __ATOMIC_RELAXED),
			__atomic_load_n(&wp_stats[c][WP_PARKS], __ATOMIC_RELAXED));
}

unsigned wp_starving_now;
int wp_fair_off;

/* A fork child has only the forking thread: a sleeper the parent counted in
 * a mutex's starving word never uncounts itself here, and an unlock that
 * trusted the count could hand the lock to sleepers that do not exist
 * (mutex.c "Fair hand-off"). So a child forked while any sleeper was
 * counted does without the hand-off (glibc's behaviour); one forked while
 * none was (the common case) keeps it. relaxed: the child is
 * single-threaded here. */
static void fork_child(void)
{
	if (__atomic_load_n(&wp_starving_now, __ATOMIC_RELAXED) != 0)
		__atomic_store_n(&wp_fair_off, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&wp_starving_now, 0, __ATOMIC_RELAXED);
}

/* Early (priority 101) so that other libraries' constructors see the final
 * configuration. Locks used before it are ours. With WEFT_PRELOAD=off
 * they pass to glibc afterwards, which is safe for a mutex, spinlock or
 * semaphore (glibc's lowlevellock formats) and for an rwlock that is free
 * at that moment and that no thread ever slept on (all zero but flags).
 * Not for a cond that was waited on
 * (our seq/waiters, mutex pointer and flags are glibc's __wseq, __g1_start
 * and __g_refs) nor for a barrier that completed a round (our arrived and
 * gen restart each round; glibc's counters are cumulative): such objects
 * must be re-initialised before glibc takes them over. */
__attribute__((constructor(101))) static void wp_ctor(void)
{
	const char *s = getenv("WEFT_PRELOAD");
	if (s && (!strcmp(s, "off") || !strcmp(s, "0")))
		wp_off = 1;
	s = getenv("WEFT_STATS");
	if (s && *s && strcmp(s, "0"))
		wp_stats_on = 1;
	s = getenv("WEFT_PRELOAD_SPIN_NS");
	if (s && *s)
		wp_spin_ns = strtol(s, NULL, 10);
	if (wp_spin_ns < 0)
		wp_spin_ns = 0;
	if (wp_spin_ns > 1000000)
		wp_spin_ns = 1000000;
	if (!__atomic_load_n(&wp_resolved, __ATOMIC_ACQUIRE))
		resolve();
	if (wp_stats_on && !wp_off)
		atexit(print_stats);
	if (!wp_off)
		pthread_atfork(NULL, NULL, fork_child);
}

/* ---- futex helpers ---- */

int wp_clock_ok(clockid_t clk)
{
	return clk == CLOCK_REALTIME || clk == CLOCK_MONOTONIC;
}

/* 0 when abs may be waited for, EINVAL for a bad nanosecond field,
 * ETIMEDOUT for a negative second (glibc's answers). */
int wp_check_abstime(const struct timespec *abs)
{
	if (!abs)
		return 0;
	if (abs->tv_nsec < 0 || abs->tv_nsec >= 1000000000L)
		return EINVAL;
	if (abs->tv_sec < 0)
		return ETIMEDOUT;
	return 0;
}

/* Sleep while *addr == val, until abs on clk if abs is set. Returns 0 (woken
 * or spurious), EAGAIN (value differed), EINTR or ETIMEDOUT. */
int wp_futex_wait(unsigned *addr, unsigned val, const struct timespec *abs,
		  clockid_t clk, int shared)
{
	int op = FUTEX_WAIT_BITSET | (shared ? 0 : FUTEX_PRIVATE_FLAG);
	if (abs && clk == CLOCK_REALTIME)
		op |= FUTEX_CLOCK_REALTIME;
	int saved = errno, e = 0;
	if (syscall(SYS_futex, addr, op, val, abs, NULL, FUTEX_BITSET_MATCH_ANY) < 0)
		e = errno == ETIMEDOUT || errno == EAGAIN || errno == EINTR ? errno : 0;
	errno = saved;
	return e;
}

void wp_futex_wake(unsigned *addr, int n, int shared)
{
	int saved = errno;
	syscall(SYS_futex, addr, FUTEX_WAKE | (shared ? 0 : FUTEX_PRIVATE_FLAG), n,
		NULL, NULL, 0);
	errno = saved;
}

/* Wake nwake sleepers of from and move the rest to to, if *from == val.
 * Returns 0, or EAGAIN when *from changed. */
int wp_futex_requeue(unsigned *from, int nwake, unsigned *to, unsigned val)
{
	int saved = errno, e = 0;
	if (syscall(SYS_futex, from, FUTEX_CMP_REQUEUE | FUTEX_PRIVATE_FLAG,
		    nwake, (void *)(uintptr_t)INT_MAX, to, val) < 0)
		e = errno;
	errno = saved;
	return e;
}
