/*
 * tests/models/idle_claim.pml - wake_one's claim of an idle worker racing
 * that worker's park: "a claimed worker must not sleep through its claim".
 *
 * Follows (update it with runtime/idle.c):
 *   runtime/idle.c  wft_idle_run from `park:` (wft_idle_spin_stop,
 *                   idle_set, the SLEEPING exchange and fence,
 *                   idle_claimed, futex_wait, `cancel:` with idle_clear
 *                   inheriting the spinning slot), wake_pick (CAS
 *                   nspinning 0 -> 1, CAS the idle bit clear, nidle--,
 *                   wft_idle_kick; or nspinning-- when nobody is idle) and
 *                   wft_idle_kick; "Leave the idle set" above idle_clear.
 * One worker, one waker calling wft_idle_wake_one. The surplus the waker
 * publishes is left out on purpose (the owner may run it itself before the
 * worker re-checks): what is checked is the claim itself.
 *
 * Property: when everything has settled, either the worker is awake and
 * has given back the slot it inherited, or it sleeps findable: its idle
 * bit set, nidle counting it and no spinning slot held (nspinning == 0).
 * A worker asleep outside the idle set with nspinning stuck at 1 is the
 * lost wakeup: every later wake_one sees "someone is looking", and nobody
 * can find this worker (stealing stops for good).
 *
 * Mutant (must fail):
 *   MUTANT_NO_CLAIM_CHECK  no idle_claimed() look after the announcement:
 *                          a claim between idle_set and the announcement
 *                          kicks nobody (the worker is still AWAKE) and
 *                          the worker sleeps through it.
 */
#define AWAKE    0
#define SLEEPING 1
#define KICKED   2

byte sleep = AWAKE;          /* w->sleep */
bit  idle_bit = 0;           /* w's bit in wft_rt.idle_mask */
byte nidle = 0;              /* wft_rt.nidle */
byte nspinning = 0;          /* wft_rt.nspinning */
bit  spinning = 0;           /* w->spinning */
bit  in_futex = 0;
bit  w_done = 0;
bit  waker_done = 0;

proctype Worker()
{
	/* wft_idle_spin_stop */
	if
	:: spinning -> spinning = 0; nspinning--
	:: else
	fi;
	/* idle_set: fetch_or the bit, nidle++ (seq_cst) */
	idle_bit = 1;
	nidle++;
	/* exchange SLEEPING (seq_cst) + fence */
	sleep = SLEEPING;
#ifndef MUTANT_NO_CLAIM_CHECK
	/* idle_claimed(): seq_cst load of the bit */
	if
	:: !idle_bit -> goto cancel
	:: else
	fi;
#endif
	/* (the re-check of the work sources finds nothing here) */
	atomic {
		if
		:: sleep == SLEEPING -> in_futex = 1
		:: else
		fi
	};
end_sleep:
	in_futex == 0;
cancel:
	sleep = AWAKE;
	/* idle_clear: fetch_and (relaxed RMW) */
	atomic {
		if
		:: idle_bit -> idle_bit = 0; nidle--
		:: else -> spinning = 1     /* claimed: take the slot */
		fi
	};
	/* goes looking, finds nothing, parks again: the slot goes back
	 * (wft_idle_spin_stop at the next `park:`); the model stops here */
	if
	:: spinning -> spinning = 0; nspinning--
	:: else
	fi;
	w_done = 1
}

proctype Waker()
{
	byte s;
	bit claimed = 0;

	/* wake_pick: only one waker at a time gets a worker spinning */
	atomic {
		if
		:: nspinning == 0 -> nspinning = 1; s = 1
		:: else -> s = 0
		fi
	};
	if
	:: s ->
		/* relaxed load of the mask, then the seq_cst CAS of the bit */
		atomic {
			if
			:: idle_bit -> idle_bit = 0; claimed = 1
			:: else
			fi
		};
		if
		:: claimed ->
			nidle--;
			/* wft_idle_kick */
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
				:: s == KICKED -> in_futex = 0
				:: else
				fi
			:: else
			fi
		:: else -> nspinning--        /* nobody idle after all */
		fi
	:: else
	fi;
	waker_done = 1
}

init {
	atomic {
		run Worker();
		run Waker()
	}
	waker_done && (w_done || in_futex);
	if
	:: w_done -> assert(nspinning == 0 && !spinning && !idle_bit && nidle == 0)
	:: else -> assert(idle_bit && nidle == 1 && nspinning == 0)
	fi
}
