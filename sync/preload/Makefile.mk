# sync/preload/: libweft-preload.so, weft's locks for unmodified programs
# (LD_PRELOAD drop-in for pthread mutex/cond/rwlock/spin/barrier/sem and C11
# mtx/cnd; docs/preload.md). No version script: unversioned definitions
# bind every versioned reference. -fexceptions: cancellation in a cond or
# sem wait unwinds through our frames and runs our cleanup. The NULL
# checks on glibc's nonnull arguments stay (bad input gives EINVAL).
lib_LTLIBRARIES += libweft-preload.la
libweft_preload_la_SOURCES = \
	sync/preload/preload.h \
	sync/preload/core.c \
	sync/preload/mutex.c \
	sync/preload/cond.c \
	sync/preload/rwlock.c \
	sync/preload/other.c
libweft_preload_la_CFLAGS = $(WEFT_CFLAGS) -fexceptions -Wno-nonnull-compare \
	-fno-delete-null-pointer-checks
libweft_preload_la_LIBADD = -ldl -lpthread
libweft_preload_la_LDFLAGS = -avoid-version

# Tests: the conformance suite links libweft-preload.so (before libc in the
# lookup order, as under LD_PRELOAD); preload_peer is the glibc-only side of
# its process-shared test. The scripts run real binaries under LD_PRELOAD.
check_PROGRAMS += tests/check_preload tests/preload_peer
TESTS += tests/check_preload
tests_check_preload_SOURCES = tests/check_preload.c
tests_check_preload_CFLAGS = $(WEFT_CFLAGS) $(CHECK_CFLAGS)
tests_check_preload_LDADD = libweft-preload.la $(CHECK_LIBS) -lpthread
# the pshared test runs the peer: building the suite builds the peer, so
# that "make tests/check_preload && tests/check_preload" has it too
EXTRA_tests_check_preload_DEPENDENCIES = tests/preload_peer$(EXEEXT)
tests_preload_peer_SOURCES = tests/preload_peer.c
tests_preload_peer_CFLAGS = $(WEFT_CFLAGS)
tests_preload_peer_LDADD = -lpthread
TESTS += tests/check_preload_symbols.sh
dist_check_SCRIPTS += tests/check_preload_symbols.sh
check_PROGRAMS += tests/stress_preload
TESTS += tests/stress_preload
tests_stress_preload_SOURCES = tests/stress_preload.c
tests_stress_preload_CFLAGS = $(WEFT_CFLAGS)
tests_stress_preload_LDADD = libweft-preload.la -lpthread
TESTS += tests/check_preload_cxx.sh tests/check_preload_jemalloc.sh
dist_check_SCRIPTS += tests/check_preload_cxx.sh tests/check_preload_jemalloc.sh
dist_noinst_SCRIPTS += examples/run-preload.sh
dist_man_MANS += man/weft-preload.7
EXTRA_DIST += docs/preload.md
