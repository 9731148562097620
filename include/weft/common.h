/*
 * weft/common.h - definitions shared by every public weft header.
 */
#ifndef WEFT_COMMON_H
#define WEFT_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define WEFT_EXTERN_C_BEGIN extern "C" {
#define WEFT_EXTERN_C_END }
#else
#define WEFT_EXTERN_C_BEGIN
#define WEFT_EXTERN_C_END
#endif

/* Marks an exported symbol; everything else is hidden (-fvisibility=hidden + weft.map). */
#define WEFT_API __attribute__((visibility("default")))

/* Absolute times are CLOCK_MONOTONIC nanoseconds (see weft_now_ns()). */
typedef uint64_t weft_time_t;

/* Deadline meaning "no deadline". */
#define WEFT_TIME_INFINITE UINT64_MAX

#endif
