/*
 * runtime/dump.c - the thread dump (weft_dump, WEFT_DUMP_SIGNAL), the
 * shutdown report, and fork handling.
 *
 * The dump. Every light thread lives in a TCB of the slabs, which are
 * kept for the life of the process (runtime/thread.c I1), so the dump
 * walks the slabs (wft_tcb_foreach) and prints each TCB that is not FREE:
 * its handle, name, run state, what it blocks on (t->wait_what and
 * wait_obj, noted by the blocking call: "sem", "join", "sleep", "park",
 * "sync" with the primitive's code address, "io"), the worker it last ran
 * on, and for how long it has been blocked (a coarse clock, a few ms
 * resolution). Then each worker: its idle state, current thread, next
 * slot, runqueue length, mailbox, armed timers. Every read is a racy
 * snapshot of state that other threads are changing: the dump never
 * takes a runtime lock (it must work on a hung runtime), so a line may be
 * stale or mix two moments; it never dereferences anything but TCBs
 * (type-stable) and the workers array (alive while state is RUNNING).
 * Not instrumented by TSan for that reason (WFT_NO_TSAN).
 *
 * WEFT_DUMP_SIGNAL=SIGQUIT (or QUIT, or a number): weft_init installs a
 * handler for that signal that only posts a POSIX semaphore
 * (async-signal-safe); a helper OS thread started by weft_init waits on
 * it and runs weft_dump(2). So the dump's formatting and its slab lock
 * never run inside a handler, and the dump works whatever the interrupted
 * thread held. weft_shutdown stops the helper and restores the previous
 * handler.
 *
 * The shutdown report. weft_shutdown waits for every light thread; if
 * some are still alive after WFT_SHUTDOWN_GRACE_NS it prints, once, the
 * live threads (the dump's thread lines) to stderr and keeps waiting.
 * weft_shutdown_timed(deadline) prints the same report at its deadline
 * and returns ETIMEDOUT with the runtime still running.
 *
 * fork. A fork copies only the calling OS thread: the child of a process
 * whose runtime runs has no workers, and its queues, mailboxes and locks
 * are in whatever state the other threads left them. Rather than a child
 * whose spawn succeeds and whose join hangs, the child's atfork handler
 * marks the runtime unusable: weft_init, weft_shutdown, weft_spawn and
 * weft_join return ENOTSUP there. The rule (weft(7)): after fork, the
 * child of a running weft program may only call async-signal-safe
 * functions, then exec or _exit, as POSIX says of any multithreaded
 * program. A child forked while no runtime runs (before weft_init or
 * after weft_shutdown) is unaffected and may start its own.
 */
#include "runtime/diag.h"
#include "runtime/sanitizer.h"

#include <dlfcn.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---------------------------------------------------------------------- */
/* fork */

_Atomic int wft_forked_child;

static void atfork_child(void)
{
	/* relaxed: the child has one thread; the parent's state is whatever
	 * it was at the fork (0 = no runtime: the child may start one) */
	if (atomic_load_explicit(&wft_rt.state, memory_order_relaxed) != WFT_RT_STOPPED)
		atomic_store_explicit(&wft_forked_child, 1, memory_order_relaxed);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_register(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

void wft_fork_install(void)
{
	pthread_once(&fork_once, fork_register);
}

/* ---------------------------------------------------------------------- */
/* The dump */

struct out {
	int fd;
	char b[512];
};

__attribute__((format(printf, 2, 3)))
static void outf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->b, sizeof(o->b), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(o->b))
		n = sizeof(o->b) - 1;
	for (size_t off = 0; off < (size_t)n;) {
		ssize_t w = write(o->fd, o->b + off, (size_t)n - off);

		if (w <= 0)
			return;
		off += (size_t)w;
	}
}

static const char *state_name(int s)
{
	switch (s) {
	case WFT_T_NEW: return "new";
	case WFT_T_RUNNABLE: return "runnable";
	case WFT_T_RUNNING: return "running";
	case WFT_T_PARKED: return "parked";
	case WFT_T_DONE: return "exited";
	case WFT_T_PARKED_JOIN: return "parked";
	default: return "?";
	}
}

struct dump_ctx {
	struct out *o;
	bool only_live;
	weft_time_t now;
	unsigned n;
};

static WFT_NO_TSAN void dump_one(struct weft_thread *t, void *arg)
{
	struct dump_ctx *c = arg;
	uintptr_t js = __atomic_load_n((uintptr_t *)&t->jstate, __ATOMIC_RELAXED);
	int st = __atomic_load_n((int *)&t->state, __ATOMIC_RELAXED);
	struct wft_worker *w = __atomic_load_n((struct wft_worker **)&t->worker, __ATOMIC_RELAXED);
	const char *what = __atomic_load_n(&t->wait_what, __ATOMIC_RELAXED);
	const void *obj = __atomic_load_n(&t->wait_obj, __ATOMIC_RELAXED);
	weft_time_t since = __atomic_load_n(&t->wait_since, __ATOMIC_RELAXED);
	char name[sizeof(t->name)];
	char where[160] = "";

	if (!WFT_JS_IS_JOINER(js) && WFT_JS_CODE(js) == WFT_J_FREE)
		return;
	if (c->only_live && st == WFT_T_DONE)
		return;
	memcpy(name, t->name, sizeof(name));
	name[sizeof(name) - 1] = '\0';
	if ((st == WFT_T_PARKED || st == WFT_T_PARKED_JOIN) && what) {
		Dl_info di;

		if (strcmp(what, "sync") == 0 && obj && dladdr(obj, &di) && di.dli_sname)
			snprintf(where, sizeof(where), " on %s (called from %s+0x%lx)", what,
				 di.dli_sname, (unsigned long)((const char *)obj - (const char *)di.dli_saddr));
		else
			snprintf(where, sizeof(where), " on %s %p", what, obj);
		if (since && c->now > since)
			snprintf(where + strlen(where), sizeof(where) - strlen(where),
				 " for %llu ms", (unsigned long long)((c->now - since) / 1000000));
	} else if (st == WFT_T_PARKED_JOIN) {
		snprintf(where, sizeof(where), " on join");
	}
	c->n++;
	outf(c->o, "  thread %p \"%s\" %s%s%s, worker %d%s\n", (void *)t, name,
	     state_name(st), where,
	     (!WFT_JS_IS_JOINER(js) && WFT_JS_CODE(js) == WFT_J_DETACHED) ? ", detached" :
	     (!WFT_JS_IS_JOINER(js) && WFT_JS_CODE(js) == WFT_J_EXITED) ? ", not joined" : "",
	     w ? w->id : -1, st == WFT_T_NEW || (st == WFT_T_RUNNABLE && !t->started) ?
	     " (not started)" : "");
}

void wft_dump_threads(int fd, bool only_live)
{
	struct out o = { .fd = fd };
	struct dump_ctx c = { .o = &o, .only_live = only_live, .now = wft_coarse_now() };

	wft_tcb_foreach(dump_one, &c);
	if (!c.n)
		outf(&o, "  (no light threads)\n");
}

static WFT_NO_TSAN void dump_worker(struct out *o, struct wft_worker *w)
{
	static const char *const sleep_names[] = { "awake", "sleeping", "kicked" };
	uint32_t sl = atomic_load_explicit(&w->sleep, memory_order_relaxed);
	struct weft_thread *cur = __atomic_load_n(&w->current, __ATOMIC_RELAXED);
	struct weft_thread *nx = wft_next_untag(atomic_load_explicit(&w->next, memory_order_relaxed));
	unsigned ntimers = __atomic_load_n(&w->timers.n, __ATOMIC_RELAXED);

	outf(o, "  worker %d: %s, running %p%s%s%s, next %p, runqueue %u, mailbox %s, timers %u, "
	     "switches %llu\n", w->id, sl < 3 ? sleep_names[sl] : "?", (void *)cur,
	     cur ? " \"" : "", cur ? cur->name : "", cur ? "\"" : "", (void *)nx,
	     wft_runq_size(w), wft_mailbox_empty(&w->mailbox) ? "empty" : "non-empty", ntimers,
	     (unsigned long long)wft_worker_switches(w));
}

int weft_dump(int fd)
{
	struct out o = { .fd = fd };
	int st;

	if (fd < 0)
		return EINVAL;
	/* acquire: pairs with the release store of RUNNING (the workers
	 * array); a dump racing weft_shutdown is the caller's race */
	st = atomic_load_explicit(&wft_rt.state, memory_order_acquire);
	outf(&o, "weft: thread dump (pid %d, runtime %s)\n", (int)getpid(),
	     st == WFT_RT_RUNNING ? "running" : st == WFT_RT_STOPPED ? "stopped" : "starting or stopping");
	outf(&o, "light threads:\n");
	wft_dump_threads(fd, false);
	if (st == WFT_RT_RUNNING) {
		outf(&o, "workers:\n");
		for (int i = 0; i < wft_rt.nworkers; i++)
			dump_worker(&o, wft_rt.workers[i]);
	}
	outf(&o, "weft: end of dump\n");
	return 0;
}

/* ---------------------------------------------------------------------- */
/* WEFT_DUMP_SIGNAL */

static sem_t dump_sem;
static pthread_t dump_thread;
static bool dump_running;           /* init_lock */
static _Atomic int dump_stop;
static int dump_sig;
static struct sigaction dump_old;

static void dump_handler(int sig)
{
	int e = errno;

	(void)sig;
	sem_post(&dump_sem);   /* async-signal-safe */
	errno = e;
}

static void *dump_main(void *arg)
{
	(void)arg;
	for (;;) {
		if (sem_wait(&dump_sem) != 0)
			continue;   /* EINTR */
		/* acquire: pairs with the release store in stop */
		if (atomic_load_explicit(&dump_stop, memory_order_acquire))
			return NULL;
		weft_dump(2);
	}
}

static int parse_signal(const char *s)
{
	static const struct { const char *n; int s; } names[] = {
		{ "QUIT", SIGQUIT }, { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 },
		{ "HUP", SIGHUP }, { "INT", SIGINT }, { "TERM", SIGTERM },
	};
	char *end;
	long v;

	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].n) == 0)
			return names[i].s;
	v = strtol(s, &end, 10);
	if (*s && !*end && v > 0 && v < NSIG && v != SIGKILL && v != SIGSTOP && v != SIGSEGV &&
	    v != SIGBUS)
		return (int)v;
	return -1;
}

/* Context: weft_init, under init_lock, with the asynchronous signals
 * blocked (the helper inherits the mask and never takes the signal). */
void wft_dump_signal_start(void)
{
	const char *e = getenv("WEFT_DUMP_SIGNAL");
	struct sigaction sa;
	int sig;

	if (!e || !*e || dump_running)
		return;
	sig = parse_signal(e);
	if (sig < 0) {
		fprintf(stderr, "weft: WEFT_DUMP_SIGNAL=%s is not a signal name or number; no dump "
			"signal\n", e);
		return;
	}
	if (sem_init(&dump_sem, 0, 0) != 0)
		return;
	atomic_store_explicit(&dump_stop, 0, memory_order_relaxed);
	if (pthread_create(&dump_thread, NULL, dump_main, NULL) != 0) {
		sem_destroy(&dump_sem);
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = dump_handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, &dump_old);
	dump_sig = sig;
	dump_running = true;
}

/* Context: weft_shutdown, under init_lock. */
void wft_dump_signal_stop(void)
{
	if (!dump_running)
		return;
	sigaction(dump_sig, &dump_old, NULL);
	/* release: the helper exits on its next wake */
	atomic_store_explicit(&dump_stop, 1, memory_order_release);
	sem_post(&dump_sem);
	pthread_join(dump_thread, NULL);
	sem_destroy(&dump_sem);
	dump_running = false;
}
