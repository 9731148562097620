/*
 * examples/conn_server.h - the thread-per-connection scaffolding that
 * examples/echo-server and examples/http-server share: the listening
 * socket, one pinned acceptor weft thread per worker (weft impl) or an
 * accept loop on the main thread (pthread impl), a detached thread per
 * accepted connection, and the exit on SIGINT/SIGTERM (printing the
 * runtime counters when WEFT_STATS is set).
 *
 * A program sets cs_conn (the handler: gets the descriptor as
 * (void *)(intptr_t)fd, owns it, closes it) and cs_stack_size, calls
 * cs_listen(), then cs_run_weft() or cs_run_pthread(), which do not
 * return. Header-only: each example is one translation unit.
 */
#ifndef WEFT_EXAMPLES_CONN_SERVER_H
#define WEFT_EXAMPLES_CONN_SERVER_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <weft.h>
#include <weft/io.h>

#include "examples/bench_weft.h"

static void *(*cs_conn)(void *arg);      /* the connection handler */
static size_t cs_stack_size = 64 * 1024;  /* each connection thread's stack */
static int cs_pin_conns;                  /* weft: pin connections round robin */
static int cs_listen_fd = -1;

/* Small request/response traffic: no Nagle delay. */
static inline void cs_tune(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* After a failed accept with error e: back off briefly when out of
 * descriptors or memory (a retry at once would fail again), else retry. */
static inline void cs_accept_failed(int e, int weft)
{
	if (e != EMFILE && e != ENFILE && e != ENOMEM)
		return;
	if (weft)
		weft_sleep_ns(10000000);
	else
		usleep(10000);
}

static inline void *cs_weft_acceptor(void *arg)
{
	static _Atomic unsigned next_worker;
	weft_attr_t a;

	(void)arg;
	weft_attr_init(&a);
	a.detached = 1;
	a.stack_size = cs_stack_size;
	for (;;) {
		int fd = weft_io_accept(cs_listen_fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			cs_accept_failed(weft_errno(), 1);   /* not errno: see weft/io.h */
			continue;
		}
		cs_tune(fd);
		if (cs_pin_conns)
			a.worker = (int)(atomic_fetch_add(&next_worker, 1) % (unsigned)weft_workers());
		if (weft_spawn(NULL, cs_conn, (void *)(intptr_t)fd, &a))
			close(fd);
	}
	return NULL;
}

/* weft impl: start the runtime with the given worker count (0: CPUs), one
 * acceptor pinned to each worker; the main thread then only waits. */
static inline __attribute__((noreturn)) void cs_run_weft(int workers)
{
	bench_weft_start(workers);
	for (int i = 0; i < weft_workers(); i++) {
		weft_attr_t a;

		weft_attr_init(&a);
		a.worker = i;
		a.detached = 1;
		if (weft_spawn(NULL, cs_weft_acceptor, NULL, &a)) {
			fprintf(stderr, "cannot spawn acceptor\n");
			exit(1);
		}
	}
	for (;;)
		pause();
}

/* pthread impl: accept on this thread, an OS thread per connection. */
static inline __attribute__((noreturn)) void cs_run_pthread(void)
{
	pthread_attr_t a;

	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, cs_stack_size);
	for (;;) {
		pthread_t t;
		int fd = accept4(cs_listen_fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			cs_accept_failed(errno, 0);
			continue;
		}
		cs_tune(fd);
		if (pthread_create(&t, &a, cs_conn, (void *)(intptr_t)fd))
			close(fd);
	}
}

/* Exit at once. The listener is shut down first: the acceptors' pending
 * io_uring accepts hold references to it, which the kernel drops only in
 * the ring's exit work, after the process is gone; until then the socket
 * stays in LISTEN and a server restarted on the port failed with
 * EADDRINUSE (scripts running impls back to back on one port saw it).
 * shutdown(2) takes it out of LISTEN whatever references remain. */
static inline void cs_on_signal(int sig)
{
	(void)sig;
	if (cs_listen_fd >= 0)
		shutdown(cs_listen_fd, SHUT_RDWR);
	if (getenv("WEFT_STATS"))
		weft_stats_print(stderr);
	_exit(0);
}

/* Ignore SIGPIPE, exit on SIGINT/SIGTERM, and listen on addr:port (IPv4
 * dotted quad). Returns 0, or -1 after printing why. */
static inline int cs_listen(const char *addr, int port)
{
	struct sockaddr_in sa;
	int one = 1;

	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, cs_on_signal);
	signal(SIGTERM, cs_on_signal);
	cs_listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cs_listen_fd < 0) {
		perror("socket");
		return -1;
	}
	setsockopt(cs_listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
		fprintf(stderr, "bad address %s (IPv4 dotted quad)\n", addr);
		return -1;
	}
	if (bind(cs_listen_fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(cs_listen_fd, 4096)) {
		perror("bind/listen");
		return -1;
	}
	return 0;
}

#endif
