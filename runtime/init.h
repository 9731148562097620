/*
 * runtime/init.h - the runtime object wft_rt (workers, idle and DRAIN
 * state, shutdown's counts) and its life cycle states (runtime/init.c).
 */
#ifndef WFT_INIT_H
#define WFT_INIT_H

#include "runtime/drain.h"

struct wft_worker;

/* wft_rt.state. weft_init and weft_shutdown pass through CHANGING with
 * init_lock held; only RUNNING means the workers exist. */
enum wft_rt_state {
	WFT_RT_STOPPED = 0,
	WFT_RT_CHANGING = 1,              /* starting or stopping */
	WFT_RT_RUNNING = 2,
};

struct wft_runtime {
	_Atomic enum wft_rt_state state;  /* runtime/init.c */
	int nworkers;
	int ncpu;                         /* CPUs this process may run on (affinity) */
	uint64_t seed;                    /* of the workers' rng (WEFT_SEED, init.c) */
	size_t stack_size;
	int pin;
	struct wft_worker **workers;
	_Atomic int nspinning;            /* workers spinning for work */
	/* idle.c "Contended CPUs": no worker spins before spin_off_until;
	 * spin_backoff is the current back-off (ns, 0 = none). Hints. */
	_Atomic uint64_t spin_off_until;
	_Atomic uint64_t spin_backoff;
	_Atomic int nidle;                /* workers that announced idle (parked or parking) */
	_Atomic int ndeep;                /* idle workers parking without the idle tick,
	                                   * deep or dozing (idle.c "Idle tick") */
	_Atomic int looker;               /* (id + 1) << 1 of the idle worker that ticks
	                                   * for the others, 0 = none; bit 0: a strander
	                                   * relied on it (idle.c "Idle tick") */
	_Atomic int nkicked;              /* workers kicked that have not stored AWAKE yet
	                                   * (idle.c "Kick gate") */
	_Atomic uint64_t idle_mask[WEFT_WORKERS_MAX / 64]; /* bit i: worker i parked */
	/* bit i: worker i has mail and its kick is left to the kick chain
	 * (idle.c "Kick chain"); its own line, written by wakers */
	_Atomic uint64_t kick_pending[WEFT_WORKERS_MAX / 64] wft_cacheline_aligned;
	/* DRAIN (runtime/drain.c): the ndrain highest-id workers drain; its
	 * own line (read at every placement, kick_pending above is written
	 * by wakers) */
	_Atomic int ndrain wft_cacheline_aligned;
	_Atomic uint64_t drain_next;      /* the controller's next run */
	_Atomic int drain_busy;           /* the controller's try-lock */
	struct wft_drain_ctl drain;       /* the controller's state, under drain_busy */
	_Atomic long os_born;             /* spawns from plain OS threads */
	_Atomic int quiescing;            /* shutdown is waiting for the last exit */
	_Atomic int stopping;             /* workers exit their loop */
	pthread_mutex_t init_lock;        /* weft_init / weft_shutdown only */
	_Atomic uint32_t quiesce;         /* futex: an exit while quiescing (shutdown waits) */
	_Atomic uint32_t nready;          /* futex: workers done with their setup (init waits) */
	int cpus[WEFT_WORKERS_MAX];       /* CPU of worker i when pinning */
};
extern struct wft_runtime wft_rt;

/* Live light threads (shutdown waits for 0): see wft_count_birth() in
 * runtime/worker.h. */
long wft_live_threads(void);
/* The slow half of wft_count_death(): an exit while shutdown waits. */
void wft_count_death_quiescing(void);

#endif
