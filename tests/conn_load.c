/*
 * tests/conn_load.c - the client of tests/check_conns.sh: many concurrent
 * loopback connections to examples/echo-server or examples/http-server,
 * every response checked byte for byte, every count exact.
 *
 *   conn_load --port=N --proto=echo|http [--conns=1000] [--reqs=4]
 *             [--rounds=1] [--seconds=20]
 *
 * --conns slots run at once; each opens --rounds connections one after
 * the other (connect, --reqs requests one at a time, close: with
 * --rounds > 1 this is connection churn) and the first connection of
 * every slot gets its first response before any slot sends its second
 * request, so --conns connections are open at once (a barrier, as in
 * tests/check_http.sh). Each request is distinct (slot, round and index in
 * it; echo messages of 16-215 bytes), so a response that went to the wrong
 * connection, a lost byte or an extra one (a duplicated response) fails.
 * After its last response a connection must have nothing more to read;
 * then the client closes it. HTTP connections of odd rounds send their
 * last request with "Connection: close" instead, and the server must send
 * the response and then EOF (the server closes first: both directions of
 * close are churned).
 *
 * One thread, one epoll set, non-blocking sockets: the client is the same
 * whatever the server, and cheap enough to share 2 CPUs with it. It links
 * neither weft nor Check. Exit 0 when connections opened = connections
 * closed cleanly = conns * rounds and requests sent = responses checked =
 * conns * rounds * reqs; 1 (with what went wrong and where every slot
 * stood) on any error or after --seconds; 2 on bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "examples/http_response.h"

/* examples/http-server.c's one response, byte for byte. */
static const char HTTP_RESPONSE[] = HTTP_HELLO_RESPONSE;

enum { MSG_MAX = 256 };

enum state { CONNECTING, SENDING, RECEIVING, BARRIER, EOF_WAIT, DONE };
static const char *state_names[] = { "connecting", "sending", "receiving", "at the barrier",
				     "waiting for EOF", "done" };

struct slot {
	int fd;
	enum state st;
	int round, req;
	char out[MSG_MAX];
	size_t out_len, out_off;
	char exp[MSG_MAX];
	size_t exp_len, got;
	int close_req;             /* this request asks the server to close */
};

static int port, http, conns = 1000, reqs = 4, rounds = 1;
static double seconds = 20;
static struct slot *slots;
static int ep;
static long opened, closed_ok, sent, answered, open_now, open_max;
static int barrier_left;       /* slots whose first response is still due */
static int done;               /* slots whose last connection is closed */

static void fail(struct slot *s, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

static void fail(struct slot *s, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "conn_load: FAIL: ");
	if (s)
		fprintf(stderr, "slot %d round %d request %d: ", (int)(s - slots), s->round, s->req);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void watch(struct slot *s, unsigned ev, int op)
{
	struct epoll_event e = { .events = ev, .data.ptr = s };

	if (epoll_ctl(ep, op, s->fd, &e))
		fail(s, "epoll_ctl: %s", strerror(errno));
}

/* The request of s's current (round, req), and the response it expects. */
static void make_request(struct slot *s)
{
	int id = (int)(s - slots);

	s->close_req = http && (s->round & 1) && s->req == reqs - 1;
	if (http) {
		s->out_len = (size_t)snprintf(s->out, sizeof(s->out),
					      "GET /c%d/r%d/q%d HTTP/1.1\r\nHost: localhost\r\n%s\r\n",
					      id, s->round, s->req,
					      s->close_req ? "Connection: close\r\n" : "");
		s->exp_len = sizeof(HTTP_RESPONSE) - 1;
		memcpy(s->exp, HTTP_RESPONSE, s->exp_len);
	} else {
		size_t len = 16 + (size_t)(id * 7 + s->req * 13 + s->round) % 200;
		int k = snprintf(s->out, sizeof(s->out), "c%d r%d q%d:", id, s->round, s->req);

		for (size_t i = (size_t)k; i < len; i++)
			s->out[i] = (char)('a' + (i * 31 + (size_t)id) % 26);
		s->out_len = len;
		s->exp_len = len;
		memcpy(s->exp, s->out, len);
	}
	s->out_off = 0;
	s->got = 0;
}

/* Write what is left of the request; on EAGAIN wait for EPOLLOUT. */
static void send_more(struct slot *s)
{
	while (s->out_off < s->out_len) {
		ssize_t n = send(s->fd, s->out + s->out_off, s->out_len - s->out_off, MSG_NOSIGNAL);

		if (n < 0 && errno == EAGAIN) {
			s->st = SENDING;
			watch(s, EPOLLOUT, EPOLL_CTL_MOD);
			return;
		}
		if (n <= 0)
			fail(s, "send: %s", n < 0 ? strerror(errno) : "0 bytes");
		s->out_off += (size_t)n;
	}
	if (s->st == SENDING)
		watch(s, EPOLLIN, EPOLL_CTL_MOD);
	s->st = RECEIVING;
	sent++;
}

static void start_conn(struct slot *s)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int one = 1;

	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		fail(s, "socket: %s", strerror(errno));
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->req = 0;
	s->st = CONNECTING;
	if (connect(s->fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS)
		fail(s, "connect: %s", strerror(errno));
	watch(s, EPOLLOUT, EPOLL_CTL_ADD);
}

static void connected(struct slot *s)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err)
		fail(s, "connect: %s", strerror(err ? err : errno));
	opened++;
	if (++open_now > open_max)
		open_max = open_now;
	make_request(s);
	s->st = SENDING;
	send_more(s);
}

static void end_conn(struct slot *s)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
	close(s->fd);
	s->fd = -1;
	open_now--;
	closed_ok++;
	if (++s->round < rounds)
		start_conn(s);
	else {
		s->st = DONE;
		done++;
	}
}

static void next_request(struct slot *s)
{
	s->req++;
	make_request(s);
	send_more(s);
}

/* The connection's last response is in: nothing more may come. */
static void last_response(struct slot *s)
{
	char c;
	ssize_t n;

	if (s->close_req) {
		s->st = EOF_WAIT;   /* the server closes: EOF next */
		return;
	}
	n = recv(s->fd, &c, 1, MSG_DONTWAIT);
	if (n > 0)
		fail(s, "a byte (0x%02x) after the last response", (unsigned char)c);
	if (n == 0)
		fail(s, "the server closed a kept-alive connection");
	if (errno != EAGAIN)
		fail(s, "recv: %s", strerror(errno));
	end_conn(s);
}

static void release_barrier(void)
{
	for (int i = 0; i < conns; i++)
		if (slots[i].st == BARRIER) {
			if (slots[i].req == reqs - 1)
				last_response(&slots[i]);
			else
				next_request(&slots[i]);
		}
}

static void readable(struct slot *s)
{
	char buf[4096];
	ssize_t n = recv(s->fd, buf, sizeof(buf), 0);

	if (n < 0 && errno == EAGAIN)
		return;
	if (n < 0)
		fail(s, "recv: %s", strerror(errno));
	if (s->st == EOF_WAIT) {
		if (n > 0)
			fail(s, "%zd bytes after the response to \"Connection: close\"", n);
		end_conn(s);
		return;
	}
	if (s->st != RECEIVING)
		fail(s, "%zd bytes while %s (no request outstanding)", n, state_names[s->st]);
	if (n == 0)
		fail(s, "EOF after %zu of %zu response bytes", s->got, s->exp_len);
	if (s->got + (size_t)n > s->exp_len)
		fail(s, "%zu bytes for a %zu-byte response (an extra or duplicated response)",
		     s->got + (size_t)n, s->exp_len);
	if (memcmp(buf, s->exp + s->got, (size_t)n))
		fail(s, "response bytes %zu-%zu differ from the expected ones", s->got,
		     s->got + (size_t)n - 1);
	s->got += (size_t)n;
	if (s->got < s->exp_len)
		return;
	answered++;
	if (s->round == 0 && s->req == 0 && barrier_left > 0) {
		s->st = BARRIER;
		if (--barrier_left == 0)
			release_barrier();
		return;
	}
	if (s->req == reqs - 1)
		last_response(s);
	else
		next_request(s);
}

static void report_stuck(void)
{
	int count[DONE + 1] = { 0 }, shown = 0;

	for (int i = 0; i < conns; i++)
		count[slots[i].st]++;
	fprintf(stderr, "conn_load: FAIL: not done after %.0f s: %ld connections opened, %ld closed, "
		"%ld requests sent, %ld answered; slots:", seconds, opened, closed_ok, sent, answered);
	for (int k = 0; k <= DONE; k++)
		if (count[k])
			fprintf(stderr, " %d %s", count[k], state_names[k]);
	fprintf(stderr, "\n");
	for (int i = 0; i < conns && shown < 5; i++)
		if (slots[i].st != DONE && slots[i].st != BARRIER) {
			fprintf(stderr, "  slot %d: round %d request %d, %s, %zu of %zu bytes in\n", i,
				slots[i].round, slots[i].req, state_names[slots[i].st], slots[i].got,
				slots[i].exp_len);
			shown++;
		}
}

int main(int argc, char **argv)
{
	struct epoll_event evs[256];
	double t0, deadline;

	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--port=", 7))
			port = atoi(argv[i] + 7);
		else if (!strcmp(argv[i], "--proto=echo"))
			http = 0;
		else if (!strcmp(argv[i], "--proto=http"))
			http = 1;
		else if (!strncmp(argv[i], "--conns=", 8))
			conns = atoi(argv[i] + 8);
		else if (!strncmp(argv[i], "--reqs=", 7))
			reqs = atoi(argv[i] + 7);
		else if (!strncmp(argv[i], "--rounds=", 9))
			rounds = atoi(argv[i] + 9);
		else if (!strncmp(argv[i], "--seconds=", 10))
			seconds = atof(argv[i] + 10);
		else
			port = 0;
	}
	if (port <= 0 || conns < 1 || reqs < 1 || rounds < 1 || seconds <= 0) {
		fprintf(stderr, "usage: %s --port=N --proto=echo|http [--conns=1000] [--reqs=4] "
			"[--rounds=1] [--seconds=20]\n", argv[0]);
		return 2;
	}
	slots = calloc((size_t)conns, sizeof(*slots));
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (!slots || ep < 0)
		fail(NULL, "out of memory or epoll_create1: %s", strerror(errno));
	barrier_left = conns;
	t0 = now_s();
	deadline = t0 + seconds;
	for (int i = 0; i < conns; i++)
		start_conn(&slots[i]);
	while (done < conns) {
		int n = epoll_wait(ep, evs, 256, 100);

		if (n < 0 && errno != EINTR)
			fail(NULL, "epoll_wait: %s", strerror(errno));
		for (int i = 0; i < n; i++) {
			struct slot *s = evs[i].data.ptr;

			if (s->st == CONNECTING)
				connected(s);
			else if (s->st == SENDING)
				send_more(s);
			else
				readable(s);
		}
		if (done < conns && now_s() > deadline) {
			report_stuck();
			return 1;
		}
	}
	{
		long want_c = (long)conns * rounds, want_r = want_c * reqs;

		if (opened != want_c || closed_ok != want_c || sent != want_r || answered != want_r)
			fail(NULL, "counts: %ld opened, %ld closed, %ld sent, %ld answered; want %ld, %ld, "
			     "%ld, %ld", opened, closed_ok, sent, answered, want_c, want_c, want_r, want_r);
		printf("conn_load %s: %ld connections (%d at once, max %ld open), %ld requests, every "
		       "response byte-exact, in %.2f s\n", http ? "http" : "echo", opened, conns,
		       open_max, answered, now_s() - t0);
	}
	free(slots);
	close(ep);
	return 0;
}
