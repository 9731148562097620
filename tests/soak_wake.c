/*
 * tests/soak_wake.c - the soak: cross-worker wakes over mixed primitives
 * for a given time, then exact counts that show no wakeup was lost and no
 * unit, element or hand-off doubled. Run by tests/soak.sh (not by make
 * check, which runs the bounded stress_* tests instead).
 *
 *   [SOAK_ROUNDS=R] [SOAK_STALL=S] soak_wake SECONDS [SEED]
 *
 * SOAK_ROUNDS splits the run into R rounds of SECONDS / R, each with fresh
 * groups, its own stop, joins and checks (a stop is where a group's stop
 * protocol and the workers' way to idle are tested; tests/soak.sh runs
 * 20 ms rounds).
 * WEFT_WORKERS (and WEFT_FEATURES) come from the environment. Groups, one
 * of each kind per worker, their threads pinned to different workers so
 * that every hand-off is a cross-worker wake:
 *   ring  - 4 threads pass 2 tokens around 4 semaphores (wait or short
 *           timedwait; post or post_wq + flush). Check: waits == posts and
 *           the semaphores hold exactly the 2 tokens at the end.
 *   count - 4 threads pass 2 batons around 4 semaphores (as the ring);
 *           a baton's holder increments a counter under one mutex (lock,
 *           short timedlock, trylock), half the time holding it across a
 *           yield, so that the other baton's holder parks on it. Check:
 *           counter == sum of increments, nobody else was in the critical
 *           section, and the 2 batons are left in the semaphores.
 *   cond  - 2 threads take turns under a mutex and a cond (wait or short
 *           timedwait, signal). Check: the turns add up.
 *   chan  - a sender sends 1, 2, 3, ... into a channel (rendezvous, or
 *           capacity 2); the receiver checks each value is the next one.
 *   park  - 2 threads hand a turn back and forth with park/unpark (and
 *           short timed parks). Check: turns == hand-offs.
 * A stop flag ends every group at the deadline through its own protocol
 * (the token, the turn or a close), so a lost wakeup shows as a group that
 * never finishes: a watchdog (the main thread) prints every group's counts
 * and exits 2 when a group has made no progress for STALL_SECONDS (or
 * SOAK_STALL seconds from the environment), during the run or after the
 * stop.
 *
 * Exit: 0 every count exact; 1 a count is off (printed); 2 a stall; 3 a
 * setup error. The last line gives the wakes (the runtime's counters:
 * threads made runnable by another thread, on its worker or another) and
 * the operations the checks covered (waits, increments, turns, elements).
 */
#include <weft.h>

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STALL_SECONDS 60
#define RING 4
#define TOKENS 2
#define COUNTERS 4
_Static_assert(COUNTERS == RING, "count uses the ring's semaphores");

enum { K_RING, K_COUNT, K_COND, K_CHAN, K_PARK, NKINDS };
static const char *const kind_name[NKINDS] = { "ring", "count", "cond", "chan", "park" };

static _Atomic int stop;
static _Atomic long errors;

/* One group of any kind. progress: hand-offs so far (relaxed counters:
 * read by the watchdog as a hint, and exactly after the joins). */
struct group {
	int kind, idx, nthreads;
	_Atomic long progress;
	_Atomic int finished;
	long last;                /* watchdog: progress at last_move */
	weft_time_t last_move;
	weft_thread_t th[RING];
	uint64_t seed;
	/* ring */
	weft_sem_t sem[RING];
	_Atomic long waits, posts, timeouts;
	/* count, cond */
	weft_mutex_t m;
	weft_cond_t c;
	long counter, turn;
	int in_cs, done;
	long mine[COUNTERS];
	/* chan */
	weft_chan_t *ch;
	long sent, received;
	/* park */
	_Atomic long pturn;
	_Atomic int go;
	long handed[2];
};

struct arg {
	struct group *g;
	int k;
};

static void fail(struct group *g, const char *what, long a, long b)
{
	fprintf(stderr, "soak: %s[%d]: %s (%ld, %ld)\n", kind_name[g->kind], g->idx, what, a, b);
	atomic_fetch_add(&errors, 1);
}

static uint64_t rnd(uint64_t *s)
{
	/* xorshift64 */
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static weft_time_t soon(uint64_t *s)
{
	return weft_now_ns() + rnd(s) % 20000;
}

static void tick(struct group *g)
{
	/* relaxed: a progress hint for the watchdog */
	atomic_fetch_add_explicit(&g->progress, 1, memory_order_relaxed);
}

/* ---- ring: tokens around semaphores ---- */
static void *ring_fn(void *a_)
{
	struct arg *a = a_;
	struct group *g = a->g;
	int k = a->k, e, stop_seen;
	uint64_t rng = g->seed + (uint64_t)k * 31 + 1;

	for (;;) {
		if (rnd(&rng) % 8 == 0) {
			while ((e = weft_sem_timedwait(&g->sem[k], soon(&rng))) == ETIMEDOUT)
				atomic_fetch_add_explicit(&g->timeouts, 1, memory_order_relaxed);
		} else {
			e = weft_sem_wait(&g->sem[k]);
		}
		if (e) {
			fail(g, "sem wait", e, k);
			return NULL;
		}
		atomic_fetch_add_explicit(&g->waits, 1, memory_order_relaxed);
		tick(g);
		/* Stop: read the flag BEFORE passing the token on, and leave
		 * after the post if it was set. Reading it after the post lets
		 * the successor take that token, pass it on and read the flag
		 * still clear; we then read it set and leave, the successor
		 * waits for a token that our exit no longer sends, and the
		 * other token may end in a finished thread's semaphore: a
		 * stall with every unit accounted for (POSIX semaphores stall
		 * the same way). Read first, our last post comes after the
		 * stop, so the successor reads the flag set once it has that
		 * token (its wait acquires our post, which follows our read of
		 * the flag) and leaves in turn: every thread whose predecessor
		 * left leaves, so all do. */
		stop_seen = atomic_load(&stop);
		if (rnd(&rng) % 4 == 0) {
			weft_wakeq_t wq = WEFT_WAKEQ_INITIALIZER;

			e = weft_sem_post_wq(&g->sem[(k + 1) % RING], 1, &wq);
			weft_wakeq_flush(&wq);
		} else {
			e = weft_sem_post(&g->sem[(k + 1) % RING]);
		}
		if (e)
			fail(g, "sem post", e, k);
		atomic_fetch_add_explicit(&g->posts, 1, memory_order_relaxed);
		if (stop_seen)
			return NULL;
	}
}

static void ring_check(struct group *g)
{
	int v, sum = 0;

	for (int k = 0; k < RING; k++) {
		weft_sem_getvalue(&g->sem[k], &v);
		sum += v;
		weft_sem_destroy(&g->sem[k]);
	}
	if (atomic_load(&g->waits) != atomic_load(&g->posts))
		fail(g, "waits != posts", atomic_load(&g->waits), atomic_load(&g->posts));
	if (sum != TOKENS)
		fail(g, "tokens left in the semaphores != tokens", sum, TOKENS);
}

/* ---- count: a counter under a mutex ---- */
static void *count_fn(void *a_)
{
	struct arg *a = a_;
	struct group *g = a->g;
	int k = a->k, e, stop_seen;
	uint64_t rng = g->seed + (uint64_t)k * 37 + 2;

	for (;;) {
		/* wait for one of the two batons (see ring) */
		if ((e = weft_sem_wait(&g->sem[k])) != 0) {
			fail(g, "baton wait", e, k);
			return NULL;
		}
		switch (rnd(&rng) % 8) {
		case 0:
			while ((e = weft_mutex_timedlock(&g->m, soon(&rng))) == ETIMEDOUT)
				;
			break;
		case 1:
			while ((e = weft_mutex_trylock(&g->m)) == EBUSY)
				weft_yield();
			break;
		default:
			e = weft_mutex_lock(&g->m);
		}
		if (e) {
			fail(g, "mutex lock", e, k);
			return NULL;
		}
		if (g->in_cs++ != 0)
			fail(g, "two threads in the critical section", g->in_cs, k);
		g->counter++;
		/* hold it across a switch: the other baton holder parks on it */
		if (rnd(&rng) % 2 == 0)
			weft_yield();
		g->in_cs--;
		weft_mutex_unlock(&g->m);
		g->mine[k]++;
		tick(g);
		/* the stop flag is read before the post, as in the ring (see
		 * there) */
		stop_seen = atomic_load(&stop);
		if ((e = weft_sem_post(&g->sem[(k + 1) % COUNTERS])) != 0)
			fail(g, "baton post", e, k);
		if (stop_seen)
			return NULL;
	}
}

static void count_check(struct group *g)
{
	long sum = 0;
	int v, batons = 0;

	for (int k = 0; k < COUNTERS; k++) {
		sum += g->mine[k];
		weft_sem_getvalue(&g->sem[k], &v);
		batons += v;
		weft_sem_destroy(&g->sem[k]);
	}
	if (batons != TOKENS)
		fail(g, "batons left != batons", batons, TOKENS);
	if (sum != g->counter)
		fail(g, "counter != increments", g->counter, sum);
	if (weft_mutex_destroy(&g->m) != 0)
		fail(g, "mutex still busy at the end", 0, 0);
}

/* ---- cond: turns under a mutex and a cond ---- */
static void *cond_fn(void *a_)
{
	struct arg *a = a_;
	struct group *g = a->g;
	int me = a->k, e;
	uint64_t rng = g->seed + (uint64_t)me * 41 + 3;

	weft_mutex_lock(&g->m);
	for (;;) {
		while ((g->turn & 1) != me && !g->done) {
			if (rnd(&rng) % 8 == 0)
				e = weft_cond_timedwait(&g->c, &g->m, soon(&rng));
			else
				e = weft_cond_wait(&g->c, &g->m);
			if (e && e != ETIMEDOUT) {
				fail(g, "cond wait", e, me);
				g->done = 1;
			}
		}
		if (g->done)
			break;
		if (atomic_load(&stop)) {
			g->done = 1;
			weft_cond_broadcast(&g->c);
			break;
		}
		g->turn++;
		g->mine[me]++;
		tick(g);
		weft_cond_signal(&g->c);
	}
	weft_mutex_unlock(&g->m);
	return NULL;
}

static void cond_check(struct group *g)
{
	if (g->mine[0] + g->mine[1] != g->turn)
		fail(g, "turns != hand-offs", g->turn, g->mine[0] + g->mine[1]);
	if (weft_cond_destroy(&g->c) != 0 || weft_mutex_destroy(&g->m) != 0)
		fail(g, "cond or mutex busy at the end", 0, 0);
}

/* ---- chan: a sequence through a channel ---- */
static void *chan_fn(void *a_)
{
	struct arg *a = a_;
	struct group *g = a->g;
	uint64_t rng = g->seed + 4;
	long v;
	int e;

	if (a->k == 0) {
		while (!atomic_load(&stop)) {
			v = g->sent + 1;
			if (rnd(&rng) % 8 == 0)
				e = weft_chan_timedsend(g->ch, &v, soon(&rng));
			else
				e = weft_chan_send(g->ch, &v);
			if (e == ETIMEDOUT)
				continue;
			if (e) {
				fail(g, "send", e, v);
				break;
			}
			g->sent = v;
		}
		weft_chan_close(g->ch);
		return NULL;
	}
	for (;;) {
		if (rnd(&rng) % 8 == 0)
			e = weft_chan_timedrecv(g->ch, &v, soon(&rng));
		else
			e = weft_chan_recv(g->ch, &v);
		if (e == ETIMEDOUT)
			continue;
		if (e == EPIPE)
			return NULL;
		if (e) {
			fail(g, "recv", e, 0);
			return NULL;
		}
		if (v != g->received + 1)
			fail(g, "received out of sequence", v, g->received + 1);
		g->received = v;
		tick(g);
	}
}

static void chan_check(struct group *g)
{
	if (g->sent != g->received)
		fail(g, "sent != received", g->sent, g->received);
	weft_chan_destroy(g->ch);
}

/* ---- park: a turn handed back and forth with park/unpark ---- */
static void *park_fn(void *a_)
{
	struct arg *a = a_;
	struct group *g = a->g;
	int me = a->k;
	uint64_t rng = g->seed + (uint64_t)me * 43 + 5;
	long v;

	/* g->th[1 - me] is read only after go (seq_cst) is seen */
	while (!atomic_load(&g->go))
		weft_park();
	for (;;) {
		/* -1: the other side stopped (tested first: -1 is odd) */
		while ((v = atomic_load(&g->pturn)) < 0 || (v & 1) != me) {
			if (v < 0)
				return NULL;
			if (rnd(&rng) % 4 == 0)
				weft_park_until(soon(&rng));
			else
				weft_park();
		}
		if (atomic_load(&stop)) {
			g->turn = v;   /* read after the joins */
			atomic_store(&g->pturn, -1);
			weft_unpark(g->th[1 - me]);
			return NULL;
		}
		g->handed[me]++;
		tick(g);
		atomic_store(&g->pturn, v + 1);
		weft_unpark(g->th[1 - me]);
	}
}

static void park_check(struct group *g)
{
	/* each hand-off advanced the turn exactly once (the stopper noted
	 * the last turn before it stored -1) */
	if (g->turn != g->handed[0] + g->handed[1])
		fail(g, "turns != hand-offs", g->turn, g->handed[0] + g->handed[1]);
}

/* ---------------------------------------------------------------------- */

static void *(*const kind_fn[NKINDS])(void *) = { ring_fn, count_fn, cond_fn, chan_fn, park_fn };
static const int kind_threads[NKINDS] = { RING, COUNTERS, 2, 2, 2 };

static void *finish_wrap(void *a_)
{
	struct arg *a = a_;
	void *r = kind_fn[a->g->kind](a_);

	atomic_fetch_add(&a->g->finished, 1);
	return r;
}

static int setup(struct group *g, int kind, int idx, uint64_t seed)
{
	memset(g, 0, sizeof(*g));
	g->kind = kind;
	g->idx = idx;
	g->nthreads = kind_threads[kind];
	g->seed = seed * 1000003u + (uint64_t)idx * 7919 + (uint64_t)kind;
	if (!g->seed)
		g->seed = 1;
	switch (kind) {
	case K_RING:
	case K_COUNT:   /* the batons */
		for (int k = 0; k < RING; k++)
			if (weft_sem_init(&g->sem[k], k < TOKENS) != 0)
				return -1;
		if (kind == K_RING)
			break;
		/* fall through - K_COUNT also has the mutex */
	case K_COND:
		if (weft_mutex_init(&g->m) || weft_cond_init(&g->c))
			return -1;
		break;
	case K_CHAN:
		if (weft_chan_create(&g->ch, sizeof(long), idx % 2 ? 2 : 0))
			return -1;
		break;
	}
	return 0;
}

static void check(struct group *g)
{
	switch (g->kind) {
	case K_RING: ring_check(g); break;
	case K_COUNT: count_check(g); break;
	case K_COND: cond_check(g); break;
	case K_CHAN: chan_check(g); break;
	case K_PARK: park_check(g); break;
	}
}

static void print_groups(struct group *gs, int ng)
{
	for (int i = 0; i < ng; i++) {
		struct group *g = &gs[i];

		fprintf(stderr, "  %s[%d]: progress %ld, %d of %d threads finished",
			kind_name[g->kind], g->idx, atomic_load(&g->progress),
			atomic_load(&g->finished), g->nthreads);
		if (g->kind == K_RING || g->kind == K_COUNT) {
			/* where the tokens are: a unit in a semaphore whose
			 * thread sleeps on it is a lost wakeup in the
			 * semaphore, none anywhere a lost unit */
			fprintf(stderr, ", semaphore values");
			for (int k = 0; k < RING; k++) {
				int v = -1;

				weft_sem_getvalue(&g->sem[k], &v);
				fprintf(stderr, " %d", v);
			}
			if (g->kind == K_RING)
				fprintf(stderr, ", waits %ld posts %ld", atomic_load(&g->waits),
					atomic_load(&g->posts));
		}
		fprintf(stderr, "\n");
	}
}

/* One round: fresh groups on n workers, run for seconds, stop, join,
 * check. Adds each kind's operations to per[]. Returns 0, or the exit
 * status (a stall exits the process from here, 2; 3 a setup error). */
static int run_round(int n, double seconds, uint64_t seed, weft_time_t stall, long per[NKINDS])
{
	int ng = NKINDS * n, na = 0, alive;
	struct group *gs = calloc((size_t)ng, sizeof(*gs));
	struct arg *args = calloc((size_t)ng * RING, sizeof(*args));
	weft_time_t t0, end;

	if (!gs || !args)
		return 3;
	atomic_store(&stop, 0);
	t0 = weft_now_ns();
	end = t0 + (weft_time_t)(seconds * 1e9);
	for (int i = 0; i < ng; i++) {
		struct group *g = &gs[i];

		if (setup(g, i % NKINDS, i / NKINDS, seed) != 0) {
			fprintf(stderr, "soak: setup of group %d failed\n", i);
			return 3;
		}
		for (int k = 0; k < g->nthreads; k++) {
			weft_attr_t a;

			weft_attr_init(&a);
			/* thread k of group idx on worker idx + k: neighbours
			 * in a group sit on different workers */
			a.worker = (g->idx + k) % n;
			args[na] = (struct arg){ g, k };
			if (weft_spawn(&g->th[k], finish_wrap, &args[na], &a) != 0) {
				fprintf(stderr, "soak: spawn failed\n");
				return 3;
			}
			na++;
		}
		if (g->kind == K_PARK) {
			atomic_store(&g->go, 1);
			weft_unpark(g->th[0]);
			weft_unpark(g->th[1]);
		}
	}
	/* Watchdog: the deadline, then until every thread has finished. A
	 * group with live threads whose count has not moved for the stall
	 * time hangs (a lost wakeup), also while the others keep going. The
	 * poll is 100 ms, or a tenth of a short round. */
	for (int i = 0; i < ng; i++) {
		gs[i].last = -1;
		gs[i].last_move = t0;
	}
	for (;;) {
		long ns = seconds < 1 ? (long)(seconds * 1e8) + 100000 : 100000000;
		struct timespec ts = { 0, ns };
		weft_time_t now;

		nanosleep(&ts, NULL);
		now = weft_now_ns();
		if (now >= end)
			atomic_store(&stop, 1);
		alive = 0;
		for (int i = 0; i < ng; i++) {
			struct group *g = &gs[i];
			int left = g->nthreads - atomic_load(&g->finished);
			long p = atomic_load_explicit(&g->progress, memory_order_relaxed);

			alive += left;
			if (p != g->last) {
				g->last = p;
				g->last_move = now;
			}
			if (left && now - g->last_move > stall) {
				fprintf(stderr, "soak: STALL: %s[%d] made no progress for %.0f s "
					"(%d of its threads alive)%s\n", kind_name[g->kind], g->idx,
					(double)stall / 1e9, left,
					atomic_load(&stop) ? ", after the stop" : "");
				print_groups(gs, ng);
				fflush(stderr);
				/* where every thread waits, and each worker's state */
				weft_dump(2);
				_exit(2);
			}
		}
		if (!alive)
			break;
	}
	for (int i = 0; i < ng; i++)
		for (int k = 0; k < gs[i].nthreads; k++)
			weft_join(gs[i].th[k], NULL);
	for (int i = 0; i < ng; i++) {
		check(&gs[i]);
		per[gs[i].kind] += atomic_load(&gs[i].progress);
	}
	free(args);
	free(gs);
	return 0;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? strtod(argv[1], NULL) : 10;
	uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 0) : (uint64_t)time(NULL);
	const char *rs = getenv("SOAK_ROUNDS");
	int rounds = rs ? atoi(rs) : 1;
	weft_stats_t s0, s1;
	weft_time_t t0, stall;
	long handoffs = 0, per[NKINDS] = { 0 };
	uint64_t wakes;
	double secs;
	int n, rc;

	stall = (weft_time_t)((getenv("SOAK_STALL") ? atof(getenv("SOAK_STALL")) : STALL_SECONDS) *
			      1e9);
	if (rounds < 1 || !(seconds > 0)) {
		fprintf(stderr, "soak: usage: [SOAK_ROUNDS=R] soak_wake SECONDS [SEED] "
			"(SECONDS > 0, R >= 1)\n");
		return 3;
	}
	if (weft_init(NULL) != 0) {
		fprintf(stderr, "soak: weft_init failed\n");
		return 3;
	}
	n = weft_workers();
	printf("soak: %d workers, %d groups, %.0f s", n, NKINDS * n, seconds);
	if (rounds > 1)
		printf(" in %d rounds", rounds);
	printf(", seed=%" PRIu64 "\n", seed);
	fflush(stdout);
	weft_stats_get(&s0);
	t0 = weft_now_ns();
	for (int r = 0; r < rounds; r++)
		if ((rc = run_round(n, seconds / rounds, seed + (uint64_t)r, stall, per)) != 0)
			return rc;
	weft_stats_get(&s1);
	printf("soak: operations:");
	for (int k = 0; k < NKINDS; k++) {
		printf(" %s %ld", kind_name[k], per[k]);
		handoffs += per[k];
	}
	printf("\n");
	secs = (double)(weft_now_ns() - t0) / 1e9;
	wakes = (s1.wakes_remote - s0.wakes_remote) + (s1.wakes_local - s0.wakes_local) +
		(s1.wakes_locked - s0.wakes_locked);
	printf("soak: %.1f s, %" PRIu64 " wakes (%.0f/s; remote %" PRIu64 ", local %" PRIu64
	       ", locked %" PRIu64 "), kicks %" PRIu64 ", %ld operations checked, errors %ld\n",
	       secs, wakes, (double)wakes / secs, s1.wakes_remote - s0.wakes_remote,
	       s1.wakes_local - s0.wakes_local, s1.wakes_locked - s0.wakes_locked,
	       s1.kicks - s0.kicks, handoffs, atomic_load(&errors));
	weft_shutdown();
	return atomic_load(&errors) ? 1 : 0;
}
