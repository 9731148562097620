/*
 * tests/models/preload_mutex.pml - the LD_PRELOAD mutex's lock word
 * (0 free, 1 locked, 2 locked and maybe sleepers, 3 HANDED: released to the
 * sleepers only) with the fair hand-off, the starving count, the timed
 * locker that gives up, and the condvar's relock of a waiter requeued onto
 * the lock word.
 *
 * Follows (update it with the code):
 *   sync/preload/mutex.c  mx_acquire (CAS 0 -> 1), mx_sleep (an arrival
 *                 that sees HANDED waits on it; a thread that has slept
 *                 takes it with xchg(2)), mx_note_wait / mx_uncount,
 *                 mx_give_up, mx_hand_off (CAS 2 -> HANDED, the re-read of
 *                 starving, the undo CAS HANDED -> 0), wp_mutex_unlock,
 *                 wp_mutex_relock; "Fair hand-off" in its header.
 *   sync/preload/cond.c   wp_cond_broadcast: FUTEX_CMP_REQUEUE moves a
 *                 cond waiter onto the lock word without touching it;
 *                 with MIXED also a waiter of another mutex (X), and the
 *                 broadcaster's wake of every sleeper on the word after.
 *   The futex: futex_wait compares the word and queues atomically, FIFO;
 *   wake 1 dequeues the oldest; a timed wait that times out, and any wait
 *   interrupted (EINTR, a spurious return), dequeues itself; a thread
 *   dequeued by a wake returns 0 even if its timer fired (the kernel's
 *   futex_wait does so).
 * Abstractions: the spinner is a second CAS 0 -> 1 and adds nothing (it
 * leaves a HANDED word alone, as the CAS does). "Waited 1 ms" is a free
 * choice at every mx_note_wait, a superset of any clock. Memory model:
 * spin's interleaving, i.e. sequential consistency. That is what the
 * seq_cst Dekker pair (the unlock's CAS and re-read, the leaver's
 * decrement and load) gives; the relaxed increment of starving may be seen
 * late, which is the same as counting later; the relaxed decrement of a
 * sleeper that took the lock reaches every later unlock through the lock
 * word's release/acquire chain, and an unlock that reads it stale only
 * wakes once more.
 * Not modelled: fork (core.c fork_child), ERRORCHECK / RECURSIVE.
 *
 * Threads: A locks and unlocks twice, untimed; B locks once with a
 * deadline (it may time out at each wait); C is a cond waiter that the
 * broadcaster requeues onto the lock word (or that leaves its wait on its
 * own: signal, timeout) and relocks; with -DMIXED, X is a waiter of
 * another mutex that the same requeue moved onto this word and that
 * leaves when woken, and the broadcaster then wakes every sleeper on it
 * (A locks once there, and check_models.sh runs it with -DNSPUR=0, which
 * keeps the search at 3 M states). NSPUR (default 1) spurious returns
 * from futex_wait happen in all, at any wait: a sleeper counts itself as
 * starving only after it was woken without the lock, and an unbounded
 * number would let every stranded sleeper leave and hide lost wakeups.
 *
 * Properties:
 *   - mutual exclusion (assert in the critical section);
 *   - no lost wakeup, no stuck HANDED: every thread finishes (a thread
 *     blocked for good is an invalid end state), and at the end the word
 *     is 0, starving is 0 and nobody is queued (the final check blocks
 *     otherwise, which is also an invalid end state): a HANDED word that
 *     nobody takes either blocks a later locker or is left at the end.
 *
 * Mutants (each must fail):
 *   MUTANT_NO_RECHECK     the unlock hands off on its first (relaxed) look
 *                         at starving and never re-reads it: the last
 *                         counted sleeper times out between the look and
 *                         the CAS, sees no HANDED, and leaves it to nobody.
 *   MUTANT_NO_GIVEUP_CHECK a counted sleeper whose wait times out uncounts
 *                         and leaves without looking for HANDED: an unlock
 *                         whose re-read came before the decrement hands
 *                         the lock to nobody.
 *   MUTANT_RELOCK_NO_HANDED the condvar relock treats HANDED as taken by
 *                         somebody else: it stores 2 over it and sleeps,
 *                         and the lock belongs to nobody.
 *   MUTANT_UNDO_NO_WAKE   the undo (HANDED -> 0) does not wake: it released
 *                         a 2, and the sleeper that stored it sleeps on.
 *   MUTANT_NO_MIXED_WAKE  (with MIXED) the broadcaster does not wake the
 *                         lock word after requeueing X onto it: X takes an
 *                         unlock's wake and leaves, and the lock's sleepers
 *                         sleep on (cond.c wp_cond_broadcast).
 */
#define NQ 4
#define FREE    0
#define LOCKED  1
#define CONTEND 2
#define HANDED  3
#define EAGAIN  11
#define EINTR   4
#define ETIMEDOUT 110

byte lock = FREE;            /* m->lock */
byte starving = 0;           /* m->starving */

/* the futex queue of the lock word, FIFO of thread ids (1..NQ) */
byte fq[NQ];
byte fqlen = 0;
bit  inq[NQ + 1];

/* spurious returns (EINTR, a stray wake) left to happen: any finite number
 * is possible; an unbounded one would hide every lost wakeup */
#ifndef NSPUR
#define NSPUR 1
#endif
byte spur = NSPUR;

byte incs = 0;               /* threads in the critical section */
byte ndone = 0;
bit  onseq[NQ + 1];          /* asleep on the cond's word */
bit  moved[NQ + 1];          /* moved onto the lock word by the requeue */

inline q_remove(x)
{
	k = 0;
	do
	:: fq[k] == x -> break
	:: else -> k++
	od;
	do
	:: k + 1 < fqlen -> fq[k] = fq[k + 1]; k++
	:: else -> break
	od;
	fqlen--;
	fq[fqlen] = 0;
	inq[x] = 0;
	k = 0
}

inline q_push(x) { fq[fqlen] = x; fqlen++; inq[x] = 1 }

/* FUTEX_WAKE 1: the oldest sleeper */
inline futex_wake1()
{
	atomic {
		if
		:: fqlen > 0 -> x = fq[0]; q_remove(x); x = 0
		:: else
		fi
	}
}

/* FUTEX_WAIT(val): r = 0 (woken, or spurious), EAGAIN, EINTR, ETIMEDOUT */
inline futex_wait(val, timed, r)
{
	atomic {
		if
		:: lock == val -> q_push(me); r = 0
		:: else -> r = EAGAIN
		fi
	};
	if
	:: r == 0 ->
		if
		:: atomic { !inq[me] -> r = 0 }
		:: atomic { timed && inq[me] -> q_remove(me); r = ETIMEDOUT }
		:: atomic { inq[me] && spur > 0 -> q_remove(me); r = EINTR; spur-- }
		fi
	:: else
	fi
}

/* mx_give_up: ret = 0 (took a HANDED word) or ETIMEDOUT */
inline give_up(ret)
{
	if
	:: counted ->
		atomic { starving--; counted = 0 };     /* seq_cst */
#ifdef MUTANT_NO_GIVEUP_CHECK
		ret = ETIMEDOUT
#else
		atomic {                                 /* seq_cst load + CAS */
			if
			:: lock == HANDED -> lock = CONTEND; ret = 0
			:: else -> ret = ETIMEDOUT
			fi
		}
#endif
	:: else -> ret = ETIMEDOUT
	fi
}

/* mx_acquire + mx_sleep: ret = 0 (owner) or ETIMEDOUT */
inline mutex_lock(timed, ret)
{
	atomic {                                         /* fast path, spinner */
		if
		:: lock == FREE -> lock = LOCKED; ret = 0
		:: else -> ret = 1
		fi
	};
	if
	:: ret == 0
	:: else ->
		slept = 0;
		do
		:: v = lock;                             /* relaxed look */
		   if
		   :: v != HANDED || slept ->
			atomic { v = lock; lock = CONTEND };
			if
			:: v == FREE || v == HANDED -> ret = 0; break
			:: else
			fi
		   :: else
		   fi;
		   /* mx_note_wait: after a wait, 1 ms may have passed */
		   if
		   :: slept && !counted -> atomic { starving++; counted = 1 }
		   :: true
		   fi;
		   slept = 1;
		   if
		   :: v == HANDED -> futex_wait(HANDED, timed, r)
		   :: else -> futex_wait(CONTEND, timed, r)
		   fi;
		   if
		   :: r == ETIMEDOUT -> give_up(ret); break
		   :: else
		   fi
		od;
		if
		:: ret == 0 && counted -> atomic { starving--; counted = 0 }
		:: else
		fi
	fi;
	v = 0; r = 0; slept = 0
}

/* wp_mutex_relock (after a condvar wait) */
inline mutex_relock()
{
	do
	:: atomic { v = lock; lock = CONTEND };
	   if
#ifdef MUTANT_RELOCK_NO_HANDED
	   :: v == FREE -> break
#else
	   :: v == FREE || v == HANDED -> break
#endif
	   :: else -> futex_wait(CONTEND, 0, r)
	   fi
	od;
	v = 0; r = 0
}

/* wp_mutex_unlock with mx_hand_off */
inline mutex_unlock()
{
	handed = 0;
	if
	:: starving != 0 ->                              /* relaxed hint */
		atomic {                                 /* seq_cst CAS 2 -> HANDED */
			if
			:: lock == CONTEND -> lock = HANDED; handed = 1
			:: else
			fi
		};
		if
		:: handed ->
#ifdef MUTANT_NO_RECHECK
			futex_wake1()
#else
			if
			:: starving == 0 ->              /* seq_cst re-read */
				atomic {                 /* undo: CAS HANDED -> 0 */
					if
					:: lock == HANDED -> lock = FREE; v = 1
					:: else -> v = 0
					fi
				};
#ifdef MUTANT_UNDO_NO_WAKE
				skip
#else
				if
				:: v -> futex_wake1()
				:: else                  /* taken: the taker owns it */
				fi
#endif
			:: else -> futex_wake1()
			fi
#endif
		:: else
		fi
	:: else
	fi;
	if
	:: !handed ->
		atomic { v = lock; lock = FREE };        /* release xchg(0) */
		if
		:: v == CONTEND -> futex_wake1()
		:: else
		fi
	:: else
	fi;
	v = 0; handed = 0
}

inline critical()
{
	atomic { incs++; assert(incs == 1 && lock != FREE && lock != HANDED) };
	incs--
}

proctype Locker(byte me; byte rounds; bit timed)
{
	bit slept, counted, handed;
	byte v, r, ret, k, x, n = 0;

	do
	:: n == rounds -> break
	:: else ->
		mutex_lock(timed, ret);
		if
		:: ret == 0 -> critical(); mutex_unlock()
		:: else
		fi;
		n++
	od;
	assert(!counted);
	ndone++
}

/* a cond waiter: asleep on the cond's word (onseq) until it leaves on
 * its own (a signal's wake, its deadline, EINTR) or the broadcast moves it
 * onto the lock word; then the relock */
proctype CondWaiter(byte me)
{
	bit handed;
	byte v, r, k, x;

	if
	:: atomic { onseq[me] -> onseq[me] = 0 }
	:: atomic { moved[me] } ->
		if
		:: atomic { !inq[me] }                    /* woken on the lock word */
		:: atomic { inq[me] -> q_remove(me) }    /* its deadline, EINTR */
		fi
	fi;
	mutex_relock();
	critical();
	mutex_unlock();
	ndone++
}

#ifdef MIXED
/* a waiter of another mutex, moved onto this word by the same requeue:
 * leaves when woken (it relocks its own mutex) */
proctype Other(byte me)
{
	byte k;

	if
	:: atomic { onseq[me] -> onseq[me] = 0 }
	:: atomic { moved[me] } ->
		if
		:: atomic { !inq[me] }
		:: atomic { inq[me] -> q_remove(me) }
		fi
	fi;
	ndone++
}
#endif

/* wp_cond_broadcast: FUTEX_CMP_REQUEUE moves the cond's sleepers, in their
 * order, to the end of the lock word's queue (the one it wakes is a
 * sleeper that leaves on its own, above); with MIXED, the broadcaster's
 * second flags load sees the MIXED that a moved X set, and it then wakes
 * every sleeper on the lock word (it may or may not see it otherwise) */
inline requeue(i)
{
	if
	:: onseq[i] -> onseq[i] = 0; moved[i] = 1; q_push(i)
	:: else
	fi
}

proctype Broadcaster()
{
	byte k, x;

	atomic {
#ifdef MIXED
		if
		:: true -> requeue(3); requeue(4)
		:: true -> requeue(4); requeue(3)
		fi
#else
		requeue(3)
#endif
	};
#ifdef MIXED
#ifdef MUTANT_NO_MIXED_WAKE
	goto bdone;
#endif
	if
	:: moved[4]
	:: !moved[4]                                 /* may see MIXED or not */
	:: !moved[4] -> goto bdone
	fi;
	do
	:: atomic { fqlen > 0 -> x = fq[0]; q_remove(x); x = 0 }
	:: atomic { fqlen == 0 -> break }
	od;
bdone:
#endif
	ndone++
}

#ifdef MIXED
#define NPROC 5
#else
#define NPROC 4
#endif

init {
	onseq[3] = 1;
#ifdef MIXED
	onseq[4] = 1;
#endif
	atomic {
#ifdef MIXED
		run Locker(1, 1, 0);
#else
		run Locker(1, 2, 0);
#endif
		run Locker(2, 1, 1);
		run CondWaiter(3);
#ifdef MIXED
		run Other(4);
#endif
		run Broadcaster()
	}
	/* blocks (an invalid end state) if the lock is left HANDED or held,
	 * or anyone sleeps on */
	atomic { ndone == NPROC && lock == FREE && starving == 0 && fqlen == 0 && incs == 0 }
}
