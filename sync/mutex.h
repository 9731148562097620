/*
 * sync/mutex.h - private layout of weft_mutex_t and the calls cond.c makes
 * into the mutex (wait morphing: signalled cond waiters move to the mutex's
 * queue instead of being woken to block again). See sync/mutex.c.
 */
#ifndef WFT_SYNC_MUTEX_H
#define WFT_SYNC_MUTEX_H

#include "sync/waitq.h"

/* Lock-word bits; documented under "State word" in sync/mutex.c. */
#define WFT_MUTEX_WAITERS ((uintptr_t)1)
#define WFT_MUTEX_HANDOFF ((uintptr_t)2)
#define WFT_MUTEX_FLAGS   (WFT_MUTEX_WAITERS | WFT_MUTEX_HANDOFF)

/* The lock word of a destroyed mutex: an OS-tagged owner id at address 8,
 * which no thread has (so the fast path's CAS from 0 fails and nobody
 * dereferences it), with no flag set. Every call but init returns EINVAL
 * on it. */
#define WFT_MUTEX_DESTROYED (WFT_ID_OS | (uintptr_t)8)

/* ---------------------------------------------------------------------- */
/* Lock owner ids with a generation (mutex, rwlock writer, cond waiters).
 *
 * An owner id is the TCB address of a weft thread (or the address of an OS
 * thread's thread-local word, tagged WFT_ID_OS; sync/waitq.h), with a 16-bit
 * generation in bits 48..63: the low bits of the TCB's reuse count t->seq,
 * or, for an OS thread, a number drawn from a global counter the first time
 * the thread locks anything. So a thread that exits holding a lock does not
 * leave it owned by the next thread that gets the same TCB (or the same TLS
 * block): the newcomer's id differs in the generation, its lock does not
 * return EDEADLK, its unlock returns EPERM, and the mutex can tell that its
 * weft owner has exited (mutex.c "Owner death"). The horizon is 32,767
 * reuses of one TCB between the exit and the check: owner_dead reads a
 * generation difference of 2^15 or more as a stale read of a live owner,
 * so past the horizon a dead owner looks alive again (new lockers wait),
 * and at exact multiples of 65,536 reuses the TCB's occupant has the dead
 * owner's id (its lock is EDEADLK, its unlock succeeds). A spawn-heavy
 * program reuses one TCB that often in well under a second: the guarantee
 * holds for a lock taken over soon after the exit.
 *
 * User-space addresses on x86-64 and arm64 Linux are below 2^48 (above it
 * only when mmap is given such a hint, which neither malloc nor the TCB and
 * stack allocators do), so bits 48..63 of an address are free. */
#define WFT_LOCK_GEN_SHIFT 48
#define WFT_LOCK_ADDR_MASK ((((uintptr_t)1 << WFT_LOCK_GEN_SHIFT) - 1) & ~(uintptr_t)7)

/* Next OS-thread generation (mutex.c). */
uint64_t wft_lock_os_gen(void);

static inline uintptr_t wft_lock_gen_id(uintptr_t addr, uint64_t gen)
{
	WFT_ASSERT((addr >> WFT_LOCK_GEN_SHIFT) == 0);
	return addr | (uintptr_t)(gen << WFT_LOCK_GEN_SHIFT);
}

/* Owner id of the caller (with its generation); *tp receives the TCB (NULL
 * on an OS thread). On every lock and unlock, so inline.
 * Context: any. */
static inline uintptr_t wft_lock_self_id(struct weft_thread **tp)
{
	struct wft_worker *w = wft_worker_self();
	struct weft_thread *t = w ? w->current : NULL;
	uint64_t g;

	*tp = t;
	/* t->seq: our own TCB's reuse count, written by the spawner before we
	 * first ran (ordered by the spawn's publication), never while we run */
	if (wft_likely(t != NULL))
		return wft_lock_gen_id((uintptr_t)t, t->seq);
	g = wft_mutex_os_id;
	if (wft_unlikely(g == 0))
		wft_mutex_os_id = g = wft_lock_os_gen();
	return wft_lock_gen_id((uintptr_t)&wft_mutex_os_id, g) | WFT_ID_OS;
}

/* The TCB of a weft-thread owner id (not WFT_ID_OS). */
static inline struct weft_thread *wft_lock_id_thread(uintptr_t id)
{
	return (struct weft_thread *)(id & WFT_LOCK_ADDR_MASK);
}

/* The values of wft_mutex.calm ("Unlock mode" in mutex.c). After
 * WFT_MUTEX_CALM_UNLOCKS consecutive unlocks that found no flag set (nobody
 * queued, nobody woken), an owner switches the mutex to store mode, in
 * which unlock is a plain release store. Leaving store mode costs the first
 * waiter a poll (it cannot queue), so the switch must be rare against the
 * unlocks it speeds up: 4,096 unlocks at ~5 ns saved each pay for ~20 us of
 * polling. Below it, calm counts; FAST is store mode; FAST_LEAVE is store
 * mode with a waiter's request to leave it. */
#define WFT_MUTEX_CALM_UNLOCKS 4096
#define WFT_MUTEX_FAST UINT32_MAX
#define WFT_MUTEX_FAST_LEAVE (UINT32_MAX - 1)

static inline bool wft_mutex_store_mode(uint32_t calm)
{
	return calm >= WFT_MUTEX_FAST_LEAVE;
}

struct wft_mutex {
	_Atomic uintptr_t state;      /* owner id | WAITERS | HANDOFF */
	_Atomic uint32_t calm;        /* unlock mode: a count of calm unlocks,
	                               * or store mode (mutex.c "Unlock
	                               * mode"); written by owners, except a
	                               * waiter's request to leave store mode */
	struct wft_slock qlock;       /* q, woken, and every flag change */
	_Atomic uint32_t spinner;     /* 1 while one thread spins on state */
	_Atomic uint32_t os_spin_ns;  /* OS-thread spin estimate; a hint */
	_Atomic uint32_t pollers;     /* waiters polling in store mode (mutex.c
	                               * "Unlock mode"); +1 under qlock */
	struct wft_waitq q;           /* FIFO of struct wft_swaiter; qlock */
	struct wft_swaiter *woken;    /* the COMPETE waiter in flight; qlock */
	uint32_t stuck;               /* unlocks that found woken in the
	                               * unlocker's next slot (mutex.c "Stuck
	                               * woken waiter"); qlock */
};
_Static_assert(sizeof(struct wft_mutex) <= sizeof(weft_mutex_t), "mutex fits its public type");
_Static_assert(_Alignof(struct wft_mutex) <= _Alignof(weft_mutex_t), "mutex alignment");

#define wft_mutex_of(pm) ((struct wft_mutex *)(void *)(pm))

static inline uintptr_t wft_mutex_owner(uintptr_t v)
{
	return v & ~WFT_MUTEX_FLAGS;
}

/* Unlock m owned by id. Returns 0 or EPERM. Context: any. May park: no. */
int wft_mutex_unlock_id(struct wft_mutex *m, uintptr_t id);

/* Lock m for id with no deadline (cond.c relocking after a timeout).
 * Returns 0, or EOWNERDEAD (m's owner had exited holding it: the caller
 * owns m now). Context: any. May park: yes. */
int wft_mutex_lock_id(struct wft_mutex *m, uintptr_t id, struct weft_thread *self);

/* Finish acquiring m for a waiter whose record sw was woken by the mutex
 * (result WFT_SW_HANDED: it owns m already; WFT_SW_COMPETE: it is m's woken
 * waiter and must compete). Returns 0 or EOWNERDEAD (as wft_mutex_lock_id).
 * Context: any. May park: yes. */
int wft_mutex_relock(struct wft_mutex *m, struct wft_swaiter *sw, struct weft_thread *self);

/* Wait morphing: move the records of list (unlinked from a cond queue,
 * whose slock the caller holds) onto m. If m is free and has no woken
 * waiter, the first record becomes m's woken waiter (result COMPETE) and
 * goes into wq; the others are queued on m (WAITERS set), so they are woken
 * one unlock at a time. The records arrive already claimed (cond.c moved
 * them WAITING -> CLAIMED by CAS under its slock).
 * Context: any; the cond's slock held (lock order: cond, then mutex). */
void wft_mutex_requeue(struct wft_mutex *m, struct wft_waitq *list, struct wft_wake_q *wq);

#endif
