/*
 * tests/models/gang_hold.pml - the gang Hold protocol: a member whose
 * gang's slice is over steps aside (parks) while the slice ticker makes
 * the gang active again and releases its held members.
 *
 * Follows (update it with runtime/gang.c):
 *   step_aside   store held = 1 (seq_cst); load active (seq_cst); if 1:
 *                exchange held -> 0 and return; else park while held
 *                (acquire load of held, weft_park);
 *   sched_point  a relaxed load of active, step_aside if 0;
 *   activate     store active = 1 (seq_cst); exchange held -> 0
 *                (seq_cst); if it was 1, weft_unpark(member);
 *   deactivate   store active = 0 (relaxed);
 * and "Hold protocol" in gang.c's header. weft_park / weft_unpark are
 * park.inc's (the token, the state CAS), untimed.
 *
 * One member, one gang; the ticker deactivates and reactivates the gang
 * ROUNDS times and ends with the gang active; the member passes NPOINTS
 * scheduling points. Memory model: sequential consistency for the seq_cst
 * operations (spin's interleaving); MUTANT_HELD_STORE models the held
 * store as a plain store into the member's store buffer (TSO), which the
 * seq_cst store forbids.
 *
 * Property: no member stranded. The member always gets past all its
 * scheduling points once the gang is active for good: a member parked
 * with held = 1 and no ticker left is an invalid end state.
 *
 * Mutants (each must fail):
 *   MUTANT_NO_RECHECK  step_aside parks without re-reading active after
 *                      its held store: an activation between the member's
 *                      first look and its held store finds held = 0 and
 *                      releases nobody.
 *   MUTANT_HELD_STORE  held = 1 as a plain (buffered) store: the member's
 *                      load of active passes it, and the ticker's exchange
 *                      reads the old 0.
 */
#define NT 1
#include "park.inc"

#define ROUNDS  2
#define NPOINTS 3

bit gactive = 1;              /* g->active */
bit held = 0;                /* m->held, in memory */
bit hsb_valid = 0;           /* MUTANT_HELD_STORE: the member's store buffer */
bit hsb_val;
byte points = 0;             /* scheduling points passed */
bit ticker_done = 0;

/* the member's view of held: its own buffered store first */
inline held_load_self(v)
{
	atomic {
		if
		:: hsb_valid -> v = hsb_val
		:: else -> v = held
		fi
	}
}

/* the member's RMW of held: drains its buffer first */
inline held_xchg_self(nv, old)
{
	atomic {
		if
		:: hsb_valid -> held = hsb_val; hsb_valid = 0
		:: else
		fi;
		old = held;
		held = nv
	}
}

proctype Member()
{
	bit a, h, old, pold, pgo;
	byte ret;

	do
	:: points == NPOINTS -> break
	:: else ->
		/* sched_point: relaxed load of active */
		a = gactive;
		if
		:: a -> skip
		:: else ->
			/* step_aside */
#ifdef MUTANT_HELD_STORE
			atomic { hsb_val = 1; hsb_valid = 1 };
#else
			atomic { held = 1 };                 /* seq_cst store */
#endif
#ifdef MUTANT_NO_RECHECK
			a = 0;
#else
			a = gactive;                          /* seq_cst load */
#endif
			if
			:: a ->
				held_xchg_self(0, old)       /* whoever reads 1 cleared it */
			:: else ->
				do
				:: held_load_self(h);
				   if
				   :: h == 0 -> break
				   :: else -> thread_park(0, 0, ret, pold, pgo)
				   fi
				od
			fi
		fi;
		points++
	od
}

proctype Ticker()
{
	byte r;
	bit old, uold, uwon;

	for (r : 1 .. ROUNDS) {
		gactive = 0;                                  /* deactivate */
		gactive = 1;                                  /* activate: seq_cst store */
		atomic { old = held; held = 0 };             /* seq_cst exchange */
		if
		:: old -> unpark(0, uold, uwon)
		:: else
		fi
	}
	ticker_done = 1
}

/* The member's store buffer drains at any time (MUTANT_HELD_STORE). */
proctype HeldBuffer()
{
end_hsb:
	do
	:: atomic { hsb_valid -> held = hsb_val; hsb_valid = 0 }
	od
}

init {
	atomic {
		run Member();
		run Ticker();
		run HeldBuffer()
	}
}
