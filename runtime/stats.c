/*
 * runtime/stats.c - per-worker counters, summed on read (stats.def lists them).
 *
 * Each worker's counters sit in its own cache-line-aligned struct and are
 * written only by that worker (relaxed load + store); readers sum them with
 * relaxed loads, so a sum taken while workers run is approximate but every
 * counter is monotonic. Increments made by plain OS threads (spawn from
 * main(), a wake from a pthread) go to wft_stats_os with atomic adds.
 * Workers' counters are folded into `retired` when the runtime shuts down,
 * so weft_stats_get() after weft_shutdown() still reports the run.
 */
#include "runtime/wft.h"
#include "runtime/uring.h"

#include <stdlib.h>
#include <string.h>

struct wft_stats wft_stats_os;
static struct wft_stats retired;

#define LOAD(p) atomic_load_explicit((_Atomic uint64_t *)(p), memory_order_relaxed)

static void add_stats(weft_stats_t *s, const struct wft_stats *w)
{
#define WFT_STAT(name, desc) s->name += LOAD(&w->name);
#include "runtime/stats.def"
#undef WFT_STAT
}

/* Spawns and exits of weft threads are not counted twice: they are the
 * worker's birth and death counters (wft_count_birth/death), which
 * shutdown needs anyway. relaxed: counters, approximate while running. */
static void add_born_dead(uint64_t *spawns, uint64_t *exits, struct wft_worker *w)
{
	*spawns += (uint64_t)atomic_load_explicit(&w->nborn, memory_order_relaxed);
	*exits += (uint64_t)atomic_load_explicit(&w->ndead, memory_order_relaxed);
}

void wft_stats_retire(struct wft_worker *w)
{
#define WFT_STAT(name, desc) retired.name += LOAD(&w->stats.name);
#include "runtime/stats.def"
#undef WFT_STAT
	add_born_dead(&retired.spawns, &retired.exits, w);
}

void wft_stats_reset_unsafe(void);
void wft_stats_reset_unsafe(void)
{
	memset(&retired, 0, sizeof(retired));
	memset(&wft_stats_os, 0, sizeof(wft_stats_os));
}

int weft_stats_get(weft_stats_t *s)
{
	if (!s)
		return EINVAL;
	memset(s, 0, sizeof(*s));
	add_stats(s, &retired);
	add_stats(s, &wft_stats_os);
	/* acquire: pairs with the release store of RUNNING in weft_init, so
	 * the workers array is visible */
	if (atomic_load_explicit(&wft_rt.state, memory_order_acquire) == WFT_RT_RUNNING)
		for (int i = 0; i < wft_rt.nworkers; i++) {
			add_stats(s, &wft_rt.workers[i]->stats);
			add_born_dead(&s->spawns, &s->exits, wft_rt.workers[i]);
		}
	return 0;
}

int weft_stats_print(FILE *f)
{
	weft_stats_t s;

	if (!f)
		f = stderr;
	weft_stats_get(&s);
	fprintf(f, "\n weft scheduler counters (%d workers):\n\n", wft_rt.nworkers);
#define WFT_STAT(name, desc) fprintf(f, "%18llu  %s\n", (unsigned long long)s.name, desc);
#include "runtime/stats.def"
#undef WFT_STAT
	{
		/* derived: what a wake costs in syscalls, whatever the machine */
		uint64_t wakes = s.wakes_local + s.wakes_remote + s.wakes_locked;

		fprintf(f, "%18.1f  kicks per 1,000 wakes (chained: %.1f)\n",
			wakes ? 1000.0 * (double)s.kicks / (double)wakes : 0.0,
			wakes ? 1000.0 * (double)s.chain_kicks / (double)wakes : 0.0);
	}
	{
		/* the I/O backend and the io_uring flags chosen, so that the
		 * table says so when io_uring is unavailable */
		char io[256];

		wft_uring_describe(io, sizeof(io));
		fprintf(f, "\n  io: %s\n", io);
	}
	fprintf(f, "\n");
	return 0;
}
