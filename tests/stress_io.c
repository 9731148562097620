/*
 * tests/stress_io.c - bounded, seeded stress of the I/O layer: byte streams
 * over socketpairs and pipes between threads on all workers, with random
 * chunk sizes, vectored and plain calls, yields, sleeps, polls, and short
 * I/O timeouts racing the completions (linked timeouts vs CQEs, or the
 * fallback poller's deadline vs readiness).
 *
 * Invariants checked at the end: every byte sent arrived, in order, with
 * the expected value; each stream ended with EOF; no thread recorded a
 * failure. Prints seed=, the budget and the counts.
 *   WEFT_STRESS_SECONDS (default 2), WEFT_TEST_SEED, WEFT_FEATURES=NO_URING
 */
#define _GNU_SOURCE
#include "tests/harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <weft/io.h>

enum { PAIRS = 24, CHUNK_MAX = 8192 };

struct stream {
	int rfd, wfd;
	bool sock;
	uint64_t seed;
	weft_time_t end;
	uint64_t sent, got;
	uint64_t timeouts, polls;
	uint64_t wops, rops;   /* the sender's and the receiver's own counts */
};

static inline unsigned char pattern(uint64_t off, int id)
{
	return (unsigned char)((off * 131u + (uint64_t)id * 7u) >> 3);
}

static void *sender(void *arg)
{
	struct stream *s = arg;
	uint64_t rng = s->seed * 2 + 1;
	unsigned char buf[CHUNK_MAX];

	while (weft_now_ns() < s->end) {
		size_t n = 1 + wt_rand(&rng) % CHUNK_MAX, done = 0;

		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(s->sent + i, (int)(s->seed & 0xff));
		while (done < n) {
			ssize_t k;

			switch (wt_rand(&rng) % 3) {
			case 0:
				k = weft_io_write(s->wfd, buf + done, n - done);
				break;
			case 1: {
				size_t h = (n - done) / 2;
				struct iovec v[2] = { { buf + done, h }, { buf + done + h, n - done - h } };

				k = weft_io_writev(s->wfd, v, 2);
				break;
			}
			default:
				k = s->sock ? weft_io_send(s->wfd, buf + done, n - done, MSG_NOSIGNAL)
					    : weft_io_write(s->wfd, buf + done, n - done);
			}
			WT_CHECK(k > 0);
			if (k <= 0)
				return NULL;
			done += (size_t)k;
			s->wops++;
		}
		s->sent += n;
		switch (wt_rand(&rng) % 16) {
		case 0:
			weft_yield();
			break;
		case 1:
			weft_sleep_ns(wt_rand(&rng) % 200000);
			break;
		}
	}
	WT_CHECK(weft_io_close(s->wfd) == 0);
	return NULL;
}

static void *receiver(void *arg)
{
	struct stream *s = arg;
	uint64_t rng = s->seed * 3 + 7;
	unsigned char buf[CHUNK_MAX];

	for (;;) {
		size_t want = 1 + wt_rand(&rng) % CHUNK_MAX;
		uint64_t tmo = wt_rand(&rng) % 4 == 0 ? 20000 + wt_rand(&rng) % 500000 : 0;
		ssize_t k;

		if (wt_rand(&rng) % 8 == 0) {
			int r = weft_io_poll(s->rfd, POLLIN, (int)(wt_rand(&rng) % 3));

			WT_CHECK(r >= 0);
			s->polls++;
		}
		WT_CHECK(weft_io_set_timeout(tmo) == 0);
		k = s->sock && wt_rand(&rng) % 2 ? weft_io_recv(s->rfd, buf, want, 0)
						 : weft_io_read(s->rfd, buf, want);
		/* weft_errno(): errno read in a loop around weft calls (weft/io.h) */
		if (k < 0 && weft_errno() == ETIMEDOUT && tmo) {
			s->timeouts++;
			continue;
		}
		WT_CHECK(k >= 0);
		if (k <= 0)
			break;   /* EOF (or a recorded failure) */
		for (ssize_t i = 0; i < k; i++)
			if (buf[i] != pattern(s->got + (uint64_t)i, (int)(s->seed & 0xff))) {
				WT_CHECK(!"stream corrupted");
				return NULL;
			}
		s->got += (uint64_t)k;
		s->rops++;
	}
	WT_CHECK(weft_io_set_timeout(0) == 0);
	return NULL;
}

START_TEST(streams)
{
	static struct stream st[PAIRS];
	weft_thread_t snd[PAIRS], rcv[PAIRS];
	uint64_t seed = wt_seed(), bytes = 0, tmos = 0, polls = 0, ops = 0;
	double secs = wt_stress_seconds();
	weft_time_t end;

	wt_init(_i);
	end = weft_now_ns() + (weft_time_t)(secs * 1e9);
	for (int i = 0; i < PAIRS; i++) {
		int fds[2];

		memset(&st[i], 0, sizeof(st[i]));
		st[i].sock = i % 2 == 0;
		if (st[i].sock)
			ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
		else
			ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
		st[i].rfd = fds[0];
		st[i].wfd = fds[1];
		st[i].seed = seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
		st[i].end = end;
	}
	for (int i = 0; i < PAIRS; i++) {
		ck_assert_int_eq(weft_spawn(&rcv[i], receiver, &st[i], NULL), 0);
		ck_assert_int_eq(weft_spawn(&snd[i], sender, &st[i], NULL), 0);
	}
	for (int i = 0; i < PAIRS; i++) {
		ck_assert_int_eq(weft_join(snd[i], NULL), 0);
		ck_assert_int_eq(weft_join(rcv[i], NULL), 0);
	}
	wt_assert_no_failure();
	for (int i = 0; i < PAIRS; i++) {
		ck_assert_msg(st[i].got == st[i].sent, "pair %d: sent %llu got %llu", i,
			      (unsigned long long)st[i].sent, (unsigned long long)st[i].got);
		close(st[i].rfd);
		bytes += st[i].got;
		tmos += st[i].timeouts;
		polls += st[i].polls;
		ops += st[i].wops + st[i].rops;
	}
	printf("stress_io config %d: %.1f s, %d streams, %llu bytes, %llu ops, %llu timeouts, %llu polls\n",
	       _i, secs, PAIRS, (unsigned long long)bytes, (unsigned long long)ops,
	       (unsigned long long)tmos, (unsigned long long)polls);
	wt_shutdown();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stress_io");
	/* A stress test's timeout is three times its wall-time budget
	 * (WEFT_STRESS_SECONDS), so a slow or loaded machine is not a failure;
	 * plus 10 s for start-up and the drain after the deadline. */
	TCase *tc = wt_tcase(s, "streams", wt_stress_seconds() * 3 + 10);

	tcase_add_loop_test(tc, streams, 0, wt_nconfigs);
	return wt_run_suite(s);
}
