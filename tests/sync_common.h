/*
 * tests/sync_common.h - small helpers shared by the sync primitive suites
 * (check_mutex, check_cond, check_sem, check_rwlock, check_barrier,
 * stress_sync): run a mix of weft threads and OS threads on one function,
 * time helpers, counters. Everything is static: each suite is one binary.
 */
#ifndef WEFT_TESTS_SYNC_COMMON_H
#define WEFT_TESTS_SYNC_COMMON_H

#include "tests/harness.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft.h>
#include <weft/sync.h>

/* Stack for test threads of either kind: the bodies are small. */
#define SC_STACK (64 * 1024)

typedef void (*sc_fn)(int idx, void *arg);

struct sc_job {
	sc_fn fn;
	void *arg;
	int idx;
};

static inline void *sc_tramp(void *p)
{
	struct sc_job *j = p;

	j->fn(j->idx, j->arg);
	return NULL;
}

/* A group of running threads: weft ones first (idx 0..nweft-1), then OS. */
struct sc_group {
	int nweft, nos;
	struct sc_job *jobs;
	weft_thread_t *wt;
	pthread_t *pt;
};

/* Start nweft weft threads and nos OS threads running fn(idx, arg).
 * Context: the test body (an OS thread), runtime started. */
static inline void sc_start(struct sc_group *g, int nweft, int nos, sc_fn fn, void *arg)
{
	weft_attr_t a;
	pthread_attr_t pa;
	int n = nweft + nos;

	g->nweft = nweft;
	g->nos = nos;
	g->jobs = calloc(n ? n : 1, sizeof(*g->jobs));
	g->wt = calloc(nweft ? nweft : 1, sizeof(*g->wt));
	g->pt = calloc(nos ? nos : 1, sizeof(*g->pt));
	ck_assert(g->jobs && g->wt && g->pt);
	weft_attr_init(&a);
	a.stack_size = SC_STACK;
	pthread_attr_init(&pa);
	pthread_attr_setstacksize(&pa, SC_STACK);
	for (int i = 0; i < n; i++) {
		g->jobs[i].fn = fn;
		g->jobs[i].arg = arg;
		g->jobs[i].idx = i;
		if (i < nweft)
			ck_assert_int_eq(weft_spawn(&g->wt[i], sc_tramp, &g->jobs[i], &a), 0);
		else
			ck_assert_int_eq(pthread_create(&g->pt[i - nweft], &pa, sc_tramp,
							&g->jobs[i]), 0);
	}
	pthread_attr_destroy(&pa);
}

static inline void sc_join(struct sc_group *g)
{
	for (int i = 0; i < g->nweft; i++)
		ck_assert_int_eq(weft_join(g->wt[i], NULL), 0);
	for (int i = 0; i < g->nos; i++)
		ck_assert_int_eq(pthread_join(g->pt[i], NULL), 0);
	free(g->jobs);
	free(g->wt);
	free(g->pt);
}

/* Run and join. */
static inline void sc_run(int nweft, int nos, sc_fn fn, void *arg)
{
	struct sc_group g;

	sc_start(&g, nweft, nos, fn, arg);
	sc_join(&g);
}

static inline weft_time_t sc_ms(uint64_t ms)
{
	return weft_now_ns() + ms * 1000000ull;
}

static inline void sc_sleep_ms(uint64_t ms)
{
	weft_sleep_ns(ms * 1000000ull);
}

/* Busy-wait (no park), for holding a lock while running. */
static inline void sc_spin_ns(uint64_t ns)
{
	weft_time_t end = weft_now_ns() + ns;

	while (weft_now_ns() < end)
		;
}

/* Wait (sleeping) until *v >= want or ms elapse; returns the last value. */
static inline long sc_wait_atleast(_Atomic long *v, long want, uint64_t ms)
{
	weft_time_t end = sc_ms(ms);
	long x;

	while ((x = atomic_load(v)) < want && weft_now_ns() < end)
		sc_sleep_ms(1);
	return x;
}

/* Poll until fn(arg) returns want, sleeping 1 ms between tries, for up to
 * 10 s (tests must not depend on how fast threads start on a loaded box).
 * Returns the last value. */
static inline int sc_until(int (*fn)(void *), void *arg, int want)
{
	int r = fn(arg);

	for (int i = 0; i < 10000 && r != want; i++) {
		sc_sleep_ms(1);
		r = fn(arg);
	}
	return r;
}

/* Run first(arg), then second(arg), on one weft worker in that order:
 * both are spawned by a weft thread (children of a weft thread run newest
 * first, so second is spawned first). Spawned from the OS thread instead,
 * a host that delayed the second spawn let the first run alone to its end
 * (the destroy-after-grant tests saw their pair miss each other under
 * load). Call with the runtime on one worker; returns when both joined. */
struct sc_pair {
	void *(*first)(void *);
	void *(*second)(void *);
	void *arg;
};

static inline void *sc_pair_driver(void *p)
{
	struct sc_pair *pr = p;
	weft_thread_t a, b;

	WT_CHECK(weft_spawn(&b, pr->second, pr->arg, NULL) == 0);
	WT_CHECK(weft_spawn(&a, pr->first, pr->arg, NULL) == 0);
	WT_CHECK(weft_join(a, NULL) == 0);
	WT_CHECK(weft_join(b, NULL) == 0);
	return NULL;
}

static inline weft_stats_t sc_stats(void)
{
	weft_stats_t s;

	ck_assert_int_eq(weft_stats_get(&s), 0);
	return s;
}

#endif
