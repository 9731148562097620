/*
 * tests/check_chan.c - Check suite "chan": channels and select.
 *
 * tcases:
 *   basic      single-thread semantics (ring, try forms, len/cap, close and
 *              drain), rendezvous and buffered order between threads, select
 *              (ready cases, disabled cases, blocking, stale nodes unlinked),
 *              ping-pong on one worker and across workers; a rendezvous
 *              ping-pong started on two workers ends up on one (sync wakeup)
 *   errors     every bad input (NULL, elem size 0, bad select cases, ...);
 *              destroy: EBUSY with a blocked call, and waiting for a
 *              completed select's unlink (regression: use after free)
 *   timeout    timed forms (ETIMEDOUT, nothing left queued), past deadlines,
 *              select timeouts, timeouts racing peers (nothing lost)
 *   contended  many senders and receivers: FIFO per sender, every element
 *              exactly once; select forwarders with send and recv cases;
 *              selects whose peers are selects; close waking everybody
 *   os_thread  the same with plain OS threads and mixed OS / weft threads,
 *              and channels used with no runtime at all
 * Loop tests iterate the harness configurations (wt_configs: 1 worker, N
 * workers, N workers pinned).
 *
 * No ck_assert runs inside a weft thread or a helper pthread: they record the
 * first failure with WT_CHECK and the test asserts after join (harness.h).
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
#include <unistd.h>

#include <weft.h>
#include <weft/chan.h>

#include "tests/harness.h"

#define MS 1000000ull

/* ASan and TSan abort on an impossible allocation instead of returning NULL
 * (unless allocator_may_return_null=1), so that one check is skipped under
 * them. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_ASAN 1
#else
#define UNDER_ASAN 0
#endif

/* ---------------------------------------------------------------------- */
/* Helpers */

/* Shut the runtime down, then check what the threads recorded. */
static void rt_stop(void)
{
	wt_shutdown();
	wt_assert_no_failure();
}

/* A thread that is either a weft thread (os == 0) or a pthread. */
struct runner {
	int os;
	pthread_t pt;
	weft_thread_t wt;
};

static void run_start_on(struct runner *r, int os, int worker, void *(*fn)(void *), void *arg)
{
	r->os = os;
	if (os) {
		ck_assert_int_eq(pthread_create(&r->pt, NULL, fn, arg), 0);
	} else {
		weft_attr_t attr = WEFT_ATTR_INITIALIZER;

		attr.worker = worker;
		attr.stack_size = 64 * 1024;
		ck_assert_int_eq(weft_spawn(&r->wt, fn, arg, &attr), 0);
	}
}

static void run_start(struct runner *r, int os, void *(*fn)(void *), void *arg)
{
	run_start_on(r, os, -1, fn, arg);
}

static void run_join(struct runner *r)
{
	if (r->os)
		ck_assert_int_eq(pthread_join(r->pt, NULL), 0);
	else
		ck_assert_int_eq(weft_join(r->wt, NULL), 0);
}

/* Sleep a little in whatever kind of thread we are. */
static void nap_ms(unsigned ms)
{
	weft_sleep_ns(ms * MS);
}

static weft_chan_t *mkchan(size_t esize, size_t cap)
{
	weft_chan_t *ch = NULL;

	ck_assert_int_eq(weft_chan_create(&ch, esize, cap), 0);
	ck_assert_ptr_nonnull(ch);
	return ch;
}

/* Wait until weft threads have parked n more times than in *before (the
 * thread_parks counter): a sleep alone proves nothing on a loaded machine.
 * A thread blocked in a channel call is queued before it parks. */
static void wait_parks(const weft_stats_t *before, uint64_t n)
{
	weft_stats_t now;

	for (;;) {
		ck_assert_int_eq(weft_stats_get(&now), 0);
		if (now.thread_parks >= before->thread_parks + n)
			return;
		nap_ms(1);
	}
}

/* Asserts that nothing is left queued on ch (destroy would say EBUSY). */
static void destroy_ok(weft_chan_t *ch)
{
	ck_assert_int_eq(weft_chan_destroy(ch), 0);
}

/* ---------------------------------------------------------------------- */
/* basic */

START_TEST(test_ring_single_thread)
{
	weft_chan_t *ch = mkchan(sizeof(int), 4);
	int v;

	/* no runtime needed for calls that do not block */
	ck_assert_uint_eq(weft_chan_cap(ch), 4);
	for (int round = 0; round < 3; round++) {   /* wraps the ring */
		for (int i = 0; i < 4; i++) {
			v = round * 10 + i;
			ck_assert_int_eq(weft_chan_trysend(ch, &v), 0);
		}
		v = 99;
		ck_assert_int_eq(weft_chan_trysend(ch, &v), EAGAIN);
		ck_assert_uint_eq(weft_chan_len(ch), 4);
		for (int i = 0; i < 2; i++) {
			ck_assert_int_eq(weft_chan_tryrecv(ch, &v), 0);
			ck_assert_int_eq(v, round * 10 + i);
		}
		v = round * 10 + 4;
		ck_assert_int_eq(weft_chan_send(ch, &v), 0);   /* room: no block */
		v = round * 10 + 5;
		ck_assert_int_eq(weft_chan_timedsend(ch, &v, 0), 0);
		for (int i = 2; i < 6; i++) {
			ck_assert_int_eq(weft_chan_recv(ch, &v), 0);
			ck_assert_int_eq(v, round * 10 + i);
		}
		ck_assert_int_eq(weft_chan_tryrecv(ch, &v), EAGAIN);
		ck_assert_uint_eq(weft_chan_len(ch), 0);
	}
	destroy_ok(ch);
}
END_TEST

START_TEST(test_rendezvous_try)
{
	weft_chan_t *ch = mkchan(sizeof(int), 0);
	int v = 1;

	/* nobody waiting on the other side: a try never completes */
	ck_assert_int_eq(weft_chan_trysend(ch, &v), EAGAIN);
	ck_assert_int_eq(weft_chan_tryrecv(ch, &v), EAGAIN);
	ck_assert_uint_eq(weft_chan_len(ch), 0);
	ck_assert_uint_eq(weft_chan_cap(ch), 0);
	destroy_ok(ch);
}
END_TEST

START_TEST(test_big_elements)
{
	struct big { char b[1000]; } x, y;
	weft_chan_t *ch = mkchan(sizeof(x), 3);

	for (int i = 0; i < 3; i++) {
		memset(&x, 'a' + i, sizeof(x));
		ck_assert_int_eq(weft_chan_trysend(ch, &x), 0);
	}
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(weft_chan_tryrecv(ch, &y), 0);
		memset(&x, 'a' + i, sizeof(x));
		ck_assert_mem_eq(&x, &y, sizeof(x));
	}
	destroy_ok(ch);
}
END_TEST

START_TEST(test_close_drain)
{
	weft_chan_t *ch = mkchan(sizeof(int), 4);
	int v;

	for (v = 1; v <= 3; v++)
		ck_assert_int_eq(weft_chan_send(ch, &v), 0);
	ck_assert_int_eq(weft_chan_close(ch), 0);
	ck_assert_int_eq(weft_chan_close(ch), EPIPE);
	ck_assert_int_eq(weft_chan_send(ch, &v), EPIPE);
	ck_assert_int_eq(weft_chan_trysend(ch, &v), EPIPE);
	ck_assert_int_eq(weft_chan_timedsend(ch, &v, weft_now_ns() + MS), EPIPE);
	/* receivers drain first, in order, by every form */
	ck_assert_int_eq(weft_chan_recv(ch, &v), 0);
	ck_assert_int_eq(v, 1);
	ck_assert_int_eq(weft_chan_tryrecv(ch, &v), 0);
	ck_assert_int_eq(v, 2);
	ck_assert_int_eq(weft_chan_timedrecv(ch, &v, WEFT_TIME_INFINITE), 0);
	ck_assert_int_eq(v, 3);
	/* then EPIPE, at once, never blocking and never ETIMEDOUT */
	ck_assert_int_eq(weft_chan_recv(ch, &v), EPIPE);
	ck_assert_int_eq(weft_chan_tryrecv(ch, &v), EPIPE);
	ck_assert_int_eq(weft_chan_timedrecv(ch, &v, 0), EPIPE);
	ck_assert_int_eq(weft_chan_timedrecv(ch, &v, weft_now_ns() + MS), EPIPE);
	destroy_ok(ch);
}
END_TEST

/* One producer sends N ints 0..N-1, one consumer checks the order. */
struct order_arg {
	weft_chan_t *ch;
	int n;
};

static void *order_producer(void *p)
{
	struct order_arg *a = p;

	for (int i = 0; i < a->n; i++)
		WT_CHECK(weft_chan_send(a->ch, &i) == 0);
	return NULL;
}

static void *order_consumer(void *p)
{
	struct order_arg *a = p;
	int v;

	for (int i = 0; i < a->n; i++) {
		WT_CHECK(weft_chan_recv(a->ch, &v) == 0);
		WT_CHECK(v == i);
	}
	return NULL;
}

/* _i: configuration; capacity 0 (rendezvous), 1 and 16 each. */
START_TEST(test_order_two_threads)
{
	static const size_t caps[] = { 0, 1, 16 };

	wt_init(_i);
	for (size_t c = 0; c < 3; c++) {
		struct order_arg a = { mkchan(sizeof(int), caps[c]), 5000 };
		struct runner p, q;

		run_start(&q, 0, order_consumer, &a);
		run_start(&p, 0, order_producer, &a);
		run_join(&p);
		run_join(&q);
		destroy_ok(a.ch);
	}
	rt_stop();
}
END_TEST

/* Ping-pong: a token goes a -> b on ch[0] and back on ch[1] (docs/seeds.md, "pipe-bench"). */
struct pp_arg {
	weft_chan_t *ch[2];
	int n;
};

static void *pp_a(void *p)
{
	struct pp_arg *a = p;
	int v;

	for (int i = 0; i < a->n; i++) {
		WT_CHECK(weft_chan_send(a->ch[0], &i) == 0);
		WT_CHECK(weft_chan_recv(a->ch[1], &v) == 0);
		WT_CHECK(v == i + 1);
	}
	return NULL;
}

static void *pp_b(void *p)
{
	struct pp_arg *a = p;
	int v;

	for (int i = 0; i < a->n; i++) {
		WT_CHECK(weft_chan_recv(a->ch[0], &v) == 0);
		WT_CHECK(v == i);
		v++;
		WT_CHECK(weft_chan_send(a->ch[1], &v) == 0);
	}
	return NULL;
}

/* _i: 0 = both on worker 0, 1 = on workers 0 and 1. */
START_TEST(test_ping_pong)
{
	struct pp_arg a = { { mkchan(sizeof(int), 0), mkchan(sizeof(int), 0) }, 5000 };
	struct runner x, y;

	wt_init_workers(2);
	run_start_on(&y, 0, _i ? 1 : 0, pp_b, &a);
	run_start_on(&x, 0, 0, pp_a, &a);
	run_join(&x);
	run_join(&y);
	destroy_ok(a.ch[0]);
	destroy_ok(a.ch[1]);
	rt_stop();
}
END_TEST

/* Sync wakeup (chan.c "Sync wakeup", runtime/wake.c): two unpinned weft
 * threads ping-pong over rendezvous channels, started on different
 * workers. Every hand-off is made by a sender that blocks next, so the
 * first one whose worker has nothing else to run puts its peer in its own
 * next slot; from then on the wakes are local and the pair stays on one
 * worker. Without it each wake goes to the peer's last worker and the two
 * stay apart (seen with the sync path disabled locally: 0 rounds
 * together). Steals and DRAIN are off here: a steal can also bring the
 * pair together by chance (then their wakes are local), which would hide
 * a broken sync wakeup, and a thief could split them. The wake path
 * honours the hint only for unpinned threads, so each is spawned by a
 * launcher pinned to its worker (an unpinned child starts on its
 * spawner's worker). Three quarters of the second half of the rounds
 * must see both on one worker (1000 of 1000 seen, under load too).
 * Asserted only where the mechanism is on: SYNC_WAKE and NEXT_SLOT, and
 * not RANDOMIZE (which makes half the local wakes skip the next slot). */
#define PPS_N 2000
struct pps_arg {
	weft_chan_t *ch[2];
	_Atomic int ready;            /* both started: exchanges begin */
	int wa[PPS_N], wb[PPS_N];     /* worker of a / b in round i; each
	                               * written by its own thread, read after
	                               * join */
};

static void *pps_a(void *p)
{
	struct pps_arg *a = p;
	int v;

	while (atomic_load(&a->ready) < 2)
		weft_yield();
	for (int i = 0; i < PPS_N; i++) {
		WT_CHECK(weft_chan_send(a->ch[0], &i) == 0);
		WT_CHECK(weft_chan_recv(a->ch[1], &v) == 0);
		WT_CHECK(v == i);
		a->wa[i] = weft_worker_id();
	}
	return NULL;
}

static void *pps_b(void *p)
{
	struct pps_arg *a = p;
	int v;

	for (int i = 0; i < PPS_N; i++) {
		WT_CHECK(weft_chan_recv(a->ch[0], &v) == 0);
		WT_CHECK(v == i);
		a->wb[i] = weft_worker_id();
		WT_CHECK(weft_chan_send(a->ch[1], &v) == 0);
	}
	return NULL;
}

struct pps_launch {
	struct pps_arg *a;
	void *(*fn)(void *);
	int worker;                   /* where the child started */
};

static void *pps_launcher(void *p)
{
	struct pps_launch *l = p;
	weft_attr_t attr = WEFT_ATTR_INITIALIZER;   /* unpinned */
	weft_thread_t t;

	attr.stack_size = 64 * 1024;
	l->worker = weft_worker_id();
	WT_CHECK(weft_spawn(&t, l->fn, l->a, &attr) == 0);
	atomic_fetch_add(&l->a->ready, 1);
	WT_CHECK(weft_join(t, NULL) == 0);
	return NULL;
}

START_TEST(test_ping_pong_sync_wake)
{
	struct pps_arg *a = calloc(1, sizeof(*a));
	struct pps_launch la, lb;
	struct runner x, y;
	int together = 0, check, sync;

	ck_assert_ptr_nonnull(a);
	a->ch[0] = mkchan(sizeof(int), 0);
	a->ch[1] = mkchan(sizeof(int), 0);
	la = (struct pps_launch){ a, pps_a, -1 };
	lb = (struct pps_launch){ a, pps_b, -1 };
	/* no thief and no DRAIN move: only the wake path places the pair */
	wt_init_features(2, "NO_STEAL,NO_DRAIN");
	sync = weft_feature("SYNC_WAKE");
	check = sync == 1 && weft_feature("NEXT_SLOT") == 1 && weft_feature("RANDOMIZE") != 1;
	run_start_on(&y, 0, 1, pps_launcher, &lb);
	run_start_on(&x, 0, 0, pps_launcher, &la);
	run_join(&x);
	run_join(&y);
	destroy_ok(a->ch[0]);
	destroy_ok(a->ch[1]);
	rt_stop();
	ck_assert_int_eq(la.worker, 0);
	ck_assert_int_eq(lb.worker, 1);
	for (int i = PPS_N / 2; i < PPS_N; i++)
		together += a->wa[i] == a->wb[i];
	printf("chan ping_pong_sync_wake: SYNC_WAKE=%d rounds together %d of %d (asserted: %s)\n",
	       sync, together, PPS_N / 2, check ? "yes" : "no");
	fflush(stdout);
	if (check)
		ck_assert_int_ge(together, PPS_N / 2 * 3 / 4);
	free(a);
}
END_TEST

START_TEST(test_select_ready)
{
	weft_chan_t *a = mkchan(sizeof(int), 1), *b = mkchan(sizeof(int), 1);
	int va = -1, vb = -1, s = 7;
	size_t chosen = 99;
	weft_chan_case_t cases[3] = {
		{ a, WEFT_CHAN_RECV, &va },
		{ NULL, WEFT_CHAN_SEND, NULL },   /* disabled: elem may be NULL */
		{ b, WEFT_CHAN_RECV, &vb },
	};

	/* nothing ready */
	ck_assert_int_eq(weft_chan_tryselect(cases, 3, &chosen), EAGAIN);
	ck_assert_uint_eq(chosen, 99);
	/* only b ready: chosen every time, whatever case the scan starts at */
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(weft_chan_trysend(b, &i), 0);
		ck_assert_int_eq(weft_chan_select(cases, 3, &chosen, WEFT_TIME_INFINITE), 0);
		ck_assert_uint_eq(chosen, 2);
		ck_assert_int_eq(vb, i);
		ck_assert_int_eq(va, -1);
	}
	/* a send case that is ready (room in a), next to recv cases that are not */
	cases[1].chan = a;
	cases[1].elem = &s;
	cases[1].op = WEFT_CHAN_SEND;
	ck_assert_int_eq(weft_chan_tryselect(cases, 3, &chosen), 0);
	ck_assert_uint_eq(chosen, 1);
	ck_assert_uint_eq(weft_chan_len(a), 1);
	/* now a is full: the only ready case is the recv from a */
	ck_assert_int_eq(weft_chan_tryselect(cases, 3, &chosen), 0);
	ck_assert_uint_eq(chosen, 0);
	ck_assert_int_eq(va, 7);
	destroy_ok(a);
	destroy_ok(b);
}
END_TEST

START_TEST(test_select_closed)
{
	weft_chan_t *a = mkchan(sizeof(int), 0), *b = mkchan(sizeof(int), 2);
	int v = 5, w;
	size_t chosen = 99;
	weft_chan_case_t recv2[2] = { { a, WEFT_CHAN_RECV, &w }, { b, WEFT_CHAN_RECV, &w } };
	weft_chan_case_t send1[1] = { { b, WEFT_CHAN_SEND, &v } };

	ck_assert_int_eq(weft_chan_send(b, &v), 0);
	ck_assert_int_eq(weft_chan_close(b), 0);
	/* b still holds one element: drained first */
	ck_assert_int_eq(weft_chan_select(recv2, 2, &chosen, WEFT_TIME_INFINITE), 0);
	ck_assert_uint_eq(chosen, 1);
	ck_assert_int_eq(w, 5);
	/* then the closed case is ready, with EPIPE */
	chosen = 99;
	ck_assert_int_eq(weft_chan_select(recv2, 2, &chosen, WEFT_TIME_INFINITE), EPIPE);
	ck_assert_uint_eq(chosen, 1);
	ck_assert_int_eq(weft_chan_tryselect(send1, 1, &chosen), EPIPE);
	ck_assert_uint_eq(chosen, 0);
	destroy_ok(a);
	destroy_ok(b);
}
END_TEST

/* A blocked select completed by a peer on one channel, then by a peer on
 * another; its other nodes must be unlinked (destroy would say EBUSY). */
struct selb_arg {
	weft_chan_t *a, *b, *c;
	_Atomic int phase;
};

static void *selb_peer(void *p)
{
	struct selb_arg *s = p;
	int v = 42;

	nap_ms(5);
	WT_CHECK(weft_chan_send(s->b, &v) == 0);      /* completes case 1 */
	while (atomic_load(&s->phase) != 1)
		nap_ms(1);
	nap_ms(5);
	WT_CHECK(weft_chan_recv(s->c, &v) == 0);      /* completes case 2 */
	WT_CHECK(v == 9);
	return NULL;
}

START_TEST(test_select_blocking)
{
	struct selb_arg s = { mkchan(sizeof(int), 0), mkchan(sizeof(int), 0),
			      mkchan(sizeof(int), 0), 0 };
	int ra = -1, rb = -1, out = 9;
	size_t chosen = 99;
	weft_chan_case_t cases[3] = {
		{ s.a, WEFT_CHAN_RECV, &ra },
		{ s.b, WEFT_CHAN_RECV, &rb },
		{ s.c, WEFT_CHAN_SEND, &out },
	};
	struct runner r;

	wt_init(_i);
	run_start(&r, 0, selb_peer, &s);
	/* from the test's OS thread; the peer is a weft thread */
	ck_assert_int_eq(weft_chan_select(cases, 3, &chosen, WEFT_TIME_INFINITE), 0);
	ck_assert_uint_eq(chosen, 1);
	ck_assert_int_eq(rb, 42);
	ck_assert_int_eq(ra, -1);
	atomic_store(&s.phase, 1);
	ck_assert_int_eq(weft_chan_select(cases, 3, &chosen, WEFT_TIME_INFINITE), 0);
	ck_assert_uint_eq(chosen, 2);
	run_join(&r);
	destroy_ok(s.a);
	destroy_ok(s.b);
	destroy_ok(s.c);
	rt_stop();
}
END_TEST

/* Same channel twice in one select, in both directions. */
struct same_arg {
	weft_chan_t *ch;
	int got;
};

static void *same_peer(void *p)
{
	struct same_arg *s = p;

	nap_ms(5);
	WT_CHECK(weft_chan_recv(s->ch, &s->got) == 0);
	return NULL;
}

START_TEST(test_select_same_channel)
{
	struct same_arg s = { mkchan(sizeof(int), 0), 0 };
	int in = -1, out = 77;
	size_t chosen = 99;
	weft_chan_case_t cases[2] = {
		{ s.ch, WEFT_CHAN_RECV, &in },
		{ s.ch, WEFT_CHAN_SEND, &out },
	};
	struct runner r;

	wt_init_workers(2);
	run_start(&r, 0, same_peer, &s);
	/* the select must not match its own send with its own receive */
	ck_assert_int_eq(weft_chan_select(cases, 2, &chosen, WEFT_TIME_INFINITE), 0);
	ck_assert_uint_eq(chosen, 1);
	run_join(&r);
	ck_assert_int_eq(s.got, 77);
	ck_assert_int_eq(in, -1);
	destroy_ok(s.ch);
	rt_stop();
}
END_TEST

/* More cases than the select keeps on its stack. */
START_TEST(test_select_many_cases)
{
	enum { N = 40 };
	weft_chan_t *ch[N];
	weft_chan_case_t cases[N];
	int vals[N];
	size_t chosen;
	int seen[N] = { 0 };

	for (int i = 0; i < N; i++) {
		ch[i] = mkchan(sizeof(int), 1);
		cases[i] = (weft_chan_case_t){ ch[i], WEFT_CHAN_RECV, &vals[i] };
		ck_assert_int_eq(weft_chan_trysend(ch[i], &i), 0);
	}
	for (int k = 0; k < N; k++) {
		ck_assert_int_eq(weft_chan_tryselect(cases, N, &chosen), 0);
		ck_assert_uint_lt(chosen, N);
		ck_assert_int_eq(vals[chosen], (int)chosen);
		ck_assert_int_eq(seen[chosen], 0);
		seen[chosen] = 1;
	}
	ck_assert_int_eq(weft_chan_tryselect(cases, N, &chosen), EAGAIN);
	for (int i = 0; i < N; i++)
		destroy_ok(ch[i]);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* errors */

START_TEST(test_bad_create)
{
	weft_chan_t *ch = (weft_chan_t *)0x1;

	ck_assert_int_eq(weft_chan_create(NULL, 4, 1), EINVAL);
	ck_assert_int_eq(weft_chan_create(&ch, 0, 1), EINVAL);
	ck_assert_int_eq(weft_chan_create(&ch, 0, 0), EINVAL);
	ck_assert_int_eq(weft_chan_create(&ch, WEFT_CHAN_ELEM_MAX + 1, 1), EINVAL);
	ck_assert_int_eq(weft_chan_create(&ch, 8, SIZE_MAX), EINVAL);     /* overflows */
	if (!UNDER_ASAN)   /* 2^63 bytes: no memory */
		ck_assert_int_eq(weft_chan_create(&ch, 8, SIZE_MAX / 16), EAGAIN);
	ck_assert_ptr_eq(ch, (weft_chan_t *)0x1);                          /* untouched */
	ck_assert_int_eq(weft_chan_create(&ch, WEFT_CHAN_ELEM_MAX, 0), 0);
	destroy_ok(ch);
}
END_TEST

START_TEST(test_bad_args)
{
	weft_chan_t *ch = mkchan(sizeof(int), 1);
	int v = 0;

	ck_assert_int_eq(weft_chan_destroy(NULL), EINVAL);
	ck_assert_int_eq(weft_chan_close(NULL), EINVAL);
	ck_assert_int_eq(weft_chan_send(NULL, &v), EINVAL);
	ck_assert_int_eq(weft_chan_send(ch, NULL), EINVAL);
	ck_assert_int_eq(weft_chan_trysend(NULL, &v), EINVAL);
	ck_assert_int_eq(weft_chan_trysend(ch, NULL), EINVAL);
	ck_assert_int_eq(weft_chan_timedsend(NULL, &v, 0), EINVAL);
	ck_assert_int_eq(weft_chan_timedsend(ch, NULL, 0), EINVAL);
	ck_assert_int_eq(weft_chan_recv(NULL, &v), EINVAL);
	ck_assert_int_eq(weft_chan_recv(ch, NULL), EINVAL);
	ck_assert_int_eq(weft_chan_tryrecv(NULL, &v), EINVAL);
	ck_assert_int_eq(weft_chan_tryrecv(ch, NULL), EINVAL);
	ck_assert_int_eq(weft_chan_timedrecv(NULL, &v, 0), EINVAL);
	ck_assert_int_eq(weft_chan_timedrecv(ch, NULL, 0), EINVAL);
	ck_assert_uint_eq(weft_chan_len(NULL), 0);
	ck_assert_uint_eq(weft_chan_cap(NULL), 0);
	/* nothing above touched the channel */
	ck_assert_uint_eq(weft_chan_len(ch), 0);
	destroy_ok(ch);
}
END_TEST

START_TEST(test_bad_select)
{
	weft_chan_t *ch = mkchan(sizeof(int), 1);
	int v = 0;
	size_t chosen = 99;
	weft_chan_case_t ok[1] = { { ch, WEFT_CHAN_RECV, &v } };
	weft_chan_case_t badop[2] = { { ch, WEFT_CHAN_RECV, &v }, { ch, 0, &v } };
	weft_chan_case_t badop2[1] = { { ch, 3, &v } };
	weft_chan_case_t noelem[2] = { { ch, WEFT_CHAN_RECV, &v }, { ch, WEFT_CHAN_SEND, NULL } };
	weft_chan_case_t off[2] = { { NULL, WEFT_CHAN_RECV, NULL }, { NULL, 0, NULL } };
	weft_time_t t0;

	ck_assert_int_eq(weft_chan_select(NULL, 1, &chosen, WEFT_TIME_INFINITE), EINVAL);
	ck_assert_int_eq(weft_chan_tryselect(NULL, 1, &chosen), EINVAL);
	ck_assert_int_eq(weft_chan_select(ok, 1, NULL, WEFT_TIME_INFINITE), EINVAL);
	ck_assert_int_eq(weft_chan_tryselect(ok, 1, NULL), EINVAL);
	ck_assert_int_eq(weft_chan_select(ok, WEFT_CHAN_SELECT_MAX + 1, &chosen, 0), EINVAL);
	ck_assert_int_eq(weft_chan_select(badop, 2, &chosen, WEFT_TIME_INFINITE), EINVAL);
	ck_assert_int_eq(weft_chan_select(badop2, 1, &chosen, WEFT_TIME_INFINITE), EINVAL);
	ck_assert_int_eq(weft_chan_tryselect(noelem, 2, &chosen), EINVAL);
	/* no enabled case: blocking forever is refused, a poll says EAGAIN, a
	 * timed one sleeps to its deadline */
	ck_assert_int_eq(weft_chan_select(off, 2, &chosen, WEFT_TIME_INFINITE), EINVAL);
	ck_assert_int_eq(weft_chan_select(NULL, 0, &chosen, WEFT_TIME_INFINITE), EINVAL);
	ck_assert_int_eq(weft_chan_tryselect(off, 2, &chosen), EAGAIN);
	ck_assert_int_eq(weft_chan_tryselect(NULL, 0, &chosen), EAGAIN);
	t0 = weft_now_ns();
	ck_assert_int_eq(weft_chan_select(off, 2, &chosen, t0 + 5 * MS), ETIMEDOUT);
	ck_assert_uint_ge(weft_now_ns(), t0 + 5 * MS);
	ck_assert_int_eq(weft_chan_select(NULL, 0, &chosen, 0), ETIMEDOUT);
	ck_assert_uint_eq(chosen, 99);
	/* a bad case anywhere rejects the whole select, even when another case
	 * is ready, and nothing moves */
	ck_assert_int_eq(weft_chan_trysend(ch, &v), 0);
	ck_assert_int_eq(weft_chan_tryselect(badop, 2, &chosen), EINVAL);
	ck_assert_uint_eq(weft_chan_len(ch), 1);
	destroy_ok(ch);
}
END_TEST

/* WEFT_FAULT=alloc:N fails the N-th internal allocation (counted from
 * weft_init). Walk N until both allocations of this file have failed once:
 * weft_chan_create() must then say EAGAIN and leave *ch alone, and a select
 * with more cases than fit on its stack must say EAGAIN without touching a
 * channel (a ready case stays ready). */
START_TEST(test_alloc_failure)
{
	bool saw_create = false, saw_select = false;

	for (int n = 1; n <= 200 && !(saw_create && saw_select); n++) {
		weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
		weft_chan_case_t cs[2 * 8 + 1];
		weft_chan_t *ch = NULL;
		size_t chosen = 99;
		char buf[32];
		int err, v = 1;

		snprintf(buf, sizeof(buf), "alloc:%d", n);
		ck_assert_int_eq(setenv("WEFT_FAULT", buf, 1), 0);
		cfg.workers = 1;
		err = weft_init(&cfg);
		if (err != 0) {
			ck_assert_int_eq(err, EAGAIN);   /* the runtime's own allocation */
			continue;
		}
		err = weft_chan_create(&ch, sizeof(int), 4);
		if (err == EAGAIN) {
			ck_assert_ptr_null(ch);
			saw_create = true;
			ck_assert_int_eq(weft_shutdown(), 0);
			continue;
		}
		ck_assert_int_eq(err, 0);
		ck_assert_int_eq(weft_chan_trysend(ch, &v), 0);
		for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++)
			cs[i] = (weft_chan_case_t){ ch, WEFT_CHAN_RECV, &v };
		err = weft_chan_tryselect(cs, sizeof(cs) / sizeof(cs[0]), &chosen);
		if (err == EAGAIN) {
			ck_assert_uint_eq(chosen, 99);
			ck_assert_uint_eq(weft_chan_len(ch), 1);
			saw_select = true;
		} else {
			ck_assert_int_eq(err, 0);
			ck_assert_uint_eq(weft_chan_len(ch), 0);
		}
		destroy_ok(ch);
		ck_assert_int_eq(weft_shutdown(), 0);
	}
	ck_assert_int_eq(unsetenv("WEFT_FAULT"), 0);
	ck_assert(saw_create);
	ck_assert(saw_select);
}
END_TEST

/* destroy while a thread is blocked on the channel: EBUSY, nothing freed. */
static void *busy_recv(void *p)
{
	int v;

	WT_CHECK(weft_chan_recv(p, &v) == 0);
	WT_CHECK(v == 3);
	return NULL;
}

START_TEST(test_destroy_busy)
{
	weft_chan_t *ch = mkchan(sizeof(int), 0);
	struct runner r;
	weft_stats_t s0;
	int v = 3;

	wt_init_workers(2);
	ck_assert_int_eq(weft_stats_get(&s0), 0);
	run_start(&r, 0, busy_recv, ch);
	wait_parks(&s0, 1);   /* busy_recv is queued: destroy must not free */
	ck_assert_int_eq(weft_chan_destroy(ch), EBUSY);
	ck_assert_int_eq(weft_chan_send(ch, &v), 0);
	run_join(&r);
	destroy_ok(ch);
	rt_stop();
}
END_TEST

/* Regression: destroy must not free a channel while a select that had a
 * case on it may still take its lock. S selects on {A, B}; P sends on A
 * (claims S: S's B node is now stale), closes B (which pops that stale
 * node) and destroys B at once. S has not run yet (one worker, P does not
 * yield), and S's unlink pass will still lock B. A destroy that trusts
 * B's empty queues frees B (the selector then locks freed memory); so
 * destroy waits for S's unlink, and when it returns S has left select.
 * Everything is bounded: the test body gives up after 5 s. */
static weft_chan_t *dsel_a, *dsel_b;
static _Atomic int dsel_sel_done, dsel_peer_done, dsel_destroy_rc = -1;
static _Atomic int dsel_sel_rc = -1, dsel_sel_done_at_destroy = -1;
static size_t dsel_chosen = 99;
static int dsel_ra, dsel_rb;

static void *dsel_selector(void *p)
{
	weft_chan_case_t c[2] = {
		{ dsel_a, WEFT_CHAN_RECV, &dsel_ra },
		{ dsel_b, WEFT_CHAN_RECV, &dsel_rb },
	};

	(void)p;
	atomic_store(&dsel_sel_rc, weft_chan_select(c, 2, &dsel_chosen, WEFT_TIME_INFINITE));
	atomic_store(&dsel_sel_done, 1);
	return NULL;
}

static void *dsel_peer(void *p)
{
	int x = 42;

	(void)p;
	/* one worker: the selector runs (and queues on A and B) on our
	 * first yield; a few more make that independent of run order */
	for (int i = 0; i < 10; i++)
		weft_yield();
	WT_CHECK(weft_chan_send(dsel_a, &x) == 0);    /* claims the select */
	WT_CHECK(weft_chan_close(dsel_b) == 0);       /* pops its stale node */
	atomic_store(&dsel_destroy_rc, weft_chan_destroy(dsel_b));
	atomic_store(&dsel_sel_done_at_destroy, atomic_load(&dsel_sel_done));
	atomic_store(&dsel_peer_done, 1);
	return NULL;
}

START_TEST(test_destroy_after_select_claimed)
{
	weft_thread_t s, p;
	int i;

	wt_init_workers(1);
	dsel_a = mkchan(sizeof(int), 0);
	dsel_b = mkchan(sizeof(int), 0);
	ck_assert_int_eq(weft_spawn(&s, dsel_selector, NULL, NULL), 0);
	ck_assert_int_eq(weft_spawn(&p, dsel_peer, NULL, NULL), 0);
	/* bounded: a broken destroy can leave the selector stuck on freed
	 * memory, which must fail the test, not hang it */
	for (i = 0; i < 5000 && !(atomic_load(&dsel_peer_done) && atomic_load(&dsel_sel_done)); i++)
		usleep(1000);
	ck_assert_msg(atomic_load(&dsel_peer_done), "peer did not finish");
	ck_assert_int_eq(atomic_load(&dsel_destroy_rc), 0);
	ck_assert_msg(atomic_load(&dsel_sel_done_at_destroy) == 1,
		      "destroy(B) returned while a select on B had not left it");
	ck_assert_msg(atomic_load(&dsel_sel_done), "selector did not finish");
	ck_assert_int_eq(weft_join(s, NULL), 0);
	ck_assert_int_eq(weft_join(p, NULL), 0);
	ck_assert_int_eq(atomic_load(&dsel_sel_rc), 0);
	ck_assert_uint_eq(dsel_chosen, 0);
	ck_assert_int_eq(dsel_ra, 42);
	destroy_ok(dsel_a);
	rt_stop();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* timeout */

struct to_arg {
	weft_chan_t *rv, *full;   /* rendezvous; buffered and full */
};

static void *timeouts_body(void *p)
{
	struct to_arg *a = p;
	weft_chan_t *sel2[2] = { a->rv, a->full };
	weft_time_t t0, d;
	size_t chosen = 99;
	int v = 1;
	weft_chan_case_t cases[2] = {
		{ sel2[0], WEFT_CHAN_RECV, &v },
		{ sel2[1], WEFT_CHAN_SEND, &v },
	};

	t0 = weft_now_ns();
	d = t0 + 10 * MS;
	WT_CHECK(weft_chan_timedrecv(a->rv, &v, d) == ETIMEDOUT);
	WT_CHECK(weft_now_ns() >= d);
	d = weft_now_ns() + 10 * MS;
	WT_CHECK(weft_chan_timedsend(a->rv, &v, d) == ETIMEDOUT);
	WT_CHECK(weft_now_ns() >= d);
	d = weft_now_ns() + 10 * MS;
	WT_CHECK(weft_chan_timedsend(a->full, &v, d) == ETIMEDOUT);
	WT_CHECK(weft_now_ns() >= d);
	d = weft_now_ns() + 10 * MS;
	WT_CHECK(weft_chan_select(cases, 2, &chosen, d) == ETIMEDOUT);
	WT_CHECK(weft_now_ns() >= d);
	WT_CHECK(chosen == 99);
	/* a deadline in the past: no waiting at all, but a ready op completes */
	WT_CHECK(weft_chan_timedrecv(a->rv, &v, 0) == ETIMEDOUT);
	WT_CHECK(weft_chan_timedsend(a->full, &v, weft_now_ns()) == ETIMEDOUT);
	WT_CHECK(weft_chan_select(cases, 2, &chosen, 1) == ETIMEDOUT);
	WT_CHECK(weft_chan_timedrecv(a->full, &v, 0) == 0);
	WT_CHECK(v == 11);
	WT_CHECK(weft_chan_timedsend(a->full, &v, 0) == 0);
	/* the whole thing takes about 40 ms; 10 s means a deadline was missed
	 * (not merely a loaded machine) */
	WT_CHECK(weft_now_ns() - t0 < 10000 * MS);
	return NULL;
}

/* _i: 0 = weft thread, 1 = OS thread (with the runtime running). */
START_TEST(test_timed_forms)
{
	struct to_arg a = { mkchan(sizeof(int), 0), mkchan(sizeof(int), 1) };
	int v = 11;
	struct runner r;

	wt_init_workers(2);
	ck_assert_int_eq(weft_chan_send(a.full, &v), 0);
	run_start(&r, _i, timeouts_body, &a);
	run_join(&r);
	/* every timed-out waiter unlinked itself */
	destroy_ok(a.rv);
	destroy_ok(a.full);
	rt_stop();
}
END_TEST

/* A timed call that completes before its deadline. */
static void *late_sender(void *p)
{
	int v = 5;

	nap_ms(5);
	WT_CHECK(weft_chan_send(p, &v) == 0);
	return NULL;
}

START_TEST(test_timed_success)
{
	weft_chan_t *ch = mkchan(sizeof(int), 0);
	struct runner r;
	int v = 0;

	wt_init_workers(2);
	run_start(&r, 0, late_sender, ch);
	ck_assert_int_eq(weft_chan_timedrecv(ch, &v, weft_now_ns() + 5000 * MS), 0);
	ck_assert_int_eq(v, 5);
	run_join(&r);
	destroy_ok(ch);
	rt_stop();
}
END_TEST

/* Timed sends racing timed receives with deadlines of tens of microseconds:
 * every completed send is received exactly once, in order. Catches a timeout
 * that loses to a claim but reports ETIMEDOUT (or the reverse). */
struct race_arg {
	weft_chan_t *ch;
	int iters;
	long sent, recvd;
	unsigned seed;
	int sel;          /* receiver uses a one-case select instead */
};

static unsigned rnd(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 16;
}

/* At least iters attempts, and on until RACE_MIN_SENT of them succeeded (a
 * starved receiver on a loaded machine), but never past RACE_MAX_NS. */
#define RACE_MIN_SENT 100
#define RACE_MAX_NS (5000 * MS)

static void *race_sender(void *p)
{
	struct race_arg *a = p;
	weft_time_t end = weft_now_ns() + RACE_MAX_NS;
	unsigned s = a->seed;
	long next = 0;

	for (int i = 0; i < a->iters || (next < RACE_MIN_SENT && weft_now_ns() < end); i++) {
		int err = weft_chan_timedsend(a->ch, &next, weft_now_ns() + rnd(&s) % 60000);

		WT_CHECK(err == 0 || err == ETIMEDOUT);
		if (err == 0)
			next++;
	}
	a->sent = next;
	WT_CHECK(weft_chan_close(a->ch) == 0);
	return NULL;
}

static void *race_receiver(void *p)
{
	struct race_arg *a = p;
	unsigned s = a->seed ^ 0x5555;
	long v, expect = 0;
	int err;

	for (;;) {
		weft_time_t d = weft_now_ns() + rnd(&s) % 60000;

		if (a->sel) {
			weft_chan_case_t c = { a->ch, WEFT_CHAN_RECV, &v };
			size_t chosen = 9;

			err = weft_chan_select(&c, 1, &chosen, d);
			WT_CHECK(err == ETIMEDOUT || chosen == 0);
		} else {
			err = weft_chan_timedrecv(a->ch, &v, d);
		}
		if (err == EPIPE)
			break;
		WT_CHECK(err == 0 || err == ETIMEDOUT);
		if (err == 0) {
			WT_CHECK(v == expect);
			expect++;
		}
	}
	a->recvd = expect;
	return NULL;
}

/* _i: bit 0 sender is an OS thread, bit 1 receiver is, bit 2 receiver selects. */
START_TEST(test_timeout_race)
{
	struct race_arg a = { mkchan(sizeof(long), 0), 3000, 0, 0, 1234u + _i, (_i >> 2) & 1 };
	struct runner s, r;

	wt_init_workers(2);
	run_start(&r, (_i >> 1) & 1, race_receiver, &a);
	run_start(&s, _i & 1, race_sender, &a);
	run_join(&s);
	run_join(&r);
	wt_assert_no_failure();
	ck_assert_int_gt(a.sent, 0);
	ck_assert_int_eq(a.sent, a.recvd);
	destroy_ok(a.ch);
	rt_stop();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* contended: many senders and receivers */

#define MP_MAXS 16

struct msg {
	uint32_t sender;
	uint32_t seq;     /* 1, 2, ... per sender */
};

struct mpmc {
	weft_chan_t *ch;
	int nsend, nrecv, per;
	int os_mask;      /* bit 0: odd senders are OS threads; bit 1: odd receivers */
	_Atomic int next_id;
	_Atomic long count[MP_MAXS];
	_Atomic long long sum[MP_MAXS];
};

static void *mp_sender(void *p)
{
	struct mpmc *m = p;
	struct msg x = { (uint32_t)atomic_fetch_add(&m->next_id, 1), 0 };

	for (int i = 1; i <= m->per; i++) {
		x.seq = (uint32_t)i;
		WT_CHECK(weft_chan_send(m->ch, &x) == 0);
	}
	return NULL;
}

static void *mp_receiver(void *p)
{
	struct mpmc *m = p;
	uint32_t last[MP_MAXS] = { 0 };
	long cnt[MP_MAXS] = { 0 };
	long long sum[MP_MAXS] = { 0 };
	struct msg x;
	int err;

	while ((err = weft_chan_recv(m->ch, &x)) == 0) {
		WT_CHECK(x.sender < (uint32_t)m->nsend);
		if (x.sender >= (uint32_t)m->nsend)
			continue;
		/* FIFO per sender, as this receiver sees it */
		WT_CHECK(x.seq > last[x.sender]);
		last[x.sender] = x.seq;
		cnt[x.sender]++;
		sum[x.sender] += x.seq;
	}
	WT_CHECK(err == EPIPE);
	for (int s = 0; s < m->nsend; s++) {
		atomic_fetch_add(&m->count[s], cnt[s]);
		atomic_fetch_add(&m->sum[s], sum[s]);
	}
	return NULL;
}

static void run_mpmc(int nsend, int nrecv, size_t cap, int per, int os_mask)
{
	struct mpmc m;
	struct runner snd[MP_MAXS], rcv[MP_MAXS];

	memset(&m, 0, sizeof(m));
	m.ch = mkchan(sizeof(struct msg), cap);
	m.nsend = nsend;
	m.nrecv = nrecv;
	m.per = per;
	for (int i = 0; i < nrecv; i++)
		run_start(&rcv[i], (os_mask & 2) && (i & 1), mp_receiver, &m);
	for (int i = 0; i < nsend; i++)
		run_start(&snd[i], (os_mask & 1) && (i & 1), mp_sender, &m);
	for (int i = 0; i < nsend; i++)
		run_join(&snd[i]);
	ck_assert_int_eq(weft_chan_close(m.ch), 0);
	for (int i = 0; i < nrecv; i++)
		run_join(&rcv[i]);
	wt_assert_no_failure();
	/* every element exactly once: count and sum of 1..per per sender */
	for (int s = 0; s < nsend; s++) {
		ck_assert_int_eq(atomic_load(&m.count[s]), per);
		ck_assert_int_eq(atomic_load(&m.sum[s]), (long long)per * (per + 1) / 2);
	}
	destroy_ok(m.ch);
}

START_TEST(test_mpmc)
{
	wt_init(_i);
	run_mpmc(8, 4, 0, 2000, 0);
	run_mpmc(8, 4, 1, 2000, 0);
	run_mpmc(8, 4, 64, 2000, 0);
	run_mpmc(1, 8, 4, 10000, 0);
	run_mpmc(16, 1, 2, 1000, 0);
	rt_stop();
}
END_TEST

/* Fan-in through a select forwarder: producers send on their own channel; the
 * forwarder selects over "recv from every input" (disabled while its local
 * queue is full) and "send the oldest queued item to out" (disabled while
 * empty); a consumer checks FIFO per producer and the totals. A lost wakeup
 * hangs it (and the tcase timeout fails it). */
#define FW_IN 4
#define FW_Q 8

struct fw {
	weft_chan_t *in[FW_IN], *out;
	int per;
	_Atomic int open;
	long got;
};

struct fw_prod {
	struct fw *f;
	int id;
};

static void *fw_producer(void *p)
{
	struct fw_prod *pp = p;
	struct msg x = { (uint32_t)pp->id, 0 };

	for (int i = 1; i <= pp->f->per; i++) {
		x.seq = (uint32_t)i;
		WT_CHECK(weft_chan_send(pp->f->in[pp->id], &x) == 0);
	}
	WT_CHECK(weft_chan_close(pp->f->in[pp->id]) == 0);
	return NULL;
}

static void *fw_forwarder(void *p)
{
	struct fw *f = p;
	struct msg q[FW_Q], in;
	int qh = 0, qn = 0, open = FW_IN;
	bool closed[FW_IN] = { false };
	weft_chan_case_t cases[FW_IN + 1];

	while (open > 0 || qn > 0) {
		size_t chosen = 99;
		int err;

		for (int i = 0; i < FW_IN; i++)
			cases[i] = (weft_chan_case_t){ qn < FW_Q && !closed[i] ? f->in[i] : NULL,
						       WEFT_CHAN_RECV, &in };
		cases[FW_IN] = (weft_chan_case_t){ qn > 0 ? f->out : NULL, WEFT_CHAN_SEND,
						   &q[qh] };
		err = weft_chan_select(cases, FW_IN + 1, &chosen, WEFT_TIME_INFINITE);
		WT_CHECK(chosen <= FW_IN);
		if (chosen > FW_IN)
			break;
		if (chosen == FW_IN) {
			WT_CHECK(err == 0);
			qh = (qh + 1) % FW_Q;
			qn--;
		} else if (err == EPIPE) {
			closed[chosen] = true;
			open--;
		} else {
			WT_CHECK(err == 0);
			q[(qh + qn) % FW_Q] = in;
			qn++;
		}
	}
	WT_CHECK(weft_chan_close(f->out) == 0);
	return NULL;
}

static void *fw_consumer(void *p)
{
	struct fw *f = p;
	uint32_t last[FW_IN] = { 0 };
	struct msg x;
	int err;

	while ((err = weft_chan_recv(f->out, &x)) == 0) {
		WT_CHECK(x.sender < FW_IN && x.seq == last[x.sender] + 1);
		if (x.sender < FW_IN)
			last[x.sender] = x.seq;
		f->got++;
	}
	WT_CHECK(err == EPIPE);
	for (int i = 0; i < FW_IN; i++)
		WT_CHECK(last[i] == (uint32_t)f->per);
	return NULL;
}

static void run_forwarder(size_t cap, int os_forwarder)
{
	struct fw f;
	struct fw_prod pp[FW_IN];
	struct runner prod[FW_IN], fwd, cons;

	memset(&f, 0, sizeof(f));
	f.per = 3000;
	for (int i = 0; i < FW_IN; i++)
		f.in[i] = mkchan(sizeof(struct msg), i & 1 ? cap : 0);
	f.out = mkchan(sizeof(struct msg), cap);
	run_start(&cons, 0, fw_consumer, &f);
	run_start(&fwd, os_forwarder, fw_forwarder, &f);
	for (int i = 0; i < FW_IN; i++) {
		pp[i] = (struct fw_prod){ &f, i };
		run_start(&prod[i], 0, fw_producer, &pp[i]);
	}
	for (int i = 0; i < FW_IN; i++)
		run_join(&prod[i]);
	run_join(&fwd);
	run_join(&cons);
	wt_assert_no_failure();
	ck_assert_int_eq(f.got, (long)FW_IN * f.per);
	for (int i = 0; i < FW_IN; i++)
		destroy_ok(f.in[i]);
	destroy_ok(f.out);
}

START_TEST(test_select_forwarder)
{
	wt_init(_i);
	run_forwarder(0, 0);
	run_forwarder(3, 0);
	rt_stop();
}
END_TEST

/* Two selects as each other's peers: A selects {send on c, recv on d}, B
 * selects {recv on c, send on d}. Every round exactly one of the two
 * channels carries a value. Checks that a select can claim a select. */
struct duel {
	weft_chan_t *send, *recv;   /* this side's cases: send here, receive there */
	int rounds;
	long sent, recvd;
};

/* One side: select {send on u->send, recv on u->recv}, u->rounds times;
 * what it receives counts up from 0 (the peer sends 0, 1, ...). */
static void *duel_side(void *p)
{
	struct duel *u = p;
	long out = 0, in;

	for (int i = 0; i < u->rounds; i++) {
		weft_chan_case_t cs[2] = { { u->send, WEFT_CHAN_SEND, &out },
					   { u->recv, WEFT_CHAN_RECV, &in } };
		size_t chosen = 9;

		WT_CHECK(weft_chan_select(cs, 2, &chosen, WEFT_TIME_INFINITE) == 0);
		if (chosen == 0) {
			u->sent++;
			out++;
		} else {
			WT_CHECK(chosen == 1 && in == u->recvd);
			u->recvd++;
		}
	}
	return NULL;
}

/* _i: 0 = both weft, 1 = A is an OS thread, 2 = both OS threads. */
START_TEST(test_select_duel)
{
	weft_chan_t *c = mkchan(sizeof(long), 0), *d = mkchan(sizeof(long), 0);
	struct duel ua = { c, d, 5000, 0, 0 }, ub = { d, c, 5000, 0, 0 };
	struct runner a, b;

	wt_init_workers(2);
	run_start(&a, _i >= 1, duel_side, &ua);
	run_start(&b, _i >= 2, duel_side, &ub);
	run_join(&a);
	run_join(&b);
	wt_assert_no_failure();
	ck_assert_int_eq(ua.sent, ub.recvd);
	ck_assert_int_eq(ub.sent, ua.recvd);
	ck_assert_int_eq(ua.sent + ua.recvd, ua.rounds);
	destroy_ok(c);
	destroy_ok(d);
	rt_stop();
}
END_TEST

/* close wakes every blocked receiver and sender (with EPIPE), and nobody
 * else is lost: buffered elements are still drained afterwards. */
struct cw {
	weft_chan_t *ch;
	_Atomic int epipe, ok, started;
};

static void *cw_recv(void *p)
{
	struct cw *c = p;
	int v, err;

	atomic_fetch_add(&c->started, 1);
	err = weft_chan_recv(c->ch, &v);
	WT_CHECK(err == EPIPE);
	if (err == EPIPE)
		atomic_fetch_add(&c->epipe, 1);
	return NULL;
}

static void *cw_send(void *p)
{
	struct cw *c = p;
	int v = 1, err;

	atomic_fetch_add(&c->started, 1);
	err = weft_chan_send(c->ch, &v);
	WT_CHECK(err == EPIPE);
	if (err == EPIPE)
		atomic_fetch_add(&c->epipe, 1);
	return NULL;
}

START_TEST(test_close_wakes_all)
{
	enum { N = 12, NWEFT = N - N / 4 };   /* every 4th is an OS thread */
	struct cw c;
	struct runner r[N];
	weft_stats_t s0;
	int v;

	wt_init(_i);
	/* receivers blocked on an empty channel, some of them OS threads */
	memset(&c, 0, sizeof(c));
	c.ch = mkchan(sizeof(int), 2);
	ck_assert_int_eq(weft_stats_get(&s0), 0);
	for (int i = 0; i < N; i++)
		run_start(&r[i], i % 4 == 3, cw_recv, &c);
	while (atomic_load(&c.started) < N)
		nap_ms(1);
	wait_parks(&s0, NWEFT);   /* the weft ones are queued */
	nap_ms(20);               /* the OS ones very likely too */
	ck_assert_int_eq(weft_chan_close(c.ch), 0);
	for (int i = 0; i < N; i++)
		run_join(&r[i]);
	ck_assert_int_eq(atomic_load(&c.epipe), N);
	destroy_ok(c.ch);

	/* senders blocked on a full channel */
	memset(&c, 0, sizeof(c));
	c.ch = mkchan(sizeof(int), 2);
	for (v = 1; v <= 2; v++)
		ck_assert_int_eq(weft_chan_send(c.ch, &v), 0);
	ck_assert_int_eq(weft_stats_get(&s0), 0);
	for (int i = 0; i < N; i++)
		run_start(&r[i], i % 4 == 3, cw_send, &c);
	while (atomic_load(&c.started) < N)
		nap_ms(1);
	wait_parks(&s0, NWEFT);
	nap_ms(20);
	ck_assert_int_eq(weft_chan_close(c.ch), 0);
	for (int i = 0; i < N; i++)
		run_join(&r[i]);
	ck_assert_int_eq(atomic_load(&c.epipe), N);
	for (int i = 1; i <= 2; i++) {
		ck_assert_int_eq(weft_chan_recv(c.ch, &v), 0);
		ck_assert_int_eq(v, i);
	}
	ck_assert_int_eq(weft_chan_recv(c.ch, &v), EPIPE);
	destroy_ok(c.ch);
	rt_stop();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* os_thread */

/* _i: os_mask 1 (odd senders OS), 2 (odd receivers OS), 3 (both). */
START_TEST(test_mpmc_mixed)
{
	int mask = _i + 1;

	wt_init_workers(2);
	run_mpmc(6, 4, 0, 1500, mask);
	run_mpmc(6, 4, 3, 1500, mask);
	rt_stop();
}
END_TEST

START_TEST(test_order_os_weft)
{
	struct order_arg a = { mkchan(sizeof(int), 0), 5000 };
	struct runner p, q;

	wt_init_workers(2);
	/* OS producer, weft consumer; then the reverse, on a buffered channel */
	run_start(&q, 0, order_consumer, &a);
	run_start(&p, 1, order_producer, &a);
	run_join(&p);
	run_join(&q);
	destroy_ok(a.ch);
	a.ch = mkchan(sizeof(int), 2);
	run_start(&q, 1, order_consumer, &a);
	run_start(&p, 0, order_producer, &a);
	run_join(&p);
	run_join(&q);
	destroy_ok(a.ch);
	rt_stop();
}
END_TEST

START_TEST(test_forwarder_os)
{
	wt_init_workers(2);
	run_forwarder(0, 1);
	run_forwarder(2, 1);
	rt_stop();
}
END_TEST

/* Channels between plain pthreads with no runtime at all. */
START_TEST(test_no_runtime)
{
	struct order_arg a = { mkchan(sizeof(int), 0), 3000 };
	struct pp_arg pp = { { mkchan(sizeof(int), 0), mkchan(sizeof(int), 1) }, 3000 };
	struct runner p, q;
	int v;

	atomic_store(&wt_failure, NULL);
	run_start(&q, 1, order_consumer, &a);
	run_start(&p, 1, order_producer, &a);
	run_join(&p);
	run_join(&q);
	run_start(&q, 1, pp_b, &pp);
	run_start(&p, 1, pp_a, &pp);
	run_join(&p);
	run_join(&q);
	wt_assert_no_failure();
	ck_assert_int_eq(weft_chan_timedrecv(a.ch, &v, weft_now_ns() + 2 * MS), ETIMEDOUT);
	destroy_ok(a.ch);
	destroy_ok(pp.ch[0]);
	destroy_ok(pp.ch[1]);
}
END_TEST

/* ---------------------------------------------------------------------- */

static Suite *chan_suite(void)
{
	Suite *s = suite_create("chan");
	TCase *tc;

	tc = wt_tcase(s, "basic", 30);
	tcase_add_test(tc, test_ring_single_thread);
	tcase_add_test(tc, test_rendezvous_try);
	tcase_add_test(tc, test_big_elements);
	tcase_add_test(tc, test_close_drain);
	tcase_add_loop_test(tc, test_order_two_threads, 0, wt_nconfigs);
	tcase_add_loop_test(tc, test_ping_pong, 0, 2);
	tcase_add_test(tc, test_ping_pong_sync_wake);
	tcase_add_test(tc, test_select_ready);
	tcase_add_test(tc, test_select_closed);
	tcase_add_loop_test(tc, test_select_blocking, 0, wt_nconfigs);
	tcase_add_test(tc, test_select_same_channel);
	tcase_add_test(tc, test_select_many_cases);

	tc = wt_tcase(s, "errors", 10);
	tcase_add_test(tc, test_bad_create);
	tcase_add_test(tc, test_bad_args);
	tcase_add_test(tc, test_bad_select);
	tcase_add_test(tc, test_destroy_busy);
	tcase_add_test(tc, test_destroy_after_select_claimed);
	tcase_add_test(tc, test_alloc_failure);

	tc = wt_tcase(s, "timeout", 30);
	tcase_add_loop_test(tc, test_timed_forms, 0, 2);
	tcase_add_test(tc, test_timed_success);
	tcase_add_loop_test(tc, test_timeout_race, 0, 8);

	tc = wt_tcase(s, "contended", 60);
	tcase_add_loop_test(tc, test_mpmc, 0, wt_nconfigs);
	tcase_add_loop_test(tc, test_select_forwarder, 0, wt_nconfigs);
	tcase_add_loop_test(tc, test_select_duel, 0, 3);
	tcase_add_loop_test(tc, test_close_wakes_all, 0, wt_nconfigs);

	tc = wt_tcase(s, "os_thread", 30);
	tcase_add_loop_test(tc, test_mpmc_mixed, 0, 3);
	tcase_add_test(tc, test_order_os_weft);
	tcase_add_test(tc, test_forwarder_os);
	tcase_add_test(tc, test_no_runtime);
	return s;
}

int main(void)
{
	return wt_run_suite(chan_suite());
}
