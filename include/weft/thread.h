/*
 * weft/thread.h - light threads: spawn, join, detach, exit, yield, park/unpark,
 * sleeping, thread attributes and thread-specific keys.
 *
 * Contexts (who may call a function):
 *   "weft thread"  - code running in a light thread spawned with weft_spawn();
 *   "OS thread"    - any plain pthread, including main(), that is not a weft thread;
 *   "any"          - both.
 * Every call returns 0 or a positive errno value (pthread style) unless stated.
 */
#ifndef WEFT_THREAD_H
#define WEFT_THREAD_H

#include <weft/common.h>

WEFT_EXTERN_C_BEGIN

/* A light thread handle. Valid from weft_spawn() until it is joined (or, for a
 * detached thread, until it exits). */
typedef struct weft_thread *weft_thread_t;

/* Entry point of a light thread. Its return value is what weft_join() reports. */
typedef void *(*weft_fn_t)(void *arg);

/* Thread attributes. Initialise with weft_attr_init() (or WEFT_ATTR_INITIALIZER)
 * and set fields directly; the struct layout is part of the ABI. */
typedef struct weft_attr {
	size_t stack_size;   /* bytes; 0 = the runtime default (config / WEFT_STACK_SIZE);
			      * else WEFT_STACK_MIN..WEFT_STACK_MAX (weft.h) */
	int guard;           /* 1 = a PROT_NONE guard page below the stack (default), 0 = none */
	int worker;          /* pin to this worker index; -1 = not pinned (default) */
	int detached;        /* 1 = start detached (cannot be joined) */
	const char *name;    /* optional, copied (at most 15 characters kept) */
	void *reserved[4];   /* [0]: the gang to join, set by weft_attr_setgang()
			      * (weft/gang.h); [1..3] must be zero */
} weft_attr_t;

#define WEFT_ATTR_INITIALIZER { 0, 1, -1, 0, NULL, { NULL, NULL, NULL, NULL } }

/* Fill *attr with the defaults. Returns 0, or EINVAL if attr is NULL. Context: any. */
WEFT_API int weft_attr_init(weft_attr_t *attr);

/* Create a light thread running fn(arg). attr may be NULL for defaults. If the
 * runtime is not running it is started with the default configuration.
 * The stack is allocated lazily, when the thread first runs, as a slot of a
 * shared mapping whose guard page is a guard marker (Linux 6.13; older
 * kernels give each guarded stack a mapping of its own: two of
 * vm.max_map_count each). If no stack can be had (RLIMIT_AS, no memory),
 * the thread waits on its worker's queue and is retried until one can,
 * without slowing the threads that have theirs, and until then further
 * spawns that need a new stack fail with EAGAIN. With guard = 0 a stack
 * overflow silently overwrites the stack below (another thread's); a
 * debug build (--enable-debug) keeps a canary at the stack's bottom and
 * aborts, naming the thread, when the stack leaves a thread that
 * overwrote it.
 * With a gang set in attr (weft_attr_setgang) the thread becomes the gang's
 * next member, as from weft_gang_spawn (its codes and rules apply).
 * Returns 0 (and *t, which may be NULL for a detached thread), EINVAL (fn NULL;
 * t NULL for a joinable thread, whose handle would be lost; a bad attribute:
 * an out-of-range worker, a stack size outside WEFT_STACK_MIN..WEFT_STACK_MAX,
 * guard not 0 or 1, a non-zero reserved field), EAGAIN (no memory for the
 * thread, or stacks cannot be mapped at the moment), or the error of the
 * implicit weft_init().
 * Context: any. */
WEFT_API int weft_spawn(weft_thread_t *t, weft_fn_t fn, void *arg, const weft_attr_t *attr);

/* Wait for t to finish and release it; *ret (if not NULL) receives its return
 * value or the value given to weft_exit(). A weft thread parks (its worker runs
 * other threads); an OS thread sleeps on a futex.
 * Returns 0, EINVAL (t NULL, detached, or already being joined), EDEADLK (t is
 * the caller). Context: any. */
WEFT_API int weft_join(weft_thread_t t, void **ret);

/* Mark t detached: its resources are released when it exits. Returns 0 or
 * EINVAL (t NULL, already detached, or already being joined). Context: any. */
WEFT_API int weft_detach(weft_thread_t t);

/* Finish the calling light thread with return value ret; thread-specific data
 * destructors run first. Does not return. Calling it from an OS thread is a
 * programming error: it returns EPERM instead of exiting. Context: weft thread. */
WEFT_API int weft_exit(void *ret);

/* Let every other runnable thread of this worker run before the caller runs
 * again. Returns 0; from an OS thread it calls sched_yield(). Context: any. */
WEFT_API int weft_yield(void);

/* The calling light thread, or NULL when called from an OS thread. Context: any. */
WEFT_API weft_thread_t weft_self(void);

/* Index of the worker the caller runs on, or -1 from an OS thread. Context: any. */
WEFT_API int weft_worker_id(void);

/* Name given at spawn (empty string if none); NULL if t is NULL. Context: any. */
WEFT_API const char *weft_thread_name(weft_thread_t t);

/* --- Parking: the primitive that every synchronisation object builds on. ---
 * Each light thread has one unpark token. weft_unpark(t) sets it and, if t is
 * parked, makes t runnable; weft_park() consumes the token, returning at once if
 * it was already set. So an unpark that comes before the park is never lost.
 * Spurious returns are possible: callers re-check their condition in a loop. */

/* Park the caller until unparked. Returns 0, or EPERM from an OS thread.
 * Context: weft thread. */
WEFT_API int weft_park(void);

/* Like weft_park() but gives up at the absolute CLOCK_MONOTONIC time deadline.
 * Returns 0 (unparked), ETIMEDOUT, or EPERM from an OS thread. Context: weft thread. */
WEFT_API int weft_park_until(weft_time_t deadline);

/* Give t its unpark token and wake it if it is parked. Never blocks, never
 * takes a lock of t's worker. Async-signal-safe (weft.h "Signals").
 * Returns 0 or EINVAL (t NULL). Context: any, including a signal handler. */
WEFT_API int weft_unpark(weft_thread_t t);

/* --- Time --- */

/* Current CLOCK_MONOTONIC time in nanoseconds. Context: any. */
WEFT_API weft_time_t weft_now_ns(void);

/* Sleep for ns nanoseconds. A weft thread parks on its worker's timer heap
 * (the worker runs others); an OS thread calls nanosleep. An unpark that
 * arrives during the sleep does not end it and stays pending for the next
 * weft_park(). Returns 0. Context: any. */
WEFT_API int weft_sleep_ns(uint64_t ns);

/* Sleep until the absolute CLOCK_MONOTONIC time deadline (unparks as for
 * weft_sleep_ns). Returns 0. Context: any. */
WEFT_API int weft_sleep_until(weft_time_t deadline);

/* --- Thread-local storage: __thread belongs to the worker ---
 * C's thread-local storage (__thread, thread_local, and the TLS of every
 * library, errno included) belongs to the OS thread, and light threads run
 * on workers, which are OS threads. So a __thread variable is shared by
 * every light thread that runs on the same worker, and a light thread that
 * migrates between two accesses sees another worker's copy. The rule: keep
 * per-light-thread state in weft keys (below), whose values follow the
 * light thread; read errno right after the call that set it (or use
 * weft_errno(), weft/io.h); never keep the address of a __thread variable
 * (or cache &errno) across a weft call that may switch. weft does not
 * switch TLS blocks with the light thread: the block is also glibc's
 * thread descriptor (owner ids of locks, malloc's per-thread cache, the
 * stack protector canary), so the switch path costs nothing for it.
 * docs/stacks.md explains the choice. */

/* --- Thread-specific data --- */

typedef unsigned int weft_key_t;

/* Upper bound on live keys (like PTHREAD_KEYS_MAX). */
#define WEFT_KEYS_MAX 1024

/* Create a key; destructor (may be NULL) runs at thread exit on non-NULL values,
 * up to WEFT_DESTRUCTOR_ITERATIONS rounds. Returns 0, EINVAL (key NULL), EAGAIN
 * (WEFT_KEYS_MAX keys in use). Context: any. */
WEFT_API int weft_key_create(weft_key_t *key, void (*destructor)(void *));
#define WEFT_DESTRUCTOR_ITERATIONS 4

/* Delete a key (destructors are not run). Returns 0 or EINVAL (not a live key).
 * Context: any. */
WEFT_API int weft_key_delete(weft_key_t key);

/* Value of key for the calling light thread, or NULL (also from an OS thread
 * or for an invalid key). Context: weft thread. */
WEFT_API void *weft_getspecific(weft_key_t key);

/* Set the calling thread's value for key. Returns 0, EINVAL (not a live key),
 * EPERM (called from an OS thread), ENOMEM (no memory for the value table).
 * Context: weft thread. */
WEFT_API int weft_setspecific(weft_key_t key, const void *value);

WEFT_EXTERN_C_END

#endif
