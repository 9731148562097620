# Gang scheduling benchmark (issue 16, seed 004): BSP and ebizzy-like
# workloads with GANG on, GANG off and a pthread baseline in one binary.
noinst_PROGRAMS += examples/gang
examples_gang_SOURCES = examples/gang.c examples/bench.h
examples_gang_CFLAGS = $(EX_CFLAGS)
examples_gang_LDADD = $(EX_LDADD)
