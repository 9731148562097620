/*
 * tests/models/mutex_store.pml - the mutex's store mode ("Unlock mode" in
 * sync/mutex.c): the unlock mode word m->calm, the switch to store mode
 * (go_fast), the plain-store unlock, the waiter that finds store mode and
 * polls after asking the next owner to leave it (FAST -> FAST_LEAVE), the
 * owners that leave it, and (with -DCOND) the cond's wait morphing by a
 * signaller that owns the mutex or not (WFT_SW_RELOCK).
 *
 * Follows (update it with the code):
 *   sync/mutex.c  wft_mutex_unlock_id (load calm, load the word; FAST and
 *                 the word == id: release store 0; FAST_LEAVE: store calm
 *                 0, then the release CAS; CAS mode: count or go_fast,
 *                 then the release CAS), go_fast (under qlock: queue
 *                 empty, nobody woken or polling, the word == id ->
 *                 FAST), lock_slow
 *                 and queue_locked (under qlock: the word, then calm; store
 *                 mode -> CAS FAST -> FAST_LEAVE and poll; else the
 *                 WAITERS CAS; the first poll counts the waiter in
 *                 m->pollers; lock_slow: a waiter that polled stores calm
 *                 0 if it got m ("got"), and is uncounted),
 *                 unlock_slow (calm 0, then the hand-off or the COMPETE
 *                 wake), requeue_fast_locked and wft_mutex_requeue,
 *                 wft_mutex_relock.
 *   sync/cond.c   wait_common (queue on the cond, unlock m, park, relock),
 *                 signal_common (claim, requeue under both slocks, wake
 *                 after them).
 * Abstractions: the count of calm unlocks is "CAS mode"; a calm unlock in
 * CAS mode may call go_fast at any time (a superset of every 4,096th).
 * Time is a free choice (hand-offs, the timed waiter's deadline, poll
 * back-off). HANDOFF, the spinner (and so I6's skipped wake) and owner
 * death are left out: none sets a flag in store mode, and mutex.pml covers
 * them in CAS mode. Memory
 * model: sequential consistency (spin's interleaving); the relaxed loads
 * of calm and of the word in the unlock are separate steps from its store
 * or CAS, which is where a flag could slip in.
 *
 * Threads: without COND, A locks and unlocks ROUNDS_A (2) times (it is the one
 * whose calm unlocks switch m), B once with no deadline, C once with a
 * deadline. With COND: A locks and unlocks twice, W waits on the cond
 * once, S signals it (holding m or not, a free choice) once W is queued.
 * m starts in CAS mode or in store mode (a free choice).
 *
 * Properties:
 *   - mutual exclusion (assert in the critical section);
 *   - the plain-store unlock never erases a flag (assert at the store);
 *   - WFT_ASSERT(!woken) in queue_locked: m's woken waiter never finds
 *     store mode;
 *   - a request to leave store mode is honoured: after a waiter's FAST ->
 *     FAST_LEAVE, at most one more unlock (by the owner that read FAST
 *     before the request) releases by a plain store;
 *   - and it sticks: once an owner has left store mode after a poller
 *     asked, that poller does not find store mode again before it queues,
 *     gets the lock or gives up (go_fast waits for m->pollers to be 0);
 *   - no lost wakeup: every thread finishes (a parked thread left parked
 *     for good is an invalid end state), and at the end the word is 0, the
 *     queue empty, nobody woken, qlock free.
 *
 * Mutants (each must fail; check_models.sh runs them):
 *   MUTANT_QUEUE_IN_STORE  queue_locked ignores store mode and queues: the
 *                          owner's plain store erases its WAITERS (with
 *                          -DNO_ERASE_ASSERT -DNO_I1_ASSERT: the lost
 *                          wakeup itself, an invalid end state). The
 *                          behaviour tests do not catch this one.
 *   MUTANT_WAITER_LEAVES   the waiter takes m out of store mode itself
 *                          (calm = 0 under qlock) and queues: an owner
 *                          that read FAST before still stores 0.
 *   MUTANT_GO_FAST_NO_QLOCK go_fast decides and writes FAST without qlock:
 *                          a waiter that read CAS mode under qlock sets
 *                          WAITERS on the next owner, which stores.
 *   MUTANT_LEAVE_IGNORED   the unlock that reads FAST_LEAVE releases by a
 *                          store as for FAST: the request is not honoured.
 *   MUTANT_GO_FAST_NO_POLLERS go_fast does not look at m->pollers: the
 *                          owner's calm unlocks after the leave switch m
 *                          back to store mode before the poller looks
 *                          again, and it polls again instead of queueing
 *                          (passed over once per 4,096 unlocks).
 *   MUTANT_LEAVE_LATE      that unlock releases (CAS) first and stores calm
 *                          0 after: a store by a non-owner, which can land
 *                          after the next owner's go_fast and take calm out
 *                          of store mode under a store-mode owner (and in
 *                          the C code it touches m after its release).
 *   MUTANT_REQUEUE_NONOWNER (COND) a signaller that does not own m queues
 *                          the waiter on m in store mode (sets WAITERS).
 *
 * Two checks of the code are belt and braces, not safety (each mutant
 * verifies, so none is listed above): go_fast's tests of the queue and of
 * m->woken (the unlock calls it only after finding the word == id, no
 * flag; a waiter that queues in between sets WAITERS, so the release CAS
 * fails and unlock_slow stores calm 0 before it wakes anyone; m->woken is
 * set only with a flag or by unlock_slow), and the owning signaller's
 * calm = 0 before it requeues (the WAITERS it sets makes its own unlock
 * take unlock_slow, which leaves store mode; no other owner can store
 * meanwhile). They keep the mode and the flags simple to reason about.
 */
#define NTH 3
#ifndef ROUNDS_A
#define ROUNDS_A 2              /* A's rounds without COND */
#endif
#define NONE    0
#define HANDED  1
#define COMPETE 2
#define RELOCK  3
#define WAITING 0
#define WOKEN   1
#define ETIMEDOUT 110

/* m->calm, abstracted */
#define CASM  0                 /* a count: CAS mode */
#define FAST  1                 /* WFT_MUTEX_FAST */
#define LEAVE 2                 /* WFT_MUTEX_FAST_LEAVE */

/* m->state, split into its fields; every RMW of the word is one atomic */
byte owner = 0;
bit  WAITERS = 0;
byte calm = CASM;

byte qlock = 0;              /* m->qlock (holder id) */
byte q[NTH];                 /* m->q: FIFO of thread ids */
byte qlen = 0;
byte woken = 0;              /* m->woken */
byte pollers = 0;            /* m->pollers */

bit  queued[NTH + 1];
bit  wst[NTH + 1];           /* sw.w.state */
byte result[NTH + 1];        /* sw.w.result */
byte incs = 0;

/* ghost: a waiter's request to leave store mode is pending (req), and
 * the plain-store unlocks made since it (nst); a poller that has asked
 * (asked[]) and whose request an owner has served since (served[]) */
bit  req = 0;
byte nst = 0;
bit  asked[NTH + 1];
bit  served[NTH + 1];

#ifdef COND
byte cq = 0;                 /* the cond's queue: W's record, or 0 */
#endif

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

/* an owner takes m out of store mode (or counts from 0): every request
 * so far is served */
inline calm_leave()
{
	atomic {
		calm = CASM;
		req = 0;
		served[1] = asked[1]; served[2] = asked[2]; served[3] = asked[3]
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
	:: qlen == 0 -> WAITERS = 0
	:: else
	fi
}

/* lock_common + lock_slow (iswoken: relock as m's woken waiter, no fast
 * path). ret = 0 (owner) or ETIMEDOUT. */
inline mutex_lock(timed, ret)
{
	polled = 0;
	act = 0;
	if
	:: !iswoken ->
		atomic {             /* fast path: CAS 0 -> id */
			if
			:: owner == 0 && !WAITERS -> owner = id; act = 1
			:: else
			fi
		}
	:: else
	fi;
	do
	:: act == 1 ->
		/* lock_slow: having polled, leave store mode ("got") and stop
		 * being counted */
		if
		:: polled -> calm_leave(); pollers--
		:: else
		fi;
		asked[id] = 0; served[id] = 0;
		ret = 0;
		break
	:: act == 2 ->
		if
		:: polled -> pollers--
		:: else
		fi;
		asked[id] = 0; served[id] = 0;
		ret = ETIMEDOUT;
		break
	:: act == 0 ->
		/* 1. take it while free, or find it handed to us (I7); a
		 * spinner's take is the same CAS */
		atomic {
			if
			:: iswoken && owner == id -> act = 3
			:: owner == 0 -> owner = id; act = 3
			:: else
			fi
		};
		if
		:: act == 3 ->
			if
			:: iswoken -> qlock_lock(); unwoken(); iswoken = 0; qlock_unlock()
			:: else
			fi;
			act = 1
		:: else ->
			/* 3. queue_locked */
			queued[id] = 0;
			wst[id] = WAITING;
			result[id] = NONE;
			qlock_lock();
			do
			:: atomic {       /* load the word; owner 0: CAS it */
				if
				:: iswoken && owner == id -> act = 4
				:: owner == 0 -> owner = id; act = 4
				:: owner != 0 && !(iswoken && owner == id) && timed -> act = 6
				:: owner != 0 && !(iswoken && owner == id) ->
					vo = owner; vw = WAITERS
				fi
			   };
				if
				:: act != 0 -> break
				:: else
				fi;
				/* the mode, under qlock */
				atomic {
					c = calm;
#ifndef MUTANT_QUEUE_IN_STORE
#ifndef MUTANT_WAITER_LEAVES
					if
					:: c != CASM ->
						assert(!iswoken);   /* WFT_ASSERT(!woken) */
						/* once an owner has left store mode
						 * at our request, we never find it
						 * again before we queue or return */
						assert(!served[id]);
						if
						:: c == FAST -> calm = LEAVE; req = 1; nst = 0
						:: else
						fi;
						asked[id] = 1;
						act = 8
					:: else
					fi
#endif
#endif
				};
#ifdef MUTANT_WAITER_LEAVES
				if
				:: c != CASM -> calm_leave()
				:: else
				fi;
#endif
				if
				:: act == 8 -> break
				:: else
				fi;
				atomic {         /* the WAITERS CAS */
					if
					:: owner == vo && WAITERS == vw -> WAITERS = 1; act = 7
					:: else
					fi
				};
				if
				:: act == 7 -> asked[id] = 0; served[id] = 0; break
				:: else
				fi
			od;
			if
			:: act == 4 ->
				if
				:: iswoken -> unwoken(); iswoken = 0
				:: else
				fi;
				qlock_unlock();
				act = 1
			:: act == 6 ->
				if
				:: iswoken -> unwoken(); iswoken = 0
				:: else
				fi;
				qlock_unlock();
				act = 2
			:: act == 8 ->
				/* Q_POLL: counted in pollers under qlock; poll_wait,
				 * then from step 1 again */
				if
				:: !polled -> pollers++; polled = 1
				:: else
				fi;
				qlock_unlock();
				if
				:: timed -> act = 2
				:: true -> act = 0
				fi
			:: act == 7 ->
				if
				:: iswoken -> woken = 0; iswoken = 0; q_push_front(id)
				:: else -> q_push_back(id)
				fi;
				qlock_unlock();
				/* park_queued */
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
						q_remove(id);
						if
						:: qlen == 0 && woken == 0 -> WAITERS = 0
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
				:: result[id] == HANDED -> assert(owner == id); act = 1
				:: else ->
					assert(result[id] == COMPETE && woken == id);
					iswoken = 1;
					act = 0
				fi
			fi
		fi
	od
}

/* go_fast: under qlock, store mode if nobody waits and no flag is set */
inline go_fast()
{
#ifdef MUTANT_GO_FAST_NO_QLOCK
	atomic { ok = (qlen == 0 && woken == 0 && pollers == 0 && owner == id && !WAITERS) };
	if
	:: ok -> calm = FAST
	:: else -> calm_leave()
	fi
#else
	qlock_lock();
	atomic {
		if
#ifndef MUTANT_GO_FAST_NO_POLLERS
		:: qlen == 0 && woken == 0 && pollers == 0 && owner == id && !WAITERS -> calm = FAST
#else
		:: qlen == 0 && woken == 0 && owner == id && !WAITERS -> calm = FAST
#endif
		:: else -> calm = CASM; req = 0
		fi
	};
	qlock_unlock()
#endif
}

inline unlock_slow()
{
	calm_leave();                /* someone waits: count from 0 */
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
		:: hsw = q[0]                /* the head is starving (I5) */
		:: true
		fi;
		if
		:: hsw != 0 -> q_remove(hsw); result[hsw] = HANDED; wake = 1
		:: else
		fi
	:: else
	fi;
	if
	:: hsw != 0 ->
		atomic { owner = hsw; WAITERS = (qlen > 0 || woken != 0) };
		qlock_unlock();
		if
		:: wake -> wst[hsw] = WOKEN
		:: else
		fi
	:: else ->
		sw = 0;
		if
		:: woken == 0 && qlen > 0 ->
			if
			:: sw = q[0]
			:: qlen > 1 -> sw = q[1]
			fi;
			q_remove(sw);
			result[sw] = COMPETE;
			woken = sw
		:: woken != 0 || qlen == 0
		fi;
		atomic { owner = 0; WAITERS = (qlen > 0 || woken != 0) };
		qlock_unlock();
		if
		:: sw != 0 -> wst[sw] = WOKEN
		:: else
		fi
	fi
}

/* wft_mutex_unlock_id */
inline mutex_unlock()
{
	c = calm;                    /* relaxed load of calm */
	atomic { assert(owner == id); vw = WAITERS };   /* load of the word */
	fast = 0;
#ifdef MUTANT_LEAVE_IGNORED
	if
	:: !vw && c != CASM ->
#else
	if
	:: !vw && c == FAST ->
#endif
		atomic {             /* release store 0 */
#ifndef NO_ERASE_ASSERT
			assert(!WAITERS);
#endif
			if
			:: req -> nst++; assert(nst <= 1)
			:: else
			fi;
			owner = 0;
			WAITERS = 0
		};
		fast = 1
	:: !vw && c == LEAVE ->
#ifndef MUTANT_LEAVE_LATE
		calm_leave();
#endif
		atomic {
			if
			:: !WAITERS -> owner = 0; fast = 1
			:: else
			fi
		};
#ifdef MUTANT_LEAVE_LATE
		if
		:: fast -> calm_leave()
		:: else
		fi;
#endif
	:: !vw && c == CASM ->
		if
		:: true                  /* count */
		:: go_fast()             /* the 4,096th calm unlock */
		fi;
		atomic {             /* release CAS id -> 0 */
			if
			:: !WAITERS -> owner = 0; fast = 1
			:: else
			fi
		}
	:: vw
	fi;
	if
	:: !fast -> unlock_slow()
	:: else
	fi
}

inline critical()
{
	atomic { incs++; assert(incs == 1 && owner == id) };
	incs--
}

/* A thread that locks and unlocks `rounds` times. */
proctype T(byte id; byte rounds; bit timed)
{
	bit iswoken, fast, wake, polled, vw, ok;
	byte act, r, ret, k, hsw, sw, vo, c, n = 0;

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

#ifdef COND
/* The cond waiter: lock; queue on the cond; unlock; park; relock. */
proctype W(byte id)
{
	bit iswoken, fast, wake, polled, vw, ok;
	byte act, r, ret, k, hsw, sw, vo, c;

	mutex_lock(0, ret);
	wst[id] = WAITING;
	result[id] = NONE;
	cq = id;                     /* under c->qlock, while holding m */
	mutex_unlock();
	wst[id] == WOKEN;
	if
	:: result[id] == HANDED -> assert(owner == id)
	:: result[id] == RELOCK -> mutex_lock(0, ret)       /* lock afresh */
	:: result[id] == COMPETE -> iswoken = 1; mutex_lock(0, ret)
	fi;
	critical();
	mutex_unlock()
}

/* The signaller: once W is queued, signal with or without holding m. */
proctype S(byte id)
{
	bit iswoken, fast, wake, polled, vw, ok, hold, rel, made;
	byte act, r, ret, k, hsw, sw, vo, c, x;

	cq != 0;
	if
	:: hold = 1; mutex_lock(0, ret)
	:: hold = 0
	fi;
	atomic { x = cq; cq = 0 };   /* claim, under c->qlock */
	/* wft_mutex_requeue, under c->qlock */
	qlock_lock();
	rel = 0;
	/* requeue_fast_locked */
	atomic {
		if
		:: calm != CASM && owner == id ->
			calm = CASM; req = 0
		:: calm != CASM && owner != id ->
#ifndef MUTANT_REQUEUE_NONOWNER
			rel = 1
#else
			skip
#endif
		:: else
		fi
	};
	if
	:: rel ->
		result[x] = RELOCK
	:: else ->
		made = 0;
		do
		:: atomic { vo = owner; vw = WAITERS };
			if
			:: vo == 0 && woken == 0 && !made ->
				result[x] = COMPETE; woken = x; made = 1
			:: else
			fi;
			atomic {
				if
				:: owner == vo && WAITERS == vw -> WAITERS = 1; ok = 1
				:: else -> ok = 0
				fi
			};
			if
			:: ok -> break
			:: else
			fi
		od;
		if
		:: !made -> q_push_back(x)
		:: else
		fi
	fi;
	qlock_unlock();              /* (and c->qlock) */
	if
	:: rel || made -> wst[x] = WOKEN     /* the wake queue's flush */
	:: else
	fi;
	if
	:: hold -> critical(); mutex_unlock()
	:: else
	fi
}
#endif

init {
	atomic {
		if
		:: calm = CASM
		:: calm = FAST
		fi;
#ifdef COND
		run T(1, 2, 0);
		run W(2);
		run S(3)
#else
		run T(1, ROUNDS_A, 0);
		run T(2, 1, 0);
		run T(3, 1, 1)
#endif
	}
	(_nr_pr == 1);
	assert(owner == 0 && !WAITERS && qlen == 0 && woken == 0 && qlock == 0 && pollers == 0)
}
