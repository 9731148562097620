# sync/: waiters and synchronisation primitives.
libweft_la_SOURCES += \
	sync/parking.c

include sync/prims.mk
include sync/chan.mk
