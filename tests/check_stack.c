/*
 * tests/check_stack.c - suite "stack": stack sizes at the edges, stacks
 * for a million live threads, and what a light thread sees in __thread
 * variables (docs/stacks.md).
 *
 *   sizes    sizes near SIZE_MAX or past WFT_STACK_MAX (1 TiB) in attr
 *            and config are EINVAL (they wrapped to a one-page stack when
 *            page-rounded), non-zero reserved fields are EINVAL, and the
 *            runtime stays usable after each refusal.
 *   many     far more threads parked at once than vm.max_map_count would
 *            allow with one mapping per stack: every one runs, and each
 *            holds its own stack (stack.c "Chunks").
 *   wait     threads waiting for a stack do not slow the threads that
 *            have one (worker.c: no sleep per pick of a stackless thread).
 *   tls      __thread belongs to the worker; weft_key follows the thread
 *            (include/weft/thread.h "Thread-local storage").
 *   canary   in a debug build, an overflow of a guard = 0 stack is
 *            reported by name when the stack is released (stack.c
 *            "Canary"; the test exists in such builds only).
 *   locked   after mlockall(MCL_FUTURE) the kernel refuses guard markers
 *            on new chunks: guarded stacks fall back to mappings of their
 *            own, and the refused chunk is unmapped, not leaked (it was
 *            64 MiB of locked memory per attempt).
 *   fallback guard-marker installs that fail with ENOMEM (WEFT_FAULT=
 *            guard:N): every thread still runs; three failures in a row
 *            send guarded stacks to mappings of their own for the rest of
 *            the runtime, with one warning; fewer do not (stack.c "Guard
 *            fallback").
 */
#define _GNU_SOURCE
#include "config.h"
#include "tests/harness.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static void *ret_arg(void *arg)
{
	return arg;
}

/* vm.max_map_count, or 65530 (the default) if unreadable. */
static long max_map_count(void)
{
	long n = wt_max_map_count();

	return n > 0 ? n : 65530;
}

/* A default spawn and join still work: the runtime is healthy. */
static void assert_healthy(void)
{
	weft_thread_t t;
	void *r = NULL;

	ck_assert_int_eq(weft_spawn(&t, ret_arg, (void *)7, NULL), 0);
	ck_assert_int_eq(weft_join(t, &r), 0);
	ck_assert_ptr_eq(r, (void *)7);
}

/* ---------------------------------------------------------------------- */
/* sizes */

static const size_t bad_sizes[] = {
	SIZE_MAX,                 /* wrapped to 0 when page-rounded */
	SIZE_MAX - 4096,          /* wrapped to one page or so */
	SIZE_MAX / 2 + 1,
	(size_t)1 << 50,          /* 1 PiB: never mappable; spawn returned 0 and
				   * the thread never ran */
	((size_t)1 << 40) + 1,    /* just past WFT_STACK_MAX */
};

START_TEST(attr_size_near_max)
{
	weft_attr_t a;
	weft_thread_t t;

	wt_init_workers(2);
	for (unsigned i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
		weft_attr_init(&a);
		a.stack_size = bad_sizes[i];
		t = NULL;
		ck_assert_msg(weft_spawn(&t, ret_arg, NULL, &a) == EINVAL,
			      "stack_size %zu accepted", bad_sizes[i]);
		ck_assert_ptr_null(t);
		assert_healthy();
	}
	/* a big size within the bound is still accepted (lazily mapped,
	 * MAP_NORESERVE: only the touched pages cost memory) */
	weft_attr_init(&a);
	a.stack_size = (size_t)1 << 30;
	ck_assert_int_eq(weft_spawn(&t, ret_arg, NULL, &a), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	assert_healthy();
	wt_shutdown();
}
END_TEST

START_TEST(attr_reserved_nonzero)
{
	weft_attr_t a;
	weft_thread_t t;

	wt_init_workers(1);
	for (int i = 0; i < 4; i++) {
		weft_attr_init(&a);
		a.reserved[i] = &a;
		t = NULL;
		ck_assert_int_eq(weft_spawn(&t, ret_arg, NULL, &a), EINVAL);
		ck_assert_ptr_null(t);
	}
	assert_healthy();
	wt_shutdown();
}
END_TEST

START_TEST(config_size_and_reserved)
{
	weft_config_t c = WEFT_CONFIG_INITIALIZER;

	unsetenv("WEFT_STACK_SIZE");
	for (unsigned i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
		c.stack_size = bad_sizes[i];
		ck_assert_msg(weft_init(&c) == EINVAL, "config stack_size %zu accepted",
			      bad_sizes[i]);
		ck_assert_int_eq(weft_workers(), 0);
	}
	c.stack_size = 0;
	for (int i = 0; i < 8; i++) {
		c.reserved[i] = &c;
		ck_assert_int_eq(weft_init(&c), EINVAL);
		ck_assert_int_eq(weft_workers(), 0);
		c.reserved[i] = NULL;
	}
	c.workers = 1;
	ck_assert_int_eq(weft_init(&c), 0);
	assert_healthy();
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* many: more threads parked at once than one mapping per stack allows */

#if defined(__SANITIZE_THREAD__)
#define MANY 2000     /* TSan: each fiber costs it ~8 mappings and ~1 MiB */
#else
#define MANY (40000 / WT_SCALE_DIV)
#endif
static _Atomic long many_parked;
static _Atomic int many_go;

static void *many_parker(void *arg)
{
	*(uintptr_t *)arg = (uintptr_t)__builtin_frame_address(0);
	atomic_fetch_add(&many_parked, 1);
	while (!atomic_load(&many_go))
		weft_park();
	return NULL;
}

static int cmp_uptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/* 40,000 guarded default stacks at once: with two mappings per stack
 * (before) the 65,530 of vm.max_map_count ran out near 32,700 and the
 * rest never ran (joins hung). Every thread must run within the bound,
 * and each must have a stack of its own (frames at least the default
 * stack size apart). */
START_TEST(many_parked_guarded)
{
	weft_thread_t *ts = calloc(MANY, sizeof(*ts));
	uintptr_t *fp = calloc(MANY, sizeof(*fp));
	weft_time_t end;

	/* without guard markers each guarded stack is two mappings */
	if (!wt_guard_markers() && 2L * MANY + 2000 > max_map_count()) {
		wt_skip("stack/many_parked_guarded: no guard markers here, and %d guarded "
			"stacks of their own need %d mappings (vm.max_map_count %ld)",
			MANY, 2 * MANY, max_map_count());
		free(ts);
		free(fp);
		return;
	}
	ck_assert_ptr_nonnull(ts);
	ck_assert_ptr_nonnull(fp);
	atomic_store(&many_parked, 0);
	atomic_store(&many_go, 0);
	wt_init_workers(2);
	for (int i = 0; i < MANY; i++)
		ck_assert_int_eq(weft_spawn(&ts[i], many_parker, &fp[i], NULL), 0);
	end = weft_now_ns() + 20000000000ull;
	while (atomic_load(&many_parked) < MANY && weft_now_ns() < end)
		usleep(2000);
	ck_assert_msg(atomic_load(&many_parked) == MANY, "%ld of %d threads ran in 20 s",
		      atomic_load(&many_parked), MANY);
	qsort(fp, MANY, sizeof(*fp), cmp_uptr);
	for (int i = 1; i < MANY; i++)
		ck_assert_msg(fp[i] - fp[i - 1] >= WEFT_STACK_DEFAULT,
			      "two parked threads' frames %#lx and %#lx share a stack",
			      (unsigned long)fp[i - 1], (unsigned long)fp[i]);
	atomic_store(&many_go, 1);
	for (int i = 0; i < MANY; i++)
		ck_assert_int_eq(weft_unpark(ts[i]), 0);
	for (int i = 0; i < MANY; i++)
		ck_assert_int_eq(weft_join(ts[i], NULL), 0);
	wt_shutdown();
	free(ts);
	free(fp);
}
END_TEST

/* More live TCBs than the malloc'd slabs hold (2,048), so that the rest
 * come from huge-page bulk memory (stack.c "Bulk memory"), three runtimes
 * in a row: a later runtime reuses the slabs the earlier one left, zeroed
 * again, and every thread returns its own argument. */
START_TEST(tcb_bulk_reuse)
{
	enum { N = 6000 };
	weft_thread_t *ts = calloc(N, sizeof(*ts));

	ck_assert_ptr_nonnull(ts);
	for (int round = 0; round < 3; round++) {
		wt_init_workers(2);
		for (long i = 0; i < N; i++)
			ck_assert_int_eq(weft_spawn(&ts[i], ret_arg, (void *)(i + 1), NULL), 0);
		for (long i = 0; i < N; i++) {
			void *r = NULL;

			ck_assert_int_eq(weft_join(ts[i], &r), 0);
			ck_assert_ptr_eq(r, (void *)(i + 1));
		}
		wt_shutdown();
	}
	free(ts);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* wait: a thread that cannot get a stack does not slow the others */

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static void limit_as(struct rlimit *old)
{
	struct rlimit lim;
	unsigned long pages = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%lu", &pages), 1);
	fclose(f);
	ck_assert_int_eq(getrlimit(RLIMIT_AS, old), 0);
	lim = *old;
	lim.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (1u << 20);
	ck_assert_int_eq(setrlimit(RLIMIT_AS, &lim), 0);
}

enum { WAIT_YIELDS = 2000 };
static _Atomic int wait_started, wait_go;

static _Atomic int hog_running, hog_release;

/* Holds the worker (never yields) until released: while it runs, the
 * worker cannot try a stack for a thread spawned meanwhile. */
static void *wait_hog(void *arg)
{
	(void)arg;
	atomic_store(&hog_running, 1);
	while (!atomic_load(&hog_release))
		;
	return NULL;
}

static void *wait_yielder(void *arg)
{
	(void)arg;
	atomic_fetch_add(&wait_started, 1);
	while (!atomic_load(&wait_go))
		weft_yield();
	for (int i = 0; i < WAIT_YIELDS; i++)
		weft_yield();
	return NULL;
}
#endif

/* One worker runs two yielders and two threads whose 8 MiB stacks cannot
 * be mapped (RLIMIT_AS). A yield that finds a stackless thread next goes
 * to the scheduler loop, which picks the other stackless one: before,
 * every such pick slept 1 ms, so 2,000 yields each took over 2 s; now the
 * worker backs off only when a whole round of its queue found nothing to
 * run. */
START_TEST(wait_does_not_slow_others)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	wt_skip("stack/wait_does_not_slow_others: RLIMIT_AS cannot be set under a sanitizer");
#else
	struct rlimit old;
	weft_thread_t y[2], big[2], hog;
	weft_attr_t a;
	weft_time_t t0, dt;
	void *r = NULL;

	atomic_store(&wait_started, 0);
	atomic_store(&wait_go, 0);
	wt_init_workers(1);
	/* the yielders hold their stacks before the limit */
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(weft_spawn(&y[i], wait_yielder, NULL, NULL), 0);
	while (atomic_load(&wait_started) < 2)
		usleep(1000);
	/* the hog holds the worker while both stackless threads are
	 * spawned: once the worker has failed one, spawns are EAGAIN */
	atomic_store(&hog_running, 0);
	atomic_store(&hog_release, 0);
	ck_assert_int_eq(weft_spawn(&hog, wait_hog, NULL, NULL), 0);
	while (!atomic_load(&hog_running))
		usleep(1000);
	weft_attr_init(&a);
	a.stack_size = 8u << 20;
	limit_as(&old);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(weft_spawn(&big[i], ret_arg, (void *)5, &a), 0);
	atomic_store(&hog_release, 1);
	ck_assert_int_eq(weft_join(hog, NULL), 0);
	usleep(20000);   /* the worker tries their stacks and fails */
	t0 = weft_now_ns();
	atomic_store(&wait_go, 1);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(weft_join(y[i], NULL), 0);
	dt = weft_now_ns() - t0;
	ck_assert_int_eq(setrlimit(RLIMIT_AS, &old), 0);
	/* big gets its stack now */
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(weft_join(big[i], &r), 0);
		ck_assert_ptr_eq(r, (void *)5);
	}
	ck_assert_msg(dt < 1000000000ull, "2 x %d yields took %.0f ms next to a stackless thread",
		      WAIT_YIELDS, dt / 1e6);
	assert_healthy();
	wt_shutdown();
#endif
}
END_TEST

/* ---------------------------------------------------------------------- */
/* tls: __thread belongs to the worker, weft_key to the light thread
 * (include/weft/thread.h "Thread-local storage") */

static __thread long tls_var;
static __thread char tls_mark;
static _Atomic int tls_step;

/* Pinned to worker 0 with tls_b: writes its __thread variable, lets b
 * run, and reads back what b wrote there. */
static void *tls_a(void *arg)
{
	uintptr_t *addr = arg;

	addr[0] = (uintptr_t)&tls_mark;
	tls_var = 1;
	atomic_store(&tls_step, 1);
	while (atomic_load(&tls_step) != 2)
		weft_yield();
	return (void *)tls_var;
}

static void *tls_b(void *arg)
{
	uintptr_t *addr = arg;

	while (atomic_load(&tls_step) != 1)
		weft_yield();
	addr[1] = (uintptr_t)&tls_mark;
	tls_var = 2;
	atomic_store(&tls_step, 2);
	return NULL;
}

/* Two light threads on one worker share its __thread variables: the
 * documented rule, pinned so that nobody is surprised by a change. */
START_TEST(tls_shared_by_worker)
{
	weft_attr_t a;
	weft_thread_t ta, tb;
	uintptr_t addr[2] = { 0, 0 };
	void *r = NULL;

	atomic_store(&tls_step, 0);
	wt_init_workers(2);
	weft_attr_init(&a);
	a.worker = 0;
	ck_assert_int_eq(weft_spawn(&ta, tls_a, addr, &a), 0);
	ck_assert_int_eq(weft_spawn(&tb, tls_b, addr, &a), 0);
	ck_assert_int_eq(weft_join(ta, &r), 0);
	ck_assert_int_eq(weft_join(tb, NULL), 0);
	ck_assert_uint_eq(addr[0], addr[1]);
	ck_assert_ptr_eq(r, (void *)2);   /* a read what b wrote */
	wt_shutdown();
}
END_TEST

enum { TLS_THREADS = 8, TLS_ROUNDS = 2000 };
static weft_key_t tls_key;
static _Atomic long tls_key_lost, tls_var_changed;

/* Sets its key value and its __thread variable to its own id, then
 * yields, sleeps and parks at random (seeded) on two workers, so that it
 * migrates; after each, the key value must still be its own. The
 * __thread value is only counted (another thread on the same worker
 * overwrites it: what the rule says). */
static void *tls_roamer(void *arg)
{
	long id = (long)(intptr_t)arg;
	uint64_t rng = wt_seed() ^ (uint64_t)(id + 1) * 0x9E3779B97F4A7C15ull;

	WT_CHECK(weft_setspecific(tls_key, (void *)(intptr_t)(id + 1)) == 0);
	tls_var = id + 1;
	for (int i = 0; i < TLS_ROUNDS; i++) {
		switch (wt_rand(&rng) % 3) {
		case 0:
			weft_yield();
			break;
		case 1:
			weft_sleep_ns(1000);
			break;
		default:
			weft_unpark(weft_self());
			weft_park();
			break;
		}
		if (weft_getspecific(tls_key) != (void *)(intptr_t)(id + 1))
			atomic_fetch_add(&tls_key_lost, 1);
		if (tls_var != id + 1) {
			atomic_fetch_add(&tls_var_changed, 1);
			tls_var = id + 1;
		}
	}
	return NULL;
}

START_TEST(tls_key_follows_thread)
{
	weft_thread_t t[TLS_THREADS];

	atomic_store(&tls_key_lost, 0);
	atomic_store(&tls_var_changed, 0);
	wt_init_workers(2);
	ck_assert_int_eq(weft_key_create(&tls_key, NULL), 0);
	for (long i = 0; i < TLS_THREADS; i++)
		ck_assert_int_eq(weft_spawn(&t[i], tls_roamer, (void *)(intptr_t)i, NULL), 0);
	for (int i = 0; i < TLS_THREADS; i++)
		ck_assert_int_eq(weft_join(t[i], NULL), 0);
	wt_assert_no_failure();
	printf("tls: __thread value changed under a light thread %ld times in %d x %d rounds; "
	       "weft_key value lost %ld times\n", atomic_load(&tls_var_changed), TLS_THREADS,
	       TLS_ROUNDS, atomic_load(&tls_key_lost));
	ck_assert_int_eq(atomic_load(&tls_key_lost), 0);
	ck_assert_int_eq(weft_key_delete(tls_key), 0);
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* canary */

/* The canary is in debug builds without ASan only (runtime/stack.c
 * "Canary"). Other builds have nothing to test, so main() does not
 * register the test there: a skip counted in every plain `make check`
 * would break the default stage's "no skips" (tests/skips.expected). */
#if defined(WFT_DEBUG_BUILD) && !defined(__SANITIZE_ADDRESS__)
#define CANARY_BUILD 1
#else
#define CANARY_BUILD 0
#endif

#if CANARY_BUILD
enum { OVF_SIZE = 16 * 1024, OVF_NEIGHBOURS = 4 };
static _Atomic int ovf_parked;

static void *ovf_parker(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ovf_parked, 1);
	for (;;)
		weft_park();
	return NULL;
}

/* n KiB of one frame, every byte written (as a real overflow of a big
 * local array would). One contiguous buffer, not a chain of frames: a
 * chain leaves a few bytes of each frame unwritten (alignment padding), and
 * the 8-byte canary can fall into such a gap for some of the 16 stack
 * colours. */
static __attribute__((noinline)) int ovf_fill(size_t kib)
{
	volatile char *buf = __builtin_alloca(kib * 1024);

	for (size_t i = 0; i < kib * 1024; i++)
		buf[i] = (char)i;
	return buf[0];
}

static void *ovf_thread(void *arg)
{
	(void)arg;
	/* 24 KiB below the start: past the bottom of the 16 KiB stack plus
	 * its colour page, into the slot below (a parked neighbour's) */
	return (void *)(intptr_t)ovf_fill(24);
}

/* In a child process: four parked neighbours on guard = 0 16 KiB stacks
 * (slots carved in address order), then a thread on the next slot that
 * overflows its stack by a few KiB. Exits 0 if nothing noticed. */
static void ovf_child(void)
{
	weft_attr_t a;
	weft_thread_t n[OVF_NEIGHBOURS], t;
	weft_config_t c = WEFT_CONFIG_INITIALIZER;

	c.workers = 1;
	if (weft_init(&c) != 0)
		_exit(3);
	weft_attr_init(&a);
	a.stack_size = OVF_SIZE;
	a.guard = 0;
	for (int i = 0; i < OVF_NEIGHBOURS; i++)
		if (weft_spawn(&n[i], ovf_parker, NULL, &a) != 0)
			_exit(3);
	while (atomic_load(&ovf_parked) < OVF_NEIGHBOURS)
		usleep(1000);
	a.name = "ovf";
	if (weft_spawn(&t, ovf_thread, NULL, &a) != 0 || weft_join(t, NULL) != 0)
		_exit(3);
	_exit(0);
}
#endif

START_TEST(canary_guard_off_overflow)
{
#if CANARY_BUILD
	int fds[2], st = 0;
	char out[4096];
	ssize_t len = 0, r;
	pid_t pid;

	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		ovf_child();
	}
	close(fds[1]);
	while (len < (ssize_t)sizeof(out) - 1 &&
	       (r = read(fds[0], out + len, sizeof(out) - 1 - (size_t)len)) > 0)
		len += r;
	out[len] = '\0';
	close(fds[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT,
		      "overflow of a guard = 0 stack not caught (status %#x): %s", st, out);
	ck_assert_msg(strstr(out, "stack overflow in weft thread 'ovf'") != NULL,
		      "no report naming the thread: %s", out);
#endif
}
END_TEST

/* ---------------------------------------------------------------------- */
/* locked */

/* VmLck of this process, in KiB; -1 if unreadable. */
static long vm_locked_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* In a child: a guarded stack of one size (guard markers in use), then
 * mlockall(MCL_FUTURE), then guarded threads of a second size (a new
 * class: a new chunk, whose guard install the kernel refuses on a locked
 * mapping). Exit codes: 0 ok, 2 skip (no mlockall), 3 spawn or join
 * failed, 4 the runtime leaked locked memory. */
static void locked_child(void)
{
	weft_attr_t a;
	weft_thread_t t;
	long before, after;

	if (weft_init(NULL) != 0)
		_exit(3);
	weft_attr_init(&a);
	a.stack_size = 96 * 1024;
	if (weft_spawn(&t, ret_arg, NULL, &a) != 0 || weft_join(t, NULL) != 0)
		_exit(3);
	if (mlockall(MCL_FUTURE) != 0)
		_exit(2);
	before = vm_locked_kib();
	a.stack_size = 112 * 1024;
	for (int i = 0; i < 4; i++)
		if (weft_spawn(&t, ret_arg, NULL, &a) != 0 || weft_join(t, NULL) != 0)
			_exit(3);
	after = vm_locked_kib();
	fprintf(stderr, "VmLck %ld kB before, %ld kB after\n", before, after);
	/* four 112 KiB stacks and their pages, not a 64 MiB chunk each */
	if (before < 0 || after - before > 8 * 1024)
		_exit(4);
	_exit(0);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

START_TEST(locked_guard_refused)
{
	int st = 0;
	pid_t pid;

	if (SANITIZED) {
		wt_skip("stack/locked_guard_refused: mlockall(MCL_FUTURE) would lock "
			"the sanitizer's own reservations");
		return;
	}
	if (!wt_guard_markers()) {
		wt_skip("stack/locked_guard_refused: no guard markers here (the test is "
			"about the kernel refusing them on locked chunks)");
		return;
	}
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		locked_child();
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st), "child died (status %#x)", st);
	if (WEXITSTATUS(st) == 2) {
		wt_skip("stack/locked_guard_refused: mlockall(MCL_FUTURE) refused");
		return;
	}
	ck_assert_msg(WEXITSTATUS(st) != 3, "a guarded spawn failed under mlockall");
	ck_assert_msg(WEXITSTATUS(st) != 4, "a refused chunk stayed mapped (locked memory leaked)");
	ck_assert_int_eq(WEXITSTATUS(st), 0);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* fallback */

/* One-page PROT_NONE mappings in this process: the guard pages of stacks
 * that have a mapping of their own (a guard marker makes none). */
static int guard_mappings(void)
{
	char line[512];
	unsigned long lo, hi;
	char perms[8];
	int n = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 &&
		    strcmp(perms, "---p") == 0 && hi - lo == (unsigned long)sysconf(_SC_PAGESIZE))
			n++;
	fclose(f);
	return n;
}

enum { FB_THREADS = 64 };
static _Atomic int fb_parked, fb_go;

static void *fb_parker(void *arg)
{
	(void)arg;
	atomic_fetch_add(&fb_parked, 1);
	while (!atomic_load(&fb_go))
		weft_park();
	return NULL;
}

/* One runtime in which FB_THREADS guarded threads of a size no other
 * test uses (fresh slots: each needs a guard install) park at once, then
 * are released and joined. Returns how many of them got a mapping of
 * their own (new one-page PROT_NONE mappings), or -1 if a spawn or join
 * failed or not every thread ran within 10 s. */
static int fb_round(size_t size)
{
	weft_config_t c = WEFT_CONFIG_INITIALIZER;
	weft_thread_t t[FB_THREADS];
	weft_attr_t a;
	int before, after, rc = 0;

	atomic_store(&fb_parked, 0);
	atomic_store(&fb_go, 0);
	c.workers = 2;
	if (weft_init(&c) != 0)
		return -1;
	before = guard_mappings();
	weft_attr_init(&a);
	a.stack_size = size;
	for (int i = 0; i < FB_THREADS; i++)
		if (weft_spawn(&t[i], fb_parker, NULL, &a) != 0)
			return -1;
	for (int i = 0; i < 10000 && atomic_load(&fb_parked) < FB_THREADS; i++)
		usleep(1000);
	after = guard_mappings();
	if (atomic_load(&fb_parked) < FB_THREADS)
		rc = -1;
	atomic_store(&fb_go, 1);
	for (int i = 0; i < FB_THREADS; i++)
		if (weft_unpark(t[i]) != 0 || weft_join(t[i], NULL) != 0)
			rc = -1;
	if (weft_shutdown() != 0)
		rc = -1;
	return rc < 0 || before < 0 || after < 0 ? -1 : after - before;
}

/* In a child, its stderr and stdout into out: a runtime under
 * WEFT_FAULT=fault, then one without it (the fallback lasts one runtime).
 * Prints "own=A later=B": how many stacks of each round got a mapping of
 * their own. Exits 3 if a round failed. */
static void fb_child(const char *fault, int out)
{
	int own, later;

	dup2(out, 1);
	dup2(out, 2);
	setenv("WEFT_FAULT", fault, 1);
	own = fb_round(88 * 1024);
	unsetenv("WEFT_FAULT");
	later = fb_round(104 * 1024);
	printf("own=%d later=%d\n", own, later);
	fflush(stdout);
	_exit(own < 0 || later < 0 ? 3 : 0);
}

/* Runs fb_child(fault); returns its output in out (NUL-terminated). */
static void fb_run(const char *fault, char *out, size_t cap)
{
	int fds[2], st = 0;
	size_t len = 0;
	ssize_t r;
	pid_t pid;

	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		fb_child(fault, fds[1]);
	}
	close(fds[1]);
	while (len < cap - 1 && (r = read(fds[0], out + len, cap - 1 - len)) > 0)
		len += (size_t)r;
	out[len] = '\0';
	close(fds[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "WEFT_FAULT=%s: not every guarded thread ran (status %#x): %s", fault, st, out);
}

/* The child's result line in out. */
static void fb_result(const char *out, int *own, int *later)
{
	const char *r = strstr(out, "own=");

	ck_assert_msg(r && sscanf(r, "own=%d later=%d", own, later) == 2, "no result: %s", out);
}

/* Occurrences of needle in hay. */
static int count_str(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

#define FB_WARNING "weft: guard markers failed"

/* Guard installs that keep failing with ENOMEM (as a page-table
 * allocation can): before, each new guarded stack tried a guard marker
 * again (a 64 MiB chunk mapped and unmapped each time) and fell back to a
 * mapping of its own one stack at a time. Now, three failures in a row
 * send guarded stacks to their own mappings for the rest of the runtime,
 * with one warning; two do not; and the next runtime tries guard markers
 * again. Every thread runs in every case. */
START_TEST(guard_enomem_fallback)
{
	char out[8192];
	int own = -1, later = -1;

	if (!wt_guard_markers()) {
		wt_skip("stack/guard_enomem_fallback: no guard markers here (every guarded "
			"stack has a mapping of its own anyway)");
		return;
	}
	/* two failures, then the install works: the streak ends, the
	 * other stacks are chunk slots with guard markers */
	fb_run("guard:2", out, sizeof(out));
	fb_result(out, &own, &later);
	ck_assert_msg(own == 2, "guard:2: %d of %d stacks got a mapping of their own, not 2: %s",
		      own, FB_THREADS, out);
	ck_assert_msg(count_str(out, FB_WARNING) == 0, "guard:2 warned: %s", out);

	/* three in a row: the fallback, for this runtime only */
	fb_run("guard:3", out, sizeof(out));
	fb_result(out, &own, &later);
	ck_assert_msg(own >= FB_THREADS,
		      "guard:3: only %d of %d stacks got a mapping of their own after three "
		      "failed guard installs in a row: %s", own, FB_THREADS, out);
	ck_assert_msg(later < FB_THREADS / 2,
		      "the next runtime did not try guard markers again (%d of %d stacks "
		      "on their own mappings): %s", later, FB_THREADS, out);
	ck_assert_msg(count_str(out, FB_WARNING) == 1, "not one warning: %s", out);

	/* failing for good: every thread still runs, one warning */
	fb_run("guard:1000000", out, sizeof(out));
	ck_assert_msg(count_str(out, FB_WARNING) == 1, "not one warning: %s", out);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* trim: a deep trim gives stack pages back without holding up the
 * threads that need a stack meanwhile (runtime/stack.c "Scavenge") */

#define TRIM_THREADS 800
#define TRIM_TOUCH (32 * 1024)
#define TRIM_SLOW "trimslow:10000"  /* 10 ms per slot */
#define TRIM_BOUND_NS 1000000000ull
#define TRIM_HIST 6   /* RSS samples 10 ms apart: 50 ms of history */

static weft_sem_t trim_go;
static _Atomic int trim_ready;
static _Atomic weft_time_t trim_ran[2];

static void *trim_toucher(void *arg)
{
	volatile char buf[TRIM_TOUCH];

	(void)arg;
	memset((char *)buf, 1, sizeof(buf));   /* pages the trim gives back */
	atomic_fetch_add(&trim_ready, 1);
	weft_sem_wait(&trim_go);
	return (void *)(uintptr_t)buf[TRIM_TOUCH / 2];
}

static void *trim_probe(void *arg)
{
	atomic_store(&trim_ran[(intptr_t)arg], weft_now_ns());
	return NULL;
}

static long rss_kib(void)
{
	long size = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &res) != 2)
		res = -1;
	fclose(f);
	return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* 800 threads with stacks from chunks exit, and their stacks (those
 * the caches and the pool do not keep) go back to their chunks dirty.
 * Once both workers sleep, a deep trim gives their pages back, made slow
 * with WEFT_FAULT=trimslow (as a trimmer the host preempts). While it
 * runs (the process's RSS falls slot by slot), two threads with a stack
 * size nobody caches are spawned, one pinned to each worker. The one on
 * the worker that is not trimming must start at once: before, the trim
 * held the chunk lock across all its madvise calls, and the other worker
 * waited for it in its own trim, so both probes started only when the
 * whole trim was over: 0.6-0.8 s later at 3 ms a slot, 1.6-5.9 s at 8 ms
 * (1,200 threads), 2.5-3.0 s at 10 ms (800). The bound, 1 s, leaves room
 * for a host that deschedules a worker for a few hundred ms
 * (docs/wake-path.md "Collapsed runs"). */
START_TEST(trim_does_not_block_stacks)
{
	weft_thread_t th[TRIM_THREADS], pr[2];
	weft_attr_t a;
	long rss0, rss, hist[TRIM_HIST];
	weft_time_t t0, until, first;

	if (rss_kib() < 0) {
		wt_skip("stack/trim_does_not_block_stacks: no /proc/self/statm");
		return;
	}
	atomic_store(&trim_ready, 0);
	atomic_store(&trim_ran[0], 0);
	atomic_store(&trim_ran[1], 0);
	ck_assert_int_eq(setenv("WEFT_FAULT", TRIM_SLOW, 1), 0);
	wt_init_workers(2);
	ck_assert_int_eq(unsetenv("WEFT_FAULT"), 0);
	ck_assert_int_eq(weft_sem_init(&trim_go, 0), 0);
	weft_attr_init(&a);
	a.stack_size = 64 * 1024;
	a.guard = 0;   /* chunk slots whatever the kernel's guard markers */
	for (int i = 0; i < TRIM_THREADS; i++)
		ck_assert_int_eq(weft_spawn(&th[i], trim_toucher, NULL, &a), 0);
	while (atomic_load(&trim_ready) < TRIM_THREADS)
		usleep(1000);
	ck_assert_int_eq(weft_sem_post_n(&trim_go, TRIM_THREADS), 0);
	for (int i = 0; i < TRIM_THREADS; i++)
		ck_assert_int_eq(weft_join(th[i], NULL), 0);
	/* The scavenge is under way once the RSS has fallen by 1 MiB and is
	 * still falling slot by slot (by 96 KiB, three slots, within 50 ms):
	 * one fall alone may be a chunk unmapped whole by the pool's trim,
	 * just before the scavenge starts. */
	rss0 = rss_kib();
	ck_assert_int_ge(rss0, 0);
	for (int i = 0; i < TRIM_HIST; i++)
		hist[i] = rss0;
	until = weft_now_ns() + 10000000000ull;
	for (int i = 0;; i++) {
		usleep(10000);
		rss = rss_kib();
		hist[i % TRIM_HIST] = rss;
		/* hist[(i + 1) % TRIM_HIST]: the sample 50 ms before this one */
		if (rss <= rss0 - 1024 && rss <= hist[(i + 1) % TRIM_HIST] - 96)
			break;
		ck_assert_msg(weft_now_ns() < until, "no deep trim in 10 s (RSS %ld KiB, was %ld)",
			      rss, rss0);
	}
	a.stack_size = 48 * 1024;   /* a size no cache or pool holds */
	t0 = weft_now_ns();
	for (intptr_t i = 0; i < 2; i++) {
		a.worker = (int)i;
		ck_assert_int_eq(weft_spawn(&pr[i], trim_probe, (void *)i, &a), 0);
	}
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(weft_join(pr[i], NULL), 0);
	first = atomic_load(&trim_ran[0]);
	if (atomic_load(&trim_ran[1]) < first)
		first = atomic_load(&trim_ran[1]);
	ck_assert_int_eq(weft_sem_destroy(&trim_go), 0);
	wt_shutdown();
	ck_assert_msg(first - t0 < TRIM_BOUND_NS,
		      "both threads that needed a stack waited %.0f ms for a deep trim "
		      "(bound %.0f ms)", (first - t0) / 1e6, TRIM_BOUND_NS / 1e6);
}
END_TEST

/* Slots that a worker's own cache trim frees while another worker's deep
 * trim scavenges must not stay resident once the runtime has gone idle:
 * 800 threads with 64 KiB stacks (no guard), 400 pinned to each of 2
 * workers, each touching 32 KiB, then all exit; once the resident count
 * is stable, at most what the two caches keep (16) may be resident
 * (mincore on a page of each thread's stack). _i = 1 slows each trimmed
 * slot by 3 ms (WEFT_FAULT=trimslow:3000), widening the window in which
 * both workers trim at once. Before the loser of the scavenge was told to
 * try again, 64 stayed resident in 6 of 10 runs. */
#define LEFT_PER_WORKER 400
#define LEFT_TOUCH (32 * 1024)
static weft_sem_t left_go;
static _Atomic int left_ready;
static uintptr_t left_page[2 * LEFT_PER_WORKER];

static void *left_toucher(void *arg)
{
	volatile char buf[LEFT_TOUCH];

	memset((char *)buf, 1, sizeof(buf));
	left_page[(intptr_t)arg] = (uintptr_t)&buf[LEFT_TOUCH / 2] & ~(uintptr_t)4095;
	atomic_fetch_add(&left_ready, 1);
	weft_sem_wait(&left_go);
	return (void *)(uintptr_t)buf[LEFT_TOUCH / 2];
}

static int left_resident(void)
{
	int n = 0;

	for (int i = 0; i < 2 * LEFT_PER_WORKER; i++) {
		unsigned char v = 0;

		if (mincore((void *)left_page[i], 4096, &v) == 0 && (v & 1))
			n++;
	}
	return n;
}

START_TEST(trim_leaves_no_dirty)
{
	static weft_thread_t th[2 * LEFT_PER_WORKER];
	weft_attr_t a;
	int prev = -1, same = 0, now;
	weft_time_t until;

	atomic_store(&left_ready, 0);
	if (_i == 1)
		ck_assert_int_eq(setenv("WEFT_FAULT", "trimslow:3000", 1), 0);
	wt_init_workers(2);
	unsetenv("WEFT_FAULT");
	ck_assert_int_eq(weft_sem_init(&left_go, 0), 0);
	weft_attr_init(&a);
	a.stack_size = 64 * 1024;
	a.guard = 0;
	for (intptr_t i = 0; i < 2 * LEFT_PER_WORKER; i++) {
		a.worker = (int)(i & 1);
		ck_assert_int_eq(weft_spawn(&th[i], left_toucher, (void *)i, &a), 0);
	}
	while (atomic_load(&left_ready) < 2 * LEFT_PER_WORKER)
		usleep(1000);
	ck_assert_int_eq(weft_sem_post_n(&left_go, 2 * LEFT_PER_WORKER), 0);
	for (int i = 0; i < 2 * LEFT_PER_WORKER; i++)
		ck_assert_int_eq(weft_join(th[i], NULL), 0);
	until = weft_now_ns() + 20000000000ull;
	while (weft_now_ns() < until && same < 10) {
		usleep(100000);
		now = left_resident();
		same = now == prev ? same + 1 : 0;
		prev = now;
	}
	printf("trim_leaves_no_dirty: %d of %d stacks resident after the idle trims "
	       "(the caches keep <= 16)\n", prev, 2 * LEFT_PER_WORKER);
	ck_assert_int_eq(weft_sem_destroy(&left_go), 0);
	wt_shutdown();
	ck_assert_msg(prev <= 20, "%d stacks still resident after the idle trims", prev);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stack");
	TCase *tc;

	tc = wt_tcase(s, "sizes", 20);
	tcase_add_test(tc, attr_size_near_max);
	tcase_add_test(tc, attr_reserved_nonzero);
	tcase_add_test(tc, config_size_and_reserved);

	tc = wt_tcase(s, "many", 60);
	tcase_add_test(tc, many_parked_guarded);
	tcase_add_test(tc, tcb_bulk_reuse);

	tc = wt_tcase(s, "wait", 30);
	tcase_add_test(tc, wait_does_not_slow_others);

	if (CANARY_BUILD) {
		tc = wt_tcase(s, "canary", 30);
		tcase_add_test(tc, canary_guard_off_overflow);
	}

	tc = wt_tcase(s, "locked", 30);
	tcase_add_test(tc, locked_guard_refused);

	tc = wt_tcase(s, "fallback", 30);
	tcase_add_test(tc, guard_enomem_fallback);

	tc = wt_tcase(s, "trim", 60);
	tcase_add_test(tc, trim_does_not_block_stacks);
	tc = wt_tcase(s, "trimleft", 60);
	tcase_add_loop_test(tc, trim_leaves_no_dirty, 0, 2);

	tc = wt_tcase(s, "tls", 30);
	tcase_add_test(tc, tls_shared_by_worker);
	tcase_add_test(tc, tls_key_follows_thread);
	return wt_run_suite(s);
}
