/*
 * tests/stress_chan.c - bounded, seeded stress of channels and select.
 *
 * NCH channels of random capacity (0..3) carry (sender, channel, seq)
 * messages. Weft threads and OS threads run random mixes of blocking, try,
 * timed (deadlines of 0..100 us, so timeouts race claims all the time) and
 * select operations (random subsets of send and receive cases). Senders stop
 * after WEFT_STRESS_SECONDS (default 2); then every channel is closed while
 * receivers are still blocked on it, and receivers drain until EPIPE.
 *
 * Invariants checked at the end (nothing lost, nothing duplicated, FIFO):
 *   - per (sender, channel), the seqs a receiver sees are increasing;
 *   - per (sender, channel), the count received equals the count sent, and
 *     the sum of seqs received is 1 + 2 + ... + count.
 * Prints seed= at start (WEFT_TEST_SEED overrides; tests/harness.h) and the
 * operation counts. Exit 0 pass, 1 fail.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft.h>
#include <weft/chan.h>

#include "tests/harness.h"

#define NCH 4          /* channels */
#define NSEND 6        /* sender threads (odd ones are OS threads) */
#define NRECV 4        /* receiver threads (odd ones are OS threads) */
#define NMIX 2         /* threads that both send and receive, with selects */
#define NPROD (NSEND + NMIX)

struct msg {
	uint16_t sender, ch;
	uint32_t seq;
};

static weft_chan_t *chans[NCH];
static _Atomic int stop;            /* senders stop */
static _Atomic int drained;         /* all channels closed */
static uint64_t seed;
static weft_time_t end_time;

/* sent[p][c]: messages producer p completed on channel c (written by p only,
 * read after join). */
static uint32_t sent[NPROD][NCH];
static _Atomic long long rcount[NPROD][NCH], rsum[NPROD][NCH];
static _Atomic long ops_send, ops_recv, ops_timeout, ops_select, ops_again;

/* Receiver-side bookkeeping for one thread. */
struct rstate {
	uint32_t last[NPROD][NCH];
	long long cnt[NPROD][NCH], sum[NPROD][NCH];
};

static void got(struct rstate *r, const struct msg *m)
{
	WT_CHECK(m->sender < NPROD && m->ch < NCH);
	if (m->sender >= NPROD || m->ch >= NCH)
		return;
	WT_CHECK(m->seq > r->last[m->sender][m->ch]);
	r->last[m->sender][m->ch] = m->seq;
	r->cnt[m->sender][m->ch]++;
	r->sum[m->sender][m->ch] += m->seq;
	atomic_fetch_add_explicit(&ops_recv, 1, memory_order_relaxed);
}

static void publish(struct rstate *r)
{
	for (int p = 0; p < NPROD; p++)
		for (int c = 0; c < NCH; c++) {
			atomic_fetch_add(&rcount[p][c], r->cnt[p][c]);
			atomic_fetch_add(&rsum[p][c], r->sum[p][c]);
		}
}

static weft_time_t short_deadline(uint64_t *s)
{
	unsigned k = wt_rand(s) % 8;

	if (k == 0)
		return 0;                       /* already past */
	return weft_now_ns() + wt_rand(s) % 100000;
}

/* One send attempt by producer p on channel c with a random form. */
static void do_send(int p, int c, uint64_t *s)
{
	struct msg m = { (uint16_t)p, (uint16_t)c, sent[p][c] + 1 };
	int err;

	switch (wt_rand(s) % 3) {
	case 0:
		err = weft_chan_trysend(chans[c], &m);
		break;
	case 1:
		err = weft_chan_timedsend(chans[c], &m, short_deadline(s));
		break;
	default:
		/* blocking, but bounded: the receivers never stop before us */
		err = weft_chan_timedsend(chans[c], &m, weft_now_ns() + 2000000);
		break;
	}
	WT_CHECK(err == 0 || err == EAGAIN || err == ETIMEDOUT);
	if (err == 0) {
		sent[p][c]++;
		atomic_fetch_add_explicit(&ops_send, 1, memory_order_relaxed);
	} else if (err == ETIMEDOUT) {
		atomic_fetch_add_explicit(&ops_timeout, 1, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&ops_again, 1, memory_order_relaxed);
	}
}

static void *sender(void *arg)
{
	int p = (int)(intptr_t)arg;
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + (uint64_t)p * 7919 + 1;

	while (!atomic_load(&stop))
		do_send(p, (int)(wt_rand(&s) % NCH), &s);
	return NULL;
}

/* A receiver: random forms; after the close, drains with blocking recv. */
static void *receiver(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint64_t s = seed * 0xbf58476d1ce4e5b9ull + (uint64_t)id * 104729 + 3;
	struct rstate *r = calloc(1, sizeof(*r));
	struct msg m;
	int err;

	WT_CHECK(r != NULL);
	if (r == NULL)
		return NULL;
	while (!atomic_load(&drained)) {
		int c = (int)(wt_rand(&s) % NCH);

		switch (wt_rand(&s) % 4) {
		case 0:
			err = weft_chan_tryrecv(chans[c], &m);
			break;
		case 1:
		case 2:
			err = weft_chan_timedrecv(chans[c], &m, short_deadline(&s));
			break;
		default: {
			weft_chan_case_t cs[NCH];
			struct msg ms[NCH];
			size_t chosen = 99;

			for (int i = 0; i < NCH; i++)
				cs[i] = (weft_chan_case_t){ wt_rand(&s) % 3 ? chans[i] : NULL,
							   WEFT_CHAN_RECV, &ms[i] };
			err = weft_chan_select(cs, NCH, &chosen, short_deadline(&s));
			atomic_fetch_add_explicit(&ops_select, 1, memory_order_relaxed);
			/* with every case disabled a timed select sleeps: ETIMEDOUT,
			 * never EAGAIN or EINVAL (the deadline is never infinite) */
			WT_CHECK(err != EAGAIN && err != EINVAL);
			if (err == 0) {
				WT_CHECK(chosen < NCH && cs[chosen].chan != NULL);
				if (chosen < NCH)
					m = ms[chosen];
			}
			break;
		}
		}
		WT_CHECK(err == 0 || err == EAGAIN || err == ETIMEDOUT || err == EPIPE);
		if (err == 0)
			got(r, &m);
	}
	/* closed: drain every channel to EPIPE */
	for (int c = 0; c < NCH; c++)
		while ((err = weft_chan_recv(chans[c], &m)) == 0)
			got(r, &m);
	publish(r);
	free(r);
	return NULL;
}

/* Mixed: selects over send and receive cases of random channels. */
static void *mixer(void *arg)
{
	int id = (int)(intptr_t)arg;
	int p = NSEND + id;
	uint64_t s = seed * 0x94d049bb133111ebull + (uint64_t)id * 31 + 5;
	struct rstate *r = calloc(1, sizeof(*r));

	WT_CHECK(r != NULL);
	if (r == NULL)
		return NULL;
	while (!atomic_load(&stop)) {
		weft_chan_case_t cs[2 * NCH];
		struct msg out[NCH], in[NCH];
		size_t chosen = 99;
		int err, k;

		for (int c = 0; c < NCH; c++) {
			out[c] = (struct msg){ (uint16_t)p, (uint16_t)c, sent[p][c] + 1 };
			cs[c] = (weft_chan_case_t){ wt_rand(&s) % 2 ? chans[c] : NULL, WEFT_CHAN_SEND,
						   &out[c] };
			cs[NCH + c] = (weft_chan_case_t){ wt_rand(&s) % 2 ? chans[c] : NULL,
							 WEFT_CHAN_RECV, &in[c] };
		}
		k = (int)(wt_rand(&s) % (2 * NCH));
		cs[k].chan = chans[k % NCH];   /* never all off */
		err = weft_chan_select(cs, 2 * NCH, &chosen, short_deadline(&s));
		atomic_fetch_add_explicit(&ops_select, 1, memory_order_relaxed);
		WT_CHECK(err == 0 || err == ETIMEDOUT);
		if (err != 0)
			continue;
		WT_CHECK(chosen < 2 * NCH);
		if (chosen < NCH) {
			sent[p][chosen]++;
			atomic_fetch_add_explicit(&ops_send, 1, memory_order_relaxed);
		} else if (chosen < 2 * NCH) {
			got(r, &in[chosen - NCH]);
		}
	}
	publish(r);
	free(r);
	return NULL;
}

struct runner {
	int os;
	pthread_t pt;
	weft_thread_t wt;
};

static void start(struct runner *r, int os, void *(*fn)(void *), intptr_t arg)
{
	r->os = os;
	if (os)
		ck_assert_int_eq(pthread_create(&r->pt, NULL, fn, (void *)arg), 0);
	else
		ck_assert_int_eq(weft_spawn(&r->wt, fn, (void *)arg, NULL), 0);
}

static void join(struct runner *r)
{
	if (r->os)
		ck_assert_int_eq(pthread_join(r->pt, NULL), 0);
	else
		ck_assert_int_eq(weft_join(r->wt, NULL), 0);
}

START_TEST(test_stress)
{
	struct runner snd[NSEND], rcv[NRECV], mix[NMIX];
	uint64_t cs = seed + 17;
	long long total = 0;

	wt_init_workers(2);
	for (int c = 0; c < NCH; c++)
		ck_assert_int_eq(weft_chan_create(&chans[c], sizeof(struct msg), wt_rand(&cs) % 4), 0);
	for (int i = 0; i < NRECV; i++)
		start(&rcv[i], i & 1, receiver, i);
	for (int i = 0; i < NSEND; i++)
		start(&snd[i], i & 1, sender, i);
	for (int i = 0; i < NMIX; i++)
		start(&mix[i], i & 1, mixer, i);

	while (weft_now_ns() < end_time)
		weft_sleep_ns(10000000);
	atomic_store(&stop, 1);
	for (int i = 0; i < NSEND; i++)
		join(&snd[i]);
	for (int i = 0; i < NMIX; i++)
		join(&mix[i]);
	/* receivers may be blocked: close wakes them, they drain */
	for (int c = 0; c < NCH; c++)
		ck_assert_int_eq(weft_chan_close(chans[c]), 0);
	atomic_store(&drained, 1);
	for (int i = 0; i < NRECV; i++)
		join(&rcv[i]);

	ck_assert_msg(atomic_load(&wt_failure) == NULL, "%s (seed=%llu)",
		      atomic_load(&wt_failure), (unsigned long long)seed);
	for (int p = 0; p < NPROD; p++)
		for (int c = 0; c < NCH; c++) {
			long long n = sent[p][c];

			ck_assert_msg(atomic_load(&rcount[p][c]) == n,
				      "producer %d chan %d: sent %lld received %lld (seed=%llu)",
				      p, c, n, atomic_load(&rcount[p][c]), (unsigned long long)seed);
			ck_assert_msg(atomic_load(&rsum[p][c]) == n * (n + 1) / 2,
				      "producer %d chan %d: seq sum mismatch (seed=%llu)", p, c,
				      (unsigned long long)seed);
			total += n;
		}
	for (int c = 0; c < NCH; c++)
		ck_assert_int_eq(weft_chan_destroy(chans[c]), 0);
	printf("stress_chan: seed=%llu messages=%lld sends=%ld recvs=%ld selects=%ld "
	       "timeouts=%ld eagain=%ld\n", (unsigned long long)seed, total, atomic_load(&ops_send),
	       atomic_load(&ops_recv), atomic_load(&ops_select), atomic_load(&ops_timeout),
	       atomic_load(&ops_again));
	ck_assert_int_gt(total, 0);
	wt_shutdown();
}
END_TEST

int main(void)
{
	double secs = wt_stress_seconds();
	Suite *su = suite_create("stress_chan");
	/* A stress test's timeout is three times its wall-time budget
	 * (WEFT_STRESS_SECONDS), so a slow or loaded machine is not a failure;
	 * plus 10 s for the close-and-drain phase after the deadline. */
	TCase *tc = wt_tcase(su, "stress", secs * 3 + 10);

	seed = wt_seed();
	/* set before the fork: the child's budget starts now */
	end_time = weft_now_ns() + (weft_time_t)(secs * 1e9);
	tcase_add_test(tc, test_stress);
	return wt_run_suite(su);
}
