/*
 * examples/kick-pingpong.c - cost of waking a sleeping worker (the kick).
 *
 *   WEFT_FEATURES=NO_IDLE_SPIN kick-pingpong [rounds]
 *
 * Two weft threads pinned to workers 0 and 1 hand a token back and forth
 * with weft_park / weft_unpark. With NO_IDLE_SPIN a worker whose thread
 * parks goes to sleep at once (in its io_uring, or on its futex with
 * NO_URING), so each hand-off is a remote wake plus a kick of a sleeping
 * worker. Prints microseconds per round trip (two kicks) and the counters.
 * Used to choose the kick of runtime/uring.c (eventfd vs MSG_RING, see
 * "Kick" there); compare WEFT_FEATURES=NO_IDLE_SPIN,NO_URING for the futex.
 * Then two machine-readable lines (examples/bench.h's format, collected by
 * make bench, which runs it as it is, with NO_IDLE_SPIN and with
 * NO_IDLE_SPIN,NO_URING):
 *   bench=kick-pingpong impl=weft param=rounds=N value=US unit=us
 *   bench=kick-pingpong_kicks impl=weft param=rounds=N value=K unit=kicks
 * (K: kicks per round trip; 2 when every hand-off found the other worker
 * asleep).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <weft.h>
#include <weft/io.h>

static weft_thread_t ta, tb;
static _Atomic int turn;
static long rounds = 20000;

static void *side_a(void *arg)
{
	for (long i = 0; i < rounds; i++) {
		while (atomic_load(&turn) != 0)
			weft_park();
		atomic_store(&turn, 1);
		weft_unpark(tb);
	}
	return arg;
}

static void *side_b(void *arg)
{
	for (long i = 0; i < rounds; i++) {
		while (atomic_load(&turn) != 1)
			weft_park();
		atomic_store(&turn, 0);
		weft_unpark(ta);
	}
	return arg;
}

int main(int argc, char **argv)
{
	weft_config_t cfg = WEFT_CONFIG_INITIALIZER;
	weft_attr_t a, b;
	weft_stats_t s;
	weft_time_t t0;
	char io[256];

	if (argc > 1)
		rounds = atol(argv[1]);
	if (rounds <= 0) {
		fprintf(stderr, "usage: kick-pingpong [rounds > 0]\n");
		return 2;
	}
	cfg.workers = 2;
	if (weft_init(&cfg))
		return 1;
	weft_attr_init(&a);
	a.worker = 0;
	weft_attr_init(&b);
	b.worker = 1;
	t0 = weft_now_ns();
	if (weft_spawn(&ta, side_a, NULL, &a) || weft_spawn(&tb, side_b, NULL, &b))
		return 1;
	weft_join(ta, NULL);
	weft_join(tb, NULL);
	t0 = weft_now_ns() - t0;
	weft_stats_get(&s);
	weft_io_backend(io, sizeof(io));
	printf("%.2f us per round trip; kicks %llu, worker parks %llu; io: %s\n",
	       (double)t0 / 1e3 / (double)rounds, (unsigned long long)s.kicks,
	       (unsigned long long)s.parks, io);
	printf("bench=kick-pingpong impl=weft param=rounds=%ld value=%.4f unit=us\n", rounds,
	       (double)t0 / 1e3 / (double)rounds);
	printf("bench=kick-pingpong_kicks impl=weft param=rounds=%ld value=%.4f unit=kicks\n", rounds,
	       (double)s.kicks / (double)rounds);
	weft_shutdown();
	return 0;
}
