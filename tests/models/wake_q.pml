/*
 * tests/models/wake_q.pml - the wake-queue flush: a semaphore post that
 * grants waiters under its slock into a wake queue and wakes them after
 * the unlock (batched: claim every record, then deliver the chain), racing
 * a waiter's timeout (its cancel CAS against the grant's claim CAS).
 *
 * Follows (update it with the code):
 *   sync/wake_q.c  wft_wake_q_flush, flush_batched (I2: next read before
 *                  the record is released; claim; one chain delivered
 *                  after the loop), and "Protocol" in its header;
 *   sync/waitq.h   wft_wake_q_add, wft_swaiter_cancel,
 *                  wft_swaiter_claim_locked (the claim byte);
 *   sync/sem.c     try_take, wait_slow ("Timeout": cancel CAS; won:
 *                  unlink or leaving--; lost: wait for WOKEN, I3),
 *                  post_common / post_slow (grant under qlock, leaving++
 *                  for a cancelled record, the rest becomes value);
 *   runtime/waiter.c and runtime/thread.c through park.inc (the waiter's
 *                  real park, token and timer, because the claim's
 *                  PARKED CAS may lose to a thread not parked yet).
 * Placement (wft_wake_target, the groups per worker) is not modelled: a
 * claimed thread is queued once, wherever it goes. pick() may choose any
 * queued record.
 *
 * Threads: W0 waits with a deadline (its timer may fire), W1 without; the
 * poster posts 2 units in one call and flushes, batched or not (a free
 * choice, as WEFT_FEATURES=NO_BATCH_WAKE).
 *
 * Properties:
 *   - no unit lost or doubled: at the end the units taken plus the value
 *     are 2, leaving is 0, the queue empty, WAITERS clear;
 *   - the flush never touches a record after its owner returned (I2, I3:
 *     the record lives on the waiter's stack);
 *   - no lost wakeup: W1 always returns, with a unit.
 *
 * Mutants (each must fail):
 *   MUTANT_CANCEL_STORE    the cancel as "load WAITING; store CANCELLED"
 *                          instead of a CAS: waiter and poster both win,
 *                          the waiter leaves with ETIMEDOUT and the
 *                          granted unit is lost (a lost post).
 *   MUTANT_CLAIM_NO_TOKEN  wft_waiter_claim without the token exchange
 *                          (park.inc): a waiter that read WAITING but has
 *                          not parked yet loses the claim's CAS, parks,
 *                          and nobody wakes it.
 */
#define NT 2
#include "park.inc"

#define CL_WAITING   0
#define CL_CLAIMED   1
#define CL_CANCELLED 2

byte val = 0;                /* s->v: value */
bit  SW = 0;                 /*        WAITERS */
byte qlock = 0;              /* s->qlock (holder + 1) */
byte q[NT];                  /* s->q: FIFO of thread ids */
byte qlen = 0;
byte leaving = 0;
bit  queued[NT];
byte claim[NT];              /* sw.claim */
bit  granted[NT];            /* sw.w.result == GRANTED */
bit  alive[NT];              /* the record (on the waiter's stack) exists */
byte units = 0;              /* units the waiters returned with */
byte ndone = 0;              /* waiters and poster finished */

inline qlock_lock(me)   { atomic { qlock == 0 -> qlock = me + 1 } }
inline qlock_unlock()   { qlock = 0 }

inline q_remove(x)
{
	k = 0;
	do
	:: q[k] == x -> break
	:: else -> k++
	od;
	do
	:: k + 1 < qlen -> q[k] = q[k + 1]; k++
	:: else -> break
	od;
	qlen--;
	queued[x] = 0
}

proctype Waiter(byte i; bit timed)
{
	byte r, pr, k, c;
	bit pold, pgo, won;

	/* try_take */
	atomic {
		if
		:: val > 0 -> val--; r = 1
		:: else -> r = 0
		fi
	};
	if
	:: r == 1 -> units++; goto out
	:: else
	fi;
	/* wait_slow */
	alive[i] = 1;
	claim[i] = CL_WAITING;
	wstate[i] = WAITING;
	qlock_lock(i);
	atomic {
		if
		:: val > 0 -> val--; r = 1
		:: val == 0 && timed -> r = 2          /* deadline passed */
		:: val == 0 -> SW = 1; r = 0
		fi
	};
	if
	:: r == 1 -> qlock_unlock(); units++; goto out
	:: r == 2 -> qlock_unlock(); goto out
	:: else
	fi;
	q[qlen] = i;
	qlen++;
	queued[i] = 1;
	qlock_unlock();
	waiter_wait(i, timed, r, pr, pold, pgo);
	if
	:: r == ETIMEDOUT ->
		/* "Timeout": the cancel CAS decides */
#ifdef MUTANT_CANCEL_STORE
		c = claim[i];
		if
		:: c == CL_WAITING -> claim[i] = CL_CANCELLED; won = 1
		:: else -> won = 0
		fi;
#else
		atomic {
			if
			:: claim[i] == CL_WAITING -> claim[i] = CL_CANCELLED; won = 1
			:: else -> won = 0
			fi
		};
#endif
		if
		:: won ->
			qlock_lock(i);
			if
			:: queued[i] ->
				q_remove(i);
				if
				:: qlen == 0 -> SW = 0
				:: else
				fi
			:: else -> leaving--
			fi;
			qlock_unlock();
			goto gone
		:: else ->
			/* granted first (I3): wait for WOKEN */
			waiter_wait(i, 0, r, pr, pold, pgo)
		fi
	:: else
	fi;
	assert(granted[i]);
	units++;
gone:
	alive[i] = 0;
out:
	ndone++
}

proctype Poster()
{
	byte n = 2, k, sw, first = 255, nxt, t, nw = 0, chain[NT], nc = 0;
	bit done = 0, batch, uold, uwon;

	/* post_common */
	do
	:: done -> break
	:: else ->
		atomic {
			if
			:: !SW -> val = val + n; n = 0; done = 1
			:: else
			fi
		};
		if
		:: !done ->
			/* post_slow */
			qlock_lock(NT);
			if
			:: !SW -> skip                   /* everyone left: retry */
			:: else ->
				do
				:: n > 0 && qlen > 0 ->
					if
					:: sw = q[0]
					:: qlen > 1 -> sw = q[1]
					fi;
					q_remove(sw);
					atomic {
						if
						:: claim[sw] == CL_WAITING -> claim[sw] = CL_CLAIMED; k = 1
						:: else -> k = 0
						fi
					};
					if
					:: k ->
						assert(alive[sw]);
						granted[sw] = 1;
						/* wft_wake_q_add: append to the queue */
						chain[nw] = sw;
						nw++;
						n--
					:: else -> leaving++
					fi
				:: else -> break
				od;
				if
				:: qlen == 0 -> val = n; SW = 0; n = 0
				:: else
				fi;
				done = 1
			fi;
			qlock_unlock()
		:: else
		fi
	od;
	/* wft_wake_q_flush */
	if
	:: nw > 1 -> if :: batch = 1 :: batch = 0 fi
	:: else -> batch = 0
	fi;
	k = 0;
	do
	:: k < nw ->
		t = chain[k];
		assert(alive[t]);                /* wt->thread, next (I2) */
		if
		:: batch ->
			waiter_claim(t, uold, uwon);
			if
			:: uwon -> chain[nc] = t; nc++   /* into its group's chain */
			:: else
			fi
		:: else ->
			waiter_wake(t, uold, uwon)
		fi;
		k++
	:: else -> break
	od;
	/* deliver the chains: one push_remote per target */
	k = 0;
	do
	:: k < nc -> deliver(chain[k]); k++
	:: else -> break
	od;
	ndone++
}

init {
	atomic {
		run Waiter(0, 1);
		run Waiter(1, 0);
		run Poster();
		run Timer(0)
	}
	ndone == 3;
	assert(units + val == 2 && leaving == 0 && qlen == 0 && !SW)
}
