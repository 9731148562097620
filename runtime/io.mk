# runtime/ I/O layer (issue 4): per-worker io_uring (runtime/uring.c, listed
# in runtime/Makefile.mk), the weft_io_* calls, the offload pool and the
# no-io_uring fallback poller.
libweft_la_SOURCES += \
	runtime/io.c \
	runtime/offload.c

noinst_HEADERS += runtime/uring.h

weftinclude_HEADERS += include/weft/io.h
