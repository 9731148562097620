/*
 * runtime/topology.c - the worker domains: which workers share a
 * last-level cache, and which caches share a package.
 *
 * What it owns: wft_topo (runtime/topology.h), built once at weft_init.
 *
 * Why: a thread that moves between two workers of one LLC finds its lines
 * in the shared cache; between packages it pulls them across the
 * interconnect. So stealing looks inside the thief's domain first, and
 * wake placement looks for an awake worker in the wakee's domain first
 * (the kernel's sched domains, in the two levels that matter to a user
 * space scheduler; runtime/idle.c and runtime/wake.c use them).
 *
 * Sources, in order:
 *   1. WEFT_TOPOLOGY: "LxW" = L domains of W workers, "PxLxW" = P packages
 *      of L domains of W workers; workers are numbered domain by domain
 *      (worker i is in domain i / W). The product must equal the number of
 *      workers. This lets the tests on a 2-CPU machine run 16 workers as
 *      "4x4" and check that the domain rules hold.
 *   2. sysfs, when the workers are pinned (WEFT_PIN / weft_config_t.pin),
 *      so that worker i stays on CPU cpus[i]: the LLC of a CPU is its
 *      highest-level cache (/sys/devices/system/cpu/cpuN/cache/indexK/
 *      level, shared_cpu_list: the domain key is the first CPU of the
 *      list), its package topology/physical_package_id.
 *   3. Otherwise one flat domain: unpinned workers move between CPUs at the
 *      kernel's will, so no cache is theirs.
 * A sysfs file that is missing or unreadable leaves that CPU in a domain of
 * its own key (-1: all such CPUs together), never an error.
 */
#include "runtime/wft.h"
#include "runtime/topology.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct wft_topology wft_topo;

/* First integer in a sysfs file (a number or a CPU list), or -1. */
static long sysfs_first_int(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* The LLC key of a CPU: the first CPU sharing its highest-level cache. */
static long cpu_llc_key(int cpu)
{
	char path[128];
	long best_level = -1, key = -1;

	for (int k = 0; k < 16; k++) {
		long level;

		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/cache/index%d/level", cpu, k);
		level = sysfs_first_int(path);
		if (level < 0)
			break;
		if (level > best_level) {
			snprintf(path, sizeof(path),
				 "/sys/devices/system/cpu/cpu%d/cache/index%d/shared_cpu_list", cpu, k);
			best_level = level;
			key = sysfs_first_int(path);
		}
	}
	return key;
}

static long cpu_package(int cpu)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
	return sysfs_first_int(path);
}

/* Fill start[] and members[] from dom_of[] (ids ascending in each). */
static void build_members(int nworkers)
{
	int count[WEFT_WORKERS_MAX + 1] = { 0 };

	for (int i = 0; i < nworkers; i++)
		count[wft_topo.dom_of[i] + 1]++;
	wft_topo.start[0] = 0;
	for (int d = 0; d < wft_topo.ndom; d++)
		wft_topo.start[d + 1] = wft_topo.start[d] + count[d + 1];
	memset(count, 0, sizeof(count));
	for (int i = 0; i < nworkers; i++) {
		int d = wft_topo.dom_of[i];

		wft_topo.members[wft_topo.start[d] + count[d]++] = i;
	}
}

/* "LxW" or "PxLxW". Returns 0 or EINVAL. */
static int from_env(const char *e, int nworkers)
{
	long v[3];
	int n = 0;
	const char *p = e;

	while (n < 3) {
		char *end;

		if (*p < '1' || *p > '9')
			break;
		errno = 0;
		v[n] = strtol(p, &end, 10);
		if (errno || v[n] < 1 || v[n] > WEFT_WORKERS_MAX)
			break;
		n++;
		p = end;
		if (*p != 'x' || n == 3)
			break;
		p++;
		if (*p < '1' || *p > '9')
			n = 0;   /* "4x", "4x4x": an 'x' must be followed by a count */
	}
	if (*p != '\0' || n < 2) {
		fprintf(stderr, "weft: WEFT_TOPOLOGY=%s: expected LxW or PxLxW (domains x workers)\n", e);
		return EINVAL;
	}
	{
		long pk = n == 3 ? v[0] : 1, l = v[n - 2], w = v[n - 1];

		if (pk * l * w != nworkers) {
			fprintf(stderr, "weft: WEFT_TOPOLOGY=%s describes %ld workers, the runtime has %d\n",
				e, pk * l * w, nworkers);
			return EINVAL;
		}
		wft_topo.ndom = (int)(pk * l);
		for (int i = 0; i < nworkers; i++)
			wft_topo.dom_of[i] = (int)(i / w);
		for (int d = 0; d < wft_topo.ndom; d++)
			wft_topo.pkg_of[d] = (int)(d / l);
	}
	wft_topo.source = "WEFT_TOPOLOGY";
	return 0;
}

/* Group pinned workers by the LLC key of their CPU. */
static void from_sysfs(int nworkers, const int *cpus)
{
	long key[WEFT_WORKERS_MAX];

	wft_topo.ndom = 0;
	for (int i = 0; i < nworkers; i++) {
		long k = cpu_llc_key(cpus[i]);
		int d;

		for (d = 0; d < wft_topo.ndom; d++)
			if (key[d] == k)
				break;
		if (d == wft_topo.ndom) {
			key[d] = k;
			wft_topo.pkg_of[d] = (int)cpu_package(cpus[i]);
			wft_topo.ndom++;
		}
		wft_topo.dom_of[i] = d;
	}
	wft_topo.source = "sysfs";
}

int wft_topology_init(int nworkers, int pinned, const int *cpus)
{
	const char *e = getenv("WEFT_TOPOLOGY");

	memset(wft_topo.dom_of, 0, sizeof(wft_topo.dom_of));
	memset(wft_topo.pkg_of, 0, sizeof(wft_topo.pkg_of));
	for (int d = 0; d < WEFT_WORKERS_MAX; d++)
		/* relaxed: no worker runs yet; starting them orders this */
		atomic_store_explicit(&wft_topo.spinner[d].id, 0, memory_order_relaxed);
	wft_topo.ndom = 1;
	wft_topo.source = "flat";
	if (e && *e) {
		int rc = from_env(e, nworkers);

		if (rc)
			return rc;
	} else if (pinned) {
		from_sysfs(nworkers, cpus);
	}
	build_members(nworkers);
	return 0;
}

void wft_topology_print(FILE *f)
{
	fprintf(f, "weft: topology (%s): %d LLC domain%s\n", wft_topo.source, wft_topo.ndom,
		wft_topo.ndom == 1 ? "" : "s");
	for (int d = 0; d < wft_topo.ndom; d++) {
		fprintf(f, "  domain %d (package %d): workers", d, wft_topo.pkg_of[d]);
		for (int k = wft_topo.start[d]; k < wft_topo.start[d + 1]; k++)
			fprintf(f, " %d", wft_topo.members[k]);
		fputc('\n', f);
	}
}
