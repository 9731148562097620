/*
 * runtime/context_aarch64.h - inline context switch for aarch64 (AAPCS64).
 * See runtime/context.h for the design; the offsets are used by
 * context_aarch64.S. Same shape as the x86-64 switch: store sp, x29 and the
 * address of the local label "1:" into *from, load *to's sp and `br` to its
 * saved label. `br` is not a return, so it does not disturb the return
 * predictor, which is the reason for the inline design (context.h).
 *
 * Registers (AAPCS64 section 6.1):
 *   x19-x28      callee-saved: declared clobbered, so the compiler saves
 *                only those live across the switch.
 *   x29 (fp)     saved and restored by hand: the compiler refuses a clobber
 *                of the frame pointer.
 *   x30 (lr)     clobbered: the code after the label may not rely on it.
 *   x0-x17       caller-saved; x0/x1 carry the contract below, the others
 *                are clobbered (x16/x17 may be used by veneers anyway).
 *   x18          the platform register. Linux leaves it to the compiler as a
 *                temporary, so code on the other side may change it: it is
 *                clobbered. (A shadow-call-stack build keeps a per-thread
 *                pointer in x18; weft does not support that.)
 *   v8-v15       the low 64 bits (d8-d15) are callee-saved; all of v0-v31 are
 *                declared clobbered, so live d8-d15 are spilled around the
 *                switch. SVE z/p state is not carried (call-clobbered beyond
 *                d8-d15 in the base PCS, like any call).
 *   FPCR         rounding mode, flush-to-zero, default-NaN and trap enables:
 *                callee-saved state, so it is carried per context (below).
 *   FPSR         the sticky exception flags: not callee-saved in AAPCS64 and
 *                not carried, as across any call.
 *
 * FPCR: the jumper reads the live FPCR into x2 (and stores it into its own
 * context) before the jump; x2 arrives unchanged at the resume label, where
 * the resumed side compares it with the word it saved when it switched away
 * and writes FPCR (`msr fpcr`, which some cores serialise) only when they
 * differ, which is almost never. This is the x86-64 MXCSR trick, but the
 * value travels in a register, so the resumed side does not load back what
 * the jumper has just stored; and the compare is exact because FPCR holds no
 * status bits.
 *
 * BTI: `br` to a label in a guarded page faults unless the target is a BTI
 * landing pad. When the compiler emits BTI (-mbranch-protection=bti or
 * standard) the label starts with `bti j` (hint #36, a NOP on older cores),
 * and so does wft_ctx_trampoline. Return addresses signed by PAC are signed
 * against sp, which each context gets back unchanged, so PAC needs nothing.
 */
#ifndef WFT_CONTEXT_AARCH64_H
#define WFT_CONTEXT_AARCH64_H

struct wft_ctx {
	void *sp;        /* 0: stack pointer at the switch */
	void *pc;        /* 8: resume address */
	void *fp;        /* 16: x29 */
	uint64_t fpcr;   /* 24: FP control register */
	void *entry;     /* 32: new contexts only: entry function */
	void *arg;       /* 40: new contexts only: its argument */
};

/* The FP control state a thread runs with: FPCR. */
typedef uint64_t wft_fpenv_t;

/* The calling thread's FPCR (a spawn captures its creator's). */
static inline wft_fpenv_t wft_fpenv_get(void)
{
	uint64_t fpcr;

	__asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
	return fpcr;
}

#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define WFT_CTX_BTI_J "hint #36\n\t"   /* bti j */
#else
#define WFT_CTX_BTI_J ""
#endif

/*
 * Switch from the running context (saved into *from) to *to.
 * Returns, when *from is resumed later, the context that switched back to it.
 *
 * Register contract at the resume label (and at wft_ctx_trampoline):
 * x0 = the jumper's `from` (the context we came from), x1 = the jumper's `to`
 * (our own context), x2 = the jumper's live FPCR.
 * Context: any. May park: no (it is the switch itself).
 */
static inline __attribute__((always_inline)) struct wft_ctx *
wft_ctx_switch(struct wft_ctx *from, struct wft_ctx *to)
{
	register struct wft_ctx *x0 __asm__("x0") = from;
	register struct wft_ctx *x1 __asm__("x1") = to;

	__asm__ volatile(
		"mrs x2, fpcr\n\t"
		"mov x3, sp\n\t"
		"adr x4, 1f\n\t"
		"stp x3, x4, [x0, #0]\n\t"
		"stp x29, x2, [x0, #16]\n\t"
		"ldp x3, x4, [x1, #0]\n\t"
		"mov sp, x3\n\t"
		"br x4\n"
		"1:\n\t"
		WFT_CTX_BTI_J
		"ldp x29, x3, [x1, #16]\n\t"
		"cmp x2, x3\n\t"
		"b.eq 2f\n\t"
		"msr fpcr, x3\n"
		"2:\n\t"
		: "+r"(x0), "+r"(x1)
		:
		: "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11",
		  "x12", "x13", "x14", "x15", "x16", "x17", "x18",
		  "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27",
		  "x28", "x30", "memory", "cc",
		  "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7",
		  "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15",
		  "v16", "v17", "v18", "v19", "v20", "v21", "v22", "v23",
		  "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31");
	return x0;
}

#endif
