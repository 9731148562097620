/*
 * tests/models/rwlock_bias.pml - the read bias of weft_rwlock_t: readers
 * holding through slots against writers revoking the bias.
 *
 * Follows (update it with sync/rwlock.c, "Read bias" and "Revocation"):
 *   rd_fast        relaxed hint load of bias; seq_cst CAS of the slot
 *                  0 -> rw; seq_cst re-load of bias: ON = hold, else free
 *                  the slot and take the slow path;
 *   rd_fast_unlock release store freeing the slot;
 *   the slow path  a read hold in the state word, only while no WRITER
 *                  (the word's own protocol is not this model's subject:
 *                  one atomic step here);
 *   wrlock_common  CAS of the word 0 -> WRITER, then revoke(): relaxed
 *   + revoke       load of bias; OFF = done; else seq_cst store REVOKING,
 *                  seq_cst load of each slot, waiting while it holds rw,
 *                  then OFF. A timed writer may give up while a slot is
 *                  held: it leaves REVOKING (I5) and releases WRITER.
 * Not modelled: rebias() (a store of ON under a read hold; the model
 * starts with ON, the state it re-creates), the thread/lock hashing (each
 * reader has its own slot here: a shared or taken slot only sends a
 * reader to the slow path), queues and parking (the waits are blocking
 * guards; a lost wakeup would show as an invalid end state).
 *
 * Memory model: sequential consistency for the seq_cst accesses; in
 * MUTANT_NO_SC the writer's store of REVOKING is a plain store into its
 * store buffer (TSO), so its slot loads can pass it: the store-buffering
 * outcome that the seq_cst store (XCHG) forbids.
 *
 * Property: exclusion. No reader is inside while a writer is inside
 * (asserted on both sides), and every process ends (no invalid end state).
 *
 * Mutants (each must fail):
 *   MUTANT_NO_SC        the REVOKING store is buffered (above).
 *   MUTANT_NO_RECHECK   a reader does not re-load bias after its claim.
 *   MUTANT_GIVEUP_OFF   a writer that gives up stores OFF instead of
 *                       leaving REVOKING, so the next writer skips the
 *                       scan while a reader still holds its slot.
 */
#define OFF      0
#define ON       1
#define REVOKING 2

#define NREAD 2

byte bias = ON;
bit  slot[NREAD];            /* slot i holds rw (reader i's row) */
bit  writer = 0;             /* WRITER in the state word */
byte rword = 0;              /* read holds counted in the state word */
byte rin = 0;                /* readers inside their section */
bit  win = 0;                /* a writer inside its section */
bit  sb_valid = 0;           /* the writer's store buffer (MUTANT_NO_SC) */
byte sb_val;

inline sb_drain()
{
	if
	:: sb_valid -> bias = sb_val; sb_valid = 0
	:: else
	fi
}

inline section_read()
{
	rin++;
	assert(!win);
	rin--
}

proctype Reader(byte i)
{
	byte b;

	b = bias;                            /* relaxed hint */
	if
	:: b == ON ->
		slot[i] = 1;                 /* seq_cst CAS 0 -> rw */
#ifndef MUTANT_NO_RECHECK
		b = bias;                    /* seq_cst re-load */
#endif
		if
		:: b == ON ->
			section_read();
			slot[i] = 0;         /* release store: unlock */
			goto done
		:: else ->
			slot[i] = 0          /* back out */
		fi
	:: else
	fi;
	/* slow path: a read hold in the word while no WRITER */
	atomic { writer == 0 -> rword++ };
	section_read();
	rword--;
done:
	skip
}

proctype Writer(bit may_give_up)
{
	byte k;

	atomic { writer == 0 && rword == 0 -> writer = 1 };   /* CAS 0 -> WRITER */
	if
	:: bias != OFF ->
#ifdef MUTANT_NO_SC
		atomic { sb_val = REVOKING; sb_valid = 1 };
#else
		atomic { sb_drain(); bias = REVOKING };       /* seq_cst store */
#endif
		k = 0;
		do
		:: k == NREAD -> break
		:: k < NREAD && slot[k] == 0 -> k++          /* seq_cst load */
		:: k < NREAD && slot[k] == 1 && may_give_up ->
			/* deadline: give up, release WRITER */
#ifdef MUTANT_GIVEUP_OFF
			atomic { sb_drain(); bias = OFF };
#endif
			writer = 0;
			goto gone
		od;
		atomic { sb_drain(); bias = OFF }
	:: else
	fi;
	win = 1;
	assert(rin == 0);
	win = 0;
	writer = 0;                                  /* release */
gone:
	skip
}

/* The writer's store buffer drains at any time (MUTANT_NO_SC). */
proctype StoreBuffer()
{
end_sb:
	do
	:: atomic { sb_valid -> bias = sb_val; sb_valid = 0 }
	od
}

init {
	atomic {
		run Reader(0);
		run Reader(1);
		run Writer(1);               /* a timed writer: may give up */
		run Writer(0);
		run StoreBuffer()
	}
}
