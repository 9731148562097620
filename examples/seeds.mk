# seed benchmarks: sembench, test-mutex (issue 3). Each binary carries its
# kernel/pthread baseline; examples/run-seeds.sh runs them side by side.
noinst_PROGRAMS += examples/sembench examples/test-mutex

examples_sembench_SOURCES = examples/sembench.c examples/bench.h
examples_sembench_CFLAGS = $(EX_CFLAGS)
examples_sembench_LDADD = $(EX_LDADD)

examples_test_mutex_SOURCES = examples/test-mutex.c examples/bench.h
examples_test_mutex_CFLAGS = $(EX_CFLAGS)
examples_test_mutex_LDADD = $(EX_LDADD)

# lock benchmarks (issue 18): rwlock and cond, each with its glibc baseline
noinst_PROGRAMS += examples/rwlock-bench examples/cond-bench

examples_rwlock_bench_SOURCES = examples/rwlock-bench.c examples/bench.h examples/bench_weft.h
examples_rwlock_bench_CFLAGS = $(EX_CFLAGS)
examples_rwlock_bench_LDADD = $(EX_LDADD)

examples_cond_bench_SOURCES = examples/cond-bench.c examples/bench.h examples/bench_weft.h
examples_cond_bench_CFLAGS = $(EX_CFLAGS)
examples_cond_bench_LDADD = $(EX_LDADD)
