/*
 * runtime/context_ucontext.h - portable context switch on swapcontext(3),
 * chosen by configure where there is no asm switch (or with
 * --with-context=ucontext). See runtime/context.h for the contract; new
 * contexts are made in runtime/context_ucontext.c.
 *
 * Cost: glibc's swapcontext saves and restores the signal mask with an
 * rt_sigprocmask system call on every switch, so a switch costs a syscall
 * (hundreds of ns instead of ~5 ns). This is the fallback for correctness on
 * new architectures, not for speed.
 *
 * Semantics that differ from the asm switches:
 *   - the signal mask is per context (swapcontext restores the target's),
 *     not per OS thread; weft does not change masks on light threads, so
 *     every context carries the mask of the thread that made it;
 *   - the whole FP environment (glibc: x87 env + MXCSR on x86-64, FPCR and
 *     FPSR on aarch64) is per context, a superset of the ABI's
 *     callee-saved control state that the asm switches carry.
 *
 * Returning the previous context: swapcontext returns nothing, so the jumper
 * writes its own context into the target's `prev` field just before the
 * switch, and the resumed side reads its own `prev` right after. Rejected: a
 * thread-local "last from" variable. It works on one OS thread, but a light
 * thread that parks on worker A is resumed by worker B, and the compiler may
 * keep the TLS address computed on A (in a callee-saved register) across the
 * swapcontext call, then read A's variable on B. The field lives in the
 * context itself, so it is the same wherever the context resumes.
 * Only the one party switching to a context writes its prev (a context is
 * switched to by one jumper at a time: the scheduler's invariant), and the
 * write and the read happen on the same OS thread, in program order around
 * swapcontext, so a plain field is enough.
 */
#ifndef WFT_CONTEXT_UCONTEXT_H
#define WFT_CONTEXT_UCONTEXT_H

#include <fenv.h>
#include <ucontext.h>

/* The FP environment a new thread starts with (the creator's). */
typedef fenv_t wft_fpenv_t;

/* The calling thread's FP environment (a spawn captures its creator's). */
static inline wft_fpenv_t wft_fpenv_get(void)
{
	fenv_t e;

	fegetenv(&e);
	return e;
}

struct wft_ctx {
	ucontext_t uc;            /* registers, stack, signal mask, FP env */
	wft_fpenv_t env;          /* new contexts only: set by the trampoline */
	struct wft_ctx *prev;     /* written by whoever switches to us, see above */
	wft_ctx_entry_t entry;    /* new contexts only: run by the trampoline */
	void *arg;                /* new contexts only: entry's argument */
};

/*
 * Switch from the running context (saved into *from) to *to.
 * Returns, when *from is resumed later, the context that switched back to it.
 * swapcontext can only fail if rt_sigprocmask does (a bad pointer): a broken
 * invariant, so it traps.
 * Context: any. May park: no (it is the switch itself).
 */
static inline struct wft_ctx *
wft_ctx_switch(struct wft_ctx *from, struct wft_ctx *to)
{
	to->prev = from;
	if (swapcontext(&from->uc, &to->uc) != 0)
		__builtin_trap();
	/* swapcontext is an opaque call: this load is not hoisted above it. */
	return from->prev;
}

#endif
