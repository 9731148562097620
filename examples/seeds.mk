# seed benchmarks: sembench, test-mutex (issue 3). Each binary carries its
# kernel/pthread baseline; examples/run-seeds.sh runs them side by side.
noinst_PROGRAMS += examples/sembench examples/test-mutex

examples_sembench_SOURCES = examples/sembench.c examples/bench.h
examples_sembench_CFLAGS = $(EX_CFLAGS)
examples_sembench_LDADD = $(EX_LDADD)

examples_test_mutex_SOURCES = examples/test-mutex.c examples/bench.h
examples_test_mutex_CFLAGS = $(EX_CFLAGS)
examples_test_mutex_LDADD = $(EX_LDADD)
