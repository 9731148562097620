# sync primitives (issue 3): mutex, cond, sem, wake queues, rwlock, barrier, once, wait group.
libweft_la_SOURCES += \
	sync/barrier.c \
	sync/cond.c \
	sync/mutex.c \
	sync/once.c \
	sync/rwlock.c \
	sync/sem.c \
	sync/waitgroup.c \
	sync/wake_q.c

noinst_HEADERS += \
	sync/mutex.h \
	sync/waitq.h

weftinclude_HEADERS += \
	include/weft/sync.h
