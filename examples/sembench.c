/*
 * examples/sembench.c - the seed 000 wakeup-storm benchmark in library form,
 * with its kernel baselines in the same binary (docs/seeds.md, "sembench").
 *
 * What it owns
 *   A port of Chris Mason's sembench written from the description in
 *   its documented behaviour (no code of the original was used): T sleeping workers,
 *   each pinned to a CPU (kernel modes) or to a weft worker (weft modes), and
 *   one unpinned poster that wakes up to W of them per iteration, back to
 *   back, for R seconds. The result is "worker burns per second", i.e. how
 *   many wakeups per second the poster manages to deliver: the benchmark is
 *   poster-bound, so it measures the waker's per-wakeup cost (docs/seeds.md,
 *   "sembench").
 *
 *   Modes (-o):
 *     0  SysV semaphores: sets of SEMS_PERID, one semaphore per worker;
 *        the poster batches its +1s per set into semop calls of at most
 *        BATCH_OPS operations (kernel baseline, the seed's command).
 *     1  nanosleep polling: workers sleep 1 ms at a time until their word is
 *        cleared; the poster only clears it (kernel baseline).
 *     2  futex: FUTEX_WAIT on the worker's word, one FUTEX_WAKE per wakeup
 *        (kernel baseline).
 *     3  weft: light threads block in weft_sem_wait(); the poster posts with
 *        weft_sem_post_wq() into a wake queue and flushes it after every group
 *        of at most BATCH_OPS posts of one set - the library form of the
 *        64-op semop (the kernel's wake_q; docs/design.md "Wake queues").
 *     4  weft: as 3, but every post is a plain weft_sem_post(), one wake each.
 *
 *   The poster is the process's main thread, a plain OS thread that is not
 *   pinned, in every mode. That is the original's structure: in the kernel
 *   modes the poster competes with the workers for CPUs and every wakeup is a
 *   remote one; in the weft modes it is an OS thread outside the runtime, so
 *   every weft_sem_post is a remote wake (mailbox push plus, if the target
 *   worker is parked, a kick), and the poster and the weft workers share the
 *   CPUs through the kernel scheduler exactly as the original's poster and
 *   workers do. A weft-thread poster was rejected: weft does not preempt, so
 *   a busy poster would starve the workers of its own weft worker unless it
 *   yielded, which the original's poster never does.
 *
 * Objects and states
 *   struct worker, one per worker (pthread or light thread), holds two
 *   handshake words:
 *     data   1 = "I am waiting for a wakeup", 0 = "the poster took me";
 *     ready  1 = "I am (about to be) asleep and may be taken"; only the
 *            worker sets it, only the poster clears it.
 *   Worker cycle: data = 1, ready = 1 (release), block; after waking, data
 *   must be 0, else the run is broken ("wakeup without data update").
 *   Poster take: sees ready == 1 (acquire), ready = 0, data = 0, then posts.
 *
 * Invariants
 *   I1  A worker is taken at most once per block: ready goes 1 -> 0 only in
 *       the poster, and 0 -> 1 only in the worker after its previous wakeup.
 *   I2  Every take is followed by exactly one post (+1) of that worker's
 *       semaphore (modes 0, 3, 4) or one FUTEX_WAKE (mode 2).
 *   I3  The poster stores data = 0 before the post, and the post/wait pair
 *       orders it before the worker's check (semop is a syscall; the weft
 *       semaphore's post releases and its wait acquires).
 *
 * Protocol
 *   Scan: the poster looks for ready workers with a circular scan that
 *   resumes where the last one stopped (the original's O(T) scan, kept on
 *   purpose so the poster's per-iteration overhead is the same in every
 *   mode). One iteration takes up to W workers; if a full circle finds none,
 *   the iteration ends early.
 *   Batch (modes 0, 3, 4): takes are appended to a per-set buffer; after the
 *   scan, each set's buffer is issued in groups of at most BATCH_OPS: one
 *   semop call (0), one wake-queue flush (3), or one post each (4).
 *   Inline (modes 1, 2): each take is followed at once by its wake (none for
 *   mode 1, FUTEX_WAKE for mode 2), as in the original.
 *   Timeout test (-T, modes 0, 3, 4): workers of sets whose index is a
 *   multiple of 5 wait with a 1 ns timeout. On a timeout the worker stays
 *   ready and polls (500 ns sleeps) until the poster has taken it, then takes
 *   the poster's +1 with a wait bounded by LOST_POST_NS so that the data
 *   check stays strict; a post that never arrives is reported as lost. (The
 *   original leaves that +1 in the semaphore for the next wait instead; the
 *   race exercised - a timeout expiring while a post lands - is the same.)
 *   End: after R seconds the poster sets done and keeps running its wake
 *   step every 200 us until every worker has left.
 *
 * Deliberate differences from the original
 *   - The run lasts R seconds of CLOCK_MONOTONIC. The original stops when the
 *     whole-second difference of gettimeofday() reaches R, so its runs last
 *     anywhere between R-1 and R seconds (up to 10% noise at -r 10); the
 *     printed lines are unchanged and "run time" is still whole seconds.
 *   - Burn totals use atomics instead of a pthread mutex (a light thread
 *     must not block its worker in pthread_mutex_lock).
 *   - The futex mode uses the private futex ops.
 *   - -s N shortens the 10 s setup sleep of mode 0 (default kept at 10);
 *     -v times the poster's scan and post phases (off by default, so the
 *     poster loop is the original's).
 *   - pthread workers wait at a start gate until every thread exists (see
 *     spawn_pthreads()); the measured phase is unaffected.
 *   - Extra numbers (exact elapsed time and rate, rusage, weft counters) go
 *     to stderr; stdout carries exactly the original's five lines.
 *
 * See docs/seeds.md "sembench" (seed 000) for the original runs,
 * docs/design.md "Wake path" for what modes 3/4 exercise, examples/run-seeds.sh to run it.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <weft.h>
#include <weft/sync.h>

#include "bench.h"
#include "task_stat.h"

/* Semaphores per SysV set, as in the original (SEMMSL must be >= this). */
#define SEMS_PERID 250
/* Most operations per semop call / posts per wake-queue flush: the
 * original's batch size, which needs SEMOPM >= 64. */
#define BATCH_OPS 64
/* Poll interval of the start-up and shutdown loops (the original's 200 us). */
#define POLL_NS 200000
/* Timeout of the -T waits: the shortest a timed wait can ask for. */
#define TIMEOUT_TEST_NS 1
/* Sleep between polls of a timed-out -T worker (the original's 500 ns). */
#define TIMEOUT_POLL_NS 500
/* How long a timed-out -T worker waits for the poster's +1 once it has been
 * taken: the poster posts right after the take, so seconds mean "lost". */
#define LOST_POST_NS (5ull * 1000000000ull)
/* Stack of every worker, pthread or light thread: 2048+ workers must fit. */
#define WORKER_STACK (64 * 1024)
/* Sleep of the nanosleep mode's workers between polls (1 ms, the original). */
#define NANO_POLL_NS 1000000

enum mode { MODE_IPC, MODE_NANO, MODE_FUTEX, MODE_WEFT_WQ, MODE_WEFT_POST, MODE_COUNT };

static const char *const mode_name[MODE_COUNT] = {
	"ipc sem operations",
	"nano sleep sem operations",
	"futex sem operations",
	"weft sem operations (wake queues)",
	"weft sem operations (post one by one)",
};

struct worker {
	_Atomic int data;  /* see "Objects and states" above */
	_Atomic int ready; /* set by the worker, cleared by the poster (I1) */
	int set;           /* SysV set index: id / SEMS_PERID */
	int sem;           /* index in the set: id % SEMS_PERID */
};

/* Options, written by main() before any worker starts. */
static int opt_threads = 2048;
static int opt_wake = 256;
static int opt_runtime = 30;
static int opt_mode = MODE_IPC;
static int opt_timeout_test;
static int opt_setup_sleep = 10;

static struct worker *workers; /* [opt_threads] */
static int nsets;
static int *semids;      /* [nsets], mode 0 */
static weft_sem_t *wsems; /* [opt_threads], modes 3 and 4 */

/* relaxed: a flag polled in loops; nothing is published through it except
 * "stop", and the worker re-checks it after every wakeup. */
static _Atomic int done;
/* relaxed: start-up poll only. */
static _Atomic int started;
/* Start gate of the pthread modes, see spawn_pthreads(). release store by
 * main after the last pthread_create; acquire load by the workers (nothing
 * else is published through it, the order is for clarity). */
static _Atomic int gate_open;
/* acq_rel on the increment, acquire on the read: main reads the totals only
 * after it has seen every worker's increment of exited. */
static _Atomic int exited;
static _Atomic uint64_t burn_total;
static _Atomic uint64_t burn_min = UINT64_MAX;
static _Atomic uint64_t burn_max;

/* Poster state (main thread only). */
static int scan_pos;
struct set_buf {
	int n;
	int idx[SEMS_PERID]; /* worker ids taken this iteration (I1: <= SEMS_PERID) */
};
static struct set_buf *set_bufs; /* [nsets] */
static struct sembuf *sem_ops;   /* [BATCH_OPS], mode 0 */
static uint64_t batches_issued;  /* number of groups issued (stderr stats) */
static int opt_verbose;          /* -v: time the poster's scan and issue phases */
static int opt_unpinned;         /* -u: weft modes leave light threads unpinned */
static uint64_t scan_ns, issue_ns;

static void die(const char *what)
{
	fprintf(stderr, "sembench: %s\n", what);
	exit(1);
}

static void die_errno(const char *what, int err)
{
	fprintf(stderr, "sembench: %s: %s\n", what, strerror(err));
	exit(1);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static long futex(_Atomic int *uaddr, int op, int val)
{
	return syscall(SYS_futex, (int *)uaddr, op, val, NULL, NULL, 0);
}

/* Record one worker's burn count. Context: any (pthread or light thread). */
static void account(uint64_t burns)
{
	uint64_t cur;

	/* relaxed: the totals are read by main only after the acq_rel
	 * increment of exited below, which orders these. */
	atomic_fetch_add_explicit(&burn_total, burns, memory_order_relaxed);
	cur = atomic_load_explicit(&burn_min, memory_order_relaxed);
	while (burns < cur && !atomic_compare_exchange_weak_explicit(&burn_min, &cur, burns,
			memory_order_relaxed, memory_order_relaxed))
		;
	cur = atomic_load_explicit(&burn_max, memory_order_relaxed);
	while (burns > cur && !atomic_compare_exchange_weak_explicit(&burn_max, &cur, burns,
			memory_order_relaxed, memory_order_relaxed))
		;
	/* acq_rel: release publishes the totals above; pairs with main's
	 * acquire load of exited. */
	atomic_fetch_add_explicit(&exited, 1, memory_order_acq_rel);
}

/* Announce "about to sleep, may be taken". Context: the worker. */
static void mark_ready(struct worker *w)
{
	/* relaxed: ordered before the ready store by its release. */
	atomic_store_explicit(&w->data, 1, memory_order_relaxed);
	/* release: the poster that reads ready == 1 (acquire, in find_ready)
	 * sees data == 1 and its data = 0 store cannot be overwritten by ours.
	 * (The original uses a full barrier here; release is what is needed.) */
	atomic_store_explicit(&w->ready, 1, memory_order_release);
}

/* After a wakeup: the poster must have taken us (I3). */
static void check_taken(struct worker *w)
{
	/* acquire: pairs with the poster's data = 0, already ordered by the
	 * post/wait pair (I3); acquire keeps the check honest on its own. */
	if (atomic_load_explicit(&w->data, memory_order_acquire) != 0)
		die("wakeup without data update");
}

/* -T: spin-sleep until the poster has taken us. */
static void poll_until_taken(struct worker *w, int weft)
{
	/* acquire: see check_taken(). */
	while (atomic_load_explicit(&w->data, memory_order_acquire) != 0) {
		if (weft)
			weft_sleep_ns(TIMEOUT_POLL_NS);
		else
			sleep_ns(TIMEOUT_POLL_NS);
	}
}

static int timeout_worker(const struct worker *w)
{
	return opt_timeout_test && w->set % 5 == 0;
}

/* --- mode 0: SysV semaphores --- */

static int ipc_semop(int set, struct sembuf *ops, size_t n, const struct timespec *to)
{
	int rc;

	do {
		rc = semtimedop(semids[set], ops, n, to);
	} while (rc != 0 && errno == EINTR);
	return rc == 0 ? 0 : errno;
}

static void ipc_wait(struct worker *w)
{
	struct sembuf op = { .sem_num = (unsigned short)w->sem, .sem_op = -1, .sem_flg = 0 };
	struct timespec to = { 0, TIMEOUT_TEST_NS };
	int err;

	mark_ready(w);
	if (!timeout_worker(w)) {
		err = ipc_semop(w->set, &op, 1, NULL);
		if (err)
			die_errno("semtimedop", err);
		check_taken(w);
		return;
	}
	err = ipc_semop(w->set, &op, 1, &to);
	if (err == 0) {
		check_taken(w);
		return;
	}
	if (err != EAGAIN)
		die_errno("semtimedop", err);
	/* Timed out: stay ready until taken, then collect the +1 (see
	 * "Timeout test" above). */
	poll_until_taken(w, 0);
	to.tv_sec = (time_t)(LOST_POST_NS / 1000000000u);
	to.tv_nsec = 0;
	err = ipc_semop(w->set, &op, 1, &to);
	if (err == EAGAIN)
		die("post lost after a timed-out wait");
	if (err)
		die_errno("semtimedop", err);
}

static void ipc_issue(int set, const int *idx, int n)
{
	for (int i = 0; i < n; i++) {
		sem_ops[i].sem_num = (unsigned short)workers[idx[i]].sem;
		sem_ops[i].sem_op = 1;
		sem_ops[i].sem_flg = IPC_NOWAIT;
	}
	int err = ipc_semop(set, sem_ops, (size_t)n, NULL);
	if (err)
		die_errno("semop post", err);
}

static void ipc_check_limits(void)
{
	long cur[4], need[4];
	FILE *f = fopen("/proc/sys/kernel/sem", "r");

	if (!f || fscanf(f, "%ld %ld %ld %ld", &cur[0], &cur[1], &cur[2], &cur[3]) != 4)
		die("cannot read /proc/sys/kernel/sem");
	fclose(f);
	/* SEMMSL SEMMNS SEMOPM SEMMNI (ipc/sem.c order). */
	need[0] = SEMS_PERID;
	need[1] = (long)nsets * SEMS_PERID;
	need[2] = BATCH_OPS;
	need[3] = nsets;
	int short_of = 0;
	for (int i = 0; i < 4; i++) {
		if (cur[i] < need[i])
			short_of = 1;
		if (need[i] < cur[i])
			need[i] = cur[i];
	}
	if (!short_of)
		return;
	if (geteuid() == 0) {
		f = fopen("/proc/sys/kernel/sem", "w");
		if (f && fprintf(f, "%ld %ld %ld %ld\n", need[0], need[1], need[2], need[3]) > 0 &&
		    fclose(f) == 0) {
			fprintf(stderr, "sembench: set /proc/sys/kernel/sem to %ld %ld %ld %ld\n",
				need[0], need[1], need[2], need[3]);
			return;
		}
	}
	fprintf(stderr,
		"sembench: /proc/sys/kernel/sem is %ld %ld %ld %ld; this run needs at least\n"
		"  echo %ld %ld %ld %ld > /proc/sys/kernel/sem\n"
		"(SEMMSL SEMMNS SEMOPM SEMMNI; the seed used 4096 32000 64 128)\n",
		cur[0], cur[1], cur[2], cur[3], need[0], need[1], need[2], need[3]);
	exit(1);
}

static void ipc_teardown(void)
{
	for (int s = 0; s < nsets; s++)
		if (semids[s] >= 0)
			semctl(semids[s], 0, IPC_RMID);
}

static void ipc_setup(void)
{
	ipc_check_limits();
	semids = calloc((size_t)nsets, sizeof(*semids));
	sem_ops = calloc(BATCH_OPS, sizeof(*sem_ops));
	if (!semids || !sem_ops)
		die("out of memory");
	for (int s = 0; s < nsets; s++)
		semids[s] = -1;
	/* The sets outlive the process unless removed: remove them on every
	 * exit, die() included. */
	atexit(ipc_teardown);
	for (int s = 0; s < nsets; s++) {
		/* Linux starts every semaphore of a new set at 0. */
		semids[s] = semget(IPC_PRIVATE, SEMS_PERID, IPC_CREAT | 0777);
		if (semids[s] < 0)
			die_errno("semget", errno);
	}
	sleep_ns((uint64_t)opt_setup_sleep * 1000000000u);
}


/* --- mode 1: nanosleep polling --- */

static void nano_wait(struct worker *w)
{
	mark_ready(w);
	/* acquire: pairs with the poster's data = 0 (take()). */
	while (atomic_load_explicit(&w->data, memory_order_acquire) != 0)
		sleep_ns(NANO_POLL_NS);
}

/* --- mode 2: futex --- */

static void futex_wait(struct worker *w)
{
	mark_ready(w);
	/* acquire: pairs with the poster's data = 0; FUTEX_WAIT re-checks the
	 * word under the futex bucket lock, so a wake between the load and the
	 * wait is not lost. */
	while (atomic_load_explicit(&w->data, memory_order_acquire) == 1)
		futex(&w->data, FUTEX_WAIT_PRIVATE, 1);
}

/* --- modes 3 and 4: weft semaphores --- */

static void weft_wait(struct worker *w)
{
	weft_sem_t *s = &wsems[w - workers];
	int err;

	mark_ready(w);
	if (!timeout_worker(w)) {
		err = weft_sem_wait(s);
		if (err)
			die_errno("weft_sem_wait", err);
		check_taken(w);
		return;
	}
	err = weft_sem_timedwait(s, weft_now_ns() + TIMEOUT_TEST_NS);
	if (err == 0) {
		check_taken(w);
		return;
	}
	if (err != ETIMEDOUT)
		die_errno("weft_sem_timedwait", err);
	poll_until_taken(w, 1);
	err = weft_sem_timedwait(s, weft_now_ns() + LOST_POST_NS);
	if (err == ETIMEDOUT)
		die("post lost after a timed-out wait");
	if (err)
		die_errno("weft_sem_timedwait", err);
}

static void weft_issue_wq(int set, const int *idx, int n)
{
	weft_wakeq_t wq;
	int err;

	(void)set;
	weft_wakeq_init(&wq);
	for (int i = 0; i < n; i++) {
		err = weft_sem_post_wq(&wsems[idx[i]], 1, &wq);
		if (err)
			die_errno("weft_sem_post_wq", err);
	}
	err = weft_wakeq_flush(&wq);
	if (err)
		die_errno("weft_wakeq_flush", err);
}

static void weft_issue_post(int set, const int *idx, int n)
{
	(void)set;
	for (int i = 0; i < n; i++) {
		int err = weft_sem_post(&wsems[idx[i]]);
		if (err)
			die_errno("weft_sem_post", err);
	}
}

/* --- the poster --- */

/* Next ready worker after the last one found, or -1 after a full circle. */
static int find_ready(void)
{
	for (int n = 0; n < opt_threads; n++) {
		int i = scan_pos;

		scan_pos = i + 1 == opt_threads ? 0 : i + 1;
		/* acquire: pairs with the release in mark_ready(). */
		if (atomic_load_explicit(&workers[i].ready, memory_order_acquire))
			return i;
	}
	return -1;
}

static void take(struct worker *w)
{
	/* relaxed: only the poster clears ready (I1); the worker sets it again
	 * only after the wakeup that follows this take. */
	atomic_store_explicit(&w->ready, 0, memory_order_relaxed);
	/* release: for the modes without a post (nanosleep), this store is what
	 * the worker's acquire load waits for; the others also order it by
	 * the post (I3). */
	atomic_store_explicit(&w->data, 0, memory_order_release);
}

typedef void (*issue_fn)(int set, const int *idx, int n);

/* One poster iteration in the batched modes (0, 3, 4). */
static void wake_batched(issue_fn issue)
{
	int found = 0;
	uint64_t t0 = opt_verbose ? bench_now_ns() : 0, t1 = 0;

	for (int k = 0; k < opt_wake; k++) {
		int i = find_ready();
		if (i < 0)
			break;
		take(&workers[i]);
		struct set_buf *b = &set_bufs[workers[i].set];
		b->idx[b->n++] = i;
		found++;
	}
	if (opt_verbose) {
		t1 = bench_now_ns();
		scan_ns += t1 - t0;
	}
	if (!found)
		return;
	for (int s = 0; s < nsets; s++) {
		struct set_buf *b = &set_bufs[s];
		for (int off = 0; off < b->n; off += BATCH_OPS) {
			int n = b->n - off < BATCH_OPS ? b->n - off : BATCH_OPS;
			issue(s, b->idx + off, n);
			batches_issued++;
		}
		b->n = 0;
	}
	if (opt_verbose)
		issue_ns += bench_now_ns() - t1;
}

/* One poster iteration in the inline modes (1, 2). */
static void wake_inline(int use_futex)
{
	for (int k = 0; k < opt_wake; k++) {
		int i = find_ready();
		if (i < 0)
			break;
		take(&workers[i]);
		if (use_futex)
			futex(&workers[i].data, FUTEX_WAKE_PRIVATE, 1);
	}
}

static void wake_once(void)
{
	switch (opt_mode) {
	case MODE_IPC:
		wake_batched(ipc_issue);
		break;
	case MODE_NANO:
		wake_inline(0);
		break;
	case MODE_FUTEX:
		wake_inline(1);
		break;
	case MODE_WEFT_WQ:
		wake_batched(weft_issue_wq);
		break;
	case MODE_WEFT_POST:
		wake_batched(weft_issue_post);
		break;
	}
}

/* --- workers --- */

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t burns = 0;

	if (opt_mode <= MODE_FUTEX) {
		/* acquire: pairs with the release store in spawn_pthreads(). */
		while (!atomic_load_explicit(&gate_open, memory_order_acquire))
			futex(&gate_open, FUTEX_WAIT_PRIVATE, 0);
	}
	/* relaxed: start-up poll only. */
	atomic_store_explicit(&started, 1, memory_order_relaxed);
	for (;;) {
		/* relaxed: see done's declaration. */
		if (atomic_load_explicit(&done, memory_order_relaxed))
			break;
		switch (opt_mode) {
		case MODE_IPC:
			ipc_wait(w);
			break;
		case MODE_NANO:
			nano_wait(w);
			break;
		case MODE_FUTEX:
			futex_wait(w);
			break;
		default:
			weft_wait(w);
			break;
		}
		if (atomic_load_explicit(&done, memory_order_relaxed))
			break;
		burns++;
	}
	account(burns);
	return NULL;
}

static void spawn_pthreads(void)
{
	pthread_attr_t attr;
	int err;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, WORKER_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (int i = 0; i < opt_threads; i++) {
		pthread_t t;

		err = pthread_create(&t, &attr, worker_main, &workers[i]);
		if (err)
			die_errno("pthread_create", err);
		/* Round-robin over the affinity mask, right after creation, as
		 * the original does. */
		err = bench_pin_thread(t, bench_cpu_nth(i));
		if (err)
			die_errno("pthread_setaffinity_np", err);
	}
	pthread_attr_destroy(&attr);
	/* Polling workers (mode 1, and -T's timed-out ones) burn CPU from the
	 * moment they start; on a small machine thousands of them starve the
	 * thread that is still creating the rest (1024 mode-1 threads took 37 s
	 * on 2 CPUs), so every pthread worker waits at a gate until all exist.
	 * The measured phase is unchanged: it starts when the first worker
	 * runs, after the last pthread_create, as in the original.
	 * release: see gate_open. */
	atomic_store_explicit(&gate_open, 1, memory_order_release);
	futex(&gate_open, FUTEX_WAKE_PRIVATE, INT_MAX);
}

static void spawn_weft(void)
{
	weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
	weft_attr_t attr;
	int err, nw;

	/* Workers pinned to CPUs, like the original's pinned threads
	 * (WEFT_PIN=0 in the environment overrides). */
	cfg.pin = 1;
	err = weft_init(&cfg);
	if (err)
		die_errno("weft_init", err);
	nw = weft_workers();
	/* One cache line per semaphore, as the kernel's per-semaphore queues
	 * are separate objects too. */
	wsems = aligned_alloc(64, sizeof(*wsems) * (size_t)opt_threads);
	if (!wsems)
		die("out of memory");
	for (int i = 0; i < opt_threads; i++) {
		err = weft_sem_init(&wsems[i], 0);
		if (err)
			die_errno("weft_sem_init", err);
	}
	weft_attr_init(&attr);
	attr.stack_size = WORKER_STACK;
	attr.detached = 1;
	for (int i = 0; i < opt_threads; i++) {
		/* round-robin pinning (weft_attr_t.worker); -u: the runtime
		 * places them (wake placement decides where each wakee runs) */
		attr.worker = opt_unpinned ? -1 : i % nw;
		err = weft_spawn(NULL, worker_main, &workers[i], &attr);
		if (err)
			die_errno("weft_spawn", err);
	}
}

/*
 * Where the process's threads spent the run, from the kernel's per-thread
 * schedstat (run time, and run delay: time runnable but waiting for a CPU;
 * both since the thread started). Split into the weft workers (threads
 * named weft-w*), the poster (the main thread) and the rest. A run far
 * below the others whose threads waited for a CPU much longer than they
 * ran was starved by the host, not slowed by the runtime: on a shared
 * 2-CPU VM single workers were seen runnable for 250-300 ms without
 * running once (docs/wake-path.md "Collapsed runs"). Prints nothing if
 * schedstat is not available. Context: main, before the workers exit.
 */
static void report_cpu_wait(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	double run[3] = { 0 }, wait[3] = { 0 }, wmax = 0;
	int n[3] = { 0 };
	long self = (long)getpid();

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		char comm[32];
		unsigned long long r, w;
		int k;

		if (e->d_name[0] == '.' || !task_stat(e->d_name, comm, sizeof(comm), &r, &w))
			continue;
		k = strtol(e->d_name, NULL, 10) == self ? 1 : strncmp(comm, "weft-w", 6) == 0 ? 0 : 2;
		run[k] += r / 1e9;
		wait[k] += w / 1e9;
		n[k]++;
		if (k == 0 && w / 1e9 > wmax)
			wmax = w / 1e9;
	}
	closedir(d);
	if (!n[0] && !n[1])
		return;
	fprintf(stderr,
		"sembench: kernel: %d workers ran %.3f s, waited for a CPU %.3f s (most: %.3f s); "
		"poster ran %.3f s, waited %.3f s; %d other threads ran %.3f s, waited %.3f s\n",
		n[0], run[0], wait[0], wmax, run[1], wait[1], n[2], run[2], wait[2]);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: sembench [-t threads] [-w wakenum] [-r runtime] [-o mode] [-T] [-s secs] [-v] [-u] [-h]\n"
		"  -t N  worker threads (default 2048)\n"
		"  -w N  max workers woken per poster iteration (default 256)\n"
		"  -r N  run time in seconds (default 30)\n"
		"  -o N  0 ipc sem, 1 nanosleep, 2 futex (kernel baselines),\n"
		"        3 weft sem + wake queues, 4 weft sem posted one by one (default 0)\n"
		"  -T    timeout test: workers of every 5th set wait with a 1 ns timeout\n"
		"        (modes 0, 3, 4)\n"
		"  -s N  setup sleep of mode 0 in seconds (default 10, as the original)\n"
		"  -v    time the poster's scan and post phases (modes 0, 3, 4; stderr)\n"
		"  -u    weft modes: light threads unpinned, placed by the runtime\n"
		"        (default: pinned round-robin to the weft workers)\n");
}

static int parse_int(const char *s, int min)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < min || v > INT_MAX)
		die("bad number");
	return (int)v;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-h")) {
			usage();
			return 0;
		} else if (!strcmp(a, "-v")) {
			opt_verbose = 1;
		} else if (!strcmp(a, "-u")) {
			opt_unpinned = 1;
		} else if (!strcmp(a, "-T")) {
			opt_timeout_test = 1;
		} else if (val && !strcmp(a, "-t")) {
			opt_threads = parse_int(val, 1), i++;
		} else if (val && !strcmp(a, "-w")) {
			opt_wake = parse_int(val, 1), i++;
		} else if (val && !strcmp(a, "-r")) {
			opt_runtime = parse_int(val, 1), i++;
		} else if (val && !strcmp(a, "-o")) {
			opt_mode = parse_int(val, 0), i++;
		} else if (val && !strcmp(a, "-s")) {
			opt_setup_sleep = parse_int(val, 0), i++;
		} else {
			/* The original ignores unknown arguments; say so at least. */
			fprintf(stderr, "sembench: ignoring argument %s\n", a);
		}
	}
	if (opt_mode >= MODE_COUNT) {
		usage();
		return 1;
	}

	nsets = (opt_threads + SEMS_PERID - 1) / SEMS_PERID;
	workers = calloc((size_t)opt_threads, sizeof(*workers));
	set_bufs = calloc((size_t)nsets, sizeof(*set_bufs));
	if (!workers || !set_bufs)
		die("out of memory");
	for (int i = 0; i < opt_threads; i++) {
		workers[i].set = i / SEMS_PERID;
		workers[i].sem = i % SEMS_PERID;
	}

	if (opt_mode == MODE_IPC)
		ipc_setup();

	bench_rusage_t ru0, ru1, rud;
	bench_rusage_get(&ru0);
	uint64_t t_spawn = bench_now_ns();
	if (opt_mode == MODE_WEFT_WQ || opt_mode == MODE_WEFT_POST)
		spawn_weft();
	else
		spawn_pthreads();

	/* relaxed: start-up poll only. */
	while (!atomic_load_explicit(&started, memory_order_relaxed))
		sleep_ns(POLL_NS);
	uint64_t start = bench_now_ns();
	t_spawn = start - t_spawn;
	fprintf(stderr, "main loop going\n");

	uint64_t main_burns = 0, end_ns = start + (uint64_t)opt_runtime * 1000000000u, now;
	do {
		wake_once();
		main_burns++;
		now = bench_now_ns();
	} while (now < end_ns);
	uint64_t elapsed_ns = now - start;
	int verbose = opt_verbose;
	opt_verbose = 0; /* the shutdown phase's scans are not counted */

	fprintf(stderr, "all done\n");
	/* relaxed: see done's declaration. */
	atomic_store_explicit(&done, 1, memory_order_relaxed);
	/* acquire: pairs with the acq_rel increment in account(). */
	while (atomic_load_explicit(&exited, memory_order_acquire) < opt_threads) {
		wake_once();
		sleep_ns(POLL_NS);
	}
	uint64_t t_drain = bench_now_ns() - now;
	bench_rusage_get(&ru1);
	bench_rusage_delta(&rud, &ru0, &ru1);

	uint64_t total = atomic_load_explicit(&burn_total, memory_order_relaxed);
	uint64_t secs = elapsed_ns / 1000000000u;
	if (secs == 0)
		secs = 1;
	printf("%d threads, waking %d at a time\n", opt_threads, opt_wake);
	printf("using %s\n", mode_name[opt_mode]);
	printf("main thread burns: %llu\n", (unsigned long long)main_burns);
	printf("worker burn count total %llu min %llu max %llu avg %llu\n",
	       (unsigned long long)total,
	       (unsigned long long)atomic_load_explicit(&burn_min, memory_order_relaxed),
	       (unsigned long long)atomic_load_explicit(&burn_max, memory_order_relaxed),
	       (unsigned long long)(total / (uint64_t)opt_threads));
	printf("run time %llu seconds %llu worker burns per second\n", (unsigned long long)secs,
	       (unsigned long long)(total / secs));
	fflush(stdout);

	fprintf(stderr,
		"sembench: exact: %.3f s, %.0f worker burns/s, %.1f wakeups per poster iteration, "
		"%.2f groups per iteration; start-up %.3f s, shutdown %.3f s\n",
		elapsed_ns / 1e9, total / (elapsed_ns / 1e9),
		main_burns ? (double)total / (double)main_burns : 0.0,
		main_burns ? (double)batches_issued / (double)main_burns : 0.0, t_spawn / 1e9,
		t_drain / 1e9);
	fprintf(stderr,
		"sembench: rusage: user %.3f s sys %.3f s, ctx switches %llu voluntary %llu "
		"involuntary\n",
		rud.user_ns / 1e9, rud.sys_ns / 1e9, (unsigned long long)rud.nvcsw,
		(unsigned long long)rud.nivcsw);

	if (verbose && total)
		fprintf(stderr,
			"sembench: poster: scan %.3f s (%.0f ns per wakeup), post %.3f s (%.0f ns "
			"per wakeup)\n",
			scan_ns / 1e9, (double)scan_ns / (double)total, issue_ns / 1e9,
			(double)issue_ns / (double)total);
	report_cpu_wait();
	if (opt_mode == MODE_WEFT_WQ || opt_mode == MODE_WEFT_POST) {
		weft_stats_t st;
		int err = weft_shutdown();
		if (err)
			die_errno("weft_shutdown", err);
		for (int i = 0; i < opt_threads; i++)
			weft_sem_destroy(&wsems[i]);
		if (weft_stats_get(&st) == 0)
			fprintf(stderr,
				"sembench: weft: switches %llu remote wakes %llu (locked %llu) "
				"local wakes %llu kicks %llu worker parks %llu thread parks %llu "
				"wakeq flushes %llu batches %llu timers %llu\n",
				(unsigned long long)st.switches, (unsigned long long)st.wakes_remote,
				(unsigned long long)st.wakes_locked, (unsigned long long)st.wakes_local,
				(unsigned long long)st.kicks, (unsigned long long)st.parks,
				(unsigned long long)st.thread_parks,
				(unsigned long long)st.wakeq_flushes,
				(unsigned long long)st.wakeq_batches,
				(unsigned long long)st.timers_fired);
	}
	return 0; /* mode 0's sets are removed by ipc_teardown() (atexit) */
}
