/*
 * runtime/context_x86_64.h - inline context switch for x86-64 (SysV ABI).
 * See runtime/context.h for the design; offsets are used by context_x86_64.S.
 */
#ifndef WFT_CONTEXT_X86_64_H
#define WFT_CONTEXT_X86_64_H

struct wft_ctx {
	void *sp;        /* 0: stack pointer at the switch */
	void *pc;        /* 8: resume address */
	void *fp;        /* 16: rbp */
	uint32_t mxcsr;  /* 24: SSE control/status */
	uint16_t fpucw;  /* 28: x87 control word */
	uint16_t pad;    /* 30: unused */
	void *entry;     /* 32: new contexts only: entry function */
	void *arg;       /* 40: new contexts only: its argument */
};

/* The FP control state a thread runs with: MXCSR in the low 32 bits, the
 * x87 control word in bits 32..47 (the layout of bytes 24..31 above). */
typedef uint64_t wft_fpenv_t;

/* The calling thread's FP control state (a spawn captures its creator's). */
static inline wft_fpenv_t wft_fpenv_get(void)
{
	uint32_t mxcsr;
	uint16_t cw;

	__asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
	__asm__ volatile("fnstcw %0" : "=m"(cw));
	return (uint64_t)mxcsr | (uint64_t)cw << 32;
}

/*
 * Switch from the running context (saved into *from) to *to.
 * Returns, when *from is resumed later, the context that switched back to it.
 *
 * The FP control state: saved on the way out (stmxcsr + fnstcw) and
 * reloaded unconditionally on the way in (ldmxcsr + fldcw). A compare-and-
 * skip measures slower: the resumed side would compare the 8 bytes the
 * jumper has just stored as two narrower stores (4 + 2 bytes), a load
 * that store forwarding cannot serve, ~13 cycles of stall; the plain
 * reloads cost less (docs/design.md "Measured alternatives"). A new
 * context loads its state in the
 * trampoline (context_x86_64.S).
 *
 * Clobbers: every register the ABI lets a call destroy, plus rbx and r12-r15.
 * Those are callee-saved, but the other side of the switch may have changed
 * them, so the asm declares them clobbered and the compiler saves the ones
 * that are live in the enclosing function (in its prologue, once per call
 * of that function, not per switch). x87 stack registers are not touched by
 * the switch, and weft never switches inside an expression that keeps a
 * long double on the x87 stack (all switch sites are calls from C code).
 */
static inline __attribute__((always_inline)) struct wft_ctx *
wft_ctx_switch(struct wft_ctx *from, struct wft_ctx *to)
{
	register struct wft_ctx *rdi __asm__("rdi") = from;
	register struct wft_ctx *rsi __asm__("rsi") = to;

	__asm__ volatile(
		"stmxcsr 24(%%rdi)\n\t"
		"fnstcw 28(%%rdi)\n\t"
		"movq %%rbp, 16(%%rdi)\n\t"
		"leaq 1f(%%rip), %%rax\n\t"
		"movq %%rsp, 0(%%rdi)\n\t"
		"movq %%rax, 8(%%rdi)\n\t"
		"movq 0(%%rsi), %%rsp\n\t"
		"jmpq *8(%%rsi)\n"
		"1:\n\t"
		"movq 16(%%rsi), %%rbp\n\t"
		"ldmxcsr 24(%%rsi)\n\t"
		"fldcw 28(%%rsi)\n\t"
		: "+D"(rdi), "+S"(rsi)
		:
		: "rax", "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11",
		  "r12", "r13", "r14", "r15", "memory", "cc",
		  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
		  "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
	return rdi;
}

/*
 * Leave the running context for good and resume *to: a switch that saves
 * nothing (no registers, no stmxcsr, which alone costs ~5 ns on the AMD
 * EPYC hosts here). For a finished thread, whose context is never resumed.
 * The resume side finds rdi = from and rsi = to, as after wft_ctx_switch.
 * Context: any. May park: no.
 */
#define WFT_CTX_HAVE_JUMP 1
static inline __attribute__((always_inline, noreturn)) void
wft_ctx_jump(struct wft_ctx *from, struct wft_ctx *to)
{
	register struct wft_ctx *rdi __asm__("rdi") = from;
	register struct wft_ctx *rsi __asm__("rsi") = to;

	__asm__ volatile(
		"movq 0(%%rsi), %%rsp\n\t"
		"jmpq *8(%%rsi)\n"
		: : "r"(rdi), "r"(rsi) : "memory");
	__builtin_unreachable();
}

#endif
