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

#include "conn_server.h"

#define BUF 16384

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
	epoll_ctl(ep, EPOLL_CTL_ADD, cs_listen_fd, &ev);
	for (;;) {
		int n = epoll_wait(ep, evs, 256, -1);

		for (int i = 0; i < n; i++) {
			struct econn *c = evs[i].data.ptr;
			ssize_t k;

			if (!c) {
				int fd = accept4(cs_listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

				if (fd < 0)
					continue;
				cs_tune(fd);
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

int main(int argc, char **argv)
{
	const char *impl = "weft";
	int port = 9000, workers = 0;

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
	cs_conn = echo_conn;
	/* the handler keeps a BUF-byte buffer on its stack */
	cs_stack_size = 64 * 1024 + BUF;
	if (cs_listen("127.0.0.1", port))
		return 1;
	fprintf(stderr, "echo-server: impl=%s port %d\n", impl, port);
	if (!strcmp(impl, "weft"))
		cs_run_weft(workers);
	else if (!strcmp(impl, "pthread"))
		cs_run_pthread();
	else if (!strcmp(impl, "epoll")) {
		/* non-blocking listener: several loops share it */
		fcntl(cs_listen_fd, F_SETFL, fcntl(cs_listen_fd, F_GETFL) | O_NONBLOCK);
		run_epoll(workers);
	} else {
		fprintf(stderr, "unknown --impl=%s\n", impl);
		return 2;
	}
	return 0;
}
