/* libweft-preload.so internals: the object layouts laid over glibc's
 * (x86-64 and aarch64: only pthread_mutex_t's size differs, and struct
 * wp_mutex follows it), the futex and
 * clock helpers, the glibc entry points reached through dlsym(RTLD_NEXT),
 * and the statistics counters.
 *
 * Every object keeps glibc's size. The words glibc reads to tell which
 * objects are process-shared, robust or priority-aware keep glibc's meaning,
 * so that such objects are recognised and left to glibc in glibc's own
 * format (docs/preload.md). Everything else is ours and needs no
 * initialisation beyond zero bytes (or glibc's static initializers). */
#ifndef WEFT_PRELOAD_H
#define WEFT_PRELOAD_H

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#if __has_include(<sys/rseq.h>)
#include <sys/rseq.h>
#define WP_HAVE_RSEQ 1
#endif

#define WP_EXPORT __attribute__((visibility("default")))

/* pthread_mutex_t: 40 bytes on x86-64, 48 on aarch64 (glibc's generic
 * layout); the fields are the first 32 bytes, and pad fills the rest to
 * glibc's size. lock is glibc's lowlevellock word (0 free, 1 locked, 2
 * locked with sleepers) plus 3, handed to a sleeper (mutex.c); kind sits
 * at offset 16 like glibc's so that the _NP static initializers work. */
struct wp_mutex {
	int lock;           /* 0: futex word */
	unsigned count;     /* 4: recursion depth (RECURSIVE) */
	uint64_t owner;     /* 8: owner's thread pointer, 0 when free */
	int kind;           /* 16: glibc kind: type in bits 0-1, 0xf0 = glibc's */
	short cpu;          /* 20: CPU the owner acquired on (-1 unknown) */
	short spinner;      /* 22: 1 while a thread spins on this lock */
	unsigned short fails; /* 24: spins in a row that ended without the lock */
	unsigned short probe; /* 26: attempts skipped since the last spin */
	unsigned starving;  /* 28: sleepers that have waited over 1 ms, and the
	                     * top bit: waited on with a cond of glibc's (mutex.c
	                     * "Fair hand-off") */
	unsigned char pad[sizeof(pthread_mutex_t) - 32]; /* 32 */
};

/* glibc's kind bits that send a mutex to glibc: robust (0x10), PI (0x20),
 * PP (0x40), process-shared (0x80). */
#define WP_KIND_GLIBC 0xf0

/* pthread_cond_t, 48 bytes. Word 36 is glibc's __wrefs: bit 0 marks a
 * process-shared cond (left to glibc), bit 1 CLOCK_MONOTONIC (ours too). */
struct wp_cond {
	unsigned seq;       /* 0: futex word, bumped by signal and broadcast */
	unsigned waiters;   /* 4: threads between their wait and their return */
	struct wp_mutex *mutex; /* 8: the mutex waiters use, for requeue */
	unsigned flags;     /* 16: WP_COND_MIXED */
	unsigned pad[4];    /* 20 */
	unsigned wrefs;     /* 36: glibc's flag word */
	unsigned pad2[2];   /* 40 */
};
#define WP_COND_MIXED 1u
#define WP_COND_GLIBC_SHARED 1u
#define WP_COND_GLIBC_MONO 2u

/* pthread_rwlock_t, 56 bytes, 8-aligned. shared (28) and flags (48) keep
 * glibc's meaning: shared != 0 is a process-shared lock (glibc's), flags 2
 * is PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP. word is the lock state
 * and the sleepers' futex word in one 64-bit word, changed only by atomic
 * read-modify-writes (rwlock.c "Lock word"); it lies over glibc's
 * __readers and __writers, which are 0 in a free lock that never had a
 * sleeper, as ours is. */
struct wp_rwlock {
	uint64_t word;      /* 0: state (low half), generation | sleepers
			     * (high half, the futex word) */
	unsigned wwait;     /* 8: writers waiting to acquire */
	unsigned pad[4];    /* 12 */
	int shared;         /* 28 */
	uint64_t pad1;      /* 32 */
	uint64_t writer;    /* 40: writer's thread pointer */
	unsigned flags;     /* 48 */
	unsigned pad2;      /* 52 */
};

/* pthread_barrier_t, 32 bytes. Word 12 is glibc's "shared" word (0x80 for
 * a process-shared barrier, which stays glibc's). */
struct wp_barrier {
	unsigned arrived;   /* 0 */
	unsigned gen;       /* 4: futex word, bumped when a round completes */
	unsigned count;     /* 8 */
	unsigned shared;    /* 12 */
	unsigned out;       /* 16: threads still reading the barrier */
	unsigned pad[3];    /* 20 */
};

/* sem_t, 32 bytes, glibc's own layout: value, waiters, private word (0x80
 * for a process-shared or named semaphore, which stays glibc's). */
struct wp_sem {
	/* value and nwaiters form one 64-bit word (other.c "Semaphore"):
	 * sem_t is 8-aligned, and x86-64 and arm64 are little-endian, so the
	 * word is value | nwaiters << 32 */
	unsigned value;     /* 0: futex word */
	unsigned nwaiters;  /* 4 */
	unsigned priv;      /* 8 */
	unsigned pad[5];
};
#define WP_SEM_GLIBC_SHARED 0x80u

_Static_assert(sizeof(pthread_mutex_t) >= 40 && sizeof(struct wp_mutex) == sizeof(pthread_mutex_t),
	       "mutex size");
_Static_assert(offsetof(struct wp_mutex, pad) == 32, "mutex fields in the first 32 bytes");
_Static_assert(offsetof(struct wp_mutex, kind) == 16, "mutex kind offset");
_Static_assert(sizeof(struct wp_cond) == sizeof(pthread_cond_t), "cond size");
_Static_assert(offsetof(struct wp_cond, wrefs) == 36, "cond wrefs offset");
_Static_assert(sizeof(struct wp_rwlock) == sizeof(pthread_rwlock_t), "rwlock size");
_Static_assert(offsetof(struct wp_rwlock, shared) == 28, "rwlock shared offset");
_Static_assert(offsetof(struct wp_rwlock, flags) == 48, "rwlock flags offset");
_Static_assert(offsetof(struct wp_rwlock, word) == 0 && _Alignof(pthread_rwlock_t) >= 8,
	       "rwlock word: 64-bit atomics on offset 0");
_Static_assert(sizeof(struct wp_barrier) <= sizeof(pthread_barrier_t), "barrier size");
_Static_assert(sizeof(struct wp_sem) == sizeof(sem_t), "sem size");
_Static_assert(_Alignof(sem_t) >= 8 && offsetof(struct wp_sem, nwaiters) == 4 &&
	       __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "sem word layout");

/* ---- the calling thread ---- */

/* The calling thread's owner id: its thread pointer (pthread_self() on
 * glibc), which, unlike the kernel tid, stays the same in a fork child,
 * with its halves swapped and bit 31 set. glibc's code reads our mutex's
 * owner field as a 32-bit tid inside a wait on one of its process-shared
 * conds (mutex.c "glibc's owner field"): a low half with bit 31 set is a
 * negative int and never equals a tid, while a raw pointer's low half
 * could equal a waiter's tid by chance and make glibc's relock think it
 * already holds the mutex. One-to-one: a user pointer's high half is below
 * 2^31, so its own bit 31 is free. Never 0. */
static inline uint64_t wp_self(void)
{
	uint64_t p = (uint64_t)(uintptr_t)__builtin_thread_pointer();

	return (p << 32 | p >> 32) | 0x80000000u;
}

/* The calling thread's CPU from its rseq area (kept current by the
 * kernel: a plain TLS load, inline because the uncontended lock takes it),
 * or sched_getcpu() where glibc registered none. */
static inline int wp_cpu(void)
{
#ifdef WP_HAVE_RSEQ
	if (__builtin_expect(__rseq_size >= 8, 1)) {
		const volatile struct rseq *r = (const volatile struct rseq *)(
			(char *)__builtin_thread_pointer() + __rseq_offset);
		return (int)r->cpu_id;
	}
#endif
	return sched_getcpu();
}

/* ---- futex ---- */
int wp_futex_wait(unsigned *addr, unsigned val, const struct timespec *abs,
		  clockid_t clk, int shared);
void wp_futex_wake(unsigned *addr, int n, int shared);
int wp_futex_requeue(unsigned *from, int nwake, unsigned *to, unsigned val);
int wp_check_abstime(const struct timespec *abs);
int wp_clock_ok(clockid_t clk);

/* ---- configuration, set by the constructor ---- */
extern int wp_off;          /* WEFT_PRELOAD=off: everything to glibc */
extern int wp_stats_on;     /* WEFT_STATS=1 */
extern long wp_spin_ns;     /* WEFT_PRELOAD_SPIN_NS: spin budget */

/* ---- the mutexes' fair hand-off (mutex.c), across fork ---- */
extern unsigned wp_starving_now; /* sleepers counted in some mutex's starving */
extern int wp_fair_off;     /* a fork child that inherited such counts */

/* ---- glibc's entry points ---- */
struct wp_real {
	int (*mutex_init)(pthread_mutex_t *, const pthread_mutexattr_t *);
	int (*mutex_destroy)(pthread_mutex_t *);
	int (*mutex_lock)(pthread_mutex_t *);
	int (*mutex_trylock)(pthread_mutex_t *);
	int (*mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
	int (*mutex_clocklock)(pthread_mutex_t *, clockid_t, const struct timespec *);
	int (*mutex_unlock)(pthread_mutex_t *);
	int (*mutex_consistent)(pthread_mutex_t *);
	int (*mutex_getprioceiling)(const pthread_mutex_t *, int *);
	int (*mutex_setprioceiling)(pthread_mutex_t *, int, int *);
	int (*cond_init)(pthread_cond_t *, const pthread_condattr_t *);
	int (*cond_destroy)(pthread_cond_t *);
	int (*cond_wait)(pthread_cond_t *, pthread_mutex_t *);
	int (*cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
	int (*cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);
	int (*cond_signal)(pthread_cond_t *);
	int (*cond_broadcast)(pthread_cond_t *);
	int (*rw_init)(pthread_rwlock_t *, const pthread_rwlockattr_t *);
	int (*rw_destroy)(pthread_rwlock_t *);
	int (*rw_rdlock)(pthread_rwlock_t *);
	int (*rw_tryrdlock)(pthread_rwlock_t *);
	int (*rw_timedrdlock)(pthread_rwlock_t *, const struct timespec *);
	int (*rw_clockrdlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
	int (*rw_wrlock)(pthread_rwlock_t *);
	int (*rw_trywrlock)(pthread_rwlock_t *);
	int (*rw_timedwrlock)(pthread_rwlock_t *, const struct timespec *);
	int (*rw_clockwrlock)(pthread_rwlock_t *, clockid_t, const struct timespec *);
	int (*rw_unlock)(pthread_rwlock_t *);
	int (*spin_init)(pthread_spinlock_t *, int);
	int (*spin_destroy)(pthread_spinlock_t *);
	int (*spin_lock)(pthread_spinlock_t *);
	int (*spin_trylock)(pthread_spinlock_t *);
	int (*spin_unlock)(pthread_spinlock_t *);
	int (*barrier_init)(pthread_barrier_t *, const pthread_barrierattr_t *, unsigned);
	int (*barrier_destroy)(pthread_barrier_t *);
	int (*barrier_wait)(pthread_barrier_t *);
	int (*sem_init)(sem_t *, int, unsigned);
	int (*sem_destroy)(sem_t *);
	int (*sem_wait)(sem_t *);
	int (*sem_trywait)(sem_t *);
	int (*sem_timedwait)(sem_t *, const struct timespec *);
	int (*sem_clockwait)(sem_t *, clockid_t, const struct timespec *);
	int (*sem_post)(sem_t *);
	int (*sem_getvalue)(sem_t *, int *);
};
extern struct wp_real wp_real;
/* glibc's entry points, resolved on first need if the constructor has not
 * run yet (a lock taken by an earlier constructor). */
const struct wp_real *wp_glibc(void);
#define WP_REAL(fn) (wp_glibc()->fn)

/* ---- statistics (WEFT_STATS=1) ---- */
enum wp_class { WP_MUTEX, WP_COND, WP_RWLOCK, WP_SPIN, WP_BARRIER, WP_SEM, WP_NCLASS };
enum wp_stat { WP_ACQ, WP_SPINS, WP_SPIN_WINS, WP_PARKS, WP_NSTAT };
extern unsigned long wp_stats[WP_NCLASS][WP_NSTAT];
static inline void wp_count(enum wp_class c, enum wp_stat s)
{
	/* relaxed: statistics only, read once at exit */
	if (__builtin_expect(wp_stats_on, 0))
		__atomic_fetch_add(&wp_stats[c][s], 1, __ATOMIC_RELAXED);
}

/* ---- internal entry points shared between files ---- */
int wp_mutex_lock(struct wp_mutex *m);
int wp_mutex_unlock(struct wp_mutex *m);
int wp_mutex_timed(struct wp_mutex *m, clockid_t clk, const struct timespec *abs);
int wp_mutex_trylock(struct wp_mutex *m);
int wp_mutex_init_kind(struct wp_mutex *m, int type);
int wp_mutex_relock(struct wp_mutex *m);
/* around a wait on a cond of glibc's with our mutex m (mutex.c "glibc's
 * owner field"): 1 when the owner field was converted, then _done after */
int wp_mutex_glibc_cond(struct wp_mutex *m);
void wp_mutex_glibc_cond_done(struct wp_mutex *m);
int wp_cond_wait(struct wp_cond *c, struct wp_mutex *m, clockid_t clk,
		 const struct timespec *abs, int use_cond_clock);
int wp_cond_signal(struct wp_cond *c);
int wp_cond_broadcast(struct wp_cond *c);
int wp_cond_init_clock(struct wp_cond *c, int mono);

static inline int wp_mutex_is_glibc(const struct wp_mutex *m)
{
	/* relaxed: the kind is written by init before the object is shared */
	return (__atomic_load_n(&m->kind, __ATOMIC_RELAXED) & WP_KIND_GLIBC) != 0;
}

static inline void wp_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

#endif
