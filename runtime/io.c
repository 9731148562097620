/*
 * runtime/io.c - blocking I/O calls for weft threads (include/weft/io.h).
 *
 * What it owns: the weft_io_* calls, the per-thread I/O timeout, the one
 * place where an io_uring result becomes -1/errno (io_ret), and the
 * fallback used when the worker has no ring.
 *
 * Every call takes one of three paths, chosen per call (io_path):
 *   OS       - no weft thread is running (a plain OS thread, or the runtime
 *              is stopped): the plain system call.
 *   URING    - the worker the thread runs on has a ring that supports the
 *              opcode: queue one SQE (plus a linked timeout if the thread
 *              has an I/O timeout) whose user_data is a wft_waiter on this
 *              stack frame, and wait on the waiter (runtime/waiter.c). The
 *              worker submits and reaps (runtime/uring.c, Batching).
 *   FALLBACK - no ring (NO_URING, io_uring unavailable, opcode missing):
 *              see Fallback below.
 *
 * Invariants:
 *   I1 The waiter, the linked timeout's timespec and everything the SQE
 *      points to (buffers, iovecs, msghdr, sockaddr, path) live in the
 *      caller's frame, which stays put until the CQE was reaped: the thread
 *      does not return from wft_waiter_wait before the reaper stores WOKEN
 *      (uring.c I2). The kernel reads the timespec at submission, which
 *      also comes before the CQE.
 *   I2 After the wait, the worker pointer taken before it is never used
 *      again: the thread may have migrated (uring.c I3).
 *   I3 A negative io_uring res is turned into -1/errno only in io_ret().
 *   I4 Code that may run after a park touches errno only through
 *      wft_set_errno()/wft_get_errno() (see "errno and migration" below).
 *
 * Non-blocking descriptors. io_uring (checked on 6.18) waits on a pollable
 * descriptor even if it is O_NONBLOCK: it arms an internal poll instead of
 * returning EAGAIN. The calls must still fail with EAGAIN there, but a
 * fcntl(F_GETFL) before every call would add a syscall to each operation
 * and undo the batching. So the read/write/recv/send/accept families run in
 * two phases (uring_op):
 *   phase 1 - the no-wait form (RWF_NOWAIT, MSG_DONTWAIT,
 *             IORING_ACCEPT_DONTWAIT), batched like any SQE. It completes at
 *             submission: with data, a count or an error - done, no extra
 *             cost - or with -EAGAIN;
 *   phase 2 - only after -EAGAIN: one fcntl(F_GETFL). O_NONBLOCK (and not a
 *             regular file, where read(2) ignores the flag): return EAGAIN.
 *             Otherwise queue the waiting form, with the linked timeout; a
 *             receive sets IORING_RECVSEND_POLL_FIRST (we know the socket
 *             is empty, so the kernel arms its poll without a doomed try).
 * So an operation that completes at once costs one SQE, and one that has
 * to wait costs two SQEs, one fcntl and one extra park. A MSG_WAITALL
 * receive (the no-wait form would return a partial message) and connect
 * (EINPROGRESS) read the flag first instead; so does accept on kernels
 * before 6.10, which reject IORING_ACCEPT_DONTWAIT (detected once).
 *
 * Wait hint (WAIT_HINT). Most receives of a
 * request/response connection have to wait:
 * the thread asks for the next request right after sending a response, and
 * the peer has not even read the response yet. Phase 1 then only costs: an
 * SQE, a failed receive in the kernel, a CQE and a park/switch round trip.
 * So each descriptor below HINT_FDS has a small per-direction counter
 * (wait_hint): a phase 1 that returned EAGAIN on a blocking descriptor
 * sets it to HINT_PROBE_EVERY; while it is non-zero, calls skip phase 1 -
 * fcntl(F_GETFL) first, then straight to the waiting form with POLL_FIRST
 * (an O_NONBLOCK descriptor gets the plain syscall, which cannot block) -
 * and count it down, so a descriptor whose data turned out to be ready is
 * re-probed within HINT_PROBE_EVERY calls. The hint is never trusted for a
 * result, only for which of two correct sequences to try first: a stale
 * value (another thread, a reused descriptor number) costs one wasted
 * phase 1 or one fcntl. With Direct sends as well, it takes an HTTP
 * request from three parks, SQEs and CQEs to about one (docs/design.md
 * "Measured alternatives").
 *
 * Direct sends (SEND_DIRECT). Phase 1 of
 * send/sendmsg can be the non-blocking syscall itself
 * (MSG_DONTWAIT | MSG_NOSIGNAL: io_uring's send never raises SIGPIPE, so
 * this path does not either), not an SQE: a send to a socket with buffer
 * room always completes at once, and as an SQE it cost a park, a switch,
 * a CQE and a reap just to learn the count. The syscall entry (~0.2 us
 * here) is cheaper than that round trip, and the response leaves at once
 * instead of at the end of the round. A send that finds the buffer full
 * continues as phase 2 on the ring (it waits there, batched). With both,
 * a request/response costs one SQE and one park: the receive that waits
 * (with the hint alone, two: the send's phase 1 is an SQE again).
 *
 * Timeouts. weft_io_set_timeout() stores a relative timeout in a weft key
 * (so it follows the thread across workers). URING: the SQE is linked
 * (IOSQE_IO_LINK) to an IORING_OP_LINK_TIMEOUT; if the timeout fires first,
 * the operation completes with -ECANCELED, reported as ETIMEDOUT (a partial
 * transfer reports its count instead, as the kernel does). The call also
 * waits for the timeout's own CQE: a timeout that fired cancels by
 * user_data, possibly after the operation's CQE, and would hit the
 * caller's next operation, which reuses the address (uop_wait).
 * FALLBACK: the timeout bounds the readiness wait (a deadline for the park).
 *
 * Fallback. A worker without a ring must never block in a system call, or
 * it would stall all its threads. So:
 *   - pollable descriptors (sockets, pipes, ttys, eventfds): try the call
 *     without blocking (MSG_DONTWAIT for the socket calls, preadv2 /
 *     pwritev2 with RWF_NOWAIT for read/write); on EAGAIN return EAGAIN if
 *     the descriptor itself is O_NONBLOCK (the caller asked for that), else
 *     park until the fallback poller (offload.c) sees it ready, and retry;
 *   - everything else (regular files and block devices, where RWF_NOWAIT
 *     says EAGAIN/EOPNOTSUPP for uncached data; openat, fsync, connect on a
 *     blocking socket, accept after its readiness wait): run the blocking
 *     call on the offload pool (offload.c) while the thread parks;
 *   - close: the plain syscall (it does not block, except with SO_LINGER).
 * A bounded pool running blocking recvs would deadlock with a thousand idle
 * connections; the readiness wait holds no helper thread, so the fallback
 * scales to any number of connections (slower than io_uring: one poll
 * round trip through the poller thread per wait).
 *
 * Rejected alternatives:
 *   - running every fallback call on the pool: a blocking recv holds a
 *     helper until data comes, so 1,000 connections need 1,000 helpers or
 *     deadlock (the sends that would unblock them queue behind them);
 *   - switching descriptors to O_NONBLOCK behind the caller's back: visible
 *     to the application and to other processes sharing the file;
 *   - phase 1 of receives as a direct non-blocking syscall (saves a park
 *     when data is ready): one syscall per call instead of a share of one
 *     io_uring_enter per batch, and a receive usually has to wait anyway
 *     (Wait hint). Sends can go direct (Direct sends, SEND_DIRECT); calls
 *     with MSG_DONTWAIT do: they cannot park anyway;
 *   - fcntl(F_GETFL) before every call, or a per-fd cache of the flag: the
 *     first costs a syscall per operation; the second goes stale silently
 *     when the application calls fcntl() or reuses the descriptor number.
 *     (A call the Wait hint sends straight to the waiting form does check
 *     the flag first: that fcntl replaces a doomed phase 1, which cost more.)
 *     The three measured within noise of each other (docs/design.md
 *     "Measured alternatives"), so the cheapest correct form was kept.
 */
#include "runtime/wft.h"
#include "runtime/uring.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <weft/io.h>

/* Linux caps a single read/write at INT_MAX rounded down to a page
 * (MAX_RW_COUNT); the SQE length field is 32 bits. */
#define RW_MAX 0x7ffff000u

/* ---------------------------------------------------------------------- */
/* errno and migration */

#if defined(__has_attribute)
#if __has_attribute(noipa)
#define WFT_OPAQUE __attribute__((noinline, noipa))
#endif
#endif
#ifndef WFT_OPAQUE
#define WFT_OPAQUE __attribute__((noinline))
#endif

/* glibc declares __errno_location() const, so within one function the
 * compiler may compute &errno once and reuse the address after a park,
 * when the thread runs on another worker's OS thread: the write lands in
 * the old worker's errno (seen: fb_rw's ETIMEDOUT after a poller wait came
 * back as the old thread's EAGAIN). Code of this layer that may run after
 * a park reads and writes errno only through these two opaque functions,
 * which compute the address afresh on every call. */
WFT_OPAQUE void wft_set_errno(int e)
{
	errno = e;
}

WFT_OPAQUE int wft_get_errno(void)
{
	return errno;
}

int weft_errno(void)
{
	return wft_get_errno();
}

/* ---------------------------------------------------------------------- */
/* Per-thread timeout */

static pthread_once_t tmo_once = PTHREAD_ONCE_INIT;
static weft_key_t tmo_key;
static _Atomic int tmo_ready;   /* tmo_key is valid */

static void tmo_key_create(void)
{
	if (weft_key_create(&tmo_key, NULL) == 0)
		/* release: publishes tmo_key; pairs with the acquire in io_timeout */
		atomic_store_explicit(&tmo_ready, 1, memory_order_release);
}

/* The calling thread's timeout in ns, 0 = none. Context: weft thread. */
static inline uint64_t io_timeout(void)
{
	/* acquire: pairs with the release in tmo_key_create (tmo_key valid) */
	if (wft_likely(!atomic_load_explicit(&tmo_ready, memory_order_acquire)))
		return 0;
	return (uint64_t)(uintptr_t)weft_getspecific(tmo_key);
}

int weft_io_set_timeout(uint64_t ns)
{
	if (!wft_thread_self())
		return EPERM;
	pthread_once(&tmo_once, tmo_key_create);
	/* acquire: as in io_timeout */
	if (!atomic_load_explicit(&tmo_ready, memory_order_acquire))
		return EAGAIN;
	return weft_setspecific(tmo_key, (void *)(uintptr_t)ns);
}

uint64_t weft_io_get_timeout(void)
{
	return wft_thread_self() ? io_timeout() : 0;
}

static inline weft_time_t deadline_of(uint64_t ns)
{
	weft_time_t now;

	if (!ns)
		return WEFT_TIME_INFINITE;
	now = wft_now();
	return ns > WEFT_TIME_INFINITE - 1 - now ? WEFT_TIME_INFINITE - 1 : now + ns;
}

/* ---------------------------------------------------------------------- */
/* Paths */

enum io_path { PATH_OS, PATH_FALLBACK, PATH_URING };

static inline enum io_path io_path(struct wft_worker *w, unsigned op)
{
	if (!w || !w->current)
		return PATH_OS;
	if (wft_likely(w->ring && wft_uring_has_op(w->ring, op)))
		return PATH_URING;
	return PATH_FALLBACK;
}

/* I3: the one conversion of an io_uring result. */
static inline ssize_t io_ret(int res)
{
	if (res < 0) {
		wft_set_errno(-res);
		return -1;
	}
	return res;
}

/* One operation on the ring, on the caller's frame (I1). */
struct uop {
	struct wft_waiter wt;
	struct wft_waiter lt_wt;        /* the linked timeout's CQE (uop_wait) */
	struct __kernel_timespec ts;
	struct io_uring_sqe *sqe;
	uint64_t tmo;
};

/* Take the SQE for an operation (and room for its linked timeout).
 * Context: weft thread on w (URING path). */
static inline struct io_uring_sqe *uop_begin(struct wft_worker *w, struct uop *op, uint64_t tmo)
{
	op->tmo = tmo;
	op->sqe = wft_uring_get_sqe(w, tmo ? 2 : 1);
	return op->sqe;
}

/* Tag the prepared SQE with our waiter, link the timeout, park until the
 * CQE. Returns the CQE's res (negative errno on failure); -ECANCELED of a
 * timed-out operation becomes -ETIMEDOUT. Context: weft thread. May park. */
static int uop_wait(struct wft_worker *w, struct uop *op)
{
	wft_waiter_init(&op->wt);
	io_uring_sqe_set_data(op->sqe, &op->wt);
	if (op->tmo) {
		/* room reserved by uop_begin; no flush can run in between (we
		 * have not switched) */
		struct io_uring_sqe *lt = io_uring_get_sqe(&w->ring->ring);

		op->ts.tv_sec = (long long)(op->tmo / 1000000000ull);
		op->ts.tv_nsec = (long long)(op->tmo % 1000000000ull);
		op->sqe->flags |= IOSQE_IO_LINK;
		io_uring_prep_link_timeout(lt, &op->ts, 0);
		wft_waiter_init(&op->lt_wt);
		io_uring_sqe_set_data(lt, &op->lt_wt);
	}
	wft_waiter_wait(&op->wt, WEFT_TIME_INFINITE);
	/* A linked timeout that fired cancels its operation by user_data
	 * (&op->wt), from task work that may run after the operation's own
	 * CQE was posted and reaped - and then it cancels our next operation,
	 * which has the same user_data (same frame): a call without a timeout
	 * failed with ECANCELED (found with the wait hint, which makes the
	 * next call a waiting one at once). The timeout's CQE is posted only
	 * after that cancel attempt, so wait for it too; it usually comes in
	 * the same reap as the operation's. */
	if (op->tmo)
		wft_waiter_wait(&op->lt_wt, WEFT_TIME_INFINITE);
	/* I2: w is stale from here on */
	if (op->wt.result == -ECANCELED && op->tmo)
		return -ETIMEDOUT;
	return op->wt.result;
}

static inline unsigned rw_len(size_t n)
{
	return n > RW_MAX ? RW_MAX : (unsigned)n;
}

/* ---------------------------------------------------------------------- */
/* Fallback (see Fallback above) */

/* A blocking call to run on the offload pool. */
enum fb_kind { FB_READV, FB_WRITEV, FB_ACCEPT, FB_CONNECT, FB_OPENAT, FB_FSYNC };

struct fb_call {
	enum fb_kind kind;
	int fd;
	int flags;
	const struct iovec *iov;
	int iovcnt;
	off_t off;              /* -1: the file position */
	struct sockaddr *addr;
	socklen_t *addrlen;
	const struct sockaddr *caddr;
	socklen_t caddrlen;
	const char *path;
	mode_t mode;
};

/* Runs on a helper OS thread (offload.c). */
static void *fb_run(void *arg)
{
	struct fb_call *c = arg;
	ssize_t r = -1;

	switch (c->kind) {
	case FB_READV:
		r = c->off < 0 ? readv(c->fd, c->iov, c->iovcnt) : preadv(c->fd, c->iov, c->iovcnt, c->off);
		break;
	case FB_WRITEV:
		r = c->off < 0 ? writev(c->fd, c->iov, c->iovcnt) : pwritev(c->fd, c->iov, c->iovcnt, c->off);
		break;
	case FB_ACCEPT:
		r = accept4(c->fd, c->addr, c->addrlen, c->flags);
		break;
	case FB_CONNECT:
		r = connect(c->fd, c->caddr, c->caddrlen);
		break;
	case FB_OPENAT:
		r = openat(c->fd, c->path, c->flags, c->mode);
		break;
	case FB_FSYNC:
		r = fsync(c->fd);
		break;
	}
	return (void *)(intptr_t)r;
}

static ssize_t fb_offload(struct fb_call *c)
{
	int err = 0;
	ssize_t r = (ssize_t)(intptr_t)wft_offload_run(fb_run, c, &err);

	if (r < 0)
		wft_set_errno(err);
	return r;
}

/* What to do after a non-blocking attempt said EAGAIN. */
enum { AGAIN_RETURN, AGAIN_WAIT, AGAIN_OFFLOAD, AGAIN_ERROR };

static int after_eagain(int fd)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return AGAIN_ERROR;
	if (fl & O_NONBLOCK)
		return AGAIN_RETURN;     /* the caller asked for EAGAIN */
	if (fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)))
		return AGAIN_OFFLOAD;    /* always "ready" to poll: would spin */
	return AGAIN_WAIT;
}

/* Park until fd is ready; false (errno ETIMEDOUT) at the deadline. */
static bool fb_wait(int fd, short ev, weft_time_t deadline)
{
	if (wft_offload_wait_fd(fd, ev, deadline) == 0) {
		wft_set_errno(ETIMEDOUT);
		return false;
	}
	return true;
}

/* read/write family: off -1 = at the file position. */
static ssize_t fb_rw(int fd, const struct iovec *iov, int iovcnt, off_t off, bool wr)
{
	weft_time_t deadline = deadline_of(io_timeout());
	struct fb_call c = { .kind = wr ? FB_WRITEV : FB_READV, .fd = fd, .iov = iov,
			     .iovcnt = iovcnt, .off = off };

	for (;;) {
		ssize_t n = wr ? pwritev2(fd, iov, iovcnt, off, RWF_NOWAIT)
			       : preadv2(fd, iov, iovcnt, off, RWF_NOWAIT);

		int e;

		if (n >= 0)
			return n;
		e = wft_get_errno();
		if (e == EINTR)
			continue;
		if (e == EAGAIN) {
			switch (after_eagain(fd)) {
			case AGAIN_RETURN:
				wft_set_errno(EAGAIN);
				return -1;
			case AGAIN_ERROR:
				return -1;
			case AGAIN_WAIT:
				if (!fb_wait(fd, wr ? POLLOUT : POLLIN, deadline))
					return -1;
				continue;
			default:
				return fb_offload(&c);
			}
		}
		/* No RWF_NOWAIT for this file (or no preadv2): block on the pool. */
		if (e == EOPNOTSUPP || e == ENOSYS || e == EINVAL)
			return fb_offload(&c);
		return -1;
	}
}

enum sock_kind { SK_RECV, SK_SEND, SK_RECVMSG, SK_SENDMSG };

static ssize_t sock_call(enum sock_kind k, int fd, void *buf, size_t len,
			 struct msghdr *msg, int flags)
{
	switch (k) {
	case SK_RECV:
		return recv(fd, buf, len, flags);
	case SK_SEND:
		/* MSG_NOSIGNAL: io_uring's send never raises SIGPIPE, so a weft
		 * thread's send does not on any backend (weft/io.h) */
		return send(fd, buf, len, flags | MSG_NOSIGNAL);
	case SK_RECVMSG:
		return recvmsg(fd, msg, flags);
	default:
		return sendmsg(fd, msg, flags | MSG_NOSIGNAL);
	}
}

static ssize_t fb_sock(enum sock_kind k, int fd, void *buf, size_t len, struct msghdr *msg,
		       int flags)
{
	weft_time_t deadline = deadline_of(io_timeout());
	short ev = (k == SK_RECV || k == SK_RECVMSG) ? POLLIN : POLLOUT;

	for (;;) {
		ssize_t n = sock_call(k, fd, buf, len, msg, flags | MSG_DONTWAIT);
		int fl, e;

		if (n >= 0)
			return n;
		e = wft_get_errno();
		if (e == EINTR)
			continue;
		if (e != EAGAIN && e != EWOULDBLOCK)
			return -1;
		fl = fcntl(fd, F_GETFL);
		if (fl < 0)
			return -1;
		if (fl & O_NONBLOCK) {
			wft_set_errno(EAGAIN);
			return -1;
		}
		if (!fb_wait(fd, ev, deadline))
			return -1;
	}
}

/* ---------------------------------------------------------------------- */
/* Two-phase operations (see "Non-blocking descriptors" above) */

/* liburing 2.3 predates it (kernel 6.10): accept fails with EAGAIN instead
 * of waiting. Older kernels reject the flag with EINVAL. */
#ifndef IORING_ACCEPT_DONTWAIT
#define IORING_ACCEPT_DONTWAIT (1U << 1)
#endif

/* The kernel rejected IORING_ACCEPT_DONTWAIT once: skip phase 1 for accept
 * (WFT_URING_NO_ACCEPT_DONTWAIT in wft_uring_refused, uring.h: a sticky
 * hint for the runtime's life; a stale 0 only costs one more EINVAL round).
 *
 * Phase 2 of a receive runs after phase 1 found the socket empty, so it
 * asks the kernel to arm its poll before trying (IORING_RECVSEND_POLL_FIRST,
 * 5.19): one failed receive attempt less per waiting recv. Kernels that
 * reject it (EINVAL) set WFT_URING_NO_POLL_FIRST, the same kind of hint.
 *
 * WEFT_FAULT=noacceptdontwait / nopollfirst (runtime/fault.c) add a flag
 * bit no kernel knows to the SQE that carries the feature, so a kernel
 * that has it refuses the SQE as an older one does and the tests reach
 * these fallbacks. */

/* Wait hint: descriptors below HINT_FDS (128 KiB of table) get one; a
 * phase 1 that found nothing sets it to HINT_PROBE_EVERY, and each later
 * call that skips phase 1 counts it down, so a descriptor whose data turned
 * up being ready is re-probed within that many calls. */
#define HINT_FDS 65536
#define HINT_PROBE_EVERY 16
static _Atomic uint8_t wait_hint[2][HINT_FDS];

/* Phase 1 of send/sendmsg as a direct non-blocking syscall (see Direct
 * sends); 0 queues it on the ring like the other calls. A constant tested
 * with if (), so both paths compile. */
#define SEND_DIRECT 1
/* Use the Wait hint (0: always try phase 1 first). It relies on uop_wait
 * waiting for its timeout's CQE: else a stale linked-timeout cancel hits
 * the next call, which the hint makes a waiting one at once (tests/
 * stress_io stalls without that wait). */
#define WAIT_HINT 1

enum op_kind { K_READ, K_WRITE, K_READV, K_WRITEV, K_RECV, K_SEND, K_RECVMSG, K_SENDMSG, K_ACCEPT };

struct opargs {
	int fd;
	int flags;              /* msg flags / accept4 flags */
	void *buf;
	unsigned len;
	uint64_t off;           /* (uint64_t)-1: the file position */
	const struct iovec *iov;
	unsigned iovcnt;
	struct msghdr *msg;
	struct sockaddr *addr;
	socklen_t *addrlen;
};

/* How a two-phase operation is issued. */
enum { PREP_NOWAIT, PREP_WAIT, PREP_WAIT_POLL_FIRST };

static void op_prep(struct io_uring_sqe *sqe, enum op_kind k, const struct opargs *a, int how)
{
	bool nowait = how == PREP_NOWAIT;
	int mf = a->flags | (nowait ? MSG_DONTWAIT : 0);

	switch (k) {
	case K_READ:
		io_uring_prep_read(sqe, a->fd, a->buf, a->len, a->off);
		break;
	case K_WRITE:
		io_uring_prep_write(sqe, a->fd, a->buf, a->len, a->off);
		break;
	case K_READV:
		io_uring_prep_readv(sqe, a->fd, a->iov, a->iovcnt, a->off);
		break;
	case K_WRITEV:
		io_uring_prep_writev(sqe, a->fd, a->iov, a->iovcnt, a->off);
		break;
	case K_RECV:
		io_uring_prep_recv(sqe, a->fd, a->buf, a->len, mf);
		break;
	case K_SEND:
		io_uring_prep_send(sqe, a->fd, a->buf, a->len, mf);
		break;
	case K_RECVMSG:
		io_uring_prep_recvmsg(sqe, a->fd, a->msg, (unsigned)mf);
		break;
	case K_SENDMSG:
		io_uring_prep_sendmsg(sqe, a->fd, a->msg, (unsigned)mf);
		break;
	case K_ACCEPT:
		io_uring_prep_accept(sqe, a->fd, a->addr, a->addrlen, a->flags);
		if (nowait)
			sqe->ioprio |= IORING_ACCEPT_DONTWAIT |
				       (wft_fault_refused(WFT_FAULT_ACCEPT_DONTWAIT) ? WFT_FAULT_BAD_FLAG : 0);
		break;
	}
	if (nowait && k <= K_WRITEV)
		sqe->rw_flags |= RWF_NOWAIT;
	if (how == PREP_WAIT_POLL_FIRST && (k == K_RECV || k == K_RECVMSG))
		sqe->ioprio |= IORING_RECVSEND_POLL_FIRST |
			       (wft_fault_refused(WFT_FAULT_POLL_FIRST) ? WFT_FAULT_BAD_FLAG : 0);
}

/* Does the caller want EAGAIN instead of waiting? 1 if fd is O_NONBLOCK (and
 * not a regular file or block device, where read(2) ignores the flag), 0 if
 * not, -errno if fcntl fails. Context: any. */
static int nonblocking(int fd)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -wft_get_errno();
	if (!(fl & O_NONBLOCK))
		return 0;
	if (fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)))
		return 0;
	return 1;
}

/* Phase 1 is skipped for a MSG_WAITALL receive (a no-wait attempt would
 * return a partial message) and for accept on kernels without
 * IORING_ACCEPT_DONTWAIT; then the descriptor's flag is read first. */
static bool skip_phase1(enum op_kind k, const struct opargs *a)
{
	if ((k == K_RECV || k == K_RECVMSG) && (a->flags & MSG_WAITALL))
		return true;
	return k == K_ACCEPT && wft_uring_is_refused(WFT_URING_NO_ACCEPT_DONTWAIT);
}

/* The plain syscall of a two-phase operation on an O_NONBLOCK descriptor
 * (nonblocking() said 1, so it is not a regular file): it does not block. */
static ssize_t op_syscall(enum op_kind k, const struct opargs *a)
{
	off_t off = (off_t)a->off;

	switch (k) {
	case K_READ:
		return a->off == (uint64_t)-1 ? read(a->fd, a->buf, a->len)
					      : pread(a->fd, a->buf, a->len, off);
	case K_WRITE:
		return a->off == (uint64_t)-1 ? write(a->fd, a->buf, a->len)
					      : pwrite(a->fd, a->buf, a->len, off);
	case K_READV:
		return readv(a->fd, a->iov, (int)a->iovcnt);
	case K_WRITEV:
		return writev(a->fd, a->iov, (int)a->iovcnt);
	case K_RECV:
		return recv(a->fd, a->buf, a->len, a->flags);
	case K_SEND:
		/* MSG_NOSIGNAL: io_uring's send never raises SIGPIPE, so a
		 * weft thread's blocking send does not on any path (the
		 * MSG_DONTWAIT and OS-thread calls are plain send(2):
		 * weft/io.h) */
		return send(a->fd, a->buf, a->len, a->flags | MSG_NOSIGNAL);
	case K_RECVMSG:
		return recvmsg(a->fd, a->msg, a->flags);
	case K_SENDMSG:
		return sendmsg(a->fd, a->msg, a->flags | MSG_NOSIGNAL);
	default:
		return accept4(a->fd, a->addr, a->addrlen, a->flags);
	}
}

/* Does phase 1 of k run as a direct non-blocking syscall (see "Direct
 * sends" above)? */
static inline bool phase1_direct(enum op_kind k)
{
	return SEND_DIRECT && (k == K_SEND || k == K_SENDMSG);
}

/* Wait hint of fd for direction out (0: read/recv/accept, 1: write/send),
 * or NULL if fd is beyond the table (see "Wait hint" above). */
static inline _Atomic uint8_t *hint_of(int fd, bool out)
{
	return fd >= 0 && fd < HINT_FDS ? &wait_hint[out][fd] : NULL;
}

/* The waiting form after a phase 1 that found nothing: poll first (the
 * data is not there yet), unless the kernel rejected that once. */
static inline int wait_form(void)
{
	return wft_uring_is_refused(WFT_URING_NO_POLL_FIRST) ? PREP_WAIT : PREP_WAIT_POLL_FIRST;
}

static inline bool is_out(enum op_kind k)
{
	return k == K_WRITE || k == K_WRITEV || k == K_SEND || k == K_SENDMSG;
}

/* Run a two-phase operation on w's ring (Non-blocking descriptors).
 * Context: weft thread on w. May park: yes.
 * Returns: the syscall-style result (-1 and errno). */
static ssize_t uring_op(struct wft_worker *w, enum op_kind k, const struct opargs *a)
{
	_Atomic uint8_t *hint = hint_of(a->fd, is_out(k));
	struct uop op;
	int res, nb, how = PREP_WAIT;
	bool skip = skip_phase1(k, a);
	uint8_t h;

	/* relaxed: a per-descriptor performance hint (Wait hint), set by the
	 * store after a failed phase 1 below; a stale or lost value costs one
	 * wasted phase 1 or one fcntl, never a result */
	h = !skip && hint && WAIT_HINT ? atomic_load_explicit(hint, memory_order_relaxed) : 0;
	if (skip || h) {
		/* No phase 1: it cannot work here, or (hint) the last one here
		 * found nothing - except every HINT_PROBE_EVERY-th call (the
		 * hint decays). relaxed: as above */
		if (h)
			atomic_store_explicit(hint, (uint8_t)(h - 1), memory_order_relaxed);
		nb = nonblocking(a->fd);
		if (nb)
			return nb < 0 ? io_ret(nb) : op_syscall(k, a);
		if (h)
			how = wait_form();
		goto wait;
	}
	if (phase1_direct(k)) {
		/* Phase 1 as the syscall itself: no park (Direct sends). */
		struct opargs d = *a;
		ssize_t n;

		d.flags |= MSG_DONTWAIT;
		n = op_syscall(k, &d);
		if (n >= 0)
			return n;
		res = -wft_get_errno();   /* no park since the call: errno is ours */
	} else {
		/* Phase 1: never waits, so no linked timeout. */
		op_prep(uop_begin(w, &op, 0), k, a, PREP_NOWAIT);
		res = uop_wait(w, &op);
		w = wft_worker_self();   /* I2: we parked */
	}
	if (res == -EINVAL && k == K_ACCEPT) {
		/* maybe the kernel does not know IORING_ACCEPT_DONTWAIT:
		 * decide by the flag; phase 2 repeats a genuine EINVAL */
		nb = nonblocking(a->fd);
		if (nb)
			return nb < 0 ? io_ret(nb) : op_syscall(k, a);
		wft_uring_refuse(WFT_URING_NO_ACCEPT_DONTWAIT);
	} else if (res == -EAGAIN || res == -EWOULDBLOCK) {
		nb = nonblocking(a->fd);
		if (nb)
			return io_ret(nb < 0 ? nb : -EAGAIN);
		if (hint && WAIT_HINT)
			/* relaxed: the Wait hint, read by the load above in a
			 * later call (a performance hint only) */
			atomic_store_explicit(hint, HINT_PROBE_EVERY, memory_order_relaxed);
		how = wait_form();
	} else if (res != -EOPNOTSUPP) {
		return io_ret(res);   /* done (or a real error) without waiting */
	}
	/* EAGAIN on a blocking fd, or no RWF_NOWAIT support: phase 2 */
wait:
	/* Phase 2: the waiting form, with the thread's timeout. */
	op_prep(uop_begin(w, &op, io_timeout()), k, a, how);
	res = uop_wait(w, &op);
	if (res == -EINVAL && how == PREP_WAIT_POLL_FIRST && (k == K_RECV || k == K_RECVMSG)) {
		/* maybe a kernel without POLL_FIRST: once more without it (a
		 * genuine EINVAL comes back again) */
		wft_uring_refuse(WFT_URING_NO_POLL_FIRST);
		w = wft_worker_self();   /* I2 */
		op_prep(uop_begin(w, &op, io_timeout()), k, a, PREP_WAIT);
		res = uop_wait(w, &op);
	}
	return io_ret(res);
}

/* ---------------------------------------------------------------------- */
/* read / write */

ssize_t weft_io_read(int fd, void *buf, size_t count)
{
	struct wft_worker *w = wft_worker_self();
	struct opargs a = { .fd = fd, .buf = buf, .len = rw_len(count), .off = (uint64_t)-1 };

	switch (io_path(w, IORING_OP_READ)) {
	case PATH_OS:
		return read(fd, buf, count);
	case PATH_FALLBACK: {
		struct iovec v = { buf, count };

		return fb_rw(fd, &v, 1, -1, false);
	}
	default:
		return uring_op(w, K_READ, &a);
	}
}

ssize_t weft_io_write(int fd, const void *buf, size_t count)
{
	struct wft_worker *w = wft_worker_self();
	struct opargs a = { .fd = fd, .buf = (void *)buf, .len = rw_len(count), .off = (uint64_t)-1 };

	switch (io_path(w, IORING_OP_WRITE)) {
	case PATH_OS:
		return write(fd, buf, count);
	case PATH_FALLBACK: {
		struct iovec v = { (void *)buf, count };

		return fb_rw(fd, &v, 1, -1, true);
	}
	default:
		return uring_op(w, K_WRITE, &a);
	}
}

ssize_t weft_io_pread(int fd, void *buf, size_t count, off_t offset)
{
	struct wft_worker *w = wft_worker_self();
	struct opargs a = { .fd = fd, .buf = buf, .len = rw_len(count), .off = (uint64_t)offset };

	if (offset < 0) {
		wft_set_errno(EINVAL);
		return -1;
	}
	switch (io_path(w, IORING_OP_READ)) {
	case PATH_OS:
		return pread(fd, buf, count, offset);
	case PATH_FALLBACK: {
		struct iovec v = { buf, count };

		return fb_rw(fd, &v, 1, offset, false);
	}
	default:
		return uring_op(w, K_READ, &a);
	}
}

ssize_t weft_io_pwrite(int fd, const void *buf, size_t count, off_t offset)
{
	struct wft_worker *w = wft_worker_self();
	struct opargs a = { .fd = fd, .buf = (void *)buf, .len = rw_len(count), .off = (uint64_t)offset };

	if (offset < 0) {
		wft_set_errno(EINVAL);
		return -1;
	}
	switch (io_path(w, IORING_OP_WRITE)) {
	case PATH_OS:
		return pwrite(fd, buf, count, offset);
	case PATH_FALLBACK: {
		struct iovec v = { (void *)buf, count };

		return fb_rw(fd, &v, 1, offset, true);
	}
	default:
		return uring_op(w, K_WRITE, &a);
	}
}

ssize_t weft_io_readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct wft_worker *w = wft_worker_self();
	struct opargs a = { .fd = fd, .iov = iov, .iovcnt = (unsigned)iovcnt, .off = (uint64_t)-1 };

	switch (io_path(w, IORING_OP_READV)) {
	case PATH_OS:
		return readv(fd, iov, iovcnt);
	case PATH_FALLBACK:
		return fb_rw(fd, iov, iovcnt, -1, false);
	default:
		break;
	}
	if (iovcnt < 0 || iovcnt > IOV_MAX) {
		wft_set_errno(EINVAL);
		return -1;
	}
	return uring_op(w, K_READV, &a);
}

ssize_t weft_io_writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct wft_worker *w = wft_worker_self();
	struct opargs a = { .fd = fd, .iov = iov, .iovcnt = (unsigned)iovcnt, .off = (uint64_t)-1 };

	switch (io_path(w, IORING_OP_WRITEV)) {
	case PATH_OS:
		return writev(fd, iov, iovcnt);
	case PATH_FALLBACK:
		return fb_rw(fd, iov, iovcnt, -1, true);
	default:
		break;
	}
	if (iovcnt < 0 || iovcnt > IOV_MAX) {
		wft_set_errno(EINVAL);
		return -1;
	}
	return uring_op(w, K_WRITEV, &a);
}

/* ---------------------------------------------------------------------- */
/* Sockets */

ssize_t weft_io_recv(int fd, void *buf, size_t len, int flags)
{
	struct wft_worker *w = wft_worker_self();
	struct opargs a = { .fd = fd, .buf = buf, .len = rw_len(len), .flags = flags };

	if (flags & MSG_DONTWAIT)
		return recv(fd, buf, len, flags);
	switch (io_path(w, IORING_OP_RECV)) {
	case PATH_OS:
		return recv(fd, buf, len, flags);
	case PATH_FALLBACK:
		return fb_sock(SK_RECV, fd, buf, len, NULL, flags);
	default:
		return uring_op(w, K_RECV, &a);
	}
}

ssize_t weft_io_send(int fd, const void *buf, size_t len, int flags)
{
	struct wft_worker *w = wft_worker_self();
	struct opargs a = { .fd = fd, .buf = (void *)buf, .len = rw_len(len), .flags = flags };

	if (flags & MSG_DONTWAIT)
		return send(fd, buf, len, flags);
	switch (io_path(w, IORING_OP_SEND)) {
	case PATH_OS:
		return send(fd, buf, len, flags);
	case PATH_FALLBACK:
		return fb_sock(SK_SEND, fd, (void *)buf, len, NULL, flags);
	default:
		return uring_op(w, K_SEND, &a);
	}
}

ssize_t weft_io_recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct wft_worker *w = wft_worker_self();
	struct opargs a = { .fd = fd, .msg = msg, .flags = flags };

	if (flags & MSG_DONTWAIT)
		return recvmsg(fd, msg, flags);
	switch (io_path(w, IORING_OP_RECVMSG)) {
	case PATH_OS:
		return recvmsg(fd, msg, flags);
	case PATH_FALLBACK:
		return fb_sock(SK_RECVMSG, fd, NULL, 0, msg, flags);
	default:
		return uring_op(w, K_RECVMSG, &a);
	}
}

ssize_t weft_io_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct wft_worker *w = wft_worker_self();
	struct opargs a = { .fd = fd, .msg = (struct msghdr *)msg, .flags = flags };

	if (flags & MSG_DONTWAIT)
		return sendmsg(fd, msg, flags);
	switch (io_path(w, IORING_OP_SENDMSG)) {
	case PATH_OS:
		return sendmsg(fd, msg, flags);
	case PATH_FALLBACK:
		return fb_sock(SK_SENDMSG, fd, NULL, 0, (struct msghdr *)msg, flags);
	default:
		return uring_op(w, K_SENDMSG, &a);
	}
}

int weft_io_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
	struct wft_worker *w = wft_worker_self();
	struct opargs a = { .fd = fd, .addr = addr, .addrlen = addrlen, .flags = flags };

	switch (io_path(w, IORING_OP_ACCEPT)) {
	case PATH_OS:
		return accept4(fd, addr, addrlen, flags);
	case PATH_FALLBACK: {
		struct fb_call c = { .kind = FB_ACCEPT, .fd = fd, .addr = addr,
				     .addrlen = addrlen, .flags = flags };
		int nb = nonblocking(fd);

		if (nb < 0)
			return (int)io_ret(nb);
		if (nb)
			return accept4(fd, addr, addrlen, flags);
		/* Wait for a pending connection without holding a helper, then
		 * accept on the pool: it returns at once unless another
		 * acceptor took the connection, and then only a helper waits. */
		if (!fb_wait(fd, POLLIN, deadline_of(io_timeout())))
			return -1;
		return (int)fb_offload(&c);
	}
	default:
		return (int)uring_op(w, K_ACCEPT, &a);
	}
}

int weft_io_connect(int fd, const struct sockaddr *addr, socklen_t addrlen)
{
	struct wft_worker *w = wft_worker_self();
	enum io_path path = io_path(w, IORING_OP_CONNECT);
	struct uop op;
	int nb;

	if (path == PATH_OS)
		return connect(fd, addr, addrlen);
	/* A non-blocking connect must report EINPROGRESS, which io_uring
	 * never does (it waits): read the flag first. connect is rare. */
	nb = nonblocking(fd);
	if (nb < 0)
		return (int)io_ret(nb);
	if (nb)
		return connect(fd, addr, addrlen);
	if (path == PATH_FALLBACK) {
		struct fb_call c = { .kind = FB_CONNECT, .fd = fd, .caddr = addr,
				     .caddrlen = addrlen };

		return (int)fb_offload(&c);
	}
	io_uring_prep_connect(uop_begin(w, &op, io_timeout()), fd, addr, addrlen);
	return (int)io_ret(uop_wait(w, &op));
}

/* ---------------------------------------------------------------------- */
/* Files */

int weft_io_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	struct wft_worker *w = wft_worker_self();
	struct uop op;

	switch (io_path(w, IORING_OP_OPENAT)) {
	case PATH_OS:
		return openat(dirfd, path, flags, mode);
	case PATH_FALLBACK: {
		struct fb_call c = { .kind = FB_OPENAT, .fd = dirfd, .path = path,
				     .flags = flags, .mode = mode };

		return (int)fb_offload(&c);
	}
	default:
		break;
	}
	io_uring_prep_openat(uop_begin(w, &op, io_timeout()), dirfd, path, flags, mode);
	return (int)io_ret(uop_wait(w, &op));
}

int weft_io_close(int fd)
{
	struct wft_worker *w = wft_worker_self();
	struct uop op;

	if (io_path(w, IORING_OP_CLOSE) != PATH_URING)
		return close(fd);   /* see Fallback: close does not block */
	io_uring_prep_close(uop_begin(w, &op, 0), fd);
	return (int)io_ret(uop_wait(w, &op));
}

int weft_io_fsync(int fd)
{
	struct wft_worker *w = wft_worker_self();
	struct uop op;

	switch (io_path(w, IORING_OP_FSYNC)) {
	case PATH_OS:
		return fsync(fd);
	case PATH_FALLBACK: {
		struct fb_call c = { .kind = FB_FSYNC, .fd = fd };

		return (int)fb_offload(&c);
	}
	default:
		break;
	}
	io_uring_prep_fsync(uop_begin(w, &op, io_timeout()), fd, 0);
	return (int)io_ret(uop_wait(w, &op));
}

/* ---------------------------------------------------------------------- */
/* poll */

int weft_io_poll(int fd, short events, int timeout_ms)
{
	struct wft_worker *w = wft_worker_self();
	struct pollfd pfd = { fd, events, 0 };
	short want = events | POLLERR | POLLHUP | POLLNVAL;
	struct uop op;
	int rc;

	if (fd < 0)
		return POLLNVAL;   /* as the header promises, and poll(2) for a bad fd */
	switch (io_path(w, IORING_OP_POLL_ADD)) {
	case PATH_OS:
		rc = poll(&pfd, 1, timeout_ms);
		return rc > 0 ? pfd.revents : rc;
	case PATH_FALLBACK:
		rc = poll(&pfd, 1, 0);
		if (rc != 0 || timeout_ms == 0)
			return rc > 0 ? pfd.revents : rc;
		rc = wft_offload_wait_fd(fd, events,
				timeout_ms < 0 ? WEFT_TIME_INFINITE
					       : deadline_of((uint64_t)timeout_ms * 1000000ull));
		return rc & want;
	default:
		break;
	}
	if (timeout_ms == 0) {
		rc = poll(&pfd, 1, 0);
		return rc > 0 ? pfd.revents : rc;
	}
	io_uring_prep_poll_add(uop_begin(w, &op, timeout_ms > 0 ? (uint64_t)timeout_ms * 1000000ull : 0),
			       fd, (unsigned)(unsigned short)events);
	rc = uop_wait(w, &op);
	if (rc == -ETIMEDOUT)
		return 0;                 /* poll's own timeout: 0, as poll(2) */
	if (rc == -EBADF)
		return POLLNVAL;          /* as poll(2) reports a bad fd */
	if (rc < 0)
		return (int)io_ret(rc);
	return rc & want;
}
