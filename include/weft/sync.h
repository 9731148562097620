/*
 * weft/sync.h - synchronisation primitives: mutex, condition variable,
 * counting semaphore, wake queue, reader-writer lock, barrier, once and
 * wait group.
 *
 * Every primitive works from weft threads and from plain OS threads, mixed:
 * a weft thread that blocks parks (its worker runs other threads), an OS
 * thread that blocks sleeps on a futex. A pthread may wait on a semaphore
 * that a weft thread posts, and the reverse.
 *
 * Contexts (who may call a function):
 *   "any"          - a weft thread or a plain OS thread;
 *   "weft thread"  - code running in a light thread spawned with weft_spawn().
 * Every call returns 0 or a positive errno value (pthread style); the exact
 * set is listed per function. Bad arguments that are cheap to detect (a NULL
 * object, a count out of range, an unlock by a non-owner) return EINVAL or
 * EPERM, never abort.
 *
 * Timed forms take an absolute CLOCK_MONOTONIC deadline in nanoseconds
 * (weft_now_ns() + timeout); WEFT_TIME_INFINITE means no deadline. A deadline
 * in the past still tries once without blocking.
 *
 * The objects are opaque: their size and alignment are part of the ABI
 * (frozen below with _Static_assert), their contents are not. An all-zero
 * object is a valid initial state, so the static initializers are zeros and
 * an object in zeroed memory needs no init call.
 */
#ifndef WEFT_SYNC_H
#define WEFT_SYNC_H

#include <weft/common.h>

WEFT_EXTERN_C_BEGIN

/* ---------------------------------------------------------------------- */
/* Mutex: adaptive spin-then-park, FIFO wait queue, hand-off to a waiter that
 * has waited more than 1 ms. Not recursive. */

typedef struct weft_mutex {
	uint64_t opaque_[8];
} weft_mutex_t;

#define WEFT_MUTEX_INITIALIZER { { 0 } }

/* Initialise (or reinitialise an unused) mutex. Returns 0 or EINVAL (m NULL).
 * Context: any. */
WEFT_API int weft_mutex_init(weft_mutex_t *m);

/* Lock m, blocking as long as needed. Returns 0, EINVAL (m NULL or
 * destroyed), EDEADLK (the caller already owns m), EOWNERDEAD (the weft
 * thread that owned m exited without unlocking it: the caller owns m now,
 * the data it protects may be inconsistent; the caller's unlock makes m an
 * ordinary mutex again). Waiters queued before such an exit stay queued
 * until a later locker takes m over and unlocks it; an OS-thread owner's
 * exit is not detected. A thread that reuses the dead owner's TCB does not
 * own m (owner ids carry a 16-bit generation: certain for up to 32,767
 * reuses of that TCB after the exit; see weft_mutex(3) NOTES).
 * Context: any. May park: yes. */
WEFT_API int weft_mutex_lock(weft_mutex_t *m);

/* Lock m if it is free. Returns 0, EINVAL (m NULL or destroyed), EBUSY
 * (owned, including by the caller), EOWNERDEAD (as weft_mutex_lock).
 * Context: any. May park: no. */
WEFT_API int weft_mutex_trylock(weft_mutex_t *m);

/* Lock m, giving up at the absolute deadline. Returns as weft_mutex_lock,
 * plus ETIMEDOUT. Context: any. May park: yes. */
WEFT_API int weft_mutex_timedlock(weft_mutex_t *m, weft_time_t deadline);

/* Unlock m; wakes one waiter if there are any. Returns 0, EINVAL (m NULL
 * or destroyed), EPERM (the caller does not own m). Context: any. May park: no; but in
 * hand-off mode (a waiter has waited over 1 ms), or when the waiter it
 * woke still waits in its own worker's queue after 16 of its unlocks, a
 * weft thread passes the lock to that waiter and yields its worker to it,
 * so it may be switched out and resume later, as in weft_yield(). */
WEFT_API int weft_mutex_unlock(weft_mutex_t *m);

/* Destroy m. Returns 0, EINVAL (m NULL or already destroyed), EBUSY
 * (locked or waited on). After 0, every call on m but weft_mutex_init
 * returns EINVAL. Context: any. */
WEFT_API int weft_mutex_destroy(weft_mutex_t *m);

/* ---------------------------------------------------------------------- */
/* Wake queue: a caller-local list of waiters granted by *_wq calls and not
 * woken yet (the kernel's wake_q). weft_wakeq_flush() wakes them after the
 * caller has dropped its own locks: grouped by target worker, each group
 * spliced into that worker's mailbox with one atomic operation and at most
 * one kick. A waiter granted into a wake queue stays blocked until the
 * flush, so flush before blocking or returning. */

typedef struct weft_wakeq {
	uint64_t opaque_[4];
} weft_wakeq_t;

#define WEFT_WAKEQ_INITIALIZER { { 0 } }

/* Initialise an empty wake queue. Returns 0 or EINVAL (wq NULL). Context: any. */
WEFT_API int weft_wakeq_init(weft_wakeq_t *wq);

/* Wake everything collected in wq and leave it empty (reusable). Returns 0
 * or EINVAL (wq NULL). Context: any. May park: no. */
WEFT_API int weft_wakeq_flush(weft_wakeq_t *wq);

/* ---------------------------------------------------------------------- */
/* Condition variable, used with a weft_mutex_t. Broadcast does not stampede:
 * while the mutex is held, woken waiters move to the mutex's wait queue and
 * run one at a time. All concurrent waiters must use the same mutex. */

typedef struct weft_cond {
	uint64_t opaque_[8];
} weft_cond_t;

#define WEFT_COND_INITIALIZER { { 0 } }

/* Initialise c with no waiters (the same as WEFT_COND_INITIALIZER).
 * Returns 0 or EINVAL (c NULL). Context: any; no concurrent use of c. */
WEFT_API int weft_cond_init(weft_cond_t *c);

/* Atomically unlock m and wait for a signal, then relock m. Returns 0,
 * EINVAL (c or m NULL or destroyed, or another mutex is in use by current
 * waiters), EPERM (the caller does not own m), EOWNERDEAD (relocking took
 * m over from an owner that exited, see weft_mutex_lock). Context: any.
 * May park: yes. */
WEFT_API int weft_cond_wait(weft_cond_t *c, weft_mutex_t *m);

/* Like weft_cond_wait with an absolute deadline. Returns as weft_cond_wait,
 * plus ETIMEDOUT (m is relocked in that case too); a timeout whose relock
 * took m over from a dead owner returns EOWNERDEAD, not ETIMEDOUT.
 * Context: any. May park: yes. */
WEFT_API int weft_cond_timedwait(weft_cond_t *c, weft_mutex_t *m, weft_time_t deadline);

/* Wake one waiter (the longest waiting, or a cache-hot one among the first
 * few). Returns 0 or EINVAL (c NULL or destroyed). Context: any.
 * May park: no. */
WEFT_API int weft_cond_signal(weft_cond_t *c);

/* Wake all waiters. Returns 0 or EINVAL (c NULL or destroyed). Context:
 * any. May park: no. */
WEFT_API int weft_cond_broadcast(weft_cond_t *c);

/* Like weft_cond_signal, but the wakee (if one must be woken) goes into wq
 * and is woken by weft_wakeq_flush(wq). Returns 0 or EINVAL (c or wq NULL,
 * c destroyed).
 * Context: any. May park: no.
 * Flush wq before the caller blocks in any way, INCLUDING locking the
 * cond's mutex again: a wakee put into wq is already the mutex's one woken
 * waiter. Until it runs, other unlocks of the mutex wake nobody else, and
 * once it has waited 1 ms an unlock hands it the mutex outright; it cannot
 * run before the flush, so a caller that locks the mutex before flushing
 * can wait for a thread that waits for the caller's flush: deadlock.
 * Unlocking the mutex, other *_wq calls and the flush itself are fine;
 * anything that may block is not. */
WEFT_API int weft_cond_signal_wq(weft_cond_t *c, weft_wakeq_t *wq);

/* Destroy c; afterwards its memory may be freed. Safe right after a
 * broadcast (the POSIX "lock m; broadcast; destroy; free" idiom), even when
 * a timed waiter's deadline fired meanwhile: if such a waiter still has to
 * leave c, destroy waits for that (it needs only c's internal lock, never
 * the mutex). Returns 0, EINVAL (c NULL or already destroyed), EBUSY (a
 * thread waits on c that no signal or broadcast has taken, or another
 * destroy of c is waiting). After 0, every call on c but weft_cond_init
 * returns EINVAL.
 * Context: any. May park: briefly, only in the timed-waiter case above. */
WEFT_API int weft_cond_destroy(weft_cond_t *c);

/* ---------------------------------------------------------------------- */
/* Counting semaphore. Waiters queue FIFO; a post hands its units directly to
 * waiters (no barging past them), which return without retaking any lock. */

typedef struct weft_sem {
	uint64_t opaque_[8];
} weft_sem_t;

/* Largest value a semaphore can hold (as SEM_VALUE_MAX). */
#define WEFT_SEM_VALUE_MAX 2147483647u

/* Initialise s with value. Returns 0 or EINVAL (s NULL, value above
 * WEFT_SEM_VALUE_MAX). Context: any. */
WEFT_API int weft_sem_init(weft_sem_t *s, unsigned value);

/* Take one unit, blocking while there is none. Returns 0 or EINVAL (s NULL).
 * Context: any. May park: yes. */
WEFT_API int weft_sem_wait(weft_sem_t *s);

/* Take one unit if there is one. Returns 0, EINVAL (s NULL), EAGAIN (none).
 * Context: any. May park: no. */
WEFT_API int weft_sem_trywait(weft_sem_t *s);

/* Take one unit, giving up at the absolute deadline. Returns 0, EINVAL
 * (s NULL), ETIMEDOUT. Context: any. May park: yes. */
WEFT_API int weft_sem_timedwait(weft_sem_t *s, weft_time_t deadline);

/* Add one unit (or hand it to a waiter). Returns 0, EINVAL (s NULL or
 * destroyed), EOVERFLOW (the value would exceed WEFT_SEM_VALUE_MAX).
 * Async-signal-safe, as sem_post(3) (so is weft_sem_post_n): a post never
 * waits for the semaphore's internal lock; while another thread (or the
 * very thread the handler interrupted) holds it, the units go to a
 * lock-free deferred count that the holder grants before it lets go. Such
 * a deferred post cannot report EOVERFLOW (the value is capped). Not from
 * every handler: the workers leave SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGTRAP, SIGSYS, SIGABRT, SIGPIPE, SIGXFSZ, SIGXCPU, SIGPROF and
 * SIGVTALRM unblocked, so a handler of one of those may run on a worker's
 * OS thread in the middle of its scheduler, and a post from it is not
 * safe (nor is any other weft call). With the NO_MAILBOX feature switch a
 * post takes a worker's runqueue lock and is not async-signal-safe from
 * any handler. The handlers of all other signals run on the program's own
 * OS threads (the workers block them) and may post. No other weft_sem_*
 * call is async-signal-safe. Every call on a destroyed semaphore returns
 * EINVAL until weft_sem_init. Context: any, including a signal handler
 * within the limits above. */
WEFT_API int weft_sem_post(weft_sem_t *s);

/* Add n units: up to n waiters are granted one each and woken in one batch
 * (see weft_wakeq_flush). n = 0 does nothing. Returns 0, EINVAL (s NULL, n
 * above WEFT_SEM_VALUE_MAX), EOVERFLOW (the value would exceed
 * WEFT_SEM_VALUE_MAX; nothing is posted). Context: any. May park: no. */
WEFT_API int weft_sem_post_n(weft_sem_t *s, unsigned n);

/* Like weft_sem_post_n, but the granted waiters go into wq and are woken by
 * weft_wakeq_flush(wq). Returns as weft_sem_post_n, plus EINVAL for wq NULL.
 * Context: any. May park: no. */
WEFT_API int weft_sem_post_wq(weft_sem_t *s, unsigned n, weft_wakeq_t *wq);

/* Store the current value in *v (0 while threads are waiting). Returns 0 or
 * EINVAL (s or v NULL). Context: any. */
WEFT_API int weft_sem_getvalue(weft_sem_t *s, int *v);

/* Destroy s; after 0 its memory may be freed, even while a waiter granted
 * by a post (or a post_wq not yet flushed) is still on its way out: such a
 * waiter no longer touches s. Returns 0, EINVAL (s NULL), EBUSY (threads
 * are waiting, including a timed-out waiter that has not returned yet).
 * Context: any. May park: no. */
WEFT_API int weft_sem_destroy(weft_sem_t *s);

/* ---------------------------------------------------------------------- */
/* Reader-writer lock, phase-fair with a bounded reader pass: readers share
 * it without serialising on an internal lock; readers that arrive while a
 * writer waits still join the current read phase until that writer has
 * waited about 1 ms as the first writer in line, then they queue behind it
 * (writers cannot starve), and a writer's unlock admits every queued reader
 * before the next writer (readers cannot starve either). Not recursive for
 * writers.
 * Read-biased: while no writer has used the lock lately, a read lock and
 * unlock write only a counter in the reader's worker's row of a process-wide
 * table, not the lock (WEFT_FEATURES=NO_RW_BIAS turns this off); a writer
 * then pays a scan of 32 counters. The same from light threads and plain OS threads, also
 * for a lock set up with WEFT_RWLOCK_INITIALIZER; no memory per lock. */

typedef struct weft_rwlock {
	uint64_t opaque_[8];
} weft_rwlock_t;

#define WEFT_RWLOCK_INITIALIZER { { 0 } }

/* Initialise rw unlocked (the same as WEFT_RWLOCK_INITIALIZER). Returns 0
 * or EINVAL (rw NULL). Context: any; no concurrent use of rw. */
WEFT_API int weft_rwlock_init(weft_rwlock_t *rw);
/* Take a read hold, sharing rw with other readers; waits while a writer
 * holds it, or while a writer has waited for it past its patience (about
 * 1 ms). Returns 0, EINVAL (rw NULL), EDEADLK (the
 * caller holds it for writing), EAGAIN (the reader count would overflow).
 * Context: any. May park: yes. */
WEFT_API int weft_rwlock_rdlock(weft_rwlock_t *rw);
/* Take the write hold (exclusive); waits while anyone holds it. Returns 0,
 * EINVAL (rw NULL), EDEADLK (the caller holds it for writing, or holds a
 * read hold that went through the per-worker reader counts; a read hold
 * taken through the lock word cannot be told from another thread's, and
 * a caller that holds one waits for itself for ever, as with glibc).
 * Context: any. May park: yes. */
WEFT_API int weft_rwlock_wrlock(weft_rwlock_t *rw);
/* Take a read hold if that needs no wait. Returns 0, EINVAL (rw NULL),
 * EBUSY (a writer holds it, or waits for it past its patience), EAGAIN (the reader count would
 * overflow). Context: any. May park: no. */
WEFT_API int weft_rwlock_tryrdlock(weft_rwlock_t *rw);
/* Take the write hold if nobody holds rw. Returns 0, EINVAL (rw NULL),
 * EBUSY (held). Context: any. May park: no. */
WEFT_API int weft_rwlock_trywrlock(weft_rwlock_t *rw);
/* weft_rwlock_rdlock, giving up at the absolute deadline. Returns as
 * rdlock, plus ETIMEDOUT. Context: any. May park: yes. */
WEFT_API int weft_rwlock_timedrdlock(weft_rwlock_t *rw, weft_time_t deadline);
/* weft_rwlock_wrlock, giving up at the absolute deadline. Returns as
 * wrlock, plus ETIMEDOUT. Context: any. May park: yes. */
WEFT_API int weft_rwlock_timedwrlock(weft_rwlock_t *rw, weft_time_t deadline);
/* Release a read or write hold. Returns 0, EINVAL (rw NULL), EPERM (not
 * held, or held for writing by another thread; an unlock by a thread that
 * holds nothing while others hold it for reading may instead release one of
 * their holds, as with pthread rwlocks: only the caller's own holds are
 * checked exactly). Context: any. May park: no. */
WEFT_API int weft_rwlock_unlock(weft_rwlock_t *rw);
/* Destroy rw; after 0 its memory may be reused. Returns 0, EINVAL (rw
 * NULL or already destroyed), EBUSY (held or waited on). After 0, every
 * call on rw but weft_rwlock_init returns EINVAL (the lock calls below say
 * "rw NULL" for short). Context: any. May park: no. */
WEFT_API int weft_rwlock_destroy(weft_rwlock_t *rw);

/* ---------------------------------------------------------------------- */
/* Barrier: count threads meet; each wait returns when the count-th arrives. */

typedef struct weft_barrier {
	uint64_t opaque_[8];
} weft_barrier_t;

/* Returned by weft_barrier_wait to exactly one caller per generation. */
#define WEFT_BARRIER_SERIAL_THREAD (-1)

/* Initialise b for groups of count threads. Returns 0, EINVAL (b NULL or
 * count 0). Context: any; no concurrent use of b. */
WEFT_API int weft_barrier_init(weft_barrier_t *b, unsigned count);
/* Returns WEFT_BARRIER_SERIAL_THREAD to one caller per generation, 0 to the
 * others, or EINVAL (b NULL or not initialised). Context: any. May park: yes. */
WEFT_API int weft_barrier_wait(weft_barrier_t *b);
/* Destroy b; after 0 its memory may be reused. Returns 0, EINVAL (b NULL),
 * EBUSY (threads are waiting). Context: any. May park: no. */
WEFT_API int weft_barrier_destroy(weft_barrier_t *b);

/* ---------------------------------------------------------------------- */
/* Once: run an initialiser exactly once; concurrent callers wait for it. */

typedef struct weft_once {
	uint64_t opaque_[4];
} weft_once_t;

#define WEFT_ONCE_INIT { { 0 } }

/* Run fn() if no call on o has run it yet, else wait until that run has
 * finished. Returns 0, EINVAL (o or fn NULL), EDEADLK (called again from
 * inside fn). Context: any. May park: yes. */
WEFT_API int weft_once(weft_once_t *o, void (*fn)(void));

/* ---------------------------------------------------------------------- */
/* Wait group (Go's sync.WaitGroup): a counter; wait blocks until it is 0. */

typedef struct weft_waitgroup {
	uint64_t opaque_[4];
} weft_waitgroup_t;

#define WEFT_WAITGROUP_INITIALIZER { { 0 } }

/* Initialise wg with the counter at 0 (the same as
 * WEFT_WAITGROUP_INITIALIZER). Returns 0 or EINVAL (wg NULL).
 * Context: any; no concurrent use of wg. */
WEFT_API int weft_waitgroup_init(weft_waitgroup_t *wg);
/* Add delta (may be negative) to the counter; at 0 every waiter is woken.
 * Returns 0, EINVAL (wg NULL, or the counter would go below 0 or above
 * INT32_MAX; the counter is left unchanged). Context: any. May park: no. */
WEFT_API int weft_waitgroup_add(weft_waitgroup_t *wg, long delta);
/* Count one task done: weft_waitgroup_add(wg, -1). Returns 0, EINVAL (wg
 * NULL, or the counter is already 0; it stays 0). Context: any.
 * May park: no. */
WEFT_API int weft_waitgroup_done(weft_waitgroup_t *wg);
/* Block until the counter is 0. Returns 0 or EINVAL (wg NULL).
 * Context: any. May park: yes. */
WEFT_API int weft_waitgroup_wait(weft_waitgroup_t *wg);

/* ---------------------------------------------------------------------- */
/* ABI: sizes and alignment are frozen. */

#if !defined(__cplusplus)
_Static_assert(sizeof(weft_mutex_t) == 64, "weft_mutex_t size is ABI");
_Static_assert(sizeof(weft_cond_t) == 64, "weft_cond_t size is ABI");
_Static_assert(sizeof(weft_sem_t) == 64, "weft_sem_t size is ABI");
_Static_assert(sizeof(weft_wakeq_t) == 32, "weft_wakeq_t size is ABI");
_Static_assert(sizeof(weft_rwlock_t) == 64, "weft_rwlock_t size is ABI");
_Static_assert(sizeof(weft_barrier_t) == 64, "weft_barrier_t size is ABI");
_Static_assert(sizeof(weft_once_t) == 32, "weft_once_t size is ABI");
_Static_assert(sizeof(weft_waitgroup_t) == 32, "weft_waitgroup_t size is ABI");
_Static_assert(_Alignof(weft_mutex_t) == 8, "sync objects are 8-byte aligned");
#endif

WEFT_EXTERN_C_END

#endif
