/*
 * examples/hackbench.c - `perf bench sched messaging` (hackbench) in library
 * form, with its pthread baseline in the same binary.
 *
 *   hackbench [--impl=weft|pthread] [--mode=pipe|socket|chan] [-g GROUPS]
 *             [-S SENDERS] [-R RECEIVERS] [-l LOOPS] [-c CHAN_CAP]
 *
 * The workload (written from the description of perf's benchmark, not from
 * its source): G groups, each of S senders and R receivers (default 10
 * groups of 20 and 20, 100 loops, as perf). Each receiver has one link; each
 * sender of a group, L times over, writes one 100-byte message to every
 * receiver of its group in turn. A receiver reads S x L messages. Total
 * G x S x R x L messages (400,000 by default). Every message may wake a
 * receiver, every full link blocks a sender: a many-to-many wake storm, each
 * sender waking R distinct receivers (high "wakee flips": the kernel's
 * wake_wide() case).
 *
 * Links (--mode):
 *   pipe    one pipe(2) per receiver; weft threads use weft_io_write and
 *           weft_io_read (weft/io.h), pthreads plain write(2)/read(2).
 *   socket  one socketpair(AF_UNIX, SOCK_STREAM) per receiver (perf's
 *           default), same calls.
 *   chan    one weft channel of 100-byte elements per receiver, capacity
 *           CHAN_CAP (default 640, about the 64 KiB of a pipe). weft only:
 *           this mode has no pthread counterpart (the kernel has no channel),
 *           and --impl=pthread --mode=chan is refused with exit status 2.
 *
 * Start and stop: all threads are created, then wait on a start semaphore
 * (weft_sem_t / sem_t); the clock starts when main posts it once per thread
 * and stops when every thread has been joined (perf releases its tasks
 * through a pipe and times the same span).
 *
 * Output: perf's lines (groups, total time), the rate, the scheduler
 * counters of the run for weft (kicks per 1,000 wakes, remote wakes and
 * steals per message, chained kicks if the build counts them), and one
 * machine-readable line:
 *   bench=hackbench impl=weft mode=pipe workers=2 groups=10 senders=20
 *   receivers=20 loops=100 messages=400000 expected=400000 secs=X
 *   msgs_per_s=X kicks_per_kwake=X remote_per_msg=X steals_per_msg=X
 *   chain_per_kwake=X wakes=N
 *   param=mode=pipe,workers=2,groups=10,senders=20,receivers=20,loops=100
 *   value=X unit=msg/s
 * messages is what the receivers counted, expected is G x S x R x L.
 * Exit status 3: WEFT_FEATURES names a switch this build does not have.
 */
#include "examples/wake_bench.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <weft.h>

enum { MSG = 100 };
enum mode { MODE_PIPE, MODE_SOCKET, MODE_CHAN };
static const char *const mode_name[] = { "pipe", "socket", "chan" };

static bool use_weft = true;
static enum mode mode = MODE_SOCKET;
static int groups = 10, n_send = 20, n_recv = 20, loops = 100, chan_cap = 640;

/* One receiver's link: fds[0] read end, fds[1] write end; or a channel. */
struct link {
	int fds[2];
	weft_chan_t *ch;
};

struct task {
	struct link *links;   /* the group's n_recv links */
	int idx;              /* receiver: its link */
	bool sender;
	uint64_t received;    /* receiver: messages counted */
	int err;              /* errno of a failed call, 0 if none */
	weft_thread_t wt;
	pthread_t pt;
};

static union {
	weft_sem_t w;
	sem_t p;
} gate;

static void gate_wait(void)
{
	if (use_weft) {
		weft_sem_wait(&gate.w);
	} else {
		while (sem_wait(&gate.p) != 0)
			; /* EINTR */
	}
}

/* Write all of buf (pipes: 100 bytes are atomic; stream sockets may take
 * part). Returns 0 or an errno. */
static int write_all(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t r = use_weft ? weft_io_write(fd, buf, n) : write(fd, buf, n);

		if (r < 0) {
			int e = use_weft ? weft_errno() : errno;

			if (e == EINTR)
				continue;
			return e;
		}
		buf += r;
		n -= (size_t)r;
	}
	return 0;
}

static void *sender_main(void *arg)
{
	struct task *t = arg;
	char msg[MSG];

	memset(msg, 's', sizeof(msg));
	gate_wait();
	for (int l = 0; l < loops && !t->err; l++) {
		for (int r = 0; r < n_recv && !t->err; r++) {
			if (mode == MODE_CHAN)
				t->err = weft_chan_send(t->links[r].ch, msg);
			else
				t->err = write_all(t->links[r].fds[1], msg, MSG);
		}
	}
	return NULL;
}

static void *receiver_main(void *arg)
{
	struct task *t = arg;
	struct link *lk = &t->links[t->idx];
	uint64_t want = (uint64_t)n_send * (uint64_t)loops * MSG, got = 0;
	char buf[MSG];

	gate_wait();
	while (got < want) {
		if (mode == MODE_CHAN) {
			t->err = weft_chan_recv(lk->ch, buf);
			if (t->err)
				break;
			got += MSG;
			continue;
		}
		/* read at most one message's worth: as hackbench, which reads
		 * 100 bytes at a time and counts bytes */
		ssize_t r = use_weft ? weft_io_read(lk->fds[0], buf, sizeof(buf))
				     : read(lk->fds[0], buf, sizeof(buf));

		if (r < 0) {
			int e = use_weft ? weft_errno() : errno;

			if (e == EINTR)
				continue;
			t->err = e;
			break;
		}
		if (r == 0) {
			t->err = EPIPE; /* a sender vanished: cannot happen */
			break;
		}
		got += (uint64_t)r;
	}
	t->received = got / MSG;
	return NULL;
}

static int link_open(struct link *lk)
{
	lk->fds[0] = lk->fds[1] = -1;
	lk->ch = NULL;
	switch (mode) {
	case MODE_PIPE:
		return pipe(lk->fds) ? errno : 0;
	case MODE_SOCKET:
		return socketpair(AF_UNIX, SOCK_STREAM, 0, lk->fds) ? errno : 0;
	case MODE_CHAN:
		return weft_chan_create(&lk->ch, MSG, (size_t)chan_cap);
	}
	return EINVAL;
}

static void link_close(struct link *lk)
{
	if (lk->fds[0] >= 0)
		close(lk->fds[0]);
	if (lk->fds[1] >= 0)
		close(lk->fds[1]);
	if (lk->ch)
		weft_chan_destroy(lk->ch);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: hackbench [--impl=weft|pthread] [--mode=pipe|socket|chan] [-g GROUPS]\n"
		"                 [-S SENDERS] [-R RECEIVERS] [-l LOOPS] [-c CHAN_CAP]\n"
		"  --impl  weft (light threads, weft/io.h calls; default) or pthread (OS\n"
		"          threads, read/write)\n"
		"  --mode  socket (socketpairs, default), pipe, or chan (weft channels;\n"
		"          weft only: no pthread counterpart)\n"
		"  -g N    groups (default 10); -S N senders, -R N receivers per group\n"
		"          (default 20 and 20); -l N loops (default 100)\n"
		"  -c N    chan mode: channel capacity in messages (default 640)\n"
		"Workers: WEFT_WORKERS; placement switches: WEFT_FEATURES.\n");
}

static int parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(a, "--impl=weft")) {
			use_weft = true;
		} else if (!strcmp(a, "--impl=pthread")) {
			use_weft = false;
		} else if (!strncmp(a, "--mode=", 7)) {
			int m;

			for (m = 0; m < 3 && strcmp(a + 7, mode_name[m]); m++)
				;
			if (m == 3)
				return -1;
			mode = (enum mode)m;
		} else if (a[0] == '-' && a[1] && strchr("gSRlc", a[1]) && !a[2] && v) {
			char *end;
			long x = strtol(v, &end, 10);

			i++;
			if (end == v || *end || x < (a[1] == 'c' ? 0 : 1) || x > 1000000)
				return -1;
			switch (a[1]) {
			case 'g': groups = (int)x; break;
			case 'S': n_send = (int)x; break;
			case 'R': n_recv = (int)x; break;
			case 'l': loops = (int)x; break;
			case 'c': chan_cap = (int)x; break;
			}
		} else {
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct wake_bench_stats s0, s1, ds;
	struct link *links;
	struct task *tasks;
	int per = 0, ntask, rc = 0;
	uint64_t t0, t1, msgs = 0, expected;
	double el;

	if (parse_args(argc, argv)) {
		usage(stderr);
		return 2;
	}
	if (mode == MODE_CHAN && !use_weft) {
		fprintf(stderr, "hackbench: --mode=chan has no pthread counterpart "
				"(weft channels only); use --mode=pipe or socket\n");
		return 2;
	}
	if (use_weft)
		wake_bench_start("hackbench");
	ntask = groups * (n_send + n_recv);
	expected = (uint64_t)groups * (uint64_t)n_send * (uint64_t)n_recv * (uint64_t)loops;
	links = calloc((size_t)groups * (size_t)n_recv, sizeof(*links));
	tasks = calloc((size_t)ntask, sizeof(*tasks));
	if (!links || !tasks) {
		fprintf(stderr, "hackbench: out of memory\n");
		return 1;
	}
	for (int i = 0; i < groups * n_recv; i++) {
		rc = link_open(&links[i]);
		if (rc) {
			fprintf(stderr, "hackbench: %s link %d: %s%s\n", mode_name[mode], i,
				strerror(rc), rc == EMFILE ? " (raise ulimit -n or use fewer groups)" : "");
			return 1;
		}
	}
	if (use_weft)
		weft_sem_init(&gate.w, 0);
	else
		sem_init(&gate.p, 0, 0);

	for (int g = 0; g < groups; g++) {
		for (int k = 0; k < n_send + n_recv; k++) {
			struct task *t = &tasks[per++];

			t->links = &links[g * n_recv];
			t->sender = k >= n_recv;
			t->idx = t->sender ? -1 : k;
			rc = use_weft ? weft_spawn(&t->wt, t->sender ? sender_main : receiver_main, t, NULL)
				      : pthread_create(&t->pt, NULL,
						       t->sender ? sender_main : receiver_main, t);
			if (rc) {
				fprintf(stderr, "hackbench: creating thread %d: %s\n", per, strerror(rc));
				return 1;
			}
		}
	}

	wake_bench_snap(&s0);
	t0 = bench_now_ns();
	if (use_weft) {
		weft_sem_post_n(&gate.w, (unsigned)ntask);
	} else {
		for (int i = 0; i < ntask; i++)
			sem_post(&gate.p);
	}
	for (int i = 0; i < ntask; i++) {
		if (use_weft)
			weft_join(tasks[i].wt, NULL);
		else
			pthread_join(tasks[i].pt, NULL);
	}
	t1 = bench_now_ns();
	wake_bench_snap(&s1);
	wake_bench_delta(&ds, &s0, &s1);

	for (int i = 0; i < ntask; i++) {
		msgs += tasks[i].received;
		if (tasks[i].err && !rc) {
			rc = tasks[i].err;
			fprintf(stderr, "hackbench: a %s failed: %s\n",
				tasks[i].sender ? "sender" : "receiver", strerror(rc));
		}
	}
	el = (double)(t1 - t0) / 1e9;

	printf("# %d sender and %d receiver %s per group (%s, %s)\n", n_send, n_recv,
	       use_weft ? "weft threads" : "threads", mode_name[mode], use_weft ? "weft" : "pthread");
	printf("# %d groups == %d %s run\n\n", groups, ntask, use_weft ? "weft threads" : "threads");
	printf("     Total time: %.3f [sec]\n\n", el);
	printf("  messages             %llu of %llu\n", (unsigned long long)msgs,
	       (unsigned long long)expected);
	printf("  messages/s           %.0f\n", (double)msgs / el);
	if (use_weft)
		printf("  workers              %d\n", weft_workers());
	wake_bench_table(stdout, &ds, use_weft, (double)msgs, "msg");

	printf("bench=hackbench impl=%s mode=%s workers=%d groups=%d senders=%d receivers=%d "
	       "loops=%d messages=%llu expected=%llu secs=%.4f msgs_per_s=%.1f",
	       use_weft ? "weft" : "pthread", mode_name[mode],
	       use_weft ? weft_workers() : bench_cpu_count(), groups, n_send, n_recv, loops,
	       (unsigned long long)msgs, (unsigned long long)expected, el, (double)msgs / el);
	wake_bench_keys(stdout, &ds, use_weft, (double)msgs, "msg");
	/* the generic keys (bench.h), which make bench collects */
	printf(" param=mode=%s,workers=%d,groups=%d,senders=%d,receivers=%d,loops=%d "
	       "value=%.1f unit=msg/s\n", mode_name[mode],
	       use_weft ? weft_workers() : bench_cpu_count(), groups, n_send, n_recv, loops,
	       (double)msgs / el);
	fflush(stdout);

	for (int i = 0; i < groups * n_recv; i++)
		link_close(&links[i]);
	if (use_weft) {
		weft_sem_destroy(&gate.w);
		weft_shutdown();
	} else {
		sem_destroy(&gate.p);
	}
	free(links);
	free(tasks);
	return rc || msgs != expected ? 1 : 0;
}
