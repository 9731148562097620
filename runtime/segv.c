/*
 * runtime/segv.c - signals and workers: the workers' signal mask, and the
 * stack-overflow report.
 *
 * Signal mask. Workers are created with every asynchronous signal blocked
 * (weft_init blocks them around the creation; the workers and the threads
 * they create inherit the mask). A process-directed signal (kill, alarm,
 * a terminal's ^C) is then delivered to one of the program's own OS
 * threads, never in the middle of a worker's scheduler or a light thread's
 * run of a runqueue operation, so a handler may call the weft calls that
 * are async-signal-safe (weft_sem_post, weft_sem_post_n, weft_unpark;
 * weft.h lists them). The synchronous signals stay unblocked: a fault in a
 * light thread must still be delivered at once (and is reported below).
 * If every OS thread of the program blocks a signal it stays pending, as
 * with pthreads. A light thread that changes the mask (pthread_sigmask)
 * changes its worker's: a documented rule, not detected.
 *
 * Stack-overflow report. A light thread's stack has a PROT_NONE guard page
 * below it (unless spawned with guard = 0). Running into it raises
 * SIGSEGV on the worker's OS thread, on a stack that is exhausted, so the
 * handler runs on an alternate signal stack that every worker installs at
 * its start (wft_segv_altstack; kept for the life of the process, one per
 * worker index). The handler asks: is the fault address inside the
 * current light thread's guard page, or at most 64 KiB below it (a frame
 * larger than the page jumps over it)? Then it writes
 *     weft: stack overflow in weft thread NAME (id 0x..., stack size N)
 * with write(2) (async-signal-safe formatting, no stdio) and aborts.
 * Any other fault goes to the handler that was installed before weft's (or
 * the default action, re-raised by returning with it restored), so a
 * program's own SIGSEGV handling keeps working. With guard = 0 an overflow
 * runs into whatever is mapped below (another thread's stack): nothing
 * detects it at the fault (documented in weft.h and weft(7)); debug builds
 * check a canary at the bottom of such a stack when the stack leaves its
 * thread (runtime/stack.c "Canary").
 */
#include "runtime/diag.h"
#include "runtime/sanitizer.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void wft_sig_worker_set(sigset_t *set)
{
	static const int keep[] = {
		SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS,
		SIGABRT, SIGPIPE, SIGXFSZ, SIGXCPU, SIGPROF, SIGVTALRM,
	};

	sigfillset(set);   /* glibc leaves out its own internal signals */
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		sigdelset(set, keep[i]);
}

/* ---------------------------------------------------------------------- */
/* Alternate signal stacks, one per worker index, kept for the process. */

#define ALTSTACK_SIZE (64 * 1024)

static void *altstacks[WEFT_WORKERS_MAX];

int wft_segv_altstack(void)
{
	struct wft_worker *w = wft_worker_self();
	stack_t ss;

	if (!w || w->id < 0 || w->id >= WEFT_WORKERS_MAX)
		return EINVAL;
	/* Not under a sanitizer: its runtime keeps an alternate stack of its
	 * own per thread and unmaps whatever alternate stack a thread has when
	 * it exits, ours included (under ASan: a SEGV in DTLS_Destroy at a
	 * worker's exit); the sanitizer reports faults itself. */
	if (WFT_ASAN || WFT_TSAN)
		return 0;
	/* only worker w->id's thread touches its slot, and one runtime's
	 * worker exits before the next runtime's worker of that index starts
	 * (shutdown joins them) */
	if (!altstacks[w->id]) {
		void *p = mmap(NULL, ALTSTACK_SIZE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return ENOMEM;
		altstacks[w->id] = p;
	}
	ss.ss_sp = altstacks[w->id];
	ss.ss_size = ALTSTACK_SIZE;
	ss.ss_flags = 0;
	return sigaltstack(&ss, NULL) ? errno : 0;
}

/* ---------------------------------------------------------------------- */
/* The handler. */

static struct sigaction old_segv, old_bus;
static _Atomic int segv_installed;

/* Async-signal-safe formatting into a fixed buffer. */
struct sbuf {
	char b[256];
	size_t n;
};

static void put_s(struct sbuf *s, const char *str)
{
	while (*str && s->n < sizeof(s->b) - 1)
		s->b[s->n++] = *str++;
}

static void put_u(struct sbuf *s, uint64_t v, unsigned base)
{
	char tmp[24];
	int i = 0;

	do {
		tmp[i++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v && i < (int)sizeof(tmp));
	while (i > 0 && s->n < sizeof(s->b) - 1)
		s->b[s->n++] = tmp[--i];
}

static void chain(const struct sigaction *old, int sig, siginfo_t *si, void *uc)
{
	if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
		old->sa_sigaction(sig, si, uc);
		return;
	}
	if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
		old->sa_handler(sig);
		return;
	}
	/* default action: restore it; returning re-executes the faulting
	 * instruction, which faults again and takes it */
	signal(sig, SIG_DFL);
}

static void segv_handler(int sig, siginfo_t *si, void *uc)
{
	struct wft_worker *w = wft_worker_self();   /* initial-exec TLS: safe here */
	struct weft_thread *t = w ? w->current : NULL;

	if (t && t->stack && t->guard && si) {
		uintptr_t a = (uintptr_t)si->si_addr;
		uintptr_t g = (uintptr_t)t->stack;
		size_t ps = wft_page_size();

		if (a < g + ps && a + 64 * 1024 >= g) {
			struct sbuf s = { .n = 0 };

			put_s(&s, "weft: stack overflow in weft thread ");
			put_s(&s, t->name[0] ? t->name : "(unnamed)");
			put_s(&s, " (id 0x");
			put_u(&s, (uintptr_t)t, 16);
			put_s(&s, ", stack size ");
			put_u(&s, t->stack_size, 10);
			put_s(&s, ", worker ");
			put_u(&s, (uint64_t)w->id, 10);
			put_s(&s, ", fault at 0x");
			put_u(&s, a, 16);
			put_s(&s, ")\n");
			if (write(2, s.b, s.n) < 0) {
				/* nothing left to report it with */
			}
			signal(SIGABRT, SIG_DFL);
			abort();
		}
	}
	chain(sig == SIGBUS ? &old_bus : &old_segv, sig, si, uc);
}

void wft_segv_install(void)
{
	struct sigaction sa;

	/* relaxed: weft_init runs under init_lock; once per process */
	if (atomic_exchange_explicit(&segv_installed, 1, memory_order_relaxed))
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = segv_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
}
