/*
 * tests/check_diag.c - suite "diag": the thread dump, the shutdown
 * report, the dump signal and the stack-overflow report.
 *
 * dump        weft_dump names every light thread with its state and what it
 *             waits on (sem, join), and lists every worker
 * timed       weft_shutdown_timed with a thread blocked on a semaphore:
 *             ETIMEDOUT at the deadline, a report naming the thread and the
 *             semaphore, the runtime still running; then 0 (before: no
 *             such call, and weft_shutdown hung silently)
 * grace       weft_shutdown with a thread blocked for 2.5 s: the report
 *             after the 2 s grace period names it
 * signal      WEFT_DUMP_SIGNAL=SIGUSR2: kill(getpid(), SIGUSR2) writes the
 *             dump to stderr
 * overflow    a named thread recursing into its guard page: the process
 *             aborts with "stack overflow in weft thread NAME (id ...,
 *             stack size N" on stderr (before: a bare SIGSEGV). Skipped
 *             under ASan/TSan, whose own fault handling comes first.
 */
#include "tests/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char outbuf[65536];

/* Redirect stderr to a fresh temporary file; returns the saved stderr. */
static int grab_stderr(int *file)
{
	char path[] = "/tmp/weft-diag-XXXXXX";
	int fd = mkstemp(path), saved;

	ck_assert_int_ge(fd, 0);
	unlink(path);
	fflush(stderr);
	saved = dup(2);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(dup2(fd, 2), 2);
	*file = fd;
	return saved;
}

static const char *read_file(int fd)
{
	ssize_t n;

	fflush(stderr);
	n = pread(fd, outbuf, sizeof(outbuf) - 1, 0);
	outbuf[n > 0 ? n : 0] = '\0';
	return outbuf;
}

static void release_stderr(int saved, int file)
{
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(file);
}

static weft_sem_t sem;
static weft_thread_t sleeper;

static void *sem_waiter(void *arg)
{
	(void)arg;
	weft_sem_wait(&sem);
	return NULL;
}

static void *joiner(void *arg)
{
	(void)arg;
	weft_join(sleeper, NULL);
	return NULL;
}

static void spawn_named(weft_thread_t *t, void *(*fn)(void *), const char *name)
{
	weft_attr_t a;

	weft_attr_init(&a);
	a.name = name;
	ck_assert_int_eq(weft_spawn(t, fn, NULL, &a), 0);
}

/* Wait until n light threads have parked (stats). */
static void wait_parks(uint64_t n)
{
	weft_stats_t st;

	for (int i = 0; i < 5000; i++) {
		ck_assert_int_eq(weft_stats_get(&st), 0);
		if (st.thread_parks >= n)
			return;
		usleep(1000);
	}
	ck_abort_msg("threads did not park");
}

START_TEST(test_dump)
{
	weft_thread_t j;
	int fd, saved;
	const char *s;

	wt_init_workers(2);
	ck_assert_int_eq(weft_sem_init(&sem, 0), 0);
	spawn_named(&sleeper, sem_waiter, "sleeper");
	spawn_named(&j, joiner, "the-joiner");
	wait_parks(2);
	usleep(20000);
	saved = grab_stderr(&fd);
	ck_assert_int_eq(weft_dump(2), 0);
	s = read_file(fd);
	release_stderr(saved, fd);
	fprintf(stderr, "%s", s);
	ck_assert_ptr_nonnull(strstr(s, "\"sleeper\" parked on sem"));
	ck_assert_ptr_nonnull(strstr(s, "\"the-joiner\" parked on join"));
	ck_assert_ptr_nonnull(strstr(s, "worker 0:"));
	ck_assert_ptr_nonnull(strstr(s, "worker 1:"));
	ck_assert_int_eq(weft_dump(-1), EINVAL);
	ck_assert_int_eq(weft_sem_post(&sem), 0);
	ck_assert_int_eq(weft_join(j, NULL), 0);
	wt_shutdown();
}
END_TEST

START_TEST(test_timed)
{
	weft_thread_t t;
	int fd, saved, r;
	const char *s;

	wt_init_workers(2);
	ck_assert_int_eq(weft_sem_init(&sem, 0), 0);
	spawn_named(&t, sem_waiter, "stuck");
	wait_parks(1);
	saved = grab_stderr(&fd);
	r = weft_shutdown_timed(weft_now_ns() + 200000000ull);
	s = read_file(fd);
	release_stderr(saved, fd);
	fprintf(stderr, "%s", s);
	ck_assert_int_eq(r, ETIMEDOUT);
	ck_assert_ptr_nonnull(strstr(s, "1 light thread still alive"));
	ck_assert_ptr_nonnull(strstr(s, "\"stuck\" parked on sem"));
	ck_assert_int_eq(weft_workers(), 2);   /* still running */
	ck_assert_int_eq(weft_sem_post(&sem), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	ck_assert_int_eq(weft_shutdown_timed(weft_now_ns() + 5000000000ull), 0);
	ck_assert_int_eq(weft_workers(), 0);
	ck_assert_int_eq(weft_shutdown_timed(weft_now_ns()), EINVAL);
}
END_TEST

static void *post_later(void *arg)
{
	(void)arg;
	usleep(2500000);
	weft_sem_post(&sem);
	return NULL;
}

START_TEST(test_grace)
{
	weft_attr_t a;
	pthread_t p;
	int fd, saved;
	const char *s;

	wt_init_workers(2);
	ck_assert_int_eq(weft_sem_init(&sem, 0), 0);
	weft_attr_init(&a);
	a.name = "hung";
	a.detached = 1;
	ck_assert_int_eq(weft_spawn(NULL, sem_waiter, NULL, &a), 0);
	ck_assert_int_eq(pthread_create(&p, NULL, post_later, NULL), 0);
	saved = grab_stderr(&fd);
	ck_assert_int_eq(weft_shutdown(), 0);
	s = read_file(fd);
	release_stderr(saved, fd);
	pthread_join(p, NULL);
	fprintf(stderr, "%s", s);
	ck_assert_ptr_nonnull(strstr(s, "weft_shutdown still waiting"));
	ck_assert_ptr_nonnull(strstr(s, "\"hung\" parked on sem"));
}
END_TEST

START_TEST(test_signal)
{
	weft_thread_t t;
	int fd, saved, i;
	const char *s = "";

	setenv("WEFT_DUMP_SIGNAL", "SIGUSR2", 1);
	wt_init_workers(2);
	unsetenv("WEFT_DUMP_SIGNAL");
	ck_assert_int_eq(weft_sem_init(&sem, 0), 0);
	spawn_named(&t, sem_waiter, "sig-target");
	wait_parks(1);
	saved = grab_stderr(&fd);
	kill(getpid(), SIGUSR2);
	for (i = 0; i < 300; i++) {
		s = read_file(fd);
		if (strstr(s, "end of dump"))
			break;
		usleep(10000);
	}
	release_stderr(saved, fd);
	fprintf(stderr, "%s", s);
	ck_assert_ptr_nonnull(strstr(s, "\"sig-target\" parked on sem"));
	ck_assert_int_eq(weft_sem_post(&sem), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	wt_shutdown();
	/* the handler is gone with the runtime: the default action would
	 * kill us, so only check that ours is no longer installed */
	{
		struct sigaction sa;

		sigaction(SIGUSR2, NULL, &sa);
		ck_assert(sa.sa_handler == SIG_DFL);
	}
}
END_TEST

static volatile int keep_going = 1;

static int recurse(int n)
{
	volatile char pad[512];

	pad[0] = (char)n;
	if (!keep_going)
		return pad[0];
	return recurse(n + 1) + pad[0];
}

static void *deep(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)recurse(0);
}

START_TEST(test_overflow)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	printf("overflow: SKIP under ASan/TSan (their fault handlers come first)\n");
#else
	int fd, saved, st;
	pid_t pid;
	const char *s;

	saved = grab_stderr(&fd);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		weft_attr_t a;
		weft_thread_t t;

		if (weft_init(NULL) != 0)
			_exit(2);
		weft_attr_init(&a);
		a.name = "deep";
		a.stack_size = 64 * 1024;
		if (weft_spawn(&t, deep, NULL, &a) != 0)
			_exit(3);
		weft_join(t, NULL);
		_exit(4);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	s = read_file(fd);
	release_stderr(saved, fd);
	fprintf(stderr, "%s", s);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "child status %#x", st);
	ck_assert_ptr_nonnull(strstr(s, "weft: stack overflow in weft thread deep (id 0x"));
	ck_assert_ptr_nonnull(strstr(s, "stack size 65536"));
#endif
}
END_TEST

static Suite *diag_suite(void)
{
	Suite *s = suite_create("diag");
	TCase *tc;

	tc = wt_tcase(s, "dump", 10);
	tcase_add_test(tc, test_dump);
	tc = wt_tcase(s, "timed", 10);
	tcase_add_test(tc, test_timed);
	tc = wt_tcase(s, "grace", 15);
	tcase_add_test(tc, test_grace);
	tc = wt_tcase(s, "signal", 10);
	tcase_add_test(tc, test_signal);
	tc = wt_tcase(s, "overflow", 20);
	tcase_add_test(tc, test_overflow);
	return s;
}

int main(void)
{
	return wt_run_suite(diag_suite());
}
