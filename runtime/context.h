/*
 * runtime/context.h - the context switch.
 *
 * A context is what a suspended light thread (or a worker's scheduler loop)
 * needs to resume: stack pointer, resume address, frame pointer and, on
 * x86-64, the MXCSR and x87 control word (callee-saved by the SysV ABI).
 *
 * Why an inline switch that ends in an indirect jmp (the design decision):
 * a switch *function* that saves registers, swaps stacks and returns with
 * `ret` costs 14-17 ns on this machine class, because its `ret` almost never
 * matches the return-stack-buffer prediction (the call was made by another
 * thread). The same register swap ending in `jmp *pc` costs ~5.5 ns. So the
 * switch is an always-inline asm block: it stores the current sp and the
 * address of its own local label "1:" into *from, loads the target's sp and
 * jumps to the target's saved label. Every callee-saved register except rbp
 * is declared clobbered, so the compiler saves only the ones that are live at
 * that point (usually none or two), instead of the fixed six of a function.
 * rbp is saved by hand because it may be the frame pointer.
 *
 * Register contract at the resume label (both sides are the same asm):
 *   rdi = the context we came from (the jumper's `from`),
 *   rsi = our own context (the jumper's `to`).
 * So wft_ctx_switch() returns the previous context, which lets the resumed
 * side finish the previous thread's switch (clear on_cpu, free a dead
 * thread's stack): see "Finishing a switch" in runtime/worker.c.
 *
 * A new context starts in wft_ctx_trampoline (context_<arch>.S), whose CFI
 * marks it as the outermost frame so that gdb and perf stop unwinding there.
 * It calls entry(prev, arg), which must never return.
 *
 * Implementations: context_x86_64.h, context_aarch64.h (inline asm), and
 * context_ucontext.h (portable swapcontext fallback, chosen by configure).
 */
#ifndef WFT_CONTEXT_H
#define WFT_CONTEXT_H

#include "config.h"
#include <stddef.h>
#include <stdint.h>

struct wft_ctx;

/* Entry of a new context: prev is the context that switched to it. */
typedef void (*wft_ctx_entry_t)(struct wft_ctx *prev, void *arg);

#if defined(WFT_CTX_X86_64)
#include "runtime/context_x86_64.h"
#elif defined(WFT_CTX_AARCH64)
#include "runtime/context_aarch64.h"
#else
#include "runtime/context_ucontext.h"
#endif

/* Switch for good from a context that is never resumed (a finished
 * thread). Where the architecture has no cheaper form, a plain switch. */
#ifndef WFT_CTX_HAVE_JUMP
#define wft_ctx_jump(from, to) ((void)wft_ctx_switch((from), (to)), __builtin_unreachable())
#endif

/*
 * Prepare *c so that the first switch to it runs entry(prev, arg) on the
 * stack [stack, stack + size), with the floating-point control state env
 * (weft_spawn captures the creator's with wft_fpenv_get(), so a new thread
 * inherits its creator's rounding mode and exception masks, as with
 * pthread_create, even though its context is made later on a worker).
 * Context: any. May park: no.
 */
void wft_ctx_make(struct wft_ctx *c, void *stack, size_t size,
		  wft_ctx_entry_t entry, void *arg, wft_fpenv_t env);

/*
 * Initialise *c as the context of the running OS thread's own stack, so that
 * it can be switched away from (its fields are filled by the first switch).
 * Context: any. May park: no.
 */
void wft_ctx_init_current(struct wft_ctx *c);

#endif
