# I/O examples and benchmarks (issue 4): thread-per-connection servers with
# their pthread (and epoll) baselines in the same binary, a ping-pong client,
# and the wrk-vs-nginx script.
noinst_PROGRAMS += examples/http-server examples/echo-server examples/echo-client \
	examples/kick-pingpong

examples_http_server_SOURCES = examples/http-server.c examples/conn_server.h \
	examples/bench.h examples/bench_weft.h
examples_http_server_CFLAGS = $(EX_CFLAGS)
examples_http_server_LDADD = $(EX_LDADD)

examples_echo_server_SOURCES = examples/echo-server.c examples/conn_server.h \
	examples/bench.h examples/bench_weft.h
examples_echo_server_CFLAGS = $(EX_CFLAGS)
examples_echo_server_LDADD = $(EX_LDADD)

examples_echo_client_SOURCES = examples/echo-client.c
examples_echo_client_CFLAGS = $(EX_CFLAGS)
examples_echo_client_LDADD = -lpthread

examples_kick_pingpong_SOURCES = examples/kick-pingpong.c
examples_kick_pingpong_CFLAGS = $(EX_CFLAGS)
examples_kick_pingpong_LDADD = $(EX_LDADD)

dist_noinst_SCRIPTS += examples/run-http.sh
