/*
 * runtime/uring.h - private interface between the per-worker io_uring
 * (runtime/uring.c), the blocking I/O calls (runtime/io.c) and the offload
 * pool (runtime/offload.c). See the design comment of runtime/uring.c.
 */
#ifndef WFT_URING_H
#define WFT_URING_H

#include "runtime/wft.h"

#include <liburing.h>

/* io_uring hooks (runtime/uring.c). A worker without a ring sleeps on the futex. */
int wft_uring_setup(struct wft_worker *w);
void wft_uring_teardown(struct wft_worker *w);
unsigned wft_uring_poll(struct wft_worker *w);                 /* submit + reap; owner */
void wft_uring_wait(struct wft_worker *w, weft_time_t deadline); /* idle sleep; owner */
void wft_uring_kick(struct wft_worker *w);                     /* any */

/*
 * user_data of an SQE: either the address of the struct wft_waiter of the
 * weft thread that waits for the CQE (always >= WFT_URING_TAG_MAX: it is a
 * stack or heap address), or one of these tags, which the reaper handles
 * itself. liburing's own internal timeout (LIBURING_UDATA_TIMEOUT, all ones)
 * is ignored like WFT_URING_TAG_IGNORE.
 */
enum {
	WFT_URING_TAG_IGNORE = 0,   /* linked timeouts: their CQE carries nothing we need */
	WFT_URING_TAG_KICK = 1,     /* the kick (the eventfd poll) */
	WFT_URING_TAG_MAX = 4096,
};

/* Features a ring was set up without, or the kernel refused at their first
 * use (EINVAL from an older kernel, or WEFT_FAULT): each has a fallback,
 * taken from then on by the whole runtime (sticky until the next
 * weft_init, which calls wft_uring_reset_unsafe), and reported by
 * wft_uring_describe. Set with a relaxed fetch_or: a hint read with
 * relaxed loads; a thread that misses a fresh bit only meets the refusal
 * once more. */
enum {
	WFT_URING_NO_KICK_MULTISHOT = 1,   /* kicks use a one-shot poll (uring.c Kick) */
	WFT_URING_NO_ACCEPT_DONTWAIT = 2,  /* accept skips phase 1 (io.c) */
	WFT_URING_NO_POLL_FIRST = 4,       /* receives wait without POLL_FIRST (io.c) */
	WFT_URING_NO_RING_FD = 8,          /* io_uring_enter on the plain ring fd */
};
extern _Atomic unsigned wft_uring_refused;
static inline void wft_uring_refuse(unsigned bit)
{
	atomic_fetch_or_explicit(&wft_uring_refused, bit, memory_order_relaxed);
}
static inline bool wft_uring_is_refused(unsigned bit)
{
	return atomic_load_explicit(&wft_uring_refused, memory_order_relaxed) & bit;
}
/* Clear the refusals for a new runtime. Context: weft_init, no worker runs. */
void wft_uring_reset_unsafe(void);

/* Opcodes the I/O layer uses; a bitmap of the ones the kernel supports is
 * probed once per ring. */
#define WFT_URING_OPS_WORDS ((IORING_OP_LAST + 63) / 64)

struct wft_uring {
	struct io_uring ring;        /* owner only (SINGLE_ISSUER) */
	unsigned setup_flags;        /* IORING_SETUP_* that the kernel accepted */
	unsigned held;               /* polls that postponed a due flush; owner */
	int efd;                     /* kick eventfd; written by kickers, -1 if none */
	bool kick_armed;             /* the poll on efd is live; owner */
	bool kick_oneshot;           /* kernel lacks multishot poll; owner */
	uint64_t ops[WFT_URING_OPS_WORDS];  /* supported opcodes; written at setup */
	/* Kick lifetime, see "Kick" in uring.c. */
	_Atomic int kickers wft_cacheline_aligned;
	_Atomic int closing;
};

/* Is opcode op supported by w's ring? Context: owner worker. */
static inline bool wft_uring_has_op(const struct wft_uring *r, unsigned op)
{
	return op < IORING_OP_LAST && ((r->ops[op / 64] >> (op % 64)) & 1);
}

/* Return a free SQE of w's ring with at least `need` - 1 more free SQEs
 * behind it (for a linked timeout), submitting what is queued first if the
 * SQ is too full. The SQE is submitted by the worker's next flush (see
 * "Batching" in uring.c). Context: weft thread running on w. */
struct io_uring_sqe *wft_uring_get_sqe(struct wft_worker *w, unsigned need);

/* Human-readable description of the I/O backend of the running (or last)
 * runtime: "io_uring (SINGLE_ISSUER|...; kick=eventfd) on 2/2 workers" or
 * "offload pool (...)". Returns 1 if any worker has a ring, 0 otherwise.
 * Context: any. */
int wft_uring_describe(char *buf, size_t len);

/* errno of the OS thread running the caller now; code that may run after
 * a park uses these instead of errno (see "errno and migration" in io.c).
 * Context: any. */
void wft_set_errno(int e);
int wft_get_errno(void);

/* Offload pool (runtime/offload.c). */

/* Take/drop a reference on the pool and the fallback poller: each worker
 * takes one in wft_uring_setup and drops it in wft_uring_teardown; the last
 * drop stops and joins the helper threads. Context: a worker's OS thread. */
void wft_offload_ref(void);
void wft_offload_unref(void);

/* Run fn(arg) on a helper OS thread while the calling weft thread parks;
 * errno of the helper after fn is copied into *err. Counted in `offloads`.
 * Returns fn's result. Context: weft thread. May park: yes. */
void *wft_offload_run(void *(*fn)(void *), void *arg, int *err);

/* Wait until fd reports one of events (poll(2) bits) or the deadline
 * passes, parking the calling weft thread while the fallback poller thread
 * watches the fd. Returns the revents (> 0), or 0 at the deadline.
 * Context: weft thread. May park: yes. */
int wft_offload_wait_fd(int fd, short events, weft_time_t deadline);

#endif
