/*
 * runtime/drain.h - DRAIN: the controller state kept in wft_rt, the switch
 * test and the worker hooks (runtime/drain.c).
 */
#ifndef WFT_DRAIN_H
#define WFT_DRAIN_H

#include "runtime/features.h"

struct wft_worker;

/* DRAIN's controller state (runtime/drain.c "The rule"). Written and read
 * only by the worker holding rt.drain_busy. */
struct wft_drain_ctl {
	int phase;            /* DRAIN_NORMAL, _HELD, _WINDOW, _SETTLE */
	int dir;              /* the probe: +1 one more worker drains, -1 one fewer */
	int nd0;              /* ndrain before the probe */
	int k;                /* the probe's window, 0..3 */
	uint64_t t0, s0;      /* current window: start time, switches then */
	uint64_t sw[2], ns[2]; /* switches and time, old ndrain [0] and changed [1] */
	uint64_t until;       /* NORMAL/HELD: no probe before this time */
	uint64_t hold;        /* HELD's length; doubles while the drain keeps winning */
	uint64_t backoff;     /* NORMAL's wait after a drain that did not pay */
	uint64_t quiet_since; /* D below the raise level since then, or 0 */
	bool down_next;       /* HELD: the next probe is -1 (a +1 just lost) */
};

/* DRAIN (runtime/drain.c). Context: w's owner (start/stop/idle). */
void wft_drain_worker_start(struct wft_worker *w);
void wft_drain_worker_stop(struct wft_worker *w);
void wft_drain_idle(struct wft_worker *w);
/* DRAIN is in effect: it needs STEAL (a draining worker learns that the
 * drain is over at its idle tick, which only STEAL has). */
#define WFT_DRAIN_ON() \
	wft_unlikely((wft_features & ((1ull << WFT_FEAT_BIT_DRAIN) | (1ull << WFT_FEAT_BIT_STEAL))) == \
		     ((1ull << WFT_FEAT_BIT_DRAIN) | (1ull << WFT_FEAT_BIT_STEAL)))

#endif
