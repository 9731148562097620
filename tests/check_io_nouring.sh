#!/bin/sh
# Run the io suite on the fallback path: no io_uring, blocking calls go
# through the offload pool and the fallback poller (runtime/offload.c).
# Run from the top build directory (automake's test harness does).
WEFT_FEATURES=NO_URING
export WEFT_FEATURES
exec ./tests/check_io "$@"
