# examples/: benchmarks, each with its kernel (pthread) baseline in the same binary.
EX_CFLAGS = $(AM_CFLAGS)
EX_LDADD = libweft.la -lpthread -lm

noinst_PROGRAMS += examples/weft-micro
examples_weft_micro_SOURCES = examples/weft-micro.c examples/bench.h examples/bench_weft.h
examples_weft_micro_CFLAGS = $(EX_CFLAGS)
examples_weft_micro_LDADD = $(EX_LDADD)

dist_noinst_SCRIPTS += examples/run-seeds.sh

# make bench (Makefile.am): the runner, its plots, and the comparison of two
# report directories
dist_noinst_SCRIPTS += examples/bench-report.sh examples/bench-plot.sh examples/compare.sh

include examples/seeds.mk
include examples/io.mk
include examples/chan.mk
include examples/wake.mk
include examples/gang.mk

noinst_PROGRAMS += examples/sync-micro
examples_sync_micro_SOURCES = examples/sync-micro.c examples/bench.h examples/bench_weft.h
examples_sync_micro_CFLAGS = $(EX_CFLAGS)
examples_sync_micro_LDADD = $(EX_LDADD)

noinst_PROGRAMS += examples/million
examples_million_SOURCES = examples/million.c examples/bench.h examples/bench_weft.h
examples_million_CFLAGS = $(EX_CFLAGS)
examples_million_LDADD = $(EX_LDADD)
