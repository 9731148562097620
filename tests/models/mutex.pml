/*
 * tests/models/mutex.pml - the mutex: lock word with WAITERS/HANDOFF, the
 * FIFO queue under qlock, the one woken waiter in flight (m->woken), the
 * single spinner, hand-off to a starving head or to the woken waiter (I7),
 * and timed waiters.
 *
 * Follows (update it with the code):
 *   sync/mutex.c  lock_common (fast CAS 0 -> id), lock_slow (steps 1-3,
 *                 the queueing CAS under qlock, the timeout path with
 *                 `queued` under qlock, COMPETE/HANDED), try_spin (the
 *                 spinner slot; owner == id in flight), unlock_slow (I7
 *                 hand-off to m->woken, hand-off to the head, normal mode
 *                 with pick and the I3/I6 "wake nobody" rules),
 *                 wft_mutex_unlock_id (fast CAS id -> 0), dequeue_locked,
 *                 unwoken_locked; "The lost-wakeup argument" in its header.
 *   runtime/waiter.c wft_waiter_wait / waiter_wake, abstracted to "block
 *                 until WOKEN, or (timed) give up while still WAITING":
 *                 that the park underneath cannot lose the WOKEN store is
 *                 park_token.pml's subject.
 * Time is abstracted: "starving" (I5, I7, HANDOFF) and "rotate" are free
 * choices at every use, a superset of what any clock allows. pick() may
 * choose any queued record (the window of 4 covers all three here).
 * Not modelled: wft_mutex_requeue (cond's wait morphing), EDEADLK/EPERM.
 *
 * Threads: T1 and T2 lock/unlock twice with no deadline, T3 once with a
 * deadline (it may time out at any point of its wait).
 *
 * Properties:
 *   - mutual exclusion (assert in the critical section);
 *   - I1 under qlock at every qunlock: WAITERS <=> queue or woken;
 *   - no lost wakeup: T1 and T2 always finish (a thread blocked for good
 *     is an invalid end state), and at the end the word is 0, the queue
 *     empty, nobody woken.
 *
 * Mutants (each must fail):
 *   MUTANT_BLIND_WAITERS  a waiter sets WAITERS with a blind fetch_or after
 *                         seeing an owner, instead of the CAS that fails
 *                         if the owner left meanwhile: the owner's fast
 *                         unlock passes in between and nobody wakes it.
 *   MUTANT_STORE_UNLOCK   the fast unlock as "load; no flags? store 0"
 *                         (the rejected plain-store unlock): the store
 *                         erases a WAITERS set after the load. (Run with
 *                         -DNO_I1_ASSERT, so that spin reports the lost
 *                         wakeup itself rather than the broken I1 first.)
 */
#define NTH 3
#define NONE    0
#define HANDED  1
#define COMPETE 2
#define WAITING 0
#define WOKEN   1
#define ETIMEDOUT 110

/* m->state, split into its fields; every RMW of the word is one atomic */
byte owner = 0;
bit  WAITERS = 0;
bit  HANDOFF = 0;

byte qlock = 0;              /* m->qlock (holder id) */
byte q[NTH];                 /* m->q: FIFO of thread ids */
byte qlen = 0;
byte woken = 0;              /* m->woken */
byte spinner = 0;            /* m->spinner */

bit  queued[NTH + 1];
bit  wst[NTH + 1];           /* sw.w.state */
byte result[NTH + 1];        /* sw.w.result */
byte incs = 0;

inline qlock_lock()   { atomic { qlock == 0 -> qlock = id } }
inline qlock_unlock()
{
	atomic {
#ifndef NO_I1_ASSERT
		assert(WAITERS == (qlen > 0 || woken != 0));    /* I1 */
#endif
		qlock = 0
	}
}

inline q_push_back(x) { q[qlen] = x; qlen++; queued[x] = 1 }
inline q_push_front(x)
{
	k = qlen;
	do
	:: k > 0 -> q[k] = q[k - 1]; k--
	:: else -> break
	od;
	q[0] = x;
	qlen++;
	queued[x] = 1
}
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
	q[qlen] = 0;
	queued[x] = 0
}

/* unwoken_locked */
inline unwoken()
{
	woken = 0;
	if
	:: qlen == 0 -> WAITERS = 0; HANDOFF = 0
	:: else
	fi
}

/* lock: lock_common + lock_slow. ret = 0 (owner) or ETIMEDOUT. */
inline mutex_lock(timed, ret)
{
	iswoken = 0;
	atomic {                     /* fast path: CAS 0 -> id */
		if
		:: owner == 0 && !WAITERS && !HANDOFF -> owner = id; act = 1
		:: else -> act = 0
		fi
	};
	do
	:: act == 1 -> ret = 0; break
	:: act == 2 -> ret = ETIMEDOUT; break
	:: act == 0 ->
		/* 1. take it while free, or find it handed to us (I7) */
		atomic {
			if
			:: iswoken && owner == id -> act = 3
			:: owner == 0 -> owner = id; act = 3
			:: else -> hv = HANDOFF
			fi
		};
		/* 2. spin (try_spin), one spinner at a time */
		if
		:: act == 0 && !hv ->
			atomic {
				if
				:: spinner == 0 -> spinner = id; sp = 1
				:: else -> sp = 0
				fi
			};
			if
			:: sp ->
				if
				:: atomic {
					(owner == id || owner == 0) ->
					if
					:: owner == 0 -> owner = id
					:: else
					fi;
					act = 3
				   }
				:: true    /* gives up: owner off CPU, budget, HANDOFF, work */
				fi;
				spinner = 0
			:: else
			fi
		:: else
		fi;
		if
		:: act == 3 ->
			if
			:: iswoken -> qlock_lock(); unwoken(); qlock_unlock()
			:: else
			fi;
			act = 1
		:: else ->
			/* 3. queue and park */
			queued[id] = 0;
			wst[id] = WAITING;
			result[id] = NONE;
			qlock_lock();
			atomic {
				if
				:: iswoken && owner == id -> act = 4
				:: owner == 0 -> owner = id; act = 5
				:: owner != 0 && !(iswoken && owner == id) && timed -> act = 6
				:: owner != 0 && !(iswoken && owner == id) ->
#ifndef MUTANT_BLIND_WAITERS
					WAITERS = 1;
					if
					:: iswoken -> HANDOFF = 1     /* waited STARVE_NS */
					:: true
					fi;
#endif
					act = 7
				fi
			};
#ifdef MUTANT_BLIND_WAITERS
			if
			:: act == 7 -> WAITERS = 1    /* fetch_or, owner not re-checked */
			:: else
			fi;
#endif
			if
			:: act == 4 || act == 5 ->
				if
				:: iswoken -> unwoken()
				:: else
				fi;
				qlock_unlock();
				act = 1
			:: act == 6 ->
				if
				:: iswoken -> unwoken()
				:: else
				fi;
				qlock_unlock();
				act = 2
			:: act == 7 ->
				if
				:: iswoken -> woken = 0; iswoken = 0; q_push_front(id)
				:: else -> q_push_back(id)
				fi;
				qlock_unlock();
				/* wft_waiter_wait(deadline) */
				if
				:: wst[id] == WOKEN -> r = 0
				:: atomic { timed && wst[id] == WAITING -> r = ETIMEDOUT }
				fi;
				if
				:: r == ETIMEDOUT ->
					qlock_lock();
					if
					:: queued[id] ->
						/* dequeue_locked */
						wasHead = (q[0] == id);
						q_remove(id);
						if
						:: qlen == 0 && woken != 0 -> HANDOFF = 0
						:: qlen == 0 && woken == 0 -> HANDOFF = 0; WAITERS = 0
						:: qlen > 0 && wasHead -> HANDOFF = 0
						:: else
						fi;
						qlock_unlock();
						act = 2
					:: else ->
						qlock_unlock();
						wst[id] == WOKEN
					fi
				:: else
				fi;
				if
				:: act == 2
				:: else ->
					if
					:: result[id] == HANDED -> assert(owner == id); act = 1
					:: else ->
						assert(result[id] == COMPETE && woken == id);
						iswoken = 1;
						act = 0
					fi
				fi
			fi
		fi
	od
}

inline mutex_unlock()
{
	atomic {                     /* fast path: CAS id -> 0 */
		assert(owner == id);
#ifdef MUTANT_STORE_UNLOCK
		fast = !WAITERS && !HANDOFF
#else
		if
		:: !WAITERS && !HANDOFF -> owner = 0; fast = 1
		:: else -> fast = 0
		fi
#endif
	};
#ifdef MUTANT_STORE_UNLOCK
	if
	:: fast -> atomic { owner = 0; WAITERS = 0; HANDOFF = 0 }
	:: else
	fi;
#endif
	if
	:: !fast ->
		/* unlock_slow */
		qlock_lock();
		hsw = 0;
		wake = 0;
		if
		:: woken != 0 -> hsw = woken     /* the woken one is starving (I7) */
		:: true
		fi;
		if
		:: hsw == 0 && qlen > 0 ->
			if
			:: HANDOFF -> hsw = q[0]
			:: hsw = q[0]                /* the head is starving (I5) */
			:: !HANDOFF
			fi;
			if
			:: hsw != 0 -> q_remove(hsw); result[hsw] = HANDED; wake = 1
			:: else
			fi
		:: else
		fi;
		if
		:: hsw != 0 ->
			atomic {                 /* release store of the new word */
				owner = hsw;
				WAITERS = (qlen > 0 || woken != 0);
				if
				:: qlen > 0 -> HANDOFF = 1   /* next is starving too */
				:: HANDOFF = 0
				fi
			};
			qlock_unlock();
			if
			:: wake -> wst[hsw] = WOKEN  /* wft_waiter_wake_yield */
			:: else
			fi
		:: else ->
			sw = 0;
			if
			:: woken == 0 && qlen > 0 ->
				/* nobody spins, or the head may rotate (a free
				 * choice, like time) */
				if
				:: sw = q[0]
				:: qlen > 1 -> sw = q[1]
				:: qlen > 2 -> sw = q[2]
				fi;
				q_remove(sw);
				result[sw] = COMPETE;
				woken = sw
			:: woken == 0 && qlen > 0 && spinner != 0   /* I6: wake nobody */
			:: woken != 0 || qlen == 0
			fi;
			atomic { owner = 0; WAITERS = (qlen > 0 || woken != 0); HANDOFF = 0 };
			qlock_unlock();
			if
			:: sw != 0 -> wst[sw] = WOKEN
			:: else
			fi
		fi
	:: else
	fi
}

inline critical()
{
	atomic { incs++; assert(incs == 1 && owner == id) };
	incs--
}

proctype T(byte id; byte rounds; bit timed)
{
	bit iswoken, hv, sp, fast, wake, wasHead;
	byte act, r, ret, k, hsw, sw, n = 0;

	do
	:: n == rounds -> break
	:: else ->
		mutex_lock(timed, ret);
		if
		:: ret == 0 -> critical(); mutex_unlock()
		:: else
		fi;
		n++
	od
}

init {
	atomic {
		run T(1, 2, 0);
		run T(2, 2, 0);
		run T(3, 1, 1)
	}
	(_nr_pr == 1);
	assert(owner == 0 && !WAITERS && !HANDOFF && qlen == 0 && woken == 0 && qlock == 0)
}
