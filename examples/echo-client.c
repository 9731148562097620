/*
 * examples/echo-client.c - ping-pong load generator for examples/echo-server.
 *
 *   echo-client [--port=9000] [--conns=1] [--size=64] [--seconds=5]
 *               [--threads=1] [--impl-label=NAME]
 *
 * Opens --conns TCP connections to 127.0.0.1:port. On each, it sends --size
 * bytes, waits until all of them came back, and repeats (one message in
 * flight per connection: ping-pong). The connections are driven by
 * --threads epoll loops (non-blocking sockets), so the client is the same
 * whatever the server implementation. Prints round trips per second and
 * the 50th/99th percentile round-trip latency, plus a machine-readable line
 *     bench=echo impl=NAME param=conns=N,size=S value=X unit=rt/s p50_us=.. p99_us=..
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Latency histogram: 1 us buckets up to 100 ms, then one overflow bucket. */
#define HIST_US 100000

struct conn {
	int fd;
	size_t sent, got;
	uint64_t t0;
};

struct loop {
	pthread_t tid;
	int nconns;
	struct conn *c;
	uint64_t rts;
	uint64_t *hist;
};

static int port = 9000, size = 64;
static double seconds = 5;
static volatile int stop;
static char *payload;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int dial(void)
{
	struct sockaddr_in sa;
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	return fd;
}

static void *run_loop(void *arg)
{
	struct loop *l = arg;
	struct epoll_event ev, evs[256];
	char *buf = malloc((size_t)size);
	int ep = epoll_create1(EPOLL_CLOEXEC);

	for (int i = 0; i < l->nconns; i++) {
		struct conn *c = &l->c[i];
		ssize_t k;

		ev.events = EPOLLIN;
		ev.data.ptr = c;
		epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
		c->t0 = now_ns();
		k = write(c->fd, payload, (size_t)size);   /* small: fits the socket buffer */
		c->sent = k > 0 ? (size_t)k : 0;
		c->got = 0;
	}
	while (!stop) {
		int n = epoll_wait(ep, evs, 256, 100);

		for (int i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;
			ssize_t k = read(c->fd, buf, (size_t)size - c->got);

			if (k <= 0) {
				if (k < 0 && errno == EAGAIN)
					continue;
				fprintf(stderr, "connection closed by the server\n");
				exit(1);
			}
			c->got += (size_t)k;
			if (c->got < (size_t)size)
				continue;
			{
				uint64_t us = (now_ns() - c->t0) / 1000;

				l->hist[us < HIST_US ? us : HIST_US]++;
				l->rts++;
			}
			c->got = 0;
			c->t0 = now_ns();
			if (write(c->fd, payload, (size_t)size) != size) {
				perror("write");
				exit(1);
			}
		}
	}
	free(buf);
	close(ep);
	return NULL;
}

static double pct(const uint64_t *h, uint64_t total, double p)
{
	uint64_t want = (uint64_t)(p * (double)total), acc = 0;

	for (int i = 0; i <= HIST_US; i++) {
		acc += h[i];
		if (acc > want)
			return i;
	}
	return HIST_US;
}

int main(int argc, char **argv)
{
	int conns = 1, threads = 1;
	const char *label = "unknown";
	struct loop *loops;
	uint64_t *hist, total = 0;
	uint64_t t0, t1;

	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--port=", 7))
			port = atoi(argv[i] + 7);
		else if (!strncmp(argv[i], "--conns=", 8))
			conns = atoi(argv[i] + 8);
		else if (!strncmp(argv[i], "--size=", 7))
			size = atoi(argv[i] + 7);
		else if (!strncmp(argv[i], "--seconds=", 10))
			seconds = atof(argv[i] + 10);
		else if (!strncmp(argv[i], "--threads=", 10))
			threads = atoi(argv[i] + 10);
		else if (!strncmp(argv[i], "--impl-label=", 13))
			label = argv[i] + 13;
		else {
			fprintf(stderr, "usage: %s [--port=N] [--conns=N] [--size=BYTES] [--seconds=S] "
				"[--threads=N] [--impl-label=NAME]\n", argv[0]);
			return 2;
		}
	}
	if (conns < 1 || size < 1 || threads < 1 || threads > conns) {
		fprintf(stderr, "bad arguments\n");
		return 2;
	}
	payload = malloc((size_t)size);
	memset(payload, 'e', (size_t)size);
	loops = calloc((size_t)threads, sizeof(*loops));
	for (int t = 0; t < threads; t++) {
		loops[t].nconns = conns / threads + (t < conns % threads);
		loops[t].c = calloc((size_t)loops[t].nconns, sizeof(struct conn));
		loops[t].hist = calloc(HIST_US + 1, sizeof(uint64_t));
		for (int i = 0; i < loops[t].nconns; i++)
			loops[t].c[i].fd = dial();
	}
	for (int t = 0; t < threads; t++)
		for (int i = 0; i < loops[t].nconns; i++)
			fcntl(loops[t].c[i].fd, F_SETFL, O_NONBLOCK);
	t0 = now_ns();
	for (int t = 0; t < threads; t++)
		pthread_create(&loops[t].tid, NULL, run_loop, &loops[t]);
	usleep((useconds_t)(seconds * 1e6));
	stop = 1;
	for (int t = 0; t < threads; t++)
		pthread_join(loops[t].tid, NULL);
	t1 = now_ns();
	hist = calloc(HIST_US + 1, sizeof(uint64_t));
	for (int t = 0; t < threads; t++) {
		for (int i = 0; i <= HIST_US; i++)
			hist[i] += loops[t].hist[i];
		total += loops[t].rts;
	}
	{
		double secs = (double)(t1 - t0) / 1e9;
		double rate = (double)total / secs;

		printf("%s: %d conns, %d bytes: %.0f round trips/s, p50 %.0f us, p99 %.0f us\n",
		       label, conns, size, rate, pct(hist, total, 0.50), pct(hist, total, 0.99));
		printf("bench=echo impl=%s param=conns=%d,size=%d value=%.0f unit=rt/s p50_us=%.0f p99_us=%.0f\n",
		       label, conns, size, rate, pct(hist, total, 0.50), pct(hist, total, 0.99));
	}
	/* everything back (LeakSanitizer fails an ASan build's run otherwise,
	 * and tests/check_server_restart.sh runs this client) */
	for (int t = 0; t < threads; t++) {
		for (int i = 0; i < loops[t].nconns; i++)
			close(loops[t].c[i].fd);
		free(loops[t].c);
		free(loops[t].hist);
	}
	free(loops);
	free(hist);
	free(payload);
	return 0;
}
