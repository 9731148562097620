/*
 * tests/models/kick_chain.pml - one wake syscall per burst: the kick chain.
 *
 * Follows:
 *   runtime/wake.c   wft_wake_push_burst (push; the first target whose
 *                    mailbox was empty is the burst's head, kicked at the
 *                    end; another one that sleeps gets a pending bit) and
 *                    wft_wake_burst_end (kick the head; if it was AWAKE,
 *                    run one chain step with fanout 1 itself);
 *   runtime/idle.c   "Kick chain": wft_idle_kick_defer (seq_cst fetch_or
 *                    of the bit), kick_take (seq_cst CAS clears one bit),
 *                    wft_idle_kick_chain (kick taken bits until `runners`
 *                    kicks were sent or found underway; AWAKE targets
 *                    start nobody), wft_idle_kick_r (seq_cst load, CAS
 *                    SLEEPING -> KICKED, futex wake), and the park path
 *                    from the announcement to `cancel:` (seq_cst exchange
 *                    to AWAKE, then the chain step with fanout 2).
 * The direct kicks of wake.c (KICK_BURST_DIRECT) are the ordinary
 * push-then-kick of idle_park.pml and are left out: every non-head target
 * here is deferred, the chain's hardest case.
 *
 * Set-up: three workers. Worker 0 is either parked or busy (AWAKE, never
 * parks again: a busy worker owes no chain step); workers 1 and 2 are
 * parked. Waker A bursts over workers 0, 1, 2; waker B over 2 and 1, at
 * the same time. Each worker stops once it has taken all the mail meant
 * for it.
 *
 * Memory model: sequential consistency (every operation involved is
 * seq_cst in the code).
 *
 * Property: no lost wakeup. A worker asleep in futex_wait with mail and
 * nobody left to kick it is an invalid end state (the sleeps have no
 * end label).
 *
 * Mutants (each must fail):
 *   MUTANT_NO_SETTER_STEP  the waker does not run a chain step when its
 *                          head is AWAKE: its bits wait for a step that
 *                          may never come.
 *   MUTANT_STEP_BEFORE_AWAKE  a waking worker runs its chain step before
 *                          it stores AWAKE: a setter that saw it KICKED
 *                          counts on a step that has already looked.
 */
#define AWAKE    0
#define SLEEPING 1
#define KICKED   2

#define NW 3
#define FANOUT 2

byte sleep[NW];
bit  in_futex[NW];
byte mbox[NW];
byte want[NW];               /* mail each worker is to get */
byte pending = 0;            /* rt.kick_pending, one bit per worker */

/* wft_idle_kick_r(j) into r: 0 sent, 1 underway (KICKED), 2 awake */
inline kick_r(j, r)
{
	if
	:: sleep[j] == AWAKE -> r = 2
	:: sleep[j] == KICKED -> r = 1
	:: sleep[j] == SLEEPING ->
		atomic {
			if
			:: sleep[j] == SLEEPING -> sleep[j] = KICKED; r = 0
			:: sleep[j] == AWAKE -> r = 2
			:: sleep[j] == KICKED -> r = 1
			fi
		};
		if
		:: r == 0 -> in_futex[j] = 0       /* futex_wake */
		:: else
		fi
	fi
}

/* wft_idle_kick_chain(runners) */
inline chain_step(runners, b, r)
{
	do
	:: runners == 0 -> break
	:: else ->
		/* kick_take: CAS one set bit clear, or -1 */
		atomic {
			if
			:: pending & 1 -> pending = pending & 6; b = 0
			:: pending & 2 -> pending = pending & 5; b = 1
			:: pending & 4 -> pending = pending & 3; b = 2
			:: else -> b = 255
			fi
		};
		if
		:: b == 255 -> break
		:: else
		fi;
		kick_r(b, r);
		if
		:: r != 2 -> runners--
		:: else
		fi
	od
}

proctype Worker(byte i; bit busy)
{
	byte got = 0, runners, b, r;

	if
	:: busy -> goto drain
	:: else -> goto sleeping
	fi;
drain:
	/* the scheduler loop drains the mailbox */
	atomic { got = got + mbox[i]; mbox[i] = 0 };
	if
	:: got == want[i] -> goto done
	:: busy -> goto drain          /* a busy worker never parks */
	:: else
	fi;
	/* park: announce (xchg seq_cst + fence), re-check the mailbox */
	sleep[i] = SLEEPING;
	if
	:: mbox[i] > 0 -> goto cancel
	:: else
	fi;
	/* futex_wait(&sleep, SLEEPING): compare and queue atomically */
	atomic {
		if
		:: sleep[i] == SLEEPING -> in_futex[i] = 1
		:: else
		fi
	};
sleeping:
	in_futex[i] == 0;
cancel:
#ifdef MUTANT_STEP_BEFORE_AWAKE
	runners = FANOUT;
	chain_step(runners, b, r);
	sleep[i] = AWAKE;
#else
	sleep[i] = AWAKE;            /* seq_cst exchange */
	runners = FANOUT;
	chain_step(runners, b, r);
#endif
	goto drain;
done:
	skip
}

/* One burst over the targets t0, t1, t2 (255: none). */
proctype Waker(byte t0; byte t1; byte t2)
{
	byte head = 255, k, j, r, runners, b;
	bit was_empty;

	k = 0;
	do
	:: k == 3 -> break
	:: else ->
		if
		:: k == 0 -> j = t0
		:: k == 1 -> j = t1
		:: k == 2 -> j = t2
		fi;
		k++;
		if
		:: j == 255 -> skip
		:: else ->
			/* mailbox push (seq_cst CAS): was it empty? */
			atomic { was_empty = (mbox[j] == 0); mbox[j]++ };
			if
			:: was_empty && head == 255 -> head = j
			:: was_empty && head != 255 ->
				if
				:: sleep[j] == SLEEPING ->
					/* wft_idle_kick_defer: fetch_or */
					atomic { pending = pending | (1 << j) }
				:: else    /* AWAKE: it re-checks; KICKED: underway */
				fi
			:: else        /* not empty: its pusher answers for it */
			fi
		fi
	od;
	/* wft_wake_burst_end */
	if
	:: head != 255 ->
		kick_r(head, r);
#ifndef MUTANT_NO_SETTER_STEP
		if
		:: r == 2 -> runners = 1; chain_step(runners, b, r)
		:: else
		fi
#endif
	:: else
	fi
}

init {
	bit busy0;

	if
	:: busy0 = 0
	:: busy0 = 1
	fi;
	atomic {
		sleep[0] = (busy0 -> AWAKE : SLEEPING);
		in_futex[0] = (busy0 -> 0 : 1);
		sleep[1] = SLEEPING; in_futex[1] = 1;
		sleep[2] = SLEEPING; in_futex[2] = 1;
		want[0] = 1; want[1] = 2; want[2] = 2;
		run Worker(0, busy0);
		run Worker(1, 0);
		run Worker(2, 0);
		run Waker(0, 1, 2);
		run Waker(2, 1, 255)
	}
}
