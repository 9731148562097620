/*
 * sync/mutex.c - weft_mutex_t: adaptive spin-then-park mutex with a FIFO
 * wait queue and hand-off to starving waiters.
 *
 * What it owns
 *   The lock word, the owner-spin policy, the mutex's wait queue and the
 *   hand-off rule; plus the wait-morphing entry points that cond.c uses to
 *   move signalled waiters onto a mutex (sync/mutex.h). docs/design.md
 *   "Mutex"; docs/seeds.md "Seed 001" (test-mutex, adaptive spinning).
 *
 * State word (m->state, one uintptr_t)
 *
 *   bits 63..3 | bit 2   | bit 1    | bit 0
 *   owner id              | HANDOFF  | WAITERS
 *   (bit 2 belongs to the owner id: WFT_ID_OS marks an OS-thread owner)
 *
 *   owner id  0: free. Otherwise the owner's TCB address (a weft thread) or
 *             the address of its thread-local id byte | WFT_ID_OS (an OS
 *             thread). Set by the acquiring CAS, or by a contended unlock
 *             that hands the lock over (I4); cleared only by the owner.
 *   WAITERS   Someone is waiting: the queue is non-empty or a woken waiter
 *             is on its way (I1). Unlock must take the slow path (under
 *             qlock: hand off, or release and maybe wake one). Set by CAS
 *             (atomic with seeing the lock owned) by a thread about to queue,
 *             under qlock; cleared under qlock when the last record leaves
 *             the queue and no woken waiter is in flight.
 *   HANDOFF   Starvation mode, known in advance: the head waiter has been
 *             at the head ("Head time") more than WFT_MUTEX_STARVE_NS.
 *             Unlock must not release: it writes the head waiter's id into the owner field and wakes it
 *             (result HANDED), so nobody can barge past it; spinners stop.
 *             Set by a woken waiter that lost the race and has waited that
 *             long, together with requeueing itself at the head, under
 *             qlock; kept across a hand-off while the next head is starving
 *             too; cleared under qlock when the head leaves by timeout or
 *             the queue empties. (The unlocker also checks wait times itself,
 *             I5 and I7, so the flag is an early notice, not the only
 *             trigger.)
 *
 *   m->woken (under qlock): the record of the one waiter that was woken with
 *   result COMPETE and has not yet resolved (taken the lock, gone back to
 *   the queue, or timed out), or NULL.
 *
 * Invariants
 *   I1. Under qlock: WAITERS <=> (queue non-empty or m->woken != NULL).
 *   I2. HANDOFF => queue non-empty and owner != 0: it is set only by a CAS
 *       that saw an owner, and while it is set unlock never writes owner 0.
 *   I3. At most one woken waiter is in flight. While it is, a normal-mode
 *       unlock wakes nobody else (Go's mutexWoken): the woken waiter will
 *       own the lock (and its unlock deals with the queue) or resolve under
 *       qlock after re-checking the lock word, so a wake is never lost and
 *       never doubled.
 *   I4. No other thread writes the state word while the owner id is set,
 *       except under qlock (flag changes) and the owner itself: every
 *       lockless CAS expects owner 0 or is the owner's own unlock. So the
 *       contended unlock, which holds qlock, may store the new word.
 *   I5. A queued waiter is never passed over for much longer than
 *       WFT_MUTEX_STARVE_NS once it is at the head: every contended unlock
 *       looks at the head's wait time under qlock and hands off when it is
 *       reached.
 *   I6. While a thread spins on the lock word (m->spinner), a normal-mode
 *       unlock wakes nobody (Go's mutexWoken, set by spinners) unless the
 *       head has waited WFT_MUTEX_ROTATE_NS: the spinner takes the lock,
 *       and its unlock deals with the queue; if it gives up instead, it
 *       re-runs the queueing CAS under qlock, which takes the lock if it is
 *       free. So the wake is deferred, never lost.
 *   I7. The woken waiter in flight is covered like the head (it was ahead
 *       of it): once it has waited WFT_MUTEX_STARVE_NS, a contended unlock
 *       stores its id as the owner without waking anything (it is awake
 *       already) and it finds the lock its own (owner == its id) wherever it
 *       looks next - the kernel's PICKUP. I5 and I7 must not depend on the
 *       waiter running: with cooperative scheduling an unlocker that relocks
 *       at once never lets a wakee queued on its own worker run; handing it
 *       the lock makes the unlocker's next lock park, which lets it run.
 *       A weft-thread unlocker that keeps finding the woken waiter in its
 *       own next slot does the same well before that, and yields ("Stuck
 *       woken waiter" below).
 *
 * Normal mode vs hand-off mode (as Go's sync/mutex.go explains its modes)
 *   In normal mode waiters queue FIFO, but a woken waiter does not own the
 *   lock: it competes with new arrivals, which are running on a worker right
 *   now and often win (the lock is re-taken while it is cache-hot, and no
 *   switch is needed). That is what makes a contended mutex fast, and it is
 *   unfair: the woken waiter goes back to the head of the queue. Once a
 *   waiter has been at the head more than WFT_MUTEX_STARVE_NS (1 ms; its
 *   "head time", the record's since field, not its time in the queue),
 *   the mutex hands
 *   off: unlock passes ownership straight to that waiter, newcomers queue at
 *   the tail and do not spin. Hand-off mode ends when the waiter that
 *   receives the lock is the last one or the next head has not waited 1 ms.
 *   Normal mode is much faster; hand-off mode bounds the longest wait
 *   (tests/check_mutex.c measures it).
 *
 * Protocol
 *   "Lock": CAS 0 -> id (acquire). One atomic, no syscall, no allocation.
 *   Slow path: retry while the owner field is 0 (barging is allowed in
 *   normal mode); spin (below); then queue: under qlock, CAS the lock word
 *   to either take it (owner 0) or set WAITERS, push the record (tail, or
 *   head for a woken waiter that lost), drop qlock and park. A woken waiter
 *   also accepts owner == its own id as acquired (I7) at each of those
 *   looks.
 *
 *   "Unlock": in store mode (below) a plain store id -> 0 (release) once
 *   a load has found the word equal to our id; otherwise CAS id -> 0
 *   (release). If flags are set, take qlock (the
 *   word is stable now, I4) and decide: the woken waiter in flight is
 *   starving -> store owner = its id (I7); else the head is starving
 *   (HANDOFF, or I5) -> unlink the head, store owner = its id, drop qlock,
 *   wake it (HANDED) onto our own worker and yield to it if we are a weft
 *   thread (runtime/waiter.c wft_waiter_wake_yield: the lock is idle until
 *   the new owner runs, so it must not wait for a remote wake and kick). Normal mode -> if no woken waiter is in flight and
 *   nobody spins (I3, I6), unlink one (pick RUN_NOW: the head, or one that
 *   can run at once on an idle worker) and make it m->woken; store owner 0
 *   with WAITERS per I1 (the lock is free from here on); drop qlock; wake
 *   it (COMPETE).
 *
 *   The lost-wakeup argument. Concurrency: any number of lockers, one
 *   owner unlocking, waiters timing out, a cond requeueing, all at once.
 *
 *     waiter (about to park)              owner (unlocking)
 *     ----------------------              -----------------
 *     qlock                               CAS state: id -> 0 (RMW, reads
 *     CAS state: v -> v|WAITERS (RMW,       the latest value; fails if any
 *       only if owner(v) != 0)              flag is set)
 *     push record                         failed: qlock; pop + woken;
 *     qunlock                               store owner 0; qunlock; wake
 *     park
 *
 *   Either the waiter's CAS sees the owner field cleared (it takes the lock
 *   instead of queueing) or the owner's CAS sees WAITERS (it fails, takes
 *   qlock, which it gets only after the waiter's qunlock, and finds the
 *   record), because both are read-modify-writes of the same word:
 *   whichever comes second in its modification order reads the other's
 *   write. No fence is needed beyond the RMWs. The woken waiter that loses
 *   re-runs the same CAS under qlock before it stops being m->woken (I3),
 *   so an unlock that skipped its wake because of it is covered by the same
 *   argument; likewise a spinner that gives up (I6).
 *
 *   Linearisation points: lock = the CAS that writes our id (or, for a
 *   hand-off, the unlocker's store of our id); unlock = the CAS or store
 *   that removes our id; a timed-out lock = the unlink of its record under
 *   qlock (or, for the woken waiter, the clearing of m->woken).
 *
 *   Interleavings considered: unlock racing a waiter's queueing (above);
 *   a timeout racing the wake (the waiter looks at `queued` under qlock:
 *   still queued -> it unlinks itself and fixes the flags; already unlinked
 *   -> it waits for the WOKEN store, then owns the lock (HANDED) or competes
 *   (COMPETE), see sync/wake_q.c I3); a timeout of the head while HANDOFF is
 *   set (the flag is cleared under qlock; the unlocker decides under qlock
 *   too, so it sees either the old head or the new one); a woken waiter
 *   whose worker is monopolised by the unlocker (I7); a hand-off to the
 *   woken waiter while it spins, barges or is about to requeue or time out
 *   (each of those looks checks owner == its id first; the requeue and the
 *   timeout decide under qlock, where the hand-off is made); a woken waiter
 *   that times out before competing (it still tries once under qlock, and
 *   clears woken); a barger taking the lock between the release and the
 *   wake (the woken waiter loses and requeues at the head); a cond
 *   broadcast requeueing onto a mutex that is being released
 *   (wft_mutex_requeue re-checks the owner in its CAS loop).
 *
 * Unlock mode ("Unlock mode")
 *   A CAS costs about as much as the rest of an uncontended lock+unlock, so
 *   a mutex that nobody waits for releases with a plain store. m->calm says
 *   which: a count of consecutive calm unlocks (CAS mode), WFT_MUTEX_FAST
 *   (store mode), or WFT_MUTEX_FAST_LEAVE (store mode, and a waiter asks
 *   the next owner to leave it). It is written by the thread that owns m
 *   (so every owner reads the latest value, ordered by the lock itself),
 *   except for one CAS FAST -> FAST_LEAVE by a waiter, under qlock.
 *   - CAS mode: unlock counts (a calm unlock found the word equal to its
 *     id, no flag); the WFT_MUTEX_CALM_UNLOCKS-th calm unlock calls go_fast,
 *     which under qlock switches to store mode if the queue is empty, no
 *     waiter is woken, nobody polls (m->pollers, below), nobody spins and
 *     the word holds no flag; else it counts from 0 again. unlock_slow
 *     (flags seen) counts from 0 too.
 *   - Store mode: unlock loads the word; if it is exactly our id it stores
 *     0 (release), otherwise it takes the CAS path (EPERM, or flags).
 *   - Leaving store mode: only an owner does it, by storing 0 to calm: an
 *     owner whose unlock finds FAST_LEAVE (it then releases by CAS); the
 *     waiter that found m in store mode under qlock (queue_locked) and so
 *     polled instead of queueing, once it has the lock (lock_slow "got");
 *     and a cond signaller that owns m (requeue_fast_locked). A signaller
 *     that does not own m wakes the cond's waiters to lock m afresh
 *     (WFT_SW_RELOCK) instead of queueing them.
 *   - The waiter that finds store mode asks to leave it (queue_locked: CAS
 *     calm FAST -> FAST_LEAVE; a failed CAS means an owner left already).
 *     Without that, an owner that relocks at once keeps m in store mode
 *     and a poller, which sees the word free only by luck, is passed over
 *     for good (tests/check_mutex.c store_mode_starve timed out after 1 s).
 *     With it, the next unlock leaves store mode, the poller's next poll
 *     queues, and the queue's 1 ms hand-off rule (I5, I7) bounds the rest.
 *   - A poller is counted in m->pollers (+1 under qlock at its first poll,
 *     -1 when its lock call returns), and go_fast does not switch while
 *     it is non-zero. Without that, an owner that relocks at once makes
 *     4,096 calm unlocks in about 100 us, less than one poll interval (up
 *     to WFT_MUTEX_POLL_MAX_NS, longer when the poller's worker is busy):
 *     go_fast put m back into store mode before the poller looked again,
 *     and it asked again, passed over once per 4,096 unlocks
 *     (tests/check_mutex.c store_mode_reenter found m back in store mode
 *     after 8,192; so did a second poller's "got", which counts from 0).
 *     The count also lets destroy see a poller (EBUSY), as it sees a
 *     queued waiter.
 *
 *   The race it must survive: a waiter setting WAITERS on an owner that
 *   then overwrites the word with a plain store 0 (the flag is lost and
 *   nobody wakes the waiter). It cannot happen, because in store mode no
 *   flag is ever set: flags are set only under qlock (queue_locked, the
 *   cond requeue, unlock_slow by the owner), each after reading calm under
 *   qlock and finding CAS mode; the switch to store mode is made under
 *   qlock and only when the word holds no flag; and calm leaves store mode
 *   only by an owner's store (a waiter's FAST -> FAST_LEAVE keeps it in
 *   store mode), so an owner that read WFT_MUTEX_FAST at its unlock is in
 *   store mode for its whole ownership: no waiter can find CAS mode under
 *   qlock between that owner's acquisition and its store (the waiter's
 *   qlock section is either before go_fast's, and go_fast then sees its
 *   flag or record and stays in CAS mode, or after it, and reads a store
 *   mode value; and no one but the owner takes calm out of store mode
 *   meanwhile). In store mode the word is therefore always 0 or an owner
 *   id, and a store of 0 by the owner is the same as its CAS. An owner
 *   that read FAST_LEAVE (or raced the waiter's CAS and read FAST: it
 *   releases by store once more, and the next owner leaves) stores calm 0
 *   before its release CAS; a waiter that reads that 0 under qlock sets
 *   WAITERS by an RMW of the word, which the owner's CAS then sees (the
 *   lost-wakeup argument above). The waiter's CAS on calm expects FAST
 *   exactly, so it never lands on a count or on 0 (an owner's store of 0
 *   comes first in calm's modification order or makes the CAS fail).
 *   Trylock, spinners, barging and the owner-death takeover need no flag
 *   and work in both modes.
 *   Memory order: owners store calm outside qlock with release and the
 *   waiters that decide under qlock load it with acquire. A waiter that
 *   reads a CAS-mode value stored by owner O then happens after O's
 *   acquisition, so every plain-store unlock before O (those of store
 *   mode) happens before the waiter's CAS on the word, which therefore
 *   cannot come before one of them in the word's modification order and
 *   be erased by it. (Relaxed would do on x86 and ARMv8, where the CAS
 *   depends on the load, but C11 does not promise it.) Free on x86; one
 *   store-release per CAS-mode unlock on ARM.
 *   The unlock never touches m after its store (a mutex may be destroyed
 *   and freed by the next owner as soon as it is released).
 *   Cost: store mode makes the first waiter after a quiet period poll
 *   (yield, or sleep WFT_MUTEX_POLL_MIN_NS doubling to
 *   WFT_MUTEX_POLL_MAX_NS) until it gets the lock once; then the mutex is
 *   in CAS mode and waiters queue and park again. A mutex contended now
 *   and then pays that poll once per WFT_MUTEX_CALM_UNLOCKS calm unlocks.
 *   The switch is FAST_UNLOCK (runtime/features.def).
 *
 * Stuck woken waiter
 *   A woken waiter runs where the wake path put it, often in the
 *   unlocker's own next slot (always, when every contender is on one
 *   worker: a 1-worker runtime, threads pinned together, or a DRAIN probe,
 *   which sends every thread that wakes to the active worker,
 *   runtime/drain.c). There it cannot run before the unlocker switches
 *   out, and an unlocker that relocks at once (the lock is free: it
 *   released it) never does. Without this rule the woken waiter waited for
 *   the 1 ms of I7, and the queue advanced one waiter per millisecond
 *   for as long as a probe's trial kept a worker draining, a quarter of
 *   what it moves at WFT_MUTEX_ROTATE_NS per waiter. With this rule
 *   test-mutex V 128's longest wait under forced probes fell to about a
 *   third (docs/design.md "Mutex" has the table).
 *   The rule: a contended unlock by a weft thread that finds the woken
 *   waiter in its own worker's next slot counts that (m->stuck, under
 *   qlock, from 0 each time a waiter becomes m->woken); once
 *   WFT_MUTEX_STUCK_UNLOCKS such unlocks have been counted and the waiter
 *   has been woken (head time) WFT_MUTEX_STUCK_NS, the next one stores the
 *   waiter's id as the owner (the I7 PICKUP, early) and yields after
 *   dropping qlock. The
 *   waiter runs next and finds the lock its own; the unlocker, when it runs
 *   again, finds the lock taken and queues at the tail, so every contender
 *   keeps its turn (at least WFT_MUTEX_STUCK_UNLOCKS + 1 acquisitions
 *   and WFT_MUTEX_STUCK_NS). (A plain
 *   yield after a release was rejected: the yielder barges back in when it
 *   runs again, the queue empties into the runqueue, and one thread keeps
 *   the worker. Handing over at the first such unlock was rejected too:
 *   one switch per two acquisitions, and many-waiter throughput collapsed;
 *   a turn of 16 acquisitions alone cost a third of it: docs/design.md
 *   "Measured alternatives".)
 *   With two active workers the unlocker's next lock often finds the lock
 *   held by the other worker's contender before that, and with a thread in
 *   its next slot it parks instead of spinning ("Spin"), which runs the
 *   waiter. Not always: on a host that deschedules one worker the other
 *   runs alone, and the rule fired ~30k times/s in test-mutex V 128 (its
 *   p99 wait became a round of turns, docs/design.md "Mutex").
 *   No wakeup can be lost: nothing is woken (the waiter is awake, I7), the
 *   owner id is stored under qlock by the owner (I4), and the waiter checks
 *   owner == its id at every look (lock_wait steps 1 and 3), so it takes
 *   the lock whether it runs before or after our yield. An OS-thread
 *   unlocker has no next slot and never applies the rule. A thief that
 *   takes the waiter from our next slot between the peek and the yield
 *   makes this the I7 PICKUP ahead of time: the lock waits for the thief's
 *   worker to run it, and that worker's other contenders park meanwhile
 *   (the owner is off CPU, so nobody spins).
 *
 * Spinning ("Spin")
 *   Weft thread: only with OWNER_SPIN on, only while the owner is a weft
 *   thread with on_cpu set (it is running on some worker, so it will release
 *   soon), only while our own worker has nothing else to run (need_resched:
 *   mailbox non-empty, runqueue non-empty or a next-slot thread; seed 001's
 *   break), never in hand-off mode, and at most WFT_MUTEX_SPIN_NS. One
 *   spinner at a time (m->spinner, the kernel's OSQ idea in its simplest
 *   form): the others park at once instead of bouncing the lock word's
 *   cache line between spinners.
 *   OS thread: the same, except that the budget adapts: an estimate of how
 *   long recent spins took to get the lock (an EWMA, glibc's adaptive mutex
 *   idea, which tracks the remaining hold time), doubled, plus a floor; a
 *   spin that fails decays the estimate, so long holds stop spinning. An
 *   OS-thread owner cannot be checked for on_cpu; the budget bounds it.
 *
 * Head time (sw->since)
 *   Starvation is measured from the moment a waiter becomes the head of
 *   the queue (or is picked to be woken from behind it), not from when it
 *   queued: sw->since is set when the record is pushed onto an empty queue,
 *   when the record ahead of it leaves (hand-off, wake, timeout), when pick
 *   takes it from behind the head, and when a cond requeue makes it woken
 *   or head; 0 means "not at the head yet". A woken waiter that loses keeps
 *   it (it goes back to the head). Why: a FIFO of N waiters makes every one
 *   of them wait about N hand-overs whatever the mutex does; measured from
 *   queueing, every waiter of a long queue (1,024 tasks) was "starving", the
 *   mutex stayed in hand-off mode for good, and every acquisition cost a
 *   park and a switch (test-mutex M 1024 and M 10000 fell well below M
 *   128: docs/design.md "Measured alternatives"). Hand-off cannot shorten a wait that is the queue's length;
 *   it can only stop a waiter from being passed over, which is what head
 *   time measures. I5 and I7 bound exactly that: once at the head (or
 *   woken), a waiter is passed over for at most WFT_MUTEX_STARVE_NS.
 *
 * Owner death
 *   Owner ids carry a generation (sync/mutex.h): a thread that exits
 *   holding m leaves its old id in the lock word, which no later thread
 *   (not even one on the same TCB) matches. A locker that is about to
 *   queue (lock_slow step 3, under qlock) or a trylock that finds m held
 *   asks owner_dead(): the owner is a weft thread whose TCB has exited,
 *   is free, or belongs to another generation. It then CASes the dead id
 *   to its own (flags kept, under qlock) and returns EOWNERDEAD: it owns m,
 *   and the state m protects may be half-updated (as a robust pthread
 *   mutex's EOWNERDEAD, without the "consistent" step: the next unlock
 *   makes m normal again). Why this is safe: I4 - the dead owner never
 *   writes the word again, every other lockless CAS expects owner 0, and
 *   the takeover holds qlock. Limits: waiters that queued while the owner
 *   was alive are not woken by its exit; the first locker that comes later
 *   takes m over and its unlock wakes them. An OS-thread owner's exit is
 *   not detected (no cheap liveness test); its reused TLS block gets a new
 *   generation, so at least nobody inherits it.
 *
 * Destroy
 *   A destroyed mutex holds WFT_MUTEX_DESTROYED (sync/mutex.h), an owner id
 *   nobody has: the fast path's CAS from 0 fails and every slow path
 *   checks for it first, so lock, trylock, timedlock, unlock and a second
 *   destroy return EINVAL at no cost on the fast paths.
 *   Destroy returns EBUSY while the mutex is held, queued on, woken for,
 *   spun on or polled on (m->pollers, "Unlock mode"); a locker that has
 *   not reached any of those yet is the caller's race.
 *
 * Rejected alternatives
 *   - A plain store for every unlock (a spinlock's release): no way to see
 *     a waiter that queued just before without a StoreLoad fence, which
 *     costs as much as the CAS; so unlock is a CAS except in store mode,
 *     where nobody queues ("Unlock mode").
 *   - Store mode left by a waiter with membarrier() (an asymmetric Dekker:
 *     the owner stores 0 and then re-reads calm, the waiter writes calm,
 *     issues the barrier, then queues): the owner's re-read touches m after
 *     releasing it, which is a use after free when the next owner destroys
 *     and frees m (a reference count under the mutex does exactly that),
 *     and the barrier costs an IPI per CPU running the process.
 *   - A separate owner field next to a 0/1/2 futex word (2009 kernel): two
 *     stores on the fast path and a window where spinners see no owner.
 *   - Waking every waiter, or the head unconditionally at each unlock: a
 *     herd, or several woken waiters in flight; m->woken gives at most one.
 *   - Detecting starvation only in the woken waiter (Go): it may never run
 *     while the unlocker keeps its worker (no preemption here), so the
 *     unlocker checks (I5, I7).
 *   - Yielding instead of parking when our worker has other work and the
 *     owner runs (a spinner whose PAUSE is a switch, bounded to 16 yields /
 *     20 us, then queue): tried for test-mutex V, where a waiter whose
 *     worker has runnable threads parks at once. Worse at V 16 and V 128,
 *     better but within the ranges at M 1024 (docs/design.md "Measured
 *     alternatives"). Not kept.
 *   - An MCS queue of spinners: the single spinner slot gets the main win
 *     (no lock-word bouncing) on machines with few workers; others park.
 */
#include "sync/mutex.h"

/* Spin budget of a weft thread, in ns (PAUSE costs 25-35 ns here, so the
 * budget is time, not iterations). The spinner's worker has nothing else to
 * run; if it parks instead, its worker goes idle and the unlocker's wake has
 * to push into its mailbox and kick it out of the kernel: a futex wake plus
 * a wake-up latency of several microseconds on this VM class, and a switch
 * on each side. Spinning for about that long (the classic 2-competitive
 * spin-then-block rule) loses at most a factor of two against an oracle. */
#define WFT_MUTEX_SPIN_NS 10000

/* OS-thread adaptive spin: budget = floor + 2 * estimate, capped. The floor
 * (~30 PAUSEs) catches critical sections of a few hundred ns, the usual
 * case; the cap is the weft budget above (a futex sleep costs about that). */
#define WFT_MUTEX_OS_SPIN_MIN_NS 1000
#define WFT_MUTEX_OS_SPIN_MAX_NS 10000

/* Check the clock every this many spin iterations (~8 PAUSEs = ~250 ns, so
 * the ~20 ns clock read is under 10% of the spin). */
#define WFT_MUTEX_SPIN_CLOCK_EVERY 8

/* Starvation threshold: a waiter (the queue's head, or woken and in
 * flight) that has been at the head this long ("Head time") is handed the
 * lock by the next contended unlock (I5, I7), and a woken waiter that loses
 * the race after this long sets HANDOFF (Go's 1 ms: long against a critical
 * section, short against a human). */
#define WFT_MUTEX_STARVE_NS 1000000

/* Rotation: while a spinner is active (I6) queued waiters are not woken, so
 * two threads handing the lock to each other by spinning would leave the
 * queue to the hand-off at WFT_MUTEX_STARVE_NS, and a hand-off to a parked
 * thread costs a remote wake (often a kick) with the lock idle meanwhile.
 * So once the head has waited a quarter of that, a normal-mode unlock wakes
 * one waiter anyway: it comes back running and spinning, competes, and if
 * it still loses for the rest of the millisecond the hand-off finds it
 * awake (I7), which is cheap. A quarter leaves time for a wake with a kick
 * (tens of us on this VM class) and a few rounds of competition. */
#define WFT_MUTEX_ROTATE_NS (WFT_MUTEX_STARVE_NS / 4)

/* Stuck woken waiter: the running thread's turn. The lock is handed to a
 * woken waiter stuck in the unlocker's own next slot once at least this
 * many unlocks have found it there and it has been the woken waiter (its
 * head time) at least this long. The count keeps a host that deschedules
 * the worker from shortening the turn (a stall stops the unlocks too);
 * the time keeps short critical sections from paying a switch every few
 * acquisitions: one turn costs a yield, a park and a wake (1-2 us here),
 * so 50 us bounds that to a few per cent where every contender is on one
 * worker; a shorter time cost short critical sections with many waiters
 * measurably (docs/design.md "Measured alternatives"). With test-mutex
 * V's 1 us holds a turn is
 * ~40 acquisitions, with 3 us holds the count decides. During a DRAIN
 * probe with 127 waiters a turn of 50 us gives a full round in ~6 ms,
 * against 127 ms at the 1 ms of I7. */
#define WFT_MUTEX_STUCK_UNLOCKS 16
#define WFT_MUTEX_STUCK_NS 50000


/* Poll back-off of a waiter that cannot queue (store mode): from a couple
 * of microseconds (a short critical section ends within it) to a bound that
 * keeps a long hold from costing the poller more than a few thousand wakeups
 * a second. Only the first waiter after a quiet period polls. */
#define WFT_MUTEX_POLL_MIN_NS 2000
#define WFT_MUTEX_POLL_MAX_NS 128000

/* The OS-thread owner id lives here (waitq.h); its value is the thread's
 * lock generation (mutex.h), 0 until the thread first locks. */
__thread uint64_t wft_mutex_os_id __attribute__((tls_model("initial-exec")));

/* OS-thread lock generations; relaxed: only uniqueness matters */
static _Atomic uint64_t os_gens;

uint64_t wft_lock_os_gen(void)
{
	return wft_fadd(&os_gens, 1, relaxed) + 1;
}

/* Is generation counter value cur (a TCB's t->seq, or the generation in
 * its join word) newer than the generation in owner id o? 16-bit serial
 * number arithmetic: "newer" is up to 32,767 reuses ahead. An older value
 * (a stale read) is never "newer", so a stale read can only make a dead
 * owner look alive, never the reverse. */
static bool gen_newer(uint64_t cur, uintptr_t o)
{
	uint16_t d = (uint16_t)(cur - (uint64_t)(o >> WFT_LOCK_GEN_SHIFT));

	return d != 0 && d < 0x8000;
}

/*
 * Owner death ("Owner death" in the header comment): has the weft thread
 * named by owner id o exited, or has its TCB been reused since it locked?
 * The join word carries the TCB's current generation (runtime/thread.c
 * "Join protocol"): a newer one means reused; the owner's own one in an
 * exited or free state means exited. A join word that names a joiner has
 * no generation: then t->seq says whether the TCB was reused.
 * OS-thread owners cannot be checked: false.
 * Why a wrong "dead" cannot happen: the owner's generation was stored in
 * t->seq and the join word before the owner first ran, so no read that we
 * make after its lock can show an older owner as newer (gen_newer refuses
 * stale values), and the exited/free codes are written only at its exit.
 * Context: any. May park: no.
 */
static bool owner_dead(uintptr_t o)
{
	struct weft_thread *t;
	uintptr_t js;
	unsigned code;

	if (o == 0 || (o & WFT_ID_OS))
		return false;
	t = wft_lock_id_thread(o);
	/* acquire: a type-stable TCB (runtime/thread.c I1); pairs with the
	 * release of the exit's and the joiner's RMWs on the join word. The
	 * takeover that acts on a "dead" answer is a CAS that expects the dead
	 * owner's id, and a dead owner never writes the lock word again */
	js = wft_load(&t->jstate, acquire);
	if (WFT_JS_IS_JOINER(js))
		/* relaxed, and a plain field: it changes only when the TCB is
		 * respawned, which is what we look for; a torn or stale read
		 * is impossible for an aligned word on our targets and an old
		 * value reads as "alive" (gen_newer) */
		return gen_newer(__atomic_load_n(&t->seq, __ATOMIC_RELAXED), o);
	if (gen_newer(WFT_JS_GEN(js), o))
		return true;
	if ((uint16_t)WFT_JS_GEN(js) != (uint16_t)(o >> WFT_LOCK_GEN_SHIFT))
		return false;    /* an older generation: a stale read */
	code = WFT_JS_CODE(js);
	return code == WFT_J_EXITED || code == WFT_J_EXITED_T || code == WFT_J_FREE;
}

#define MSTAT(name) wft_stat_inc_any(wft_worker_self(), name)

static uint32_t os_budget(struct wft_mutex *m)
{
	/* relaxed: a hint; races between updaters lose a sample at worst */
	uint64_t b = WFT_MUTEX_OS_SPIN_MIN_NS + 2 * (uint64_t)wft_load(&m->os_spin_ns, relaxed);

	return b > WFT_MUTEX_OS_SPIN_MAX_NS ? WFT_MUTEX_OS_SPIN_MAX_NS : (uint32_t)b;
}

static void os_learn(struct wft_mutex *m, bool won, uint64_t spun)
{
	/* relaxed: a hint (see os_budget) */
	int64_t est = wft_load(&m->os_spin_ns, relaxed);

	if (won)
		est += ((int64_t)spun - est) / 8;
	else
		est -= est / 8;
	if (est < 0)
		est = 0;
	wft_store(&m->os_spin_ns, (uint32_t)est, relaxed);
}

/*
 * Spin for the lock (see "Spin" above). Returns true if we took it.
 * Context: any. May park: no.
 */
static bool try_spin(struct wft_mutex *m, uintptr_t id, struct weft_thread *self)
{
	struct wft_worker *w = NULL;
	uint64_t budget, start, now = 0;
	uintptr_t v, o;
	uint32_t z = 0;
	bool won = false;

	if (!wft_feat(OWNER_SPIN))
		return false;
	if (self) {
		w = wft_worker_self();
		if (wft_worker_has_work(w))
			return false;
		budget = WFT_MUTEX_SPIN_NS;
	} else {
		budget = os_budget(m);
	}
	/* relaxed test, then acquire CAS: the slot only serialises spinners;
	 * pairs with the release store that frees it */
	if (wft_load(&m->spinner, relaxed) || !wft_cas(&m->spinner, &z, 1, acquire))
		return false;
	MSTAT(mutex_spins);
	start = wft_now();
	for (unsigned i = 1;; i++) {
		/* relaxed: we only act on it through the CAS below */
		v = wft_load(&m->state, relaxed);
		o = wft_mutex_owner(v);
		if (o == id) {
			/* acquire: handed to us in flight (I7); pairs with the
			 * release store of the unlocker */
			wft_fence(acquire);
			won = true;
			break;
		}
		if (o == 0) {
			/* acquire: pairs with the release CAS of the unlock */
			if (wft_cas(&m->state, &v, v | id, acquire)) {
				won = true;
				break;
			}
			continue;
		}
		if (v & WFT_MUTEX_HANDOFF)
			break;           /* a starving waiter is owed the lock */
		/* relaxed: a hint re-read every iteration; the TCB memory is
		 * type-stable while the runtime runs, so a stale owner only
		 * makes us spin or stop one iteration late */
		if (!(o & WFT_ID_OS) &&
		    !wft_load(&wft_lock_id_thread(o)->on_cpu, relaxed))
			break;           /* owner not running: it will not release soon */
		if (w && wft_worker_has_work(w))
			break;           /* our worker has work: run it instead */
		if (i % WFT_MUTEX_SPIN_CLOCK_EVERY == 0) {
			now = wft_now();
			if (now - start > budget)
				break;
		}
		wft_cpu_relax();
	}
	/* release: orders our spin before the next spinner's; pairs with the
	 * acquire CAS above */
	wft_store(&m->spinner, 0, release);
	if (won)
		MSTAT(mutex_spin_wins);
	else
		MSTAT(mutex_spin_aborts);
	if (!self)
		os_learn(m, won, (won ? wft_now() : now) - start);
	return won;
}

/* "Head time": the record at the head of the queue (if any) gets its head
 * time now unless it has one. *now caches the clock (NULL: read it).
 * Locks: m->qlock. */
static void head_time_locked(struct wft_mutex *m, weft_time_t *now)
{
	struct wft_swaiter *h = wft_waitq_first(&m->q);
	weft_time_t t;

	if (!h || h->since != 0)
		return;
	if (now) {
		if (*now == 0)
			*now = wft_now();
		t = *now;
	} else {
		t = wft_now();
	}
	h->since = t;
}

/* Unlink a timed-out record and keep I1/I2. Locks: m->qlock. */
static void dequeue_locked(struct wft_mutex *m, struct wft_swaiter *sw)
{
	bool was_head = wft_waitq_first(&m->q) == sw;

	wft_waitq_remove(&m->q, sw);
	head_time_locked(m, NULL);
	/* relaxed: flag edits under qlock; the owner's release CAS is an RMW of
	 * the same word, so it sees the result either way (see above) */
	if (wft_waitq_empty(&m->q))
		wft_fand(&m->state, m->woken ? ~WFT_MUTEX_HANDOFF : ~WFT_MUTEX_FLAGS, relaxed);
	else if (was_head)
		wft_fand(&m->state, ~WFT_MUTEX_HANDOFF, relaxed);
}

/* The woken waiter resolved (took the lock, or gave up): stop being
 * m->woken and keep I1. Locks: m->qlock. */
static void unwoken_locked(struct wft_mutex *m)
{
	m->woken = NULL;
	if (wft_waitq_empty(&m->q))
		/* relaxed: under qlock, as in dequeue_locked */
		wft_fand(&m->state, ~WFT_MUTEX_FLAGS, relaxed);
}

/* What queue_locked decided besides a return value (0, EOWNERDEAD,
 * ETIMEDOUT): WAITERS is set, so queue the record and park; or m is in
 * store mode, so wait without queueing ("Unlock mode"). */
enum { Q_PARK = -1, Q_POLL = -2 };

/*
 * Step 3 of lock_slow, under qlock: take m if its owner field is 0 (or
 * was handed to us, I7, or its owner is dead), give up at the deadline,
 * or set WAITERS with the RMW that the lost-wakeup argument rests on.
 * Returns 0 / EOWNERDEAD (we own m), ETIMEDOUT, Q_PARK (WAITERS set: queue
 * sw and park) or Q_POLL (store mode: nobody would wake us).
 * Locks: m->qlock, held on entry and on return.
 */
static int queue_locked(struct wft_mutex *m, uintptr_t id, struct wft_swaiter *sw, bool woken,
			weft_time_t deadline, weft_time_t now)
{
	/* relaxed: the CAS below decides; qlock orders a hand-off */
	uintptr_t v = wft_load(&m->state, relaxed), nv;
	uint32_t c;

	for (;;) {
		if (woken && wft_mutex_owner(v) == id) {
			/* acquire: the hand-off (I7) was made under qlock, which
			 * we hold; the fence pairs with its release store for the
			 * data it protects */
			wft_fence(acquire);
			return 0;
		}
		if (wft_mutex_owner(v) == 0) {
			/* acquire: as in step 1 */
			if (wft_cas(&m->state, &v, v | id, acquire))
				return 0;
			continue;
		}
		if (wft_unlikely(owner_dead(wft_mutex_owner(v)))) {
			/* "Owner death": take it over, flags kept (our unlock
			 * serves the queue). The CAS only elects us; the dead
			 * owner's writes, as far as they got, came with
			 * owner_dead's acquire load of its TCB's join word
			 * (acquire kept here as cheap insurance). Safe by I4: a
			 * dead owner never unlocks, and we hold qlock. */
			if (wft_cas(&m->state, &v, (v & WFT_MUTEX_FLAGS) | id, acquire))
				return EOWNERDEAD;
			continue;
		}
		if (deadline != WEFT_TIME_INFINITE && now >= deadline)
			return ETIMEDOUT;
		/* acquire: a switch to store mode is made under qlock, which
		 * we hold; a CAS-mode value was stored (release) by an owner,
		 * whose predecessors' plain-store unlocks then happen before
		 * our CAS on the word below ("Unlock mode", memory order). A
		 * woken waiter keeps m out of store mode */
		c = wft_load(&m->calm, acquire);
		if (wft_mutex_store_mode(c)) {
			WFT_ASSERT(!woken);
			/* ask the next owner to leave store mode; relaxed: a
			 * request only, and a failure means an owner left */
			if (c == WFT_MUTEX_FAST)
				wft_cas(&m->calm, &c, WFT_MUTEX_FAST_LEAVE, relaxed);
			return Q_POLL;
		}
		nv = v | WFT_MUTEX_WAITERS;
		if (woken && now - sw->since >= WFT_MUTEX_STARVE_NS)
			nv |= WFT_MUTEX_HANDOFF;
		/* relaxed: the RMW itself is the synchronisation with the
		 * owner's release CAS (lost-wakeup argument above); the record
		 * is published by qunlock */
		if (wft_cas(&m->state, &v, nv, relaxed))
			return Q_PARK;
	}
}

/*
 * Park on sw, queued by the caller. Returns when an unlocker has unlinked
 * and woken us (sw->w.result says HANDED or COMPETE), or ETIMEDOUT after
 * unlinking ourselves.
 */
static int park_queued(struct wft_mutex *m, struct wft_swaiter *sw, weft_time_t deadline)
{
	MSTAT(mutex_parks);
	if (wft_waiter_wait(&sw->w, deadline) != ETIMEDOUT)
		return 0;
	wft_slock_lock(&m->qlock);
	if (sw->queued) {
		dequeue_locked(m, sw);
		wft_slock_unlock(&m->qlock);
		return ETIMEDOUT;
	}
	wft_slock_unlock(&m->qlock);
	/* An unlocker unlinked us first: wait for its WOKEN store
	 * (sync/wake_q.c I3), then take what it gave us. */
	wft_waiter_wait(&sw->w, WEFT_TIME_INFINITE);
	return 0;
}

/*
 * m is in store mode, so no unlock looks for waiters ("Unlock mode"): let
 * the owner run (yield, when our worker has other threads) or sleep a
 * little, doubling *backoff_ns up to WFT_MUTEX_POLL_MAX_NS.
 * Returns 0, or ETIMEDOUT once the deadline has passed.
 */
static int poll_wait(struct weft_thread *self, weft_time_t deadline, uint32_t *backoff_ns)
{
	weft_time_t now = wft_now();
	uint64_t ns = *backoff_ns;

	if (deadline != WEFT_TIME_INFINITE) {
		if (now >= deadline)
			return ETIMEDOUT;
		if (deadline - now < ns)
			ns = deadline - now;
	}
	if (self && wft_worker_has_work(wft_worker_self())) {
		weft_yield();
		return 0;
	}
	weft_sleep_ns(ns);
	if (*backoff_ns < WFT_MUTEX_POLL_MAX_NS)
		*backoff_ns *= 2;
	return 0;
}

/*
 * The contended lock (lock_slow's loop). sw is the record to queue (the
 * caller's, already initialised when inited is true); woken says that we
 * are m's woken waiter (m->woken == sw, ours to clear, and the lock may be
 * handed to us, I7). *polled becomes true when we first poll (store mode),
 * and we are then counted in m->pollers ("Unlock mode"); lock_slow undoes
 * that. Returns as lock_slow.
 */
static int lock_wait(struct wft_mutex *m, uintptr_t id, struct weft_thread *self,
		     weft_time_t deadline, struct wft_swaiter *sw, bool woken, bool inited,
		     bool *polled)
{
	uint32_t backoff = WFT_MUTEX_POLL_MIN_NS;
	uintptr_t v;
	int r;

	for (;;) {
		/* 1. Take it while the owner field is 0 (barging, normal mode),
		 * or find it handed to us (I7). */
		/* acquire: for the hand-off case, pairs with the unlocker's
		 * release store; otherwise acted on only through the CAS */
		v = wft_load(&m->state, acquire);
		if (woken && wft_mutex_owner(v) == id)
			goto acquired;
		if (wft_unlikely(v == WFT_MUTEX_DESTROYED))
			return EINVAL;   /* destroyed, so nobody waits on it */
		while (wft_mutex_owner(v) == 0) {
			/* acquire: pairs with the release CAS/store of the unlock */
			if (wft_cas(&m->state, &v, v | id, acquire))
				goto acquired;
		}
		/* 2. Spin while that is worth it. */
		if (!(v & WFT_MUTEX_HANDOFF) && try_spin(m, id, self))
			goto acquired;
		/* 3. Queue and park (or, in store mode, wait and retry). */
		if (!inited) {
			wft_swaiter_init(sw, id);
			inited = true;
		}
		wft_slock_lock(&m->qlock);
		r = queue_locked(m, id, sw, woken, deadline, wft_now());
		if (r >= 0) {
			if (woken)
				unwoken_locked(m);   /* I3 on ETIMEDOUT: the owner's unlock wakes the next */
			woken = false;
			wft_slock_unlock(&m->qlock);
			return r;
		}
		if (r == Q_POLL) {
			if (!*polled) {
				/* relaxed: read under qlock (go_fast, destroy),
				 * which we hold ("Unlock mode") */
				wft_fadd(&m->pollers, 1, relaxed);
				*polled = true;
			}
			wft_slock_unlock(&m->qlock);
			if ((r = poll_wait(self, deadline, &backoff)) != 0)
				return r;
			continue;
		}
		if (woken) {
			/* back at the head, with its head time ("Head time");
			 * WAITERS stays set (I1: queue non-empty) */
			m->woken = NULL;
			woken = false;
			wft_waitq_push_front(&m->q, sw);
		} else {
			/* "Head time": starts now if we are the head */
			sw->since = wft_waitq_empty(&m->q) ? wft_now() : 0;
			wft_waitq_push_back(&m->q, sw);
		}
		wft_slock_unlock(&m->qlock);
		if ((r = park_queued(m, sw, deadline)) != 0)
			return r;
		if (sw->w.result == WFT_SW_HANDED)
			return 0;        /* the unlocker stored our id (I4) */
		/* COMPETE: we are m->woken now (the unlocker set it). */
		woken = true;
		wft_waiter_init(&sw->w);
		sw->w.result = 0;
	}
acquired:
	if (woken) {
		wft_slock_lock(&m->qlock);
		unwoken_locked(m);
		wft_slock_unlock(&m->qlock);
	}
	return 0;
}

/*
 * The contended lock: lock_wait, then, if we polled, stop being counted
 * in m->pollers and ("got") leave store mode if we own m ("Unlock mode").
 * Context: any. May park: yes.
 * Returns: 0, ETIMEDOUT, EINVAL (destroyed), EOWNERDEAD (taken over from an
 * owner that exited; we own m).
 */
__attribute__((noinline, cold))
static int lock_slow(struct wft_mutex *m, uintptr_t id, struct weft_thread *self,
		     weft_time_t deadline, struct wft_swaiter *sw, bool woken, bool inited)
{
	bool polled = false;
	int r = lock_wait(m, id, self, deadline, sw, woken, inited, &polled);

	if (polled) {
		/* We own m (0, EOWNERDEAD): having waited in store mode, we
		 * leave it - safe for an owner, as no other owner can be
		 * mid-unlock. release: pairs with the acquire load of a waiter
		 * that reads it ("Unlock mode", memory order) */
		if (r == 0 || r == EOWNERDEAD)
			wft_store(&m->calm, 0, release);
		/* relaxed: go_fast and destroy read it under qlock; a stale
		 * 1 there only delays a switch or fails a destroy that raced
		 * our lock call (the caller's own race) */
		wft_fsub(&m->pollers, 1, relaxed);
	}
	return r;
}

static int lock_common(weft_mutex_t *pm, weft_time_t deadline)
{
	struct wft_mutex *m = wft_mutex_of(pm);
	struct weft_thread *self;
	struct wft_swaiter sw;
	uintptr_t id, v = 0;

	if (!pm)
		return EINVAL;
	id = wft_lock_self_id(&self);
	/* acquire: the critical section must not start before we own the lock;
	 * pairs with the release CAS/store of the previous owner's unlock */
	if (wft_likely(wft_cas(&m->state, &v, id, acquire)))
		return 0;
	if (wft_mutex_owner(v) == id)
		return EDEADLK;
	if (wft_unlikely(v == WFT_MUTEX_DESTROYED))
		return EINVAL;
	return lock_slow(m, id, self, deadline, &sw, false, false);
}

/*
 * Context: any. May park: yes.
 * Returns: 0, EINVAL (m NULL or destroyed), EDEADLK (already owned by the
 * caller), EOWNERDEAD (the owner exited holding m; the caller owns it now).
 */
int weft_mutex_lock(weft_mutex_t *m)
{
	return lock_common(m, WEFT_TIME_INFINITE);
}

/*
 * Context: any. May park: yes.
 * Returns: as weft_mutex_lock, plus ETIMEDOUT.
 */
int weft_mutex_timedlock(weft_mutex_t *m, weft_time_t deadline)
{
	return lock_common(m, deadline);
}

/*
 * trylock found the owner dead: take m over under qlock, as lock_slow does.
 * Context: any. May park: no.
 * Returns: EOWNERDEAD (we own m), EBUSY (someone else took it first).
 */
static int take_dead(struct wft_mutex *m, uintptr_t id)
{
	uintptr_t v;
	int r = EBUSY;

	wft_slock_lock(&m->qlock);
	/* relaxed: acted on only through the CAS */
	v = wft_load(&m->state, relaxed);
	while (owner_dead(wft_mutex_owner(v))) {
		/* acquire: as in lock_slow's takeover (the visibility
		 * comes from owner_dead's acquire load) */
		if (wft_cas(&m->state, &v, (v & WFT_MUTEX_FLAGS) | id, acquire)) {
			r = EOWNERDEAD;
			break;
		}
	}
	wft_slock_unlock(&m->qlock);
	return r;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (m NULL or destroyed), EBUSY (owned by anyone,
 * including the caller), EOWNERDEAD (as weft_mutex_lock).
 */
int weft_mutex_trylock(weft_mutex_t *pm)
{
	struct wft_mutex *m = wft_mutex_of(pm);
	struct weft_thread *self;
	uintptr_t id, v = 0;

	if (!pm)
		return EINVAL;
	id = wft_lock_self_id(&self);
	/* acquire: as in lock_common */
	if (wft_likely(wft_cas(&m->state, &v, id, acquire)))
		return 0;
	while (wft_mutex_owner(v) == 0)
		/* acquire: as above (normal mode allows barging) */
		if (wft_cas(&m->state, &v, v | id, acquire))
			return 0;
	if (wft_unlikely(v == WFT_MUTEX_DESTROYED))
		return EINVAL;
	if (wft_unlikely(owner_dead(wft_mutex_owner(v))))
		return take_dead(m, id);
	return EBUSY;
}

int wft_mutex_lock_id(struct wft_mutex *m, uintptr_t id, struct weft_thread *self)
{
	struct wft_swaiter sw;
	uintptr_t v = 0;

	/* acquire: as in lock_common */
	if (wft_cas(&m->state, &v, id, acquire))
		return 0;
	if (wft_unlikely(v == WFT_MUTEX_DESTROYED))
		return EINVAL;
	return lock_slow(m, id, self, WEFT_TIME_INFINITE, &sw, false, false);
}

int wft_mutex_relock(struct wft_mutex *m, struct wft_swaiter *sw, struct weft_thread *self)
{
	int result = sw->w.result;

	if (result == WFT_SW_HANDED)
		return 0;
	WFT_ASSERT(result == WFT_SW_COMPETE || result == WFT_SW_RELOCK);
	wft_waiter_init(&sw->w);
	sw->w.result = 0;
	if (result == WFT_SW_RELOCK)   /* not queued on m: lock it afresh */
		return wft_mutex_lock_id(m, sw->id, self);
	return lock_slow(m, sw->id, self, WEFT_TIME_INFINITE, sw, true, true);
}

/* ---------------------------------------------------------------------- */
/* Unlock. */

/* Has sw been at the head long enough to be owed the lock (I5, I7)? */
static bool starving(struct wft_swaiter *sw, weft_time_t *now)
{
	if (*now == 0)
		*now = wft_now();
	return *now - sw->since >= WFT_MUTEX_STARVE_NS;
}

/* Has the head been at the head long enough to be woken despite a spinner
 * (I6)? */
static bool rotate(struct wft_swaiter *head, weft_time_t *now)
{
	if (*now == 0)
		*now = wft_now();
	return *now - head->since >= WFT_MUTEX_ROTATE_NS;
}

/* Has the woken waiter sw been found in the next slot of the unlocker's
 * worker by WFT_MUTEX_STUCK_UNLOCKS unlocks, this one included, and been
 * the woken waiter for WFT_MUTEX_STUCK_NS? It cannot run there before the
 * unlocker switches out ("Stuck woken waiter", I7).
 * Locks: m->qlock (sw is m->woken). */
static bool stuck_here(struct wft_mutex *m, struct wft_swaiter *sw, weft_time_t *now)
{
	struct wft_worker *w = wft_worker_self();

	/* the next slot is ours to read (owner); relaxed inside the peek: a
	 * hint, a thief may take the thread from it right after (then this
	 * is the I7 PICKUP ahead of time, see "Stuck woken waiter") */
	/* the thread from the waiter's id, which never changes: sw->w.thread
	 * is rewritten without qlock by the woken waiter (wft_waiter_init) */
	if (!w || !w->current || (sw->id & WFT_ID_OS) ||
	    wft_next_peek(w) != wft_lock_id_thread(sw->id))
		return false;
	if (m->stuck < WFT_MUTEX_STUCK_UNLOCKS)
		m->stuck++;
	/* *now was read by starving() just before */
	return m->stuck >= WFT_MUTEX_STUCK_UNLOCKS && *now - sw->since >= WFT_MUTEX_STUCK_NS;
}

/*
 * The contended unlock: flags were set, so take qlock first and decide
 * there (the word is stable meanwhile: we own m and hold qlock, I4), in
 * this order:
 *  - the woken waiter in flight is starving, or stuck in our next slot: store
 *    its id as the owner; it is awake and picks the lock up (I7); if it was
 *    stuck, yield so that our worker runs it ("Stuck woken waiter");
 *  - the head is starving (HANDOFF, or I5): unlink it, store its id as the
 *    owner, wake it with HANDED;
 *  - normal mode: store owner 0 (WAITERS per I1), and unless a woken waiter
 *    is in flight or someone spins (I3, I6) unlink one (pick) and wake it
 *    with COMPETE after qlock.
 * Context: any; the caller owns m. May park: no.
 * Returns: 0, EPERM.
 */
__attribute__((noinline, cold))
static int unlock_slow(struct wft_mutex *m, uintptr_t id, uintptr_t v)
{
	struct wft_swaiter *sw, *next;
	weft_time_t now = 0;
	uintptr_t nv;
	bool wake, stuck = false;

	if (wft_unlikely(v == WFT_MUTEX_DESTROYED))
		return EINVAL;
	if (wft_mutex_owner(v) != id)
		return EPERM;
	/* someone waits: count calm unlocks from zero ("Unlock mode");
	 * release: as every owner's store to calm outside qlock (memory
	 * order) */
	wft_store(&m->calm, 0, release);
	wft_slock_lock(&m->qlock);
	/* relaxed: stable while we own m and hold qlock (I4) */
	v = wft_load(&m->state, relaxed);
	sw = m->woken;
	wake = false;
	if (sw && !starving(sw, &now) && !(stuck = stuck_here(m, sw, &now)))
		sw = NULL;
	if (!sw) {
		sw = wft_waitq_first(&m->q);
		if (sw && ((v & WFT_MUTEX_HANDOFF) || starving(sw, &now))) {
			wft_waitq_remove(&m->q, sw);
			head_time_locked(m, &now);
			sw->w.result = WFT_SW_HANDED;
			wake = true;
		} else {
			sw = NULL;
		}
	}
	if (sw) {
		/* Hand-off: to m->woken (stays m->woken until it picks the
		 * lock up) or to the head. */
		nv = sw->id;
		next = wft_waitq_first(&m->q);
		if (next || m->woken)
			nv |= WFT_MUTEX_WAITERS;
		if (next && starving(next, &now))
			nv |= WFT_MUTEX_HANDOFF;
		/* release: publishes our critical section to the new owner
		 * (which may also get it through a later WOKEN store) and to
		 * lockless readers of the word; a store is safe by I4 */
		wft_store(&m->state, nv, release);
		wft_slock_unlock(&m->qlock);
		MSTAT(mutex_handoffs);
		if (wake)
			wft_waiter_wake_yield(&sw->w);   /* runs next, here */
		else if (stuck)
			weft_yield();   /* let our worker run it ("Stuck woken waiter") */
		return 0;
	}
	/* relaxed: a hint; a spinner that gives up re-checks the lock word
	 * under qlock before it parks (lock_slow step 3), so skipping the wake
	 * for it cannot strand the queue (I6). The head that has waited
	 * WFT_MUTEX_ROTATE_NS is woken anyway (see "Rotation"). */
	next = wft_waitq_first(&m->q);
	sw = NULL;
	if (!m->woken && next &&
	    (!wft_load(&m->spinner, relaxed) || rotate(next, &now)) &&
	    (sw = wft_wake_q_pick(&m->q, WFT_PICK_RUN_NOW)) != NULL) {
		wft_waitq_remove(&m->q, sw);
		/* a picked non-head starts its head time now; the new head
		 * (if the head was picked) too */
		if (sw->since == 0) {
			if (now == 0)
				now = wft_now();
			sw->since = now;
		}
		head_time_locked(m, &now);
		sw->w.result = WFT_SW_COMPETE;
		m->woken = sw;
		m->stuck = 0;
	}
	/* release: publishes the critical section; pairs with the acquire CAS
	 * of the next owner. WAITERS per I1; HANDOFF cannot be set here (it
	 * would have sent us to the hand-off). A store is safe by I4. */
	wft_store(&m->state, (!wft_waitq_empty(&m->q) || m->woken) ? WFT_MUTEX_WAITERS : 0,
		  release);
	wft_slock_unlock(&m->qlock);
	if (sw)
		wft_waiter_wake(&sw->w);
	return 0;
}

/*
 * The owner has made WFT_MUTEX_CALM_UNLOCKS calm unlocks in a row: switch m
 * to store mode unless someone waits, polls or spins, else count again
 * ("Unlock mode"). Context: any; the caller owns m. May park: no.
 */
__attribute__((noinline, cold))
static void go_fast(struct wft_mutex *m, uintptr_t id)
{
	uint32_t c = 0;

	if (wft_feat(FAST_UNLOCK)) {
		wft_slock_lock(&m->qlock);
		/* relaxed: under qlock, where waiters decide whether to queue
		 * (queue_locked) and set flags, and pollers are counted;
		 * spinner is a hint */
		if (wft_waitq_empty(&m->q) && !m->woken && !wft_load(&m->spinner, relaxed) &&
		    !wft_load(&m->pollers, relaxed) && wft_load(&m->state, relaxed) == id)
			c = WFT_MUTEX_FAST;
		/* relaxed: owners' data; the next owner acquires it with the
		 * lock, and queue_locked reads it under qlock */
		wft_store(&m->calm, c, relaxed);
		wft_slock_unlock(&m->qlock);
		return;
	}
	/* release: as every owner's store to calm outside qlock */
	wft_store(&m->calm, c, release);
}

int wft_mutex_unlock_id(struct wft_mutex *m, uintptr_t id)
{
	/* relaxed: calm is written by owners (and we own m, if v == id), so
	 * we read the latest value, or FAST where a waiter's CAS has just made
	 * it FAST_LEAVE (one more store-mode unlock; "Unlock mode"); state
	 * holds only our id or a flagged word while we own m (I4) */
	uint32_t c = wft_load(&m->calm, relaxed);
	uintptr_t v = wft_load(&m->state, relaxed);

	if (wft_likely(v == id)) {
		if (wft_likely(c == WFT_MUTEX_FAST)) {
			/* release: publishes the critical section; pairs with
			 * the acquire CAS of the next owner. A store is safe:
			 * in store mode nobody sets a flag ("Unlock mode") */
			wft_store(&m->state, 0, release);
			return 0;
		}
		if (c == WFT_MUTEX_FAST_LEAVE)
			/* a waiter polls: leave store mode, then release by
			 * CAS ("Unlock mode"); release: pairs with the acquire
			 * load of a waiter that reads it (memory order) */
			wft_store(&m->calm, 0, release);
		else if (c + 1 < WFT_MUTEX_CALM_UNLOCKS)
			/* release: as above (a plain store on x86) */
			wft_store(&m->calm, c + 1, release);
		else
			go_fast(m, id);
		/* release: publishes the critical section; pairs with the
		 * acquire CAS of the next owner (lock_common, lock_slow,
		 * try_spin) */
		if (wft_likely(wft_cas(&m->state, &v, 0, release)))
			return 0;
	}
	return unlock_slow(m, id, v);
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (m NULL or destroyed), EPERM (the caller does not own
 * m).
 */
int weft_mutex_unlock(weft_mutex_t *pm)
{
	struct weft_thread *self;
	uintptr_t id;

	if (!pm)
		return EINVAL;
	id = wft_lock_self_id(&self);
	return wft_mutex_unlock_id(wft_mutex_of(pm), id);
}

/* ---------------------------------------------------------------------- */
/* Wait morphing (cond.c). */

/*
 * Wait morphing needs flags on m, which store mode forbids ("Unlock
 * mode"). The signaller that owns m switches it back (safe for an owner);
 * any other signaller wakes the records to lock m afresh (RELOCK), as a
 * cond without wait morphing would. Returns true if the records went into
 * wq. Locks: m->qlock (so the mode cannot change under us).
 */
static bool requeue_fast_locked(struct wft_mutex *m, struct wft_waitq *list, struct wft_wake_q *wq)
{
	struct weft_thread *self;
	struct wft_swaiter *sw;

	/* acquire: as in queue_locked (we hold qlock, and we may set
	 * WAITERS below on a CAS-mode value) */
	if (!wft_mutex_store_mode(wft_load(&m->calm, acquire)))
		return false;
	/* relaxed: only the owner itself can make this true */
	if (wft_mutex_owner(wft_load(&m->state, relaxed)) == wft_lock_self_id(&self)) {
		/* relaxed: owners' data, and we own m */
		wft_store(&m->calm, 0, relaxed);
		return false;
	}
	while ((sw = wft_waitq_pop_front(list)) != NULL) {
		sw->w.result = WFT_SW_RELOCK;
		wft_wake_q_add(wq, &sw->w);
	}
	return true;
}

void wft_mutex_requeue(struct wft_mutex *m, struct wft_waitq *list, struct wft_wake_q *wq)
{
	struct wft_swaiter *sw;
	weft_time_t now;
	uintptr_t v;

	if (wft_waitq_empty(list))
		return;
	wft_slock_lock(&m->qlock);
	if (requeue_fast_locked(m, list, wq)) {
		wft_slock_unlock(&m->qlock);
		return;
	}
	now = wft_now();
	for (sw = wft_waitq_first(list); sw; sw = wft_waitq_next(sw)) {
		/* sw->claim is already WFT_SW_CLAIMED ("on the mutex"): cond.c
		 * claimed each record by CAS before handing it over. Head time
		 * is set below for the one that becomes woken or head. */
		sw->since = 0;
		sw->skips = 0;
	}
	/* relaxed: acted on only through the CAS */
	v = wft_load(&m->state, relaxed);
	for (;;) {
		if (wft_mutex_owner(v) == 0 && !m->woken) {
			/* Free and nobody in flight: the first one competes now. */
			sw = wft_waitq_pop_front(list);
			sw->since = now;
			sw->w.result = WFT_SW_COMPETE;
			m->woken = sw;
			m->stuck = 0;
			wft_wake_q_add(wq, &sw->w);
		}
		/* relaxed: as in lock_slow; WAITERS for the records we queue or
		 * the woken one (I1), set by an RMW that saw either an owner (its
		 * unlock will come through qlock) or owner 0 with m->woken set
		 * (which resolves under qlock, I3) */
		if (wft_cas(&m->state, &v, v | WFT_MUTEX_WAITERS, relaxed))
			break;
	}
	wft_waitq_splice_back(&m->q, list);
	head_time_locked(m, &now);
	wft_slock_unlock(&m->qlock);
}

/* ---------------------------------------------------------------------- */

/*
 * Context: any; no thread may use m concurrently. May park: no.
 * Returns: 0, EINVAL (m NULL).
 */
int weft_mutex_init(weft_mutex_t *m)
{
	if (!m)
		return EINVAL;
	*m = (weft_mutex_t)WEFT_MUTEX_INITIALIZER;
	return 0;
}

/*
 * Context: any. May park: no.
 * Returns: 0, EINVAL (m NULL or already destroyed), EBUSY (locked, waited
 * on - queued or polling -, or a woken waiter or spinner is still on its
 * way).
 * After 0 the lock word holds WFT_MUTEX_DESTROYED, so later calls (until
 * weft_mutex_init) return EINVAL instead of locking freed state.
 */
int weft_mutex_destroy(weft_mutex_t *pm)
{
	struct wft_mutex *m = wft_mutex_of(pm);
	uintptr_t v = 0;
	int r = 0;

	if (!pm)
		return EINVAL;
	wft_slock_lock(&m->qlock);
	/* relaxed: destroying a mutex in use is the caller's race; the CAS
	 * only keeps a racing lock from being overwritten */
	if (m->woken != NULL || !wft_waitq_empty(&m->q) || wft_load(&m->spinner, relaxed) != 0 ||
	    wft_load(&m->pollers, relaxed) != 0 ||
	    !wft_cas(&m->state, &v, WFT_MUTEX_DESTROYED, relaxed))
		r = v == WFT_MUTEX_DESTROYED ? EINVAL : EBUSY;
	wft_slock_unlock(&m->qlock);
	return r;
}
