/*
 * runtime/context_aarch64.S - first entry of a new aarch64 context.
 *
 * wft_ctx_switch() branches here (`br`) with x0 = the previous context,
 * x1 = this context (its `entry`, offset 32, and `arg`, offset 40, were set
 * by wft_ctx_make()) and x2 = the jumper's live FPCR. sp is 16-byte aligned
 * (the hardware checks it).
 *
 * First it does what the switch does at its resume label for an old context:
 * install this context's FPCR (offset 24: the creator's, from wft_ctx_make)
 * unless the jumper's live FPCR (x2) already equals it. Without this a new
 * thread would run with its first jumper's FP control, not its creator's
 * (context.h).
 * x29 and x30 are zeroed so that a frame-pointer walk ends here, and the CFI
 * says the return address (x30) is undefined: this is the outermost frame,
 * so gdb and perf stop here instead of unwinding into garbage.
 *
 * When the compiler builds with BTI the entry is a `bti j` landing pad (the
 * switch reaches it with `br`), and the GNU property note at the end marks
 * this object BTI/PAC compatible so the linker keeps the protection on for
 * the whole library. The trampoline never returns, so it signs nothing.
 */
#if defined(__ARM_FEATURE_BTI_DEFAULT) && __ARM_FEATURE_BTI_DEFAULT
#define BTI_J	hint #36
#define FEATURE_BTI	1
#else
#define BTI_J
#define FEATURE_BTI	0
#endif
#if defined(__ARM_FEATURE_PAC_DEFAULT) && __ARM_FEATURE_PAC_DEFAULT
#define FEATURE_PAC	2
#else
#define FEATURE_PAC	0
#endif

	.text
	.globl	wft_ctx_trampoline
	.hidden	wft_ctx_trampoline
	.type	wft_ctx_trampoline, %function
	.p2align 4
wft_ctx_trampoline:
	.cfi_startproc
	.cfi_undefined x30
	BTI_J
	mov	x29, #0
	mov	x30, #0
	ldr	x3, [x1, #24]
	cmp	x2, x3
	b.eq	1f
	msr	fpcr, x3
1:	ldp	x2, x3, [x1, #32]
	mov	x1, x3
	blr	x2
	brk	#0x3e8
	.cfi_endproc
	.size	wft_ctx_trampoline, .-wft_ctx_trampoline

#if FEATURE_BTI || FEATURE_PAC
	/* NT_GNU_PROPERTY_TYPE_0 with GNU_PROPERTY_AARCH64_FEATURE_1_AND. */
	.pushsection .note.gnu.property, "a"
	.p2align 3
	.word	4			/* name size ("GNU\0") */
	.word	16			/* descriptor size */
	.word	5			/* NT_GNU_PROPERTY_TYPE_0 */
	.asciz	"GNU"
	.word	0xc0000000		/* GNU_PROPERTY_AARCH64_FEATURE_1_AND */
	.word	4			/* property data size */
	.word	FEATURE_BTI | FEATURE_PAC
	.word	0			/* pad to 8 */
	.popsection
#endif

	.section .note.GNU-stack,"",%progbits
