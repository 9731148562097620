/*
 * examples/bench_weft.h - helpers shared by the weft benchmarks that run
 * inside the runtime (weft-micro, sync-micro): results passed back as a
 * thread's return value, running a function in a weft thread, --bench list
 * matching, and the "busy worker" threads that keep a worker (or a CPU, for
 * the pthread baselines) occupied.
 */
#ifndef WEFT_EXAMPLES_BENCH_WEFT_H
#define WEFT_EXAMPLES_BENCH_WEFT_H

#include "examples/bench.h"

#include <sched.h>
#include <stdatomic.h>
#include <weft.h>

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

#endif
