/*
 * runtime/context_ucontext.c - making new contexts for the swapcontext(3)
 * fallback (the switch is inline in runtime/context_ucontext.h).
 *
 * Objects: a new struct wft_ctx holds a ucontext_t prepared by getcontext +
 * makecontext to run trampoline() on the given stack, and entry/arg.
 * Invariants:
 *   I1 the first switch to a new context runs trampoline(), which calls
 *      entry(prev, arg) with prev = the jumper's context (the `prev` field,
 *      see context_ucontext.h).
 *   I2 the new context's FP environment and signal mask are the creator's
 *      (getcontext in wft_ctx_make), as with pthread_create.
 *
 * Passing the context to trampoline(): makecontext passes int arguments only
 * (POSIX; glibc also passes 64-bit words on 64-bit targets, but that is not
 * promised). So the pointer is split into two 32-bit halves and rebuilt.
 * Rejected: a thread-local "context being started" variable - the same TLS
 * migration hazard as in context_ucontext.h, and one more global protocol.
 *
 * uc_link is NULL: entry must never return (context.h); if it does, the
 * trampoline traps rather than letting glibc exit the whole OS thread.
 */
#include "runtime/context.h"

#include <string.h>

#if defined(WFT_CTX_UCONTEXT)

static void trampoline(unsigned int hi, unsigned int lo)
{
	struct wft_ctx *self = (struct wft_ctx *)(uintptr_t)(((uint64_t)hi << 32) | lo);

	fesetenv(&self->env);                 /* the creator's, from spawn */
	self->entry(self->prev, self->arg);   /* (I1) */
	__builtin_trap();                     /* entry returned: broken contract */
}

void wft_ctx_make(struct wft_ctx *c, void *stack, size_t size,
		  wft_ctx_entry_t entry, void *arg, wft_fpenv_t env)
{
	uint64_t p = (uint64_t)(uintptr_t)c;

	memset(c, 0, sizeof(*c));
	/* Fails only with a bad pointer (broken invariant). (I2) */
	if (getcontext(&c->uc) != 0)
		__builtin_trap();
	c->uc.uc_stack.ss_sp = stack;
	c->uc.uc_stack.ss_size = size;
	c->uc.uc_stack.ss_flags = 0;
	c->uc.uc_link = NULL;
	c->entry = entry;
	c->arg = arg;
	c->env = env;
	makecontext(&c->uc, (void (*)(void))trampoline, 2,
		    (unsigned int)(p >> 32), (unsigned int)(p & 0xffffffffu));
}

void wft_ctx_init_current(struct wft_ctx *c)
{
	/* The first swapcontext away from c fills c->uc. */
	memset(c, 0, sizeof(*c));
}

#endif
