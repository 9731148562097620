#!/bin/sh
# Run the io suite on the fallback path: no io_uring, blocking calls go
# through the offload pool and the fallback poller (runtime/offload.c).
# Then the I/O stress test on the same path, with a 1 s budget per
# configuration (about 3 s; WEFT_STRESS_SECONDS in the environment wins),
# so the fallback's timeouts racing readiness are stressed too.
# The io/refusals tcase (tagged uring_refusals) is left out: it tests
# io_uring's own fallbacks and turns URING back on, so here it would only
# repeat the plain run of check_io.
# Run from the top build directory (automake's test harness does).
WEFT_FEATURES=NO_URING
export WEFT_FEATURES
CK_EXCLUDE_TAGS=${CK_EXCLUDE_TAGS:-uring_refusals}
export CK_EXCLUDE_TAGS
./tests/check_io "$@" || exit $?
WEFT_STRESS_SECONDS=${WEFT_STRESS_SECONDS:-1} exec ./tests/stress_io
