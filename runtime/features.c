/*
 * runtime/features.c - WEFT_FEATURES parsing (see runtime/features.def).
 *
 * The mask is written once by weft_init() before any worker exists and
 * never while the runtime runs (pthread_create orders the store before the
 * workers' reads), so wft_feat() is a plain load.
 */
#include "runtime/features.h"
#include "runtime/init.h"

#include <string.h>
#include <strings.h>

uint64_t wft_features;

static const struct {
	const char *name;
	int def;
	const char *why;
} feats[] = {
#define WFT_FEAT(name, def, why) { #name, def, why },
#include "runtime/features.def"
#undef WFT_FEAT
};

uint64_t wft_features_default(void)
{
	uint64_t m = 0;

	for (unsigned i = 0; i < WFT_FEAT_COUNT; i++)
		if (feats[i].def)
			m |= 1ull << i;
	return m;
}

int wft_features_parse(const char *s, const char *origin, uint64_t *mask)
{
	uint64_t m = *mask;

	while (s && *s) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		int on = 1;
		unsigned i;
		const char *tok;
		size_t toklen;

		while (len && (*s == ' ' || *s == '\t')) {
			s++;
			len--;
		}
		tok = s;          /* as written, for the message */
		toklen = len;
		if (len >= 3 && strncasecmp(s, "NO_", 3) == 0) {
			on = 0;
			s += 3;
			len -= 3;
		}
		if (len) {
			for (i = 0; i < WFT_FEAT_COUNT; i++)
				if (strlen(feats[i].name) == len && strncasecmp(feats[i].name, s, len) == 0)
					break;
			if (i == WFT_FEAT_COUNT) {
				fprintf(stderr, "weft: unknown feature '%.*s' in %s; known:", (int)toklen, tok,
					origin);
				for (i = 0; i < WFT_FEAT_COUNT; i++)
					fprintf(stderr, " %s", feats[i].name);
				fprintf(stderr, "\n");
				return EINVAL;
			}
			if (on)
				m |= 1ull << i;
			else
				m &= ~(1ull << i);
		}
		s += len;
		if (*s == ',')
			s++;
	}
	*mask = m;
	return 0;
}

int weft_feature(const char *name)
{
	if (!name)
		return -1;
	for (unsigned i = 0; i < WFT_FEAT_COUNT; i++)
		if (strcasecmp(feats[i].name, name) == 0) {
			/* before the first init the defaults apply */
			uint64_t m = atomic_load_explicit(&wft_rt.state, memory_order_acquire) != WFT_RT_STOPPED ?
				     wft_features : wft_features_default();

			return (int)((m >> i) & 1);
		}
	return -1;
}
