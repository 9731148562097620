/*
 * tests/check_lifecycle.c - suite "lifecycle": handles and objects used
 * past their life, and fork.
 *
 * stale      a thread that exited unjoined, then weft_shutdown: joining or
 *            detaching its handle gives EINVAL (before: read freed memory,
 *            returned 0 and planted the TCB in the next runtime's pool);
 *            the next runtime spawns and joins normally
 * fork       fork with light threads alive: in the child weft_spawn,
 *            weft_join, weft_init, weft_shutdown give ENOTSUP (before:
 *            spawn succeeded and join hung); a fork with no runtime gives
 *            a child that can run its own
 * sem        every call on a destroyed semaphore gives EINVAL (before:
 *            succeeded silently); init makes it usable again
 */
#include "tests/harness.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void *ret_arg(void *arg)
{
	return arg;
}

START_TEST(test_stale)
{
	weft_thread_t t, d;
	weft_attr_t a;
	void *r = NULL;

	wt_init_workers(2);
	ck_assert_int_eq(weft_spawn(&t, ret_arg, (void *)42, NULL), 0);
	weft_attr_init(&a);
	a.detached = 1;
	ck_assert_int_eq(weft_spawn(&d, ret_arg, NULL, &a), 0);
	wt_shutdown();   /* waits for both; t exited, never joined */
	ck_assert_int_eq(weft_join(t, &r), EINVAL);
	ck_assert_ptr_null(r);
	ck_assert_int_eq(weft_detach(t), EINVAL);
	ck_assert_int_eq(weft_unpark(t), 0);   /* harmless on a free TCB */

	/* the next runtime is healthy: many spawns, each joined with its
	 * own result */
	wt_init_workers(2);
	for (int round = 0; round < 4; round++) {
		enum { N = 300 };
		weft_thread_t ts[N];

		for (intptr_t i = 0; i < N; i++)
			ck_assert_int_eq(weft_spawn(&ts[i], ret_arg, (void *)(i + 1), NULL), 0);
		for (intptr_t i = 0; i < N; i++) {
			ck_assert_int_eq(weft_join(ts[i], &r), 0);
			ck_assert_ptr_eq(r, (void *)(i + 1));
		}
	}
	ck_assert_int_eq(weft_join(t, NULL), EINVAL);
	wt_shutdown();
}
END_TEST

static weft_sem_t fork_sem;

static void *blocked(void *arg)
{
	(void)arg;
	weft_sem_wait(&fork_sem);
	return NULL;
}

/* Wait for pid at most 10 s; kill it if it hangs. Returns its exit
 * status, or -1 if it hung. */
static int wait_child(pid_t pid)
{
	int st;

	for (int i = 0; i < 1000; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

START_TEST(test_fork)
{
	weft_thread_t t;
	pid_t pid;

	wt_init_workers(2);
	ck_assert_int_eq(weft_sem_init(&fork_sem, 0), 0);
	ck_assert_int_eq(weft_spawn(&t, blocked, NULL, NULL), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		weft_thread_t c;
		int bad = 0;

		if (weft_spawn(&c, ret_arg, NULL, NULL) != ENOTSUP)
			bad |= 1;
		if (weft_join(t, NULL) != ENOTSUP)
			bad |= 2;
		if (weft_init(NULL) != ENOTSUP)
			bad |= 4;
		if (weft_shutdown() != ENOTSUP)
			bad |= 8;
		_exit(bad);
	}
	ck_assert_int_eq(wait_child(pid), 0);
	/* the parent is unaffected */
	ck_assert_int_eq(weft_sem_post(&fork_sem), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	wt_shutdown();

	/* no runtime at the fork: the child starts its own */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		weft_thread_t c;
		void *r = NULL;

		if (weft_init(NULL) != 0 || weft_spawn(&c, ret_arg, (void *)7, NULL) != 0 ||
		    weft_join(c, &r) != 0 || r != (void *)7 || weft_shutdown() != 0)
			_exit(1);
		_exit(0);
	}
	ck_assert_int_eq(wait_child(pid), 0);
}
END_TEST

START_TEST(test_sem)
{
	weft_sem_t s;
	weft_wakeq_t wq = WEFT_WAKEQ_INITIALIZER;
	int v;

	wt_init_workers(1);
	ck_assert_int_eq(weft_sem_init(&s, 3), 0);
	ck_assert_int_eq(weft_sem_destroy(&s), 0);
	ck_assert_int_eq(weft_sem_wait(&s), EINVAL);
	ck_assert_int_eq(weft_sem_trywait(&s), EINVAL);
	ck_assert_int_eq(weft_sem_timedwait(&s, weft_now_ns() + 1000000), EINVAL);
	ck_assert_int_eq(weft_sem_post(&s), EINVAL);
	ck_assert_int_eq(weft_sem_post_n(&s, 2), EINVAL);
	ck_assert_int_eq(weft_sem_post_n(&s, 0), EINVAL);
	ck_assert_int_eq(weft_sem_post_wq(&s, 1, &wq), EINVAL);
	ck_assert_int_eq(weft_sem_getvalue(&s, &v), EINVAL);
	ck_assert_int_eq(weft_sem_destroy(&s), EINVAL);
	ck_assert_int_eq(weft_sem_init(&s, 1), 0);
	ck_assert_int_eq(weft_sem_wait(&s), 0);
	ck_assert_int_eq(weft_sem_post(&s), 0);
	ck_assert_int_eq(weft_sem_getvalue(&s, &v), 0);
	ck_assert_int_eq(v, 1);
	ck_assert_int_eq(weft_sem_destroy(&s), 0);
	wt_shutdown();
}
END_TEST

static Suite *lifecycle_suite(void)
{
	Suite *s = suite_create("lifecycle");
	TCase *tc;

	tc = wt_tcase(s, "stale", 20);
	tcase_add_test(tc, test_stale);
	tc = wt_tcase(s, "fork", 30);
	tcase_add_test(tc, test_fork);
	tc = wt_tcase(s, "sem", 10);
	tcase_add_test(tc, test_sem);
	return s;
}

int main(void)
{
	return wt_run_suite(lifecycle_suite());
}
