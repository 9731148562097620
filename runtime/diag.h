/*
 * runtime/diag.h - private declarations of the reliability and diagnostics
 * pieces: signal masks and the stack-overflow report (runtime/segv.c), the
 * thread dump, the shutdown report and fork handling (runtime/dump.c).
 */
#ifndef WFT_DIAG_H
#define WFT_DIAG_H

#include "runtime/wft.h"

#include <signal.h>

/* The signals a worker runs with blocked: every signal but the
 * synchronous ones (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS), the
 * ones raised at the thread that caused them (SIGABRT, SIGPIPE, SIGXFSZ,
 * SIGXCPU) and the profiling timers (SIGPROF, SIGVTALRM). A handler of a
 * process-directed signal so runs on one of the program's own OS threads,
 * never in the middle of a worker's scheduler (segv.c). Context: any. */
void wft_sig_worker_set(sigset_t *set);

/* Install the SIGSEGV/SIGBUS handler that reports a guard-page hit by
 * thread name (segv.c), once per process; and give the calling worker an
 * alternate signal stack. Context: a worker at its start (alt stack) or
 * weft_init (handler). */
void wft_segv_install(void);
int wft_segv_altstack(void);
void wft_segv_altstack_free(void);

/* Forked child of a process whose runtime was running: weft calls that
 * need the workers return ENOTSUP (dump.c). relaxed loads: written once,
 * in the child's atfork handler, before the child's code runs again. */
extern _Atomic int wft_forked_child;
static inline bool wft_in_forked_child(void)
{
	return wft_unlikely(atomic_load_explicit(&wft_forked_child, memory_order_relaxed) != 0);
}
void wft_fork_install(void);

/* Dump machinery (dump.c). Start/stop the WEFT_DUMP_SIGNAL helper thread;
 * called by weft_init / weft_shutdown under init_lock. */
void wft_dump_signal_start(void);
void wft_dump_signal_stop(void);
/* The live-thread list for the shutdown report: writes to fd. */
void wft_dump_threads(int fd, bool only_live);

#endif
