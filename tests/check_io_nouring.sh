#!/bin/sh
# Run the io suite on the fallback path: no io_uring, blocking calls go
# through the offload pool and the fallback poller (runtime/offload.c).
# Then the I/O stress test on the same path, with a 1 s budget per
# configuration (about 3 s; WEFT_STRESS_SECONDS in the environment wins),
# so the fallback's timeouts racing readiness are stressed too.
# Run from the top build directory (automake's test harness does).
WEFT_FEATURES=NO_URING
export WEFT_FEATURES
./tests/check_io "$@" || exit $?
WEFT_STRESS_SECONDS=${WEFT_STRESS_SECONDS:-1} exec ./tests/stress_io
