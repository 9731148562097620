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
	uint16_t pad;    /* 30: always 0, so 24..31 compare as one word */
	void *entry;     /* 32: new contexts only: entry function */
	void *arg;       /* 40: new contexts only: its argument */
};

/*
 * Switch from the running context (saved into *from) to *to.
 * Returns, when *from is resumed later, the context that switched back to it.
 *
 * The FP control state: the jumper has just stored the live MXCSR/x87 CW into
 * its own context (rdi), so the resumed side compares that with its own saved
 * word and reloads (ldmxcsr + fldcw, ~15 cycles) only when they differ, which
 * is almost never. One predicted branch instead of two slow loads.
 *
 * Clobbers: every register the ABI lets a call destroy, plus rbx and r12-r15
 * (callee-saved, but the other side may have changed them); the compiler
 * spills whatever of those is live. x87 stack registers are not touched by
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
		"movq 24(%%rdi), %%rax\n\t"
		"cmpq 24(%%rsi), %%rax\n\t"
		"je 2f\n\t"
		"ldmxcsr 24(%%rsi)\n\t"
		"fldcw 28(%%rsi)\n"
		"2:\n\t"
		: "+D"(rdi), "+S"(rsi)
		:
		: "rax", "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11",
		  "r12", "r13", "r14", "r15", "memory", "cc",
		  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
		  "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
	return rdi;
}

#endif
