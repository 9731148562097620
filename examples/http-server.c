/*
 * examples/http-server.c - thread-per-connection HTTP/1.1 server, plain
 * blocking style, with a fixed small response.
 *
 *   http-server [--impl=weft|pthread] [--port=8080] [--addr=127.0.0.1]
 *               [--workers=N] [--stack=65536] [--pin-conns]
 *
 * One thread per connection reads requests and writes responses with
 * blocking calls (weft_io_recv / weft_io_send). The same handler code runs
 * in both implementations:
 *   weft    - each connection is a weft thread; the calls park it and the
 *             worker batches everyone's I/O on its io_uring. One acceptor
 *             thread per worker (pinned); connection threads are unpinned
 *             (work stealing balances them), or with --pin-conns pinned
 *             round-robin to the workers (static balance, no migration).
 *   pthread - each connection is an OS thread (pthread_create per accept);
 *             called from an OS thread, weft_io_* are the plain syscalls, so
 *             this is the classic blocking thread-per-connection server.
 * HTTP/1.1 keep-alive (the default; "Connection: close" is honoured),
 * pipelined requests are answered in one send, request bodies (GET only in
 * practice) are skipped by Content-Length. Every response is the same
 * 13-byte "Hello, World!" with text/plain, like the nginx `return 200` used
 * by examples/run-http.sh.
 *
 * Stop with SIGINT/SIGTERM (the process exits; connection threads are not
 * joined). WEFT_STATS=1 prints the runtime counters at exit (weft impl).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <weft.h>
#include <weft/io.h>

#include "conn_server.h"
#include "http_response.h"

static const char RESPONSE[] = HTTP_HELLO_RESPONSE;
#define RESPONSE_LEN (sizeof(RESPONSE) - 1)

/* Request buffer per connection: headers of a typical request (wrk sends
 * ~40 bytes; browsers < 2 KiB) plus pipelined followers. */
#define REQ_BUF 4096
/* Responses batched per send when requests are pipelined. */
#define OUT_BUF (RESPONSE_LEN * 16)

static bool send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = weft_io_send(fd, p, n, MSG_NOSIGNAL);

		if (k <= 0)
			return false;
		p += k;
		n -= (size_t)k;
	}
	return true;
}

/* Scan the header lines of one request (hdr[0..n), ending in the blank
 * line) for Content-Length and "Connection: close". Only lines starting
 * with 'c' are compared, so the scan costs about one pass over the bytes. */
static void scan_headers(const char *hdr, size_t n, size_t *body, bool *conn_close)
{
	const char *p = hdr, *end = hdr + n;

	*body = 0;
	*conn_close = false;
	while ((p = memchr(p, '\n', (size_t)(end - p))) && ++p < end) {
		size_t left = (size_t)(end - p);

		if ((*p | 0x20) != 'c')
			continue;
		if (left > 15 && strncasecmp(p, "content-length:", 15) == 0)
			*body = strtoul(p + 15, NULL, 10);
		else if (left > 11 && strncasecmp(p, "connection:", 11) == 0) {
			const char *v = p + 11;

			while (v < end && *v == ' ')
				v++;
			*conn_close = (size_t)(end - v) >= 5 && strncasecmp(v, "close", 5) == 0;
		}
	}
}

/* The handler: identical for both implementations. */
static void serve(int fd)
{
	char buf[REQ_BUF], out[OUT_BUF];
	size_t len = 0;
	bool keep = true;

	while (keep) {
		size_t nout = 0, used = 0;
		ssize_t n = weft_io_recv(fd, buf + len, sizeof(buf) - len, 0);

		if (n <= 0)
			break;
		len += (size_t)n;
		for (;;) {
			const char *end = memmem(buf + used, len - used, "\r\n\r\n", 4);
			size_t hdr, body;
			bool close_req;

			if (!end)
				break;
			hdr = (size_t)(end + 4 - (buf + used));
			scan_headers(buf + used, hdr, &body, &close_req);
			if (used + hdr + body > len)
				break;   /* body not complete yet */
			if (close_req)
				keep = false;
			used += hdr + body;
			if (nout + RESPONSE_LEN > sizeof(out)) {
				if (!send_all(fd, out, nout))
					goto out;
				nout = 0;
			}
			memcpy(out + nout, RESPONSE, RESPONSE_LEN);
			nout += RESPONSE_LEN;
			if (!keep)
				break;
		}
		if (nout && !send_all(fd, out, nout))
			break;
		if (used == 0 && len == sizeof(buf))
			break;   /* header block too large: drop the connection */
		memmove(buf, buf + used, len - used);
		len -= used;
	}
out:
	weft_io_close(fd);
}

/* ---------------------------------------------------------------------- */

/* The handler of each connection thread (weft and pthread impl). */
static void *conn_thread(void *arg)
{
	serve((int)(intptr_t)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *impl = "weft", *addr = "127.0.0.1";
	int port = 8080, workers = 0;

	for (int i = 1; i < argc; i++) {
		if (!strncmp(argv[i], "--impl=", 7))
			impl = argv[i] + 7;
		else if (!strncmp(argv[i], "--port=", 7))
			port = atoi(argv[i] + 7);
		else if (!strncmp(argv[i], "--addr=", 7))
			addr = argv[i] + 7;
		else if (!strncmp(argv[i], "--workers=", 10))
			workers = atoi(argv[i] + 10);
		else if (!strncmp(argv[i], "--stack=", 8))
			cs_stack_size = strtoul(argv[i] + 8, NULL, 0);
		else if (!strcmp(argv[i], "--pin-conns"))
			cs_pin_conns = 1;
		else {
			fprintf(stderr, "usage: %s [--impl=weft|pthread] [--port=N] [--addr=A] "
				"[--workers=N] [--stack=BYTES] [--pin-conns]\n", argv[0]);
			return 2;
		}
	}
	if (strcmp(impl, "weft") && strcmp(impl, "pthread")) {
		fprintf(stderr, "unknown --impl=%s (weft or pthread)\n", impl);
		return 2;
	}
	cs_conn = conn_thread;
	if (cs_listen(addr, port))
		return 1;
	fprintf(stderr, "http-server: impl=%s listening on %s:%d\n", impl, addr, port);
	if (!strcmp(impl, "pthread"))
		cs_run_pthread();
	else
		cs_run_weft(workers);
	return 0;
}
