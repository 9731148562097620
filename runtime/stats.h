/*
 * runtime/stats.h - the counters: struct wft_stats (one field per entry of
 * runtime/stats.def), the macros that bump them from a worker or a plain OS
 * thread, and the retired totals (runtime/stats.c).
 */
#ifndef WFT_STATS_H
#define WFT_STATS_H

#include "runtime/panic.h"

struct wft_worker;

struct wft_stats {
#define WFT_STAT(name, desc) uint64_t name;
#include "runtime/stats.def"
#undef WFT_STAT
} wft_cacheline_aligned;

/* Counters are written only by their owner worker; readers sum with relaxed
 * loads. The owner uses a relaxed load plus store (not an RMW): cheap and
 * TSan-clean. */
#define wft_stat_inc(w, name) wft_stat_add(w, name, 1)
#define wft_stat_add(w, name, n) do { \
	_Atomic uint64_t *p_ = (_Atomic uint64_t *)&(w)->stats.name; \
	atomic_store_explicit(p_, atomic_load_explicit(p_, memory_order_relaxed) + (n), \
			      memory_order_relaxed); \
} while (0)

/* Counters bumped from plain OS threads (no worker) go here, with RMWs
 * (relaxed: counters, summed on read). */
extern struct wft_stats wft_stats_os;
#define wft_stat_os_add(name, n) \
	atomic_fetch_add_explicit((_Atomic uint64_t *)&wft_stats_os.name, (n), memory_order_relaxed)
#define wft_stat_os_inc(name) wft_stat_os_add(name, 1)

/* Either: w's counter, or the OS threads' one when w is NULL (the caller
 * is a plain OS thread). */
#define wft_stat_add_any(w, name, n) do { \
	struct wft_worker *wa_ = (w); \
	if (wa_) \
		wft_stat_add(wa_, name, n); \
	else \
		wft_stat_os_add(name, n); \
} while (0)
#define wft_stat_inc_any(w, name) wft_stat_add_any(w, name, 1)

/* Fold a worker's counters into the retired totals (before freeing it). */
void wft_stats_retire(struct wft_worker *w);

#endif
