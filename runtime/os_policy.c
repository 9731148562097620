/*
 * runtime/os_policy.c - the kernel scheduling policy of the runtime's OS
 * threads.
 *
 * With more workers than CPUs the workers take turns on the CPUs through
 * the kernel scheduler, and every kick makes a worker runnable while
 * others run. Under SCHED_OTHER the kernel lets a woken thread preempt
 * the running one (wakeup preemption, which favours threads that slept):
 * a kicked worker, or one whose park timed out, then displaces a worker
 * that is running light threads (two context switches that run nobody
 * sooner), or an OS thread of the program that feeds the runtime
 * (sembench's poster, a load generator). SCHED_BATCH keeps everything
 * else about the fair class (the share, the nice value) but a woken
 * SCHED_BATCH thread never preempts: it runs when the current thread's
 * turn ends (checked at the scheduler tick) or when it blocks. That is
 * the Kick gate's rule (runtime/idle.c: a kick waits for a CPU to free)
 * carried into the kernel, for the kicks the gate lets through and for
 * the workers' own timeouts. Only the woken thread's policy matters: a
 * SCHED_OTHER thread (the program's own, another program's) that wakes
 * still preempts a worker.
 *
 * The price, where it applies: a woken worker also waits behind other
 * programs' threads, and a worker's park timeout (a timer due, the idle
 * tick) may run up to a scheduler tick late while its CPU is busy, or
 * later next to other programs' CPU hogs (docs/tuning.md has the
 * measurement). That is why WORKER_BATCH is off by default: it is for
 * oversubscribed runs that own their CPUs.
 * With no more workers than CPUs a kicked worker usually finds its CPU
 * free, and a busy CPU is another program's: there that wait would be
 * latency the user did not ask for, so the policy stays as inherited
 * even with the switch on. "More
 * workers than CPUs" is the kick gate's test: CPUs in the initialising
 * thread's affinity mask at weft_init (a cgroup CPU quota is not seen).
 *
 * Only a SCHED_OTHER inheritance is changed: a program that runs weft
 * under another policy (real-time, SCHED_IDLE, batch already) chose it.
 * The runtime's other threads (offload helpers, the poller, the gang
 * ticker) may be created by a worker and would inherit its SCHED_BATCH;
 * they go back to the initialiser's policy, since their wakes are the
 * runtime's news of work and should not wait for a turn. Threads and
 * processes the program creates from a weft thread inherit SCHED_BATCH
 * (docs/tuning.md, WORKER_BATCH). Cost: a syscall or two per runtime
 * thread at start; nothing per wake. A failure (a seccomp filter that
 * refuses the call) leaves the inherited policy: a cost in speed, not in
 * correctness. Figures: docs/wake-path.md "Kernel policy of
 * oversubscribed workers".
 */
#include "runtime/os_policy.h"
#include "runtime/features.h"
#include "runtime/init.h"

#include <sched.h>

/* weft_init's caller's policy; written before the runtime's threads are
 * created (pthread_create orders it before their reads) */
static int init_policy = -1;

void wft_os_policy_note(void)
{
	init_policy = sched_getscheduler(0);
}

/* Do the workers of this runtime run SCHED_BATCH in place of the
 * caller's SCHED_OTHER? */
static bool batch_applies(void)
{
	return wft_feat(WORKER_BATCH) && wft_rt.nworkers > wft_rt.ncpu &&
	       init_policy == SCHED_OTHER;
}

void wft_os_policy_worker(void)
{
	struct sched_param sp = { .sched_priority = 0 };

	if (batch_applies() && sched_getscheduler(0) == SCHED_OTHER)
		(void)sched_setscheduler(0, SCHED_BATCH, &sp);   /* failure: see above */
}

void wft_os_policy_helper(void)
{
	struct sched_param sp = { .sched_priority = 0 };

	/* BATCH to OTHER needs no privilege */
	if (batch_applies() && sched_getscheduler(0) == SCHED_BATCH)
		(void)sched_setscheduler(0, SCHED_OTHER, &sp);
}
