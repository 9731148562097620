/*
 * runtime/context_aarch64_make.c - making new aarch64 contexts (the switch
 * itself is inline, see runtime/context_aarch64.h; the first entry is
 * wft_ctx_trampoline in context_aarch64.S). Not named context_aarch64.c:
 * automake would build both that and context_aarch64.S into the same
 * context_aarch64.lo and refuses.
 *
 * Objects: a struct wft_ctx that has never been switched to holds
 *   sp = the aligned stack top, pc = wft_ctx_trampoline, fp = 0,
 *   fpcr = the creator's FPCR, entry/arg = what the trampoline calls.
 * Invariants:
 *   I1 sp is 16-byte aligned at every switch (AAPCS64 requires it at public
 *      interfaces and the hardware's SP alignment check faults on a
 *      misaligned sp-relative access), including the first one.
 *   I2 fpcr holds the FPCR the context must run with, so the switch can
 *      compare-and-skip (context_aarch64.h).
 * Unlike x86-64 the call into entry pushes nothing: the trampoline's `blr`
 * puts the return address in x30, so the entry starts at exactly the top.
 */
#include "runtime/context.h"

#include <string.h>

#if defined(WFT_CTX_AARCH64)

void wft_ctx_trampoline(void);

/* The stack top we hand out; stacks are page-aligned, this is defensive. */
#define CTX_STACK_ALIGN 16

void wft_ctx_make(struct wft_ctx *c, void *stack, size_t size,
		  wft_ctx_entry_t entry, void *arg, wft_fpenv_t env)
{
	uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)(CTX_STACK_ALIGN - 1);

	memset(c, 0, sizeof(*c));
	c->sp = (void *)top;                      /* (I1) */
	c->pc = (void *)wft_ctx_trampoline;
	c->fp = NULL;
	c->entry = (void *)entry;
	c->arg = arg;
	c->fpcr = env;                            /* (I2): the creator's, from spawn */
}

void wft_ctx_init_current(struct wft_ctx *c)
{
	/* Every field is written by the first switch away from c. */
	memset(c, 0, sizeof(*c));
}

#endif
