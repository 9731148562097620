/*
 * tests/models/mailbox.pml - the mailbox push / take-all and its "kick
 * only when it was empty" rule, with the list itself modelled.
 *
 * Follows (update it with the code):
 *   runtime/mailbox.c wft_mailbox_push_chain (chain header mb_last/mb_n,
 *                     relaxed guess of head, last->link = old, CAS head
 *                     old -> first, return old == NULL) and
 *                     wft_mailbox_take_all (exchange head with NULL, then
 *                     reverse the order of the chains, not of the threads);
 *   runtime/worker.c  wft_wake_push (kick iff the push returned
 *                     "was empty");
 *   runtime/idle.c    the worker's park (announce, re-check, futex_wait),
 *                     here in its sequentially consistent form (the fence
 *                     is idle_park.pml's subject).
 *
 * Pushers: A pushes thread 1, then thread 2 (two single pushes); B pushes
 * the pre-linked chain 3 -> 4 in one push (a wake queue's batch).
 *
 * Properties:
 *   - every thread is taken exactly once (assert), FIFO per pusher: 1
 *     before 2, 3 before 4 (mailbox.c "Take");
 *   - no lost wakeup: the worker stops only when it has taken all four; a
 *     worker asleep with a non-empty mailbox is an invalid end state.
 *
 * Mutants (each must fail):
 *   MUTANT_SPLIT_TAKE   take_all as a load of head and a separate store of
 *                       NULL instead of one exchange: a push between the two
 *                       is dropped.
 *   MUTANT_STALE_EMPTY  push reports "was empty" from its first relaxed
 *                       guess instead of the value its successful CAS
 *                       replaced: a push that raced a take_all does not
 *                       kick, and the worker sleeps on a non-empty mailbox.
 */
#define NN 5                 /* thread ids 1..4; 0 = NULL */
#define AWAKE    0
#define SLEEPING 1
#define KICKED   2

byte head = 0;               /* mb->head */
byte link[NN];               /* t->link */
byte mb_last[NN];            /* chain header of the first thread */
byte mb_n[NN];
bit  got[NN];
byte ntaken = 0;

byte sleep = AWAKE;
bit  in_futex = 0;

inline kick()
{
	/* runtime/idle.c wft_idle_kick */
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
}

/* wft_mailbox_push_chain + push_remote's kick */
inline push(first, last, n)
{
	mb_last[first] = last;
	mb_n[first] = n;
	old = head;                  /* relaxed guess */
	guess = old;
	ok = 0;
	do
	:: ok -> break
	:: else ->
		link[last] = old;
		atomic {                 /* CAS head old -> first (seq_cst) */
			if
			:: head == old -> head = first; ok = 1
			:: else -> old = head
			fi
		}
	od;
#ifdef MUTANT_STALE_EMPTY
	was_empty = (guess == 0);
#else
	was_empty = (old == 0);
#endif
	if
	:: was_empty -> kick()
	:: else
	fi
}

proctype PusherA()
{
	byte old, guess, s;
	bit ok, was_empty;

	push(1, 1, 1);
	push(2, 2, 1)
}

proctype PusherB()
{
	byte old, guess, s;
	bit ok, was_empty;

	link[3] = 4;                 /* the chain, linked before the push */
	push(3, 4, 2)
}

proctype Worker()
{
	byte c, cl, nxt, rev, k;

	do
	:: ntaken == 4 -> break
	:: else ->
		/* wft_mailbox_take_all */
#ifdef MUTANT_SPLIT_TAKE
		c = head;
		head = 0;
#else
		atomic { c = head; head = 0 };   /* exchange (acquire) */
#endif
		rev = 0;
		k = 0;
		do
		:: c != 0 ->
			cl = mb_last[c];
			nxt = link[cl];
			k = k + mb_n[c];
			link[cl] = rev;          /* this chain before the later ones */
			rev = c;
			c = nxt
		:: else -> break
		od;
		/* run them in order */
		c = rev;
		do
		:: c != 0 ->
			assert(!got[c]);
			assert(c != 2 || got[1]);
			assert(c != 4 || got[3]);
			got[c] = 1;
			ntaken++;
			k--;
			c = link[c]
		:: else -> break
		od;
		assert(k == 0);          /* mb_n accounts for every thread */
		if
		:: ntaken == 4 -> break
		:: else
		fi;
		/* park (runtime/idle.c), sequentially consistent */
		sleep = SLEEPING;
		if
		:: head != 0 -> goto cancel
		:: else
		fi;
		atomic {
			if
			:: sleep == SLEEPING -> in_futex = 1
			:: else
			fi
		};
		in_futex == 0;
cancel:
		sleep = AWAKE
	od;
	assert(head == 0 && ntaken == 4)
}

init {
	atomic {
		run Worker();
		run PusherA();
		run PusherB()
	}
}
