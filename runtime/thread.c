/*
 * runtime/thread.c - light threads: spawn, join, detach, exit, yield,
 * park/unpark and sleeping.
 *
 * What it owns: the thread control blocks (struct weft_thread) from
 * creation to reuse, the join protocol and the park protocol.
 *
 * Objects and states: a TCB's run state (enum wft_tstate) and join state
 * (WFT_J_*), both documented in runtime/thread.h.
 *
 * Invariants:
 *   I1 TCB memory is type-stable: TCBs come from slabs that are never freed
 *      (not even by weft_shutdown()), so a stale pointer (a late unpark of a
 *      thread that exited) reads a TCB, never unmapped memory; t->seq
 *      changes on reuse.
 *   I2 A TCB is freed exactly once: by the joiner, by the detacher of an
 *      exited thread, or (detached at exit) by the switch-out of its exit.
 *   I3 Nobody frees a TCB or its stack while it is still switching out
 *      (on_cpu != 0); see "Finishing a switch" in runtime/worker.c.
 *
 * Park protocol (the token). Each thread has one unpark token.
 *
 *   parker (the thread itself)          unparker (any thread)
 *   -------------------------------     ---------------------------------
 *   if xchg(token, 0) == 1: return      xchg(token, 1)       (seq_cst)
 *   store state = PARKED   (seq_cst)    if state == PARKED:  (seq_cst CAS)
 *   if xchg(token, 0) == 1:                 CAS PARKED -> RUNNABLE, enqueue
 *       CAS PARKED -> RUNNING, return
 *   switch away
 *
 * Either the parker's second xchg sees the token, or the unparker's CAS sees
 * PARKED, because both sides store then load with seq_cst operations (a
 * StoreLoad pair: in the single total order one store comes first and the
 * other side's later load sees it). If both see each other, the CAS decides:
 * if the unparker's CAS wins, the parker finds state != PARKED, switches
 * away anyway and is resumed from the queue the unparker put it in; if the
 * parker's CAS wins, the unparker's CAS fails and it does nothing. A timeout
 * (timer fn) and a cancel race the same CAS: exactly one wins
 * (wft_wake in runtime/wake.c), and the winner writes wake_reason.
 * Interleavings considered: unpark before park (token consumed at once);
 * unpark between the state store and the second xchg (either side sees the
 * other, CAS decides); two unparkers (the second finds token already 1: the
 * first is responsible for the wake, and the parker consumes the token with
 * an acquiring exchange after it resumes, so either it reads the second's 1
 * and sees what the second published, or the second reads 0 and wakes it
 * again); unpark racing the deadline (one CAS winner; the
 * loser's token stays set, so the next park returns at once: spurious
 * returns are allowed by the API).
 *
 * Join protocol (t->jstate, one word: the joiner's address, or a state code
 * with the TCB's generation t->seq, WFT_JS(code, gen) in thread.h):
 *   joiner: takes the generation from its first load; every later CAS
 *           expects it, so none can act on the TCB once it is freed and
 *           reused (a handle already reused at the first load is a
 *           dangling handle: undefined, as in pthreads).
 *           CAS JOINABLE -> its own address (release): an OS thread's
 *           waiter (js_os) or, tagged, the weft thread itself (js_weft,
 *           see "Join from a weft thread" below); wait; or find EXITED and
 *           reap. Naming the joiner in the CAS that claims the join is
 *           what makes racing joiners safe: with the joiner in a separate
 *           field written before the CAS, a losing joiner could overwrite
 *           the winner's name after the winner's CAS, and the exit would
 *           then wake the loser (twice) and never the winner, or an
 *           OS-thread loser's dead stack waiter (test
 *           thread/racing_joiners). The API makes a second joiner get EINVAL.
 *           A weft joiner's park commit may instead find EXITED and
 *           reserve it (EXITED -> EXITED_T), or lose (see join_commit).
 *   exit:   JOINABLE -> EXITED (release: publishes t->ret), or
 *           OS joiner -> EXITED_T then wake its waiter, or
 *           weft joiner -> EXITED_T then deliver it, or
 *           DETACHED: free_on_exit, freed by the switch-out.
 *           EXITED_T is reserved for the registered joiner: it reaps
 *           without a CAS, and detach or other joiners get EINVAL.
 *   detach: JOINABLE -> DETACHED, or EXITED -> FREE and reap.
 *   reap:   CAS EXITED -> FREE (exactly one reaper), wait on_cpu == 0 (I3).
 *
 * The TCB pool (slabs, free list, per-worker cache) is runtime/tcb.c.
 */
#include "runtime/wft.h"
#include "runtime/env.h"
#include "runtime/stack.h"
#include "runtime/diag.h"
#include "runtime/sanitizer.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The two hot lines of a TCB (see struct weft_thread in thread.h). */
_Static_assert(offsetof(struct weft_thread, link) % WFT_CACHELINE == 0,
	       "the wakers' line of the TCB starts a cache line");
#if UINTPTR_MAX == 0xffffffffffffffffu
_Static_assert(offsetof(struct weft_thread, worker) + sizeof(void *) <=
		       offsetof(struct weft_thread, link) + WFT_CACHELINE &&
	       offsetof(struct weft_thread, state) > offsetof(struct weft_thread, link),
	       "a remote wake touches one TCB line (thread.h)");
#endif
#if defined(WFT_CTX_X86_64)
_Static_assert(offsetof(struct weft_thread, link) == 64, "TCB line 1 starts at link");
_Static_assert(offsetof(struct weft_thread, fpenv) == 128, "TCB lines 0-1 hold the switch path");
_Static_assert(offsetof(struct weft_thread, state) >= 64 && offsetof(struct weft_thread, worker) < 128,
	       "a remote wake touches one TCB line (thread.h)");
#endif

/* ---------------------------------------------------------------------- */
/* Spawn, exit, join, detach */

/* A registered joiner in t->jstate (WFT_JS_IS_JOINER): an OS thread's
 * stack waiter (8-byte aligned: low 3 bits clear) or a weft thread's TCB
 * (cache-line aligned) with the low bit set. */
#define JS_WEFT ((uintptr_t)1)

static inline uintptr_t js_os(struct wft_waiter *wt)
{
	return (uintptr_t)wt;
}

static inline uintptr_t js_weft(struct weft_thread *j)
{
	return (uintptr_t)j | JS_WEFT;
}

int weft_attr_init(weft_attr_t *attr)
{
	static const weft_attr_t def = WEFT_ATTR_INITIALIZER;

	if (!attr)
		return EINVAL;
	*attr = def;
	return 0;
}

struct weft_thread *wft_thread_self(void)
{
	struct wft_worker *w = wft_worker_self();

	return w ? w->current : NULL;
}

weft_thread_t weft_self(void)
{
	return wft_thread_self();
}

int weft_worker_id(void)
{
	struct wft_worker *w = wft_worker_self();

	return w ? w->id : -1;
}

const char *weft_thread_name(weft_thread_t t)
{
	return t ? t->name : NULL;
}

void wft_thread_free(struct weft_thread *t)
{
	struct wft_worker *w = wft_worker_self();

	if (t->specific) {
		free(t->specific);
		t->specific = NULL;
		t->nspecific = 0;
	}
	/* release: the TCB's last uses happen before a reuse that finds FREE */
	atomic_store_explicit(&t->jstate, WFT_JS(WFT_J_FREE, t->seq), memory_order_release);
	wft_tcb_release(w, t);
}

/* What a spawn without attributes gets (WEFT_ATTR_INITIALIZER with the
 * runtime's default stack size). */
static inline void spawn_defaults(size_t *ss, int *guard, int *pin, int *detached)
{
	*ss = wft_rt.stack_size;
	*guard = 1;
	*pin = -1;
	*detached = 0;
}

/* The spawn's slow cases: the runtime is not running yet, or an attribute
 * needs checking. Fills *ss, *guard, *pin, *detached. Returns 0 or an
 * errno; a bad stack size or guard is refused before the runtime starts. */
static __attribute__((noinline)) int spawn_check(const weft_attr_t *attr, size_t *ss,
						 int *guard, int *pin, int *detached)
{
	if (attr && attr->stack_size &&
	    (attr->stack_size < WEFT_STACK_MIN || attr->stack_size > WFT_STACK_MAX))
		return EINVAL;   /* above the max it could wrap when page-rounded */
	if (attr && attr->guard != 0 && attr->guard != 1)
		return EINVAL;
	/* reserved[0] is the gang (weft_attr_setgang), taken by weft_spawn
	 * before this check */
	for (size_t i = 1; attr && i < sizeof(attr->reserved) / sizeof(attr->reserved[0]); i++)
		if (attr->reserved[i])
			return EINVAL;
	/* acquire: pairs with the release store of RUNNING in weft_init */
	if (atomic_load_explicit(&wft_rt.state, memory_order_acquire) != WFT_RT_RUNNING) {
		int rc = weft_init(NULL);

		if (rc && rc != EBUSY)
			return rc;
	}
	spawn_defaults(ss, guard, pin, detached);
	if (!attr)
		return 0;
	if (attr->worker < -1 || attr->worker >= wft_rt.nworkers)
		return EINVAL;
	if (attr->stack_size)
		*ss = (attr->stack_size + wft_page_size() - 1) & ~(wft_page_size() - 1);
	*guard = attr->guard;
	*pin = attr->worker;
	*detached = attr->detached != 0;
	return 0;
}

/* The worker a new thread goes to: its pinned worker, else the spawner's,
 * else round robin for spawns from OS threads. */
static struct wft_worker *spawn_target(struct wft_worker *w, int pin)
{
	static _Atomic unsigned rr;
	unsigned i;

	if (pin >= 0)
		return wft_rt.workers[pin];
	if (w)
		return w;
	/* relaxed: just a spreading counter */
	i = atomic_fetch_add_explicit(&rr, 1, memory_order_relaxed);
	return wft_rt.workers[i % (unsigned)wft_rt.nworkers];
}

/* A TCB for a new thread with a stack of ss bytes and guard: a cached
 * TCB keeps its last stack if it fits. NULL (EAGAIN) if there is no
 * memory, or if the thread would need a new stack while threads wait for
 * one. Context: weft_spawn (w: the caller's worker or NULL). */
static inline struct weft_thread *spawn_tcb(struct wft_worker *w, size_t ss, int guard)
{
	struct weft_thread *t = wft_tcb_alloc(w);

	if (!t)
		return NULL;
	/* A cached TCB may keep its last stack; it serves if it fits */
	if (!t->stack || t->stack_size != ss || t->guard != guard) {
		/* relaxed: a gate, not a synchronisation (worker.c "Stack
		 * shortage") */
		if (wft_unlikely(atomic_load_explicit(&wft_stack_waiters.n, memory_order_relaxed) > 0)) {
			wft_tcb_release(w, t);
			return NULL;
		}
		if (t->stack)
			wft_stack_release(w, t);   /* only cached TCBs hold one: w is set */
	}
	return t;
}

/* Start t's new life: every TCB field a previous life may have changed is
 * reset here; the ones its free already reset (specific, nspecific,
 * jstate) and the ones only a running thread sets are not. Ends with the
 * join state and RUNNABLE. Context: weft_spawn, t not yet published. */
static inline void spawn_reset(struct weft_thread *t, weft_fn_t fn, void *arg, const weft_attr_t *attr,
			       size_t ss, int guard, int pin, int detached)
{
	t->fpenv = wft_fpenv_get();
	t->fn = fn;
	t->arg = arg;
	t->ret = NULL;
	t->stack_size = ss;
	t->guard = guard;
	t->keep_stack = 0;
	t->stack_wait = false;
	t->pin = pin;
	t->started = 0;
	t->free_on_exit = 0;
	t->in_gang = false;
	t->park_commit = NULL;
	t->link = NULL;
	t->seq++;
	t->wake_reason = WFT_WAKE_NORMAL;
	t->timer.fn = NULL;
	t->timer.heap = NULL;
	atomic_store_explicit(&t->timer.tstate, WFT_TM_IDLE, memory_order_relaxed);
	atomic_store_explicit(&t->token, 0, memory_order_relaxed);
	atomic_store_explicit(&t->on_cpu, 0, memory_order_relaxed);
	atomic_store_explicit(&t->worker, NULL, memory_order_relaxed);
	/* a new waker record (wake.c "Wide wakers"); relaxed: as above */
	t->last_wakee = NULL;
	t->prev_wakee = NULL;
	atomic_store_explicit(&t->wakee_flips, 0, memory_order_relaxed);
	/* no fast rwlock read hold (rwlock.c "Read bias"); only t uses it */
	t->rw_fast_lock = NULL;
	t->rw_fast_slot = NULL;
	t->flip_wakes = 0;
	t->flip_decay = 0;
	t->wait_what = NULL;
	if (wft_unlikely(attr && attr->name)) {
		strncpy(t->name, attr->name, sizeof(t->name) - 1);
		t->name[sizeof(t->name) - 1] = '\0';
	} else {
		t->name[0] = '\0';
	}
	/* release: the TCB is published to its worker by the queue push
	 * below, but a mutex's owner_dead (sync/mutex.c) reads this word
	 * with acquire to learn that the TCB's previous thread exited: a
	 * newer generation here must carry that exit's writes to whoever
	 * takes the dead owner's mutex over (the exit's own stores are
	 * released before the TCB is reused) */
	atomic_store_explicit(&t->jstate, WFT_JS(detached ? WFT_J_DETACHED : WFT_J_JOINABLE, t->seq),
			      memory_order_release);
	/* relaxed: likewise published by the push */
	atomic_store_explicit(&t->state, WFT_T_RUNNABLE, memory_order_relaxed);
}

/* Queue the new thread t: on the spawner's worker w (see "Spawn order" in
 * worker.c), else on its pinned worker or the round-robin choice for an
 * OS thread's spawn. Context: weft_spawn. */
static inline void spawn_queue(struct wft_worker *w, struct weft_thread *t, int pin)
{
	/* stats: a worker's spawns are its nborn (wft_count_birth above),
	 * read by weft_stats_get; only OS-thread spawns need a counter */
	if (wft_likely(w && pin < 0)) {
		wft_worker_push_spawn(w, t);
		return;
	}
	if (!w)
		wft_stat_os_inc(spawns);
	{
		struct wft_worker *target = spawn_target(w, pin);

		if (target == w)
			wft_worker_push_spawn(w, t);
		else
			wft_wake_push(target, t, t, 1);
	}
}

/*
 * Spawn. The common call (no attributes, from a weft thread, runtime
 * running) is kept short: it is half of spawn+join, the fib benchmark's
 * whole cost. Its phases are inline functions: take a TCB (spawn_tcb),
 * reset it (spawn_reset), count the birth, queue it (spawn_queue).
 */
int weft_spawn(weft_thread_t *out, weft_fn_t fn, void *arg, const weft_attr_t *attr)
{
	struct wft_worker *w;
	struct weft_thread *t;
	size_t ss;
	int guard, pin, detached, rc;

	if (!fn)
		return EINVAL;
	if (wft_in_forked_child())
		return ENOTSUP;
	/* From a weft thread the runtime is running (weft_shutdown waits for
	 * every weft thread and refuses to run in one), so the state check of
	 * spawn_check() is only needed from OS threads. */
	w = wft_worker_self();
	if (wft_likely(!attr && w)) {
		spawn_defaults(&ss, &guard, &pin, &detached);
	} else {
		/* a gang in the attribute (weft_attr_setgang): the gang spawns
		 * the member, with a copy of attr whose gang is cleared, so
		 * this recursion ends (runtime/gang.c) */
		if (wft_unlikely(attr && attr->reserved[0]))
			return wft_gang_spawn_attr(out, fn, arg, attr);
		rc = spawn_check(attr, &ss, &guard, &pin, &detached);
		if (rc)
			return rc;
	}
	if (!detached && !out)
		return EINVAL;
	t = spawn_tcb(w, ss, guard);
	if (!t)
		return EAGAIN;
	spawn_reset(t, fn, arg, attr, ss, guard, pin, detached);
	wft_count_birth(w);
	if (out)
		*out = detached ? NULL : t;
	spawn_queue(w, t, pin);
	return 0;
}

static void join_wake(struct weft_thread *j, int flags);

/* Finish the calling thread: destructors, join hand-off, switch away. */
static __attribute__((noreturn)) void thread_exit(struct weft_thread *t, void *ret)
{
	struct wft_worker *w;
	uintptr_t js;

	if (t->specific)
		wft_key_run_destructors(t);
	t->ret = ret;
	/* acquire: pairs with the release CAS of a joiner (what it wrote
	 * before registering: its waiter, its state) */
	js = atomic_load_explicit(&t->jstate, memory_order_acquire);
	for (;;) {
		if (WFT_JS_CODE(js) == WFT_J_JOINABLE) {
			/* release: publishes t->ret to the joiner that finds EXITED */
			if (atomic_compare_exchange_weak_explicit(&t->jstate, &js,
					WFT_JS(WFT_J_EXITED, t->seq),
					memory_order_acq_rel, memory_order_acquire))
				break;
		} else if (WFT_JS_IS_JOINER(js) && (js & JS_WEFT)) {
			/* A weft thread parked in join; only we leave this state
			 * (it cannot return before we are off this CPU: it waits
			 * for that). release: publishes t->ret. */
			struct weft_thread *j = (struct weft_thread *)(js & ~JS_WEFT);

			t->keep_stack = 1;   /* the joiner frees us at once */
			atomic_store_explicit(&t->jstate, WFT_JS(WFT_J_EXITED_T, t->seq),
					      memory_order_release);
			w = wft_worker_self();
			j->wake_reason = WFT_WAKE_NORMAL;
			/* relaxed: we are its only waker; the switch or the
			 * queue push publishes */
			atomic_store_explicit(&j->state, WFT_T_RUNNABLE, memory_order_relaxed);
			/* straight into the joiner when it would run here next
			 * anyway (spawn+join's common end) */
			wft_worker_exit_to(w, t, j);
			/* sync: we are about to switch away for good */
			wft_wake_deliver(j, WFT_WAKE_F_SYNC);
			goto leave;
		} else if (WFT_JS_IS_JOINER(js)) {
			/* An OS thread waits; only the exiting thread leaves this
			 * state, and to EXITED_T, reserved for that joiner: with
			 * EXITED, a detach or a second join could reap t between
			 * this store and the joiner's wakeup, and the joiner
			 * would then fail, or reap another thread that reused
			 * the TCB. release: publishes t->ret (the waiter wake
			 * below also releases). */
			atomic_store_explicit(&t->jstate, WFT_JS(WFT_J_EXITED_T, t->seq),
					      memory_order_release);
			wft_waiter_wake((struct wft_waiter *)js);
			break;
		} else {
			/* DETACHED: nobody will join; the exit switch frees it (I2) */
			t->free_on_exit = 1;
			t->keep_stack = 1;
			break;
		}
	}
	/* stats: exits are the workers' ndead (wft_count_death) */
	w = wft_worker_self();
leave:
	atomic_store_explicit(&t->state, WFT_T_DONE, memory_order_relaxed);
	wft_worker_schedule(w, WFT_SCHED_EXIT);
	wft_panic("exited thread resumed");
}

void wft_thread_start(struct wft_ctx *prev, void *arg)
{
	struct weft_thread *t = arg;
	void *ret;

	(void)prev;
	wft_san_switch_end(NULL);
	wft_worker_finish_switch(wft_worker_self());
	ret = t->fn(t->arg);
	thread_exit(t, ret);
}

int weft_exit(void *ret)
{
	struct weft_thread *t = wft_thread_self();

	if (!t)
		return EPERM;
	/* a gang member leaves its gang first, as when its function returns
	 * (runtime/gang.c, member_leave): else its gang kept counting it as
	 * live and kept getting turns after every member had exited */
	if (wft_unlikely(t->in_gang))
		wft_gang_exit(t);
	thread_exit(t, ret);
}

/* The reaper's part once it owns t (it won the reap CAS to FREE, or holds
 * t's EXITED_T): wait until t is off its CPU (I3), take its result, free
 * it. */
static int reap_owned(struct weft_thread *t, void **ret)
{
	wft_wait_off_cpu(t);   /* I3: t's exit switch has finished */
	if (ret)
		*ret = t->ret;
	wft_thread_free(t);
	return 0;
}

/* Claim an EXITED thread for freeing. exited: the EXITED word (with its
 * generation) the caller saw. Returns 0 or EINVAL. */
static int reap(struct weft_thread *t, uintptr_t exited, void **ret)
{
	uintptr_t js = exited;

	/* acq_rel: exactly one reaper (I2); acquire pairs with the exit's
	 * release, making t->ret visible */
	if (!atomic_compare_exchange_strong_explicit(&t->jstate, &js,
			WFT_JS(WFT_J_FREE, WFT_JS_GEN(exited)),
			memory_order_acq_rel, memory_order_acquire))
		return EINVAL;
	return reap_owned(t, ret);
}

/*
 * Join from a weft thread: park first, publish after (the "park commit",
 * Go's gopark with an unlock function). The joiner sets its state to
 * PARKED_JOIN and switches away; once its context is saved, its worker runs
 * join_commit(), which CASes jstate JOINABLE -> js_weft(joiner) (release:
 * our state). If that wins, the exiting thread finds the joiner there,
 * stores EXITED_T and delivers it; if the child exited in the meantime,
 * the commit reserves it (EXITED -> EXITED_T) and delivers the joiner; if
 * another joiner or a detach came first, the commit marks the loss
 * (park_arg = NULL) and delivers the joiner, which then returns EINVAL
 * without looking at t again. Exactly one of the two wakes it, and no one
 * else can:
 * PARKED_JOIN is not PARKED, so weft_unpark() and every other waker's
 * PARKED -> RUNNABLE CAS fails on it (their token stays set for the
 * joiner's next ordinary park: a spurious return there, which the API
 * allows). So the wake is a plain state store and a queue push, and the
 * reap needs no CAS either (EXITED_T keeps detach and other joiners out).
 * The whole join costs one locked instruction (the commit CAS), where the
 * generic waiter path (token exchanges, PARKED CAS, reap CAS) cost about
 * nine per spawn+join and dominated spawn_join and fib.
 */
static void join_wake(struct weft_thread *j, int flags)
{
	j->wake_reason = WFT_WAKE_NORMAL;
	/* relaxed: we are its only waker; the queue push publishes */
	atomic_store_explicit(&j->state, WFT_T_RUNNABLE, memory_order_relaxed);
	wft_wake_deliver(j, flags);
}

/* The commit decides the join once and for all, so that the joiner never
 * looks at t's jstate again unless t is reserved for it: JOINABLE -> the
 * joiner (the exit wakes it), or EXITED -> EXITED_T (it exited meanwhile:
 * reserved for the joiner, woken here), or anything else: lost (park_arg
 * = NULL, woken here, EINVAL). A joiner that re-read jstate after a lost
 * commit could find a later thread's EXITED in a reused TCB and reap
 * it. */
static void join_commit(struct weft_thread *j, void *arg)
{
	struct weft_thread *t = arg;
	uintptr_t want = j->join_want, js = want;
	uintptr_t exited = WFT_JS(WFT_J_EXITED, WFT_JS_GEN(want));

	for (;;) {
		uintptr_t to = js == exited ? WFT_JS(WFT_J_EXITED_T, WFT_JS_GEN(want)) : js_weft(j);

		/* acq_rel: release publishes j's PARKED_JOIN to the exit's
		 * acquire load; acquire (from EXITED) pairs with the exit's
		 * release, for t->ret. Failure: acquire, the value decides */
		if (atomic_compare_exchange_strong_explicit(&t->jstate, &js, to,
				memory_order_acq_rel, memory_order_acquire)) {
			if (!WFT_JS_IS_JOINER(to))
				join_wake(j, 0);
			return;
		}
		/* anything else, a reused TCB (another generation) included */
		if (js != want && js != exited) {
			j->park_arg = NULL;   /* published by the wake's push */
			join_wake(j, 0);
			return;
		}
	}
}

/* The end of a join whose thread is reserved for the joiner (EXITED_T of
 * the generation it registered on, want): ours alone, no CAS needed, as
 * nobody else looks at a reserved thread's jstate; the free stores FREE. */
static int reap_reserved(struct weft_thread *t, uintptr_t want, void **ret)
{
	/* acquire: pairs with the exit's release store of EXITED_T, or the
	 * commit's acq_rel CAS to it (t->ret) */
	uintptr_t js = atomic_load_explicit(&t->jstate, memory_order_acquire);

	if (wft_unlikely(js != WFT_JS(WFT_J_EXITED_T, WFT_JS_GEN(want))))
		wft_panic("join woken before the exit");
	return reap_owned(t, ret);
}

/*
 * Direct join: t heads this worker's private runqueue (a child just
 * spawned, the spawn+join of fib and spawn_join_seq), so nobody else can
 * run it until we do (worker.c wft_worker_take_head). Then the commit is
 * not needed: we register (js_weft) before switching, and switch to t
 * ourselves, without a pick. t cannot exit before the switch (it runs
 * only after it), so its exit finds us registered and wakes us as in the
 * committed path; if t blocks and runs elsewhere later, the exit's wake is
 * the same. Our context is saved before anyone can resume us: whoever
 * switches to us waits for on_cpu = 0 (worker.c I2), which t's first
 * finish_switch stores. The CAS still races a detach or a join from other
 * threads; if it loses, t goes back to the head, untouched.
 * Saves the pick, the commit and its call: ~15% of spawn+join.
 */
static int join_direct(struct wft_worker *w, struct weft_thread *self, struct weft_thread *t,
		       uintptr_t want, void **ret)
{
	uintptr_t js = want;

	/* relaxed: t runs only after our switch to it, which orders this */
	atomic_store_explicit(&self->state, WFT_T_PARKED_JOIN, memory_order_relaxed);
	/* release: the exit reads our registration with acquire (also
	 * ordered by the switch chain); against a racing detach/join only the
	 * RMW's atomicity matters. Failure needs nothing: t never ran since
	 * we took it, so it has not exited, and we only report EINVAL. */
	if (!atomic_compare_exchange_strong_explicit(&t->jstate, &js, js_weft(self),
			memory_order_release, memory_order_relaxed)) {
		atomic_store_explicit(&self->state, WFT_T_RUNNING, memory_order_relaxed);
		wft_runq_push_front_owner(w, t);
		return EINVAL;
	}
	wft_stat_inc(w, thread_parks);
	wft_worker_park_to(w, self, t);
	return reap_reserved(t, want, ret);
}

/* want: the JOINABLE word (with t's generation) the caller saw. */
static int join_parked(struct wft_worker *w, struct weft_thread *self, struct weft_thread *t,
		       uintptr_t want, void **ret)
{
	if (wft_worker_take_head(w, t))
		return join_direct(w, self, t, want, ret);
	self->park_commit = join_commit;
	self->park_arg = t;
	self->join_want = want;
	/* relaxed: published by the commit's release CAS */
	atomic_store_explicit(&self->state, WFT_T_PARKED_JOIN, memory_order_relaxed);
	wft_stat_inc(w, thread_parks);
	wft_worker_schedule(w, WFT_SCHED_PARK);
	if (!self->park_arg)   /* the commit lost: t is not ours to look at */
		return EINVAL;
	return reap_reserved(t, want, ret);
}

int weft_join(weft_thread_t t, void **ret)
{
	/* aligned: its address goes into jstate with 3 low bits free (js_os),
	 * also on 32-bit targets, where the struct is only 4-aligned */
	_Alignas(8) struct wft_waiter wt;
	struct weft_thread *self;
	uintptr_t js;

	if (!t)
		return EINVAL;
	if (wft_in_forked_child())
		return ENOTSUP;
	self = wft_thread_self();
	if (t == self)
		return EDEADLK;
	/* acquire: pairs with the exit's release. From here on every CAS
	 * expects the generation seen here: a TCB freed and reused meanwhile
	 * (the handle joined or detached by someone else) makes it fail. */
	js = atomic_load_explicit(&t->jstate, memory_order_acquire);
	if (WFT_JS_CODE(js) == WFT_J_EXITED)
		return reap(t, js, ret);
	if (WFT_JS_CODE(js) != WFT_J_JOINABLE)
		return EINVAL;   /* a joiner's address, detached, reserved or free */
	if (self) {
		int r;

		wft_wait_note_untimed(self, "join", t);
		r = join_parked(wft_worker_self(), self, t, js, ret);
		wft_wait_clear(self);
		return r;
	}
	/* From a plain OS thread: the waiter (a futex on our own word). */
	wft_waiter_init(&wt);
	/* release: publishes the initialised waiter to the exiting thread */
	{
		uintptr_t want = js;

		if (!atomic_compare_exchange_strong_explicit(&t->jstate, &js, js_os(&wt),
				memory_order_acq_rel, memory_order_acquire)) {
			if (js == WFT_JS(WFT_J_EXITED, WFT_JS_GEN(want)))
				return reap(t, js, ret);
			return EINVAL;
		}
	}
	wft_waiter_wait(&wt, WEFT_TIME_INFINITE);
	/* The exit stored EXITED_T, ours alone, before waking us */
	return reap_owned(t, ret);
}

int weft_detach(weft_thread_t t)
{
	uintptr_t js;

	if (!t)
		return EINVAL;
	/* acquire: pairs with the exit's release */
	js = atomic_load_explicit(&t->jstate, memory_order_acquire);
	for (;;) {
		uintptr_t gen = WFT_JS_GEN(js);

		if (WFT_JS_CODE(js) == WFT_J_EXITED)
			return reap(t, js, NULL);
		if (WFT_JS_CODE(js) != WFT_J_JOINABLE)
			return EINVAL;
		/* acq_rel: races the exit's CAS; one of them wins. A failure
		 * that finds another generation is a reused TCB: EINVAL */
		if (atomic_compare_exchange_weak_explicit(&t->jstate, &js,
				WFT_JS(WFT_J_DETACHED, gen),
				memory_order_acq_rel, memory_order_acquire))
			return 0;
		if (WFT_JS_GEN(js) != gen && !WFT_JS_IS_JOINER(js))
			return EINVAL;
	}
}

int weft_yield(void)
{
	struct wft_worker *w = wft_worker_self();

	if (!w || !w->current) {
		sched_yield();
		return 0;
	}
	wft_stat_inc(w, yields);
	/* a gang member whose slice is over steps aside (runtime/gang.c) */
	if (wft_unlikely(w->current->in_gang))
		wft_gang_yield_point(w->current->gang);
	wft_worker_schedule(w, WFT_SCHED_YIELD);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Park / unpark (see "Park protocol" above) */

static void park_timeout(struct wft_timer *tm)
{
	struct weft_thread *t = wft_container_of(tm, struct weft_thread, timer);

	wft_wake(t, WFT_WAKE_TIMEOUT);
}

int wft_thread_park(weft_time_t deadline)
{
	struct wft_worker *w = wft_worker_self();
	struct weft_thread *t = w->current;
	int expected, timed = deadline != WEFT_TIME_INFINITE;

	/* acquire: pairs with the unparker's xchg; what it wrote before the
	 * unpark (e.g. a waiter's state) is visible */
	if (atomic_exchange_explicit(&t->token, 0, memory_order_acquire))
		return 0;
	if (timed) {
		if (deadline <= wft_now())
			return ETIMEDOUT;
		t->timer.fn = park_timeout;
		if (wft_timer_arm(w, &t->timer, deadline))
			return 0;   /* no memory for the heap: a spurious return, the caller loops */
	}
	t->wake_reason = WFT_WAKE_NORMAL;
	/* seq_cst: StoreLoad with the token xchg below; pairs with the
	 * unparker's seq_cst xchg + CAS (Park protocol) */
	atomic_store_explicit(&t->state, WFT_T_PARKED, memory_order_seq_cst);
	if (atomic_exchange_explicit(&t->token, 0, memory_order_seq_cst)) {
		expected = WFT_T_PARKED;
		/* acq_rel: races the unparker's / timer's CAS; one wins */
		if (atomic_compare_exchange_strong_explicit(&t->state, &expected, WFT_T_RUNNING,
				memory_order_acq_rel, memory_order_acquire)) {
			if (timed)
				wft_timer_cancel(&t->timer);
			return 0;
		}
		/* An unparker won and queued us: go through the scheduler
		 * anyway. (Not the timeout: our timer fires only from this
		 * worker's scheduler, which is busy running us. So the token we
		 * just took belongs to an unpark, and nothing is put back: a
		 * plain store here would also break the next unparker's release
		 * sequence on the token.) */
	}
	wft_stat_inc(w, thread_parks);
	wft_worker_schedule(w, WFT_SCHED_PARK);
	/* Resumed, maybe on another worker: t is still us, w is stale. */
	if (timed)
		wft_timer_cancel(&t->timer);
	if (t->wake_reason == WFT_WAKE_TIMEOUT)
		return ETIMEDOUT;
	/* Consume the token of the unpark that woke us. An exchange, not a
	 * store: a second unparker U2 may have set its condition (say a
	 * waiter's WOKEN), then found the token already 1 and left the wake to
	 * the first. A plain store of 0 could sit in our store buffer while our
	 * caller's re-check reads U2's condition stale; then U2's token is
	 * erased and we park for good (store buffering). acquire: if the
	 * exchange reads U2's 1 it synchronises with U2's seq_cst exchange,
	 * so the caller's re-check sees U2's condition; if U2 comes later,
	 * U2 reads 0 and wakes us itself. */
	(void)atomic_exchange_explicit(&t->token, 0, memory_order_acquire);
	return 0;
}

int weft_park(void)
{
	struct weft_thread *self = wft_thread_self();
	int r;

	if (!self)
		return EPERM;
	wft_wait_note_untimed(self, "park", NULL);
	r = wft_thread_park(WEFT_TIME_INFINITE);
	wft_wait_clear(self);
	return r;
}

int weft_park_until(weft_time_t deadline)
{
	struct weft_thread *self = wft_thread_self();
	int r;

	if (!self)
		return EPERM;
	wft_wait_note_untimed(self, "park", NULL);
	r = wft_thread_park(deadline);
	wft_wait_clear(self);
	return r;
}

int weft_unpark(weft_thread_t t)
{
	if (!t)
		return EINVAL;
	/* false: already pending, the earlier unparker is responsible */
	if (wft_unpark_token(t))
		wft_wake(t, WFT_WAKE_NORMAL);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Sleep (the clock is runtime/clock.c) */

int weft_sleep_until(weft_time_t deadline)
{
	struct weft_thread *self = wft_thread_self();

	if (!self) {
		struct timespec ts = {
			(time_t)(deadline / 1000000000ull), (long)(deadline % 1000000000ull)
		};

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		return 0;
	}
	{
		bool unparked = false;

		/* An unpark during a sleep (or pending at its start) does not
		 * end it: loop to the deadline. But it was meant for a later
		 * weft_park, so it is not lost: the token goes back (if the
		 * sleep's parks consumed it, a weft_park after the sleep
		 * would wait for another unpark). */
		wft_wait_note(self, "sleep", NULL);
		while (wft_thread_park(deadline) != ETIMEDOUT)
			unparked = true;
		wft_wait_clear(self);
		if (unparked)
			/* relaxed RMW: we already acquired from the unparker
			 * (the park's exchange); an RMW, not a store, keeps the
			 * release sequence of a later unparker's exchange
			 * intact (see wft_thread_park's last comment) */
			(void)atomic_exchange_explicit(&self->token, 1, memory_order_relaxed);
	}
	return 0;
}

int weft_sleep_ns(uint64_t ns)
{
	weft_time_t now = wft_now();

	return weft_sleep_until(ns > UINT64_MAX - now ? WEFT_TIME_INFINITE - 1 : now + ns);
}
