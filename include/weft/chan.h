/*
 * weft/chan.h - channels: bounded FIFO queues of fixed-size elements between
 * threads, with blocking, try and timed send/receive, close, and select.
 *
 * A channel carries elements of one size (fixed at creation) by value: send
 * copies elem_size bytes out of the caller's buffer, receive copies them into
 * it. A channel of capacity 0 is a rendezvous: a send completes only when a
 * receiver takes the element (and the other way round). A channel of capacity
 * N buffers up to N elements; a send blocks only when the buffer is full and a
 * receive only when it is empty.
 *
 * Ordering: elements sent by one thread are received in the order it sent
 * them (FIFO per sender). Elements of different senders interleave in the
 * order their sends completed.
 *
 * Close: after weft_chan_close() every send fails with EPIPE (senders blocked
 * at the time of the close wake up with EPIPE; their elements are not
 * delivered). Receivers first drain what is buffered, then get EPIPE.
 *
 * Blocking: a weft thread parks (its worker runs other threads); a plain OS
 * thread sleeps on a futex. Both kinds may use the same channel at the same
 * time. A blocked operation wakes exactly the one peer that can complete with
 * it; only close wakes everybody (each of them can proceed, with EPIPE).
 *
 * Deadlines are absolute CLOCK_MONOTONIC times in nanoseconds (weft_now_ns()),
 * WEFT_TIME_INFINITE meaning none.
 *
 * Every call returns 0 or a positive errno value (pthread style).
 * Context of every call: any (weft thread or OS thread), unless stated.
 */
#ifndef WEFT_CHAN_H
#define WEFT_CHAN_H

#include <weft/common.h>

WEFT_EXTERN_C_BEGIN

/* A channel. Opaque: created by weft_chan_create(), freed by weft_chan_destroy(). */
typedef struct weft_chan weft_chan_t;

/* Largest element, in bytes. Elements are copied under the channel's internal
 * lock, so a channel is meant for small values (pass pointers for big ones). */
#define WEFT_CHAN_ELEM_MAX (64 * 1024)

/* Most cases one weft_chan_select() call may have. */
#define WEFT_CHAN_SELECT_MAX 1024

/* Create a channel of elements of elem_size bytes holding up to capacity
 * buffered elements (0 = rendezvous). Returns 0 (and *ch), EINVAL (ch NULL,
 * elem_size 0 or above WEFT_CHAN_ELEM_MAX, elem_size * capacity overflows), or
 * EAGAIN (no memory). Does not need the runtime to be running. */
WEFT_API int weft_chan_create(weft_chan_t **ch, size_t elem_size, size_t capacity);

/* Free a channel. Buffered elements are dropped. Returns 0, EINVAL (ch NULL), or
 * EBUSY (a thread is blocked on it: a send, receive or select that has not
 * completed; nothing is freed). A select that has already completed on
 * another channel, or timed out, may still have to unlink itself from ch for
 * a moment: destroy then waits for it (it needs only ch's internal lock) and
 * returns 0. So "send on A, which completes a select on {A, B}; close B;
 * destroy B" is safe. May park: briefly, only in that case. */
WEFT_API int weft_chan_destroy(weft_chan_t *ch);

/* Send the element at elem, blocking while the channel is full (or, for a
 * rendezvous channel, until a receiver takes it). Returns 0, EPIPE (closed,
 * before or while blocked; the element was not sent), EINVAL (ch or elem NULL). */
WEFT_API int weft_chan_send(weft_chan_t *ch, const void *elem);

/* Like weft_chan_send() but never blocks: returns EAGAIN if the element cannot
 * be sent at once (full buffer, or no receiver waiting on a rendezvous channel). */
WEFT_API int weft_chan_trysend(weft_chan_t *ch, const void *elem);

/* Like weft_chan_send() but gives up at deadline: returns ETIMEDOUT (not sent). */
WEFT_API int weft_chan_timedsend(weft_chan_t *ch, const void *elem, weft_time_t deadline);

/* Receive the oldest element into elem, blocking while the channel is empty.
 * Returns 0, EPIPE (closed and nothing left to receive), EINVAL (ch or elem NULL). */
WEFT_API int weft_chan_recv(weft_chan_t *ch, void *elem);

/* Like weft_chan_recv() but never blocks: returns EAGAIN if nothing can be
 * received at once. */
WEFT_API int weft_chan_tryrecv(weft_chan_t *ch, void *elem);

/* Like weft_chan_recv() but gives up at deadline: returns ETIMEDOUT. */
WEFT_API int weft_chan_timedrecv(weft_chan_t *ch, void *elem, weft_time_t deadline);

/* Close the channel (see Close above). Returns 0, EINVAL (ch NULL), or EPIPE
 * (already closed). */
WEFT_API int weft_chan_close(weft_chan_t *ch);

/* Number of buffered elements, capacity. 0 if ch is NULL. A snapshot only. */
WEFT_API size_t weft_chan_len(weft_chan_t *ch);
WEFT_API size_t weft_chan_cap(weft_chan_t *ch);

/* --- Select --- */

/* Operation of a select case. */
enum {
	WEFT_CHAN_SEND = 1,
	WEFT_CHAN_RECV = 2,
};

/* One case of weft_chan_select(): send *elem to chan, or receive from chan
 * into *elem. A case whose chan is NULL is disabled (never chosen), so a
 * select loop can switch cases off without rebuilding the array. */
typedef struct weft_chan_case {
	weft_chan_t *chan;
	int op;              /* WEFT_CHAN_SEND or WEFT_CHAN_RECV */
	void *elem;          /* send: the element; recv: where to put it */
} weft_chan_case_t;

/* Complete exactly one of the ncases cases, blocking until one can complete or
 * deadline passes (WEFT_TIME_INFINITE: no deadline). When several cases are
 * ready, the one chosen is not specified (the scan starts at a varying case, so
 * none is starved). *chosen receives the index of the completed case.
 * Returns 0 (case *chosen completed), EPIPE (case *chosen is on a closed
 * channel: a send, or a receive with nothing left), ETIMEDOUT (no case
 * completed; *chosen untouched), EINVAL (cases or chosen NULL, ncases above
 * WEFT_CHAN_SELECT_MAX, a bad op, an enabled case with elem NULL, or no enabled
 * case and no deadline), EAGAIN (no memory for more than a few cases). */
WEFT_API int weft_chan_select(weft_chan_case_t *cases, size_t ncases, size_t *chosen,
			      weft_time_t deadline);

/* Like weft_chan_select() but never blocks: returns EAGAIN if no case can
 * complete at once. */
WEFT_API int weft_chan_tryselect(weft_chan_case_t *cases, size_t ncases, size_t *chosen);

WEFT_EXTERN_C_END

#endif
