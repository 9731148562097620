/*
 * runtime/offload.c - the offload pool (helper OS threads that run blocking
 * calls for parked weft threads) and the fallback poller (one OS thread that
 * waits for descriptor readiness when a worker has no io_uring).
 *
 * What it owns: the pool's job queue and helper threads, the poller thread
 * and its list of waiting descriptors, and their lifetime (started on
 * demand, stopped when the last worker tears down: wft_offload_ref/unref
 * from runtime/uring.c). Used by weft_offload() and by the fallback of
 * runtime/io.c. See include/weft/io.h and docs/design.md "I/O".
 *
 * Objects and states.
 *   job      - on the submitting weft thread's stack: fn, arg, results and
 *              a wft_waiter. QUEUED (in pool.head list) -> RUNNING (popped
 *              by a helper) -> DONE (waiter WOKEN; the job may vanish).
 *   helper   - an OS thread: idle on pool.cond or running one job.
 *   pollreq  - on the waiting weft thread's stack: fd, events, a
 *              wft_waiter whose node links it into pl.waiting. WAITING (in
 *              the list) -> READY (unlinked by the poller, result = revents,
 *              waiter WOKEN) or -> TIMED OUT (unlinked by its own thread
 *              under pl.lock after its park timed out).
 *
 * Invariants:
 *   I1 pool.lock protects pool.head/tail, the counts and the helper list;
 *      pl.lock protects pl.waiting, the pollreqs' gen/slot and the poller's
 *      flags. A job or pollreq is touched by the helper/poller only while it
 *      is queued/listed (under the lock) or, for a popped job, until its
 *      waiter is woken; after the wake only the thread pointer read before
 *      it is used (runtime/waiter.c, Lifetime).
 *   I2 A pollreq leaves pl.waiting exactly once, under pl.lock: by the
 *      poller (READY) or by its timed-out owner - whoever holds the lock
 *      first; the owner then sees WOKEN or not under the same lock.
 *   I3 The poller dereferences a pollreq only through pl.waiting, never
 *      through its poll array: a request that left the list while the
 *      poller slept in poll() (timed out, stack gone) is simply not found.
 *      The array slot is matched by the request's (gen, slot) stamp.
 *   I4 Helpers and the poller exist only between the first wft_offload_ref
 *      and the last wft_offload_unref; the last unref joins them, so
 *      weft_shutdown() returns with no helper thread and no pool fd left.
 *
 * Pool protocol. submit: lock; append job; if fewer idle helpers than
 * queued jobs and fewer helpers than the bound, start one; else signal an
 * idle one; unlock; wait on the job's waiter. helper: lock; wait on the
 * condition while the queue is empty; pop; unlock; run fn with errno = 0;
 * store ret and errno; wake the waiter (release: publishes them). The queue
 * is FIFO and bounded only by the number of weft threads (each has at most
 * one job). If no helper can be started and none exists, the job runs
 * inline on the worker (documented in weft/io.h), so a job never waits
 * for a helper that will not come.
 *
 * Poller protocol. wait_fd: lock; append the pollreq; if the poller sits in
 * poll() and was not yet signalled, write its eventfd; unlock; wait on the
 * waiter with the deadline. Poller loop: lock; stamp every listed request
 * with (gen, slot) and copy its fd/events into the array; mark in_poll;
 * unlock; poll(array + eventfd, infinite); lock; clear in_poll; for each
 * listed request whose stamp is this gen and whose slot has revents:
 * unlink, store revents, wake. A request appended during the poll() has a
 * stale stamp and waits for the next round, which the eventfd write forces
 * (no lost request: either the appender sees in_poll and signals, or the
 * poller, which sets in_poll under the same lock, copies the request into
 * the array before sleeping).
 *
 * Rejected alternatives:
 *   - running fallback recvs on the pool (see runtime/io.c, Fallback);
 *   - epoll for the poller: epoll keys registrations by (fd, file), so two
 *     threads waiting on one fd (a reader and a writer, or two readers)
 *     need merged masks and dup()s; a rebuilt poll() array handles any mix
 *     and costs O(waiters) per round, acceptable for a fallback path;
 *   - an unbounded pool (a thread per blocked call): that is the pthread
 *     model the runtime replaces, and it hides leaks of blocked jobs;
 *   - one pool per worker: helpers are idle most of the time; one shared
 *     queue keeps the helper count low, and the queue lock is not on any
 *     hot path (every job costs two thread wakeups anyway).
 */
#include "runtime/wft.h"
#include "runtime/env.h"
#include "runtime/os_policy.h"
#include "runtime/uring.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <weft/io.h>

/* Default bound on helper threads: enough to keep a disk queue and a few
 * slow DNS lookups busy at once without turning into thread-per-call. */
#define OFFLOAD_DEFAULT_MAX 16
#define OFFLOAD_LIMIT 1024
/* Helpers only run blocking calls and small library functions (getaddrinfo
 * needs ~100 KiB at most); pages are committed only when touched. */
#define HELPER_STACK (1u << 20)

struct job {
	void *(*fn)(void *);
	void *arg;
	void *ret;
	int err;
	struct wft_waiter wt;
	struct job *next;
};

struct helper {
	pthread_t tid;
	struct helper *next;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *head, *tail;   /* FIFO of queued jobs */
	unsigned queued;
	int nthreads, nidle;
	int refs;                  /* workers that hold the pool (I4) */
	bool stop;
	struct helper *helpers;    /* started helpers, joined at the last unref */
} pool = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

/* Bound set by weft_offload_set_max (0 = environment or default). relaxed:
 * a setting read when a helper is about to start. */
static _Atomic int max_api;
static int max_env;   /* read at the first ref of each runtime; pool.lock */

struct pollreq {
	struct wft_waiter wt;      /* wt.node links it into pl.waiting */
	int fd;
	short events;
	unsigned gen, slot;        /* stamp of the poll array it sits in; pl.lock */
};

static struct {
	pthread_mutex_t lock;
	struct wft_dlist waiting;  /* pollreqs, pl.lock */
	unsigned nwaiting;
	int efd;                   /* wakes the poller; -1 when not running */
	bool running, in_poll, signalled, stop;
	unsigned gen;
	pthread_t tid;
} pl = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.waiting = { &pl.waiting, &pl.waiting },
	.efd = -1,
};

/* Start an OS thread with every signal blocked (helpers must not take the
 * application's signals) and a modest stack. */
static int start_thread(pthread_t *tid, void *(*fn)(void *))
{
	pthread_attr_t a;
	sigset_t all, old;
	int rc;

	if (pthread_attr_init(&a))
		return EAGAIN;
	pthread_attr_setstacksize(&a, HELPER_STACK);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(tid, &a, fn, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* Pool */

static int pool_max(void)
{
	/* relaxed: a setting, see max_api */
	int m = atomic_load_explicit(&max_api, memory_order_relaxed);

	if (m)
		return m;
	return max_env ? max_env : OFFLOAD_DEFAULT_MAX;
}

static void *helper_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "weft-offload");
	wft_os_policy_helper();
	pthread_mutex_lock(&pool.lock);
	for (;;) {
		struct job *j;

		while (!pool.head && !pool.stop) {
			pool.nidle++;
			pthread_cond_wait(&pool.cond, &pool.lock);
			pool.nidle--;
		}
		if (!pool.head)
			break;   /* stopping and nothing left */
		j = pool.head;
		pool.head = j->next;
		if (!pool.head)
			pool.tail = NULL;
		pool.queued--;
		pthread_mutex_unlock(&pool.lock);

		errno = 0;
		j->ret = j->fn(j->arg);
		j->err = errno;
		wft_waiter_wake(&j->wt);   /* j may vanish now (I1) */

		pthread_mutex_lock(&pool.lock);
	}
	pool.nthreads--;
	pthread_mutex_unlock(&pool.lock);
	return NULL;
}

/* Start one more helper. Returns true on success. Locks: pool.lock. */
static bool helper_start_locked(void)
{
	struct helper *h = malloc(sizeof(*h));

	if (!h)
		return false;
	if (start_thread(&h->tid, helper_main)) {
		free(h);
		return false;
	}
	h->next = pool.helpers;
	pool.helpers = h;
	pool.nthreads++;
	return true;
}

/* Context: weft thread. May park: yes. Locks: takes pool.lock.
 * Returns: fn's result; *err = errno after fn. (Pool protocol) */
void *wft_offload_run(void *(*fn)(void *), void *arg, int *err)
{
	struct wft_worker *w = wft_worker_self();
	struct job j = { .fn = fn, .arg = arg };

	wft_waiter_init(&j.wt);
	wft_stat_inc(w, offloads);
	pthread_mutex_lock(&pool.lock);
	if (pool.stop || (pool.nidle <= (int)pool.queued && pool.nthreads < pool_max() &&
			  !helper_start_locked() && pool.nthreads == 0)) {
		/* No helper at all: run inline rather than wait forever. */
		pthread_mutex_unlock(&pool.lock);
		/* fn may park (and migrate): opaque errno accessors (io.c) */
		wft_set_errno(0);
		j.ret = fn(arg);
		*err = wft_get_errno();
		return j.ret;
	}
	if (pool.tail)
		pool.tail->next = &j;
	else
		pool.head = &j;
	pool.tail = &j;
	pool.queued++;
	if (pool.nidle)
		pthread_cond_signal(&pool.cond);
	pthread_mutex_unlock(&pool.lock);

	wft_waiter_wait(&j.wt, WEFT_TIME_INFINITE);
	*err = j.err;
	return j.ret;
}

void *weft_offload(void *(*fn)(void *), void *arg)
{
	struct weft_thread *t = wft_thread_self();
	int err;
	void *r;

	if (!fn) {
		errno = EINVAL;
		return NULL;
	}
	if (!t)
		return fn(arg);
	r = wft_offload_run(fn, arg, &err);
	wft_set_errno(err);   /* we parked: see "errno and migration" in io.c */
	return r;
}

int weft_offload_set_max(int n)
{
	if (n < 1 || n > OFFLOAD_LIMIT)
		return EINVAL;
	/* relaxed: see max_api */
	atomic_store_explicit(&max_api, n, memory_order_relaxed);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Fallback poller */

static void *poller_main(void *arg)
{
	struct pollfd *pfd = NULL;
	size_t cap = 0;

	(void)arg;
	prctl(PR_SET_NAME, "weft-poller");
	wft_os_policy_helper();
	pthread_mutex_lock(&pl.lock);
	while (!pl.stop) {
		size_t need = (size_t)pl.nwaiting + 1, n = 1;
		struct wft_dlist *pos, *next;
		unsigned gen;
		int rc;

		if (need > cap) {
			size_t ncap = need < 64 ? 64 : need * 2;
			struct pollfd *np = realloc(pfd, ncap * sizeof(*pfd));

			if (np) {
				pfd = np;
				cap = ncap;
			}
			/* else: poll the first cap - 1 now, the rest next round */
		}
		if (!pfd) {
			/* nothing allocated yet and no memory: back off briefly */
			pthread_mutex_unlock(&pl.lock);
			usleep(1000);
			pthread_mutex_lock(&pl.lock);
			continue;
		}
		gen = ++pl.gen ? pl.gen : ++pl.gen;   /* 0 means "never stamped" */
		pfd[0].fd = pl.efd;
		pfd[0].events = POLLIN;
		pfd[0].revents = 0;
		wft_dlist_for_each(pos, &pl.waiting) {
			struct pollreq *r = wft_container_of(wft_container_of(pos, struct wft_waiter, node),
							     struct pollreq, wt);

			if (n == cap)
				break;
			r->gen = gen;
			r->slot = (unsigned)n;
			pfd[n].fd = r->fd;
			pfd[n].events = r->events;
			pfd[n].revents = 0;
			n++;
		}
		pl.in_poll = true;
		pl.signalled = false;
		pthread_mutex_unlock(&pl.lock);

		rc = poll(pfd, (nfds_t)n, -1);

		pthread_mutex_lock(&pl.lock);
		pl.in_poll = false;
		if (rc <= 0)
			continue;   /* EINTR cannot happen (signals blocked); ENOMEM: retry */
		if (pfd[0].revents) {
			uint64_t v;

			if (read(pl.efd, &v, sizeof(v)) < 0)
				(void)0;   /* EAGAIN: already drained */
		}
		/* I3: walk the list, not the array */
		for (pos = pl.waiting.next; pos != &pl.waiting; pos = next) {
			struct wft_waiter *wt = wft_container_of(pos, struct wft_waiter, node);
			struct pollreq *r = wft_container_of(wt, struct pollreq, wt);

			next = pos->next;
			if (r->gen != gen || !pfd[r->slot].revents)
				continue;
			wft_dlist_del(pos);
			pl.nwaiting--;
			wt->result = pfd[r->slot].revents;
			wft_waiter_wake(wt);   /* r may vanish now (I1) */
		}
	}
	pthread_mutex_unlock(&pl.lock);
	free(pfd);
	return NULL;
}

/* Locks: pl.lock. Returns 0 or an errno. */
static int poller_start_locked(void)
{
	pl.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (pl.efd < 0)
		return wft_get_errno();
	pl.stop = false;
	if (start_thread(&pl.tid, poller_main)) {
		close(pl.efd);
		pl.efd = -1;
		return EAGAIN;
	}
	pl.running = true;
	return 0;
}

/* No poller could be started: wait with a blocking poll() on the pool. */
struct poll_call {
	int fd;
	short events;
	int timeout_ms;
};

static void *poll_on_pool(void *arg)
{
	struct poll_call *c = arg;
	struct pollfd p = { c->fd, c->events, 0 };

	return (void *)(intptr_t)(poll(&p, 1, c->timeout_ms) > 0 ? p.revents : 0);
}

/* Context: weft thread. May park: yes. Locks: takes pl.lock.
 * Returns: revents (> 0) or 0 at the deadline. (Poller protocol) */
int wft_offload_wait_fd(int fd, short events, weft_time_t deadline)
{
	struct pollreq r = { .fd = fd, .events = events };
	uint64_t one = 1;
	int rc;

	wft_waiter_init(&r.wt);
	pthread_mutex_lock(&pl.lock);
	if (!pl.running && (pl.stop || poller_start_locked())) {
		struct poll_call c = { fd, events, -1 };
		int err;

		pthread_mutex_unlock(&pl.lock);
		if (deadline != WEFT_TIME_INFINITE) {
			weft_time_t now = wft_now();

			c.timeout_ms = deadline <= now ? 0 : (int)((deadline - now + 999999) / 1000000);
		}
		return (int)(intptr_t)wft_offload_run(poll_on_pool, &c, &err);
	}
	wft_dlist_push_back(&pl.waiting, &r.wt.node);
	pl.nwaiting++;
	if (pl.in_poll && !pl.signalled) {
		pl.signalled = true;
		if (write(pl.efd, &one, sizeof(one)) < 0)
			(void)0;   /* count saturated: the poller is signalled */
	}
	pthread_mutex_unlock(&pl.lock);

	rc = wft_waiter_wait(&r.wt, deadline);
	if (rc == ETIMEDOUT) {
		pthread_mutex_lock(&pl.lock);
		/* relaxed: the poller stores WOKEN under pl.lock (I2) */
		if (atomic_load_explicit(&r.wt.state, memory_order_relaxed) == WFT_WAITER_WAITING) {
			wft_dlist_del(&r.wt.node);
			pl.nwaiting--;
			pthread_mutex_unlock(&pl.lock);
			return 0;
		}
		pthread_mutex_unlock(&pl.lock);
	}
	return r.wt.result;
}

/* ---------------------------------------------------------------------- */
/* Lifetime (I4) */

/* Context: a worker's OS thread (wft_uring_setup). May park: no. */
void wft_offload_ref(void)
{
	const char *e;

	pthread_mutex_lock(&pool.lock);
	if (pool.refs++ == 0) {
		pool.stop = false;
		max_env = 0;
		if ((e = getenv("WEFT_OFFLOAD_THREADS")) && *e) {
			unsigned long n;

			/* strict (runtime/env.c); weft_init refused a bad value */
			if (wft_parse_ulong(e, 1, OFFLOAD_LIMIT, &n))
				max_env = (int)n;
			else
				fprintf(stderr, "weft: WEFT_OFFLOAD_THREADS=%s out of range 1..%d, using %d\n",
					e, OFFLOAD_LIMIT, OFFLOAD_DEFAULT_MAX);
		}
	}
	pthread_mutex_unlock(&pool.lock);
}

/* The last reference stops and joins every helper and the poller (I4).
 * Context: a worker's OS thread (wft_uring_teardown), no weft thread left.
 * May park: the OS thread waits in pthread_join. */
void wft_offload_unref(void)
{
	struct helper *h;
	bool join_poller;
	uint64_t one = 1;

	pthread_mutex_lock(&pool.lock);
	if (--pool.refs > 0) {
		pthread_mutex_unlock(&pool.lock);
		return;
	}
	pool.stop = true;
	pthread_cond_broadcast(&pool.cond);
	h = pool.helpers;
	pool.helpers = NULL;
	pthread_mutex_unlock(&pool.lock);
	while (h) {
		struct helper *n = h->next;

		pthread_join(h->tid, NULL);
		free(h);
		h = n;
	}

	pthread_mutex_lock(&pl.lock);
	join_poller = pl.running;
	pl.stop = true;
	if (join_poller && write(pl.efd, &one, sizeof(one)) < 0)
		(void)0;
	pthread_mutex_unlock(&pl.lock);
	if (join_poller) {
		pthread_join(pl.tid, NULL);
		close(pl.efd);
	}
	pthread_mutex_lock(&pl.lock);
	pl.efd = -1;
	pl.running = false;
	pl.stop = false;
	pl.in_poll = false;
	pl.signalled = false;
	pthread_mutex_unlock(&pl.lock);
}
