/*
 * runtime/gang.h - the hooks through which threads, spawn and shutdown
 * reach the gang scheduler (runtime/gang.c).
 */
#ifndef WFT_GANG_H
#define WFT_GANG_H

#include "runtime/thread.h"

/* A gang scheduling point of the calling member
 * m (weft_yield): if its gang's slice is over, park until its next turn.
 * Context: m's own thread. */
struct wft_gang_member;
void wft_gang_yield_point(struct wft_gang_member *m);
/* weft_spawn with a gang in attr (weft_attr_setgang: attr->reserved[0]):
 * spawn the gang's next member. Returns weft_spawn's codes; EINVAL also
 * for a gang that is not live, joined, or full. Context: any. */
int wft_gang_spawn_attr(weft_thread_t *out, weft_fn_t fn, void *arg, const weft_attr_t *attr);
/* The calling member t (t->in_gang) calls weft_exit: it leaves its gang
 * as if its function had returned. Context: t's own thread. */
void wft_gang_exit(struct weft_thread *t);
/* Stop the slice ticker and forget the gang matrix (weft_shutdown, after
 * every light thread has finished). Context: the shutting-down OS thread. */
void wft_gang_shutdown_unsafe(void);

#endif
