/*
 * examples/task_stat.h - one OS thread of this process, from /proc: its
 * name and the kernel's schedstat (time run on a CPU, and run delay: time
 * runnable but waiting for one; both in ns since the thread started).
 * Used by examples/sembench (where a run's time went), tests/check_io
 * (how long a worker waited for a CPU) and tests/check_wake (how long the
 * process's threads did).
 */
#ifndef WEFT_EXAMPLES_TASK_STAT_H
#define WEFT_EXAMPLES_TASK_STAT_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Thread tid (a name in /proc/self/task): comm[n] receives its name (""
 * if unreadable, no newline), *run and *wait its schedstat. Returns false
 * if the schedstat cannot be read (the thread exited, or the kernel has
 * no schedstats). Context: any OS thread. */
static inline bool task_stat(const char *tid, char *comm, size_t n, unsigned long long *run,
			     unsigned long long *wait)
{
	char path[300];
	FILE *f;
	int k;

	comm[0] = '\0';
	snprintf(path, sizeof(path), "/proc/self/task/%s/comm", tid);
	if ((f = fopen(path, "r"))) {
		if (!fgets(comm, (int)n, f))
			comm[0] = '\0';
		comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", tid);
	if (!(f = fopen(path, "r")))
		return false;
	k = fscanf(f, "%llu %llu", run, wait);
	fclose(f);
	return k == 2;
}

/* Run delay (ns) summed over this process's OS threads named comm (NULL:
 * all of them): the time they were runnable but waited for a CPU. 0 if
 * schedstat cannot be read. Context: any OS thread. */
static inline unsigned long long threads_cpu_wait_ns(const char *comm)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned long long wait = 0;

	while (d && (e = readdir(d)) != NULL) {
		char name[32];
		unsigned long long run, w;

		if (e->d_name[0] != '.' && task_stat(e->d_name, name, sizeof(name), &run, &w) &&
		    (!comm || strcmp(name, comm) == 0))
			wait += w;
	}
	if (d)
		closedir(d);
	return wait;
}

#endif
