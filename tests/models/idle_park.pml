/*
 * tests/models/idle_park.pml - the park/kick protocol of an idle worker.
 *
 * Follows (update it with runtime/idle.c; the burst's kick chain is
 * kick_chain.pml):
 *   runtime/idle.c   wft_idle_run from the label `park:` to `cancel:`
 *                    (announce: atomic_exchange sleep = SLEEPING seq_cst
 *                    and the seq_cst fence; re-check the mailbox head;
 *                    futex_wait(sleep, SLEEPING); exchange sleep = AWAKE),
 *                    wft_idle_kick (seq_cst load of sleep, CAS SLEEPING ->
 *                    KICKED, futex_wake), and "Park (the lost-wakeup
 *                    argument)" in its header comment;
 *   runtime/wake.c   wft_wake_push (MAILBOX on: push, then kick
 *                    only when the mailbox was empty);
 *   runtime/mailbox.c wft_mailbox_push_chain (seq_cst CAS; returns
 *                    old == NULL). The mailbox is a counter here; its list
 *                    is mailbox.pml's subject.
 * Not modelled: the steal and spin phases (they only return earlier), the
 * idle tick and timer deadlines (a timed sleep only hides a lost wakeup
 * as a late one, so the worker here sleeps for good), wake_one's claim of
 * the idle bit (idle_claim.pml), io_uring (its wait plays futex_wait's
 * role).
 *
 * Memory model: sequential consistency for seq_cst operations; in
 * MUTANT_NO_FENCE the announcement is a plain store into the worker's
 * store buffer (TSO), which is what the exchange + fence forbid.
 *
 * Property: no lost wakeup. The worker stops only when it has taken every
 * pushed thread; a worker asleep in futex_wait with a thread in its
 * mailbox and no waker left is an invalid end state.
 *
 * Mutants (each must fail):
 *   MUTANT_NO_FENCE    announcement as a plain store (no seq_cst exchange,
 *                      no fence): the re-check load passes the store.
 *   MUTANT_NO_RECHECK  no re-check of the mailbox after the announcement.
 */
#define AWAKE    0
#define SLEEPING 1
#define KICKED   2

#define NPUSH 2              /* pushers, one thread each */

byte sleep = AWAKE;          /* w->sleep in memory */
byte mbox = 0;               /* threads in w's mailbox */
byte taken = 0;
bit  in_futex = 0;           /* the worker sleeps in futex_wait */
bit  sb_valid = 0;           /* the worker's store buffer (mutant) */
byte sb_val;

/* the worker's own RMW or syscall: drains its store buffer first */
inline sb_drain()
{
	if
	:: sb_valid -> sleep = sb_val; sb_valid = 0
	:: else
	fi
}

proctype Worker()
{
	byte s;

	do
	:: taken == NPUSH -> break
	:: else ->
		/* the scheduler loop drains the mailbox (take_all) */
		atomic { taken = taken + mbox; mbox = 0 };
		if
		:: taken == NPUSH -> break
		:: else
		fi;
		/* park: announce */
#ifdef MUTANT_NO_FENCE
		atomic { sb_val = SLEEPING; sb_valid = 1 };
#else
		atomic { sb_drain(); sleep = SLEEPING };   /* xchg seq_cst + fence */
#endif
		/* re-check (seq_cst load of the mailbox head) */
#ifndef MUTANT_NO_RECHECK
		if
		:: mbox > 0 -> goto cancel
		:: else
		fi;
#endif
		/* futex_wait(&w->sleep, SLEEPING): the kernel compares the word
		 * and queues us atomically (the syscall drains the buffer) */
		atomic {
			sb_drain();
			if
			:: sleep == SLEEPING -> in_futex = 1
			:: else
			fi
		};
		in_futex == 0;       /* until a futex_wake */
cancel:
		/* exchange sleep = AWAKE (seq_cst RMW of our own word) */
		atomic { sb_drain(); sleep = AWAKE }
	od;
	assert(taken == NPUSH && mbox == 0)
}

proctype Pusher()
{
	bit was_empty;
	byte s;

	/* mailbox push: CAS head (seq_cst), returns old == NULL */
	atomic { was_empty = (mbox == 0); mbox++ };
	if
	:: was_empty ->
		/* wft_idle_kick: seq_cst load, CAS SLEEPING -> KICKED, wake */
		s = sleep;
		if
		:: s == SLEEPING ->
			atomic {
				if
				:: sleep == SLEEPING -> sleep = KICKED; s = KICKED
				:: else
				fi
			};
			if
			:: s == KICKED -> in_futex = 0    /* futex_wake(&w->sleep, 1) */
			:: else
			fi
		:: else
		fi
	:: else
	fi
}

/* The worker's store buffer drains at any time (MUTANT_NO_FENCE). */
proctype StoreBuffer()
{
end_sb:
	do
	:: atomic { sb_valid -> sleep = sb_val; sb_valid = 0 }
	od
}

init {
	atomic {
		run Worker();
		run Pusher();
		run Pusher();
		run StoreBuffer()
	}
}
