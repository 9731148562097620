/*
 * weft.h - umbrella header of the weft M:N threading runtime.
 *
 * weft runs many light threads on a few worker OS threads (one per CPU by
 * default). Include this header and link with `pkg-config --libs weft`.
 *
 * What each primitive blocks (Go HACKING style):
 *
 *   call                          | from a weft thread          | from an OS thread
 *   ------------------------------+-----------------------------+-------------------------
 *   weft_join, weft_park*         | the weft thread (parks);    | the OS thread (futex)
 *                                 | its worker runs others      | (weft_park: EPERM)
 *   weft_sleep_*                  | the weft thread (timer)     | the OS thread (nanosleep)
 *   weft_yield                    | nothing (requeues itself)   | sched_yield()
 *   weft_spawn, weft_unpark       | never blocks                | never blocks
 *   a plain blocking syscall      | the whole worker (use       | the OS thread
 *                                 | weft/io.h instead)          |
 *
 * Configuration: weft_init() with a weft_config_t, or the environment:
 *   WEFT_WORKERS=N     worker count (default: CPUs in the process affinity mask)
 *   WEFT_PIN=0|1       pin worker i to the i-th CPU of the affinity mask
 *   WEFT_STACK_SIZE=N  default stack size in bytes (suffix k, m or g allowed),
 *                      WEFT_STACK_MIN..WEFT_STACK_MAX
 *   WEFT_FEATURES=...  comma-separated feature switches, NO_ prefix disables
 *                      (MAILBOX, STEAL, NEXT_SLOT, ...; see runtime/features.def)
 *   WEFT_STATS=1       print the scheduler counters at exit
 *   WEFT_SEED=N        fix the workers' random choices (steal order, the
 *                      RANDOMIZE switch); decimal or 0x hex. RANDOMIZE
 *                      without it draws a seed and prints it to stderr.
 *                      Not a number: EINVAL
 *   WEFT_OFFLOAD_THREADS=N  most offload helper threads (weft/io.h), 1..1024
 *   WEFT_DUMP_SIGNAL=SIGQUIT  that signal writes weft_dump() to stderr
 * Every numeric variable is parsed strictly: decimal digits only (and the
 * size suffix), in range, no overflow; anything else (WEFT_WORKERS=2abc,
 * WEFT_PIN=yes, WEFT_STACK_SIZE=17592186044417m) makes weft_init return
 * EINVAL with a message on stderr naming the variable.
 * Environment variables override weft_config_t fields. For the feature
 * switches the override is per switch: WEFT_FEATURES applies on top of
 * weft_config_t.features, so a switch it does not name keeps the config's
 * setting.
 *
 * Signals: the workers run with the asynchronous signals blocked (all but
 * SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT, SIGPIPE,
 * SIGXFSZ, SIGXCPU, SIGPROF, SIGVTALRM), so a handler of a signal sent to
 * the process runs on one of the program's own OS threads. If all of them
 * block it, it stays pending. A light thread that changes its signal mask
 * changes its worker's: don't. Async-signal-safe (callable from a
 * handler): weft_sem_post, weft_sem_post_n, weft_unpark, weft_self,
 * weft_worker_id, weft_now_ns. Every other weft call is NOT
 * async-signal-safe (the blocking calls, spawn and join, the mutex,
 * cond, rwlock, barrier, channel and I/O calls, weft_dump, init and
 * shutdown). With the NO_MAILBOX switch even weft_sem_post and
 * weft_unpark are not (the baseline's wake takes a spin lock).
 *
 * fork(): the child of a process whose runtime is running has no workers.
 * There weft_init, weft_shutdown, weft_spawn and weft_join return ENOTSUP;
 * the child may use only async-signal-safe calls and should exec or _exit
 * (as POSIX says of any multithreaded program). A fork while no runtime
 * runs gives a child that may start its own.
 *
 * A stack overflow into a light thread's guard page prints "weft: stack
 * overflow in weft thread NAME (id 0x..., stack size N, ...)" and aborts.
 * A thread spawned with guard = 0 has no guard page: its overflow runs into
 * whatever is mapped below (another thread's stack) undetected.
 */
#ifndef WEFT_H
#define WEFT_H

#include <weft/common.h>
#include <weft/version.h>
#include <weft/thread.h>
#include <weft/stats.h>
#include <weft/sync.h>
#include <weft/chan.h>
#include <weft/io.h>
#include <weft/gang.h>

WEFT_EXTERN_C_BEGIN

/* Smallest stack a thread may ask for. */
#define WEFT_STACK_MIN (16 * 1024)
/* Largest stack a thread may ask for (attr, config, WEFT_STACK_SIZE): 1 TiB.
 * Larger sizes are EINVAL (a size near SIZE_MAX would wrap when rounded up
 * to pages, and nothing that large can be mapped). */
#define WEFT_STACK_MAX ((size_t)1 << 40)
/* Default stack size (WEFT_STACK_SIZE overrides). */
#define WEFT_STACK_DEFAULT (256 * 1024)
/* Most workers a runtime can have. */
#define WEFT_WORKERS_MAX 256

typedef struct weft_config {
	int workers;          /* 0 = CPUs in the affinity mask */
	size_t stack_size;    /* 0 = WEFT_STACK_DEFAULT; else WEFT_STACK_MIN..WEFT_STACK_MAX */
	int pin;              /* 1 = pin each worker to one CPU; 0 = don't (default) */
	const char *features; /* like WEFT_FEATURES; NULL = defaults */
	void *reserved[8];    /* must be zero */
} weft_config_t;

#define WEFT_CONFIG_INITIALIZER { 0, 0, 0, NULL, { 0 } }

/* Start the runtime: create the workers. cfg may be NULL for defaults.
 * Returns 0, EBUSY (already running), EINVAL (bad config: workers out of
 * range, stack_size outside WEFT_STACK_MIN..WEFT_STACK_MAX, a non-zero
 * reserved field; or a bad environment variable or unknown WEFT_FEATURES
 * name, with a message on stderr), EAGAIN (no memory or threads).
 * Context: OS thread. */
WEFT_API int weft_init(const weft_config_t *cfg);

/* Wait until every light thread has finished, stop the workers and release
 * everything, so that weft_init() can start a fresh runtime. Detached threads
 * still running are waited for. Returns 0, EPERM (called from a weft thread),
 * or EINVAL (not running). Context: OS thread. */
WEFT_API int weft_shutdown(void);

/* Like weft_shutdown(), but gives up at the absolute CLOCK_MONOTONIC time
 * deadline: then it prints the light threads still alive (name, state,
 * what each waits on) to stderr and returns ETIMEDOUT, the runtime still
 * running (call it again, or weft_shutdown, later). weft_shutdown itself
 * prints the same report once if it has waited 2 s, and keeps waiting.
 * Returns 0, EPERM (called from a weft thread), EINVAL (not running),
 * ETIMEDOUT, ENOTSUP (in the child of a fork, see weft(7)).
 * Context: OS thread. */
WEFT_API int weft_shutdown_timed(weft_time_t deadline);

/* Write a dump of the runtime to fd: every light thread (handle, name,
 * state, what it waits on and for how long, its worker) and every worker
 * (idle state, running thread, next slot, runqueue length, mailbox,
 * timers). A racy snapshot taken without the runtime's locks, so it works
 * on a hung program. WEFT_DUMP_SIGNAL=SIGQUIT (a name or number) makes
 * that signal write the dump to stderr (Go's SIGQUIT dump, without the
 * exit). Returns 0 or EINVAL (fd < 0). Context: any (not a signal
 * handler: use WEFT_DUMP_SIGNAL). */
WEFT_API int weft_dump(int fd);

/* Number of workers of the running runtime, or 0 if it is not running.
 * Context: any. */
WEFT_API int weft_workers(void);

/* 1 if the named feature switch (e.g. "MAILBOX") is on, 0 if off, -1 if the
 * name is unknown. Context: any. */
WEFT_API int weft_feature(const char *name);

WEFT_EXTERN_C_END

#endif
