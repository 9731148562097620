/*
 * runtime/env.h - strict parsing of the WEFT_* environment variables
 * (runtime/env.c).
 */
#ifndef WFT_ENV_H
#define WFT_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include <weft.h>

/* Largest stack size accepted anywhere (include/weft.h). */
#define WFT_STACK_MAX WEFT_STACK_MAX

/* Parse s as an unsigned decimal integer in [min, max]: digits only (no
 * sign, no spaces, no trailing characters), no overflow. Returns true and
 * *out, or false. */
bool wft_parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out);

/* Parse s as a size: decimal digits with an optional k/K (KiB), m/M (MiB)
 * or g/G (GiB) suffix, in [min, max] after scaling, without overflow.
 * Returns true and *out, or false. */
bool wft_parse_size(const char *s, size_t min, size_t max, size_t *out);

/* The environment variable name as an integer in [min, max]. Returns 0
 * (unset or empty: *out unchanged), or EINVAL after a message on stderr
 * naming the variable, its value and the accepted range. */
int wft_env_ulong(const char *name, unsigned long min, unsigned long max, unsigned long *out);

/* The same for a size (wft_parse_size). */
int wft_env_size(const char *name, size_t min, size_t max, size_t *out);

#endif
