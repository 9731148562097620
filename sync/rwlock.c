/*
 * sync/rwlock.c - weft_rwlock_t: phase-fair reader-writer lock with a read
 * bias (readers of a lock no writer used lately count themselves in their
 * worker's row of a reader table and touch no shared line) and a bounded
 * reader pass (readers may join a read phase past a waiting writer for the
 * writer's patience, about 1 ms).
 *
 * What it owns
 *   The rwlock word, two FIFO queues (readers, writers), the hand-off
 *   rules between read phases and write phases ("Protocol", "Bounded
 *   pass"), and the per-worker reader count table shared by every rwlock
 *   ("Read bias"). docs/design.md "Reader-writer lock" has the
 *   measurements and the ceiling of the benchmark.
 *
 * State word (rw->state, 64 bits)
 *
 *   bits 63..5     | bit 4 | bit 3  | bit 2 | bit 1 | bit 0
 *   readers (x 32) | RETRY | CLOSED | RWAIT | WWAIT | WRITER
 *
 *   readers   Number of read holds. Changed lockless by CAS (+32 / -32) in
 *             the fast paths, or under qlock by a grant.
 *   WRITER    A writer holds it; rw->wowner says who. Set by the writer's
 *             CAS from 0 (or, for a writer woken to retry, from a word
 *             with no holder), or by a grant under qlock.
 *   WWAIT     A writer is queued. Arriving readers may pass it only while
 *             the pass is open ("Bounded pass"); the last reader out must
 *             give the head writer its turn. Set/cleared under qlock.
 *   RWAIT     A reader is queued. The writer's unlock must take the slow
 *             path and admit every queued reader. Set/cleared under qlock.
 *   CLOSED    The pass is over: the waiting writer's patience ran out and
 *             a reader queued behind it. No reader may join; the next turn
 *             is a grant. Set under qlock by a queueing reader; cleared
 *             when a writer takes or is granted the lock, or by a write
 *             unlock (a new phase), or when no writer waits any more.
 *   RETRY     A writer was woken to retry and has not come back yet (it
 *             is "in flight"). It counts as the head writer: readers pass
 *             it only while the pass is open, and its clock (wclose_us)
 *             keeps running. At most one writer is in flight. Set by a
 *             turn under qlock; cleared under qlock by that writer when it
 *             takes the lock, queues again or gives up.
 *
 *   I1. WRITER => readers == 0.
 *   I2. Under qlock: WWAIT <=> writer queue non-empty; RWAIT <=> reader
 *       queue non-empty; RETRY <=> a writer holds a RETRY result it has
 *       not acted on.
 *   I3. A reader queues only while WRITER is set or the pass is closed
 *       behind a waiting writer (WWAIT or RETRY); a writer only while the
 *       lock is held, or while writers wait before it. So a lock with no
 *       holder, no writer in flight and no queued writer has empty queues.
 *   I4. While WRITER is set only the owning writer (its unlock) and qlock
 *       holders write the word: lockless CASes expect no WRITER.
 *
 *   The state word counts only the read holds taken through it (the slow
 *   path); read holds counted in slots ("Read bias") are in the table.
 *   A writer holds the lock once it has WRITER in the word AND has drained
 *   the slots ("Revocation"); until then it holds WRITER and waits.
 *
 * Read bias (per-worker reader counts)
 *   rw->bias is OFF, ON or REVOKING. While it is ON, a read lock counts
 *   itself in a process-wide table of 8-byte counter slots instead of in
 *   the state word. The table has WFT_RW_ROWS rows, one per worker (worker
 *   id modulo the rows), by WFT_RW_COLS columns (lock classes: a hash of
 *   rw). A slot is {tag, count} in one word: the tag is rw's address, the
 *   count the read holds of rw counted there. A light thread counts in its
 *   current worker's row; a plain OS thread in a row hashed from the
 *   address of its own TLS record (the fallback: its line may be shared
 *   with a worker's, which costs a transfer, not correctness). The reader
 *   CASes the slot (free -> {rw, 1}, or {rw, n} -> {rw, n + 1}), re-reads
 *   bias, and notes {rw, slot} in its own record: rw_fast_lock and
 *   rw_fast_slot in its TCB, or rw_os_hold. Its unlock finds the slot in
 *   that record, not from where it runs, and decrements it. So in the
 *   common case a read lock and unlock are two RMWs on a line that only
 *   the threads of one worker write, one after another on one CPU; the
 *   lock object itself is only read (bias), and it stays in every
 *   reader's cache until a writer comes. A slot tagged for another lock
 *   of the same column, a full count, or a second read hold while the
 *   thread has one in its record sends the reader to the state word.
 *
 *   I5. bias OFF => no slot counts a hold of rw, except a reader's count
 *       that it will undo (it re-reads bias, sees OFF, decrements, takes
 *       the slow path). ON and REVOKING => a writer must scan before it
 *       holds. OFF is stored only by a writer that holds WRITER and
 *       drained the slots; REVOKING by a writer that holds WRITER or is
 *       queued.
 *   I6. ON is stored only by a thread holding a read hold in the state
 *       word (rebias(), after the CAS that took it, with no writer
 *       holding or queued), before that hold's release. So the next
 *       writer's acquire of WRITER follows that store and its relaxed
 *       load of bias sees ON or a later value: it cannot miss the bias.
 *       A writer granted WRITER by the last reader out (rdunlock_slow)
 *       synchronises only with that reader; the granting CAS is acq_rel,
 *       so it takes in the earlier readers' releases and passes them on.
 *   I7. A slot's tag changes only while its count is 0 (the claiming CAS
 *       expects count 0), so while a hold of rw is counted in a slot the
 *       slot stays tagged rw, and every count in it is a hold of rw. A
 *       thread's record names the slot its read lock counted in; the
 *       unlock decrements exactly that slot, also after the thread moved
 *       to another worker (then with an RMW on a remote line, against the
 *       RMWs of that row's threads: hence RMWs, not plain stores). A
 *       thread without a matching record holds no slot count, so its
 *       unlock goes to the word, which says EPERM if it holds nothing
 *       there either: a non-holder never takes a slot holder's count.
 *
 *   The race: a reader counts itself while a writer turns bias off and
 *   scans. It is the store-buffering (Dekker) pattern, and every access in
 *   it is seq_cst (on x86-64 the count is a LOCK CMPXCHG and the writer's
 *   store an XCHG; on aarch64 CASAL/STLR against LDAR):
 *
 *     reader                              writer (holds WRITER)
 *     ------                              ------
 *     CAS slot count+1      (seq_cst)     store bias REVOKING (seq_cst)
 *     load bias             (seq_cst)     load slot, each row (seq_cst)
 *     ON: hold; else -1, slow path        counts rw: wait until drained
 *
 *   Either the reader sees REVOKING/OFF (it backs out and queues behind
 *   WRITER) or the writer sees the count (it waits for the decrement),
 *   because the four accesses are in one total order in which the
 *   reader's CAS precedes its load and the writer's store precedes its
 *   loads: the later of the two loads sees the other side's store. So a
 *   reader and a writer are never both in. Nothing is lost in the other
 *   direction either: the writer polls the slot (no wakeup to lose), and
 *   a reader that backs out takes the ordinary slow path, which queues by
 *   the "Protocol" argument below. Memory: a reader that reads ON
 *   synchronises with the release store of ON (I6), which follows the
 *   last writer's release of the word; a writer's seq_cst load of a
 *   drained count acquires the readers' release decrements (a release
 *   RMW heads a release sequence that the later RMWs on the slot, by
 *   other readers, continue).
 *
 *   tests/models/rwlock_bias.pml checks this Dekker pattern with spin
 *   (exclusion, counts never below zero, no writer left waiting): two
 *   readers sharing one row's slot, one of them moving to the other row
 *   before its unlock, a third reader in the other row, a reader of
 *   another lock retagging the shared slot, a timed writer that may give
 *   up and a second writer; with mutants for a buffered REVOKING store, a
 *   reader that does not re-load bias, a writer that gives up storing
 *   OFF, a claim that retags a counted slot (I7) and an unlock that
 *   decrements its current row.
 *
 *   Concurrency: counts in different slots run in parallel with
 *   everything; counts and decrements of one slot are RMWs, so they
 *   serialise among themselves (the threads of one worker, a thread that
 *   moved away and unlocks, OS threads hashed to that row); a count runs
 *   against a scan (above); a decrement against a scan (the scan waits
 *   for it); rebias() against a queued writer's REVOKING (a CAS: one wins;
 *   if ON wins the writer drains the slots once it holds WRITER); two
 *   writers never scan at once (one holds WRITER; a queued writer only
 *   stores REVOKING). Linearisation point of a fast read lock: its
 *   seq_cst load of bias reading ON; of a fast unlock: its release
 *   decrement.
 *
 * Revocation
 *   A writer that holds WRITER reads bias (relaxed, I6); OFF: done. Else
 *   it stores REVOKING, scans its column's WFT_RW_ROWS slots and waits on
 *   each that counts rw. Per-worker rows tell it where the holders are.
 *   On its own worker's row a holder may be a thread of its own worker,
 *   parked or runnable, so it yields (if its worker has other threads)
 *   or polls briefly, then sleeps. On another worker's row the holders
 *   run there: it spins ~2 us first (a read section), and only then
 *   yields or sleeps (2-128 us, doubling). Yielding at once, as a scan of
 *   thread-indexed slots must (the holder may be on our worker), lets
 *   every runnable thread of the writer's worker run into the revoked
 *   lock and park, and each of them needs a wake at the writer's unlock.
 *   Then it stores OFF and sets rebias_at = now + 9 x (time the
 *   revocation took), before which rebias() leaves the bias off (BRAVO's
 *   inhibition: revocations cost at most a tenth of the time). A writer
 *   that has to queue stores REVOKING at once, so readers that come later
 *   queue behind it instead of counting in slots (writer preference, as
 *   for the word). A timed or try writer that gives up while readers are
 *   counted returns with bias REVOKING (I5) and releases WRITER.
 *   Writers cannot starve: once a writer holds WRITER or is queued, new
 *   readers queue in the word; the readers counted in slots leave after
 *   their own section. Readers cannot starve: unchanged phase-fair grants.
 *   Cost per write with the bias on: one seq_cst store and 32 loads of
 *   lines (the rows of the running workers are in their caches; they
 *   overlap: about two cache misses), plus the wait for the readers
 *   inside, which any rwlock pays.
 *   Memory: 32 KiB for the table, whatever the number of locks, and two
 *   pointers per TCB; no per-lock allocation, so WEFT_RWLOCK_INITIALIZER
 *   still works and the public type stays one 64-byte line.
 *
 * Protocol (phase-fair)
 *   "Read lock": CAS readers + 1 (acquire) while no WRITER, and no writer
 *   waits or the pass is open ("Bounded pass"). Else under qlock: the same
 *   CAS, or CAS RWAIT on (and CLOSED, if a writer waits); queue; park. A
 *   granted reader returns with its hold already counted by the granter.
 *   "Write lock": CAS 0 -> WRITER (acquire). Else under qlock: the same, or
 *   CAS WWAIT on; queue; park; granted = we are the writer; woken with
 *   RETRY = try again under qlock ("Bounded pass").
 *   "Write unlock": CAS WRITER -> 0 (release). If flags are set: under
 *   qlock, admit every queued reader (a read phase: readers = their count,
 *   WWAIT kept), else give the head writer its turn, else release; wake
 *   them after qlock.
 *   "Read unlock": CAS readers - 1 (release), unless we are the last reader
 *   and someone waits: then under qlock give the head writer its turn (or,
 *   if the writers all timed out, admit the queued readers).
 *   A writer's turn is a grant (WRITER is set for it while it is parked)
 *   once its patience is over, else a wake to retry.
 *   So phases alternate whenever both kinds wait for longer than the
 *   patience: neither can starve.
 *
 *     waiter (reader or writer)         releaser
 *     ------                            --------
 *     qlock                             CAS on state (RMW): release; the
 *     CAS state: set RWAIT/WWAIT          value it reads says whether any
 *       only if still blocked (RMW)       waiter flag is set
 *     queue; qunlock; park              if set: qlock; grant; qunlock; wake
 *
 *   Either the waiter's CAS sees the release (it takes the lock instead of
 *   queueing) or the releaser's CAS sees the flag (it grants under qlock,
 *   after the waiter's qunlock), because both are RMWs of the same word.
 *
 *   Linearisation points: the CAS that changes the holder fields, or the
 *   grant under qlock for a queued waiter; a timed-out lock = the unlink of
 *   its record.
 *
 *   Interleavings considered: release racing queueing (above); a timeout
 *   racing a grant (`queued` under qlock decides; a granted waiter holds the
 *   lock and returns 0). The timed-out waiter takes qlock even when a grant
 *   unlinked it between its deadline and that qlock; unlike the semaphore's
 *   (sync/sem.c "Timeout") this touch cannot outlive the object: the grant
 *   gave it a hold counted in the state word (readers, or WRITER) before
 *   the granter dropped qlock, so destroy returns EBUSY until this waiter
 *   unlocks, which it does only after it returned from lock_slow. The
 *   claim CAS of sem.c is therefore not needed here (it would also have to
 *   change how rdunlock_slow counts the readers it admits). The only
 *   queued writer timing out while readers hold and readers queue behind
 *   it (it clears WWAIT and admits them: no reader waits for a writer that
 *   is gone); readers leaving lockless while
 *   the last one goes to the slow path (the slow path re-reads under qlock
 *   and only hands off when it really is the last); a reader passing
 *   while the last one hands off (its +1 makes the hand-off CAS fail; the
 *   slow path sees readers > 1 and only decrements; the passer is the new
 *   last reader). The retry path: "Bounded pass" below.
 *
 * Bounded pass
 *   Under phase-fair rules every reader that arrives while a writer waits
 *   queues behind it, and the lock is then granted to a writer that is
 *   parked: until it is scheduled, the lock is held by a thread that is
 *   not running, and every reader that runs meanwhile queues and parks
 *   too. With many threads per worker that convoy takes over (at 128
 *   tasks, 99% reads, nearly every read queued; docs/design.md). Readers
 *   that pass a waiting writer avoid it, but with no bound the writer
 *   starves. Hence:
 *
 *   - Patience. The head writer's clock starts when it becomes the head
 *     of wq (head_at, set by wclose_update_locked) and keeps running
 *     while it is in flight (RETRY). Its patience ends WFT_RW_PASS_US
 *     later, or WFT_RW_STARVE_US after it first queued (sw.since) if that
 *     is earlier (patience_end_locked). wclose_us, that end in us, is a
 *     lockless hint for readers.
 *   - Pass. A reader that finds a writer waiting (WWAIT or RETRY) and no
 *     WRITER joins the read phase if CLOSED is clear and the clock has not
 *     reached wclose_us (pass_open), by the usual CAS, which expects the
 *     word it read and so CLOSED clear. Otherwise it goes to qlock, where
 *     the same test is made again, and queues with RWAIT | CLOSED. From
 *     then on no reader joins: a reader's CAS that expected CLOSED clear
 *     fails, and its retry sees CLOSED.
 *   - Turn. When the last reader leaves (or a writer unlocks with no
 *     reader queued) and a writer is queued, the head writer gets its
 *     turn: a grant (WRITER for it, as before) if CLOSED or RETRY is set
 *     or it has waited its patience; otherwise it is unlinked with result
 *     RETRY, RETRY is set in the word, which is left free (no holder), and
 *     it is woken. Readers may pass meanwhile (bounded as before), and
 *     nobody holds the lock for a thread that is not running.
 *   - Retry. The woken writer takes qlock and the word, if it has no
 *     holder, whatever the flags (it is the head; clearing CLOSED and
 *     RETRY); else it queues again at the front with its since (clearing
 *     RETRY, setting WWAIT); else, past its deadline, it clears RETRY (and
 *     CLOSED, if no writer is queued; then, if readers hold, it admits the
 *     readers queued behind the closed pass, as a queued writer that times
 *     out does) and returns ETIMEDOUT. It never
 *     leaves a free word behind: past its deadline it still takes a free
 *     word (and returns 0).
 *
 *   The race it must survive: the readers' release racing the retrying
 *   writer's return, the same pattern as "Protocol":
 *
 *     last reader (turn)                 woken writer (RETRY)
 *     ------------------                 --------------------
 *     qlock                              ...runs later...
 *     CAS readers 1 -> 0, RETRY on       qlock
 *     pop W, RETRY result; qunlock       load state; no holder: CAS take
 *     wake W                             held: CAS WWAIT on, RETRY off
 *                                        (RMW); push front; qunlock; park
 *     later readers: lockless CAS -1;
 *     the last sees WWAIT: slow path
 *
 *   Either the writer's CAS sees the holders gone (it takes the lock) or
 *   the last holder's CAS sees WWAIT (it gives the writer its turn again
 *   under qlock, after the writer's qunlock), because both are RMWs of the
 *   one word. No wakeup is lost: a writer leaves the queue only by a grant
 *   (it holds the lock), by its timeout (dequeue_locked restores I2 and
 *   admits the readers it blocked), or with RETRY, which obliges it to
 *   come back to qlock; while it is away RETRY stays in the word, every
 *   further turn is a grant (one writer in flight at most), and the
 *   readers queued behind the closed pass are left queued for it (the
 *   last reader out does not admit them while RETRY is set): it holds
 *   next and admits them at its unlock, or it queues and is granted and
 *   does so, or it gives up while the lock is held: if a writer holds,
 *   its release sees RWAIT and admits them; if readers hold and no writer
 *   is queued, it admits them itself (waiting for the last reader out
 *   would let readers that arrive later, with no writer waiting, pass
 *   them for as long as the read phase lasts).
 *
 *   Why the writer's wait is bounded: from the time it becomes the head
 *   (t0), readers join only by a CAS made after pass_open saw the clock
 *   before t0 + P (P = WFT_RW_PASS_US; wclose_us is at most a store's
 *   propagation stale). After t0 + P the read phase only shrinks: each
 *   arriving reader queues (and closes the pass); the readers already in
 *   leave after their sections; the last one out grants (CLOSED, or the
 *   patience is over). If the writer is in flight meanwhile, the readers
 *   that queue park, so its worker runs it: it takes the free word or
 *   queues and is granted. So the head writer waits at most P plus one
 *   read section plus its own scheduling; a queued writer that has waited
 *   WFT_RW_STARVE_US gets no patience when it becomes the head, so past
 *   that the writers ahead of it cost only their drains and write
 *   sections, as under plain phase-fair turns. Readers do not starve: a
 *   write unlock still admits every queued reader first.
 *
 *   The clock runs from the time a writer becomes the head, not from the
 *   time it queued: measured from the queueing, once one writer waits for
 *   longer than P (a worker preempted by the kernel while a reader holds
 *   is enough on a shared machine), every writer behind it finds its
 *   patience spent when its turn comes, the pass never opens again, and
 *   the convoy is back (docs/design.md has the counts). Counted only from
 *   becoming the head, the k-th writer waited k patiences and k drains of
 *   the readers that passed (over a minute with 1,024 threads under TSan):
 *   hence the cap from the queueing, WFT_RW_STARVE_US.
 *
 *   Patience as a timer in the parked writer was rejected: light threads
 *   are cooperative, and readers that pass never block, so the writer's
 *   timer would not get it scheduled. The readers close the pass by the
 *   clock instead, and queueing is what makes the worker run the writer.
 *
 * Rejected alternatives
 *   - Readers serialising on an internal mutex (counter under a lock): every
 *     read lock would bounce the mutex; here a read lock is one CAS.
 *   - Writer preference only: readers starve under a stream of writers.
 *   - Reader preference (glibc default): writers starve.
 *   - Per-worker reader counts inside the object: the public type is 64
 *     bytes (one line), so counts in it share a line; growing it by a line
 *     per worker would make the ABI depend on the worker count. Hence the
 *     process-wide table, whose rows are the per-worker counts.
 *   - Per-lock arrays of per-worker counts, allocated on first use:
 *     allocation on the lock path, and static locks are never destroyed,
 *     so the arrays would leak.
 *   - Untagged counts per (worker, lock class): a writer of one lock would
 *     wait for readers of another lock of its column, and deadlock when
 *     such a reader waits for this writer's lock.
 *   - Unlocking into the current worker's row, with in/out counter pairs
 *     summed by the writer: two lines per worker per lock class, and a
 *     row's pair never balances for a lock its threads left, so its tag
 *     could not be freed. The thread's own record of the slot (I7) costs
 *     two pointers in the TCB and keeps EPERM exact.
 *   - Slots indexed by thread id, {lock, thread} per slot (the previous
 *     design): exact and migration-proof as well, but the line moves with
 *     the thread, and a writer cannot tell whether a holder runs on its
 *     own worker, so it yields at once and its worker's runnable readers
 *     park behind it ("Revocation").
 *   - One table hashed by (lock, thread) over all of it (BRAVO as
 *     published): a writer must scan the whole table (thousands of slots)
 *     on every revocation; rows by worker and columns by lock bound the
 *     scan to WFT_RW_ROWS slots.
 *   - Spinning before queueing while a writer runs (as the mutex's owner
 *     spin): it lost on the read-mostly benchmark (docs/design.md has the
 *     figures): the spinner holds a CPU the writer and other processes
 *     want.
 *   - Readers passing a waiting writer with no bound (glibc's reader
 *     preference): writers starve ("Bounded pass").
 *   - The writer's patience counted from its queueing, or as a timer in
 *     the parked writer ("Bounded pass").
 */
#include "sync/mutex.h"

#define WFT_RW_WRITER ((uint64_t)1)
#define WFT_RW_WWAIT  ((uint64_t)2)
#define WFT_RW_RWAIT  ((uint64_t)4)
#define WFT_RW_CLOSED ((uint64_t)8)
#define WFT_RW_RETRY  ((uint64_t)16)
#define WFT_RW_READER ((uint64_t)32)
#define WFT_RW_FLAGS  (WFT_RW_WRITER | WFT_RW_WWAIT | WFT_RW_RWAIT | WFT_RW_CLOSED | WFT_RW_RETRY)
/* A writer waits, queued or woken to retry: arriving readers may pass it
 * only while its patience lasts ("Bounded pass"). */
#define WFT_RW_WPEND  (WFT_RW_WWAIT | WFT_RW_RETRY)
/* The word of a destroyed rwlock: WRITER with a reader count, which I1
 * rules out for a live lock. Every lockless CAS fails on it (readers need
 * no WRITER, writers need 0), and each slow path checks for it first, so
 * every call but init returns EINVAL after a destroy. */
#define WFT_RW_DESTROYED (WFT_RW_WRITER | WFT_RW_READER)
/* Most read holds at once (EAGAIN beyond, like pthread's). */
#define WFT_RW_MAX_READERS ((uint64_t)INT32_MAX)

enum { KIND_READ = 1, KIND_WRITE = 2 };

struct wft_rwlock {
	_Atomic uint64_t state;
	struct wft_slock qlock;
	_Atomic uint32_t bias;        /* ON: readers may count in the table
	                               * ("Read bias"); stored 1 only under a
	                               * read hold, 0 by a writer or destroy */
	_Atomic uintptr_t wowner;     /* owner id of the writer, 0 if none */
	struct wft_waitq rq;          /* queued readers, FIFO; qlock */
	struct wft_waitq wq;          /* queued writers, FIFO; qlock */
	_Atomic uint32_t rebias_us;   /* wft_now() in us (mod 2^32) before
	                               * which bias stays off (written by
	                               * writers; a hint) */
	_Atomic uint32_t wclose_us;   /* when the head writer's patience ends,
	                               * in us (mod 2^32): readers pass it
	                               * until then ("Bounded pass"); written
	                               * under qlock, read lockless (a hint:
	                               * the CAS on state decides) */
};
_Static_assert(sizeof(struct wft_rwlock) <= sizeof(weft_rwlock_t), "rwlock fits its public type");

/* ---------------------------------------------------------------------- */
/* Read bias: the per-worker reader count table (see "Read bias" above) */

/* Rows of the reader table: one per worker (worker id modulo the rows);
 * OS threads hash into the same rows by the address of their own TLS
 * record. 32 rows keep a writer's scan at 32 loads (independent lines, so
 * they overlap: about as long as one or two remote misses). With more
 * than 32 workers two workers share a row: the counts add up, so that is
 * correct, and costs only a shared line. */
#define WFT_RW_ROWS 32
/* Lock classes: columns. 32 rows x 128 columns of 8-byte counters is 32
 * KiB in all, whatever the number of locks; locks of one column share a
 * row's counter by tagging it with their address, so a collision only
 * sends a reader to the state word. */
#define WFT_RW_COLS 128
/* A counter slot: the lock's address shifted up by WFT_RW_CNT_BITS, plus
 * the number of read holds counted in it. A lock whose address does not
 * fit in 64 - WFT_RW_CNT_BITS bits (none on x86-64 and aarch64 with
 * 48-bit user addresses) never uses the slots. 65,535 holds per slot at
 * most; beyond, readers fall back to the word. */
#define WFT_RW_CNT_BITS 16
#define WFT_RW_CNT_MASK ((UINT64_C(1) << WFT_RW_CNT_BITS) - 1)
/* A writer that revoked the bias keeps it off for this many times the
 * revocation took (BRAVO's inhibition rule, Dice and Kogan 2019: the scans
 * cost at most 1/(N+1) of the time however often writers come). */
#define WFT_RW_INHIBIT_MULT 9
/* The longest inhibition, in us: rebias_us is 32 bits of microseconds,
 * which wrap every 71.6 minutes, so a lock is inhibited only while now is
 * at most this far before rebias_us. A stale value then inhibits for at
 * most this long once per wrap (a hint: readers take the word meanwhile),
 * and a revocation longer than 1/9 of it inhibits for this long only. */
#define WFT_RW_INHIBIT_MAX_US 1000000u
/* The head writer's patience, in us ("Bounded pass"): readers that arrive
 * while a writer is queued may still join the read phase until the head
 * writer has waited this long; then they queue behind it, and the last
 * reader out hands it the lock. Go's mutex waits 1 ms before its
 * starvation mode for the same reason: long enough that most writers get
 * in by retrying at a moment without readers (no hand-off to a parked
 * thread, no convoy of readers parked behind it), short enough to be a
 * latency a writer can live with. */
#define WFT_RW_PASS_US 1000u
/* A writer that has waited this long since it queued gets no patience of
 * its own when it becomes the head: the pass closes at once ("Bounded
 * pass"). Without it the k-th queued writer waits k patiences plus k
 * drains of the readers that passed; with 1,024 threads under TSan that
 * exceeded a minute (tests/check_rwlock bias_scale). Ten patiences: a
 * backlog of writers deeper than that falls back to phase-fair turns. */
#define WFT_RW_STARVE_US 10000u
/* Spin on a slot of another worker's row this long before yielding or
 * sleeping: a reader there is running (or about to), and the benchmark's
 * read sections are 200 ns; twice that plus a cache miss, rounded up. A
 * yield instead lets every runnable thread of our worker run into the
 * revoked lock and park, each needing a wake at our unlock. */
#define WFT_RW_DRAIN_SPIN_NS 2000
/* Sleep backoff of a writer waiting for a reader that does not run (a
 * parked weft thread or a preempted OS thread holding a read lock):
 * doubles from MIN to MAX, like the mutex's store-mode poller. A reader
 * that holds for milliseconds costs the writer at most MAX extra. */
#define WFT_RW_DRAIN_SLEEP_MIN_NS 2000
#define WFT_RW_DRAIN_SLEEP_MAX_NS 128000

struct rw_row {
	/* slot values: see WFT_RW_CNT_BITS; changed only by RMWs */
	_Alignas(64) _Atomic uint64_t slot[WFT_RW_COLS];
};

static struct rw_row rw_table[WFT_RW_ROWS];

/* The fast read hold of an OS thread (a weft thread keeps its own in its
 * TCB: rw_fast_lock, rw_fast_slot). Only the thread itself touches it. */
struct rw_os_hold {
	const void *lock;
	void *slot;
};
static __thread struct rw_os_hold rw_os_hold __attribute__((tls_model("initial-exec")));

/* Fibonacci hashing: the top bits of x times 2^64 / phi. One multiply on
 * the read path; it spreads aligned addresses (locks, TLS records) evenly
 * over the top bits. */
#define WFT_RW_HASH_MUL 0x9e3779b97f4a7c15ull
_Static_assert((WFT_RW_ROWS & (WFT_RW_ROWS - 1)) == 0, "rows: a power of two");
_Static_assert((WFT_RW_COLS & (WFT_RW_COLS - 1)) == 0, "columns: a power of two");

static inline unsigned rw_col(const struct wft_rwlock *rw)
{
	return (unsigned)(((uint64_t)(uintptr_t)rw * WFT_RW_HASH_MUL) >>
			  (64 - __builtin_ctz(WFT_RW_COLS)));
}

/* The row of worker w. */
static inline unsigned rw_worker_row(const struct wft_worker *w)
{
	return (unsigned)w->id & (WFT_RW_ROWS - 1);
}

/* The row of the calling OS thread. */
static inline unsigned rw_os_row(void)
{
	return (unsigned)(((uint64_t)(uintptr_t)&rw_os_hold * WFT_RW_HASH_MUL) >>
			  (64 - __builtin_ctz(WFT_RW_ROWS)));
}

/* The tag of rw in a slot, or 0 if rw's address does not fit. */
static inline uint64_t rw_tag(const struct wft_rwlock *rw)
{
	uint64_t a = (uint64_t)(uintptr_t)rw;

	return a >> (64 - WFT_RW_CNT_BITS) ? 0 : a << WFT_RW_CNT_BITS;
}

/* Does slot value v count read holds of the lock tagged tag? */
static inline bool rw_slot_holds(uint64_t v, uint64_t tag)
{
	return (v & WFT_RW_CNT_MASK) != 0 && (v & ~WFT_RW_CNT_MASK) == tag;
}

#define rw_of(p) ((struct wft_rwlock *)(void *)(p))

/* A time in microseconds, modulo 2^32 (rebias_us, wclose_us). */
static inline uint32_t rw_us(weft_time_t ns)
{
	return (uint32_t)(ns / 1000);
}

/* Is now at most max us before t on the 2^32 us circle? (0 < t - now
 * <= max: a stale t from an earlier wrap is "not before" except for max
 * us once per 71.6 minutes.) */
static inline bool rw_us_within(uint32_t now, uint32_t t, uint32_t max)
{
	uint32_t d = t - now;

	return d != 0 && d <= max;
}

/* rw->bias values; see "Read bias". */
#define WFT_RW_BIAS_OFF      0u   /* slots count no hold of rw (I5) */
#define WFT_RW_BIAS_ON       1u   /* readers may hold through slots */
#define WFT_RW_BIAS_REVOKING 2u   /* off; slots may still count rw */

/*
 * Fast read hold through the reader table (see "Read bias"). Returns true
 * if we hold the lock for reading now.
 * Context: any. May park: no.
 */
static inline bool rd_fast(struct wft_rwlock *rw)
{
	struct wft_worker *w = wft_worker_self();
	struct weft_thread *t = w ? w->current : NULL;
	const void **lockp = t ? &t->rw_fast_lock : &rw_os_hold.lock;
	_Atomic uint64_t *s;
	uint64_t tag, v, nv;

	/* relaxed: a hint; the seq_cst load after the claim decides */
	if (wft_load(&rw->bias, relaxed) != WFT_RW_BIAS_ON)
		return false;
	/* our own record (one fast hold per thread; further holds, of this
	 * lock or another, go through their words) */
	if (*lockp != NULL || (tag = rw_tag(rw)) == 0)
		return false;
	s = &rw_table[t ? rw_worker_row(w) : rw_os_row()].slot[rw_col(rw)];
	/* relaxed: acted on through the CAS */
	v = wft_load(s, relaxed);
	do {
		if ((v & WFT_RW_CNT_MASK) == 0)
			nv = tag | 1;           /* free: tag it for rw */
		else if ((v & ~WFT_RW_CNT_MASK) == tag && (v & WFT_RW_CNT_MASK) != WFT_RW_CNT_MASK)
			nv = v + 1;
		else
			return false;           /* another lock's, or full */
		/* seq_cst: the StoreLoad of "Read bias": the count must be
		 * ordered before our load of bias below, against the writer's
		 * seq_cst store of REVOKING and its seq_cst loads of the slots */
	} while (!wft_cas(s, &v, nv, seq_cst));
	/* seq_cst: pairs with the writer's seq_cst store of REVOKING
	 * (StoreLoad); reading ON also acquires the read holder's release
	 * that stored it (I6), so our section follows the last writer's */
	if (wft_likely(wft_load(&rw->bias, seq_cst) == WFT_RW_BIAS_ON)) {
		/* plain: our own record */
		*lockp = rw;
		if (t)
			t->rw_fast_slot = (void *)s;
		else
			rw_os_hold.slot = (void *)s;
		return true;
	}
	/* A writer revoked the bias meanwhile: give the count back and take
	 * the slow path (the writer waits for the count to drain). */
	/* release: nothing read under it; pairs with the writer's scan */
	wft_fsub(s, 1, release);
	return false;
}

/* The caller's own fast-hold record (a weft thread's in its TCB, an OS
 * thread's in rw_os_hold). Only the thread itself touches it. */
static inline const void **rd_fast_record(void)
{
	struct wft_worker *w = wft_worker_self();
	struct weft_thread *t = w ? w->current : NULL;

	return t ? &t->rw_fast_lock : &rw_os_hold.lock;
}

/* Release our fast read hold of rw if we have one. Returns true if we did.
 * The count goes back to the slot the lock counted in, which the record
 * names: on another worker's row if we moved meanwhile (I7).
 * Context: any. May park: no. */
static inline bool rd_fast_unlock(struct wft_rwlock *rw)
{
	struct wft_worker *w = wft_worker_self();
	struct weft_thread *t = w ? w->current : NULL;
	const void **lockp = t ? &t->rw_fast_lock : &rw_os_hold.lock;
	_Atomic uint64_t *s;

	/* plain: our own record */
	if (wft_likely(*lockp != rw))
		return false;
	s = t ? t->rw_fast_slot : rw_os_hold.slot;
	*lockp = NULL;
	/* release: publishes our read section to the writer whose seq_cst
	 * scan reads the drained count (seq_cst loads acquire). An RMW: the
	 * threads of the slot's row count in it at the same time. */
	wft_fsub(s, 1, release);
	return true;
}

/* Turn the bias back on once the inhibition is over. The caller holds a
 * read hold in the state word (so no writer holds, and its release orders
 * this store before the next writer's acquire: "Read bias", I6) and saw
 * neither WRITER nor WWAIT. Context: any. May park: no. */
static void rebias(struct wft_rwlock *rw)
{
	/* relaxed: a hint (a stale value turns the bias on a little early or
	 * late) */
	if (rw_us_within(rw_us(wft_now()), wft_load(&rw->rebias_us, relaxed),
			 WFT_RW_INHIBIT_MAX_US))
		return;
	/* relaxed: acted on through the CAS */
	uint32_t b = wft_load(&rw->bias, relaxed);

	/* release: with the caller's release of its read hold, orders this
	 * store before the next writer's acquire (I6). From REVOKING too: a
	 * writer that timed out left it (readers still in slots hold under
	 * ON as well, and the next writer scans either way). A CAS, so that
	 * a value stored meanwhile stays. */
	if (b != WFT_RW_BIAS_ON)
		wft_cas(&rw->bias, &b, WFT_RW_BIAS_ON, release);
}

static inline uint64_t readers(uint64_t v)
{
	return v / WFT_RW_READER;
}

/* May a reader that arrives now join the read phase past the queued head
 * writer? v is the state it read (WWAIT set, WRITER clear). Only while
 * CLOSED is clear and the head writer's patience has not run out
 * ("Bounded pass"). The time is a hint read lockless; the caller's CAS,
 * which expects CLOSED clear, decides. Context: any. May park: no. */
static inline bool pass_open(struct wft_rwlock *rw, uint64_t v)
{
	if (v & WFT_RW_CLOSED)
		return false;
	/* relaxed: a hint written under qlock at each change of head
	 * writer; a stale value moves the closing by the staleness only,
	 * and the CAS on state expecting CLOSED clear is the decision */
	return rw_us_within(rw_us(wft_now()), wft_load(&rw->wclose_us, relaxed), WFT_RW_PASS_US);
}

/*
 * Context: any; no concurrent use. May park: no.
 * Returns: 0, EINVAL (rw NULL).
 */
int weft_rwlock_init(weft_rwlock_t *rw)
{
	if (!rw)
		return EINVAL;
	*rw = (weft_rwlock_t)WEFT_RWLOCK_INITIALIZER;
	return 0;
}

static int revoke(struct wft_rwlock *rw, struct weft_thread *self, weft_time_t deadline, bool try);
static void wr_release(struct wft_rwlock *rw);

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (rw NULL or already destroyed), EBUSY (held or waited
 * on).
 */
int weft_rwlock_destroy(weft_rwlock_t *prw)
{
	struct wft_rwlock *rw = rw_of(prw);
	struct weft_thread *self;
	uint64_t v = 0;
	uintptr_t id;
	int r = 0;

	if (!prw)
		return EINVAL;
	id = wft_lock_self_id(&self);
	/* acquire: as trywrlock; the write hold keeps new slow readers and
	 * writers out while we look at the slots */
	if (!wft_cas(&rw->state, &v, WFT_RW_WRITER, acquire))
		return v == WFT_RW_DESTROYED ? EINVAL : EBUSY;
	/* relaxed: our own hold, as in wrlock */
	wft_store(&rw->wowner, id, relaxed);
	if (revoke(rw, self, 0, true)) {
		wr_release(rw);
		return EBUSY;
	}
	wft_slock_lock(&rw->qlock);
	v = WFT_RW_WRITER;
	/* relaxed: ours; cleared first so that no call takes the dead lock
	 * for our write hold */
	wft_store(&rw->wowner, 0, relaxed);
	/* relaxed: nobody is queued (we got the write hold from a free word,
	 * I3, and queued waiters set a flag, which the CAS would see); the
	 * CAS only keeps a racing waiter's flag from being overwritten */
	if (!wft_waitq_empty(&rw->rq) || !wft_waitq_empty(&rw->wq) ||
	    !wft_cas(&rw->state, &v, WFT_RW_DESTROYED, relaxed)) {
		wft_slock_unlock(&rw->qlock);
		/* relaxed: back to ours for wr_release */
		wft_store(&rw->wowner, id, relaxed);
		wr_release(rw);
		return EBUSY;
	}
	wft_slock_unlock(&rw->qlock);
	return r;
}

/* Grant every queued reader: unlink them into q and return how many.
 * Locks: rw->qlock. */
static uint64_t grant_readers_locked(struct wft_rwlock *rw, struct wft_wake_q *q)
{
	struct wft_swaiter *sw;
	uint64_t k = 0;

	while ((sw = wft_waitq_pop_front(&rw->rq)) != NULL) {
		sw->w.result = WFT_SW_GRANTED;
		wft_wake_q_add(q, &sw->w);
		k++;
	}
	return k;
}

/* Grant the head writer (there must be one). Locks: rw->qlock. */
static void grant_writer_locked(struct wft_rwlock *rw, struct wft_wake_q *q)
{
	struct wft_swaiter *sw = wft_waitq_pop_front(&rw->wq);

	sw->w.result = WFT_SW_GRANTED;
	/* relaxed: read for error checks by the new owner after its WOKEN
	 * acquire, which follows this store */
	wft_store(&rw->wowner, sw->id, relaxed);
	wft_wake_q_add(q, &sw->w);
}

/* The waiter flags that the queues call for (I2). Locks: rw->qlock. */
static uint64_t wait_flags_locked(struct wft_rwlock *rw)
{
	return (wft_waitq_empty(&rw->wq) ? 0 : WFT_RW_WWAIT) |
	       (wft_waitq_empty(&rw->rq) ? 0 : WFT_RW_RWAIT);
}

/* Note the head writer's patience in wclose_us for the readers' lockless
 * check ("Bounded pass"). Called whenever the head of wq may have
 * changed. Locks: rw->qlock. */
/* A writer's wait record: the common one (sw.since = when it first
 * queued) and when it became the head writer (0: not yet). */
struct rw_waiter {
	struct wft_swaiter sw;
	weft_time_t head_at;
};

#define rw_waiter_of(s) wft_container_of((s), struct rw_waiter, sw)

/* When writer record sw's patience ends: WFT_RW_PASS_US after it became
 * the head, but no later than WFT_RW_STARVE_US after it queued.
 * Locks: rw->qlock. */
static weft_time_t patience_end_locked(const struct wft_swaiter *sw)
{
	weft_time_t a = rw_waiter_of(sw)->head_at + (weft_time_t)WFT_RW_PASS_US * 1000;
	weft_time_t b = sw->since + (weft_time_t)WFT_RW_STARVE_US * 1000;

	return a < b ? a : b;
}

static void wclose_update_locked(struct wft_rwlock *rw)
{
	struct wft_swaiter *head = wft_waitq_first(&rw->wq);

	/* relaxed: RETRY changes only under qlock, which we hold. While a
	 * writer is in flight its clock still runs: it is the head. */
	if (wft_load(&rw->state, relaxed) & WFT_RW_RETRY)
		return;
	/* relaxed: a hint for pass_open(); the decision is the CAS on state
	 * that sets or expects CLOSED */
	if (head && rw_waiter_of(head)->head_at == 0)
		rw_waiter_of(head)->head_at = wft_now();
	if (head)
		wft_store(&rw->wclose_us, rw_us(patience_end_locked(head)), relaxed);
}

/* Has writer record sw waited its patience at time now? Locks: rw->qlock. */
static bool writer_starved_locked(const struct wft_swaiter *sw, weft_time_t now)
{
	return now >= patience_end_locked(sw);
}

/* The head writer's turn came (the last read hold or the write hold is
 * being released, the caller computes the new word): grant it the write
 * hold if it has waited its patience or CLOSED is set (starved), else
 * unlink it to retry ("Bounded pass"). Returns true if it was granted
 * (the new word must carry WRITER), false if it will retry (the word must
 * not). Nothing is done to the queue here; the caller applies the result
 * with take_turn_locked() after its CAS succeeded.
 * Locks: rw->qlock. */
static bool turn_grants_locked(struct wft_rwlock *rw, uint64_t v)
{
	/* CLOSED: the pass is over; RETRY: one writer in flight already */
	return (v & (WFT_RW_CLOSED | WFT_RW_RETRY)) ||
	       writer_starved_locked(wft_waitq_first(&rw->wq), wft_now());
}

/* A waiter leaves without the lock and I2 is restored; mine is what of
 * the word was its own: 0 for a queued record (reader or writer) that
 * timed out, already unlinked by the caller; WFT_RW_RETRY for a writer
 * woken to retry that gives up (deadline) without taking rw or queueing
 * again. If no writer
 * holds, is queued or is in flight but the leaver, and readers hold rw,
 * the readers queued behind the closed pass are admitted now: otherwise
 * they would wait for the last reader out, while new readers, with no
 * writer waiting, join lockless and may keep the read phase going for
 * ever (I3). If a writer holds, its unlock admits them. CLOSED stays
 * while writers wait (the next head inherits the closed pass: its own
 * wait is at least as long). The next head writer's clock starts.
 * Locks: rw->qlock. */
static void leave_locked(struct wft_rwlock *rw, uint64_t mine, struct wft_wake_q *q)
{
	uint64_t v, nv, k = 0, others;

	/* relaxed: acted on through the CAS */
	v = wft_load(&rw->state, relaxed);
	/* WRITER cannot appear meanwhile: lockless writers need a word of
	 * 0, and the waiter flags or our RETRY stay set until our CAS */
	others = v & WFT_RW_RETRY & ~mine;   /* another writer in flight */
	if (!(v & WFT_RW_WRITER) && !others && wft_waitq_empty(&rw->wq))
		k = grant_readers_locked(rw, q);
	for (;;) {
		nv = (v & ~(WFT_RW_WWAIT | WFT_RW_RWAIT | mine)) | wait_flags_locked(rw);
		if (wft_waitq_empty(&rw->wq) && !others)
			nv &= ~WFT_RW_CLOSED;
		nv += k * WFT_RW_READER;
		/* acq_rel: admitted readers are granted a hold (acquire side
		 * of the holders' releases); without them only flags change.
		 * Lockless readers may come and go, hence a CAS */
		if (wft_cas(&rw->state, &v, nv, acq_rel))
			break;
	}
	wclose_update_locked(rw);
}

/* Apply the head writer's turn decided by turn_grants_locked(): grant it
 * or unlink it with RETRY, into q. Locks: rw->qlock. */
static void take_turn_locked(struct wft_rwlock *rw, bool grant, struct wft_wake_q *q)
{
	struct wft_swaiter *sw;

	if (grant) {
		grant_writer_locked(rw, q);
		/* the next head's clock starts (unless a writer is in flight:
		 * its clock runs on) */
		wclose_update_locked(rw);
	} else {
		/* in flight: still the head for the clock (wclose_us stays) */
		sw = wft_waitq_pop_front(&rw->wq);
		sw->w.result = WFT_SW_RETRY;
		wft_wake_q_add(q, &sw->w);
	}
}

/* The flags of the word after a turn: the queues' (I2), minus the head
 * writer if it is leaving the queue. Locks: rw->qlock. */
static uint64_t flags_after_turn_locked(struct wft_rwlock *rw)
{
	struct wft_swaiter *head = wft_waitq_first(&rw->wq);

	return (head && wft_waitq_next(head) ? WFT_RW_WWAIT : 0) |
	       (wft_waitq_empty(&rw->rq) ? 0 : WFT_RW_RWAIT);
}

/* Unlink a timed-out record (see leave_locked). Locks: rw->qlock. */
static void dequeue_locked(struct wft_rwlock *rw, struct wft_swaiter *sw, struct wft_wake_q *q)
{
	wft_waitq_remove(sw->kind == KIND_READ ? &rw->rq : &rw->wq, sw);
	leave_locked(rw, 0, q);
}

/*
 * Under qlock: take rw if kind may take it now, else queue sw ("Protocol",
 * "Bounded pass"). retry: sw is a writer woken with RETRY (it was the head
 * writer): it may take a free word even with waiter flags set, and it
 * queues again at the head, keeping its since.
 * Returns: 0 (taken), EINVAL, EAGAIN, ETIMEDOUT (deadline passed and rw
 * is held), or -1 (queued: park).
 * Context: any. May park: no. Locks: takes and drops rw->qlock.
 */
static int take_or_queue(struct wft_rwlock *rw, struct wft_swaiter *sw, bool retry,
			 weft_time_t deadline)
{
	struct wft_wake_q q = { 0 };
	int kind = sw->kind;
	uint64_t v, flag;

	wft_slock_lock(&rw->qlock);
	/* relaxed: acted on through the CAS */
	v = wft_load(&rw->state, relaxed);
	for (;;) {
		if (wft_unlikely(v == WFT_RW_DESTROYED)) {
			wft_slock_unlock(&rw->qlock);
			return EINVAL;
		}
		if (kind == KIND_READ && !(v & WFT_RW_WRITER) &&
		    (!(v & WFT_RW_WPEND) || pass_open(rw, v))) {
			if (readers(v) >= WFT_RW_MAX_READERS) {
				wft_slock_unlock(&rw->qlock);
				return EAGAIN;
			}
			/* acquire: pairs with the writer's release */
			if (wft_cas(&rw->state, &v, v + WFT_RW_READER, acquire)) {
				wft_slock_unlock(&rw->qlock);
				return 0;
			}
			continue;
		}
		/* a new writer takes only a free word (queued writers go
		 * first); a retrying one was the head: any word with no
		 * holder. CLOSED is for readers: dropped, WRITER keeps them
		 * out now */
		if (kind == KIND_WRITE &&
		    (retry ? !(v & WFT_RW_WRITER) && readers(v) == 0
			   : (v & ~(WFT_RW_RWAIT | WFT_RW_CLOSED)) == 0)) {
			/* acquire: pairs with the last holder's release */
			if (wft_cas(&rw->state, &v,
				    (v & ~(WFT_RW_CLOSED | WFT_RW_RETRY)) | WFT_RW_WRITER, acquire)) {
				/* relaxed: see grant_writer_locked */
				wft_store(&rw->wowner, sw->id, relaxed);
				if (retry)
					wclose_update_locked(rw);
				wft_slock_unlock(&rw->qlock);
				return 0;
			}
			continue;
		}
		if (deadline != WEFT_TIME_INFINITE && wft_now() >= deadline) {
			if (retry)
				leave_locked(rw, WFT_RW_RETRY, &q);
			wft_slock_unlock(&rw->qlock);
			wft_wake_q_flush(&q);
			return ETIMEDOUT;
		}
		/* A reader that queues because the pass is over closes it,
		 * so that the last reader out grants the writer. */
		if (kind == KIND_READ)
			flag = WFT_RW_RWAIT | (v & WFT_RW_WPEND ? WFT_RW_CLOSED : 0);
		else
			flag = WFT_RW_WWAIT;
		/* relaxed: the RMW pairs with the releaser's CAS (argument
		 * above); the record is published by qunlock. A retrying
		 * writer is back in the queue: RETRY goes */
		if (wft_cas(&rw->state, &v, (v & ~(retry ? WFT_RW_RETRY : 0)) | flag, relaxed))
			break;
	}
	/* A queued writer turns the bias off, so that new readers queue
	 * behind it (writer preference) instead of entering through their
	 * slots; it drains the slots once it holds ("Revocation"). */
	/* relaxed test; seq_cst store: the StoreLoad of "Read bias" */
	if (kind == KIND_WRITE && wft_load(&rw->bias, relaxed) == WFT_RW_BIAS_ON)
		wft_store(&rw->bias, WFT_RW_BIAS_REVOKING, seq_cst);
	if (retry) {
		wft_waitq_push_front(&rw->wq, sw);
	} else {
		sw->since = wft_now();
		wft_waitq_push_back(kind == KIND_READ ? &rw->rq : &rw->wq, sw);
	}
	if (kind == KIND_WRITE)
		wclose_update_locked(rw);
	wft_slock_unlock(&rw->qlock);
	return -1;
}

/*
 * Queue as a reader or a writer and park until granted, or, for a writer,
 * until woken to retry (see "Protocol", "Bounded pass").
 * Context: any. May park: yes.
 * Returns: 0, EINVAL (destroyed), EAGAIN (reader count), ETIMEDOUT.
 */
__attribute__((noinline, cold))
static int lock_slow(struct wft_rwlock *rw, int kind, uintptr_t id, weft_time_t deadline)
{
	struct wft_wake_q q = { 0 };
	struct rw_waiter rww = { .head_at = 0 };
	struct wft_swaiter *sw = &rww.sw;
	bool retry = false;
	int r;

	wft_swaiter_init(sw, id);
	sw->kind = kind;
	for (;;) {
		r = take_or_queue(rw, sw, retry, deadline);
		if (r >= 0)
			return r;
		r = wft_waiter_wait(&sw->w, deadline);
		if (r == ETIMEDOUT) {
			/* Safe even if a grant unlinked us since the deadline: a
			 * grant gives us a hold that keeps destroy at EBUSY until
			 * we unlock (see "Interleavings considered" above); a
			 * RETRY obliges us to try once more, below. */
			wft_slock_lock(&rw->qlock);
			if (sw->queued) {
				dequeue_locked(rw, sw, &q);
				wft_slock_unlock(&rw->qlock);
				wft_wake_q_flush(&q);
				return ETIMEDOUT;
			}
			wft_slock_unlock(&rw->qlock);
			/* Unlinked meanwhile: wait for the WOKEN store (wake_q.c I3). */
			wft_waiter_wait(&sw->w, WEFT_TIME_INFINITE);
		}
		if (sw->w.result == WFT_SW_GRANTED)
			return 0;
		/* RETRY: the last holder left and unlinked us without a grant.
		 * We must try again, and take the lock if it is free even past
		 * our deadline ("Bounded pass": nobody else is obliged to). */
		WFT_ASSERT(sw->w.result == WFT_SW_RETRY && kind == KIND_WRITE);
		wft_waiter_init(&sw->w);
		retry = true;
	}
}

static void wrunlock_slow(struct wft_rwlock *rw);

/* Release the write hold, which the caller holds (wowner is its id).
 * Context: any. May park: no. */
static void wr_release(struct wft_rwlock *rw)
{
	uint64_t v = WFT_RW_WRITER;

	/* relaxed: cleared before the release below publishes it */
	wft_store(&rw->wowner, 0, relaxed);
	/* release: publishes the write section; pairs with the acquire
	 * CASes of the next holders */
	if (wft_likely(wft_cas(&rw->state, &v, 0, release)))
		return;
	wrunlock_slow(rw);
}

/* Wait a little for a slot that still counts read holds of the lock. If
 * it is our worker's row (own), a holder may be a thread of our worker,
 * parked or runnable: let it run (yield, when our worker has other
 * threads), else sleep. Otherwise the holders run on other workers: spin
 * for WFT_RW_DRAIN_SPIN_NS first (they leave within a read section), then
 * yield or sleep as above, doubling *backoff_ns. Returns 0 or ETIMEDOUT
 * (deadline passed; try: at once). Context: any. May park: yes (not with
 * try). */
static int drain_wait(struct weft_thread *self, bool own, weft_time_t start,
		      weft_time_t deadline, uint64_t *backoff_ns, bool try)
{
	weft_time_t now = wft_now();
	uint64_t ns = *backoff_ns;

	if (try || (deadline != WEFT_TIME_INFINITE && now >= deadline))
		return ETIMEDOUT;
	if (!own && now - start < WFT_RW_DRAIN_SPIN_NS) {
		for (int i = 0; i < 8; i++)
			wft_cpu_relax();
		return 0;
	}
	if (self && wft_worker_has_work(wft_worker_self())) {
		weft_yield();
		return 0;
	}
	if (own && now - start < WFT_RW_DRAIN_SPIN_NS) {
		/* nothing else runnable here: the holder is parked, or it
		 * is an OS thread of this row; poll a little before sleeping */
		for (int i = 0; i < 8; i++)
			wft_cpu_relax();
		return 0;
	}
	if (deadline != WEFT_TIME_INFINITE && deadline - now < ns)
		ns = deadline - now;
	weft_sleep_ns(ns);
	if (*backoff_ns < WFT_RW_DRAIN_SLEEP_MAX_NS)
		*backoff_ns *= 2;
	return 0;
}

/*
 * Revoke the read bias: we hold the write hold in the state word; turn the
 * bias off and wait until no slot counts a hold of rw ("Read bias",
 * "Revocation").
 * Returns 0, or ETIMEDOUT/EBUSY (deadline passed, or try and a reader is
 * in): then the caller must release its write hold.
 * Context: any; the caller holds rw for writing. May park: yes (not with try).
 */
static int revoke(struct wft_rwlock *rw, struct weft_thread *self, weft_time_t deadline, bool try)
{
	unsigned col = rw_col(rw);
	uint64_t tag = rw_tag(rw);
	uint64_t backoff = WFT_RW_DRAIN_SLEEP_MIN_NS, inhibit;
	weft_time_t start, end;

	/* relaxed: every store of ON was made under a read hold released
	 * before our acquire of the write hold (I6), so we see the last one
	 * or a later value; OFF is stored only after a complete drain (I5) */
	if (wft_likely(wft_load(&rw->bias, relaxed) == WFT_RW_BIAS_OFF))
		return 0;
	start = wft_now();
	/* seq_cst: the StoreLoad of "Read bias": ordered before our loads of
	 * the slots below, against the readers' seq_cst count then load
	 * (stored even if a queued writer stored it already: its store is
	 * not ordered before our scan) */
	wft_store(&rw->bias, WFT_RW_BIAS_REVOKING, seq_cst);
	for (unsigned r = 0; r < WFT_RW_ROWS; r++) {
		/* seq_cst: the other half of the StoreLoad; also acquires the
		 * release decrements that drained the count (the readers'
		 * sections) */
		while (rw_slot_holds(wft_load(&rw_table[r].slot[col], seq_cst), tag)) {
			/* our worker's row now (we may have moved since the
			 * last wait) */
			struct wft_worker *w = self ? wft_worker_self() : NULL;
			bool own = w && rw_worker_row(w) == r;

			if (drain_wait(self, own, start, deadline, &backoff, try)) {
				/* Readers are still counted: the bias stays
				 * REVOKING (I5) and the next writer scans
				 * again; readers take the slow path meanwhile. */
				return try ? EBUSY : ETIMEDOUT;
			}
		}
	}
	end = wft_now();
	/* relaxed: no slot counts rw and we hold the write hold (I5); a
	 * reader that reads OFF takes the slow path, no ordering needed */
	wft_store(&rw->bias, WFT_RW_BIAS_OFF, relaxed);
	/* relaxed: a hint for rebias() */
	inhibit = WFT_RW_INHIBIT_MULT * (end - start) / 1000;
	if (inhibit > WFT_RW_INHIBIT_MAX_US)
		inhibit = WFT_RW_INHIBIT_MAX_US;
	wft_store(&rw->rebias_us, rw_us(end) + (uint32_t)inhibit, relaxed);
	return 0;
}

static int rdlock_common(weft_rwlock_t *prw, weft_time_t deadline, bool try)
{
	struct wft_rwlock *rw = rw_of(prw);
	struct weft_thread *self;
	uintptr_t id;
	uint64_t v;

	if (!prw)
		return EINVAL;
	if (wft_likely(rd_fast(rw)))
		return 0;
	id = wft_lock_self_id(&self);
	/* relaxed: acted on through the CAS */
	v = wft_load(&rw->state, relaxed);
	while (!(v & WFT_RW_WRITER) && (!(v & WFT_RW_WPEND) || pass_open(rw, v))) {
		if (readers(v) >= WFT_RW_MAX_READERS)
			return EAGAIN;
		/* acquire: the read section must see the last writer's
		 * section; pairs with the release in the writer's unlock.
		 * With WWAIT set this is the bounded pass: the CAS expects
		 * CLOSED clear ("Bounded pass") */
		if (wft_cas_weak(&rw->state, &v, v + WFT_RW_READER, acquire)) {
			/* relaxed: a hint; see rebias() (not while a writer
			 * waits: it turned the bias off, I6) */
			if (wft_feat(RW_BIAS) && !(v & WFT_RW_WPEND) &&
			    wft_load(&rw->bias, relaxed) != WFT_RW_BIAS_ON)
				rebias(rw);
			return 0;
		}
	}
	if (wft_unlikely(v == WFT_RW_DESTROYED))
		return EINVAL;
	if (try)
		return EBUSY;
	/* relaxed: only we can have stored our own id */
	if ((v & WFT_RW_WRITER) && wft_load(&rw->wowner, relaxed) == id)
		return EDEADLK;
	return lock_slow(rw, KIND_READ, id, deadline);
}

static int wrlock_common(weft_rwlock_t *prw, weft_time_t deadline, bool try)
{
	struct wft_rwlock *rw = rw_of(prw);
	struct weft_thread *self;
	uintptr_t id;
	uint64_t v = 0;
	int r;

	if (!prw)
		return EINVAL;
	/* plain: our own record. A fast read hold of rw is counted in a slot,
	 * not in the word, so the CAS below could succeed and revoke() would
	 * then wait for our own count for ever */
	if (wft_unlikely(*rd_fast_record() == rw))
		return try ? EBUSY : EDEADLK;
	id = wft_lock_self_id(&self);
	/* acquire: pairs with the release of the previous holders */
	if (wft_likely(wft_cas(&rw->state, &v, WFT_RW_WRITER, acquire))) {
		/* relaxed: see grant_writer_locked */
		wft_store(&rw->wowner, id, relaxed);
		goto revoke;
	}
	if (wft_unlikely(v == WFT_RW_DESTROYED))
		return EINVAL;
	/* relaxed: only we can have stored our own id */
	if ((v & WFT_RW_WRITER) && wft_load(&rw->wowner, relaxed) == id)
		return try ? EBUSY : EDEADLK;
	if (try)
		return EBUSY;
	r = lock_slow(rw, KIND_WRITE, id, deadline);
	if (r)
		return r;
revoke:
	r = revoke(rw, self, deadline, try);
	if (wft_unlikely(r))
		wr_release(rw);
	return r;
}

/*
 * Context: any. May park: yes.
 * Returns: 0, EINVAL (rw NULL or destroyed), EDEADLK (the caller holds it for writing),
 * EAGAIN (too many read holds).
 */
int weft_rwlock_rdlock(weft_rwlock_t *rw)
{
	return rdlock_common(rw, WEFT_TIME_INFINITE, false);
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (rw NULL or destroyed), EBUSY (a writer holds it or waits), EAGAIN.
 */
int weft_rwlock_tryrdlock(weft_rwlock_t *rw)
{
	return rdlock_common(rw, WEFT_TIME_INFINITE, true);
}

/*
 * Context: any. May park: yes.
 * Returns: as weft_rwlock_rdlock, plus ETIMEDOUT.
 */
int weft_rwlock_timedrdlock(weft_rwlock_t *rw, weft_time_t deadline)
{
	return rdlock_common(rw, deadline, false);
}

/*
 * Context: any. May park: yes.
 * Returns: 0, EINVAL (rw NULL or destroyed), EDEADLK (the caller holds it for writing,
 * or for reading through the reader table).
 */
int weft_rwlock_wrlock(weft_rwlock_t *rw)
{
	return wrlock_common(rw, WEFT_TIME_INFINITE, false);
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (rw NULL or destroyed), EBUSY (held, including by the caller).
 */
int weft_rwlock_trywrlock(weft_rwlock_t *rw)
{
	return wrlock_common(rw, WEFT_TIME_INFINITE, true);
}

/*
 * Context: any. May park: yes.
 * Returns: as weft_rwlock_wrlock, plus ETIMEDOUT.
 */
int weft_rwlock_timedwrlock(weft_rwlock_t *rw, weft_time_t deadline)
{
	return wrlock_common(rw, deadline, false);
}

/* Writer unlock with waiters: start a read phase, or give the head writer
 * its turn (a grant if it is starved, else a wake to retry: "Bounded
 * pass"). Context: any; the caller is the writer and has cleared wowner. */
static void wrunlock_slow(struct wft_rwlock *rw)
{
	struct wft_wake_q q = { 0 };
	uint64_t v, nv, k;
	bool grant;

	wft_slock_lock(&rw->qlock);
	/* relaxed: we hold WRITER, so only qlock holders change the word
	 * (I4), and we hold qlock */
	v = wft_load(&rw->state, relaxed);
	k = grant_readers_locked(rw, &q);
	if (k) {
		nv = k * WFT_RW_READER;
	} else if (!wft_waitq_empty(&rw->wq)) {
		grant = turn_grants_locked(rw, v);
		nv = grant ? WFT_RW_WRITER : WFT_RW_RETRY;
		take_turn_locked(rw, grant, &q);
	} else {
		nv = 0;
	}
	/* a writer in flight stays in flight */
	nv |= wait_flags_locked(rw) | (v & WFT_RW_RETRY);
	/* release: publishes the write section to the admitted holders (and
	 * to lockless acquirers, and to a retrying writer's acquire CAS); a
	 * store is safe by I4. CLOSED is dropped: a new phase starts. */
	wft_store(&rw->state, nv, release);
	wft_slock_unlock(&rw->qlock);
	wft_wake_q_flush(&q);
}

/* Last reader out with waiters: give the head writer its turn (a grant if
 * it is starved, else a wake to retry: "Bounded pass"). Nothing is done
 * to the queue before the CAS that releases our hold succeeds (lockless
 * readers may leave or pass meanwhile and make it fail). Context: any; the
 * caller holds a read hold. */
static void rdunlock_slow(struct wft_rwlock *rw)
{
	struct wft_wake_q q = { 0 };
	struct wft_swaiter *sw;
	uint64_t v, nv, k;
	bool grant = false;

	wft_slock_lock(&rw->qlock);
	/* relaxed: acted on through the CAS */
	v = wft_load(&rw->state, relaxed);
	/* CLOSED changes only under qlock (take_or_queue, the grants), which
	 * we hold, and the head writer's wait only grows: decided once */
	if (!wft_waitq_empty(&rw->wq))
		grant = turn_grants_locked(rw, v);
	for (;;) {
		/* Not the last, or the readers queued behind the closed pass
		 * wait for the writer in flight (it takes the lock, or queues
		 * again and is granted, and admits them at its unlock) */
		if (readers(v) > 1 ||
		    (wft_waitq_empty(&rw->wq) && (v & WFT_RW_RETRY))) {
			/* release: publishes our read section */
			if (wft_cas(&rw->state, &v, v - WFT_RW_READER, release))
				break;
			continue;
		}
		sw = wft_waitq_first(&rw->wq);
		if (sw) {
			/* Granted: WRITER (no reader can join). Retry: a free
			 * word, with WWAIT if more writers wait; readers may
			 * pass again until the retrying writer takes it. */
			nv = (grant ? WFT_RW_WRITER : WFT_RW_RETRY) | (v & WFT_RW_RETRY) |
			     flags_after_turn_locked(rw);
			/* acq_rel: release orders our read section before the
			 * writer's; acquire takes in the release sequence of
			 * the readers that left before us (their decrements),
			 * so their sections (and I6's store of ON) are ordered
			 * before the writer's too: a granted writer
			 * synchronises only with us, through the grant (a
			 * retrying one through its own acquire CAS, which
			 * reads this value or a later one in its release
			 * sequence) */
			if (wft_cas(&rw->state, &v, nv, acq_rel)) {
				take_turn_locked(rw, grant, &q);
				break;
			}
			continue;
		}
		/* Only readers queued behind writers that timed out (I3 says
		 * this cannot last): admit them. */
		k = 0;
		for (sw = wft_waitq_first(&rw->rq); sw; sw = wft_waitq_next(sw))
			k++;
		nv = (readers(v) - 1 + k) * WFT_RW_READER;
		/* acq_rel: as above */
		if (wft_cas(&rw->state, &v, nv, acq_rel)) {
			grant_readers_locked(rw, &q);
			break;
		}
	}
	wft_slock_unlock(&rw->qlock);
	wft_wake_q_flush(&q);
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (rw NULL or destroyed), EPERM (not held, or held for writing by
 * another thread).
 */
int weft_rwlock_unlock(weft_rwlock_t *prw)
{
	struct wft_rwlock *rw = rw_of(prw);
	struct weft_thread *self;
	uintptr_t id;
	uint64_t v;

	if (!prw)
		return EINVAL;
	if (wft_likely(rd_fast_unlock(rw)))
		return 0;
	id = wft_lock_self_id(&self);
	/* relaxed: acted on through the CASes */
	v = wft_load(&rw->state, relaxed);
	if (v & WFT_RW_WRITER) {
		if (wft_unlikely(v == WFT_RW_DESTROYED))
			return EINVAL;
		/* relaxed: only we can have stored our own id */
		if (wft_load(&rw->wowner, relaxed) != id)
			return EPERM;
		wr_release(rw);
		return 0;
	}
	for (;;) {
		if (readers(v) == 0)
			return EPERM;
		if (readers(v) == 1 && (v & (WFT_RW_WWAIT | WFT_RW_RWAIT))) {
			rdunlock_slow(rw);
			return 0;
		}
		/* release: publishes the read section (nothing to publish but
		 * our reads; they must not move after the writer's acquire) */
		if (wft_cas_weak(&rw->state, &v, v - WFT_RW_READER, release))
			return 0;
	}
}
