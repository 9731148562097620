/*
 * runtime/os_policy.h - the kernel scheduling policy of the runtime's OS
 * threads (runtime/os_policy.c).
 */
#ifndef WFT_OS_POLICY_H
#define WFT_OS_POLICY_H

/* weft_init, before any runtime thread starts: note the policy the
 * runtime's threads inherit from the caller. */
void wft_os_policy_note(void);
/* A worker thread at start: SCHED_BATCH where WORKER_BATCH applies. */
void wft_os_policy_worker(void);
/* Any other runtime thread at start (offload helpers, the poller, the gang
 * ticker), which may have been created by a worker: back to the policy
 * weft_init's caller had. */
void wft_os_policy_helper(void);

#endif
