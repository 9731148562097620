/*
 * runtime/init.c - starting and stopping the runtime, configuration and
 * panics (fault injection is runtime/fault.c).
 *
 * States of wft_rt.state (enum wft_rt_state): STOPPED, CHANGING (starting
 * or stopping, init_lock held), RUNNING. weft_init and weft_shutdown serialise on init_lock;
 * the implicit init of weft_spawn goes through weft_init too, so two
 * racing first spawns start one runtime (the loser sees EBUSY and proceeds).
 *
 * Shutdown waits for every light thread to finish (wft_live_threads()
 * reaches 0; exits while it waits store quiesce = 1 and wake the futex), stops and joins
 * the workers, then frees the workers and the TCB slabs, so that a fresh
 * weft_init() starts from nothing (the CK_FORK=no test run proves it).
 */
#include "runtime/wft.h"
#include "runtime/os_policy.h"
#include "runtime/diag.h"
#include "runtime/topology.h"
#include "runtime/sanitizer.h"
#include "runtime/env.h"
#include "runtime/stack.h"
#include "runtime/uring.h"

#ifdef HAVE_VALGRIND_VALGRIND_H
int wft_vg_running;
#endif

#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct wft_runtime wft_rt = {
	.init_lock = PTHREAD_MUTEX_INITIALIZER,
};

void wft_stats_reset_unsafe(void);

void wft_panic_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	struct wft_worker *w = wft_worker_self();

	fprintf(stderr, "weft: panic at %s:%d (worker %d, thread %p): ", file, line,
		w ? w->id : -1, w ? (void *)w->current : NULL);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

static int affinity_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) != 0) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);

		for (int i = 0; i < c && n < max; i++)
			cpus[n++] = i;
		return n > 0 ? n : 1;
	}
	for (int i = 0; i < CPU_SETSIZE && n < max; i++)
		if (CPU_ISSET(i, &set))
			cpus[n++] = i;
	return n > 0 ? n : 1;
}

/* The workers' random choices (steal victims' order, RANDOMIZE's coin):
 * WEFT_SEED (a number) fixes them; otherwise RANDOMIZE draws a seed from
 * the clock once per process and prints it, so that a run that failed can
 * be repeated with the same choices (the timing of the OS threads is not
 * repeatable, so this narrows the search rather than replaying it); without
 * either the seed is 0, the same choices every run. Bad WEFT_SEED: EINVAL.
 * Context: weft_init, under init_lock. */
static uint64_t randomize_seed;   /* 0: not drawn yet; under init_lock */

static int choose_seed(void)
{
	const char *e = getenv("WEFT_SEED");

	if (e && *e) {
		int base = 10;
		const char *d = e;
		char *end;
		unsigned long long v;

		/* decimal (as printed below), or 0x hex; no sign, no spaces */
		if (d[0] == '0' && (d[1] == 'x' || d[1] == 'X')) {
			base = 16;
			d += 2;
		}
		errno = 0;
		v = strtoull(d, &end, base);
		if (errno || *end || !isxdigit((unsigned char)*d) || end == d) {
			fprintf(stderr, "weft: WEFT_SEED=%s is not a number\n", e);
			return EINVAL;
		}
		wft_rt.seed = v;
		return 0;
	}
	if (!wft_feat(RANDOMIZE)) {
		wft_rt.seed = 0;
		return 0;
	}
	if (!randomize_seed) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		randomize_seed = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
				 ((uint64_t)getpid() << 32);
		if (!randomize_seed)
			randomize_seed = 1;
		fprintf(stderr, "weft: RANDOMIZE: WEFT_SEED=%llu repeats this run's choices\n",
			(unsigned long long)randomize_seed);
	}
	wft_rt.seed = randomize_seed;
	return 0;
}

static _Atomic int stats_atexit;

static void print_stats_at_exit(void)
{
	weft_stats_print(stderr);
}

/*
 * The numeric environment variables, parsed strictly (runtime/env.c): a
 * value that is not a number in range is EINVAL with a message, never
 * read as its prefix or wrapped. Sets wft_rt's workers, stack size and
 * pin, and env_stats (WEFT_FAULT, a test knob, is read by reset_unsafe).
 * Context: weft_init, under init_lock.
 */
static bool env_stats;   /* WEFT_STATS set and not 0; under init_lock */

static int read_env(void)
{
	unsigned long n = (unsigned long)wft_rt.nworkers, pin = (unsigned long)wft_rt.pin;
	unsigned long st = 0, off = 1;
	size_t ss = wft_rt.stack_size;
	int rc;

	if ((rc = wft_env_ulong("WEFT_WORKERS", 1, WEFT_WORKERS_MAX, &n)) ||
	    (rc = wft_env_size("WEFT_STACK_SIZE", WEFT_STACK_MIN, WFT_STACK_MAX, &ss)) ||
	    (rc = wft_env_ulong("WEFT_PIN", 0, 1, &pin)) ||
	    (rc = wft_env_ulong("WEFT_STATS", 0, 1, &st)) ||
	    /* read by runtime/offload.c when it starts; its range there */
	    (rc = wft_env_ulong("WEFT_OFFLOAD_THREADS", 1, 1024, &off)))
		return rc;
	wft_rt.nworkers = (int)n;
	wft_rt.stack_size = ss;
	wft_rt.pin = pin != 0;
	env_stats = st != 0;
	return 0;
}

/* weft_init's argument checks: bad input is EINVAL. Context: any. */
static int config_check(const weft_config_t *cfg)
{
	if (cfg->workers < 0 || cfg->workers > WEFT_WORKERS_MAX)
		return EINVAL;
	if (cfg->stack_size && (cfg->stack_size < WEFT_STACK_MIN || cfg->stack_size > WFT_STACK_MAX))
		return EINVAL;
	for (size_t i = 0; i < sizeof(cfg->reserved) / sizeof(cfg->reserved[0]); i++)
		if (cfg->reserved[i])
			return EINVAL;
	return 0;
}

/* The feature switches: the defaults, then the config's switches, then the
 * environment's on top. Returns 0 or EINVAL. Context: weft_init, under
 * init_lock. */
static int config_features(const weft_config_t *cfg)
{
	const char *e = getenv("WEFT_FEATURES");
	uint64_t feats = wft_features_default();
	int rc;

	/* a switch the environment does not name keeps the config's setting
	 * (a WEFT_FEATURES string does not replace the config's whole list) */
	rc = wft_features_parse(cfg->features, "weft_config_t.features", &feats);
	if (rc == 0)
		rc = wft_features_parse(e, "WEFT_FEATURES", &feats);
	if (rc)
		return EINVAL;
	wft_features = feats;
	return 0;
}

/* The workers' count, CPUs, stack size and pinning from cfg and the
 * environment, the topology and the seed. Returns 0, EINVAL or the
 * topology's error. Context: weft_init, under init_lock. */
static int config_workers(const weft_config_t *cfg)
{
	int ncpu, rc;

	ncpu = affinity_cpus(wft_rt.cpus, WEFT_WORKERS_MAX);
	wft_rt.nworkers = cfg->workers ? cfg->workers : ncpu;
	wft_rt.stack_size = cfg->stack_size ? cfg->stack_size : WEFT_STACK_DEFAULT;
	wft_rt.pin = cfg->pin;
	rc = read_env();
	if (rc)
		return rc;
	/* page-rounded once here, so a spawn with the default size need not
	 * (no wrap: the size is at most WFT_STACK_MAX) */
	wft_rt.stack_size = (wft_rt.stack_size + wft_page_size() - 1) & ~(wft_page_size() - 1);
	if (wft_rt.pin)
		for (int i = ncpu; i < wft_rt.nworkers; i++)
			wft_rt.cpus[i] = wft_rt.cpus[i % ncpu];
	wft_rt.ncpu = ncpu;
	rc = wft_topology_init(wft_rt.nworkers, wft_rt.pin, wft_rt.cpus);
	if (rc == 0)
		rc = choose_seed();
	return rc;
}

/* A fresh runtime's shared state: the test knobs of WEFT_FAULT, the
 * counters, the idle and DRAIN state, then state CHANGING. Context:
 * weft_init, under init_lock, before any worker starts. */
static void reset_unsafe(void)
{
	const char *e = getenv("WEFT_FAULT");

	wft_fault_reset_unsafe(e);
	wft_uring_reset_unsafe();
	/* WEFT_FAULT=guard:N: the next N guard-marker installs fail with
	 * ENOMEM (runtime/stack.c "Guard fallback") */
	wft_stack_runtime_init(e && strncmp(e, "guard:", 6) == 0 ? atol(e + 6) : 0);
	wft_stats_reset_unsafe();
	atomic_store_explicit(&wft_rt.nspinning, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_rt.spin_off_until, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_rt.spin_backoff, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_rt.nidle, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_rt.nkicked, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_rt.looker, 0, memory_order_relaxed);
	for (int i = 0; i < WEFT_WORKERS_MAX / 64; i++)
	{
		atomic_store_explicit(&wft_rt.idle_mask[i], 0, memory_order_relaxed);
		atomic_store_explicit(&wft_rt.kick_pending[i], 0, memory_order_relaxed);
	}
	atomic_store_explicit(&wft_rt.os_born, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_rt.quiescing, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_rt.stopping, 0, memory_order_relaxed);
	/* DRAIN starts with every worker active (runtime/drain.c); relaxed:
	 * no worker runs yet, and starting them orders these stores */
	atomic_store_explicit(&wft_rt.ndrain,
			      (int)atomic_load_explicit(&wft_fault_drainfix, memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(&wft_rt.drain_next, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_rt.drain_busy, 0, memory_order_relaxed);
	memset(&wft_rt.drain, 0, sizeof(wft_rt.drain));
	atomic_store_explicit(&wft_rt.state, WFT_RT_CHANGING, memory_order_relaxed);
}

/* Install the process-wide handlers and start the workers (and the dump
 * signal thread) with the asynchronous signals blocked. Returns 0 or the
 * workers' error. Context: weft_init, under init_lock. */
static int start_workers(void)
{
	/* The workers (and the threads they create) inherit this mask:
	 * asynchronous signals are handled on the program's own OS threads
	 * (runtime/segv.c) */
	sigset_t block, old;
	int rc;

	wft_fork_install();
	wft_segv_install();
	wft_sig_worker_set(&block);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	wft_os_policy_note();   /* the policy they inherit (os_policy.c) */
	rc = wft_worker_start_all();
	if (rc == 0)
		wft_dump_signal_start();
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int weft_init(const weft_config_t *cfg)
{
	static const weft_config_t def = WEFT_CONFIG_INITIALIZER;
	int rc;

	if (!cfg)
		cfg = &def;
	rc = config_check(cfg);
	if (rc)
		return rc;
	if (wft_thread_self())
		return EBUSY;
	if (wft_in_forked_child())
		return ENOTSUP;
	pthread_mutex_lock(&wft_rt.init_lock);
	/* relaxed: init_lock orders state changes between init and shutdown */
	if (atomic_load_explicit(&wft_rt.state, memory_order_relaxed) != WFT_RT_STOPPED) {
		pthread_mutex_unlock(&wft_rt.init_lock);
		return EBUSY;
	}
	rc = config_features(cfg);
	if (rc == 0) {
#ifdef HAVE_VALGRIND_VALGRIND_H
		wft_vg_running = RUNNING_ON_VALGRIND != 0;
#endif
		rc = config_workers(cfg);
	}
	if (rc) {
		pthread_mutex_unlock(&wft_rt.init_lock);
		return rc;
	}
	reset_unsafe();
	rc = start_workers();
	if (rc) {
		atomic_store_explicit(&wft_rt.state, WFT_RT_STOPPED, memory_order_relaxed);
		pthread_mutex_unlock(&wft_rt.init_lock);
		return rc;
	}
	if (env_stats &&
	    !atomic_exchange_explicit(&stats_atexit, 1, memory_order_relaxed))
		atexit(print_stats_at_exit);
	/* release: publishes the workers array and config to weft_spawn callers
	 * on other OS threads (acquire load there) */
	atomic_store_explicit(&wft_rt.state, WFT_RT_RUNNING, memory_order_release);
	pthread_mutex_unlock(&wft_rt.init_lock);
	return 0;
}

long wft_live_threads(void)
{
	long born, dead = 0;

	/* acquire loads, deaths first: see wft_count_birth() in worker.h */
	for (int i = 0; i < wft_rt.nworkers; i++)
		dead += atomic_load_explicit(&wft_rt.workers[i]->ndead, memory_order_acquire);
	born = atomic_load_explicit(&wft_rt.os_born, memory_order_acquire);
	for (int i = 0; i < wft_rt.nworkers; i++)
		born += atomic_load_explicit(&wft_rt.workers[i]->nborn, memory_order_acquire);
	return born - dead;
}

/* The slow half of wft_count_death (worker.h): shutdown is waiting. */
void wft_count_death_quiescing(void)
{
	/* release: pairs with the futex re-check in weft_shutdown */
	atomic_store_explicit(&wft_rt.quiesce, 1, memory_order_release);
	wft_futex_wake(&wft_rt.quiesce, 1);
}

/* weft_shutdown's grace period before it reports the threads it still
 * waits for (runtime/dump.c "The shutdown report"). */
#define WFT_SHUTDOWN_GRACE_NS (2 * 1000000000ull)

static void shutdown_report(long live, const char *how)
{
	fprintf(stderr, "weft: %s: %ld light thread%s still alive:\n", how, live,
		live == 1 ? "" : "s");
	fflush(stderr);
	wft_dump_threads(2, true);
}

/* weft_shutdown and weft_shutdown_timed: deadline WEFT_TIME_INFINITE
 * waits for good (reporting once after the grace period). */
static int shutdown_until(weft_time_t deadline)
{
	weft_time_t report_at;
	bool reported = false;

	if (wft_thread_self() || wft_worker_self())
		return EPERM;
	if (wft_in_forked_child())
		return ENOTSUP;
	pthread_mutex_lock(&wft_rt.init_lock);
	if (atomic_load_explicit(&wft_rt.state, memory_order_relaxed) != WFT_RT_RUNNING) {
		pthread_mutex_unlock(&wft_rt.init_lock);
		return EINVAL;
	}
	report_at = wft_now() + WFT_SHUTDOWN_GRACE_NS;
	/* Wait for every light thread. Exits while we wait store quiesce = 1
	 * and wake us; we recount around the futex (it compares quiesce == 0,
	 * so a wake before we sleep is not lost), and the 1 ms timeout covers
	 * an exit that missed the quiescing flag (see wft_count_death). */
	/* relaxed: a hint for the exits; the timeout bounds a missed one */
	atomic_store_explicit(&wft_rt.quiescing, 1, memory_order_relaxed);
	for (;;) {
		long live;
		weft_time_t now;

		atomic_store_explicit(&wft_rt.quiesce, 0, memory_order_seq_cst);
		live = wft_live_threads();
		if (live == 0)
			break;
		now = wft_now();
		if (deadline != WEFT_TIME_INFINITE && now >= deadline) {
			shutdown_report(live, "weft_shutdown_timed: deadline passed");
			/* relaxed: as above; the runtime keeps running */
			atomic_store_explicit(&wft_rt.quiescing, 0, memory_order_relaxed);
			pthread_mutex_unlock(&wft_rt.init_lock);
			return ETIMEDOUT;
		}
		if (deadline == WEFT_TIME_INFINITE && !reported && now >= report_at) {
			shutdown_report(live, "weft_shutdown still waiting after 2 s");
			reported = true;
		}
		wft_futex_wait(&wft_rt.quiesce, 0, now + 1000000ull);
	}
	atomic_store_explicit(&wft_rt.quiescing, 0, memory_order_relaxed);
	atomic_store_explicit(&wft_rt.state, WFT_RT_CHANGING, memory_order_relaxed);
	wft_dump_signal_stop();
	wft_gang_shutdown_unsafe();   /* the slice ticker wakes members: stop it first */
	wft_worker_stop_all();
	wft_worker_free_all_unsafe();
	wft_tcb_pool_fini_unsafe();
	wft_stack_pool_trim(NULL);
	atomic_store_explicit(&wft_rt.state, WFT_RT_STOPPED, memory_order_release);
	pthread_mutex_unlock(&wft_rt.init_lock);
	return 0;
}

int weft_shutdown(void)
{
	return shutdown_until(WEFT_TIME_INFINITE);
}

int weft_shutdown_timed(weft_time_t deadline)
{
	if (deadline == WEFT_TIME_INFINITE)
		deadline--;   /* timed: never "wait for good" */
	return shutdown_until(deadline);
}

int weft_workers(void)
{
	/* acquire: pairs with the release store of RUNNING */
	return atomic_load_explicit(&wft_rt.state, memory_order_acquire) == WFT_RT_RUNNING ? wft_rt.nworkers : 0;
}
