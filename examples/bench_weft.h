/*
 * examples/bench_weft.h - helpers shared by the weft benchmarks that run
 * inside the runtime (weft-micro, sync-micro): results passed back as a
 * thread's return value, running a function in a weft thread, --bench list
 * matching, the "busy worker" threads that keep a worker (or a CPU, for
 * the pthread baselines) occupied, a task started as a weft thread or a
 * pthread (cond-bench, rwlock-bench); starting the runtime or exiting
 * (also used by the servers' examples/conn_server.h).
 */
#ifndef WEFT_EXAMPLES_BENCH_WEFT_H
#define WEFT_EXAMPLES_BENCH_WEFT_H

#include "examples/bench.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft.h>

/* Start the runtime with workers workers (0: one per CPU), or print why
 * not and exit(1). */
static inline void bench_weft_start(int workers)
{
	weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
	int rc;

	cfg.workers = workers;
	rc = weft_init(&cfg);
	if (rc) {
		fprintf(stderr, "weft_init: %s\n", strerror(rc));
		exit(1);
	}
}

/* A double through a thread's void * result (and back). */
static inline void *bench_dret(double v)
{
	void *r;

	memcpy(&r, &v, sizeof(v));
	return r;
}

static inline double bench_vret(void *r)
{
	double v;

	memcpy(&v, &r, sizeof(v));
	return v;
}

/* Run fn(arg) in a weft thread pinned to worker 0 and return its double
 * result (benchmarks measure inside the runtime, as an application would).
 * Exits the program if the runtime cannot spawn. Context: OS thread. */
static inline double bench_in_weft(void *(*fn)(void *), void *arg)
{
	weft_attr_t a;
	weft_thread_t t;
	void *r = NULL;

	weft_attr_init(&a);
	a.worker = 0;
	if (weft_spawn(&t, fn, arg, &a) || weft_join(t, &r)) {
		fprintf(stderr, "bench: weft spawn/join failed\n");
		exit(1);
	}
	return bench_vret(r);
}

/* Is name in the comma-separated list (NULL = everything)? */
static inline bool bench_want(const char *list, const char *name)
{
	size_t n = strlen(name);

	if (!list)
		return true;
	for (const char *p = list; (p = strstr(p, name)); p += n)
		if ((p == list || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
			return true;
	return false;
}

/* Keep a weft worker busy until *stop (an _Atomic int) is set: a thread
 * that yields in a loop. */
static inline void *bench_weft_busy(void *stop)
{
	while (!atomic_load_explicit((_Atomic int *)stop, memory_order_relaxed))
		weft_yield();
	return NULL;
}

/* The same for a CPU (the pthread baselines pin it). */
static inline void *bench_pthread_busy(void *stop)
{
	while (!atomic_load_explicit((_Atomic int *)stop, memory_order_relaxed))
		sched_yield();
	return NULL;
}

/* Spawn fn(arg) as a weft thread pinned to worker (modulo the worker
 * count). Returns weft_spawn's result. */
static inline int bench_spawn_on(weft_thread_t *t, void *(*fn)(void *), void *arg, int worker)
{
	weft_attr_t a;

	weft_attr_init(&a);
	a.worker = worker % weft_workers();
	return weft_spawn(t, fn, arg, &a);
}

/* Start one benchmark task: fn(arg) as a weft thread with a 64 KiB stack
 * (weft) or as a pthread; exits with a message if it cannot be started.
 * bench_task_join waits for the one that bench_task_start made. */
static inline void bench_task_start(bool weft, weft_thread_t *wt, pthread_t *pt,
				    void *(*fn)(void *), void *arg)
{
	int rc;

	if (weft) {
		weft_attr_t a;

		weft_attr_init(&a);
		a.stack_size = 64 * 1024;
		rc = weft_spawn(wt, fn, arg, &a);
	} else {
		rc = pthread_create(pt, NULL, fn, arg);
	}
	if (rc) {
		fprintf(stderr, "spawn: %s\n", strerror(rc));
		exit(1);
	}
}

static inline void bench_task_join(bool weft, weft_thread_t wt, pthread_t pt)
{
	if (weft)
		weft_join(wt, NULL);
	else
		pthread_join(pt, NULL);
}

/* "Both workers busy": a busy thread on each of workers 0 and 1 (weft)
 * or pinned to each of the first two CPUs (pthread baselines), until
 * bench_busy_stop(). */
struct bench_busy {
	_Atomic int stop;
	bool weft;
	weft_thread_t w[2];
	pthread_t p[2];
};

static inline void bench_busy_start(struct bench_busy *b, bool weft)
{
	atomic_store(&b->stop, 0);
	b->weft = weft;
	for (int i = 0; i < 2; i++) {
		if (weft) {
			bench_spawn_on(&b->w[i], bench_weft_busy, &b->stop, i);
		} else {
			pthread_create(&b->p[i], NULL, bench_pthread_busy, &b->stop);
			bench_pin_thread(b->p[i], bench_cpu_nth(i));
		}
	}
}

static inline void bench_busy_stop(struct bench_busy *b)
{
	atomic_store(&b->stop, 1);
	for (int i = 0; i < 2; i++) {
		if (b->weft)
			weft_join(b->w[i], NULL);
		else
			pthread_join(b->p[i], NULL);
	}
}

/* One side (me = 0 or 1) of a token ping-pong through two semaphores
 * sems[0] and sems[1]: side 0 posts 1 and waits on 0, side 1 the reverse,
 * rounds times. POST and WAIT take a pointer to one semaphore (weft_sem_t
 * or sem_t). */
#define BENCH_SEM_PINGPONG(me, rounds, POST, WAIT, sems)        \
	for (int bsp_i_ = 0; bsp_i_ < (rounds); bsp_i_++) {     \
		if ((me) == 0) {                                \
			POST(&(sems)[1]);                       \
			WAIT(&(sems)[0]);                       \
		} else {                                        \
			WAIT(&(sems)[1]);                       \
			POST(&(sems)[0]);                       \
		}                                               \
	}

#endif
