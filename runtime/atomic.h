/*
 * runtime/atomic.h - the ordering vocabulary of weft.
 *
 * weft uses C11 <stdatomic.h> directly, always with an explicit memory order
 * and, on the same line or the line above, the reason and the partner access.
 * The words used in those comments:
 *
 *   relaxed  - atomicity only; used for hints that are re-checked later and
 *              for counters. x86-64: plain mov. aarch64: plain ldr/str.
 *   acquire  - later accesses cannot move before this load; pairs with a
 *              release store/RMW of the same object that it reads from.
 *              x86-64: plain mov. aarch64: ldar (a few cycles).
 *   release  - earlier accesses cannot move after this store; publishes
 *              everything written before it. x86-64: plain mov. aarch64: stlr.
 *   acq_rel  - both, on a read-modify-write. x86-64: lock-prefixed op
 *              (~18-20 cycles uncontended). aarch64: ldaxr/stlxr or LSE casal.
 *   seq_cst fence ("StoreLoad") - the only ordering that stops a later load from
 *              being satisfied before an earlier store is visible. Needed by every
 *              "I publish, then I look at your flag" protocol (the lost-wakeup
 *              arguments below). x86-64: mfence / lock add (~30 cycles).
 *              aarch64: dmb ish.
 *
 * A lock-prefixed RMW on x86-64 is already a full barrier, but the C11 model
 * does not promise that for an acq_rel RMW followed by a load of another
 * object, so the StoreLoad points are written as explicit seq_cst fences
 * (or as seq_cst RMWs, which C11 does order against seq_cst loads).
 */
#ifndef WFT_ATOMIC_H
#define WFT_ATOMIC_H

#include <stdatomic.h>
#include <stdint.h>

#define WFT_CACHELINE 64
#define wft_cacheline_aligned __attribute__((aligned(WFT_CACHELINE)))

#define wft_likely(x) __builtin_expect(!!(x), 1)
#define wft_unlikely(x) __builtin_expect(!!(x), 0)

/* Shorthands: the order is still spelled at every call site. */
#define wft_load(p, o) atomic_load_explicit((p), memory_order_##o)
#define wft_store(p, v, o) atomic_store_explicit((p), (v), memory_order_##o)
#define wft_xchg(p, v, o) atomic_exchange_explicit((p), (v), memory_order_##o)
#define wft_fadd(p, v, o) atomic_fetch_add_explicit((p), (v), memory_order_##o)
#define wft_fsub(p, v, o) atomic_fetch_sub_explicit((p), (v), memory_order_##o)
#define wft_for(p, v, o) atomic_fetch_or_explicit((p), (v), memory_order_##o)
#define wft_fand(p, v, o) atomic_fetch_and_explicit((p), (v), memory_order_##o)
/* Strong CAS; on failure *expected is updated (relaxed load on failure). */
#define wft_cas(p, expected, desired, o) \
	atomic_compare_exchange_strong_explicit((p), (expected), (desired), \
		memory_order_##o, memory_order_relaxed)
#define wft_cas_weak(p, expected, desired, o) \
	atomic_compare_exchange_weak_explicit((p), (expected), (desired), \
		memory_order_##o, memory_order_relaxed)
#define wft_fence(o) atomic_thread_fence(memory_order_##o)

/* Spin-wait hint. PAUSE costs 25-35 ns on this machine class (Skylake and
 * later), so spin budgets are written in nanoseconds, not iterations. */
static inline void wft_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield" ::: "memory");
#else
	__asm__ volatile("" ::: "memory");
#endif
}

/* Compiler-only barrier. */
#define wft_barrier() __asm__ volatile("" ::: "memory")

#endif
