/*
 * examples/echo-server.c - TCP echo server, three implementations of the
 * same logic (read what arrives, write it back, until EOF):
 *
 *   echo-server [--impl=weft|pthread|epoll] [--port=9000] [--workers=N]
 *
 *   weft    - thread per connection on weft threads, blocking weft_io_recv /
 *             weft_io_send; one pinned acceptor per worker. --workers sets
 *             the worker count (default: CPUs).
 *   pthread - thread per connection on OS threads; the same handler (the
 *             weft_io_* calls are plain syscalls on OS threads).
 *   epoll   - the event-loop baseline: --workers threads (default: CPUs),
 *             each with its own epoll set, level-triggered, sharing the
 *             listening socket (EPOLLEXCLUSIVE); per readable connection one
 *             read and one write (plus EPOLLOUT when the write is short).
 *
 * Drive it with examples/echo-client (ping-pong: round trips/s and latency
 * percentiles). Stop with SIGINT/SIGTERM.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <weft.h>
#include <weft/io.h>

#define BUF 16384

static int listen_fd;

static void tune(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* The thread-per-connection handler (weft and pthread). */
static void *echo_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[BUF];
	ssize_t n;

	while ((n = weft_io_recv(fd, buf, sizeof(buf), 0)) > 0) {
		char *p = buf;

		while (n > 0) {
			ssize_t k = weft_io_send(fd, p, (size_t)n, MSG_NOSIGNAL);

			if (k <= 0)
				goto out;
			p += k;
			n -= k;
		}
	}
out:
	weft_io_close(fd);
	return NULL;
}

static void *weft_acceptor(void *arg)
{
	weft_attr_t a;

	(void)arg;
	weft_attr_init(&a);
	a.detached = 1;
	a.stack_size = 64 * 1024;
	for (;;) {
		int fd = weft_io_accept(listen_fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			weft_sleep_ns(1000000);
			continue;
		}
		tune(fd);
		if (weft_spawn(NULL, echo_conn, (void *)(intptr_t)fd, &a))
			close(fd);
	}
	return NULL;
}

static void run_weft(int workers)
{
	weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
	int rc;

	cfg.workers = workers;
	if ((rc = weft_init(&cfg))) {
		fprintf(stderr, "weft_init: %s\n", strerror(rc));
		exit(1);
	}
	for (int i = 0; i < weft_workers(); i++) {
		weft_attr_t a;

		weft_attr_init(&a);
		a.worker = i;
		a.detached = 1;
		if (weft_spawn(NULL, weft_acceptor, NULL, &a))
			exit(1);
	}
	for (;;)
		pause();
}

static void run_pthread(void)
{
	pthread_attr_t a;

	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 64 * 1024 + BUF);
	for (;;) {
		pthread_t t;
		int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			usleep(1000);
			continue;
		}
		tune(fd);
		if (pthread_create(&t, &a, echo_conn, (void *)(intptr_t)fd))
			close(fd);
	}
}

/* ---------------------------------------------------------------------- */
/* epoll baseline */

struct econn {
	int fd;
	size_t off, len;       /* unsent bytes buf[off..len) */
	char buf[BUF];
};

static void *epoll_loop(void *arg)
{
	struct epoll_event ev, evs[256];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	(void)arg;
	ev.events = EPOLLIN | EPOLLEXCLUSIVE;
	ev.data.ptr = NULL;   /* NULL: the listener */
	epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &ev);
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);

		for (int i = 0; i < n; i++) {
			struct econn *c = evs[i].data.ptr;
			ssize_t k;

			if (!c) {
				int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

				if (fd < 0)
					continue;
				tune(fd);
				c = malloc(sizeof(*c));
				c->fd = fd;
				c->off = c->len = 0;
				ev.events = EPOLLIN;
				ev.data.ptr = c;
				epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
				continue;
			}
			if (c->len == 0) {
				k = read(c->fd, c->buf, sizeof(c->buf));
				if (k == 0 || (k < 0 && errno != EAGAIN))
					goto drop;
				if (k < 0)
					continue;
				c->off = 0;
				c->len = (size_t)k;
			}
			k = write(c->fd, c->buf + c->off, c->len - c->off);
			if (k < 0 && errno != EAGAIN)
				goto drop;
			if (k > 0)
				c->off += (size_t)k;
			if (c->off == c->len) {
				if (evs[i].events & EPOLLOUT) {
					ev.events = EPOLLIN;
					ev.data.ptr = c;
					epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
				}
				c->len = 0;
			} else if (!(evs[i].events & EPOLLOUT)) {
				ev.events = EPOLLOUT;
				ev.data.ptr = c;
				epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
			}
			continue;
drop:
			close(c->fd);
			free(c);
		}
	}
	return NULL;
}

static void run_epoll(int threads)
{
	pthread_t t;

	if (threads <= 0)
		threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
	for (int i = 1; i < threads; i++)
		pthread_create(&t, NULL, epoll_loop, NULL);
	epoll_loop(NULL);
}

static void on_signal(int sig)
{
	(void)sig;
	if (getenv("WEFT_STATS"))
		weft_stats_print(stderr);
	_exit(0);
}

int main(int argc, char **argv)
{
	const char *impl = "weft";
	int port = 9000, workers = 0, one = 1;
	struct sockaddr_in sa;

	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--impl=", 7))
			impl = argv[i] + 7;
		else if (!strncmp(argv[i], "--port=", 7))
			port = atoi(argv[i] + 7);
		else if (!strncmp(argv[i], "--workers=", 10))
			workers = atoi(argv[i] + 10);
		else {
			fprintf(stderr, "usage: %s [--impl=weft|pthread|epoll] [--port=N] [--workers=N]\n",
				argv[0]);
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	if (bind(listen_fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(listen_fd, 4096)) {
		perror("bind/listen");
		return 1;
	}
	fprintf(stderr, "echo-server: impl=%s port %d\n", impl, port);
	if (!strcmp(impl, "weft"))
		run_weft(workers);
	else if (!strcmp(impl, "pthread"))
		run_pthread();
	else if (!strcmp(impl, "epoll")) {
		/* non-blocking listener: several loops share it */
		fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
		run_epoll(workers);
	} else {
		fprintf(stderr, "unknown --impl=%s\n", impl);
		return 2;
	}
	return 0;
}
