/*
 * tests/harness.c - see harness.h.
 */
#include <config.h>
#include "tests/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Atomic(const char *) wt_failure;

const struct wt_config wt_configs[] = {
	{ "1 worker", 1, 0 },
	{ "N workers", 0, 0 },
	{ "N workers pinned", 0, 1 },
};
const int wt_nconfigs = sizeof(wt_configs) / sizeof(wt_configs[0]);

const char *wt_features;

void wt_init(int i)
{
	weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
	int rc;

	cfg.workers = wt_configs[i].workers;
	cfg.pin = wt_configs[i].pin;
	cfg.features = wt_features;
	rc = weft_init(&cfg);
	ck_assert_int_eq(rc, 0);
	atomic_store(&wt_failure, NULL);
}

void wt_init_features(int n, const char *features)
{
	weft_config_t cfg = WEFT_CONFIG_INITIALIZER;

	cfg.workers = n;
	cfg.features = features;
	ck_assert_int_eq(weft_init(&cfg), 0);
	atomic_store(&wt_failure, NULL);
}

void wt_init_workers(int n)
{
	wt_init_features(n, wt_features);
}

void wt_shutdown(void)
{
	ck_assert_int_eq(weft_shutdown(), 0);
}

uint64_t wt_seed(void)
{
	const char *e = getenv("WEFT_TEST_SEED");
	uint64_t s = e && *e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL);

	printf("seed=%llu\n", (unsigned long long)s);
	fflush(stdout);
	return s ? s : 1;
}

uint64_t wt_rand(uint64_t *st)
{
	uint64_t x = *st;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *st = x;
}

double wt_stress_seconds(void)
{
	const char *e = getenv("WEFT_STRESS_SECONDS");
	double d = e && *e ? atof(e) : 2.0;

	return d > 0 ? d : 2.0;
}

TCase *wt_tcase(Suite *s, const char *name, double timeout_s)
{
	TCase *tc = tcase_create(name);

	tcase_set_timeout(tc, timeout_s);
	suite_add_tcase(s, tc);
	return tc;
}

/* Skips are counted as bytes appended to an unlinked temporary file that
 * the forked test processes inherit: a counter in memory would die with
 * each child. */
static int skip_fd = -1;

void wt_skip(const char *fmt, ...)
{
	va_list ap;

	printf("SKIP ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (skip_fd >= 0 && write(skip_fd, "s", 1) != 1)
		perror("wt_skip: write");
}

bool wt_have_two_cpus(const char *test)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	cpu_set_t set;
	int aff = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;

	if (online >= 2 && aff >= 2)
		return true;
	wt_skip("%s: needs 2 CPUs (online %ld, in affinity mask %d)", test, online, aff);
	return false;
}

bool wt_init_two_workers(const char *test)
{
	wt_init_workers(2);
	if (weft_workers() >= 2)
		return true;
	wt_skip("%s: WEFT_WORKERS gave %d worker(s)", test, weft_workers());
	wt_shutdown();
	return false;
}

int wt_run_suite(Suite *s)
{
	char path[] = "/tmp/weft-skips-XXXXXX";
	SRunner *sr = srunner_create(s);
	int failed, run;
	struct stat st;
	long skipped = 0;

	skip_fd = mkstemp(path);
	if (skip_fd >= 0) {
		unlink(path);
		(void)fcntl(skip_fd, F_SETFL, O_APPEND);
	}
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	run = srunner_ntests_run(sr);
	srunner_free(sr);
	if (skip_fd >= 0 && fstat(skip_fd, &st) == 0)
		skipped = (long)st.st_size;
	printf("skipped: %ld of %d tests\n", skipped, run);
	if (failed)
		return EXIT_FAILURE;
	return run > 0 && skipped >= run ? 77 : EXIT_SUCCESS;
}

bool wt_guard_markers(void)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fds[2];
	bool ok = false;

	if (p == MAP_FAILED)
		return false;
	if (madvise(p, ps, 102 /* MADV_GUARD_INSTALL */) == 0 && pipe(fds) == 0) {
		ok = write(fds[1], p, 1) < 0 && errno == EFAULT;
		close(fds[0]);
		close(fds[1]);
	}
	munmap(p, 2 * ps);
	return ok;
}

long wt_max_map_count(void)
{
	long n = 0;
	FILE *f = fopen("/proc/sys/vm/max_map_count", "r");

	if (f) {
		if (fscanf(f, "%ld", &n) != 1)
			n = 0;
		fclose(f);
	}
	return n;
}

void *wt_yielder(void *stop)
{
	while (!atomic_load((_Atomic int *)stop))
		WT_CHECK(weft_yield() == 0);
	return NULL;
}
