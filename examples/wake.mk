# wake-path benchmarks (issue 14): the pgbench-shaped dispatcher and
# hackbench (perf bench sched messaging), each with its pthread baseline in
# the same binary, and scale.sh, which runs them with sembench and
# weft-micro over worker counts.
noinst_PROGRAMS += examples/dispatcher examples/hackbench

examples_dispatcher_SOURCES = examples/dispatcher.c examples/wake_bench.h examples/bench.h
examples_dispatcher_CFLAGS = $(EX_CFLAGS)
examples_dispatcher_LDADD = $(EX_LDADD)

examples_hackbench_SOURCES = examples/hackbench.c examples/wake_bench.h examples/bench.h
examples_hackbench_CFLAGS = $(EX_CFLAGS)
examples_hackbench_LDADD = $(EX_LDADD)

dist_noinst_SCRIPTS += examples/scale.sh
