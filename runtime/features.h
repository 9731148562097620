/*
 * runtime/features.h - the feature switches: one bit per entry of
 * runtime/features.def, the runtime's mask and wft_feat(); parsing and
 * defaults are in runtime/features.c.
 */
#ifndef WFT_FEATURES_H
#define WFT_FEATURES_H

#include "runtime/panic.h"

enum {
#define WFT_FEAT(name, def, why) WFT_FEAT_BIT_##name,
#include "runtime/features.def"
#undef WFT_FEAT
	WFT_FEAT_COUNT
};

/* Written once by weft_init() before any worker starts and never again while
 * the runtime runs, so a plain load is safe (the worker threads are created
 * after the store: pthread_create orders it). */
extern uint64_t wft_features;
#define wft_feat(name) ((wft_features >> WFT_FEAT_BIT_##name) & 1)

/* Apply a WEFT_FEATURES-style string (NAME or NO_NAME, comma-separated) to
 * *mask, which holds the starting set. origin names the string's source in
 * the error message. Returns 0, or EINVAL (message on stderr, *mask
 * unchanged). */
int wft_features_parse(const char *s, const char *origin, uint64_t *mask);
uint64_t wft_features_default(void);

#endif
