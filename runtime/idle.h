/*
 * runtime/idle.h - idle workers: spinning, parking, kicks, the kick chain
 * and the strand check (runtime/idle.c).
 */
#ifndef WFT_IDLE_H
#define WFT_IDLE_H

#include "runtime/init.h"

struct wft_worker;

void wft_idle_kick(struct wft_worker *w);     /* wake w if it announced idle */
/* The same, saying what it found: */
enum {
	WFT_KICK_AWAKE,      /* w was awake: nothing to do */
	WFT_KICK_SENT,       /* w was asleep: this call woke it */
	WFT_KICK_UNDERWAY,   /* w was kicked by someone else and has not stored AWAKE yet */
};
int wft_idle_kick_r(struct wft_worker *w);
/* Kick chain (idle.c): leave w's kick to the chain; kick head and make
 * sure the chain runs (returns what the kick found); take up to runners
 * pending kicks. Context: any. */
void wft_idle_kick_defer(struct wft_worker *w);
int wft_idle_kick_burst(struct wft_worker *self, struct wft_worker *head);
void wft_idle_kick_chain(struct wft_worker *self, int runners);
void wft_idle_kick_peers(struct wft_worker *self); /* kick every other parked worker */
void wft_idle_wake_one(struct wft_worker *self);  /* there is surplus work: get a worker spinning */
/* wake_one, preferring a worker parked without the idle tick (deep). */
void wft_idle_wake_deep(struct wft_worker *self);
/* The strand check's slow path: leave the thread to the looker or a
 * spinner, or wake a deep or dozing worker (idle.c "Idle tick").
 * Context: self's owner. */
void wft_idle_strand_slow(struct wft_worker *self);
/* The scheduler loop found work: give up the looker role (idle.c "Idle
 * tick"); if w held a spinning slot, give it back and run the strand
 * check (not found_work's "last spinner wakes another"). Context: w's
 * owner. */
void wft_idle_found_work(struct wft_worker *w);
/* self just left an unpinned thread in its next slot: if workers sleep
 * without the idle tick, leave it to the looker, or to a spinner, or get
 * one of them going (idle.c "Idle tick"). Inline: it runs at every local
 * wake. Context: self's owner. */
static inline void wft_idle_strand_check(struct wft_worker *self)
{
	/* seq_cst: the load half of the ndeep pattern (see Idle tick) */
	if (atomic_load_explicit(&wft_rt.ndeep, memory_order_seq_cst) > 0)
		wft_idle_strand_slow(self);
}
void wft_idle_run(struct wft_worker *w);      /* called by the scheduler loop when nothing is runnable */
void wft_idle_kick_force(struct wft_worker *w);  /* shutdown: wake w whatever its state */
void wft_idle_spin_stop(struct wft_worker *w);   /* w found work: give up its spinning slot */

#endif
