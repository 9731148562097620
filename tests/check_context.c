/*
 * tests/check_context.c - suite "context": the switch preserves callee-saved
 * integer registers, floating-point values and the per-thread FP control
 * state (MXCSR rounding mode / x87 control word on x86-64).
 */
#include "tests/harness.h"

#include <fenv.h>
#include <math.h>

/* Valgrind's SSE emulation computes in round-to-nearest whatever MXCSR says
 * and does not keep MXCSR's FTZ/DAZ bits (documented Valgrind limitations),
 * so fp_control is not registered and fp_inherit skips its FTZ part there. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define WT_ON_VALGRIND() RUNNING_ON_VALGRIND
#endif
#endif
#ifndef WT_ON_VALGRIND
#define WT_ON_VALGRIND() 0
#endif

/* Values kept live across many switches: the compiler keeps some of them
 * in callee-saved registers (rbx, r12-r15 / x19-x28, d8-d15). */
static void *regs_worker(void *arg)
{
	long seed = (long)arg;
	register long a = seed * 3, b = seed * 5, c = seed * 7, d = seed * 11, e = seed * 13;
	double fa = seed * 1.5, fb = seed * 2.25, fc = seed * 3.125;

	for (int i = 0; i < 2000; i++) {
		weft_yield();
		a += 1; b += 2; c += 3; d += 4; e += 5;
		fa += 0.5; fb += 0.25; fc += 0.125;
		__asm__ volatile("" : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(e));
	}
	WT_CHECK(a == seed * 3 + 2000);
	WT_CHECK(b == seed * 5 + 4000);
	WT_CHECK(c == seed * 7 + 6000);
	WT_CHECK(d == seed * 11 + 8000);
	WT_CHECK(e == seed * 13 + 10000);
	WT_CHECK(fa == seed * 1.5 + 1000.0);
	WT_CHECK(fb == seed * 2.25 + 500.0);
	WT_CHECK(fc == seed * 3.125 + 250.0);
	return NULL;
}

START_TEST(callee_saved)
{
	weft_thread_t t[8];

	wt_init(_i);
	for (long i = 0; i < 8; i++)
		ck_assert_int_eq(weft_spawn(&t[i], regs_worker, (void *)(i + 1), NULL), 0);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(weft_join(t[i], NULL), 0);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* Each thread sets its own rounding mode; the switch must carry it. */
static void *rounding(void *arg)
{
	int mode = (int)(intptr_t)arg;
	volatile double x = 1.0, y = 3.0;

	WT_CHECK(fesetround(mode) == 0);
	for (int i = 0; i < 1000; i++) {
		weft_yield();
		WT_CHECK(fegetround() == mode);
	}
	/* 1/3 rounded up and down differ in the last bit */
	if (mode == FE_UPWARD)
		WT_CHECK(x / y > 0.333333333333333314829616256247);
	return NULL;
}

START_TEST(fp_control)
{
	weft_thread_t t[4];
	static const int modes[4] = { FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO };
	weft_attr_t a;

	wt_init(_i);
	weft_attr_init(&a);
	a.worker = 0;   /* same worker: they interleave */
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(weft_spawn(&t[i], rounding, (void *)(intptr_t)modes[i], &a), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(weft_join(t[i], NULL), 0);
	wt_assert_no_failure();
	/* the OS thread's own mode is untouched */
	ck_assert_int_eq(fegetround(), FE_TONEAREST);
	wt_shutdown();
}
END_TEST

/* A new thread inherits its creator's FP control state at weft_spawn
 * (as with pthread_create), not the state of the worker that first runs
 * it: once the context was made on the worker and ran with the worker's
 * round-to-nearest. Also with flush-to-zero set in MXCSR on x86-64. */
static void *report_round(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)fegetround();
}

static void *spawn_child_with(void *arg)
{
	int mode = (int)(intptr_t)arg;
	weft_thread_t c;
	void *r = NULL;

	WT_CHECK(fesetround(mode) == 0);
	WT_CHECK(weft_spawn(&c, report_round, NULL, NULL) == 0);
	WT_CHECK(weft_join(c, &r) == 0);
	fesetround(FE_TONEAREST);
	return r;
}

#if defined(__x86_64__)
static void *report_mxcsr(void *arg)
{
	uint32_t m;

	(void)arg;
	__asm__ volatile("stmxcsr %0" : "=m"(m));
	return (void *)(uintptr_t)m;
}
#endif

START_TEST(fp_inherit)
{
	weft_thread_t t;
	void *r;

	wt_init(_i);
	/* from a plain OS thread */
	ck_assert_int_eq(fesetround(FE_UPWARD), 0);
	ck_assert_int_eq(weft_spawn(&t, report_round, NULL, NULL), 0);
	fesetround(FE_TONEAREST);
	ck_assert_int_eq(weft_join(t, &r), 0);
	ck_assert_int_eq((int)(intptr_t)r, FE_UPWARD);
	/* from a weft thread */
	ck_assert_int_eq(weft_spawn(&t, spawn_child_with, (void *)(intptr_t)FE_DOWNWARD, NULL), 0);
	ck_assert_int_eq(weft_join(t, &r), 0);
	ck_assert_int_eq((int)(intptr_t)r, FE_DOWNWARD);
#if defined(__x86_64__)
	/* Valgrind does not model MXCSR's FTZ/DAZ bits (reads them as 0) */
	if (!WT_ON_VALGRIND()) {
		uint32_t m, fz;

		__asm__ volatile("stmxcsr %0" : "=m"(m));
		fz = m | 0x8040;   /* FTZ | DAZ */
		__asm__ volatile("ldmxcsr %0" : : "m"(fz));
		ck_assert_int_eq(weft_spawn(&t, report_mxcsr, NULL, NULL), 0);
		__asm__ volatile("ldmxcsr %0" : : "m"(m));
		ck_assert_int_eq(weft_join(t, &r), 0);
		ck_assert_uint_eq((uint32_t)(uintptr_t)r & 0x8040, 0x8040);
	}
#endif
	ck_assert_int_eq(fegetround(), FE_TONEAREST);
	wt_shutdown();
}
END_TEST

/*
 * Deep recursion on a small stack (the stack is really usable): recurse,
 * touching a 256-byte frame each level, until 3/4 of WEFT_STACK_MIN lies
 * between the first and the deepest frame. The budget is measured in bytes,
 * not levels, because frame sizes differ by build: at -O2 GCC would turn a
 * fixed-depth recursion into a loop (testing nothing), at -O1/-O0 a fixed
 * 100 x 256 bytes overflows 16 KiB, and ASan adds redzones to every frame.
 * The asm keeps pad live across the call, so each level really has a frame.
 */
static long depth(const char *top, size_t budget)
{
	volatile char pad[256];
	const char *here = (const char *)__builtin_frame_address(0);
	long n;

	pad[0] = 1;
	pad[sizeof(pad) - 1] = 1;
	if ((size_t)(top - here) >= budget)
		return 1;
	n = depth(top, budget) + 1;
	__asm__ volatile("" : : "r"(pad) : "memory");
	return n;
}

static void *deep(void *arg)
{
	(void)arg;
	return (void *)depth((const char *)__builtin_frame_address(0),
			     WEFT_STACK_MIN / 4 * 3);
}

START_TEST(small_stack)
{
	weft_attr_t a;
	weft_thread_t t;
	void *r;

	wt_init(_i);
	weft_attr_init(&a);
	a.stack_size = WEFT_STACK_MIN;
	ck_assert_int_eq(weft_spawn(&t, deep, NULL, &a), 0);
	ck_assert_int_eq(weft_join(t, &r), 0);
	/* at least one level per 256-byte pad over the budget: real frames */
	ck_assert_int_ge((long)r, 2);
	ck_assert_int_le((long)r, WEFT_STACK_MIN / 4 * 3 / 256 + 1);
	wt_shutdown();
}
END_TEST

static Suite *context_suite(void)
{
	Suite *s = suite_create("context");
	TCase *tc = wt_tcase(s, "basic", 30);

	tcase_add_loop_test(tc, callee_saved, 0, wt_nconfigs);
	if (!WT_ON_VALGRIND())
		tcase_add_loop_test(tc, fp_control, 0, wt_nconfigs);
	tcase_add_loop_test(tc, fp_inherit, 0, wt_nconfigs);
	tcase_add_loop_test(tc, small_stack, 0, wt_nconfigs);
	return s;
}

int main(void)
{
	return wt_run_suite(context_suite());
}
