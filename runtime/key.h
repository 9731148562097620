/*
 * runtime/key.h - thread-specific data: the exit-time half of weft keys
 * (runtime/key.c).
 */
#ifndef WFT_KEY_H
#define WFT_KEY_H

#include "runtime/thread.h"

/* Run key destructors for t (at exit). */
void wft_key_run_destructors(struct weft_thread *t);

#endif
