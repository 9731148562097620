# runtime/: the scheduler core, I/O (per-worker io_uring, the offload pool
# and the fallback poller) and diagnostics (signal masks, the stack
# overflow report, the thread dump, fork handling).
libweft_la_SOURCES += \
	runtime/clock.c \
	runtime/context.c \
	runtime/drain.c \
	runtime/dump.c \
	runtime/env.c \
	runtime/fault.c \
	runtime/features.c \
	runtime/futex.c \
	runtime/gang.c \
	runtime/idle.c \
	runtime/init.c \
	runtime/io.c \
	runtime/key.c \
	runtime/mailbox.c \
	runtime/offload.c \
	runtime/os_policy.c \
	runtime/runq.c \
	runtime/segv.c \
	runtime/stack.c \
	runtime/stats.c \
	runtime/tcb.c \
	runtime/thread.c \
	runtime/timer.c \
	runtime/topology.c \
	runtime/uring.c \
	runtime/waiter.c \
	runtime/wake.c \
	runtime/worker.c

if CTX_X86_64
libweft_la_SOURCES += runtime/context_x86_64.S
endif
if CTX_AARCH64
libweft_la_SOURCES += runtime/context_aarch64.S runtime/context_aarch64_make.c
endif
if CTX_UCONTEXT
libweft_la_SOURCES += runtime/context_ucontext.c
endif

noinst_HEADERS += \
	runtime/atomic.h \
	runtime/clock.h \
	runtime/context.h \
	runtime/context_aarch64.h \
	runtime/context_ucontext.h \
	runtime/context_x86_64.h \
	runtime/diag.h \
	runtime/drain.h \
	runtime/env.h \
	runtime/fault.h \
	runtime/features.h \
	runtime/futex.h \
	runtime/gang.h \
	runtime/idle.h \
	runtime/init.h \
	runtime/key.h \
	runtime/list.h \
	runtime/mailbox.h \
	runtime/os_policy.h \
	runtime/panic.h \
	runtime/runq.h \
	runtime/runq_owner.h \
	runtime/sanitizer.h \
	runtime/stack.h \
	runtime/stats.h \
	runtime/tcb.h \
	runtime/thread.h \
	runtime/timer.h \
	runtime/topology.h \
	runtime/uring.h \
	runtime/waiter.h \
	runtime/wake.h \
	runtime/wft.h \
	runtime/worker.h

EXTRA_DIST += runtime/features.def runtime/stats.def \
	runtime/context_x86_64.S runtime/context_aarch64.S runtime/context_aarch64_make.c runtime/context_ucontext.c

weftinclude_HEADERS += \
	include/weft/common.h \
	include/weft/gang.h \
	include/weft/io.h \
	include/weft/stats.h \
	include/weft/thread.h
