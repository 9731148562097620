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

struct wft_mutex {
	_Atomic uintptr_t state;      /* owner id | WAITERS | HANDOFF */
	struct wft_slock qlock;       /* q, woken, and every flag change */
	_Atomic uint32_t spinner;     /* 1 while one thread spins on state */
	struct wft_waitq q;           /* FIFO of struct wft_swaiter; qlock */
	struct wft_swaiter *woken;    /* the COMPETE waiter in flight; qlock */
	_Atomic uint32_t os_spin_ns;  /* OS-thread spin estimate; a hint */
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
 * Returns 0. Context: any. May park: yes. */
int wft_mutex_lock_id(struct wft_mutex *m, uintptr_t id, struct weft_thread *self);

/* Finish acquiring m for a waiter whose record sw was woken by the mutex
 * (result WFT_SW_HANDED: it owns m already; WFT_SW_COMPETE: it is m's woken
 * waiter and must compete). Returns 0. Context: any. May park: yes. */
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
