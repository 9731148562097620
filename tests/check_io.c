/*
 * tests/check_io.c - suite "io": blocking I/O on io_uring (or the fallback),
 * weft_offload, and the plain-syscall path of OS threads.
 *
 * The same binary runs twice under `make check`: as is (io_uring when the
 * kernel allows it) and with WEFT_FEATURES=NO_URING (tests/check_io_nouring.sh),
 * so every case below also covers the offload/poller fallback. The backend
 * case checks which one is active.
 *
 * Threads never call ck_assert: they record failures with WT_CHECK and the
 * test body asserts after joining (tests/harness.h).
 */
#define _GNU_SOURCE
#include "tests/harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <weft/io.h>

#include "examples/task_stat.h"

/* weft turns io_uring off by itself on Valgrind (runtime/uring.c), so the
 * tests that expect a ring skip there (as in check_context.c). */
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define WT_ON_VALGRIND() RUNNING_ON_VALGRIND
#endif
#ifndef WT_ON_VALGRIND
#define WT_ON_VALGRIND() 0
#endif

/* ---------------------------------------------------------------------- */
/* Helpers */

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1;   /* the directory's own fd */
}

static weft_thread_t spawn_on(int worker, void *(*fn)(void *), void *arg)
{
	weft_attr_t a;
	weft_thread_t t;

	weft_attr_init(&a);
	a.worker = worker < 0 ? -1 : worker % weft_workers();
	a.stack_size = 64 * 1024;
	ck_assert_int_eq(weft_spawn(&t, fn, arg, &a), 0);
	return t;
}

static void join(weft_thread_t t)
{
	ck_assert_int_eq(weft_join(t, NULL), 0);
}

/* Run fn(sv) in a weft thread on a fresh AF_UNIX stream socketpair sv,
 * then close both ends. Context: the test body (runtime started). */
static void run_on_socketpair(void *(*fn)(void *))
{
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	join(spawn_on(-1, fn, sv));
	close(sv[0]);
	close(sv[1]);
}

/* Write all of buf with weft_io_write (partial writes allowed). */
static bool write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t k = weft_io_write(fd, p, n);

		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

static bool read_all(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t k = weft_io_read(fd, p, n);

		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

static bool send_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t k = weft_io_send(fd, p, n, MSG_NOSIGNAL);

		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

static bool recv_all(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t k = weft_io_recv(fd, p, n, 0);

		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

/* A listening TCP socket on 127.0.0.1, ephemeral port. */
static int listen_loopback(struct sockaddr_in *sa, int backlog)
{
	socklen_t len = sizeof(*sa);
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)sa, sizeof(*sa)), 0);
	ck_assert_int_eq(listen(fd, backlog), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)sa, &len), 0);
	return fd;
}

static bool uring_expected(void)
{
	return weft_feature("URING") == 1;
}

/* Can this process make an io_uring with setup flags `flags`? Asks the
 * kernel directly (io_uring_setup(2) on a 2-entry ring, then close),
 * independently of weft, so a test can tell "the kernel refuses" from "the
 * runtime did not use it". */
static bool uring_probe(unsigned flags)
{
	struct io_uring_params p;
	long fd;

	memset(&p, 0, sizeof(p));
	p.flags = flags;
	fd = syscall(__NR_io_uring_setup, 2, &p);
	if (fd < 0)
		return false;
	close((int)fd);
	return true;
}

/* ---------------------------------------------------------------------- */
/* basic */

enum { PIPE_MSGS = 2000, MSG = 64 };

static void *pipe_writer(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char m[MSG];

	for (int i = 0; i < PIPE_MSGS; i++) {
		memset(m, 'a' + i % 26, sizeof(m));
		memcpy(m, &i, sizeof(i));
		WT_CHECK(write_all(fd, m, sizeof(m)));
	}
	return NULL;
}

static void *pipe_reader(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char m[MSG];

	for (int i = 0; i < PIPE_MSGS; i++) {
		int got;

		WT_CHECK(read_all(fd, m, sizeof(m)));
		memcpy(&got, m, sizeof(got));
		WT_CHECK(got == i);
		WT_CHECK(m[MSG - 1] == 'a' + i % 26);
	}
	return NULL;
}

/* Pipe between threads on different workers (when there are several). */
START_TEST(pipe_cross_worker)
{
	int p[2];
	weft_thread_t r, w;

	wt_init(_i);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	r = spawn_on(0, pipe_reader, (void *)(intptr_t)p[0]);
	w = spawn_on(1, pipe_writer, (void *)(intptr_t)p[1]);
	join(w);
	join(r);
	close(p[0]);
	close(p[1]);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

enum { PINGS = 1000 };

static void *pinger(void *arg)
{
	int fd = (int)(intptr_t)arg;

	for (int i = 0; i < PINGS; i++) {
		int v = i, back = -1;

		WT_CHECK(weft_io_send(fd, &v, sizeof(v), 0) == sizeof(v));
		WT_CHECK(weft_io_recv(fd, &back, sizeof(back), MSG_WAITALL) == sizeof(back));
		WT_CHECK(back == i + 1);
	}
	return NULL;
}

static void *ponger(void *arg)
{
	int fd = (int)(intptr_t)arg;

	for (int i = 0; i < PINGS; i++) {
		int v = -1;

		WT_CHECK(weft_io_recv(fd, &v, sizeof(v), MSG_WAITALL) == sizeof(v));
		WT_CHECK(v == i);
		v++;
		WT_CHECK(weft_io_send(fd, &v, sizeof(v), 0) == sizeof(v));
	}
	return NULL;
}

START_TEST(socketpair_pingpong)
{
	int sv[2];
	weft_thread_t a, b;

	wt_init(_i);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	a = spawn_on(0, pinger, (void *)(intptr_t)sv[0]);
	b = spawn_on(1, ponger, (void *)(intptr_t)sv[1]);
	join(a);
	join(b);
	close(sv[0]);
	close(sv[1]);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* Loopback TCP: accept, connect, echo until EOF. */
struct tcp_ctx {
	int lfd;
	struct sockaddr_in sa;
	int rounds;
};

static void *echo_server_one(void *arg)
{
	struct tcp_ctx *c = arg;
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);
	char buf[512];
	int fd = weft_io_accept(c->lfd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
	ssize_t n;

	WT_CHECK(fd >= 0);
	if (fd < 0)
		return NULL;
	WT_CHECK(plen == sizeof(peer) && peer.sin_family == AF_INET);
	while ((n = weft_io_recv(fd, buf, sizeof(buf), 0)) > 0)
		WT_CHECK(send_all(fd, buf, (size_t)n));
	WT_CHECK(n == 0);   /* EOF */
	WT_CHECK(weft_io_close(fd) == 0);
	return NULL;
}

static void *echo_client(void *arg)
{
	struct tcp_ctx *c = arg;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char out[300], in[300];

	WT_CHECK(fd >= 0);
	WT_CHECK(weft_io_connect(fd, (struct sockaddr *)&c->sa, sizeof(c->sa)) == 0);
	for (int i = 0; i < c->rounds; i++) {
		memset(out, 'A' + i % 26, sizeof(out));
		WT_CHECK(send_all(fd, out, sizeof(out)));
		WT_CHECK(recv_all(fd, in, sizeof(in)));
		WT_CHECK(memcmp(in, out, sizeof(in)) == 0);
	}
	WT_CHECK(weft_io_close(fd) == 0);
	return NULL;
}

START_TEST(tcp_echo)
{
	struct tcp_ctx c = { .rounds = 200 };
	weft_thread_t s, cl;

	wt_init(_i);
	c.lfd = listen_loopback(&c.sa, 16);
	s = spawn_on(0, echo_server_one, &c);
	cl = spawn_on(1, echo_client, &c);
	join(cl);
	join(s);
	close(c.lfd);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

static void *vectored(void *arg)
{
	int *sv = arg;
	int p[2];
	char a[5] = "hello", b[6] = " world", x[5], y[6];
	struct iovec out[2] = { { a, 5 }, { b, 6 } }, in[2] = { { x, 5 }, { y, 6 } };
	struct msghdr mo = { .msg_iov = out, .msg_iovlen = 2 }, mi = { .msg_iov = in, .msg_iovlen = 2 };

	WT_CHECK(pipe2(p, O_CLOEXEC) == 0);
	WT_CHECK(weft_io_writev(p[1], out, 2) == 11);
	WT_CHECK(weft_io_readv(p[0], in, 2) == 11);
	WT_CHECK(memcmp(x, "hello", 5) == 0 && memcmp(y, " world", 6) == 0);
	memset(x, 0, sizeof(x));
	memset(y, 0, sizeof(y));
	WT_CHECK(weft_io_sendmsg(sv[0], &mo, 0) == 11);
	WT_CHECK(weft_io_recvmsg(sv[1], &mi, MSG_WAITALL) == 11);
	WT_CHECK(memcmp(x, "hello", 5) == 0 && memcmp(y, " world", 6) == 0);
	close(p[0]);
	close(p[1]);
	return NULL;
}

START_TEST(vectored_io)
{
	wt_init(_i);
	run_on_socketpair(vectored);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

static char tmp_path[64];

static void *file_ops(void *arg)
{
	char buf[32] = { 0 };
	int fd;

	(void)arg;
	fd = weft_io_openat(AT_FDCWD, tmp_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	WT_CHECK(fd >= 0);
	WT_CHECK(weft_io_write(fd, "0123456789", 10) == 10);
	WT_CHECK(weft_io_pwrite(fd, "abc", 3, 4) == 3);
	WT_CHECK(weft_io_fsync(fd) == 0);
	WT_CHECK(weft_io_pread(fd, buf, sizeof(buf), 0) == 10);
	WT_CHECK(memcmp(buf, "0123abc789", 10) == 0);
	WT_CHECK(weft_io_pread(fd, buf, 4, 8) == 2);   /* short at EOF */
	WT_CHECK(weft_io_read(fd, buf, sizeof(buf)) == 0);   /* position is at 10: EOF */
	WT_CHECK(lseek(fd, 2, SEEK_SET) == 2);
	WT_CHECK(weft_io_read(fd, buf, 3) == 3 && memcmp(buf, "23a", 3) == 0);
	WT_CHECK(weft_io_close(fd) == 0);
	WT_CHECK(weft_io_openat(AT_FDCWD, "/nonexistent/weft", O_RDONLY, 0) == -1 && weft_errno() == ENOENT);
	return NULL;
}

START_TEST(files)
{
	int fd;

	snprintf(tmp_path, sizeof(tmp_path), "/tmp/weft-check-io-XXXXXX");
	fd = mkstemp(tmp_path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	wt_init(_i);
	join(spawn_on(-1, file_ops, NULL));
	wt_shutdown();
	unlink(tmp_path);
	wt_assert_no_failure();
}
END_TEST

static _Atomic int polling;

static void *poll_waiter(void *arg)
{
	int *p = arg;
	weft_time_t t0 = weft_now_ns();
	int r;

	atomic_store(&polling, 1);
	r = weft_io_poll(p[0], POLLIN, 5000);

	WT_CHECK(r > 0 && (r & POLLIN));
	WT_CHECK(weft_now_ns() - t0 >= 10000000ull);   /* the writer waits 20 ms */
	WT_CHECK(weft_io_poll(p[1], POLLOUT, -1) & POLLOUT);
	WT_CHECK(weft_io_poll(p[1], POLLOUT, 0) & POLLOUT);
	return NULL;
}

static void *poll_writer(void *arg)
{
	int *p = arg;

	while (!atomic_load(&polling))
		weft_sleep_ns(1000000ull);
	weft_sleep_ns(20000000ull);
	WT_CHECK(weft_io_write(p[1], "x", 1) == 1);
	return NULL;
}

START_TEST(poll_ready)
{
	int p[2];
	weft_thread_t a, b;

	wt_init(_i);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	atomic_store(&polling, 0);
	a = spawn_on(0, poll_waiter, p);
	b = spawn_on(1, poll_writer, p);
	join(a);
	join(b);
	close(p[0]);
	close(p[1]);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* Partial reads, partial/large writes, EOF. */
static void *partial_reader(void *arg)
{
	int *p = arg;
	char buf[100];
	size_t total = 0;
	ssize_t n;

	WT_CHECK(weft_io_write(p[1], "0123456789", 10) == 10);
	WT_CHECK(weft_io_read(p[0], buf, sizeof(buf)) == 10);   /* partial: what is there */
	/* a 256 KiB write into a 4 KiB pipe, read by the other thread */
	while ((n = weft_io_read(p[2], buf, sizeof(buf))) > 0)
		total += (size_t)n;
	WT_CHECK(n == 0);   /* EOF once the writer closed */
	WT_CHECK(total == 256 * 1024);
	return NULL;
}

static void *big_writer(void *arg)
{
	int *p = arg;
	char *b = calloc(1, 256 * 1024);

	WT_CHECK(write_all(p[3], b, 256 * 1024));
	WT_CHECK(weft_io_close(p[3]) == 0);
	free(b);
	return NULL;
}

/* A blocking socket whose receives had to wait, then switched to
 * O_NONBLOCK: a receive gives EAGAIN at once (a wait here would hang the
 * test), data already queued comes back at once, and with O_NONBLOCK
 * cleared again a receive waits again. */

static void *late_sender(void *arg)
{
	int fd = (int)(intptr_t)arg;

	weft_sleep_ns(20 * 1000000ull);
	WT_CHECK(weft_io_send(fd, "y", 1, 0) == 1);
	return NULL;
}

static bool late_recv(int *sv, char *c)
{
	weft_thread_t t;
	bool ok;

	if (weft_spawn(&t, late_sender, (void *)(intptr_t)sv[1], NULL))
		return false;
	ok = weft_io_recv(sv[0], c, 1, 0) == 1 && *c == 'y';
	return weft_join(t, NULL) == 0 && ok;
}

static void *nonblock_toggle_cases(void *arg)
{
	int *sv = arg, fl;
	char c = 0;

	for (int i = 0; i < 4; i++)
		WT_CHECK(late_recv(sv, &c));
	fl = fcntl(sv[0], F_GETFL);
	WT_CHECK(fcntl(sv[0], F_SETFL, fl | O_NONBLOCK) == 0);
	WT_CHECK(weft_io_recv(sv[0], &c, 1, 0) == -1 && weft_errno() == EAGAIN);
	WT_CHECK(weft_io_read(sv[0], &c, 1) == -1 && weft_errno() == EAGAIN);
	WT_CHECK(weft_io_send(sv[1], "z", 1, 0) == 1);
	WT_CHECK(weft_io_recv(sv[0], &c, 1, 0) == 1 && c == 'z');
	WT_CHECK(fcntl(sv[0], F_SETFL, fl) == 0);
	WT_CHECK(weft_io_send(sv[1], "w", 1, 0) == 1);
	WT_CHECK(weft_io_recv(sv[0], &c, 1, 0) == 1 && c == 'w');
	WT_CHECK(late_recv(sv, &c));
	return NULL;
}

START_TEST(nonblock_toggle)
{
	wt_init(_i);
	run_on_socketpair(nonblock_toggle_cases);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

START_TEST(partial_and_eof)
{
	int p[4];
	weft_thread_t a, b;

	wt_init(_i);
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(p + 2, O_CLOEXEC), 0);
	fcntl(p[3], F_SETPIPE_SZ, 4096);
	a = spawn_on(0, partial_reader, p);
	b = spawn_on(1, big_writer, p);
	join(a);
	join(b);
	close(p[0]);
	close(p[1]);
	close(p[2]);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* No fd is leaked by the runtime, the rings, the pool or the poller. */
static void *offload_noop(void *arg)
{
	return arg;
}

static void *fd_churn(void *arg)
{
	int *sv = arg;
	char c;

	WT_CHECK(weft_offload(offload_noop, (void *)7) == (void *)7);
	WT_CHECK(weft_io_poll(sv[0], POLLIN, 10) == 0);
	WT_CHECK(weft_io_send(sv[1], "z", 1, 0) == 1);
	WT_CHECK(weft_io_recv(sv[0], &c, 1, 0) == 1 && c == 'z');
	file_ops(NULL);
	return NULL;
}

START_TEST(no_fd_leak)
{
	int before, after, sv[2];
	struct tcp_ctx c = { .rounds = 3 };
	int fd;

	snprintf(tmp_path, sizeof(tmp_path), "/tmp/weft-check-io-XXXXXX");
	fd = mkstemp(tmp_path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	before = count_fds();
	wt_init(_i);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	c.lfd = listen_loopback(&c.sa, 16);
	{
		weft_thread_t s = spawn_on(0, echo_server_one, &c);
		weft_thread_t cl = spawn_on(1, echo_client, &c);
		weft_thread_t f = spawn_on(-1, fd_churn, sv);

		join(cl);
		join(s);
		join(f);
	}
	close(c.lfd);
	close(sv[0]);
	close(sv[1]);
	wt_shutdown();
	after = count_fds();
	unlink(tmp_path);
	wt_assert_no_failure();
	ck_assert_int_eq(before, after);
}
END_TEST

/* weft_init() returns after every worker set its ring up: the runtime
 * opens no descriptor behind the application's back afterwards (a worker
 * doing it late once reused a number the application had just closed,
 * and a poll on that closed descriptor saw a live ring). */
START_TEST(init_barrier)
{
	int after_init, later;

	wt_init(_i);
	after_init = count_fds();
	usleep(50000);
	later = count_fds();
	wt_shutdown();
	ck_assert_int_eq(after_init, later);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* errors */

static void *error_cases(void *arg)
{
	int p[2], sv[2];
	char buf[8];
	struct sockaddr_in *refused = arg;
	int s;

	WT_CHECK(weft_io_read(-1, buf, 1) == -1 && weft_errno() == EBADF);
	WT_CHECK(weft_io_write(-1, buf, 1) == -1 && weft_errno() == EBADF);
	WT_CHECK(weft_io_recv(-1, buf, 1, 0) == -1 && weft_errno() == EBADF);
	WT_CHECK(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
	/* non-blocking descriptor: EAGAIN, no park */
	WT_CHECK(weft_io_read(p[0], buf, 1) == -1 && weft_errno() == EAGAIN);
	WT_CHECK(weft_io_recv(p[0], buf, 1, 0) == -1 && weft_errno() == ENOTSOCK);
	WT_CHECK(weft_io_pread(p[0], buf, 1, -1) == -1 && weft_errno() == EINVAL);
	WT_CHECK(weft_io_poll(-1, POLLIN, 0) == POLLNVAL);
	close(p[0]);
	close(p[1]);
	/* a closed descriptor: POLLNVAL, as poll(2) */
	WT_CHECK(weft_io_poll(p[0], POLLIN, 100) == POLLNVAL);
	WT_CHECK(weft_io_close(p[0]) == -1 && weft_errno() == EBADF);
	WT_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	WT_CHECK(weft_io_recv(sv[0], buf, 1, MSG_DONTWAIT) == -1 && weft_errno() == EAGAIN);
	close(sv[1]);
	WT_CHECK(weft_io_recv(sv[0], buf, 1, 0) == 0);   /* EOF */
	WT_CHECK(weft_io_send(sv[0], buf, 1, MSG_NOSIGNAL) == -1 && weft_errno() == EPIPE);
	close(sv[0]);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	WT_CHECK(weft_io_connect(s, (struct sockaddr *)refused, sizeof(*refused)) == -1 &&
		 weft_errno() == ECONNREFUSED);
	close(s);
	return NULL;
}

/* A weft thread's send to a closed peer fails with EPIPE and raises no
 * SIGPIPE on any backend (io_uring's send cannot raise it). SIGPIPE keeps
 * its default action here, so a raised signal kills the test. Failed
 * before with NO_URING (the fallback's send raised it: signal 13). */
static void *no_sigpipe_cases(void *arg)
{
	int sv[2];
	char buf[8] = "x";
	struct iovec v = { buf, 1 };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };

	(void)arg;
	WT_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	close(sv[1]);
	WT_CHECK(weft_io_send(sv[0], buf, 1, 0) == -1 && weft_errno() == EPIPE);
	WT_CHECK(weft_io_sendmsg(sv[0], &m, 0) == -1 && weft_errno() == EPIPE);
	close(sv[0]);
	return NULL;
}

START_TEST(send_no_sigpipe)
{
	wt_init(_i);
	signal(SIGPIPE, SIG_DFL);
	join(spawn_on(-1, no_sigpipe_cases, NULL));
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

START_TEST(errnos)
{
	struct sockaddr_in sa;
	int lfd;

	wt_init(_i);
	/* a port that nobody listens on: bind, learn it, close */
	lfd = listen_loopback(&sa, 1);
	close(lfd);
	join(spawn_on(-1, error_cases, &sa));
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* Non-blocking descriptors keep their meaning on every call, not only on
 * read/recv (errnos): from a weft thread,
 *   - accept on an O_NONBLOCK listener with nothing pending fails with
 *     EAGAIN (a call that parked would wait for a connection that never
 *     comes: the test times out);
 *   - connect on an O_NONBLOCK socket to a listening loopback port returns
 *     0 or EINPROGRESS, and the connection then completes (POLLOUT,
 *     SO_ERROR 0, accepted, a byte goes through);
 *   - send on a full socketpair fails with EAGAIN, both with MSG_DONTWAIT
 *     and on an O_NONBLOCK socket without it, and succeeds again once the
 *     peer drained it (so the EAGAIN was the full buffer, not an error). */
static void *nonblock_cases(void *arg)
{
	int lfd = *(int *)arg, c, a, sv[2], err = -1, filled = 0;
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa), elen = sizeof(err);
	static char big[1 << 16];
	char buf[64] = "";
	ssize_t n;

	/* accept: nothing pending */
	WT_CHECK(weft_io_accept(lfd, NULL, NULL, SOCK_CLOEXEC) == -1 && weft_errno() == EAGAIN);
	/* connect: in progress (or done at once on loopback), then completes */
	WT_CHECK(getsockname(lfd, (struct sockaddr *)&sa, &len) == 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	WT_CHECK(c >= 0);
	n = weft_io_connect(c, (struct sockaddr *)&sa, sizeof(sa));
	WT_CHECK(n == 0 || (n == -1 && weft_errno() == EINPROGRESS));
	WT_CHECK(weft_io_poll(c, POLLOUT, 5000) & POLLOUT);
	WT_CHECK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0);
	WT_CHECK(weft_io_poll(lfd, POLLIN, 5000) & POLLIN);
	a = weft_io_accept(lfd, NULL, NULL, SOCK_CLOEXEC);
	WT_CHECK(a >= 0);
	WT_CHECK(weft_io_send(c, "n", 1, 0) == 1);
	WT_CHECK(weft_io_recv(a, buf, 1, 0) == 1 && buf[0] == 'n');
	close(a);
	close(c);
	/* send: fill sv[0] (plain non-blocking sends, big then 1 byte) */
	WT_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	for (size_t chunk = sizeof(big); chunk; chunk = chunk > 1 ? 1 : 0)
		for (int i = 0; i < 100000 && send(sv[0], big, chunk, MSG_DONTWAIT) > 0; i++)
			filled++;
	WT_CHECK(filled > 0);
	WT_CHECK(send(sv[0], big, 1, MSG_DONTWAIT) == -1 && weft_errno() == EAGAIN);
	WT_CHECK(weft_io_send(sv[0], "x", 1, MSG_DONTWAIT) == -1 && weft_errno() == EAGAIN);
	WT_CHECK(fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK) == 0);
	WT_CHECK(weft_io_send(sv[0], "x", 1, 0) == -1 && weft_errno() == EAGAIN);
	WT_CHECK(weft_io_write(sv[0], "x", 1) == -1 && weft_errno() == EAGAIN);
	/* drained: room again */
	while (recv(sv[1], big, sizeof(big), MSG_DONTWAIT) > 0)
		;
	WT_CHECK(weft_io_send(sv[0], "x", 1, 0) == 1);
	close(sv[0]);
	close(sv[1]);
	return NULL;
}

START_TEST(nonblock_eagain)
{
	struct sockaddr_in sa;
	int lfd;

	wt_init(_i);
	lfd = listen_loopback(&sa, 4);
	ck_assert_int_eq(fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK), 0);
	join(spawn_on(-1, nonblock_cases, &lfd));
	close(lfd);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* timeout */

static void *timeout_cases(void *arg)
{
	int p[2], lfd = *(int *)arg;
	char c;
	weft_time_t t0;

	WT_CHECK(pipe2(p, O_CLOEXEC) == 0);
	WT_CHECK(weft_io_get_timeout() == 0);
	WT_CHECK(weft_io_set_timeout(50000000ull) == 0);
	WT_CHECK(weft_io_get_timeout() == 50000000ull);
	t0 = weft_now_ns();
	WT_CHECK(weft_io_read(p[0], &c, 1) == -1 && weft_errno() == ETIMEDOUT);
	WT_CHECK(weft_now_ns() - t0 >= 45000000ull);
	t0 = weft_now_ns();
	WT_CHECK(weft_io_accept(lfd, NULL, NULL, 0) == -1 && weft_errno() == ETIMEDOUT);
	WT_CHECK(weft_now_ns() - t0 >= 45000000ull);
	/* data present: the timeout does not fire */
	WT_CHECK(weft_io_write(p[1], "q", 1) == 1);
	WT_CHECK(weft_io_read(p[0], &c, 1) == 1 && c == 'q');
	WT_CHECK(weft_io_set_timeout(0) == 0);
	/* poll's own timeout: 0, and unaffected by the thread timeout */
	t0 = weft_now_ns();
	WT_CHECK(weft_io_poll(p[0], POLLIN, 30) == 0);
	WT_CHECK(weft_now_ns() - t0 >= 25000000ull);
	close(p[0]);
	close(p[1]);
	return NULL;
}

START_TEST(timeouts)
{
	struct sockaddr_in sa;
	int lfd;

	wt_init(_i);
	lfd = listen_loopback(&sa, 1);
	join(spawn_on(-1, timeout_cases, &lfd));
	close(lfd);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* A timed-out read leaves the thread's other I/O working (the linked
 * timeout's CQE arrives after the thread moved on). */
static void *timeout_then_traffic(void *arg)
{
	int *sv = arg;
	char c;

	for (int i = 0; i < 20; i++) {
		WT_CHECK(weft_io_set_timeout(1000000ull) == 0);   /* 1 ms */
		WT_CHECK(weft_io_recv(sv[0], &c, 1, 0) == -1 && weft_errno() == ETIMEDOUT);
		WT_CHECK(weft_io_set_timeout(0) == 0);
		WT_CHECK(weft_io_send(sv[1], "k", 1, 0) == 1);
		WT_CHECK(weft_io_recv(sv[0], &c, 1, 0) == 1 && c == 'k');
	}
	return NULL;
}

START_TEST(timeout_repeat)
{
	wt_init(_i);
	run_on_socketpair(timeout_then_traffic);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* os_thread */

START_TEST(os_thread_plain)
{
	int p[2];
	char c = 0;

	/* runtime not started: the plain syscalls */
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(weft_io_write(p[1], "a", 1), 1);
	ck_assert_int_eq(weft_io_read(p[0], &c, 1), 1);
	ck_assert_int_eq(c, 'a');
	/* runtime running, called from main: still the plain syscalls */
	wt_init(_i);
	ck_assert_int_eq(weft_io_write(p[1], "b", 1), 1);
	ck_assert_int_eq(weft_io_poll(p[0], POLLIN, 1000), POLLIN);
	ck_assert_int_eq(weft_io_read(p[0], &c, 1), 1);
	ck_assert_int_eq(c, 'b');
	ck_assert_int_eq(weft_io_poll(p[0], POLLIN, 10), 0);
	ck_assert_int_eq(weft_io_set_timeout(1000), EPERM);
	ck_assert_int_eq(weft_io_get_timeout(), 0);
	ck_assert_int_eq(weft_io_read(-1, &c, 1), -1);
	ck_assert_int_eq(errno, EBADF);
	wt_shutdown();
	close(p[0]);
	close(p[1]);
}
END_TEST

static void *tid_fn(void *arg)
{
	*(pid_t *)arg = (pid_t)syscall(SYS_gettid);
	errno = ENOENT;
	return (void *)42;
}

START_TEST(os_thread_offload_inline)
{
	pid_t tid = 0;

	errno = 0;
	ck_assert_ptr_eq(weft_offload(tid_fn, &tid), (void *)42);
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(tid, (pid_t)syscall(SYS_gettid));
	ck_assert_ptr_null(weft_offload(NULL, NULL));
	ck_assert_int_eq(errno, EINVAL);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* offload */

static void *offload_tid(void *arg)
{
	pid_t tid = 0, mine = (pid_t)syscall(SYS_gettid);
	void *r;

	(void)arg;
	errno = 0;
	r = weft_offload(tid_fn, &tid);
	WT_CHECK(r == (void *)42);
	WT_CHECK(weft_errno() == ENOENT);   /* the helper's errno, copied */
	WT_CHECK(tid != 0 && tid != mine);
	return NULL;
}

START_TEST(offload_runs_elsewhere)
{
	wt_init(_i);
	join(spawn_on(-1, offload_tid, NULL));
	wt_assert_no_failure();
	ck_assert_int_eq(weft_offload_set_max(0), EINVAL);
	ck_assert_int_eq(weft_offload_set_max(100000), EINVAL);
	wt_shutdown();
}
END_TEST

static _Atomic int in_flight, max_in_flight;
/* Callers on worker 0 inside weft_offload: while one is, a worker blocked
 * by the offload could run nothing else. */
static _Atomic int w0_waiting;

enum { OFFLOAD_JOBS = 32, OFFLOAD_MAX = 4, OFFLOAD_JOB_MS = 20 };

static void *slow_job(void *arg)
{
	wt_atomic_max(&max_in_flight, atomic_fetch_add(&in_flight, 1) + 1);
	usleep(OFFLOAD_JOB_MS * 1000);
	atomic_fetch_sub(&in_flight, 1);
	return arg;
}

/* arg: job index + 1; the caller runs on worker index % workers
 * (spawn_on) */
static void *offload_caller(void *arg)
{
	bool on_w0 = ((intptr_t)arg - 1) % weft_workers() == 0;

	if (on_w0)
		atomic_fetch_add(&w0_waiting, 1);
	WT_CHECK(weft_offload(slow_job, arg) == arg);
	if (on_w0)
		atomic_fetch_sub(&w0_waiting, 1);
	return NULL;
}

static _Atomic int ticks;
static _Atomic int ticking;

/* Runs on worker 0: counts the 1 ms sleeps it finished while a caller of
 * worker 0 was inside weft_offload. */
static void *ticker(void *arg)
{
	(void)arg;
	while (atomic_load(&ticking)) {
		weft_sleep_ns(1000000ull);
		if (atomic_load(&w0_waiting) > 0)
			atomic_fetch_add(&ticks, 1);
	}
	return NULL;
}

/* More jobs than helpers: all complete, at most OFFLOAD_MAX at a time,
 * and the workers keep running other threads meanwhile: a ticker on worker
 * 0 keeps waking while worker 0's callers wait for their jobs. The tick
 * count is not a rate (a loaded host may wake the ticker late, many ms per
 * tick): worker 0's callers wait for most of the ~160 ms the jobs take,
 * and 3 ticks in that window allow 50 ms per tick (a TSan build on a
 * loaded 2-CPU host counted 4). An offload that blocked its worker instead
 * would leave no tick at all in it: the ticker would then run on worker 0
 * only between calls. */
START_TEST(offload_bounded)
{
	weft_thread_t t[OFFLOAD_JOBS], tk;
	weft_stats_t st;
	weft_time_t t0;
	int nticks;

	ck_assert_int_eq(weft_offload_set_max(OFFLOAD_MAX), 0);
	wt_init(_i);
	atomic_store(&in_flight, 0);
	atomic_store(&max_in_flight, 0);
	atomic_store(&w0_waiting, 0);
	atomic_store(&ticks, 0);
	atomic_store(&ticking, 1);
	tk = spawn_on(0, ticker, NULL);
	t0 = weft_now_ns();
	for (int i = 0; i < OFFLOAD_JOBS; i++)
		t[i] = spawn_on(i, offload_caller, (void *)(intptr_t)(i + 1));
	for (int i = 0; i < OFFLOAD_JOBS; i++)
		join(t[i]);
	/* the helpers ran the jobs OFFLOAD_MAX at a time (10% slack) */
	ck_assert_uint_ge(weft_now_ns() - t0, (uint64_t)OFFLOAD_JOBS / OFFLOAD_MAX *
			  OFFLOAD_JOB_MS * 1000000ull * 9 / 10);
	atomic_store(&ticking, 0);
	join(tk);
	wt_assert_no_failure();
	nticks = atomic_load(&ticks);
	printf("offload_bounded[%s]: max_in_flight=%d ticks while worker 0 waited=%d\n",
	       wt_configs[_i].name, atomic_load(&max_in_flight), nticks);
	fflush(stdout);
	ck_assert_int_le(atomic_load(&max_in_flight), OFFLOAD_MAX);
	ck_assert_int_ge(nticks, 3);
	ck_assert_int_eq(weft_stats_get(&st), 0);
	ck_assert_uint_ge(st.offloads, OFFLOAD_JOBS);
	wt_shutdown();
	weft_offload_set_max(16);
}
END_TEST

/* ---------------------------------------------------------------------- */
/* contended: many connections, many threads */

/* Under TSan every switch and socket call is instrumented, and 1,000
 * connections (2,000 threads) took 45-72 s per configuration there, past
 * the test's timeout; 250 drive the same accept, connect and wake paths. */
#ifdef __SANITIZE_THREAD__
enum { CONNS = 250 };
#else
enum { CONNS = 1000 };
#endif

struct many {
	int lfd;
	struct sockaddr_in sa;
	_Atomic int connected;
	_Atomic int served;
	weft_sem_t all_open;      /* posted CONNS - 1 times by the last client */
	weft_thread_t handlers[CONNS];
};

static void *many_handler(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[64];
	ssize_t n;

	while ((n = weft_io_recv(fd, buf, sizeof(buf), 0)) > 0)
		WT_CHECK(send_all(fd, buf, (size_t)n));
	WT_CHECK(n == 0);
	WT_CHECK(weft_io_close(fd) == 0);
	return NULL;
}

static void *many_acceptor(void *arg)
{
	struct many *m = arg;

	for (int i = 0; i < CONNS; i++) {
		int fd = weft_io_accept(m->lfd, NULL, NULL, SOCK_CLOEXEC);

		WT_CHECK(fd >= 0);
		if (fd < 0)
			break;
		m->handlers[i] = spawn_on(-1, many_handler, (void *)(intptr_t)fd);
		atomic_fetch_add(&m->served, 1);
	}
	return NULL;
}

static struct many *many_ctx;

static void *many_client(void *arg)
{
	struct many *m = many_ctx;
	int id = (int)(intptr_t)arg, back = -1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	WT_CHECK(fd >= 0);
	WT_CHECK(weft_io_connect(fd, (struct sockaddr *)&m->sa, sizeof(m->sa)) == 0);
	WT_CHECK(send_all(fd, &id, sizeof(id)));
	WT_CHECK(recv_all(fd, &back, sizeof(back)) && back == id);
	/* hold the connection until all are open: CONNS at once. The last
	 * one releases the others (a sleep-and-look loop here made 1,000
	 * threads wake every 2 ms, which TSan could not keep up with: the
	 * test ran past its 60 s timeout under it) */
	if (atomic_fetch_add(&m->connected, 1) + 1 == CONNS)
		WT_CHECK(weft_sem_post_n(&m->all_open, CONNS - 1) == 0);
	else
		while (weft_sem_timedwait(&m->all_open, weft_now_ns() + 100000000ull) == ETIMEDOUT &&
		       !atomic_load(&wt_failure))
			;
	id = ~id;
	WT_CHECK(send_all(fd, &id, sizeof(id)));
	WT_CHECK(recv_all(fd, &back, sizeof(back)) && back == id);
	WT_CHECK(weft_io_close(fd) == 0);
	return NULL;
}

START_TEST(thousand_connections)
{
	struct many *m = calloc(1, sizeof(*m));
	weft_thread_t *cl = calloc(CONNS, sizeof(*cl)), acc;
	struct rlimit rl;

	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 2 * CONNS + 64) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	ck_assert_msg(rl.rlim_cur >= 2 * CONNS + 64, "RLIMIT_NOFILE %lu too low for %d connections",
		      (unsigned long)rl.rlim_cur, CONNS);
	wt_init(_i);
	many_ctx = m;
	ck_assert_int_eq(weft_sem_init(&m->all_open, 0), 0);
	m->lfd = listen_loopback(&m->sa, CONNS);
	acc = spawn_on(-1, many_acceptor, m);
	for (int i = 0; i < CONNS; i++)
		cl[i] = spawn_on(i, many_client, (void *)(intptr_t)i);
	for (int i = 0; i < CONNS; i++)
		join(cl[i]);
	join(acc);
	ck_assert_int_eq(atomic_load(&m->served), CONNS);
	for (int i = 0; i < CONNS; i++)
		join(m->handlers[i]);
	close(m->lfd);
	wt_assert_no_failure();
	ck_assert_int_eq(atomic_load(&m->connected), CONNS);
	ck_assert_int_eq(weft_sem_destroy(&m->all_open), 0);
	wt_shutdown();
	free(cl);
	free(m);
}
END_TEST

/* Connection churn with exact counts: no request is lost or answered
 * twice while connections come and go (connect, requests, close, repeat).
 * CHURN_SLOTS client threads each open CHURN_ROUNDS connections in a row
 * and send CHURN_REQS requests on each, one at a time. The server is an
 * acceptor thread and a thread per connection (the shape of
 * examples/conn_server.h); it counts the connections it accepted, and
 * each request it served in a table indexed by (slot, round, request).
 * At the end every table entry must be exactly 1, and connections
 * accepted = connections the clients opened, requests served = requests
 * sent = responses received. Even rounds end with the client's close (the
 * handler reads EOF); in odd rounds the last request asks the server to
 * close, and the client must read EOF right after the response. The
 * acceptor stops at a connection made after every client was joined,
 * with the stop flag set. */
#ifdef __SANITIZE_THREAD__
/* TSan: 1.0-9.7 s per configuration at 8 x 8 on the loaded 2-CPU
 * machine (thread creation and every switch instrumented) */
enum { CHURN_SLOTS = 4, CHURN_ROUNDS = 6, CHURN_REQS = 3 };
#else
enum { CHURN_SLOTS = 16, CHURN_ROUNDS = 16, CHURN_REQS = 3 };
#endif
enum { CHURN_CONNS = CHURN_SLOTS * CHURN_ROUNDS, CHURN_CLOSE = 1 };

struct churn_msg {
	int32_t slot, round, req, flags;
};

struct churn {
	int lfd;
	struct sockaddr_in sa;
	_Atomic int stop;
	/* server side */
	_Atomic long accepted, served;
	_Atomic uint8_t tab[CHURN_SLOTS][CHURN_ROUNDS][CHURN_REQS];
	weft_thread_t handlers[CHURN_CONNS + 1];
	int nhandlers;            /* the acceptor's; read after its join */
	/* client side */
	_Atomic long opened, sent, received;
};

static struct churn *churn_ctx;

/* One whole message, or 0 on EOF before its first byte, -1 otherwise. */
static int churn_recv(int fd, struct churn_msg *m)
{
	char *p = (char *)m;
	size_t n = 0;

	while (n < sizeof(*m)) {
		ssize_t k = weft_io_recv(fd, p + n, sizeof(*m) - n, 0);

		if (k <= 0)
			return k == 0 && n == 0 ? 0 : -1;
		n += (size_t)k;
	}
	return 1;
}

static void *churn_handler(void *arg)
{
	struct churn *c = churn_ctx;
	int fd = (int)(intptr_t)arg, rc;
	struct churn_msg m;

	while ((rc = churn_recv(fd, &m)) == 1) {
		bool ok = m.slot >= 0 && m.slot < CHURN_SLOTS && m.round >= 0 &&
			  m.round < CHURN_ROUNDS && m.req >= 0 && m.req < CHURN_REQS;

		WT_CHECK(ok);
		if (!ok)
			break;
		/* relaxed: counts, read by the test body after the joins */
		atomic_fetch_add_explicit(&c->tab[m.slot][m.round][m.req], 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&c->served, 1, memory_order_relaxed);
		m.flags |= 0x100;   /* a response, not an echo */
		m.req = ~m.req;
		WT_CHECK(send_all(fd, &m, sizeof(m)));
		if (m.flags & CHURN_CLOSE)
			break;
	}
	WT_CHECK(rc >= 0);
	WT_CHECK(weft_io_close(fd) == 0);
	return NULL;
}

static void *churn_acceptor(void *arg)
{
	struct churn *c = arg;
	weft_attr_t a;

	weft_attr_init(&a);
	a.stack_size = 64 * 1024;
	for (;;) {
		int fd = weft_io_accept(c->lfd, NULL, NULL, SOCK_CLOEXEC);

		WT_CHECK(fd >= 0);
		if (fd < 0)
			break;
		/* the stop connection is made after the flag's store (the
		 * test body's connect), and every client's before it, so a
		 * connection accepted without the flag is a client's.
		 * seq_cst: the flag and the connect/accept hand-off through
		 * the kernel are the only order between the two threads */
		if (atomic_load_explicit(&c->stop, memory_order_seq_cst)) {
			close(fd);
			break;
		}
		atomic_fetch_add_explicit(&c->accepted, 1, memory_order_relaxed);
		WT_CHECK(c->nhandlers < CHURN_CONNS);
		if (c->nhandlers >= CHURN_CONNS ||
		    weft_spawn(&c->handlers[c->nhandlers], churn_handler, (void *)(intptr_t)fd, &a) != 0) {
			WT_CHECK(!"handler spawned");
			close(fd);
			break;
		}
		c->nhandlers++;
	}
	return NULL;
}

static void *churn_client(void *arg)
{
	struct churn *c = churn_ctx;
	int slot = (int)(intptr_t)arg;

	for (int r = 0; r < CHURN_ROUNDS && !atomic_load(&wt_failure); r++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		char x;

		WT_CHECK(fd >= 0);
		if (fd < 0)
			return NULL;
		if (weft_io_connect(fd, (struct sockaddr *)&c->sa, sizeof(c->sa)) != 0) {
			WT_CHECK(!"connect");
			close(fd);
			return NULL;
		}
		atomic_fetch_add_explicit(&c->opened, 1, memory_order_relaxed);
		for (int q = 0; q < CHURN_REQS; q++) {
			struct churn_msg m = { slot, r, q, 0 }, b;

			if ((r & 1) && q == CHURN_REQS - 1)
				m.flags = CHURN_CLOSE;
			if (!send_all(fd, &m, sizeof(m))) {
				WT_CHECK(!"request sent");
				break;
			}
			atomic_fetch_add_explicit(&c->sent, 1, memory_order_relaxed);
			if (churn_recv(fd, &b) != 1) {
				WT_CHECK(!"response received");
				break;
			}
			WT_CHECK(b.slot == slot && b.round == r && b.req == ~q &&
				 b.flags == (m.flags | 0x100));
			atomic_fetch_add_explicit(&c->received, 1, memory_order_relaxed);
		}
		/* odd rounds: the server closes after the response, and
		 * nothing else arrives (a duplicated response would) */
		if (r & 1)
			WT_CHECK(weft_io_recv(fd, &x, 1, 0) == 0);
		WT_CHECK(weft_io_close(fd) == 0);
	}
	return NULL;
}

START_TEST(churn_exact_counts)
{
	struct churn *c = calloc(1, sizeof(*c));
	weft_thread_t cl[CHURN_SLOTS], acc;
	long dups = 0, lost = 0;
	int sfd;

	ck_assert_ptr_nonnull(c);
	wt_init(_i);
	churn_ctx = c;
	c->lfd = listen_loopback(&c->sa, CHURN_SLOTS * 2);
	acc = spawn_on(-1, churn_acceptor, c);
	for (int i = 0; i < CHURN_SLOTS; i++)
		cl[i] = spawn_on(i, churn_client, (void *)(intptr_t)i);
	for (int i = 0; i < CHURN_SLOTS; i++)
		join(cl[i]);
	/* seq_cst: see churn_acceptor */
	atomic_store_explicit(&c->stop, 1, memory_order_seq_cst);
	sfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(sfd, 0);
	ck_assert_int_eq(connect(sfd, (struct sockaddr *)&c->sa, sizeof(c->sa)), 0);
	join(acc);
	close(sfd);
	for (int i = 0; i < c->nhandlers; i++)
		join(c->handlers[i]);
	close(c->lfd);
	wt_assert_no_failure();
	for (int s = 0; s < CHURN_SLOTS; s++)
		for (int r = 0; r < CHURN_ROUNDS; r++)
			for (int q = 0; q < CHURN_REQS; q++) {
				int n = atomic_load(&c->tab[s][r][q]);

				lost += n == 0;
				dups += n > 1;
			}
	printf("churn [%s]: %ld connections opened, %ld accepted; %ld requests sent, %ld served, "
	       "%ld answered\n", wt_configs[_i].name, atomic_load(&c->opened), atomic_load(&c->accepted),
	       atomic_load(&c->sent), atomic_load(&c->served), atomic_load(&c->received));
	ck_assert_msg(lost == 0 && dups == 0, "%ld requests never served, %ld served twice", lost, dups);
	ck_assert_int_eq(atomic_load(&c->opened), CHURN_CONNS);
	ck_assert_int_eq(atomic_load(&c->accepted), CHURN_CONNS);
	ck_assert_int_eq(c->nhandlers, CHURN_CONNS);
	ck_assert_int_eq(atomic_load(&c->sent), CHURN_CONNS * CHURN_REQS);
	ck_assert_int_eq(atomic_load(&c->served), CHURN_CONNS * CHURN_REQS);
	ck_assert_int_eq(atomic_load(&c->received), CHURN_CONNS * CHURN_REQS);
	wt_shutdown();
	free(c);
}
END_TEST

/* Many pairs ping-ponging on a few workers: threads get stolen and resume
 * on other workers between calls; every byte still arrives in order. */
enum { PAIRS = 16, ROUNDS = 300 };

/* A pair side's argument: its fd, and 1 << 16 for the side that sends
 * first (pair_arg); pair_round() is one exchange of round i. */
static void *pair_arg(int fd, int first)
{
	return (void *)(intptr_t)(fd | first << 16);
}

static void pair_round(void *arg, int i)
{
	int fd = (int)(intptr_t)arg & 0xffff, first = (int)(intptr_t)arg >> 16;
	int v = i, back = -1;

	if (first) {
		WT_CHECK(weft_io_write(fd, &v, sizeof(v)) == sizeof(v));
		WT_CHECK(read_all(fd, &back, sizeof(back)) && back == i);
	} else {
		WT_CHECK(read_all(fd, &back, sizeof(back)) && back == i);
		WT_CHECK(weft_io_write(fd, &v, sizeof(v)) == sizeof(v));
	}
}

/* n socketpairs, each with its two sides running fn on any worker; joins
 * them and closes the sockets. Context: the test body. */
static void run_pairs(int n, void *(*fn)(void *))
{
	int sv[PAIRS][2];
	weft_thread_t t[PAIRS][2];

	ck_assert_int_le(n, PAIRS);
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv[i]), 0);
		t[i][0] = spawn_on(-1, fn, pair_arg(sv[i][0], 1));
		t[i][1] = spawn_on(-1, fn, pair_arg(sv[i][1], 0));
	}
	for (int i = 0; i < n; i++) {
		join(t[i][0]);
		join(t[i][1]);
		close(sv[i][0]);
		close(sv[i][1]);
	}
}

/* migrating_pairs also shows that threads do move: each side counts
 * itself once if weft_worker_id() differed across one exchange's I/O
 * calls (parked on one worker, resumed on another: runtime/uring.c I3).
 * With STEAL on and 2+ workers that must happen; runs with fewer
 * workers, or with STEAL off, only print the count. The first side of
 * each pair decides when the pair stops: after ROUNDS, once some thread
 * (any pair) has moved or MIG_WAIT_NS has passed; it sends -1 to end the
 * pair. So a slow host (sanitizers, a parallel make) gets more rounds
 * rather than a failure, while a scheduler that never moves a thread
 * off a worker with a backlog fails.
 *
 * A run may also settle where no move is needed, and then none comes:
 * both workers busy with pairs split one side per worker (the round-robin
 * spawn from this OS thread), or with pairs whose two sides share a
 * worker after early steals. Neither worker is ever idle, so neither
 * steals, which is right (about 1 run in 30 here, with 10 s to wait).
 * So the pairs run again, fresh, up to MIG_TRIES times, each with
 * MIG_WAIT_NS to show a move: a scheduler that moves threads passes
 * the first or second time, one that never does fails every time. */
#define MIG_WAIT_NS (1500 * 1000000ull)
#define MIG_TRIES 8
static _Atomic int mig_moved;        /* sides that saw a move */
static weft_time_t mig_deadline;     /* written before the spawns */
static bool mig_want;                /* ditto: a move is required */

static void *mig_side(void *arg)
{
	int fd = (int)(intptr_t)arg & 0xffff, first = (int)(intptr_t)arg >> 16;
	bool moved = false, ok = true;

	for (int i = 0; ok; i++) {
		int w0 = weft_worker_id(), v = i, back = -1;

		if (first) {
			if (i >= ROUNDS && (!mig_want || atomic_load(&mig_moved) > 0 ||
					    weft_now_ns() > mig_deadline))
				v = -1;
			ok = weft_io_write(fd, &v, sizeof(v)) == sizeof(v);
			WT_CHECK(ok);
			if (!ok || v == -1)
				break;
			ok = read_all(fd, &back, sizeof(back)) && back == i;
			WT_CHECK(ok);
		} else {
			ok = read_all(fd, &back, sizeof(back));
			WT_CHECK(ok);
			if (!ok || back == -1)
				break;
			WT_CHECK(back == i);
			ok = weft_io_write(fd, &back, sizeof(back)) == sizeof(back);
			WT_CHECK(ok);
		}
		if (!moved && weft_worker_id() != w0) {
			moved = true;
			atomic_fetch_add(&mig_moved, 1);
		}
		if (i % 7 == 0)
			weft_yield();
	}
	if (!ok)
		shutdown(fd, SHUT_RDWR);   /* the peer reads EOF and ends too */
	return NULL;
}

START_TEST(migrating_pairs)
{
	weft_stats_t a, b;
	int moved, tries = 0;

	wt_init(_i);
	mig_want = weft_feature("STEAL") == 1 && weft_workers() >= 2;
	ck_assert_int_eq(weft_stats_get(&a), 0);
	do {
		atomic_store(&mig_moved, 0);
		mig_deadline = weft_now_ns() + MIG_WAIT_NS;
		run_pairs(PAIRS, mig_side);
		wt_assert_no_failure();
		moved = atomic_load(&mig_moved);
	} while (mig_want && moved == 0 && ++tries < MIG_TRIES);
	ck_assert_int_eq(weft_stats_get(&b), 0);
	printf("migrating_pairs[%s]: %d of %d threads moved across an I/O call in run %d "
	       "(steals %llu, migrations %llu)%s\n", wt_configs[_i].name, moved, 2 * PAIRS,
	       tries + 1, (unsigned long long)(b.steals - a.steals),
	       (unsigned long long)(b.migrations - a.migrations), mig_want ? "" : ", not required");
	fflush(stdout);
	if (mig_want)
		ck_assert_msg(moved > 0, "STEAL on, %d workers: no thread resumed on another worker "
			      "across an I/O call in %d runs of %llu ms", weft_workers(), MIG_TRIES,
			      MIG_WAIT_NS / 1000000ull);
	wt_shutdown();
}
END_TEST

/* ---------------------------------------------------------------------- */
/* backend and counters */

static void *batch_writer(void *arg)
{
	int fd = (int)(intptr_t)arg;

	WT_CHECK(weft_io_write(fd, "b", 1) == 1);
	return NULL;
}

enum { BATCH_N = 256 };

/* Spawns BATCH_N writers on its own worker before any of them runs (it
 * keeps the worker until it parks in join), so all of them are runnable
 * at once and queue their SQEs in the same rounds. */
static void *batch_spawner(void *arg)
{
	weft_thread_t t[BATCH_N];
	weft_attr_t a;

	weft_attr_init(&a);
	a.stack_size = 64 * 1024;
	for (int i = 0; i < BATCH_N; i++)
		WT_CHECK(weft_spawn(&t[i], batch_writer, arg, &a) == 0);
	for (int i = 0; i < BATCH_N; i++)
		WT_CHECK(weft_join(t[i], NULL) == 0);
	return NULL;
}

static void *fsync_probe(void *arg)
{
	WT_CHECK(weft_io_fsync((int)(intptr_t)arg) == -1 && weft_errno() == EINVAL);
	return NULL;
}

static int backend_result;

static void *backend_probe(void *arg)
{
	backend_result = weft_io_backend(arg, 256);
	return NULL;
}

/* The backend matches WEFT_FEATURES; with io_uring, SQEs of runnable
 * threads are submitted in batches (far fewer enters than SQEs).
 * io_uring is used by default: when the kernel gives this process a ring
 * (uring_probe), URING is on and we are not on Valgrind, every worker must
 * report a ring, and when the kernel takes COOP_TASKRUN (5.19+) the chosen
 * mode must be a TASKRUN one (Setup in runtime/uring.c): fails if the
 * runtime silently falls back to the offload pool, or steps down to the
 * flagless mode (task-work IPIs while threads run) on a kernel that has
 * the better ones. (A memlock limit that refuses the runtime's larger
 * rings but not the 2-entry probe would fail it too: only kernels before
 * 5.12 charge rings to memlock.) */
START_TEST(backend_and_batching)
{
	enum { N = BATCH_N };
	char desc[256];
	int p[2], uring;
	weft_stats_t a, b;

	wt_init_workers(1);
	/* from a weft thread: the worker has set its ring up by then */
	join(spawn_on(0, backend_probe, desc));
	uring = backend_result;
	printf("io backend: %s\n", desc);
	{
		/* WEFT_STATS names the backend (the stats table ends with it) */
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		ck_assert_ptr_nonnull(f);
		ck_assert_int_eq(weft_stats_print(f), 0);
		fclose(f);
		ck_assert_ptr_nonnull(strstr(buf, "io: "));
		ck_assert_ptr_nonnull(strstr(buf, desc));
		free(buf);
	}
	if (!uring_expected()) {
		ck_assert_int_eq(uring, 0);
		ck_assert_ptr_nonnull(strstr(desc, "NO_URING"));
	} else if (WT_ON_VALGRIND() || !uring_probe(0)) {
		printf("io backend: kernel gives no io_uring here (or Valgrind): default not checked\n");
	} else {
		char want[64];

		snprintf(want, sizeof(want), "io_uring on %d/%d workers", weft_workers(), weft_workers());
		ck_assert_msg(uring == 1, "io_uring works here but the backend is: %s", desc);
		ck_assert_msg(strstr(desc, want), "want \"%s\" in: %s", want, desc);
		if (uring_probe(IORING_SETUP_COOP_TASKRUN))
			ck_assert_msg(strstr(desc, "COOP_TASKRUN") || strstr(desc, "DEFER_TASKRUN"),
				      "kernel takes COOP_TASKRUN but the ring has neither: %s", desc);
		if (uring_probe(IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG))
			ck_assert_msg(strstr(desc, "TASKRUN_FLAG"),
				      "kernel takes TASKRUN_FLAG but the ring lacks it: %s", desc);
	}
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(fcntl(p[1], F_SETPIPE_SZ, 1 << 16) >= N, 1);
	ck_assert_int_eq(weft_stats_get(&a), 0);
	join(spawn_on(0, batch_spawner, (void *)(intptr_t)p[1]));
	ck_assert_int_eq(weft_stats_get(&b), 0);
	wt_assert_no_failure();
	printf("sqes %llu enters %llu cqes %llu offloads %llu\n",
	       (unsigned long long)(b.io_sqes - a.io_sqes), (unsigned long long)(b.io_enters - a.io_enters),
	       (unsigned long long)(b.io_cqes - a.io_cqes), (unsigned long long)(b.offloads - a.offloads));
	if (uring) {
		ck_assert_uint_ge(b.io_sqes - a.io_sqes, N);
		ck_assert_uint_ge(b.io_cqes - a.io_cqes, N);
		/* batching is per worker: only with one worker (WEFT_WORKERS in
		 * the environment overrides the config) do all the writers share
		 * one ring's rounds */
		if (weft_workers() == 1)
			ck_assert_uint_le((b.io_enters - a.io_enters) * 8, b.io_sqes - a.io_sqes);
	} else {
		ck_assert_uint_eq(b.io_sqes - a.io_sqes, 0);
		/* fsync of a pipe goes to the pool (EINVAL from the kernel) */
		join(spawn_on(0, fsync_probe, (void *)(intptr_t)p[1]));
		ck_assert_int_eq(weft_stats_get(&a), 0);
		ck_assert_uint_ge(a.offloads - b.offloads, 1);
	}
	close(p[0]);
	close(p[1]);
	wt_shutdown();
}
END_TEST

/* The real "io_uring unavailable" path (runtime/uring.c, Setup: ring
 * creation fails with ENOSYS/EPERM, the worker keeps no ring and its
 * threads' I/O takes the fallback), which NO_URING does not reach: it
 * skips ring creation. A forked child installs a seccomp filter that makes
 * io_uring_setup(2) fail with ENOSYS, then starts the runtime, moves bytes
 * through a pipe with weft_io_write/weft_io_read (the reader waits: the
 * writer sleeps first), and checks that weft_io_backend() and WEFT_STATS
 * report the fallback with the reason. Fails if setup treats the error as
 * fatal (weft_init fails), if I/O on a worker without a ring hangs or
 * loses bytes, or if the report names the wrong reason. All the seccomp
 * work happens in the child (a filter cannot be removed), and nothing is
 * started in the parent before the fork: fork copies only the calling
 * thread, and Check may run tests unforked (CK_FORK=no). */
#if defined(__x86_64__)
#define WT_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define WT_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

enum { FB_BYTES = 4096 };

static void *fb_writer(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[FB_BYTES];

	for (int i = 0; i < FB_BYTES; i++)
		buf[i] = (char)(i * 7 + 3);
	weft_sleep_ns(10 * 1000000ull);   /* the reader waits for the data */
	WT_CHECK(write_all(fd, buf, sizeof(buf)));
	return NULL;
}

static void *fb_reader(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[FB_BYTES];
	bool same = true;

	WT_CHECK(read_all(fd, buf, sizeof(buf)));
	for (int i = 0; i < FB_BYTES; i++)
		same &= buf[i] == (char)(i * 7 + 3);
	WT_CHECK(same);
	return NULL;
}

#ifdef WT_AUDIT_ARCH
/* io_uring_setup fails with ENOSYS, everything else is allowed; a system
 * call made through another ABI (other numbers) kills the process. */
static int deny_io_uring_setup(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, WT_AUDIT_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* Report a failure of the fallback child on stderr; returns 1 (its exit
 * status). */
__attribute__((format(printf, 1, 2)))
static int fb_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("fallback child: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/* The child of uring_unavailable_fallback. No ck_assert here (the child
 * is not the test process): returns 0, or 1 after saying what failed. */
static int fallback_child(int cfgi)
{
	weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
	weft_thread_t r, w;
	weft_stats_t st;
	char desc[256] = "", *stats = NULL, reason[128];
	size_t len = 0;
	FILE *f;
	int p[2], rc;

	if (deny_io_uring_setup() != 0)
		return fb_fail("seccomp filter not installed: %s", strerror(errno));
	if (uring_probe(0) || errno != ENOSYS)
		return fb_fail("io_uring_setup not denied by the filter (errno %d)", errno);
	/* URING on even in the NO_URING run (check_io_nouring.sh): it is the
	 * kernel's refusal that is tested here; the other switches stay (the
	 * last mention of a name wins) */
	if (getenv("WEFT_FEATURES")) {
		char feats[256];

		snprintf(feats, sizeof(feats), "%s,URING", getenv("WEFT_FEATURES"));
		setenv("WEFT_FEATURES", feats, 1);
	}
	cfg.workers = wt_configs[cfgi].workers;
	cfg.pin = wt_configs[cfgi].pin;
	cfg.features = wt_features;
	if ((rc = weft_init(&cfg)) != 0)
		return fb_fail("weft_init: %s", strerror(rc));
	atomic_store(&wt_failure, NULL);
	if (pipe2(p, O_CLOEXEC) != 0) {
		rc = fb_fail("pipe2: %s", strerror(errno));
		goto out;
	}
	/* from a weft thread: every worker has set up (or not) its ring */
	if (weft_spawn(&r, backend_probe, desc, NULL) != 0 || weft_join(r, NULL) != 0) {
		rc = fb_fail("backend probe thread");
		goto out;
	}
	if (weft_spawn(&r, fb_reader, (void *)(intptr_t)p[0], NULL) != 0 ||
	    weft_spawn(&w, fb_writer, (void *)(intptr_t)p[1], NULL) != 0) {
		rc = fb_fail("spawn");   /* weft_shutdown waits for a reader */
		goto out;
	}
	weft_join(w, NULL);
	weft_join(r, NULL);
	close(p[0]);
	close(p[1]);
	snprintf(reason, sizeof(reason), "io_uring unavailable: %s", strerror(ENOSYS));
	/* WEFT_STATS ends with the same line */
	f = open_memstream(&stats, &len);
	if (f) {
		weft_stats_print(f);
		fclose(f);
	}
	if (atomic_load(&wt_failure))
		rc = fb_fail("%s", atomic_load(&wt_failure));
	else if (backend_result != 0 || !strstr(desc, reason))
		rc = fb_fail("backend %d \"%s\", want 0 and \"%s\"", backend_result, desc, reason);
	else if (!stats || !strstr(stats, reason))
		rc = fb_fail("WEFT_STATS does not say \"%s\":\n%s", reason, stats ? stats : "");
	else if (weft_stats_get(&st) != 0 || st.io_sqes != 0)
		rc = fb_fail("%llu io_uring SQEs without a ring", (unsigned long long)st.io_sqes);
	else
		printf("fallback child [%s]: %s\n", wt_configs[cfgi].name, desc);
	free(stats);
	fflush(stdout);
out:
	if (weft_shutdown() != 0)
		rc = fb_fail("weft_shutdown");
	return rc;
}
#endif

START_TEST(uring_unavailable_fallback)
{
#ifdef WT_AUDIT_ARCH
	const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
	unsigned limit = 20 * (m && atoi(m) > 1 ? (unsigned)atoi(m) : 1);
	pid_t pid;
	int status;

	if (WT_ON_VALGRIND()) {
		wt_skip("io/uring_unavailable_fallback: on Valgrind (no io_uring there anyway)");
		return;
	}
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* a hung child dies by SIGALRM even if the test is killed */
		alarm(limit);
		_exit(fallback_child(_i));
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status), "fallback child killed by signal %d%s",
		      WIFSIGNALED(status) ? WTERMSIG(status) : 0,
		      WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM ? " (hung)" : "");
	ck_assert_msg(WEXITSTATUS(status) == 0, "fallback child failed (its stderr says why)");
#else
	(void)_i;
	wt_skip("io/uring_unavailable_fallback: no seccomp arch for this build");
#endif
}
END_TEST

/* Wait hint (runtime/io.c): after receives that had to wait, a
 * descriptor skips the no-wait try (nonblock_toggle checks that results do
 * not change). With io_uring, a hinted receive that waits costs one SQE
 * (two without the hint: the no-wait try first) and the late sender's
 * send none (a direct send): at most 2 SQEs in the measured window (3
 * without the hint or without direct sends). */
static _Atomic uint64_t hint_sqes = UINT64_MAX;

static void *hint_cases(void *arg)
{
	int *sv = arg;
	char c = 0;
	weft_stats_t a, b;

	for (int i = 0; i < 3; i++)
		WT_CHECK(late_recv(sv, &c));
	WT_CHECK(weft_stats_get(&a) == 0);
	WT_CHECK(late_recv(sv, &c));
	WT_CHECK(weft_stats_get(&b) == 0);
	/* relaxed: read by the test body after the join, which orders it */
	atomic_store_explicit(&hint_sqes, b.io_sqes - a.io_sqes, memory_order_relaxed);
	return NULL;
}

START_TEST(wait_hint)
{
	uint64_t sqes;

	wt_init(_i);
	run_on_socketpair(hint_cases);
	wt_assert_no_failure();
	/* relaxed: written before the join */
	sqes = atomic_load_explicit(&hint_sqes, memory_order_relaxed);
	printf("wait_hint: %llu SQEs for a receive that waited and its sender\n",
	       (unsigned long long)sqes);
	if (weft_io_backend(NULL, 0))
		ck_assert_uint_le(sqes, 2);
	wt_shutdown();
}
END_TEST

/* A receive with a timeout whose data arrives as the timeout fires, then
 * at once a receive without one: the second must never fail with
 * ECANCELED. A linked timeout that fired cancels by user_data, possibly
 * after its operation's CQE was reaped, and the next operation of the
 * same thread has the same user_data (runtime/io.c uop_wait: the call
 * waits for the timeout's own CQE). The sender writes one byte every
 * ~100 us against a 100 us receive timeout, for about 0.3 s. */
struct race_arg {
	int fd;
	_Atomic int stop;
	_Atomic int send_errno;   /* a failed send: its errno (else 0) */
	_Atomic int sender_done;
};

static _Atomic int race_done;

/* The sender stops when the receiver is done (race_done) or the test body
 * says so (stop). It must not outlive the receiver by much: once nobody
 * reads, every send fills the socket buffer (a 1-byte AF_UNIX send
 * charges a whole skb, ~1 KiB, to it), and after a few hundred the send
 * blocks for good. It used to stop only at the stop flag, which the test
 * body sets after its 10 ms polls and the receiver's join: on a loaded
 * machine that came late enough for the sender to block in a send and the
 * join of it to hang until the tcase timeout (reproduced by delaying the
 * flag 300 ms: all three configurations timed out). The test body also
 * drains the socket until the sender is out, for a send already blocked. */
static void *race_sender(void *arg)
{
	struct race_arg *r = arg;

	/* relaxed: stop flags; the join orders everything else */
	while (!atomic_load_explicit(&r->stop, memory_order_relaxed) &&
	       !atomic_load_explicit(&race_done, memory_order_relaxed)) {
		weft_sleep_ns(100000);
		if (weft_io_send(r->fd, "x", 1, 0) != 1) {
			atomic_store(&r->send_errno, weft_errno());
			WT_CHECK(!"race_sender: a send failed");
			break;
		}
	}
	/* relaxed: read by the test body's drain loop, a stop flag */
	atomic_store_explicit(&r->sender_done, 1, memory_order_relaxed);
	return NULL;
}

static void *race_receiver(void *arg)
{
	int fd = *(int *)arg;
	weft_time_t end = weft_now_ns() + 300000000ull;
	char c;

	while (weft_now_ns() < end) {
		ssize_t n;

		WT_CHECK(weft_io_set_timeout(100000) == 0);
		n = weft_io_recv(fd, &c, 1, 0);
		WT_CHECK(n == 1 || (n == -1 && weft_errno() == ETIMEDOUT));
		WT_CHECK(weft_io_set_timeout(0) == 0);
		n = weft_io_recv(fd, &c, 1, 0);
		WT_CHECK(n == 1);
		if (n != 1) {
			fprintf(stderr, "timeout_cancel_race: untimed receive returned %zd (%s)\n",
				n, n < 0 ? strerror(weft_errno()) : "eof");
			break;
		}
	}
	atomic_store(&race_done, 1);
	return NULL;
}

START_TEST(timeout_cancel_race)
{
	struct race_arg r;
	weft_thread_t s, rv;
	int sv[2];

	wt_init(_i);
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	r.fd = sv[1];
	atomic_init(&r.stop, 0);
	atomic_init(&r.send_errno, 0);
	atomic_init(&r.sender_done, 0);
	atomic_store(&race_done, 0);
	s = spawn_on(-1, race_sender, &r);
	rv = spawn_on(-1, race_receiver, &sv[0]);
	/* 0.3 s of rounds; a receiver still at it after 10 s is stuck: dump
	 * the threads and fail, instead of running into the tcase timeout
	 * with nothing said */
	for (int i = 0; i < 1000 && !atomic_load(&race_done); i++)
		usleep(10000);
	if (!atomic_load(&race_done)) {
		weft_dump(2);
		ck_abort_msg("timeout_cancel_race: the receiver is stuck after 10 s");
	}
	join(rv);
	/* relaxed: see race_sender */
	atomic_store_explicit(&r.stop, 1, memory_order_relaxed);
	/* drain what the sender sent after the receiver ended, so that a
	 * send blocked on a full buffer completes (see race_sender) */
	while (!atomic_load_explicit(&r.sender_done, memory_order_relaxed)) {
		char buf[256];

		if (recv(sv[0], buf, sizeof(buf), MSG_DONTWAIT) <= 0)
			usleep(1000);
	}
	join(s);
	if (atomic_load(&r.send_errno))
		fprintf(stderr, "timeout_cancel_race: a send failed: %s\n",
			strerror(atomic_load(&r.send_errno)));
	wt_assert_no_failure();
	close(sv[0]);
	close(sv[1]);
	wt_shutdown();
}
END_TEST

/* Timeouts on the hinted and direct paths (runtime/io.c Wait hint, Direct
 * sends): a receive the hint sends straight to the waiting form, and a
 * send that finds the buffer full after its direct try, still end with
 * ETIMEDOUT when nothing comes. */
static void *hinted_timeout_cases(void *arg)
{
	int *sv = arg;
	static char big[1 << 16];
	char c = 0;
	ssize_t n;
	int sent = 0;

	for (int i = 0; i < 3; i++)
		WT_CHECK(late_recv(sv, &c));   /* the hint is set now */
	WT_CHECK(weft_io_set_timeout(20 * 1000000ull) == 0);
	n = weft_io_recv(sv[0], &c, 1, 0);
	WT_CHECK(n == -1 && weft_errno() == ETIMEDOUT);
	/* nobody reads sv[0]: fill sv[1]'s buffer, then time out */
	for (int i = 0; i < 1000; i++) {
		n = weft_io_send(sv[1], big, sizeof(big), 0);
		if (n < 0)
			break;
		sent += n > 0;
	}
	WT_CHECK(sent > 0);
	WT_CHECK(n == -1 && weft_errno() == ETIMEDOUT);
	WT_CHECK(weft_io_set_timeout(0) == 0);
	return NULL;
}

START_TEST(hinted_timeouts)
{
	wt_init(_i);
	run_on_socketpair(hinted_timeout_cases);
	wt_assert_no_failure();
	wt_shutdown();
}
END_TEST

/* The SQ-full path of wft_uring_get_sqe (runtime/uring.c): a thread that
 * finds the SQ full and the flush refused yields there, and must resume on
 * the same worker, because the linked timeout's SQE that follows goes to
 * the same ring (a thread that moved put the two halves of a link on two
 * rings, or on a ring whose OS thread it was not running on).
 * WEFT_FAULT=sqfull:N forces that path on the next N SQE requests; 8
 * pairs of threads with I/O timeouts ping-pong on two workers, which
 * steal from each other, and every exchange must complete with the right
 * data.
 * (It exercises the path; it does not reproduce the original migration
 * bug of 8f2f3e7, which it also passes.) */

static void *sqf_side(void *arg)
{
	WT_CHECK(weft_io_set_timeout(5000ull * 1000000) == 0);
	for (int i = 0; i < 100; i++)
		pair_round(arg, i);
	WT_CHECK(weft_io_set_timeout(0) == 0);
	return NULL;
}

START_TEST(sq_full_yield)
{
	weft_stats_t s0, s1;

	setenv("WEFT_FAULT", "sqfull:3000", 1);
	wt_init_workers(2);
	unsetenv("WEFT_FAULT");
	weft_stats_get(&s0);
	run_pairs(8, sqf_side);
	weft_stats_get(&s1);
	wt_assert_no_failure();
	/* the faults were reached (each costs a yield) when io_uring is on */
	if (s1.io_sqes > s0.io_sqes)
		ck_assert_uint_gt(s1.yields - s0.yields, 100);
	wt_shutdown();
}
END_TEST

/* NO_URING_DEFER (runtime/uring.c, Setup): the rings start one mode
 * down, COOP_TASKRUN, whose completions run at any kernel entry of the
 * worker's OS thread instead of only in its enters; older kernels take
 * this path. Checks that the switch reaches ring setup (when the kernel
 * takes both modes, the backend names COOP_TASKRUN and not DEFER_TASKRUN,
 * and the default names DEFER_TASKRUN) and that every completion arrives
 * in that mode: TCP echo across workers with exact bytes; a read that
 * waits while its worker sleeps in the ring (the writer sleeps first, so
 * the completion must wake a sleeping worker); a receive that must time
 * out (the linked timeout's completion). Every wait is bounded by an I/O
 * timeout, so a lost completion fails (ETIMEDOUT) instead of hanging.
 * Before the switch existed weft_init rejected the feature name (EINVAL);
 * with the switch not reaching setup, the backend check fails. */
enum { DEFER_ROUNDS = 300, DEFER_TMO_NS = 5000000000ull };

static void *defer_echo_server(void *arg)
{
	WT_CHECK(weft_io_set_timeout(DEFER_TMO_NS) == 0);
	return echo_server_one(arg);
}

static void *defer_echo_client(void *arg)
{
	WT_CHECK(weft_io_set_timeout(DEFER_TMO_NS) == 0);
	return echo_client(arg);
}

static void *defer_sleepy_reader(void *arg)
{
	int *p = arg;
	char buf[FB_BYTES];
	bool same = true;

	WT_CHECK(weft_io_set_timeout(DEFER_TMO_NS) == 0);
	WT_CHECK(read_all(p[0], buf, sizeof(buf)));
	for (int i = 0; i < FB_BYTES; i++)
		same &= buf[i] == (char)(i * 7 + 3);
	WT_CHECK(same);
	return NULL;
}

static void *defer_timeout(void *arg)
{
	int *sv = arg;
	char c;
	weft_time_t t0 = weft_now_ns();

	WT_CHECK(weft_io_set_timeout(20000000ull) == 0);   /* 20 ms */
	WT_CHECK(weft_io_recv(sv[0], &c, 1, 0) == -1 && weft_errno() == ETIMEDOUT);
	WT_CHECK(weft_now_ns() - t0 >= 20000000ull);
	WT_CHECK(weft_io_set_timeout(DEFER_TMO_NS) == 0);
	WT_CHECK(weft_io_send(sv[1], "k", 1, 0) == 1);
	WT_CHECK(weft_io_recv(sv[0], &c, 1, 0) == 1 && c == 'k');
	return NULL;
}

static void defer_round(int cfg, bool defer)
{
	char feats[256], desc[256];
	struct tcp_ctx c = { .rounds = DEFER_ROUNDS };
	weft_thread_t s, cl, rd, wr;
	int p[2], uring;

	const char *env = getenv("WEFT_FEATURES");
	const char *base = env ? env : wt_features;
	char saved[256];

	snprintf(feats, sizeof(feats), "%s%s%s", base ? base : "", base && *base ? "," : "",
		 defer ? "URING_DEFER" : "NO_URING_DEFER");
	if (env) {
		/* the environment replaces cfg.features (init.c): extend it */
		snprintf(saved, sizeof(saved), "%s", env);
		setenv("WEFT_FEATURES", feats, 1);
	}
	{
		weft_config_t cfgs = WEFT_CONFIG_INITIALIZER;

		cfgs.workers = wt_configs[cfg].workers;
		cfgs.pin = wt_configs[cfg].pin;
		cfgs.features = feats;
		ck_assert_int_eq(weft_init(&cfgs), 0);
	}
	if (env)
		setenv("WEFT_FEATURES", saved, 1);
	ck_assert_int_eq(weft_feature("URING_DEFER"), defer);
	join(spawn_on(0, backend_probe, desc));
	uring = backend_result;
	printf("uring_defer_switch %s: %s\n", feats, desc);
	if (uring_expected() && !WT_ON_VALGRIND() &&
	    uring_probe(IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
			IORING_SETUP_TASKRUN_FLAG)) {
		ck_assert_msg(uring == 1, "io_uring works here but the backend is: %s", desc);
		if (defer)
			ck_assert_msg(strstr(desc, "DEFER_TASKRUN"), "default ring lacks DEFER_TASKRUN: %s", desc);
		else
			ck_assert_msg(!strstr(desc, "DEFER_TASKRUN") && strstr(desc, "COOP_TASKRUN"),
				      "NO_URING_DEFER ring is not COOP_TASKRUN: %s", desc);
	}
	/* echo across workers */
	c.lfd = listen_loopback(&c.sa, 16);
	s = spawn_on(0, defer_echo_server, &c);
	cl = spawn_on(1, defer_echo_client, &c);
	join(cl);
	join(s);
	close(c.lfd);
	/* a read whose completion wakes a sleeping worker */
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	rd = spawn_on(0, defer_sleepy_reader, p);
	wr = spawn_on(1, fb_writer, (void *)(intptr_t)p[1]);
	join(wr);
	join(rd);
	close(p[0]);
	close(p[1]);
	/* linked timeout, then traffic on the same socket */
	run_on_socketpair(defer_timeout);
	wt_assert_no_failure();
	wt_shutdown();
}

START_TEST(uring_defer_switch)
{
	const char *env = getenv("WEFT_FEATURES");

	/* WEFT_FEATURES overrides the config's features */
	if (env && strstr(env, "URING_DEFER")) {
		wt_skip("io/uring_defer_switch: WEFT_FEATURES sets URING_DEFER itself");
		return;
	}
	defer_round(_i, false);
	defer_round(_i, true);
}
END_TEST


/* Every io_uring feature the runtime probes or tries has a fallback for
 * kernels without it, and each fallback is reached here on a kernel that
 * has the feature: WEFT_FAULT (runtime/fault.c) makes the kernel refuse it
 * as an older one does (EINVAL for a setup flag, an SQE flag or a poll
 * mode; an opcode missing from the probe; the ring fd not registered),
 * and the I/O must still work. Per refusal: TCP echo across workers with
 * exact bytes, a read whose completion wakes a sleeping worker, a receive
 * that times out (linked timeout), an accept and receives that have to
 * wait (ACCEPT_DONTWAIT, POLL_FIRST), and wakes of a thread pinned to a
 * sleeping worker (kicks); then weft_io_backend() must show the fallback
 * (the mode stepped down to, the offload pool, "kick=eventfd one-shot",
 * "refused: ..."). Where the kernel itself lacks what the refusal takes
 * away (or gives no io_uring at all), only the I/O is checked. Before the
 * knobs, the one-shot kick, the accept and POLL_FIRST retries, the
 * per-opcode fallback and every setup mode but the best were reached only
 * on older kernels, never in this suite. URING is turned on even in the
 * NO_URING run, which therefore leaves this tcase out (its tag,
 * uring_refusals: check_io_nouring.sh). */
#ifdef __SANITIZE_THREAD__
enum { RF_ROUNDS = 10, RF_KICKS = 4 };   /* 0.6-3.4 s per case at 50 rounds */
#else
enum { RF_ROUNDS = 50, RF_KICKS = 4 };
#endif

static const struct refusal {
	const char *fault;        /* WEFT_FAULT, %x: ringflags/noops mask */
	unsigned long long mask;
	unsigned need;            /* setup flags the kernel must take (uring_probe) */
	const char *want, *unwanted;   /* in weft_io_backend(), or not */
} refusals[] = {
	/* a 6.0 kernel: no DEFER_TASKRUN, mode 2 */
	{ "ringflags:%#llx", IORING_SETUP_DEFER_TASKRUN,
	  IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
	  "SINGLE_ISSUER|COOP_TASKRUN|TASKRUN_FLAG", "DEFER_TASKRUN" },
	/* 5.19: no SINGLE_ISSUER either, mode 3 */
	{ "ringflags:%#llx", IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER,
	  IORING_SETUP_SINGLE_ISSUER, "(COOP_TASKRUN|TASKRUN_FLAG", "SINGLE_ISSUER" },
	/* 5.18: none of the TASKRUN modes, mode 4 */
	{ "ringflags:%#llx", IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER |
	  IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
	  IORING_SETUP_COOP_TASKRUN, "(SUBMIT_ALL;", "TASKRUN" },
	/* before 5.18: no SUBMIT_ALL (the best mode without it) */
	{ "ringflags:%#llx", IORING_SETUP_SUBMIT_ALL, IORING_SETUP_SUBMIT_ALL, "io_uring on",
	  "SUBMIT_ALL" },
	/* every mode refused (before 5.6: no CQSIZE): the offload pool */
	{ "ringflags:%#llx", IORING_SETUP_CQSIZE, 0, "io_uring unavailable: Invalid argument",
	  "io_uring on" },
	/* no read/write opcodes (before 5.6): files and pipes per call on
	 * the fallback, sockets on the ring */
	{ "noops:%#llx", 1ull << IORING_OP_READ | 1ull << IORING_OP_WRITE | 1ull << IORING_OP_READV |
	  1ull << IORING_OP_WRITEV, 0, "io_uring on", NULL },
	/* no opcode at all (no probe): no POLL_ADD for the kick, the pool */
	{ "noops:%#llx", ~0ull, 0, "io_uring unavailable: Function not implemented", "io_uring on" },
	{ "nokickmulti", 0, 0, "kick=eventfd one-shot", NULL },
	{ "noacceptdontwait", 0, 0, "refused: ACCEPT_DONTWAIT", NULL },
	{ "nopollfirst", 0, 0, "RECVSEND_POLL_FIRST", NULL },
	{ "noringfd", 0, 0, "registered ring fd", NULL },
};
#define NREFUSALS ((int)(sizeof(refusals) / sizeof(refusals[0])))

static weft_sem_t rf_sem[2];

/* Ping-pong of RF_KICKS rounds between threads pinned to workers 0 and 1;
 * each waits 1 ms before its post, so the other worker has gone to sleep
 * in its ring and the post must kick it. */
static void *rf_kicker(void *arg)
{
	int me = (int)(intptr_t)arg;

	for (int i = 0; i < RF_KICKS; i++) {
		if (me == 1 || i > 0)
			WT_CHECK(weft_sem_timedwait(&rf_sem[me], weft_now_ns() + DEFER_TMO_NS) == 0);
		weft_sleep_ns(1000000);
		WT_CHECK(weft_sem_post(&rf_sem[!me]) == 0);
	}
	if (me == 0)
		WT_CHECK(weft_sem_timedwait(&rf_sem[0], weft_now_ns() + DEFER_TMO_NS) == 0);
	return NULL;
}

/* fb_writer and defer_timeout, shorter: 2 ms before the write, a 2 ms
 * timeout */
static void *rf_writer(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[FB_BYTES];

	for (int i = 0; i < FB_BYTES; i++)
		buf[i] = (char)(i * 7 + 3);
	weft_sleep_ns(2000000);
	WT_CHECK(write_all(fd, buf, sizeof(buf)));
	return NULL;
}

static void *rf_timeout(void *arg)
{
	int *sv = arg;
	char c;

	WT_CHECK(weft_io_set_timeout(2000000) == 0);
	WT_CHECK(weft_io_recv(sv[0], &c, 1, 0) == -1 && weft_errno() == ETIMEDOUT);
	WT_CHECK(weft_io_set_timeout(DEFER_TMO_NS) == 0);
	WT_CHECK(weft_io_send(sv[1], "k", 1, 0) == 1);
	WT_CHECK(weft_io_recv(sv[0], &c, 1, 0) == 1 && c == 'k');
	return NULL;
}

/* The accept must wait: the client connects 2 ms after the server's
 * accept started. */
static void *rf_late_client(void *arg)
{
	weft_sleep_ns(2000000);
	return defer_echo_client(arg);
}

START_TEST(feature_refusals)
{
	const struct refusal *rf = &refusals[_i];
	const char *env = getenv("WEFT_FEATURES");
	char fault[64], feats[256], desc[256], saved[256] = "";
	weft_config_t cfgs = WEFT_CONFIG_INITIALIZER;
	struct tcp_ctx c = { .rounds = RF_ROUNDS };
	weft_thread_t s, cl, rd, wr, k0, k1;
	weft_stats_t a, b;
	bool checkable;
	int p[2];

	snprintf(fault, sizeof(fault), rf->fault, rf->mask);
	/* URING on even in the NO_URING run (check_io_nouring.sh): the
	 * refusals are of io_uring features (the last mention wins) */
	snprintf(feats, sizeof(feats), "%s%sURING", env ? env : wt_features ? wt_features : "",
		 (env && *env) || (!env && wt_features && *wt_features) ? "," : "");
	if (env) {
		snprintf(saved, sizeof(saved), "%s", env);
		setenv("WEFT_FEATURES", feats, 1);
	}
	setenv("WEFT_FAULT", fault, 1);
	cfgs.features = feats;
	ck_assert_int_eq(weft_init(&cfgs), 0);
	unsetenv("WEFT_FAULT");
	if (env)
		setenv("WEFT_FEATURES", saved, 1);
	ck_assert_int_eq(weft_sem_init(&rf_sem[0], 0), 0);
	ck_assert_int_eq(weft_sem_init(&rf_sem[1], 0), 0);
	ck_assert_int_eq(weft_stats_get(&a), 0);
	/* echo across workers; the accept and the receives wait */
	c.lfd = listen_loopback(&c.sa, 16);
	s = spawn_on(0, defer_echo_server, &c);
	cl = spawn_on(1, rf_late_client, &c);
	join(cl);
	join(s);
	close(c.lfd);
	/* a read whose completion wakes a sleeping worker */
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	rd = spawn_on(0, defer_sleepy_reader, p);
	wr = spawn_on(1, rf_writer, (void *)(intptr_t)p[1]);
	join(wr);
	join(rd);
	close(p[0]);
	close(p[1]);
	/* linked timeout, then traffic on the same socket */
	run_on_socketpair(rf_timeout);
	/* kicks */
	k0 = spawn_on(0, rf_kicker, (void *)0);
	k1 = spawn_on(1, rf_kicker, (void *)1);
	join(k0);
	join(k1);
	ck_assert_int_eq(weft_stats_get(&b), 0);
	wt_assert_no_failure();
	join(spawn_on(0, backend_probe, desc));
	printf("feature_refusals %s: %s; kicks %llu\n", fault, desc,
	       (unsigned long long)(b.kicks - a.kicks));
	checkable = !WT_ON_VALGRIND() && uring_probe(0) && (!rf->need || uring_probe(rf->need));
	if (checkable) {
		ck_assert_msg(strstr(desc, rf->want), "WEFT_FAULT=%s: want \"%s\" in: %s", fault,
			      rf->want, desc);
		ck_assert_msg(!rf->unwanted || !strstr(desc, rf->unwanted),
			      "WEFT_FAULT=%s: \"%s\" in: %s", fault, rf->unwanted, desc);
		if (weft_workers() > 1 && strstr(desc, "io_uring on"))
			ck_assert_uint_gt(b.kicks - a.kicks, 0);
		if (strstr(fault, "noops") && strstr(desc, "io_uring on")) {
			/* the refused opcodes took the fallback: a pipe's
			 * write and read (that waits) cost no SQE */
			ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
			ck_assert_int_eq(weft_stats_get(&a), 0);
			rd = spawn_on(0, defer_sleepy_reader, p);
			wr = spawn_on(1, rf_writer, (void *)(intptr_t)p[1]);
			join(wr);
			join(rd);
			ck_assert_int_eq(weft_stats_get(&b), 0);
			close(p[0]);
			close(p[1]);
			wt_assert_no_failure();
			ck_assert_uint_eq(b.io_sqes - a.io_sqes, 0);
		}
	} else {
		printf("feature_refusals %s: no io_uring here, or the kernel lacks the feature: "
		       "only the I/O is checked\n", fault);
	}
	ck_assert_int_eq(weft_sem_destroy(&rf_sem[0]), 0);
	ck_assert_int_eq(weft_sem_destroy(&rf_sem[1]), 0);
	wt_shutdown();
}
END_TEST

/* A completion must wake a worker that sleeps with no other deadline:
 * every worker idle (deep) and past its stack trim, the writer a plain OS
 * thread, the wait bounded by the test's own clock (a linked timeout's
 * completion would take the same path, so it cannot be the bound). Run
 * with the rings in each URING_DEFER mode (DEFER_TASKRUN and
 * COOP_TASKRUN: runtime/uring.c "Setup"). */
static _Atomic uint64_t cw_done;

static void *cw_reader(void *arg)
{
	int *p = arg;
	char c;

	WT_CHECK(weft_io_read(p[0], &c, 1) == 1);
	atomic_store(&cw_done, weft_now_ns());
	return NULL;
}

/* The time (ns) worker 0's OS thread has waited for a CPU while runnable
 * (schedstat run delay), or 0 if it cannot be read. */
static uint64_t worker0_cpu_wait_ns(void)
{
	return threads_cpu_wait_ns("weft-w0");
}

/* The bound is on what weft controls: 1 s from the write to the reader
 * running, less the time worker 0's OS thread spent runnable but waiting
 * for a CPU (a host with ten runnable threads per CPU has left it waiting
 * half a second). A lost wakeup leaves that thread asleep, not waiting
 * for a CPU: the reader then never runs (given 10 s) or runs late with
 * little CPU wait, and the test fails either way. */
#define CW_BOUND_NS 1000000000ull
#define CW_GIVEUP_NS 10000000000ull

START_TEST(sleeper_wake)
{
	weft_config_t cfgs = WEFT_CONFIG_INITIALIZER;
	weft_thread_t rd;
	int p[2];
	uint64_t tw, td, wait0, cpu_wait;

	cfgs.workers = wt_configs[_i].workers;
	cfgs.pin = wt_configs[_i].pin;
	for (int mode = 0; mode < 2; mode++) {
		cfgs.features = mode ? "NO_URING_DEFER" : NULL;
		ck_assert_int_eq(weft_init(&cfgs), 0);
		for (int round = 0; round < 5; round++) {
			atomic_store(&cw_done, 0);
			ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
			rd = spawn_on(0, cw_reader, p);
			usleep(50000);   /* every worker deep, stack trim done */
			wait0 = worker0_cpu_wait_ns();
			tw = weft_now_ns();
			ck_assert_int_eq(write(p[1], "x", 1), 1);
			while (!(td = atomic_load(&cw_done)) && weft_now_ns() - tw < CW_GIVEUP_NS)
				usleep(1000);
			cpu_wait = worker0_cpu_wait_ns() - wait0;
			ck_assert_msg(td, "completion into a sleeping worker not seen in %.0f s",
				      CW_GIVEUP_NS / 1e9);
			printf("sleeper_wake[%s, %s]: %.3f ms (worker 0 waited %.3f ms for a CPU)\n",
			       wt_configs[_i].name, mode ? "NO_URING_DEFER" : "default", (td - tw) / 1e6,
			       cpu_wait / 1e6);
			ck_assert_msg(td - tw < CW_BOUND_NS + cpu_wait,
				      "completion into a sleeping worker seen after %.1f ms, of which worker 0 "
				      "waited %.1f ms for a CPU (bound 1 s plus that wait)",
				      (td - tw) / 1e6, cpu_wait / 1e6);
			join(rd);
			close(p[0]);
			close(p[1]);
		}
		wt_assert_no_failure();
		wt_shutdown();
	}
}
END_TEST

static Suite *io_suite(void)
{
	Suite *s = suite_create("io");
	TCase *tc;

	tc = wt_tcase(s, "basic", 30);
	tcase_add_loop_test(tc, pipe_cross_worker, 0, wt_nconfigs);
	tcase_add_loop_test(tc, socketpair_pingpong, 0, wt_nconfigs);
	tcase_add_loop_test(tc, tcp_echo, 0, wt_nconfigs);
	tcase_add_loop_test(tc, vectored_io, 0, wt_nconfigs);
	tcase_add_loop_test(tc, files, 0, wt_nconfigs);
	tcase_add_loop_test(tc, poll_ready, 0, wt_nconfigs);
	tcase_add_loop_test(tc, partial_and_eof, 0, wt_nconfigs);
	tcase_add_loop_test(tc, nonblock_toggle, 0, wt_nconfigs);
	tcase_add_loop_test(tc, wait_hint, 0, wt_nconfigs);
	tcase_add_loop_test(tc, no_fd_leak, 0, wt_nconfigs);
	tcase_add_loop_test(tc, init_barrier, 0, wt_nconfigs);
	tcase_add_test(tc, backend_and_batching);

	tc = wt_tcase(s, "errors", 30);
	tcase_add_loop_test(tc, errnos, 0, wt_nconfigs);
	tcase_add_loop_test(tc, send_no_sigpipe, 0, wt_nconfigs);
	tcase_add_loop_test(tc, nonblock_eagain, 0, wt_nconfigs);
	tcase_add_loop_test(tc, uring_unavailable_fallback, 0, wt_nconfigs);

	tc = wt_tcase(s, "timeout", 30);
	tcase_add_loop_test(tc, timeouts, 0, wt_nconfigs);
	tcase_add_loop_test(tc, timeout_repeat, 0, wt_nconfigs);
	tcase_add_loop_test(tc, timeout_cancel_race, 0, wt_nconfigs);
	tcase_add_loop_test(tc, hinted_timeouts, 0, wt_nconfigs);
	tcase_add_test(tc, sq_full_yield);
	tcase_add_loop_test(tc, uring_defer_switch, 0, wt_nconfigs);
	tcase_add_loop_test(tc, sleeper_wake, 0, wt_nconfigs);

	/* tagged: check_io_nouring.sh leaves it out (it turns URING back
	 * on, so it would only repeat this run) */
	tc = wt_tcase(s, "refusals", 30);
	tcase_set_tags(tc, "uring_refusals");
	tcase_add_loop_test(tc, feature_refusals, 0, NREFUSALS);

	tc = wt_tcase(s, "os_thread", 30);
	tcase_add_loop_test(tc, os_thread_plain, 0, wt_nconfigs);
	tcase_add_test(tc, os_thread_offload_inline);

	tc = wt_tcase(s, "offload", 30);
	tcase_add_loop_test(tc, offload_runs_elsewhere, 0, wt_nconfigs);
	tcase_add_loop_test(tc, offload_bounded, 0, wt_nconfigs);

	tc = wt_tcase(s, "contended", 60);
	tcase_add_loop_test(tc, thousand_connections, 0, wt_nconfigs);
	tcase_add_loop_test(tc, churn_exact_counts, 0, wt_nconfigs);
	tcase_add_loop_test(tc, migrating_pairs, 0, wt_nconfigs);
	return s;
}

int main(void)
{
	return wt_run_suite(io_suite());
}
