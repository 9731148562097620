/*
 * runtime/wft.h - private umbrella header of the weft runtime.
 *
 * Includes the private header of every core module, so that a file that
 * includes it sees all of them. Each module's objects and internal calls
 * are declared in the header next to its .c file (runtime/thread.h for
 * runtime/thread.c, and so on), whose top comment says which concept it
 * holds; a file that needs only a few modules may include those headers
 * instead. runtime/panic.h, which every header builds on, holds the common
 * includes, the debug switch, wft_panic and WFT_ASSERT.
 *
 * Everything here is internal and named wft_* (the public API is weft_*).
 * Every internal call is declared in the header of the module that
 * defines it. Most are wft_<module>_<verb>() and are defined in
 * runtime/<module>.c or sync/<module>.c; the rest are named for what they
 * do, not for their module: the helpers every file uses (the clock
 * wft_now, the atomics of runtime/atomic.h, the stats macros, the wait
 * notes) and about twenty calls shared between a few modules (such as
 * wft_wait_off_cpu in worker.c, wft_parse_size in env.c, wft_lock_os_gen
 * in sync/mutex.c); their header says where each lives.
 * The I/O layer's header (runtime/uring.h, which needs liburing) and the
 * diagnostics (runtime/diag.h) are not included here.
 *
 * Contexts used in the function headers:
 *   any          - a weft thread, a worker's scheduler loop or a plain OS thread;
 *   weft thread  - code running on a light thread's stack;
 *   owner worker - the worker that owns the object, on its own OS thread;
 *   OS thread    - a thread that is not a weft thread.
 */
#ifndef WFT_H
#define WFT_H

#include "runtime/panic.h"

#include "runtime/clock.h"
#include "runtime/drain.h"
#include "runtime/fault.h"
#include "runtime/features.h"
#include "runtime/futex.h"
#include "runtime/gang.h"
#include "runtime/idle.h"
#include "runtime/init.h"
#include "runtime/key.h"
#include "runtime/list.h"
#include "runtime/mailbox.h"
#include "runtime/runq.h"
#include "runtime/stack.h"
#include "runtime/stats.h"
#include "runtime/tcb.h"
#include "runtime/thread.h"
#include "runtime/timer.h"
#include "runtime/waiter.h"
#include "runtime/wake.h"
#include "runtime/worker.h"

#endif
