/*
 * tests/check_io_poll.c - suite "io_poll": weft_io_poll's edge cases.
 *
 * bad_fd   fd -1 and a descriptor that is not open give POLLNVAL at once
 *          (the header's promise), from a weft thread and an OS thread,
 *          with timeouts 0, 100 ms and none; before, fd -1 gave -1/EINVAL
 * ready    a pipe with data reports POLLIN; an empty one times out with 0
 */
#include "tests/harness.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <unistd.h>

static int closed_fd(void)
{
	int p[2];

	ck_assert_int_eq(pipe(p), 0);
	close(p[0]);
	close(p[1]);
	return p[0];   /* not open any more (nothing opened since) */
}

struct bad_res {
	int fd;
	int r[3];
	weft_time_t ns;
};

static void *bad_fn(void *arg)
{
	struct bad_res *b = arg;
	weft_time_t t0 = weft_now_ns();

	b->r[0] = weft_io_poll(b->fd, POLLIN, 0);
	b->r[1] = weft_io_poll(b->fd, POLLIN, 100);
	b->r[2] = weft_io_poll(b->fd, POLLIN | POLLOUT, -1);
	b->ns = weft_now_ns() - t0;
	return NULL;
}

static void check_bad(int fd, bool from_weft)
{
	struct bad_res b = { .fd = fd };

	if (from_weft) {
		weft_thread_t t;

		ck_assert_int_eq(weft_spawn(&t, bad_fn, &b, NULL), 0);
		ck_assert_int_eq(weft_join(t, NULL), 0);
	} else {
		bad_fn(&b);
	}
	for (int i = 0; i < 3; i++)
		ck_assert_msg(b.r[i] == POLLNVAL, "fd %d (%s), call %d: %d, want POLLNVAL", fd,
			      from_weft ? "weft thread" : "OS thread", i, b.r[i]);
	/* at once, not after the 100 ms timeout */
	ck_assert_msg(b.ns < 90000000ull, "took %llu ns", (unsigned long long)b.ns);
}

START_TEST(test_bad_fd)
{
	wt_init_workers(2);
	check_bad(-1, true);
	check_bad(-1, false);
	check_bad(closed_fd(), true);
	check_bad(closed_fd(), false);
	wt_shutdown();
}
END_TEST

static void *ready_fn(void *arg)
{
	int *p = arg;

	p[2] = weft_io_poll(p[0], POLLIN, 20);
	ck_assert_int_eq(write(p[1], "x", 1), 1);
	p[3] = weft_io_poll(p[0], POLLIN, -1);
	return NULL;
}

START_TEST(test_ready)
{
	int p[4];
	weft_thread_t t;

	wt_init_workers(2);
	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(weft_spawn(&t, ready_fn, p, NULL), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	ck_assert_int_eq(p[2], 0);
	ck_assert(p[3] & POLLIN);
	close(p[0]);
	close(p[1]);
	wt_shutdown();
}
END_TEST

static Suite *io_poll_suite(void)
{
	Suite *s = suite_create("io_poll");
	TCase *tc;

	tc = wt_tcase(s, "bad_fd", 10);
	tcase_add_test(tc, test_bad_fd);
	tc = wt_tcase(s, "ready", 10);
	tcase_add_test(tc, test_ready);
	return s;
}

int main(void)
{
	return wt_run_suite(io_poll_suite());
}
