# channel benchmarks (issue 3): perf bench sched pipe and the
# stage pipeline (docs/seeds.md), each with its pthread baseline in the same binary.
noinst_PROGRAMS += examples/pipe-bench examples/pipeline
examples_pipe_bench_SOURCES = examples/pipe-bench.c
examples_pipe_bench_CFLAGS = $(EX_CFLAGS)
examples_pipe_bench_LDADD = $(EX_LDADD)
examples_pipeline_SOURCES = examples/pipeline.c
examples_pipeline_CFLAGS = $(EX_CFLAGS)
examples_pipeline_LDADD = $(EX_LDADD)
