/*
 * runtime/context_x86_64.S - first entry of a new x86-64 context.
 *
 * wft_ctx_switch() jumps here with rdi = the previous context and rsi = this
 * context, whose `entry` (offset 32) and `arg` (offset 40) fields were set by
 * wft_ctx_make(). The stack pointer is 16-byte aligned. The CFI says the
 * return address is undefined: this is the outermost frame, so gdb and perf
 * stop here instead of unwinding into garbage.
 */
	.text
	.globl	wft_ctx_trampoline
	.hidden	wft_ctx_trampoline
	.type	wft_ctx_trampoline, @function
	.p2align 4
wft_ctx_trampoline:
	.cfi_startproc
	.cfi_undefined rip
	xorl	%ebp, %ebp
	ldmxcsr	24(%rsi)		/* the creator's FP control state */
	fldcw	28(%rsi)
	movq	32(%rsi), %rax
	movq	40(%rsi), %rsi
	callq	*%rax
	ud2
	.cfi_endproc
	.size	wft_ctx_trampoline, .-wft_ctx_trampoline

	.section .note.GNU-stack,"",@progbits
