/*
 * examples/test-mutex.c - seed 001's `test-mutex V 16 10` (plus the `timec`
 * counters) in library form, with the pthread baselines in the same binary
 * (docs/seeds.md, "test-mutex").
 *
 * What it owns
 *   A port written from a description of the original (no code of the
 *   original was used). T tasks run for S seconds; each operation takes one
 *   lock that guards a shared "directory" (a hash table standing in for the
 *   /tmp directory inode whose i_mutex serialised the original's creat()
 *   calls), inserts the task's entry, does the rest of the directory work,
 *   removes the entry and unlocks; then a little work outside the lock (the
 *   original's close() and syscall overhead). With many tasks on few CPUs the
 *   lock is a convoy of short critical sections, which is where spinning on a
 *   running owner beats sleeping (the seed's OWNER_SPIN A/B).
 *
 *   --impl selects the tasks and the lock:
 *     weft              light threads, weft_mutex_t (WEFT_FEATURES=NO_OWNER_SPIN
 *                       gives the seed's "before" column)
 *     pthread           OS threads, default pthread_mutex_t
 *     pthread-adaptive  OS threads, PTHREAD_MUTEX_ADAPTIVE_NP
 *     pthread-spin      OS threads, pthread_spinlock_t
 *
 *   Modes (first letter of the mode argument, as in the original):
 *     V  "VFS": the directory operation above (default hold 1000 ns, work
 *        250 ns, see "Work amounts").
 *     M  "Mutex": lock, bump a shared counter, unlock (hold/work 0 ns), the
 *        raw lock hand-over rate.
 *   The original's S/R/W modes (kernel semaphore and rwsem) are not ported.
 *
 * Objects and states
 *   struct task: one per task, cache-line aligned: its op counter (written
 *   only by the task, summed by main every second) and its directory entry.
 *   struct dir: buckets, entry count, create/remove counters; every field is
 *   protected by the benchmark lock.
 *
 * Invariants (checked; a violation fails the run with exit status 1)
 *   I1  Inside the lock, right after the insert, the directory holds exactly
 *       one entry (the holder's): anything else means two holders overlapped.
 *   I2  The entry removed is the one inserted; it is found in its bucket.
 *   I3  At the end, creates == removes == the sum of the task counters, and
 *       the directory is empty.
 *
 * Protocol
 *   Start: main starts the tasks; everybody sleeps 1 s (the original's
 *   start-up sleep).
 *   Sampling: every second main sums the per-task counters and prints the
 *   delta as `\r| loops/sec: N`. The original used one shared counter bumped
 *   without atomics (lossy on x86_64); this port keeps per-task counters,
 *   which the header line says. After S samples main sleeps one more second
 *   (ops of that second are not counted, as in the original), sets end,
 *   joins the tasks and prints `avg ops/sec: <sum/S>`. S = 0 runs until
 *   SIGINT or SIGHUP. Wall time is therefore about S + 2 s, as in the seed.
 *   Counters (the `timec -e -5,-4,-3,-2` block), for the whole process from
 *   start to exit, like timec:
 *     task clock        getrusage(RUSAGE_SELF) user + system time;
 *     CPU migrations    weft: light-thread migrations between workers
 *                       (weft_stats_get); pthread: perf_event_open software
 *                       counter PERF_COUNT_SW_CPU_MIGRATIONS, inherited by
 *                       every thread, else the sum of each task's
 *                       se.nr_migrations from /proc/thread-self/sched;
 *     context switches  weft: light-thread switches (weft_stats_get);
 *                       pthread: getrusage ru_nvcsw + ru_nivcsw;
 *     pagefaults        getrusage ru_minflt + ru_majflt.
 *   The OS-level numbers of the weft run (worker threads' switches and
 *   migrations) and the weft mutex counters follow the block.
 *
 * Work amounts
 *   The busy work inside and outside the lock is a calibrated loop of
 *   dependent multiply-adds, so a preempted holder still owes its remaining
 *   work (a clock-based spin would not). Defaults of mode V come from the
 *   seed's regime, not from a target: seed 001's OWNER_SPIN run did 228k
 *   ops/s on 2 CPUs with ~1.85 CPUs busy, i.e. the lock was saturated
 *   (throughput = 1 / hold, so hold ~ 4.4 us on a 2009 Opteron, ~1 us on a
 *   current core) and the work outside it was no longer than the hold
 *   (otherwise two CPUs could not saturate it). The outside work is set to
 *   a quarter of the hold so that the lock, not the CPUs, stays the
 *   bottleneck on a small VM too: this repository's 2-vCPU machine delivers
 *   ~1.3 CPUs of compute with both busy (a dependent multiply loop goes
 *   from 1.12 to 1.69 ns per step), and with work = hold it measured as
 *   CPU-bound, every lock within noise of the others. Both amounts are
 *   options (--hold-ns, --work-ns) so the convoy can be studied at other
 *   ratios.
 *
 * Never does what the original did at start-up (removing every file in
 * /tmp): it touches no files at all.
 *
 * See docs/seeds.md "test-mutex" (seed 001), docs/design.md "Mutex",
 * run-seeds.sh.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <weft.h>
#include <weft/sync.h>

#include "bench.h"

/* Buckets of the directory hash table. */
#define DIR_BUCKETS 256
/* Stack of every task (pthread or light thread); the tasks are shallow. */
#define TASK_STACK (256 * 1024)
/* Default busy work in ns, mode V (see "Work amounts" above). */
#define V_HOLD_NS 1000
#define V_WORK_NS 250
#define CACHELINE 64

enum impl { IMPL_WEFT, IMPL_PTHREAD, IMPL_ADAPTIVE, IMPL_SPIN, IMPL_COUNT };

static const char *const impl_name[IMPL_COUNT] = {
	"weft", "pthread", "pthread-adaptive", "pthread-spin",
};

static const char *const impl_desc[IMPL_COUNT] = {
	"light threads, weft_mutex_t",
	"OS threads, default pthread_mutex_t",
	"OS threads, PTHREAD_MUTEX_ADAPTIVE_NP",
	"OS threads, pthread_spinlock_t",
};

struct dentry {
	struct dentry *next; /* protected by the benchmark lock */
	uint64_t hash;
	char name[32];
};

struct task {
	alignas(CACHELINE) _Atomic uint64_t ops; /* written by the task only */
	struct dentry entry;                      /* in the directory only while locked */
	int id;
	_Atomic uint64_t os_migrations;           /* fallback migration count */
	uint32_t *lat;                            /* --latency: LAT_BUCKETS counts */
	uint64_t lat_max;                         /* --latency: longest wait, ns */
	union {
		pthread_t pt;
		weft_thread_t wt;
	} handle;
};

/* The "directory": every field is protected by the benchmark lock. */
static struct {
	struct dentry *bucket[DIR_BUCKETS];
	uint64_t entries;
	uint64_t creates;
	uint64_t removes;
	uint64_t violations; /* I1/I2 failures */
	alignas(CACHELINE) uint64_t counter; /* mode M */
} dir;

static union {
	weft_mutex_t w;
	pthread_mutex_t p;
	pthread_spinlock_t s;
} lock;

/* Options, written by main() before any task starts. */
static int opt_impl = IMPL_WEFT;
static char opt_mode = 'V';
static int opt_tasks;
static int opt_seconds;
static long opt_hold_ns = -1, opt_work_ns = -1;
static uint64_t hold_iters, work_iters;

/* relaxed: a stop flag polled once per op; nothing is published through it
 * (main reads the task counters after joining). */
static _Atomic int stop_flag;
static int migration_fallback; /* 1 = tasks read /proc/thread-self/sched */

static void die(const char *what)
{
	fprintf(stderr, "test-mutex: %s\n", what);
	exit(1);
}

static void die_errno(const char *what, int err)
{
	fprintf(stderr, "test-mutex: %s: %s\n", what, strerror(err));
	exit(1);
}

/* --- busy work --- */

/* n steps of a dependent multiply-add chain; the asm keeps the compiler
 * from folding the loop. Returns the chain value so it is used. */
static uint64_t burn(uint64_t n, uint64_t x)
{
	for (uint64_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

/* Iterations of burn() per ns: best of several timed runs, so a run that
 * was preempted does not inflate the estimate. */
static double calibrate(void)
{
	const uint64_t n = 2000000;
	uint64_t best = UINT64_MAX, sink = 0;

	for (int r = 0; r < 7; r++) {
		uint64_t t0 = bench_now_ns();
		sink += burn(n, (uint64_t)r);
		uint64_t dt = bench_now_ns() - t0;
		if (dt < best)
			best = dt;
	}
	__asm__ volatile("" : : "r"(sink));
	return (double)n / (double)(best ? best : 1);
}

/* --- the lock --- */

static void lock_init(void)
{
	int err = 0;
	pthread_mutexattr_t ma;

	switch (opt_impl) {
	case IMPL_WEFT:
		err = weft_mutex_init(&lock.w);
		break;
	case IMPL_PTHREAD:
		err = pthread_mutex_init(&lock.p, NULL);
		break;
	case IMPL_ADAPTIVE:
		pthread_mutexattr_init(&ma);
		err = pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
		if (!err)
			err = pthread_mutex_init(&lock.p, &ma);
		pthread_mutexattr_destroy(&ma);
		break;
	case IMPL_SPIN:
		err = pthread_spin_init(&lock.s, PTHREAD_PROCESS_PRIVATE);
		break;
	}
	if (err)
		die_errno("lock init", err);
}

static inline void do_lock(void)
{
	int err = 0;

	switch (opt_impl) {
	case IMPL_WEFT:
		err = weft_mutex_lock(&lock.w);
		break;
	case IMPL_PTHREAD:
	case IMPL_ADAPTIVE:
		err = pthread_mutex_lock(&lock.p);
		break;
	case IMPL_SPIN:
		err = pthread_spin_lock(&lock.s);
		break;
	}
	if (err)
		die_errno("lock", err);
}

static inline void do_unlock(void)
{
	int err = 0;

	switch (opt_impl) {
	case IMPL_WEFT:
		err = weft_mutex_unlock(&lock.w);
		break;
	case IMPL_PTHREAD:
	case IMPL_ADAPTIVE:
		err = pthread_mutex_unlock(&lock.p);
		break;
	case IMPL_SPIN:
		err = pthread_spin_unlock(&lock.s);
		break;
	}
	if (err)
		die_errno("unlock", err);
}

static void lock_destroy(void)
{
	switch (opt_impl) {
	case IMPL_WEFT:
		weft_mutex_destroy(&lock.w);
		break;
	case IMPL_PTHREAD:
	case IMPL_ADAPTIVE:
		pthread_mutex_destroy(&lock.p);
		break;
	case IMPL_SPIN:
		pthread_spin_destroy(&lock.s);
		break;
	}
}

/* --- the directory operation --- */

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

/* --latency: acquisition latency (lock call to lock held) of every op, in
 * a log-linear histogram per task (8 sub-buckets per power of two, so a
 * percentile is exact to 12.5%) plus the exact maximum. Two clock reads
 * per op (~40 ns), so it is off by default. */
#define LAT_SUB 8
#define LAT_BUCKETS (64 * LAT_SUB)
static int opt_latency;

static unsigned lat_bucket(uint64_t ns)
{
	unsigned msb;

	if (ns < LAT_SUB)
		return (unsigned)ns;
	msb = 63u - (unsigned)__builtin_clzll(ns);
	return msb * LAT_SUB + (unsigned)((ns >> (msb - 3)) & (LAT_SUB - 1));
}

/* Lowest ns of bucket b (the inverse of lat_bucket). */
static uint64_t lat_floor(unsigned b)
{
	unsigned msb = b / LAT_SUB;

	if (b < LAT_SUB)
		return b;
	return ((uint64_t)1 << msb) | ((uint64_t)(b % LAT_SUB) << (msb - 3));
}

static inline void timed_lock(struct task *t)
{
	uint64_t t0, d;

	if (!opt_latency) {
		do_lock();
		return;
	}
	t0 = bench_now_ns();
	do_lock();
	d = bench_now_ns() - t0;
	t->lat[lat_bucket(d)]++;
	if (d > t->lat_max)
		t->lat_max = d;
}

/* One "creat + unlink" of task t's entry. Locks: takes the benchmark lock. */
static uint64_t dir_op(struct task *t, uint64_t x)
{
	struct dentry *d = &t->entry, **pp;

	/* Outside the lock: the path lookup's hashing. */
	d->hash = name_hash(d->name);
	unsigned b = (unsigned)(d->hash % DIR_BUCKETS);

	timed_lock(t);
	/* Create: the name must not exist yet (I2), then link it in. */
	for (struct dentry *e = dir.bucket[b]; e; e = e->next)
		if (e == d)
			dir.violations++;
	d->next = dir.bucket[b];
	dir.bucket[b] = d;
	dir.creates++;
	if (++dir.entries != 1) /* I1 */
		dir.violations++;
	x = burn(hold_iters, x);
	/* Remove it again. */
	for (pp = &dir.bucket[b]; *pp && *pp != d; pp = &(*pp)->next)
		;
	if (*pp) {
		*pp = d->next;
		dir.entries--;
		dir.removes++;
	} else {
		dir.violations++; /* I2 */
	}
	do_unlock();
	return x;
}

static uint64_t mutex_op(struct task *t, uint64_t x)
{
	timed_lock(t);
	dir.counter++;
	x = burn(hold_iters, x);
	do_unlock();
	return x;
}

static uint64_t read_thread_migrations(void)
{
	char line[256];
	uint64_t v = 0;
	FILE *f = fopen("/proc/thread-self/sched", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "se.nr_migrations", 16)) {
			char *colon = strchr(line, ':');
			if (colon)
				v = strtoull(colon + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void *task_main(void *arg)
{
	struct task *t = arg;
	uint64_t x = (uint64_t)t->id, n = 0;

	/* The original's start-up sleep. */
	if (opt_impl == IMPL_WEFT)
		weft_sleep_ns(1000000000u);
	else
		sleep_ns(1000000000u);
	/* relaxed: see stop_flag. */
	while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
		x = opt_mode == 'V' ? dir_op(t, x) : mutex_op(t, x);
		x = burn(work_iters, x);
		/* relaxed: single writer; main's sum is a snapshot and is
		 * exact after the join. */
		atomic_store_explicit(&t->ops, ++n, memory_order_relaxed);
	}
	if (migration_fallback)
		/* relaxed: read by main after the join, which orders it. */
		atomic_store_explicit(&t->os_migrations, read_thread_migrations(),
				      memory_order_relaxed);
	return (void *)(uintptr_t)x;
}

/* --- perf counters (pthread migrations; OS-level numbers for weft) --- */

static int perf_open(uint64_t config)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof(a);
	a.config = config;
	a.inherit = 1; /* every thread created later is counted too */
	return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

static int perf_read(int fd, uint64_t *v)
{
	return fd >= 0 && read(fd, v, sizeof(*v)) == (ssize_t)sizeof(*v) ? 0 : -1;
}

static uint64_t sum_ops(struct task *tasks)
{
	uint64_t s = 0;

	for (int i = 0; i < opt_tasks; i++)
		/* relaxed: see task_main(). */
		s += atomic_load_explicit(&tasks[i].ops, memory_order_relaxed);
	return s;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: test-mutex [--impl=weft|pthread|pthread-adaptive|pthread-spin]\n"
		"                  [--hold-ns=N] [--work-ns=N] [--latency] [V|M] [tasks] [seconds]\n"
		"  V  lock guards a shared directory: insert + remove an entry (default)\n"
		"  M  lock guards a shared counter\n"
		"  tasks    default: number of CPUs\n"
		"  seconds  default: 0 = until SIGINT/SIGHUP\n"
		"  --hold-ns/--work-ns  busy work inside/outside the lock\n"
		"  --latency  acquisition latency p50/p99/p99.9/max (2 clock reads per op)\n"
		"                       (V: 1000/250, M: 0/0)\n"
		"  WEFT_FEATURES=NO_OWNER_SPIN  the seed's A/B for --impl=weft\n");
}

static long parse_long(const char *s, long min)
{
	char *end_;
	long v = strtol(s, &end_, 10);

	if (*s == '\0' || *end_ != '\0' || v < min || v > INT_MAX) {
		usage();
		exit(1);
	}
	return v;
}

int main(int argc, char **argv)
{
	int npos = 0;
	uint64_t wall0 = bench_now_ns();
	bench_rusage_t ru0, ru1, rud;

	bench_rusage_get(&ru0);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			return 0;
		} else if (!strncmp(a, "--impl=", 7)) {
			opt_impl = -1;
			for (int k = 0; k < IMPL_COUNT; k++)
				if (!strcmp(a + 7, impl_name[k]))
					opt_impl = k;
			if (opt_impl < 0) {
				usage();
				return 1;
			}
		} else if (!strncmp(a, "--hold-ns=", 10)) {
			opt_hold_ns = parse_long(a + 10, 0);
		} else if (!strncmp(a, "--work-ns=", 10)) {
			opt_work_ns = parse_long(a + 10, 0);
		} else if (!strcmp(a, "--latency")) {
			opt_latency = 1;
		} else if (a[0] == '-') {
			usage();
			return 1;
		} else if (npos == 0) {
			opt_mode = a[0];
			npos++;
		} else if (npos == 1) {
			opt_tasks = (int)parse_long(a, 1);
			npos++;
		} else if (npos == 2) {
			opt_seconds = (int)parse_long(a, 0);
			npos++;
		} else {
			usage();
			return 1;
		}
	}
	if (opt_mode == 'v' || opt_mode == 'm')
		opt_mode = (char)(opt_mode - 'a' + 'A');
	if (opt_mode != 'V' && opt_mode != 'M') {
		fprintf(stderr, "test-mutex: mode %c not available in this port (V or M)\n", opt_mode);
		return 1;
	}
	int cpus = bench_cpu_count();
	if (opt_tasks == 0)
		opt_tasks = cpus;
	if (opt_hold_ns < 0)
		opt_hold_ns = opt_mode == 'V' ? V_HOLD_NS : 0;
	if (opt_work_ns < 0)
		opt_work_ns = opt_mode == 'V' ? V_WORK_NS : 0;

	/* Counters first, so they see every thread created from here on. */
	int fd_migr = perf_open(PERF_COUNT_SW_CPU_MIGRATIONS);
	int fd_cs = perf_open(PERF_COUNT_SW_CONTEXT_SWITCHES);
	migration_fallback = fd_migr < 0;

	double per_ns = calibrate();
	hold_iters = (uint64_t)(per_ns * (double)opt_hold_ns + 0.5);
	work_iters = (uint64_t)(per_ns * (double)opt_work_ns + 0.5);

	/* SIGINT/SIGHUP end an open-ended run: blocked in every thread
	 * (workers and tasks inherit the mask) and taken by main with
	 * sigtimedwait() as its one-second sleep. */
	sigset_t stopsigs;
	sigemptyset(&stopsigs);
	sigaddset(&stopsigs, SIGINT);
	sigaddset(&stopsigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stopsigs, NULL);

	struct task *tasks = aligned_alloc(CACHELINE, sizeof(*tasks) * (size_t)opt_tasks);
	if (!tasks)
		die("out of memory");
	memset(tasks, 0, sizeof(*tasks) * (size_t)opt_tasks);
	for (int i = 0; i < opt_tasks; i++) {
		tasks[i].id = i;
		snprintf(tasks[i].entry.name, sizeof(tasks[i].entry.name), "tmp-%d", i);
		if (opt_latency && !(tasks[i].lat = calloc(LAT_BUCKETS, sizeof(uint32_t))))
			die("out of memory");
	}

	printf("%d CPUs, running %d parallel test-tasks.\n", cpus, opt_tasks);
	printf("checking %s performance.\n", opt_mode == 'V' ? "VFS" : "Mutex");
	if (opt_impl == IMPL_WEFT) {
		int err = weft_init(NULL);
		if (err)
			die_errno("weft_init", err);
		printf("[library form: impl=weft (%s on %d workers, OWNER_SPIN %s), hold %ld ns, "
		       "work %ld ns; per-task op counters summed each second]\n",
		       impl_desc[opt_impl], weft_workers(),
		       weft_feature("OWNER_SPIN") == 1 ? "on" : "off", opt_hold_ns, opt_work_ns);
	} else {
		printf("[library form: impl=%s (%s), hold %ld ns, work %ld ns; per-task op "
		       "counters summed each second]\n",
		       impl_name[opt_impl], impl_desc[opt_impl], opt_hold_ns, opt_work_ns);
	}
	fflush(stdout);

	lock_init();
	if (opt_impl == IMPL_WEFT) {
		weft_attr_t attr;
		weft_attr_init(&attr);
		attr.stack_size = TASK_STACK;
		for (int i = 0; i < opt_tasks; i++) {
			int err = weft_spawn(&tasks[i].handle.wt, task_main, &tasks[i], &attr);
			if (err)
				die_errno("weft_spawn", err);
		}
	} else {
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, TASK_STACK);
		for (int i = 0; i < opt_tasks; i++) {
			int err = pthread_create(&tasks[i].handle.pt, &attr, task_main, &tasks[i]);
			if (err)
				die_errno("pthread_create", err);
		}
		pthread_attr_destroy(&attr);
	}

	/* Start-up second, then one sample per second. */
	struct timespec one_sec = { 1, 0 };
	int stopped = sigtimedwait(&stopsigs, NULL, &one_sec) > 0;
	uint64_t prev = sum_ops(tasks), sum = 0;
	int samples = 0;
	while (!stopped && (opt_seconds == 0 || samples < opt_seconds)) {
		if (sigtimedwait(&stopsigs, NULL, &one_sec) > 0) {
			stopped = 1;
			break;
		}
		uint64_t cur = sum_ops(tasks);
		printf("\r| loops/sec: %llu", (unsigned long long)(cur - prev));
		fflush(stdout);
		sum += cur - prev;
		prev = cur;
		samples++;
	}
	/* The trailing second, not counted (as in the original). */
	if (!stopped)
		sleep_ns(1000000000u);
	/* relaxed: see stop_flag. */
	atomic_store_explicit(&stop_flag, 1, memory_order_relaxed);

	weft_stats_t st;
	memset(&st, 0, sizeof(st));
	if (opt_impl == IMPL_WEFT) {
		for (int i = 0; i < opt_tasks; i++) {
			int err = weft_join(tasks[i].handle.wt, NULL);
			if (err)
				die_errno("weft_join", err);
		}
		int err = weft_shutdown();
		if (err)
			die_errno("weft_shutdown", err);
		weft_stats_get(&st);
	} else {
		for (int i = 0; i < opt_tasks; i++)
			pthread_join(tasks[i].handle.pt, NULL);
	}
	lock_destroy();

	bench_rusage_get(&ru1);
	bench_rusage_delta(&rud, &ru0, &ru1);
	uint64_t os_migr = 0, os_cs = 0;
	int have_migr = perf_read(fd_migr, &os_migr) == 0;
	int have_cs = perf_read(fd_cs, &os_cs) == 0;
	if (!have_migr && migration_fallback) {
		for (int i = 0; i < opt_tasks; i++)
			/* relaxed: after the join (see task_main()). */
			os_migr += atomic_load_explicit(&tasks[i].os_migrations, memory_order_relaxed);
		have_migr = 1;
	}
	uint64_t wall = bench_now_ns() - wall0;

	printf("\ravg ops/sec:               %llu\n",
	       (unsigned long long)(samples ? sum / (uint64_t)samples : 0));
	printf("\n Performance counter stats for '%s':\n\n", argv[0]);
	printf(" %15.6f  task clock ticks     (msecs)\n\n", (rud.user_ns + rud.sys_ns) / 1e6);
	uint64_t migr = opt_impl == IMPL_WEFT ? st.migrations : os_migr;
	uint64_t cs = opt_impl == IMPL_WEFT ? st.switches : rud.nvcsw + rud.nivcsw;
	if (opt_impl == IMPL_WEFT || have_migr)
		printf(" %15llu  CPU migrations       (events)\n", (unsigned long long)migr);
	else
		printf(" %15s  CPU migrations       (events)\n", "n/a");
	printf(" %15llu  context switches     (events)\n", (unsigned long long)cs);
	printf(" %15llu  pagefaults           (events)\n\n",
	       (unsigned long long)(rud.minflt + rud.majflt));
	printf(" Wall-clock time elapsed: %.6f msecs\n\n", wall / 1e6);

	if (opt_impl == IMPL_WEFT) {
		printf(" [migrations, context switches: light threads (weft_stats_get)]\n");
		if (fd_migr >= 0)
			printf(" [OS level: context switches %llu (getrusage), CPU migrations %llu "
			       "(perf_event_open)]\n",
			       (unsigned long long)(rud.nvcsw + rud.nivcsw),
			       (unsigned long long)os_migr);
		else
			printf(" [OS level: context switches %llu (getrusage), CPU migrations n/a]\n",
			       (unsigned long long)(rud.nvcsw + rud.nivcsw));
		printf(" [weft: worker parks %llu, kicks %llu, steals %llu, remote wakes %llu, "
		       "thread parks %llu]\n",
		       (unsigned long long)st.parks, (unsigned long long)st.kicks,
		       (unsigned long long)st.steals, (unsigned long long)st.wakes_remote,
		       (unsigned long long)st.thread_parks);
		printf(" [weft mutex: spins %llu, spin wins %llu, spin aborts %llu, parks %llu, "
		       "hand-offs %llu]\n",
		       (unsigned long long)st.mutex_spins, (unsigned long long)st.mutex_spin_wins,
		       (unsigned long long)st.mutex_spin_aborts, (unsigned long long)st.mutex_parks,
		       (unsigned long long)st.mutex_handoffs);
	} else {
		printf(" [context switches: getrusage; CPU migrations: %s]\n",
		       fd_migr >= 0 ? "perf_event_open PERF_COUNT_SW_CPU_MIGRATIONS (inherited)"
		       : migration_fallback ? "sum of /proc/thread-self/sched se.nr_migrations"
					    : "n/a");
		if (have_cs)
			printf(" [perf context switches: %llu]\n", (unsigned long long)os_cs);
	}

	/* Fairness: the spread of the per-task counts (the original printed
	 * latency deviance instead; a task stuck at 0 means starvation). */
	uint64_t tmin = UINT64_MAX, tmax = 0;
	for (int i = 0; i < opt_tasks; i++) {
		/* relaxed: after the join. */
		uint64_t v = atomic_load_explicit(&tasks[i].ops, memory_order_relaxed);
		tmin = v < tmin ? v : tmin;
		tmax = v > tmax ? v : tmax;
	}
	printf(" [per-task ops: min %llu max %llu avg %llu]\n", (unsigned long long)tmin,
	       (unsigned long long)tmax, (unsigned long long)(sum_ops(tasks) / (uint64_t)opt_tasks));

	if (opt_latency) {
		uint64_t *h = calloc(LAT_BUCKETS, sizeof(*h)), n = 0, c = 0, lmax = 0;
		uint64_t p50 = 0, p99 = 0, p999 = 0;

		if (!h)
			die_errno("calloc", ENOMEM);
		for (int i = 0; i < opt_tasks; i++) {
			for (unsigned b = 0; b < LAT_BUCKETS; b++)
				h[b] += tasks[i].lat[b];
			lmax = tasks[i].lat_max > lmax ? tasks[i].lat_max : lmax;
		}
		for (unsigned b = 0; b < LAT_BUCKETS; b++)
			n += h[b];
		for (unsigned b = 0; b < LAT_BUCKETS; b++) {
			c += h[b];
			if (!p50 && c * 2 >= n)
				p50 = lat_floor(b);
			if (!p99 && c * 100 >= n * 99)
				p99 = lat_floor(b);
			if (!p999 && c * 1000 >= n * 999)
				p999 = lat_floor(b);
		}
		/* lat_floor is the bucket's lower end: the value is within 12.5% above */
		printf(" [acquisition latency: %llu ops, p50 %llu ns, p99 %llu ns, p99.9 %llu ns, max %llu ns]\n",
		       (unsigned long long)n, (unsigned long long)p50, (unsigned long long)p99,
		       (unsigned long long)p999, (unsigned long long)lmax);
		free(h);
	}

	/* I3 */
	uint64_t total = sum_ops(tasks);
	int bad = dir.violations != 0 || dir.entries != 0;
	if (opt_mode == 'V')
		bad |= dir.creates != total || dir.removes != total;
	else
		bad |= dir.counter != total;
	printf(" [check: %llu ops, %llu creates, %llu removes, %llu entries left, %llu "
	       "violations: %s]\n",
	       (unsigned long long)total, (unsigned long long)dir.creates,
	       (unsigned long long)dir.removes, (unsigned long long)dir.entries,
	       (unsigned long long)dir.violations, bad ? "FAILED" : "ok");
	for (int i = 0; i < opt_tasks; i++)
		free(tasks[i].lat);
	free(tasks);
	return bad ? 1 : 0;
}
