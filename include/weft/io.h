/*
 * weft/io.h - blocking I/O for light threads, and offloading of blocking
 * calls to helper OS threads.
 *
 * Write plain blocking code, one weft thread per connection: each call
 * below parks the calling weft thread (its worker runs other threads) until
 * the operation completes, and scales like an event loop. The calls mirror
 * the system calls they are named after: same arguments, same results,
 * -1 and errno on failure, partial reads and writes exactly as the kernel
 * returns them (loop if you need all bytes), EOF as 0.
 *
 * How it works:
 *   - Each worker has an io_uring. A call queues one SQE on the ring of the
 *     worker it runs on and parks; the worker submits the SQEs of all its
 *     threads together once per scheduling round and wakes each thread when
 *     its completion arrives. The thread may resume on another worker.
 *   - Without io_uring (kernel.io_uring_disabled, a seccomp filter, ENOSYS,
 *     WEFT_FEATURES=NO_URING, or running on Valgrind, which cannot run the
 *     other threads while one waits in io_uring_enter), the same calls first try the operation
 *     without blocking; pollable descriptors (sockets, pipes, ttys, eventfds)
 *     then wait for readiness in a shared poller thread, and everything else
 *     (regular files, openat, fsync, connect) runs on the offload pool below.
 *     weft_io_backend() reports which backend is active.
 *   - Called from a plain OS thread (or with the runtime stopped), each call
 *     simply runs the system call, blocking that OS thread.
 *
 *   call                 | from a weft thread          | from an OS thread
 *   ---------------------+-----------------------------+---------------------
 *   weft_io_*            | parks the weft thread       | the plain syscall
 *   weft_offload         | parks the weft thread while | runs fn inline
 *                        | a helper OS thread runs fn  |
 *
 * Non-blocking descriptors (O_NONBLOCK, or MSG_DONTWAIT in flags) keep their
 * meaning: the call fails with EAGAIN instead of parking.
 *
 * SIGPIPE: from a weft thread, weft_io_send and weft_io_sendmsg do not raise
 * it (io_uring's send cannot, so no backend does); a send on a closed
 * connection fails with EPIPE. From a plain OS thread, and with MSG_DONTWAIT
 * on any thread, they are the plain send(2) and sendmsg(2), which raise it
 * unless MSG_NOSIGNAL is given.
 *
 * Timeouts: weft_io_set_timeout() gives the calling weft thread a timeout
 * that applies to each later weft_io_* call except weft_io_poll (which has
 * its own) and weft_io_close. A call that reaches it fails with ETIMEDOUT
 * (a read or write that moved some bytes first returns that count).
 * With io_uring this is a linked timeout (IORING_OP_LINK_TIMEOUT). Without,
 * the timeout covers the readiness wait; calls that run on the offload pool
 * (regular files, openat, fsync, connect) cannot be interrupted.
 *
 * Exiting with calls pending: with io_uring, a weft thread blocked in a
 * call holds a kernel reference to its descriptor, which the kernel drops
 * only after the process is gone (in the ring's exit work). A listening
 * socket with an accept pending therefore keeps accepting for a moment
 * after exit() or _exit(), and a server restarted at once on its port
 * fails with EADDRINUSE. shutdown(fd, SHUT_RDWR) on the listener before
 * exiting closes it at once (async-signal-safe, so a signal handler can
 * do it); examples/conn_server.h does.
 *
 * Configuration (environment):
 *   WEFT_OFFLOAD_THREADS=N  most helper threads of the offload pool
 *                           (default 16; weft_offload_set_max() overrides).
 *   WEFT_FEATURES=NO_URING  do not use io_uring at all.
 */
#ifndef WEFT_IO_H
#define WEFT_IO_H

#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <weft/common.h>

WEFT_EXTERN_C_BEGIN

/* read(2), write(2): read up to count bytes / write up to count bytes,
 * parking the calling weft thread until the kernel completes the call.
 * Returns the byte count (0 at EOF for read; partial as the kernel returns
 * it) or -1 and errno as read(2)/write(2). Context: any (an OS thread makes
 * the plain syscall). */
WEFT_API ssize_t weft_io_read(int fd, void *buf, size_t count);
WEFT_API ssize_t weft_io_write(int fd, const void *buf, size_t count);

/* pread(2), pwrite(2): as weft_io_read/weft_io_write at an explicit
 * offset (the file offset is not moved). Returns as pread(2)/pwrite(2):
 * the byte count or -1 and errno. Context: any. */
WEFT_API ssize_t weft_io_pread(int fd, void *buf, size_t count, off_t offset);
WEFT_API ssize_t weft_io_pwrite(int fd, const void *buf, size_t count, off_t offset);

/* readv(2), writev(2): scatter/gather forms of weft_io_read/write. The
 * iovec array must stay valid until the call returns (it does: the caller
 * is parked meanwhile). Returns as readv(2)/writev(2): the byte count or -1
 * and errno. Context: any. */
WEFT_API ssize_t weft_io_readv(int fd, const struct iovec *iov, int iovcnt);
WEFT_API ssize_t weft_io_writev(int fd, const struct iovec *iov, int iovcnt);

/* recv(2), send(2), recvmsg(2), sendmsg(2): receive / send on a socket,
 * parking until data (or room) is there; MSG_DONTWAIT never parks (-1 and
 * EAGAIN instead), and neither does a socket in O_NONBLOCK mode. Returns as
 * the syscalls: the byte count (recv: 0 when the peer has shut down) or -1
 * and errno; send never raises SIGPIPE (EPIPE instead). Context: any. */
WEFT_API ssize_t weft_io_recv(int fd, void *buf, size_t len, int flags);
WEFT_API ssize_t weft_io_send(int fd, const void *buf, size_t len, int flags);
WEFT_API ssize_t weft_io_recvmsg(int fd, struct msghdr *msg, int flags);
WEFT_API ssize_t weft_io_sendmsg(int fd, const struct msghdr *msg, int flags);

/* accept4(2): wait for a connection on listening socket fd and return its
 * new descriptor, flags as accept4 (SOCK_NONBLOCK, SOCK_CLOEXEC). Returns
 * the descriptor or -1 and errno (EAGAIN on a non-blocking listener with
 * nothing pending, EBADF, EINVAL, EMFILE, ...). Context: any. */
WEFT_API int weft_io_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);

/* connect(2). Returns 0 or -1 (ECONNREFUSED, ETIMEDOUT, EINPROGRESS on a
 * non-blocking socket, ...). Context: any. */
WEFT_API int weft_io_connect(int fd, const struct sockaddr *addr, socklen_t addrlen);

/* openat(2), close(2), fsync(2): open a file relative to dirfd, close a
 * descriptor, flush a file to storage, the weft thread parked meanwhile.
 * Returns as the syscalls: openat the new descriptor, close and fsync 0;
 * -1 and errno on failure. Context: any. */
WEFT_API int weft_io_openat(int dirfd, const char *path, int flags, mode_t mode);
WEFT_API int weft_io_close(int fd);
WEFT_API int weft_io_fsync(int fd);

/* Wait until fd reports one of events (POLLIN, POLLOUT, ...; POLLERR and
 * POLLHUP are always reported) or timeout_ms milliseconds pass (negative:
 * no limit; 0: just look). Returns the revents bits (> 0), 0 on timeout, or
 * -1 with errno (EINVAL bad arguments). An invalid fd gives POLLNVAL at
 * once, as poll(2) does for a descriptor that is not open; a negative fd
 * also gives POLLNVAL (poll(2) would ignore it and wait out the timeout). Not affected by weft_io_set_timeout(). Context: any. */
WEFT_API int weft_io_poll(int fd, short events, int timeout_ms);

/* errno: each call above sets errno like the system call it mirrors, but
 * errno belongs to the OS thread, and a weft thread that parked may resume
 * on another worker's OS thread. Read errno right after the failing call,
 * before any other weft call. One trap: glibc declares __errno_location()
 * const, so a compiler may compute &errno once per function (or hoist it out
 * of a loop) and reuse that address after a call that migrated the thread,
 * reading another OS thread's errno. In a function that reads errno on both
 * sides of a weft call, use weft_errno() instead: the errno of the OS thread
 * the caller runs on now, read through a call the compiler cannot merge.
 * Context: any. */
WEFT_API int weft_errno(void);

/* Set the calling weft thread's I/O timeout in nanoseconds (0 = none, the
 * default), relative, applied to each later call (see Timeouts above).
 * Returns 0, EPERM (called from an OS thread) or EAGAIN (no key slot).
 * Context: weft thread. */
WEFT_API int weft_io_set_timeout(uint64_t ns);

/* The calling weft thread's I/O timeout in ns (0 = none; 0 from an OS
 * thread). Context: any. */
WEFT_API uint64_t weft_io_get_timeout(void);

/* Run fn(arg) on a helper OS thread of the offload pool while the calling
 * weft thread parks, and return fn's result; errno as fn left it is copied
 * to the caller. For calls that block in ways weft cannot see: a DNS lookup
 * (getaddrinfo), a library that does its own blocking I/O, a long
 * computation that should not hold a worker. The pool starts helpers on
 * demand up to its bound; when all are busy, calls queue in FIFO order (so
 * a job that waits for another queued job can deadlock: keep jobs
 * independent). From an OS thread, or if no helper can be started at all,
 * fn runs inline on the caller. Context: any. May park: yes. */
WEFT_API void *weft_offload(void *(*fn)(void *), void *arg);

/* Set the most helper threads of the offload pool (1..1024). Takes effect
 * for helpers started afterwards; running helpers are not stopped. Returns
 * 0 or EINVAL. Context: any. */
WEFT_API int weft_offload_set_max(int n);

/* Describe the I/O backend of the running (or last) runtime into buf (if
 * not NULL), e.g. "io_uring on 2/2 workers (SINGLE_ISSUER|DEFER_TASKRUN|...;
 * kick=eventfd)" or "offload pool (io_uring disabled: WEFT_FEATURES=NO_URING)".
 * With io_uring, "kick=eventfd one-shot" says the kernel has no multishot
 * poll, and "; refused: ..." lists features the kernel refused, each
 * replaced by its fallback (ACCEPT_DONTWAIT, RECVSEND_POLL_FIRST,
 * registered ring fd). Returns 1 if io_uring is in use, 0 if not.
 * Context: any. */
WEFT_API int weft_io_backend(char *buf, size_t len);

WEFT_EXTERN_C_END

#endif
