/*
 * tests/check_signal.c - suite "signal": weft calls from signal handlers.
 *
 * mask        a worker runs its light threads with the asynchronous
 *             signals blocked (so a process-directed signal's handler runs
 *             on one of the program's own OS threads), the synchronous
 *             ones (SIGSEGV, SIGBUS, ...) not
 * sem_post    a handler posts a semaphore at a high rate while light
 *             threads and the interrupted OS thread itself wait on it (the
 *             OS thread often holds the semaphore's internal lock when the
 *             handler runs): no deadlock, no unit lost or doubled, the
 *             handler never runs on a worker
 * unpark      a handler unparks a parked light thread at a high rate: no
 *             hang, every round ends
 *
 * Signals come from a helper OS thread that blocks them itself, as
 * kill(getpid(), SIGUSR1), so the kernel picks the receiving thread among
 * those that do not block it. Bounded: 1 s of signals per test.
 */
#include "tests/harness.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RUN_NS 1000000000ull

static weft_sem_t sig_sem;
static weft_thread_t sig_target;
static _Atomic int sig_mode;             /* 0 sem post, 1 unpark */
static _Atomic long handler_runs, handler_on_worker, handler_errors;
static _Atomic int sender_stop;

static void on_usr1(int sig)
{
	int saved = errno;

	(void)sig;
	atomic_fetch_add(&handler_runs, 1);
	if (weft_worker_id() >= 0)
		atomic_fetch_add(&handler_on_worker, 1);
	if (atomic_load(&sig_mode) == 0) {
		if (weft_sem_post(&sig_sem) != 0)
			atomic_fetch_add(&handler_errors, 1);
	} else {
		if (weft_unpark(sig_target) != 0)
			atomic_fetch_add(&handler_errors, 1);
	}
	errno = saved;
}

static void install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	atomic_store(&handler_runs, 0);
	atomic_store(&handler_on_worker, 0);
	atomic_store(&handler_errors, 0);
	atomic_store(&sender_stop, 0);
}

static void *sender(void *arg)
{
	sigset_t set;
	weft_time_t end = weft_now_ns() + RUN_NS;
	long *sent = arg;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	while (weft_now_ns() < end && !atomic_load(&sender_stop)) {
		kill(getpid(), SIGUSR1);
		(*sent)++;
		/* about 20,000 signals a second */
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* ---------------------------------------------------------------------- */

static void *mask_fn(void *arg)
{
	sigset_t cur;
	int *bad = arg;

	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	if (!sigismember(&cur, SIGUSR1) || !sigismember(&cur, SIGINT) ||
	    !sigismember(&cur, SIGQUIT) || !sigismember(&cur, SIGALRM) ||
	    !sigismember(&cur, SIGCHLD))
		*bad |= 1;
	if (sigismember(&cur, SIGSEGV) || sigismember(&cur, SIGBUS) ||
	    sigismember(&cur, SIGFPE) || sigismember(&cur, SIGILL) ||
	    sigismember(&cur, SIGABRT))
		*bad |= 2;
	return NULL;
}

START_TEST(test_mask)
{
	weft_thread_t t;
	sigset_t before, after;
	int bad = 0;

	pthread_sigmask(SIG_BLOCK, NULL, &before);
	wt_init_workers(2);
	/* the caller's own mask is left as it was */
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	ck_assert_int_eq(sigismember(&after, SIGUSR1), sigismember(&before, SIGUSR1));
	ck_assert_int_eq(weft_spawn(&t, mask_fn, &bad, NULL), 0);
	ck_assert_int_eq(weft_join(t, NULL), 0);
	ck_assert_msg(!(bad & 1), "a worker runs with SIGUSR1/INT/QUIT/ALRM/CHLD unblocked");
	ck_assert_msg(!(bad & 2), "a worker blocks a synchronous signal");
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */

static _Atomic int waiters_stop;
static _Atomic long taken_weft;

static void *sem_waiter(void *arg)
{
	(void)arg;
	while (!atomic_load(&waiters_stop)) {
		if (weft_sem_wait(&sig_sem) != 0)
			break;
		atomic_fetch_add(&taken_weft, 1);
	}
	return NULL;
}

START_TEST(test_sem_post)
{
	enum { NW = 3 };
	weft_thread_t w[NW];
	pthread_t snd;
	long sent = 0, taken_os = 0, extra = 0;
	int v;

	install();
	atomic_store(&sig_mode, 0);
	atomic_store(&waiters_stop, 0);
	atomic_store(&taken_weft, 0);
	wt_init_workers(2);
	ck_assert_int_eq(weft_sem_init(&sig_sem, 0), 0);
	for (int i = 0; i < NW; i++)
		ck_assert_int_eq(weft_spawn(&w[i], sem_waiter, NULL, NULL), 0);
	ck_assert_int_eq(pthread_create(&snd, NULL, sender, &sent), 0);
	/* this OS thread waits too: its slow path holds the semaphore's lock
	 * while the handler may run on it */
	{
		weft_time_t end = weft_now_ns() + RUN_NS;

		while (weft_now_ns() < end) {
			/* a past deadline: the slow path (the lock) and back,
			 * again and again */
			int r = weft_sem_timedwait(&sig_sem, 1);

			ck_assert(r == 0 || r == ETIMEDOUT);
			if (r == 0)
				taken_os++;
		}
	}
	atomic_store(&sender_stop, 1);
	pthread_join(snd, NULL);
	atomic_store(&waiters_stop, 1);
	for (int i = 0; i < NW; i++) {
		ck_assert_int_eq(weft_sem_post(&sig_sem), 0);
		extra++;
	}
	for (int i = 0; i < NW; i++)
		ck_assert_int_eq(weft_join(w[i], NULL), 0);
	ck_assert_int_eq(weft_sem_getvalue(&sig_sem, &v), 0);
	fprintf(stderr, "sem_post: %ld signals sent, %ld handler posts, taken %ld (weft) + %ld (OS), "
		"value %d, handlers on a worker %ld\n", sent, atomic_load(&handler_runs),
		atomic_load(&taken_weft), taken_os, v, atomic_load(&handler_on_worker));
	ck_assert_int_eq(atomic_load(&handler_errors), 0);
	ck_assert_int_gt(atomic_load(&handler_runs), 100);
	ck_assert_int_eq(atomic_load(&taken_weft) + taken_os + v,
			 atomic_load(&handler_runs) + extra);
	ck_assert_int_eq(atomic_load(&handler_on_worker), 0);
	ck_assert_int_eq(weft_sem_destroy(&sig_sem), 0);
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */

static _Atomic long parker_wakes;
static _Atomic int parker_stop;

static void *parker(void *arg)
{
	(void)arg;
	while (!atomic_load(&parker_stop)) {
		weft_park();
		atomic_fetch_add(&parker_wakes, 1);
	}
	return NULL;
}

START_TEST(test_unpark)
{
	pthread_t snd;
	long sent = 0;

	install();
	atomic_store(&parker_stop, 0);
	atomic_store(&parker_wakes, 0);
	wt_init_workers(2);
	ck_assert_int_eq(weft_spawn(&sig_target, parker, NULL, NULL), 0);
	atomic_store(&sig_mode, 1);
	ck_assert_int_eq(pthread_create(&snd, NULL, sender, &sent), 0);
	pthread_join(snd, NULL);
	atomic_store(&parker_stop, 1);
	ck_assert_int_eq(weft_unpark(sig_target), 0);
	ck_assert_int_eq(weft_join(sig_target, NULL), 0);
	fprintf(stderr, "unpark: %ld signals, %ld handler unparks, %ld wakes, on a worker %ld\n",
		sent, atomic_load(&handler_runs), atomic_load(&parker_wakes),
		atomic_load(&handler_on_worker));
	ck_assert_int_eq(atomic_load(&handler_errors), 0);
	ck_assert_int_gt(atomic_load(&parker_wakes), 0);
	ck_assert_int_eq(atomic_load(&handler_on_worker), 0);
	wt_shutdown();
}
END_TEST

static Suite *signal_suite(void)
{
	Suite *s = suite_create("signal");
	TCase *tc;

	tc = wt_tcase(s, "mask", 10);
	tcase_add_test(tc, test_mask);
	tc = wt_tcase(s, "sem_post", 20);
	tcase_add_test(tc, test_sem_post);
	tc = wt_tcase(s, "unpark", 20);
	tcase_add_test(tc, test_unpark);
	return s;
}

int main(void)
{
	return wt_run_suite(signal_suite());
}
