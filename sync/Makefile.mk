# sync/: synchronisation primitives and channels (their waiters are
# runtime/waiter.c); the LD_PRELOAD library is sync/preload/Makefile.mk.
libweft_la_SOURCES += \
	sync/barrier.c \
	sync/chan.c \
	sync/cond.c \
	sync/mutex.c \
	sync/once.c \
	sync/rwlock.c \
	sync/sem.c \
	sync/slock.c \
	sync/waitgroup.c \
	sync/wake_q.c

noinst_HEADERS += \
	sync/mutex.h \
	sync/slock.h \
	sync/waitq.h

weftinclude_HEADERS += \
	include/weft/chan.h \
	include/weft/sync.h
