/*
 * runtime/env.c - strict parsing of the numeric WEFT_* environment
 * variables.
 *
 * Every numeric variable goes through these parsers: digits only, a size
 * suffix where sizes are meant, the range checked after scaling, and
 * overflow refused. Anything else is EINVAL with a message naming the
 * variable, so that a typo (WEFT_WORKERS=2abc) or an overflowing size
 * (WEFT_STACK_SIZE=17592186044417m, 2^64 + 1 MiB) is reported rather than
 * read as a prefix (2) or wrapped (1 MiB), as atoi and strtoull with an
 * unchecked shift did.
 */
#include "runtime/env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* strtoull accepts leading spaces and a sign: refuse them by requiring
 * the first character to be a digit. */
static bool parse_digits(const char *s, unsigned long long *v, const char **end)
{
	char *e;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	*v = strtoull(s, &e, 10);
	if (errno == ERANGE)
		return false;
	*end = e;
	return true;
}

bool wft_parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	unsigned long long v;
	const char *end;

	if (!parse_digits(s, &v, &end) || *end || v < min || v > max)
		return false;
	*out = (unsigned long)v;
	return true;
}

bool wft_parse_size(const char *s, size_t min, size_t max, size_t *out)
{
	unsigned long long v;
	const char *end;
	unsigned shift = 0;

	if (!parse_digits(s, &v, &end))
		return false;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		shift = 10;
		break;
	case 'm': case 'M':
		shift = 20;
		break;
	case 'g': case 'G':
		shift = 30;
		break;
	default:
		return false;
	}
	if (shift && end[1])
		return false;
	/* the scaled value must fit: v << shift overflows when v has any of
	 * its top shift bits set */
	if (shift && v > (~0ull >> shift))
		return false;
	v <<= shift;
	if (v < min || v > max || v > (size_t)-1)
		return false;
	*out = (size_t)v;
	return true;
}

int wft_env_ulong(const char *name, unsigned long min, unsigned long max, unsigned long *out)
{
	const char *e = getenv(name);

	if (!e || !*e)
		return 0;
	if (!wft_parse_ulong(e, min, max, out)) {
		fprintf(stderr, "weft: %s=%s is not a number in %lu..%lu\n", name, e, min, max);
		return EINVAL;
	}
	return 0;
}

int wft_env_size(const char *name, size_t min, size_t max, size_t *out)
{
	const char *e = getenv(name);

	if (!e || !*e)
		return 0;
	if (!wft_parse_size(e, min, max, out)) {
		fprintf(stderr, "weft: %s=%s is not a size in %zu..%zu bytes (digits, "
			"optional k, m or g suffix)\n", name, e, min, max);
		return EINVAL;
	}
	return 0;
}
