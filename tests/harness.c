/*
 * tests/harness.c - see harness.h.
 */
#include "tests/harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

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

int wt_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
