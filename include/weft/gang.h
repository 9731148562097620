/*
 * weft/gang.h - gang scheduling: groups of light threads that run at the
 * same time, on distinct workers, or not at all.
 *
 * A gang has K members (K <= the number of workers). With the GANG feature
 * on (the default), each member is placed on its own worker, and the gangs
 * whose workers overlap take turns in time slices: during its slice a gang's
 * members may run; when the slice ends they step aside at their next gang
 * scheduling point (weft_gang_spin_until, weft_gang_barrier_wait,
 * weft_gang_yield, weft_yield) until their gang's next turn. Gangs on
 * disjoint workers run at the same time. The spin helper and the barrier
 * spin only while every peer is running on a worker and yield otherwise, so
 * a member never burns its worker waiting for a peer that cannot make
 * progress. docs/gangs.md has the design and the measurements.
 *
 * With GANG off (WEFT_FEATURES=NO_GANG), members are ordinary threads and
 * the spin helper spins for a bounded time, then yields: the A/B baseline.
 *
 * Contexts: "weft thread", "OS thread" (a plain pthread, main() included)
 * and "any", as in weft/thread.h. Every call returns 0 or a positive errno
 * value (pthread style) unless stated; in the child of a fork (weft(7))
 * create, spawn, join, destroy and info return ENOTSUP.
 */
#ifndef WEFT_GANG_H
#define WEFT_GANG_H

#include <weft/common.h>
#include <weft/thread.h>

WEFT_EXTERN_C_BEGIN

/* A gang handle, valid from weft_gang_create() until weft_gang_destroy(). */
typedef struct weft_gang *weft_gang_t;

/* Gang attributes: initialise with WEFT_GANG_ATTR_INITIALIZER and set
 * fields directly; the layout is part of the ABI. */
typedef struct weft_gang_attr {
	uint64_t slice_ns;   /* the gang's time slice; 0 = the default
			      * (WEFT_GANG_SLICE_US in the environment, else
			      * WEFT_GANG_SLICE_DEFAULT_NS); else
			      * WEFT_GANG_SLICE_MIN_NS..WEFT_GANG_SLICE_MAX_NS */
	void *reserved[4];   /* must be zero */
} weft_gang_attr_t;

#define WEFT_GANG_ATTR_INITIALIZER { 0, { NULL, NULL, NULL, NULL } }
#define WEFT_GANG_SLICE_DEFAULT_NS 2000000ull    /* 2 ms */
#define WEFT_GANG_SLICE_MIN_NS 100000ull         /* 100 us */
#define WEFT_GANG_SLICE_MAX_NS 1000000000ull     /* 1 s */

/* What weft_gang_info() reports. */
typedef struct weft_gang_info {
	unsigned k;          /* members the gang was created for */
	unsigned members;    /* members spawned so far */
	uint64_t slice_ns;   /* its time slice */
	uint64_t slices;     /* slices it was given (turns; 0 with GANG off) */
	uint64_t runs;       /* of those, slices in which a held member resumed */
	uint64_t reserved[4];
} weft_gang_info_t;

/* Create a gang of k members and choose its workers (k distinct ones). If
 * the runtime is not running it is started with the default configuration.
 * attr may be NULL for defaults. Returns 0 (and *g), EINVAL (g NULL, k 0
 * or more than the number of workers, a slice outside the limits, a
 * non-zero reserved field), EAGAIN (no memory), or the error of the
 * implicit weft_init(). Context: any. May park: no (it takes the gangs'
 * lock for a few microseconds). */
WEFT_API int weft_gang_create(weft_gang_t *g, unsigned k, const weft_gang_attr_t *attr);

/* Spawn the gang's next member (member i for the i-th call, i from 0)
 * running fn(arg). attr may be NULL; its worker must be -1 (the gang
 * places its members) and detached 0 (weft_gang_join joins them); stack
 * size, guard and name apply. The member may run at once; if its gang's
 * slice is not current it steps aside at its first gang scheduling point.
 * Returns 0, EINVAL (g or fn NULL, g not a live gang, the gang already
 * has its k members, the gang is joined, attr->worker not -1,
 * attr->detached set, attr's gang (weft_attr_setgang) neither NULL nor g,
 * or another bad attribute as for weft_spawn), EAGAIN (no memory).
 * Context: any.
 * May park: no. */
WEFT_API int weft_gang_spawn(weft_gang_t g, weft_fn_t fn, void *arg, const weft_attr_t *attr);

/* Make weft_spawn(t, fn, arg, attr) add the new thread to g as its next
 * member: the attribute path to a gang (g NULL clears it). The gang is
 * kept in attr->reserved[0], so weft_attr_t keeps its size and layout.
 * Nothing is checked here; weft_spawn then behaves as weft_gang_spawn(g,
 * fn, arg, attr) and also stores the member's handle in *t if t is not
 * NULL (t may be NULL). That handle is for weft_unpark, weft_thread_name
 * and the like until weft_gang_join returns: the gang owns the join, so
 * never pass it to weft_join or weft_detach. weft_spawn returns 0, or
 * EINVAL when g is not a live gang (never created, or destroyed), is
 * joined or being joined, already has its k members (each spawn adds a
 * new thread and each member slot is filled once, so no thread is ever a
 * member twice), when attr->worker is not -1 or attr->detached is set,
 * or for another bad attribute as for weft_spawn; EAGAIN (no memory).
 * The same attr may be used for several spawns (one member each).
 * Returns 0 or EINVAL (attr NULL). Context: any. May park: no. */
WEFT_API int weft_attr_setgang(weft_attr_t *attr, weft_gang_t g);

/* Wait for every member spawned so far to finish; rets (if not NULL)
 * receives member i's return value in rets[i] (an array of k pointers).
 * After it the gang takes no more members and no more slices.
 * Returns 0, EINVAL (g NULL or not a live gang, or the gang is already
 * joined or being joined), EDEADLK (the caller is a member of g). Context: any.
 * May park: yes (a weft thread parks; an OS thread sleeps). */
WEFT_API int weft_gang_join(weft_gang_t g, void **rets);

/* Free g. Returns 0, EINVAL (g NULL, or not a live gang: destroyed
 * already), EBUSY (members were spawned and the gang is not joined yet,
 * or a join is in progress). After 0 the handle is invalid. Context: any.
 * May park: no. */
WEFT_API int weft_gang_destroy(weft_gang_t g);

/* Report g's size and its turns so far into *info. Returns 0 or EINVAL (g
 * or info NULL, g not a live gang). Context: any. May park: no. */
WEFT_API int weft_gang_info(weft_gang_t g, weft_gang_info_t *info);

/* The calling thread's member index in its gang, or -1 if the caller is
 * not a gang member (or an OS thread). Context: any. */
WEFT_API int weft_gang_index(void);

/* Spin until pred(arg) returns non-zero. A member of a gang (GANG on)
 * spins only while every other member of its gang is running on a worker;
 * when one is not (parked, queued, not started, finished) it yields
 * instead (counted as gang_spin_aborts in weft_stats), and when its
 * gang's slice is over it steps aside until the gang's next turn. Any
 * other caller, and every caller with GANG off, spins for a bounded time
 * (WEFT_GANG_SPIN_NS), then yields, and spins again. pred runs on the
 * caller's thread, many times; it must not block. Returns 0, or EINVAL
 * (pred NULL). Context: any (an OS thread spins, then sched_yield()s).
 * May park: yes (a member steps aside by parking). */
WEFT_API int weft_gang_spin_until(int (*pred)(void *arg), void *arg);
/* The bounded spin of a non-member (or with GANG off) between yields. */
#define WEFT_GANG_SPIN_NS 10000u

/* A gang scheduling point: a member whose gang's slice is over steps
 * aside until its next turn; otherwise (and for any other caller) the
 * same as weft_yield(). Returns 0. Context: any. May park: yes. */
WEFT_API int weft_gang_yield(void);

/* A spin barrier for count threads built on weft_gang_spin_until (so it
 * obeys the gang rules above). Typically count is the gang's k. */
typedef struct weft_gang_barrier {
	uint64_t opaque_[4];
} weft_gang_barrier_t;

/* Initialise b for groups of count threads. Returns 0 or EINVAL (b NULL,
 * count 0). Context: any; no concurrent use of b. */
WEFT_API int weft_gang_barrier_init(weft_gang_barrier_t *b, unsigned count);
/* Arrive and spin until count threads have arrived. Returns
 * WEFT_BARRIER_SERIAL_THREAD (weft/sync.h: -1) to the last arriver of
 * each generation, 0 to the others, or EINVAL (b NULL or not
 * initialised). Context: any. May park: yes (as weft_gang_spin_until). */
WEFT_API int weft_gang_barrier_wait(weft_gang_barrier_t *b);
/* Destroy b. Returns 0, EINVAL (b NULL or not initialised), EBUSY
 * (threads are waiting). Context: any. May park: no. */
WEFT_API int weft_gang_barrier_destroy(weft_gang_barrier_t *b);

#if !defined(__cplusplus)
_Static_assert(sizeof(weft_gang_attr_t) == 8 + 4 * sizeof(void *), "weft_gang_attr_t size is ABI");
_Static_assert(sizeof(weft_gang_info_t) == 64, "weft_gang_info_t size is ABI");
_Static_assert(sizeof(weft_gang_barrier_t) == 32, "weft_gang_barrier_t size is ABI");
#endif

WEFT_EXTERN_C_END

#endif
