/*
 * sync/slock.h - the slock: the small internal lock inside every sync
 * object (the mutex's qlock, the cond's, sem's, rwlock's, barrier's, once's,
 * wait group's and channel's lock). The fast paths are inline here; the
 * spin-then-sleep slow path is sync/slock.c.
 *
 * It protects the object's wait queue and the flag changes that go with
 * it, is held for a few dozen instructions, and NEVER across a park or a
 * wake (wakes are collected in a wake queue and issued after the unlock,
 * the kernel's wake_q rule; see sync/wake_q.c).
 *
 * Lock order (the only nesting among sync objects): a cond's slock, then
 * its mutex's slock. Nothing else nests.
 *
 * Test-and-set with a bounded spin, then a futex sleep. Values: 0 free,
 * 1 held, 2 held and someone may sleep on the futex (the unlocker must
 * wake one). The futex fallback exists because the holder may be an OS
 * thread (or a worker) that the kernel preempted inside the critical
 * section; spinning for its whole time slice would burn the CPU it needs.
 * A weft thread holding the lock never switches away while holding it, so
 * a sleeper can never wait for a thread of its own worker.
 */
#ifndef WFT_SYNC_SLOCK_H
#define WFT_SYNC_SLOCK_H

#include "runtime/panic.h"

struct wft_slock {
	_Atomic uint32_t v;
};

/* The contended halves (sync/slock.c): spin, then sleep on the futex;
 * wake one sleeper. Context: any. */
void wft_slock_lock_slow(struct wft_slock *l);
void wft_slock_unlock_slow(struct wft_slock *l);

/* Take l. Context: any. May park: no (it may sleep the OS thread on the
 * futex while a preempted holder runs). */
static inline void wft_slock_lock(struct wft_slock *l)
{
	uint32_t z = 0;

	/* acquire: the critical section reads what the previous holder wrote;
	 * pairs with the release xchg in wft_slock_unlock */
	if (wft_likely(wft_cas(&l->v, &z, 1, acquire)))
		return;
	wft_slock_lock_slow(l);
}

/* Release l, waking one sleeper if one announced itself. Context: the
 * holder. */
static inline void wft_slock_unlock(struct wft_slock *l)
{
	/* release: publishes the critical section; pairs with the acquire CAS
	 * (or xchg) of the next holder. An xchg, not a store, because we must
	 * learn whether a sleeper announced itself (value 2). */
	if (wft_unlikely(wft_xchg(&l->v, 0, release) == 2))
		wft_slock_unlock_slow(l);
}

#endif
