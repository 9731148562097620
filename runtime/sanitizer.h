/*
 * runtime/sanitizer.h - telling ASan, TSan and Valgrind about stacks and
 * switches, in one place. The #if blocks are at file level (no #ifdef in
 * function bodies); each hook is an empty inline in a plain build.
 *
 * The switch protocol (runtime/worker.c calls these around wft_ctx_switch):
 *   wft_san_switch_begin(from_fake_save, to_fiber, to_stack, to_size)
 *   ... wft_ctx_switch ...
 *   wft_san_switch_end(fake_save)
 * ASan: __sanitizer_start_switch_fiber before, __sanitizer_finish_switch_fiber
 * after (a dying context passes NULL as its save slot so ASan frees its fake
 * stack). TSan: __tsan_switch_to_fiber right before the switch, one fiber per
 * light thread, created at first run and destroyed when the TCB is freed.
 * Valgrind: stacks are registered when mapped and deregistered when unmapped.
 *
 * TSan fiber lifetime: a fiber lives as long as one run of a thread (created
 * when it first runs, destroyed by the context that finishes its exit
 * switch), not as long as the TCB: an exit never returns, so a fiber reused
 * by the TCB's next thread would keep the dead thread's shadow call stack
 * (it grows without bound), and TSan caps live threads + fibers at 8128.
 *
 * Synchronisation TSan cannot see (libatomic_ops inline asm, e.g. the TCB
 * pool's double-word CAS) is annotated: wft_san_release(addr) just before
 * the publishing operation, wft_san_acquire(addr) just after the operation
 * that observes it, on the same addr. They are no-ops outside TSan.
 * A read that races by design and whose value is validated afterwards (the
 * TCB pool's read of a maybe-popped top's link, checked by the version CAS)
 * goes in a WFT_NO_TSAN function: not instrumented, and never inlined into
 * an instrumented caller.
 */
#ifndef WFT_SANITIZER_H
#define WFT_SANITIZER_H

#include "config.h"
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define WFT_ASAN 1
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#else
#define WFT_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define WFT_TSAN 1
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define WFT_NO_TSAN __attribute__((no_sanitize_thread, noinline))
#else
#define WFT_TSAN 0
#define WFT_NO_TSAN
#endif

#ifdef HAVE_VALGRIND_VALGRIND_H
#include <valgrind/valgrind.h>
#include <valgrind/memcheck.h>
#define WFT_VG_STACK_REGISTER(lo, hi) VALGRIND_STACK_REGISTER((lo), (hi))
#define WFT_VG_STACK_DEREGISTER(id) VALGRIND_STACK_DEREGISTER(id)
/* A reused stack starts undefined for the new thread (Memcheck otherwise
 * reports the previous thread's frames as the new one's invalid accesses,
 * e.g. 27 reports in a stack-reuse stress) */
#define WFT_VG_STACK_FRESH(lo, size) do { \
	if (__builtin_expect(wft_vg_running, 0)) \
		(void)VALGRIND_MAKE_MEM_UNDEFINED((lo), (size)); \
} while (0)
/* RUNNING_ON_VALGRIND, read once by weft_init (a client request costs a
 * dozen instructions natively; a thread start should not pay them) */
extern int wft_vg_running;
#define WFT_VG_RUNNING() wft_vg_running
#else
#define WFT_VG_RUNNING() 0
#define WFT_VG_STACK_REGISTER(lo, hi) 0u
#define WFT_VG_STACK_DEREGISTER(id) ((void)(id))
#define WFT_VG_STACK_FRESH(lo, size) ((void)(lo), (void)(size))
#endif

static inline void wft_san_switch_begin(void **fake_save, void *to_fiber,
					const void *to_bottom, size_t to_size)
{
#if WFT_ASAN
	__sanitizer_start_switch_fiber(fake_save, to_bottom, to_size);
#endif
#if WFT_TSAN
	__tsan_switch_to_fiber(to_fiber, 0);
#endif
	(void)fake_save; (void)to_fiber; (void)to_bottom; (void)to_size;
}

static inline void wft_san_switch_end(void *fake_save)
{
#if WFT_ASAN
	__sanitizer_finish_switch_fiber(fake_save, NULL, NULL);
#endif
	(void)fake_save;
}

/* A reused stack still carries the shadow of the frames its last thread
 * never returned from (it switched away for good): clear it before reuse. */
static inline void wft_san_stack_fresh(void *lo, size_t size)
{
#if WFT_ASAN
	__asan_unpoison_memory_region(lo, size);
#endif
	WFT_VG_STACK_FRESH(lo, size);
	(void)lo; (void)size;
}

/* Stack memory about to be unmapped: clear its ASan shadow. GCC 12's ASan
 * leaves the shadow of unmapped memory as it was, so the next mapping at
 * that address (a bulk TCB slab, or anything of the program's) would
 * inherit the dead frames' redzones (symptom: a stack-buffer-underflow
 * reported on a TCB slab, CK_FORK=no). */
static inline void wft_san_unmapping(void *lo, size_t size)
{
#if WFT_ASAN
	__asan_unpoison_memory_region(lo, size);
#endif
	(void)lo; (void)size;
}

static inline void *wft_san_fiber_create(void)
{
#if WFT_TSAN
	return __tsan_create_fiber(0);
#else
	return NULL;
#endif
}

static inline void *wft_san_fiber_current(void)
{
#if WFT_TSAN
	return __tsan_get_current_fiber();
#else
	return NULL;
#endif
}

static inline void wft_san_fiber_destroy(void *f)
{
#if WFT_TSAN
	if (f)
		__tsan_destroy_fiber(f);
#endif
	(void)f;
}

/* A happens-before edge TSan cannot see: release before publishing. */
static inline void wft_san_release(void *addr)
{
#if WFT_TSAN
	__tsan_release(addr);
#endif
	(void)addr;
}

/* ... and acquire after observing the publication. */
static inline void wft_san_acquire(void *addr)
{
#if WFT_TSAN
	__tsan_acquire(addr);
#endif
	(void)addr;
}

#endif
