/*
 * tests/models/park_token.pml - the waiter claim/timeout race: one waiting
 * weft thread, its timed park and its timer, a waker that wakes it
 * (waiter_wake) or claims it (wft_waiter_claim, then queues it itself),
 * and a stray weft_unpark.
 *
 * Follows (update it with the code):
 *   runtime/waiter.c  wft_waiter_wait, waiter_wake, wft_waiter_claim
 *   runtime/thread.c wft_thread_park, weft_unpark, park_timeout
 *                   ("Park protocol (the token)")
 *   runtime/wake.c  wft_wake_claim (the PARKED -> RUNNABLE CAS)
 *   runtime/timer.c fire / cancel (I2: only the owner worker fires, so a
 *                   timer fires only while its thread is switched out)
 * The steps themselves are in park.inc.
 *
 * Properties (spin -a is not needed: safety only):
 *   - no lost wakeup: every run ends with the waiter returned; a waiter
 *     stuck switched out is an invalid end state;
 *   - with an infinite deadline (UNTIMED), the waiter returns 0 and WOKEN;
 *   - the thread is queued at most once per park (assert in deliver);
 *   - a 0 return means WOKEN was stored (waiter.c contract).
 *
 * Mutants (each must fail):
 *   MUTANT_NO_PARK_RECHECK  wft_thread_park without the token xchg after
 *                           the PARKED store: an unpark that ran its xchg
 *                           before the store and its CAS before it too is
 *                           lost.
 *   MUTANT_TOKEN_STORE      the token consumed after a resume with a plain
 *                           store instead of an xchg (the store-buffering
 *                           bug in thread.c's last comment): the stray
 *                           unpark's token is consumed, the waker finds
 *                           token 1 and leaves the wake to it, the buffered
 *                           0 lands after that, and the re-check of WOKEN
 *                           read memory before the waker's store.
 * Both are run with -DUNTIMED: with a finite deadline the timer would
 * rescue the waiter, which hides the loss as a late timeout.
 */
#define NT 1
#include "park.inc"

#ifdef UNTIMED
#define TIMED 0
#else
#define TIMED 1
#endif

bit returned = 0;

proctype Waiter()
{
	byte r, pr;
	bit pold, pgo;

	waiter_wait(0, TIMED, r, pr, pold, pgo);
	assert(r == 0 || r == ETIMEDOUT);
	assert(r != 0 || wstate[0] == WOKEN);
#ifdef UNTIMED
	assert(r == 0);
#endif
	returned = 1
}

/* The primitive's waker: wakes the record, or claims it and queues the
 * thread itself (the two ways sync/ wakes a waiter). */
proctype Waker()
{
	bit uold, uwon;

	if
	:: waiter_wake(0, uold, uwon)
	:: waiter_claim(0, uold, uwon);
	   if
	   :: uwon -> deliver(0)
	   :: else
	   fi
	fi
}

/* An unrelated weft_unpark of the same thread (allowed by the API: a
 * spurious return, never a lost one). */
proctype Stray()
{
	bit uold, uwon;

	unpark(0, uold, uwon)
}

init {
	atomic {
		run Waiter();
		run Waker();
		run Stray();
		run Timer(0);
		run TokenBuffer(0)
	}
}
