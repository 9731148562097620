/*
 * sync/slock.c - the slow path of the slock, the sync objects' internal
 * lock (values, rules and lock order: sync/slock.h).
 *
 * Lock: spin a bounded number of times with a test before each
 * test-and-set, then announce a sleeper (value 2) and sleep on the futex
 * until an exchange finds the lock free. Unlock: the inline unlock found 2
 * and wakes one sleeper. A lock that sets 2 keeps it after it gets the
 * lock (it cannot know whether others sleep), which costs at most one
 * spurious futex wake; no wakeup is lost, because a sleeper sets 2 with
 * the same exchange that tests for 0, so either it takes the lock or the
 * holder's unlocking exchange reads 2 and wakes it (the futex wait itself
 * returns at once if the word is no longer 2).
 */
#include "sync/slock.h"
#include "runtime/futex.h"

/* Slock: bounded spin before sleeping on the futex. The critical sections
 * are queue edits of tens of ns; 64 PAUSEs (~2 us at 25-35 ns each) cover
 * any holder that is actually running, while a futex sleep + wake costs
 * several microseconds, so spinning longer only pays when the holder was
 * preempted, and then it does not pay at all. */
#define WFT_SLOCK_SPINS 64

void wft_slock_lock_slow(struct wft_slock *l)
{
	uint32_t z;

	for (unsigned i = 0; i < WFT_SLOCK_SPINS; i++) {
		wft_cpu_relax();
		z = 0;
		/* relaxed: test before test-and-set, re-checked by the CAS */
		if (wft_load(&l->v, relaxed) == 0 &&
		    /* acquire: pairs with the release xchg in wft_slock_unlock */
		    wft_cas(&l->v, &z, 1, acquire))
			return;
	}
	/* acquire: as above. Setting 2 tells the unlocker to wake a sleeper;
	 * we keep 2 after taking the lock (we cannot know whether others
	 * sleep), which costs at most one spurious futex wake. */
	while (wft_xchg(&l->v, 2, acquire) != 0)
		wft_futex_wait(&l->v, 2, WEFT_TIME_INFINITE);
}

void wft_slock_unlock_slow(struct wft_slock *l)
{
	wft_futex_wake(&l->v, 1);
}
