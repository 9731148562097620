/*
 * runtime/context.c - making new contexts (the switch itself is inline, see
 * runtime/context.h). For the ucontext fallback see context_ucontext.c.
 */
#include "runtime/context.h"

#include <string.h>

#if defined(WFT_CTX_X86_64)

void wft_ctx_trampoline(void);

void wft_ctx_make(struct wft_ctx *c, void *stack, size_t size,
		  wft_ctx_entry_t entry, void *arg, wft_fpenv_t env)
{
	uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;

	memset(c, 0, sizeof(*c));
	/* The trampoline's call pushes the return address, so the entry
	 * function starts with rsp = 8 mod 16, as the ABI requires. */
	c->sp = (void *)top;
	c->pc = (void *)wft_ctx_trampoline;
	c->fp = NULL;
	c->entry = (void *)entry;
	c->arg = arg;
	c->mxcsr = (uint32_t)env;             /* loaded by the trampoline */
	c->fpucw = (uint16_t)(env >> 32);
}

void wft_ctx_init_current(struct wft_ctx *c)
{
	memset(c, 0, sizeof(*c));
}

#endif
