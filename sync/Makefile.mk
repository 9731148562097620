# sync/: synchronisation primitives (their waiters are runtime/waiter.c).
include sync/prims.mk
include sync/chan.mk
