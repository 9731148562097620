/*
 * runtime/gang.c - gang scheduling: groups of light threads dispatched
 * together on distinct workers, taking turns in time slices.
 *
 * What it owns: the gang objects (include/weft/gang.h), the gang matrix
 * (which gangs may run when, on which workers), the slice ticker, the
 * hold-back of members whose gang's slice is over, and the gang spin
 * helper and barrier. docs/gangs.md has the rationale and the numbers;
 * the seed is 004 (gang scheduling in CFS, docs/seeds.md).
 *
 * Objects:
 *   struct weft_gang: k members (struct wft_gang_member, one cache line
 *     each), the workers chosen for them, its slot in the matrix, and
 *     `active`, 1 while its slot is the current one.
 *   The matrix (gm below): an array of slots; each slot holds gangs whose
 *     worker sets are disjoint (a new gang goes into the first slot with
 *     k free workers, else into a new slot). One slot is current at a
 *     time; the ticker makes the next slot with live members current
 *     every slice (round robin), so the gangs of one slot run at the same
 *     time and gangs of different slots take turns (Ousterhout's matrix).
 *   The ticker: a plain OS thread, started by the first gang while GANG
 *     is on and stopped by weft_shutdown. It sleeps on a condition
 *     variable until the current slice ends and only rotates while there
 *     are two slots or more.
 *
 * Invariants:
 *   I1 (GANG on) member i of a gang is pinned to worker g->m[i].worker,
 *      and the workers of one gang are distinct, so members that run at
 *      the same time run on k distinct workers. Gangs of one slot have
 *      disjoint worker sets.
 *   I2 gm.lock protects the matrix, every gang's slot and slot_next, a
 *      gang's state and member count, and the ticker's life. Gangs are
 *      freed only under gm.lock after leaving the matrix, so the ticker,
 *      which walks the matrix under the lock, never touches a freed gang.
 *   I3 m->t is the member's TCB from the start of its trampoline until
 *      its function returned or it called weft_exit (member_leave), else
 *      NULL. A held member (m->held 1) is
 *      inside step_aside(), so its TCB is alive.
 *   I4 A member only parks in step_aside() while m->held is 1, and only
 *      the ticker (activate) or the member itself clears m->held.
 *   I5 gm.live lists every gang from its create to its destroy (gm.lock).
 *      The API calls look a handle up there under gm.lock before using
 *      it, so a destroyed (freed) or made-up handle gets EINVAL, not a
 *      use after free: a handle is only dereferenced once found. A
 *      member's own calls (weft_gang_index, the spin helper, yield points)
 *      reach their gang through the member record, which lives as long
 *      as the gang: destroy waits for the join, the join for the members.
 *
 * Hold protocol (a member whose gang's slice is over steps aside; the
 * ticker releases it at the gang's next turn). The race to survive: the
 * member sees active == 0 and decides to park while the ticker makes the
 * gang active again and looks for held members to wake.
 *
 *   member (step_aside)                   ticker (activate, gm.lock held)
 *   ------------------------------        ------------------------------
 *   store held = 1          (seq_cst)     store active = 1       (seq_cst)
 *   if load active == 1:    (seq_cst)     for each member:
 *       if xchg held -> 0 == 1: return        if xchg held -> 0 == 1:
 *       return  (the ticker cleared it;            weft_unpark(member)
 *                its unpark token stays
 *                pending: a spurious return
 *                of a later park)
 *   while load held == 1:   (acquire)
 *       weft_park()
 *
 * Either the member sees active == 1 or the ticker sees held == 1,
 * because both sides store then load with seq_cst operations (a StoreLoad
 * pair: in the single total order one store comes first, and the other
 * side's later load sees it). If the ticker sees held == 1 its exchange
 * clears it and it unparks the member; the unpark token makes the wake
 * stick even if it comes before the member's weft_park (weft/thread.h),
 * and the park loop re-checks held, so spurious returns are harmless. If
 * both see each other, the exchange decides who cleared held: exactly
 * one of them, and the member returns either way. So a held member is
 * never stranded while its gang is active. Interleavings considered:
 * activation before the member's held store (it sees active, clears its
 * own held); between its store and its load (both see each other, the
 * exchange decides); after its load (the ticker finds held, unparks);
 * deactivation again before the released member runs (it returns from
 * step_aside, sees active == 0 at its next point and holds again); a
 * stray unpark of a held member (the loop parks again).
 * Deactivation is a relaxed store: a member that reads the stale 1 runs
 * until its next scheduling point, which is what a slice end means.
 * Linearisation point of a release: the ticker's exchange of held.
 * tests/models/gang_hold.pml model-checks this protocol with spin (and
 * that dropping the re-check, or making the held store a plain one,
 * strands a member).
 *
 * Concurrency table (who may run at the same time as whom):
 *                      step_aside  activate  deactivate  spin/peers_on
 *   step_aside (m)        -- (1)      yes        yes         yes
 *   activate (g)          yes         no (2)     no (2)      yes
 *   deactivate (g)        yes         no (2)     no (2)      yes
 *   spin/peers_on         yes         yes        yes         yes (3)
 * (1) only m itself runs its step_aside; (2) both run under gm.lock;
 * (3) reads only (relaxed hints re-read every step).
 * gm.lock is a pthread mutex, taken by the ticker and by create, spawn,
 * join, destroy and info: a weft thread that contends for it blocks its
 * worker for the holder's critical section (microseconds: no call made
 * under it parks).
 *
 * Spin rule (weft_gang_spin_until, GANG on, the caller a member): before
 * each spin step every other member's TCB state is read (relaxed, a hint
 * re-read at every step): all RUNNING -> spin; otherwise the member yields
 * (gang_spin_aborts). A peer that stops running after the check costs at
 * most one spin step; a peer that is held, parked, queued, not started or
 * finished is never spun on for longer than that. Two refinements for
 * the OS level, where a worker's OS thread may itself be preempted by the
 * kernel (a loaded host): after EMPTY_YIELDS_MAX aborts whose weft yield
 * ran nothing else, and after GANG_OS_YIELD_NS of spinning on peers that
 * are all "running", the member calls sched_yield() once, so that a
 * preempted peer's worker may get this CPU (the kernel's directed yield
 * on a pause-loop exit, in spirit).
 *
 * Cost. Per slice the ticker does O(k) work per gang in the two slots it
 * switches (a store, one exchange and at most one unpark per member) and
 * O(slots) to find the next live slot. An ordinary scheduling decision
 * pays nothing: pick() has no gang branch at all (members are pinned
 * threads like any other, and the hold-back is a park); weft_yield tests
 * one flag on the TCB line a switch touches anyway. A spin step of a member reads k-1 TCB lines, which stay
 * in the member's cache while the peers keep running.
 *
 * Rejected: a gang-aware pick() that skips members of inactive gangs (a
 * scan of the runqueue, or a per-worker gang queue that every pick must
 * look at: a shared line read by every pick); holding members back in the
 * runqueue (they would still be picked and switched to). Parking them
 * costs one park and one wake per member per turn, O(k) per slice. An
 * in-runtime timer on one worker as the slice clock was rejected because
 * a worker running a spinning member reaches no scheduling point, so its
 * timers would not fire; the ticker is an OS thread that sleeps between
 * slices (one futex wake per slice, only while two slots exist).
 */
#include "runtime/wft.h"
#include "runtime/diag.h"
#include "runtime/env.h"
#include "runtime/os_policy.h"

#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weft/gang.h>
#include <weft/sync.h>

enum { GANG_OPEN = 0, GANG_JOINING, GANG_JOINED };

struct wft_gang_member {
	struct weft_gang *g;
	unsigned idx;
	int worker;                       /* its worker (I1), -1 with GANG off */
	weft_fn_t fn;
	void *arg;
	weft_thread_t handle;             /* from weft_spawn; gm.lock, then the joiner */
	struct weft_thread *_Atomic t;    /* I3 */
	_Atomic int held;                 /* Hold protocol */
	_Atomic uint64_t arrive_ns;       /* when it resumed from a hold ... */
	_Atomic uint64_t arrive_act;      /* ... in this activation of its gang */
} wft_cacheline_aligned;

struct weft_gang {
	unsigned k;
	uint64_t slice_ns;
	_Atomic int active;               /* 1: its slot is current (always 1 with GANG off) */
	_Atomic uint64_t act;             /* activations so far (written by the ticker) */
	_Atomic uint64_t slices, runs;    /* weft_gang_info; written under gm.lock */
	_Atomic unsigned nlive;           /* members spawned and not returned */
	unsigned nspawned;                /* gm.lock */
	unsigned nrel;                    /* members released by the last activation; gm.lock */
	int state;                        /* GANG_*; gm.lock */
	int slot;                         /* matrix slot, -1 if none; gm.lock */
	uint64_t epoch;                   /* gm.epoch when placed: a gang of an earlier
	                                   * runtime is not in the current matrix */
	bool gang_on;                     /* GANG when created */
	struct weft_gang *slot_next;      /* gm.lock */
	struct weft_gang *live_next;      /* gm.live: created, not destroyed; gm.lock */
	struct wft_gang_member m[];
};

struct gang_slot {
	struct weft_gang *gangs;
	uint64_t used[WEFT_WORKERS_MAX / 64];   /* workers taken by its gangs */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;              /* the ticker waits on it (CLOCK_MONOTONIC) */
	struct gang_slot *slots;
	int nslots, cap;
	struct weft_gang *live;           /* every gang created and not destroyed (I5) */
	int cur;                          /* the current slot */
	int next_base;                    /* where the next new slot's workers start */
	weft_time_t slice_end;            /* end of the current slice */
	uint64_t epoch;                   /* bumped at every shutdown */
	bool ticker_on, stop;
	pthread_t ticker;
} gm = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t gm_once = PTHREAD_ONCE_INIT;

static void gm_init_once(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&gm.cond, &a);
	pthread_condattr_destroy(&a);
}

/* The calling thread's member record, or NULL. */
static inline struct wft_gang_member *self_member(struct weft_thread **tp)
{
	struct weft_thread *t = wft_thread_self();

	if (tp)
		*tp = t;
	return t && t->in_gang ? t->gang : NULL;
}

static inline bool member_gang_on(const struct wft_gang_member *m)
{
	return m && m->g->gang_on;
}

/* ---------------------------------------------------------------------- */
/* Hold protocol: the member's half. */

/* A held member resumed at its gang's turn: note when, for the
 * co-dispatch counters the ticker sums at the end of the slice. */
static void arrived(struct wft_gang_member *m)
{
	/* relaxed act: ordered by the acquire of held in step_aside, which
	 * read the ticker's seq_cst exchange made after it bumped act */
	uint64_t act = atomic_load_explicit(&m->g->act, memory_order_relaxed);

	/* relaxed: published by the release store of arrive_act below */
	atomic_store_explicit(&m->arrive_ns, wft_now(), memory_order_relaxed);
	/* release: pairs with the ticker's acquire in account() */
	atomic_store_explicit(&m->arrive_act, act, memory_order_release);
}

/* The member m, running, found its gang inactive: park until the
 * gang's next turn (see "Hold protocol" above). Context: m's own thread. */
static __attribute__((noinline)) void step_aside(struct wft_gang_member *m)
{
	struct weft_gang *g = m->g;

	/* seq_cst: the store half of the Hold protocol's StoreLoad pair */
	atomic_store_explicit(&m->held, 1, memory_order_seq_cst);
	/* seq_cst: the load half; pairs with the ticker's seq_cst store of
	 * active and exchange of held */
	if (atomic_load_explicit(&g->active, memory_order_seq_cst)) {
		/* acq_rel: races the ticker's exchange; whoever reads 1 cleared
		 * it. If the ticker did, its unpark stays as a pending token */
		(void)atomic_exchange_explicit(&m->held, 0, memory_order_acq_rel);
		return;
	}
	wft_wait_note(wft_thread_self(), "gang", g);
	/* acquire: pairs with the ticker's exchange (act, written before it) */
	while (atomic_load_explicit(&m->held, memory_order_acquire))
		weft_park();
	wft_wait_clear(wft_thread_self());
	arrived(m);
}

/* A gang scheduling point of member m (GANG on). relaxed: a hint, see
 * "Hold protocol" (deactivation). */
static inline void sched_point(struct wft_gang_member *m)
{
	if (!atomic_load_explicit(&m->g->active, memory_order_relaxed))
		step_aside(m);
}

void wft_gang_yield_point(struct wft_gang_member *m)
{
	if (member_gang_on(m))
		sched_point(m);
}

/* ---------------------------------------------------------------------- */
/* The matrix (gm.lock held throughout). */

static inline bool mask_test(const uint64_t *m, int i)
{
	return (m[i / 64] >> (i % 64)) & 1;
}

static inline void mask_set(uint64_t *m, int i, bool on)
{
	if (on)
		m[i / 64] |= 1ull << (i % 64);
	else
		m[i / 64] &= ~(1ull << (i % 64));
}

/* Make g active and release its held members (the ticker's half of the
 * Hold protocol). Context: gm.lock held. */
static void activate(struct weft_gang *g)
{
	unsigned nrel = 0;

	/* relaxed: the members read act after the acquire of held (arrived) */
	atomic_store_explicit(&g->act, atomic_load_explicit(&g->act, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	/* relaxed: read by weft_gang_info as a counter */
	atomic_store_explicit(&g->slices, atomic_load_explicit(&g->slices, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	wft_stat_os_inc(gang_slices);
	/* seq_cst: the store half of the Hold protocol's StoreLoad pair */
	atomic_store_explicit(&g->active, 1, memory_order_seq_cst);
	for (unsigned i = 0; i < g->nspawned; i++) {
		struct wft_gang_member *m = &g->m[i];

		/* seq_cst: the load half (an RMW: exactly one of the member
		 * and us clears held) */
		if (atomic_exchange_explicit(&m->held, 0, memory_order_seq_cst)) {
			/* relaxed t: I3, a held member's TCB is alive */
			weft_unpark(atomic_load_explicit(&m->t, memory_order_relaxed));
			nrel++;
		}
	}
	g->nrel = nrel;
}

/* The slice of g is over: sum its co-dispatch (from the first released
 * member resuming to the last) and make it inactive. Context: gm.lock. */
static void deactivate(struct weft_gang *g)
{
	uint64_t act = atomic_load_explicit(&g->act, memory_order_relaxed);
	uint64_t lo = UINT64_MAX, hi = 0;
	unsigned n = 0;

	for (unsigned i = 0; i < g->nspawned; i++) {
		struct wft_gang_member *m = &g->m[i];

		/* acquire: pairs with the release in arrived() (arrive_ns) */
		if (atomic_load_explicit(&m->arrive_act, memory_order_acquire) == act) {
			uint64_t ns = atomic_load_explicit(&m->arrive_ns, memory_order_relaxed);

			lo = ns < lo ? ns : lo;
			hi = ns > hi ? ns : hi;
			n++;
		}
	}
	if (n) /* relaxed: a counter, read by weft_gang_info */
		atomic_store_explicit(&g->runs, atomic_load_explicit(&g->runs, memory_order_relaxed) + 1,
				      memory_order_relaxed);
	if (n >= 2 && n == g->nrel) {
		wft_stat_os_inc(gang_codispatches);
		wft_stat_os_add(gang_codispatch_ns, hi - lo);
	}
	/* relaxed: a hint for the members (Hold protocol, deactivation) */
	atomic_store_explicit(&g->active, 0, memory_order_relaxed);
}

static bool slot_live(int s)
{
	for (struct weft_gang *g = gm.slots[s].gangs; g; g = g->slot_next)
		/* relaxed: a hint; a slot whose last member just left gets one
		 * more turn at most */
		if (atomic_load_explicit(&g->nlive, memory_order_relaxed))
			return true;
	return false;
}

static uint64_t slot_slice(int s)
{
	uint64_t ns = 0;

	for (struct weft_gang *g = gm.slots[s].gangs; g; g = g->slot_next)
		ns = g->slice_ns > ns ? g->slice_ns : ns;
	return ns ? ns : WEFT_GANG_SLICE_DEFAULT_NS;
}

/* The next slot with live members after the current one gets its turn;
 * the current slot keeps it if no other has live members. */
static void rotate(weft_time_t now)
{
	int old = gm.cur, next = old;

	for (int i = 1; i < gm.nslots; i++) {
		int s = (old + i) % gm.nslots;

		if (slot_live(s)) {
			next = s;
			break;
		}
	}
	if (next != old) {
		for (struct weft_gang *g = gm.slots[old].gangs; g; g = g->slot_next)
			deactivate(g);
		gm.cur = next;
		for (struct weft_gang *g = gm.slots[next].gangs; g; g = g->slot_next)
			activate(g);
	}
	gm.slice_end = now + slot_slice(gm.cur);
}

static void *ticker_main(void *arg)
{
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	wft_os_policy_helper();
	pthread_mutex_lock(&gm.lock);
	while (!gm.stop) {
		weft_time_t now;

		if (gm.nslots < 2) {
			pthread_cond_wait(&gm.cond, &gm.lock);
			continue;
		}
		now = wft_now();
		if (now < gm.slice_end) {
			struct timespec ts = { (time_t)(gm.slice_end / 1000000000u),
					       (long)(gm.slice_end % 1000000000u) };

			pthread_cond_timedwait(&gm.cond, &gm.lock, &ts);
			continue;
		}
		rotate(now);
	}
	pthread_mutex_unlock(&gm.lock);
	return NULL;
}

/* Put g into the matrix: the first slot with k free workers, else a new
 * slot whose workers start at next_base (so that slots spread over the
 * workers). Returns 0 or EAGAIN. Context: gm.lock held. */
static int place(struct weft_gang *g)
{
	int n = wft_rt.nworkers, s;
	unsigned got = 0;

	for (s = 0; s < gm.nslots; s++) {
		int used = 0;

		for (int i = 0; i < WEFT_WORKERS_MAX / 64; i++)
			used += __builtin_popcountll(gm.slots[s].used[i]);
		if (n - used >= (int)g->k)
			break;
	}
	if (s == gm.nslots) {
		if (gm.nslots == gm.cap) {
			int cap = gm.cap ? gm.cap * 2 : 4;
			struct gang_slot *v = realloc(gm.slots, (size_t)cap * sizeof(*v));

			if (!v)
				return EAGAIN;
			gm.slots = v;
			gm.cap = cap;
		}
		memset(&gm.slots[s], 0, sizeof(gm.slots[s]));
		gm.nslots++;
	}
	for (int j = 0; j < n && got < g->k; j++) {
		int w = (gm.next_base + j) % n;

		if (!mask_test(gm.slots[s].used, w)) {
			mask_set(gm.slots[s].used, w, true);
			g->m[got++].worker = w;
		}
	}
	gm.next_base = (gm.next_base + (int)g->k) % n;
	g->slot = s;
	g->epoch = gm.epoch;
	g->slot_next = gm.slots[s].gangs;
	gm.slots[s].gangs = g;
	if (s == gm.cur) {
		activate(g);
	} else {
		/* relaxed: nobody runs its members yet */
		atomic_store_explicit(&g->active, 0, memory_order_relaxed);
		if (gm.nslots == 2) {
			/* the first turn-taking: start the clock */
			gm.slice_end = wft_now() + slot_slice(gm.cur);
			pthread_cond_signal(&gm.cond);
		}
	}
	return 0;
}

/* Take g out of the matrix (joined or destroyed). Context: gm.lock. */
static void unplace(struct weft_gang *g)
{
	struct gang_slot *sl;
	struct weft_gang **pp;
	int s = g->slot;

	if (s < 0 || g->epoch != gm.epoch)
		return;
	g->slot = -1;
	sl = &gm.slots[s];
	for (pp = &sl->gangs; *pp != g; pp = &(*pp)->slot_next)
		;
	*pp = g->slot_next;
	for (unsigned i = 0; i < g->k; i++)
		mask_set(sl->used, g->m[i].worker, false);
	if (sl->gangs)
		return;
	/* The slot is empty: the last slot moves into its place. */
	{
		int last = gm.nslots - 1;
		bool was_cur = gm.cur == s;

		gm.slots[s] = gm.slots[last];
		for (struct weft_gang *h = gm.slots[s].gangs; h; h = h->slot_next)
			h->slot = s;
		gm.nslots--;
		if (gm.cur == last)
			gm.cur = s;
		if (was_cur && gm.nslots) {
			gm.cur = s % gm.nslots;
			for (struct weft_gang *h = gm.slots[gm.cur].gangs; h; h = h->slot_next)
				activate(h);
			gm.slice_end = wft_now() + slot_slice(gm.cur);
		}
		if (!gm.nslots)
			gm.cur = 0;
	}
}

/* Start the ticker if it is not running. Returns 0 or EAGAIN. gm.lock. */
static int ticker_start(void)
{
	sigset_t all, old;
	int rc;

	if (gm.ticker_on)
		return 0;
	gm.stop = false;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&gm.ticker, NULL, ticker_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return EAGAIN;
	gm.ticker_on = true;
	return 0;
}

void wft_gang_shutdown_unsafe(void)
{
	pthread_once(&gm_once, gm_init_once);
	pthread_mutex_lock(&gm.lock);
	if (gm.ticker_on) {
		gm.stop = true;
		pthread_cond_signal(&gm.cond);
		pthread_mutex_unlock(&gm.lock);
		pthread_join(gm.ticker, NULL);
		pthread_mutex_lock(&gm.lock);
		gm.ticker_on = false;
	}
	free(gm.slots);
	gm.slots = NULL;
	gm.nslots = gm.cap = gm.cur = gm.next_base = 0;
	gm.epoch++;
	pthread_mutex_unlock(&gm.lock);
}

/* ---------------------------------------------------------------------- */
/* API */

static uint64_t default_slice(void)
{
	unsigned long us = WEFT_GANG_SLICE_DEFAULT_NS / 1000;

	/* a bad value was refused... here it falls back to the default, with
	 * the message wft_env_ulong prints */
	if (wft_env_ulong("WEFT_GANG_SLICE_US", WEFT_GANG_SLICE_MIN_NS / 1000,
			  WEFT_GANG_SLICE_MAX_NS / 1000, &us))
		us = WEFT_GANG_SLICE_DEFAULT_NS / 1000;
	return (uint64_t)us * 1000;
}

/* Is g a gang created and not destroyed (I5)? Context: gm.lock held. */
static bool live_locked(const struct weft_gang *g)
{
	for (const struct weft_gang *h = gm.live; h; h = h->live_next)
		if (h == g)
			return true;
	return false;
}

/* Take gm.lock and look g up (I5). Returns true with the lock held, or
 * false (unlocked) if g is NULL or not a live gang. */
static bool lock_live(const struct weft_gang *g)
{
	if (!g)
		return false;
	pthread_once(&gm_once, gm_init_once);
	pthread_mutex_lock(&gm.lock);
	if (live_locked(g))
		return true;
	pthread_mutex_unlock(&gm.lock);
	return false;
}

int weft_gang_create(weft_gang_t *out, unsigned k, const weft_gang_attr_t *attr)
{
	struct weft_gang *g;
	uint64_t slice = 0;
	int rc = 0;

	if (!out || k == 0 || k > WEFT_WORKERS_MAX)
		return EINVAL;
	if (wft_in_forked_child())
		return ENOTSUP;   /* gm.lock may have been held by the ticker at the fork */
	if (attr) {
		for (size_t i = 0; i < sizeof(attr->reserved) / sizeof(attr->reserved[0]); i++)
			if (attr->reserved[i])
				return EINVAL;
		if (attr->slice_ns && (attr->slice_ns < WEFT_GANG_SLICE_MIN_NS ||
				       attr->slice_ns > WEFT_GANG_SLICE_MAX_NS))
			return EINVAL;
		slice = attr->slice_ns;
	}
	/* acquire: pairs with the release store of RUNNING in weft_init */
	if (atomic_load_explicit(&wft_rt.state, memory_order_acquire) != WFT_RT_RUNNING) {
		rc = weft_init(NULL);
		if (rc && rc != EBUSY)
			return rc;
	}
	if (k > (unsigned)wft_rt.nworkers)
		return EINVAL;
	if (posix_memalign((void **)&g, WFT_CACHELINE,
			   sizeof(*g) + (size_t)k * sizeof(struct wft_gang_member)))
		return EAGAIN;
	memset(g, 0, sizeof(*g) + (size_t)k * sizeof(struct wft_gang_member));
	g->k = k;
	g->slice_ns = slice ? slice : default_slice();
	g->slot = -1;
	g->gang_on = wft_feat(GANG);
	for (unsigned i = 0; i < k; i++) {
		g->m[i].g = g;
		g->m[i].idx = i;
		g->m[i].worker = -1;
	}
	/* relaxed: published by the gang's hand-over to the caller */
	atomic_store_explicit(&g->active, 1, memory_order_relaxed);
	pthread_once(&gm_once, gm_init_once);
	pthread_mutex_lock(&gm.lock);
	if (g->gang_on) {
		rc = ticker_start();
		if (rc == 0)
			rc = place(g);
	}
	if (rc == 0) {
		g->live_next = gm.live;
		gm.live = g;
	}
	pthread_mutex_unlock(&gm.lock);
	if (rc) {
		free(g);
		return rc;
	}
	*out = g;
	return 0;
}

/* The member leaves its gang: its function returned, or it called
 * weft_exit (wft_gang_exit). Context: m's own thread. */
static void member_leave(struct wft_gang_member *m, struct weft_thread *self)
{
	/* release: as the store in member_main; peers then see no TCB (I3)
	 * and stop spinning on this member */
	atomic_store_explicit(&m->t, NULL, memory_order_release);
	self->in_gang = false;
	self->gang = NULL;
	/* relaxed: a hint for the ticker's choice of slot (slot_live): a gang
	 * whose members all left gets no more turns */
	atomic_fetch_sub_explicit(&m->g->nlive, 1, memory_order_relaxed);
}

void wft_gang_exit(struct weft_thread *self)
{
	member_leave(self->gang, self);
}

/* Every member runs this around its function (I3). */
static void *member_main(void *arg)
{
	struct wft_gang_member *m = arg;
	struct weft_thread *self = wft_thread_self();
	void *ret;

	self->gang = m;
	self->in_gang = true;
	/* release: peers read our TCB through it (relaxed there: a hint) */
	atomic_store_explicit(&m->t, self, memory_order_release);
	if (m->g->gang_on)
		sched_point(m);   /* a gang whose turn it is not waits for it */
	ret = m->fn(m->arg);
	member_leave(m, self);
	return ret;
}

/* Spawn g's next member (weft_gang_spawn, and weft_spawn with a gang in
 * its attribute). attr: NULL, or attributes whose gang is NULL or g.
 * *out (if out is not NULL) receives the member's handle. */
static int gang_spawn(weft_gang_t g, weft_fn_t fn, void *arg, const weft_attr_t *attr,
		      weft_thread_t *out)
{
	weft_attr_t a = WEFT_ATTR_INITIALIZER;
	struct wft_gang_member *m;
	int rc;

	if (!fn)
		return EINVAL;
	if (wft_in_forked_child())
		return ENOTSUP;
	if (attr) {
		if (attr->worker != -1 || attr->detached)
			return EINVAL;
		if (attr->reserved[0] && attr->reserved[0] != (void *)g)
			return EINVAL;   /* the attribute names another gang */
		a = *attr;
		a.reserved[0] = NULL;   /* the member itself is spawned plainly */
	}
	if (!lock_live(g))
		return EINVAL;
	if (g->state != GANG_OPEN || g->nspawned >= g->k) {
		rc = EINVAL;
		goto out;
	}
	m = &g->m[g->nspawned];
	m->fn = fn;
	m->arg = arg;
	a.worker = g->gang_on ? m->worker : -1;
	/* relaxed: the member decrements it; the ticker reads a hint */
	atomic_fetch_add_explicit(&g->nlive, 1, memory_order_relaxed);
	rc = weft_spawn(&m->handle, member_main, m, &a);
	if (rc) {
		atomic_fetch_sub_explicit(&g->nlive, 1, memory_order_relaxed);
		goto out;
	}
	g->nspawned++;
	if (out)
		*out = m->handle;
out:
	pthread_mutex_unlock(&gm.lock);
	return rc;
}

int weft_gang_spawn(weft_gang_t g, weft_fn_t fn, void *arg, const weft_attr_t *attr)
{
	return gang_spawn(g, fn, arg, attr, NULL);
}

int wft_gang_spawn_attr(weft_thread_t *out, weft_fn_t fn, void *arg, const weft_attr_t *attr)
{
	return gang_spawn((weft_gang_t)attr->reserved[0], fn, arg, attr, out);
}

int weft_attr_setgang(weft_attr_t *attr, weft_gang_t g)
{
	if (!attr)
		return EINVAL;
	attr->reserved[0] = g;
	return 0;
}

int weft_gang_join(weft_gang_t g, void **rets)
{
	struct wft_gang_member *me = self_member(NULL);
	unsigned n;
	int rc = 0;

	if (!g)
		return EINVAL;
	if (me && me->g == g)
		return EDEADLK;
	if (wft_in_forked_child())
		return ENOTSUP;
	if (!lock_live(g))
		return EINVAL;
	if (g->state != GANG_OPEN) {
		pthread_mutex_unlock(&gm.lock);
		return EINVAL;
	}
	g->state = GANG_JOINING;   /* no more members: nspawned is final */
	n = g->nspawned;
	pthread_mutex_unlock(&gm.lock);
	/* g stays live: destroy refuses a gang that is being joined (EBUSY) */
	for (unsigned i = 0; i < n; i++) {
		void *r = NULL;
		int e = weft_join(g->m[i].handle, &r);

		if (e && !rc)
			rc = e;
		if (rets)
			rets[i] = r;
	}
	pthread_mutex_lock(&gm.lock);
	g->state = GANG_JOINED;
	unplace(g);
	pthread_mutex_unlock(&gm.lock);
	return rc;
}

int weft_gang_destroy(weft_gang_t g)
{
	struct weft_gang **pp;

	if (!g)
		return EINVAL;
	if (wft_in_forked_child())
		return ENOTSUP;
	if (!lock_live(g))
		return EINVAL;
	if (g->state == GANG_JOINING || (g->nspawned && g->state != GANG_JOINED)) {
		pthread_mutex_unlock(&gm.lock);
		return EBUSY;
	}
	unplace(g);
	for (pp = &gm.live; *pp != g; pp = &(*pp)->live_next)
		;
	*pp = g->live_next;
	pthread_mutex_unlock(&gm.lock);
	free(g);
	return 0;
}

int weft_gang_info(weft_gang_t g, weft_gang_info_t *info)
{
	if (!g || !info)
		return EINVAL;
	if (wft_in_forked_child())
		return ENOTSUP;
	if (!lock_live(g))
		return EINVAL;
	memset(info, 0, sizeof(*info));
	info->k = g->k;
	info->members = g->nspawned;
	info->slice_ns = g->slice_ns;
	/* relaxed: counters */
	info->slices = atomic_load_explicit(&g->slices, memory_order_relaxed);
	info->runs = atomic_load_explicit(&g->runs, memory_order_relaxed);
	pthread_mutex_unlock(&gm.lock);
	return 0;
}

int weft_gang_index(void)
{
	struct wft_gang_member *m = self_member(NULL);

	return m ? (int)m->idx : -1;
}

int weft_gang_yield(void)
{
	/* weft_yield is a gang scheduling point (wft_gang_yield_point) */
	return weft_yield();
}

/* Is every other member of m's gang running on a worker? relaxed: hints,
 * re-read at every spin step (see "Spin rule"). */
static bool peers_on(struct wft_gang_member *m)
{
	struct weft_gang *g = m->g;

	for (unsigned i = 0; i < g->k; i++) {
		struct weft_thread *t;

		if (i == m->idx)
			continue;
		t = atomic_load_explicit(&g->m[i].t, memory_order_relaxed);
		if (!t || atomic_load_explicit(&t->state, memory_order_relaxed) != WFT_T_RUNNING)
			return false;
	}
	return true;
}

/* Spin steps between looks at the clock in the bounded spin. */
#define SPIN_CLOCK_EVERY 64

/* The bounded spin: GANG off, or a caller that is not a gang member. */
static int spin_bounded(int (*pred)(void *), void *arg)
{
	for (;;) {
		weft_time_t end = wft_now() + WEFT_GANG_SPIN_NS;

		for (unsigned i = 1;; i++) {
			if (pred(arg))
				return 0;
			wft_cpu_relax();
			if (i % SPIN_CLOCK_EVERY == 0 && wft_now() >= end)
				break;
		}
		weft_yield();
	}
}

/* A member's spin while every peer runs: after this long without pred
 * turning true, give the OS CPU away once (sched_yield) and go on. A peer
 * "running" in weft terms may be on a worker whose OS thread the kernel
 * has preempted (a loaded host: the seed's problem one level down), and
 * then our spinning keeps it off this CPU. 50 us: as ON_CPU_SPIN_NS in
 * worker.c, well above a BSP step's jitter on an unloaded host, well
 * below a kernel time slice. */
#define GANG_OS_YIELD_NS 50000
/* Spin aborts in a row whose weft yield found nothing else to run on this
 * worker (the peer is queued on another worker, which is not running it:
 * busy with a member that has not reached its scheduling point yet, or
 * preempted by the kernel) before the OS CPU is given away instead. */
#define EMPTY_YIELDS_MAX 16

/* The abort path: yield the worker; if nothing else ran here several
 * times in a row, yield the OS CPU too. */
static void abort_yield(struct wft_worker *w, unsigned *empty)
{
	uint64_t sw = wft_worker_switches(w);

	weft_yield();
	w = wft_worker_self();   /* pinned: the same worker, re-read all the same */
	if (wft_worker_switches(w) != sw) {
		*empty = 0;
	} else if (++*empty >= EMPTY_YIELDS_MAX) {
		*empty = 0;
		sched_yield();
	}
}

int weft_gang_spin_until(int (*pred)(void *), void *arg)
{
	struct weft_thread *self;
	struct wft_gang_member *m = self_member(&self);
	weft_time_t os_yield_at = 0;
	unsigned empty = 0, steps = 0;

	if (!pred)
		return EINVAL;
	if (!member_gang_on(m))
		return spin_bounded(pred, arg);
	for (;;) {
		if (pred(arg))
			return 0;
		/* relaxed: a hint (Hold protocol, deactivation) */
		if (!atomic_load_explicit(&m->g->active, memory_order_relaxed)) {
			step_aside(m);
			os_yield_at = 0;
			continue;
		}
		if (!peers_on(m)) {
			wft_stat_inc(wft_worker_self(), gang_spin_aborts);
			abort_yield(wft_worker_self(), &empty);
			os_yield_at = 0;
			continue;
		}
		wft_cpu_relax();
		if (++steps % SPIN_CLOCK_EVERY == 0) {
			weft_time_t now = wft_now();

			if (!os_yield_at) {
				os_yield_at = now + GANG_OS_YIELD_NS;
			} else if (now >= os_yield_at) {
				sched_yield();
				os_yield_at = 0;
			}
		}
	}
}

/* ---------------------------------------------------------------------- */
/* Barrier: a counter and a generation; the last arriver resets the
 * counter and bumps the generation, the others spin until it changes. */

#define GB_MAGIC 0x67616e67u   /* "gang" */

struct gang_barrier {
	_Atomic uint32_t count;           /* arrivals in this generation */
	_Atomic uint32_t gen;             /* bumped by each generation's last arriver */
	uint32_t n;                       /* the group size */
	uint32_t magic;                   /* GB_MAGIC while initialised */
	_Atomic uint32_t waiting;         /* threads inside wait (destroy's EBUSY) */
};
_Static_assert(sizeof(struct gang_barrier) <= sizeof(weft_gang_barrier_t),
	       "gang barrier fits its public type");

int weft_gang_barrier_init(weft_gang_barrier_t *pb, unsigned count)
{
	struct gang_barrier *b = (struct gang_barrier *)pb;

	if (!b || count == 0 || count > UINT32_MAX / 2)
		return EINVAL;
	memset(pb, 0, sizeof(*pb));
	b->n = count;
	b->magic = GB_MAGIC;
	return 0;
}

struct gen_arg {
	struct gang_barrier *b;
	uint32_t gen;
};

static int gen_moved(void *arg)
{
	struct gen_arg *a = arg;

	/* acquire: pairs with the last arriver's release of gen, so what
	 * every member did before the barrier is visible after it */
	return atomic_load_explicit(&a->b->gen, memory_order_acquire) != a->gen;
}

int weft_gang_barrier_wait(weft_gang_barrier_t *pb)
{
	struct gang_barrier *b = (struct gang_barrier *)pb;
	struct gen_arg a;

	if (!b || b->magic != GB_MAGIC)
		return EINVAL;
	/* relaxed: destroy's EBUSY hint */
	atomic_fetch_add_explicit(&b->waiting, 1, memory_order_relaxed);
	/* acquire: the generation before our arrival; the count RMW below
	 * comes after it, so a generation that ends after our arrival is a
	 * later value than this one */
	a.b = b;
	a.gen = atomic_load_explicit(&b->gen, memory_order_acquire);
	/* acq_rel: the arrivals form a release sequence the last arriver
	 * acquires (everyone's work before the barrier) */
	if (atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) + 1 == b->n) {
		/* relaxed: nobody arrives for the next generation before gen
		 * moves (they all spin on it), and the release below orders it */
		atomic_store_explicit(&b->count, 0, memory_order_relaxed);
		/* release: pairs with the spinners' acquire in gen_moved */
		atomic_fetch_add_explicit(&b->gen, 1, memory_order_release);
		atomic_fetch_sub_explicit(&b->waiting, 1, memory_order_relaxed);
		return WEFT_BARRIER_SERIAL_THREAD;
	}
	weft_gang_spin_until(gen_moved, &a);
	atomic_fetch_sub_explicit(&b->waiting, 1, memory_order_relaxed);
	return 0;
}

int weft_gang_barrier_destroy(weft_gang_barrier_t *pb)
{
	struct gang_barrier *b = (struct gang_barrier *)pb;

	if (!b || b->magic != GB_MAGIC)
		return EINVAL;
	/* relaxed: a hint; destroying a barrier in use is the caller's error */
	if (atomic_load_explicit(&b->waiting, memory_order_relaxed))
		return EBUSY;
	b->magic = 0;
	return 0;
}
