/*
 * weft/stats.h - per-worker scheduler counters, summed on read.
 */
#ifndef WEFT_STATS_H
#define WEFT_STATS_H

#include <stdio.h>
#include <weft/common.h>

WEFT_EXTERN_C_BEGIN

/* One field per counter; the list lives in runtime/stats.def. */
typedef struct weft_stats {
	uint64_t switches;        /* light-thread context switches */
	uint64_t migrations;      /* a thread resumed on another worker than last time */
	uint64_t steals;          /* threads taken from another worker's runqueue */
	uint64_t steal_attempts;  /* steal tries (successful or not) */
	uint64_t wakes_local;     /* wakeups of a thread onto the waker's own worker */
	uint64_t wakes_remote;    /* wakeups pushed into another worker's mailbox */
	uint64_t wakes_locked;    /* remote wakeups that locked the target (NO_MAILBOX) */
	uint64_t kicks;           /* syscalls made to wake a parked worker */
	uint64_t parks;           /* times a worker slept in the kernel */
	uint64_t thread_parks;    /* times a light thread parked */
	uint64_t spawns;          /* threads created */
	uint64_t exits;           /* threads finished */
	uint64_t yields;          /* weft_yield calls */
	uint64_t timers_fired;    /* expired deadlines (sleeps, timed parks) */
	uint64_t next_slot;       /* picks from the next slot */
	uint64_t mutex_spins;     /* mutex spin phases started */
	uint64_t mutex_spin_wins; /* spin phases that got the lock */
	uint64_t mutex_spin_aborts; /* spin phases given up (owner off cpu, need_resched, budget) */
	uint64_t mutex_parks;     /* mutex waiters that parked */
	uint64_t mutex_handoffs;  /* unlocks that handed the lock to a starving waiter */
	uint64_t wakeq_flushes;   /* wake-queue flushes */
	uint64_t wakeq_batches;   /* per-worker batches spliced by those flushes */
	uint64_t io_sqes;         /* io_uring submissions */
	uint64_t io_enters;       /* io_uring_enter calls */
	uint64_t io_cqes;         /* io_uring completions */
	uint64_t offloads;        /* blocking calls run on the offload pool */
	uint64_t spin_backoffs;   /* idle spinning paused because the worker's CPU was contended */
	uint64_t next_steals;     /* threads taken from a busy worker's next slot (in steals too) */
	uint64_t stack_maps;      /* thread stacks mapped (cache misses: mmap calls) */
	uint64_t stack_trims;     /* cached stacks unmapped by the idle trim */
	uint64_t drain_moves;     /* wakes sent elsewhere: the thread's last worker drains (DRAIN) */
	uint64_t drain_probes;    /* DRAIN throughput probes run (one worker more or fewer draining) */
	uint64_t drain_raises;    /* DRAIN probes after which one more worker drains */
	uint64_t chain_kicks;     /* kicks made for someone else's wake: kick chain steps,
				   * kick-gate hand-overs, claims of an idle worker, mailbox rescues */
	uint64_t place_affine;    /* wakes placed on the waker's worker: the last worker was parked */
	uint64_t place_wide;      /* wakes of a 1:N waker (wake_wide) not pulled to the waker's worker */
	uint64_t place_awake;     /* wakes moved off a parked last worker: to a spinning worker, or
	                           * to the one worker a batch (wake-queue flush) kicks */
	uint64_t oncpu_yields;    /* dispatches that gave the CPU back while the thread's previous
	                           * worker, preempted by the kernel, finished switching it out */
	uint64_t gang_slices;     /* time slices given to gangs (one per gang per turn) */
	uint64_t gang_codispatches; /* gang slices in which every member released from a hold
	                           * resumed before the slice ended */
	uint64_t gang_codispatch_ns; /* their co-dispatch latency summed: ns from the first released
	                           * member resuming to the last (mean: divide by gang_codispatches) */
	uint64_t gang_spin_aborts; /* gang spin steps given up because a peer was not running */
} weft_stats_t;
/* 42 counters' room, all taken: a new counter needs a new ABI version. */
_Static_assert(sizeof(weft_stats_t) == 42 * sizeof(uint64_t), "weft_stats_t size is ABI");

/* Sum every worker's counters into *s. Returns 0, or EINVAL if s is NULL.
 * Counters keep their values after weft_shutdown() until the next weft_init().
 * Context: any. */
WEFT_API int weft_stats_get(weft_stats_t *s);

/* Print the counters as a perf-stat-like table to f (stderr if NULL).
 * Returns 0. Context: any. */
WEFT_API int weft_stats_print(FILE *f);

WEFT_EXTERN_C_END

#endif
