# examples/: benchmarks, each with its kernel (pthread) baseline in the
# same binary, and the scripts that run them side by side. A program is
# examples/NAME, built from examples/NAME.c (automake's default source).
EX_LDADD = libweft.la -lpthread -lm

noinst_HEADERS += \
	examples/bench.h \
	examples/bench_weft.h \
	examples/conn_server.h \
	examples/http_response.h \
	examples/task_stat.h \
	examples/wake_bench.h

# Micro-benchmarks: the runtime's and the primitives' costs, a million
# threads.
noinst_PROGRAMS += examples/weft-micro examples/sync-micro examples/million
examples_weft_micro_LDADD = $(EX_LDADD)
examples_sync_micro_LDADD = $(EX_LDADD)
examples_million_LDADD = $(EX_LDADD)

# The seeds' experiments: semaphore wakeup storms (sembench) and lock
# hand-off (test-mutex), side by side with the kernel's by run-seeds.sh;
# the rwlock and cond benchmarks with their glibc baselines.
noinst_PROGRAMS += examples/sembench examples/test-mutex examples/rwlock-bench \
	examples/cond-bench
examples_sembench_LDADD = $(EX_LDADD)
examples_test_mutex_LDADD = $(EX_LDADD)
examples_rwlock_bench_LDADD = $(EX_LDADD)
examples_cond_bench_LDADD = $(EX_LDADD)
dist_noinst_SCRIPTS += examples/run-seeds.sh

# Channels: perf bench sched pipe and the stage pipeline.
noinst_PROGRAMS += examples/pipe-bench examples/pipeline
examples_pipe_bench_LDADD = $(EX_LDADD)
examples_pipeline_LDADD = $(EX_LDADD)

# I/O: thread-per-connection servers with their pthread (and epoll)
# baselines, a ping-pong client, the kick round trip, the wrk-vs-nginx
# script.
noinst_PROGRAMS += examples/http-server examples/echo-server examples/echo-client \
	examples/kick-pingpong
examples_http_server_LDADD = $(EX_LDADD)
examples_echo_server_LDADD = $(EX_LDADD)
examples_echo_client_LDADD = -lpthread
examples_kick_pingpong_LDADD = $(EX_LDADD)
dist_noinst_SCRIPTS += examples/run-http.sh examples/run-echo.sh
# nginx from a private prefix, sourced by run-http.sh and run-preload.sh
EXTRA_DIST += examples/nginx.sh examples/net.sh

# The wake path at scale: the pgbench-shaped dispatcher and hackbench (perf
# bench sched messaging); scale.sh runs them with sembench and weft-micro
# over worker counts.
noinst_PROGRAMS += examples/dispatcher examples/hackbench
examples_dispatcher_LDADD = $(EX_LDADD)
examples_hackbench_LDADD = $(EX_LDADD)
dist_noinst_SCRIPTS += examples/scale.sh

# Gang scheduling (seed 004): BSP and ebizzy-like workloads with GANG on,
# GANG off and a pthread baseline in one binary.
noinst_PROGRAMS += examples/gang
examples_gang_LDADD = $(EX_LDADD)

# make bench (Makefile.am): the runner, its plots, and the comparison of two
# report directories
dist_noinst_SCRIPTS += examples/bench-report.sh examples/bench-plot.sh examples/compare.sh
