/*
 * runtime/topology.h - which workers share a last-level cache (LLC) and a
 * package: the domains that stealing and wake placement look at first.
 * Built once by wft_topology_init() (runtime/topology.c) before the workers
 * start, read-only afterwards except the per-domain spinner hints.
 */
#ifndef WEFT_RUNTIME_TOPOLOGY_H
#define WEFT_RUNTIME_TOPOLOGY_H

#include <stdatomic.h>
#include <stdio.h>
#include <weft.h>

struct wft_topology {
	int ndom;                          /* LLC domains (1: flat) */
	int dom_of[WEFT_WORKERS_MAX];      /* worker id -> its LLC domain */
	int pkg_of[WEFT_WORKERS_MAX];      /* LLC domain -> its package (or group) */
	/* the workers of domain d, in id order: members[start[d] .. start[d + 1]) */
	int start[WEFT_WORKERS_MAX + 1];
	int members[WEFT_WORKERS_MAX];
	const char *source;                /* "sysfs", "WEFT_TOPOLOGY" or "flat" */
	/* Per domain: 1 + the id of a worker that spins for work there, or 0.
	 * A hint for wake placement (runtime/wake.c): set when a worker takes a
	 * spinning slot, cleared by that worker when it stops (idle.c). Each on
	 * its own line: spinners of different domains write them. */
	struct {
		_Atomic int id;
	} __attribute__((aligned(64))) spinner[WEFT_WORKERS_MAX];
};
extern struct wft_topology wft_topo;

/* Build the domains for nworkers workers. Sources, first that applies:
 * WEFT_TOPOLOGY ("LxW": L domains of W workers; "PxLxW": P packages of L
 * domains of W workers; the product must be nworkers), else sysfs when the
 * workers are pinned (cpus[i] is worker i's CPU), else one flat domain.
 * Returns 0, or EINVAL for a malformed WEFT_TOPOLOGY (with a message on
 * stderr). Context: weft_init, before the workers start. */
int wft_topology_init(int nworkers, int pinned, const int *cpus);

/* Number of workers in domain dom. */
static inline int wft_topo_dom_size(int dom)
{
	return wft_topo.start[dom + 1] - wft_topo.start[dom];
}

/* Print the domains (one line each) to f: for WEFT_STATS and tests. */
void wft_topology_print(FILE *f);

#endif
