/*
 * tests/harness.h - helpers shared by the Check suites and stress tests.
 *
 * Rules (tests/README): the runtime is started inside each test
 * (Check forks per test; fork copies only the calling thread), and no
 * ck_assert runs inside a weft thread: threads record the first failure
 * with WT_CHECK and the test body asserts wt_failed() after joining.
 */
#ifndef WEFT_TESTS_HARNESS_H
#define WEFT_TESTS_HARNESS_H

#include <check.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <weft.h>

/* First failure recorded by any thread (file:line: expression), or NULL. */
extern _Atomic(const char *) wt_failure;

#define WT_STR2(x) #x
#define WT_STR(x) WT_STR2(x)
#define WT_CHECK(c) do { \
	if (!(c)) { \
		const char *expected_ = NULL; \
		atomic_compare_exchange_strong(&wt_failure, &expected_, \
			__FILE__ ":" WT_STR(__LINE__) ": " #c); \
	} \
} while (0)

/* Assert in the test body that no thread recorded a failure. */
#define wt_assert_no_failure() \
	ck_assert_msg(atomic_load(&wt_failure) == NULL, "%s", atomic_load(&wt_failure))

/* Raise the atomic *p to v if v is larger (a running maximum that several
 * threads update). */
#define wt_atomic_max(p, v) do { \
	__typeof__(atomic_load(p)) v_ = (v), m_ = atomic_load(p); \
	while (v_ > m_ && !atomic_compare_exchange_weak((p), &m_, v_)) \
		; \
} while (0)

/* Runtime configurations for tcase_add_loop_test: index into this table. */
struct wt_config {
	const char *name;
	int workers;   /* 0 = all CPUs */
	int pin;
};
/* Sanitizer builds keep per-thread shadow state (TSan creates a fiber, a
 * large zeroed allocation, for every thread run; ASan a fake stack), so
 * tests that churn through 10^5-10^6 threads divide their counts by this:
 * a tenth of the size there, full size in the plain build. (TSan: three
 * configurations of 100,000 spawn/join outran a 30 s test timeout.) */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define WT_SCALE_DIV 10
#else
#define WT_SCALE_DIV 1
#endif

extern const struct wt_config wt_configs[];
extern const int wt_nconfigs;

/* Feature switches wt_init and wt_init_workers put in the config (NULL:
 * the defaults; WEFT_FEATURES still applies on top). A suite whose tests
 * check one mechanism in isolation sets it in main(), e.g. the scheduler
 * suite turns DRAIN off, which under a loaded host moves threads off
 * worker 1 and stops its steals. */
extern const char *wt_features;
/* Start the runtime with configuration i (asserts success). */
void wt_init(int i);
/* Start with n workers. */
void wt_init_workers(int n);
/* Start with n workers and these feature switches (NULL: defaults). */
void wt_init_features(int n, const char *features);
/* Shut the runtime down (asserts success). */
void wt_shutdown(void);

/* Seed for stress tests: WEFT_TEST_SEED or time-based; prints "seed=N". */
uint64_t wt_seed(void);
/* A small fast PRNG. */
uint64_t wt_rand(uint64_t *state);
/* Stress budget in seconds: WEFT_STRESS_SECONDS, default 2. */
double wt_stress_seconds(void);

/* A test case named name with a timeout of timeout_s seconds, already
 * added to s (tests may still be added to it). */
TCase *wt_tcase(Suite *s, const char *name, double timeout_s);

/* Run a suite: srunner with default settings; returns the exit status:
 * EXIT_FAILURE if a test failed, else 77 (automake's SKIP) if every test
 * skipped, else EXIT_SUCCESS. Prints "skipped: N of M tests" at the end
 * (tests/skips.sh reads it from the log). */
int wt_run_suite(Suite *s);

/* Record that the calling test skips (Check has no skip of its own): print
 * "SKIP suite/test: reason" and count it for wt_run_suite's summary. The
 * test then returns without asserting. Works across Check's fork. */
void wt_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* For tests that need two CPUs, or two workers: true if there are; else
 * the skip is recorded (wt_skip, naming test) and, for the second, the
 * runtime is stopped again. */
bool wt_have_two_cpus(const char *test);
bool wt_init_two_workers(const char *test);

/* Does this system give guard markers that fault? (madvise
 * MADV_GUARD_INSTALL on a fresh page, then write(2) of a byte from it
 * into a pipe must fail with EFAULT. Linux before 6.13 refuses the
 * advice; qemu-user accepts it and installs nothing.) Without them,
 * guarded stacks get mappings of their own (runtime/stack.c "Guard
 * probe"), and tests about the chunks' markers skip. */
bool wt_guard_markers(void);

/* vm.max_map_count, or 0 if it cannot be read. */
long wt_max_map_count(void);

/* A weft thread body that yields until *stop (an _Atomic int *) is set:
 * keeps its worker awake (pin it with weft_attr_t.worker). Each yield
 * must return 0 (WT_CHECK). */
void *wt_yielder(void *stop);

#endif
