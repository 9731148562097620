/*
 * tests/models/rwlock_bias.pml - the read bias of weft_rwlock_t: readers
 * counted in the shared, tagged slots of the reader table against writers
 * revoking the bias.
 *
 * Follows (update it with sync/rwlock.c, "Read bias" and "Revocation"):
 *   rd_fast        relaxed hint load of bias; seq_cst CAS of the slot of
 *                  the reader's row: free (count 0) -> {A, 1}, or {A, n}
 *                  -> {A, n + 1}; a slot of another lock with a count
 *                  sends the reader to the slow path; then a seq_cst
 *                  re-load of bias: ON = hold (the reader records the
 *                  slot), else give the count back and take the slow path;
 *   rd_fast_unlock release decrement of the recorded slot (also after the
 *                  reader moved to another worker's row: I7);
 *   the slow path  a read hold in the state word, only while no WRITER
 *                  (the word's own protocol is not this model's subject:
 *                  one atomic step here);
 *   wrlock_common  CAS of the word 0 -> WRITER, then revoke(): relaxed
 *   + revoke       load of bias; OFF = done; else seq_cst store REVOKING,
 *                  seq_cst load of each row's slot of the lock's column,
 *                  waiting while it counts holds of A (tag A, count > 0),
 *                  then OFF. A timed writer may give up while a slot
 *                  counts A: it leaves REVOKING (I5) and releases WRITER.
 * The table here: one column (every lock hashes to it), two rows. Readers
 * R0 and R1 of lock A count in row 0 (two threads of one worker share the
 * slot), R2 of lock A in row 1; R0 moves to row 1's worker inside its
 * section (its unlock must go to row 0, the slot it counted in). RB holds
 * another lock, B, through row 0's slot (never written: no writer of B),
 * so the slot's tag changes between A and B while A's writers scan.
 * Not modelled: rebias() (a store of ON under a read hold; the model
 * starts with ON, the state it re-creates), the 65,535 count limit (a
 * full slot sends the reader to the slow path, as a foreign tag does),
 * queues and parking (the waits are blocking guards; a lost wakeup would
 * show as an invalid end state).
 *
 * Memory model: sequential consistency for the seq_cst accesses and RMWs;
 * in MUTANT_NO_SC the writer's store of REVOKING is a plain store into
 * its store buffer (TSO), so its slot loads can pass it: the
 * store-buffering outcome that the seq_cst store (XCHG) forbids.
 *
 * Property: exclusion. No reader of A is inside while a writer is inside
 * (asserted on both sides), no count goes below zero, and every process
 * ends (no invalid end state: a count never drained would leave a writer
 * waiting).
 *
 * Mutants (each must fail):
 *   MUTANT_NO_SC        the REVOKING store is buffered (above).
 *   MUTANT_NO_RECHECK   a reader does not re-load bias after its count.
 *   MUTANT_GIVEUP_OFF   a writer that gives up stores OFF instead of
 *                       leaving REVOKING, so the next writer skips the
 *                       scan while a reader still holds its slot.
 *   MUTANT_RETAG        a claim may retag a slot that still counts holds
 *                       (breaks I7): A's holds then hide under B's tag.
 *   MUTANT_CURRENT_ROW  the unlock decrements the row the reader runs on
 *                       now, not the one it counted in.
 */
#define OFF      0
#define ON       1
#define REVOKING 2

#define LOCK_A 1
#define LOCK_B 2
#define NROWS  2

byte bias = ON;              /* lock A's bias (B's stays ON) */
byte tag[NROWS];             /* slot tag: 0 none, LOCK_A, LOCK_B */
byte cnt[NROWS];             /* slot count; tag and count are one word */
bit  writer = 0;             /* WRITER in A's state word */
byte rword = 0;              /* read holds counted in A's state word */
byte rin = 0;                /* readers of A inside their section */
bit  win = 0;                /* a writer of A inside its section */
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

/* The claiming CAS on the slot of row r for lock l: ok = 1 if counted. */
inline claim(r, l, ok)
{
	atomic {
		if
		:: cnt[r] == 0 -> tag[r] = l; cnt[r] = 1; ok = 1
		:: cnt[r] > 0 && tag[r] == l -> cnt[r]++; ok = 1
#ifdef MUTANT_RETAG
		:: cnt[r] > 0 && tag[r] != l -> tag[r] = l; cnt[r]++; ok = 1
#endif
		:: else -> ok = 0
		fi
	}
}

/* The release decrement (an RMW) */
inline give_back(r)
{
	atomic { assert(cnt[r] > 0); cnt[r]-- }
}

/* A reader of lock A counting in row `row`; `moves`: it runs on row
 * 1's worker by the time it unlocks. */
proctype Reader(byte row; bit moves)
{
	byte b, unrow;
	bit ok;

	b = bias;                            /* relaxed hint */
	if
	:: b == ON ->
		claim(row, LOCK_A, ok);      /* seq_cst CAS */
		if
		:: ok ->
#ifndef MUTANT_NO_RECHECK
			b = bias;            /* seq_cst re-load */
#endif
			if
			:: b == ON ->
				section_read();
				unrow = row;   /* the record (I7) */
#ifdef MUTANT_CURRENT_ROW
				if
				:: moves -> unrow = 1
				:: else
				fi;
#endif
				give_back(unrow);   /* release: unlock */
				goto done
			:: else ->
				give_back(row)      /* back out */
			fi
		:: else
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

/* A reader of lock B through row 0's slot: retags it between A's holds. */
proctype ReaderB()
{
	bit ok;

	claim(0, LOCK_B, ok);
	if
	:: ok -> give_back(0)   /* B's bias is ON and B has no writer */
	:: else
	fi
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
		:: k == NROWS -> break
		/* seq_cst load of the slot: it counts holds of A or not */
		:: k < NROWS && !(tag[k] == LOCK_A && cnt[k] > 0) -> k++
		:: k < NROWS && tag[k] == LOCK_A && cnt[k] > 0 && may_give_up ->
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
		run Reader(0, 1);            /* R0: row 0, moves to row 1 */
		run Reader(0, 0);            /* R1: row 0 */
		run Reader(1, 0);            /* R2: row 1 */
		run ReaderB();
		run Writer(1);               /* a timed writer: may give up */
		run Writer(0);
		run StoreBuffer()
	}
}
