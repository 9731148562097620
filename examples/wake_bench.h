/*
 * examples/wake_bench.h - what the wake-path benchmarks (examples/dispatcher,
 * examples/hackbench) share: starting the runtime with a readable failure
 * when WEFT_FEATURES names a switch this build does not have, and the
 * scheduler counters of a measured window, read in-process.
 *
 * Counters: kicks, local/remote wakes and steals are fields of
 * weft_stats_t (ABI, stable). A build may also count chained kicks (a
 * worker that woke and found surplus work waking the next one); there is
 * no field for that in every build, so it is found by name in the
 * weft_stats_print() table: the line whose description mentions "chain"
 * (preferring one that also says "kick"). Absent: printed as "-".
 *
 * Header only, `static inline`, names carry the `wake_bench_` prefix.
 */
#ifndef WEFT_EXAMPLES_WAKE_BENCH_H
#define WEFT_EXAMPLES_WAKE_BENCH_H

#include "examples/bench.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft.h>

/* Exit status of a benchmark whose WEFT_FEATURES names a switch this build
 * does not know: the scripts print "switch not available" and go on. */
#define WAKE_BENCH_NO_FEATURE 3

/* Start the runtime (WEFT_WORKERS and the other variables apply). On an
 * unknown feature name, say so and exit(WAKE_BENCH_NO_FEATURE); on any
 * other failure exit(1). Context: OS thread. */
static inline void wake_bench_start(const char *prog)
{
	int rc = weft_init(NULL);
	const char *feat = getenv("WEFT_FEATURES");

	if (rc == 0)
		return;
	if (rc == EINVAL && feat && *feat) {
		fprintf(stderr,
			"%s: WEFT_FEATURES=%s: a feature switch is not available in this build "
			"(weft_init: %s)\n", prog, feat, strerror(rc));
		exit(WAKE_BENCH_NO_FEATURE);
	}
	fprintf(stderr, "%s: weft_init: %s\n", prog, strerror(rc));
	exit(1);
}

/* "on", "off" or "-" (unknown in this build, or runtime not running). */
static inline const char *wake_bench_feature(const char *name)
{
	int v = weft_workers() > 0 ? weft_feature(name) : -1;

	return v < 0 ? "-" : v ? "on" : "off";
}

struct wake_bench_stats {
	uint64_t kicks;  /* worker wake syscalls */
	uint64_t wakes;  /* local + remote (mailbox) + remote (locked) */
	uint64_t remote; /* remote wakes, both kinds */
	uint64_t steals;
	uint64_t chain;  /* chained kicks, if have_chain */
	bool have_chain;
};

/* The chained-kick counter from the printed table, by name; false if this
 * build has none. */
static inline bool wake_bench_chain(uint64_t *v)
{
	char *text = NULL, *line, *save = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	bool found = false, kick = false;

	if (!f)
		return false;
	weft_stats_print(f);
	fclose(f);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *end;
		unsigned long long n;

		while (isspace((unsigned char)*line))
			line++;
		if (!isdigit((unsigned char)*line))
			continue;
		n = strtoull(line, &end, 10);
		if (!strstr(end, "chain"))
			continue;
		/* first "chain" line, replaced by one that also names kicks */
		if (!found || (!kick && strstr(end, "kick"))) {
			*v = n;
			kick = strstr(end, "kick") != NULL;
			found = true;
		}
	}
	free(text);
	return found;
}

/* Snapshot the counters (all zero when the runtime is not running). */
static inline void wake_bench_snap(struct wake_bench_stats *s)
{
	weft_stats_t st;

	memset(s, 0, sizeof(*s));
	if (weft_workers() <= 0 || weft_stats_get(&st) != 0)
		return;
	s->kicks = st.kicks;
	s->remote = st.wakes_remote + st.wakes_locked;
	s->wakes = st.wakes_local + s->remote;
	s->steals = st.steals;
	s->have_chain = wake_bench_chain(&s->chain);
}

/* *d = b - a. */
static inline void wake_bench_delta(struct wake_bench_stats *d, const struct wake_bench_stats *a,
				    const struct wake_bench_stats *b)
{
	d->kicks = b->kicks - a->kicks;
	d->wakes = b->wakes - a->wakes;
	d->remote = b->remote - a->remote;
	d->steals = b->steals - a->steals;
	d->have_chain = a->have_chain && b->have_chain;
	d->chain = d->have_chain ? b->chain - a->chain : 0;
}

/* x / y as "%.*f", or "-" when y is 0 or the figure does not apply (ok
 * false). buf must hold 32 bytes. */
static inline const char *wake_bench_ratio(char *buf, bool ok, double x, double y, int prec)
{
	if (!ok || y <= 0.0)
		return "-";
	snprintf(buf, 32, "%.*f", prec, x / y);
	return buf;
}

/* Append the derived counters to a key=value line:
 *   kicks_per_kwake= remote_per_OP= steals_per_OP= chain_per_kwake= wakes=
 * for `ops` operations (transactions, messages) called op. weft false
 * (pthread baseline): every figure is "-". */
static inline void wake_bench_keys(FILE *f, const struct wake_bench_stats *d, bool weft,
				   double ops, const char *op)
{
	char a[32], b[32], c[32], e[32];

	fprintf(f, " kicks_per_kwake=%s remote_per_%s=%s steals_per_%s=%s chain_per_kwake=%s",
		wake_bench_ratio(a, weft, 1000.0 * (double)d->kicks, (double)d->wakes, 2), op,
		wake_bench_ratio(b, weft, (double)d->remote, ops, 4), op,
		wake_bench_ratio(c, weft, (double)d->steals, ops, 4),
		wake_bench_ratio(e, weft && d->have_chain, 1000.0 * (double)d->chain,
				 (double)d->wakes, 2));
	if (weft)
		fprintf(f, " wakes=%llu", (unsigned long long)d->wakes);
	else
		fprintf(f, " wakes=-");
}

/* The same figures as rows of the human table. */
static inline void wake_bench_table(FILE *f, const struct wake_bench_stats *d, bool weft,
				    double ops, const char *op)
{
	char a[32], b[32], c[32], e[32];

	if (!weft) {
		fprintf(f, "  scheduler counters   - (pthread: the kernel schedules)\n");
		return;
	}
	fprintf(f, "  wakes                %llu\n", (unsigned long long)d->wakes);
	fprintf(f, "  kicks / 1000 wakes   %s\n",
		wake_bench_ratio(a, true, 1000.0 * (double)d->kicks, (double)d->wakes, 2));
	fprintf(f, "  remote wakes / %-5s %s\n", op,
		wake_bench_ratio(b, true, (double)d->remote, ops, 4));
	fprintf(f, "  steals / %-11s %s\n", op, wake_bench_ratio(c, true, (double)d->steals, ops, 4));
	fprintf(f, "  chain kicks / 1000   %s\n",
		wake_bench_ratio(e, d->have_chain, 1000.0 * (double)d->chain, (double)d->wakes, 2));
}

#endif
