/*
 * runtime/key.c - thread-specific data (weft_key_*), pthread_key_* semantics.
 *
 * Keys are slots in a global table of destructors; a thread's values live
 * in its lazily allocated t->specific array (grown on demand). A key slot
 * carries a sequence number so that a value set under a deleted key is not
 * seen through a new key that reuses the slot.
 *
 * Invariants:
 *   I1 keys[i].seq is odd while key i is live, even while free.
 *   I2 A thread's value for slot i is valid only if its recorded sequence
 *      equals keys[i].seq.
 * The table is protected by key_lock for create/delete; lookups read the
 * sequence with acquire loads (pairs with the release store in create).
 */
#include "runtime/key.h"
#include "runtime/fault.h"

#include <stdlib.h>

struct key_slot {
	_Atomic unsigned seq;
	void (*destructor)(void *);
};

struct value {
	unsigned seq;
	void *v;
};

static struct key_slot keys[WEFT_KEYS_MAX];
static pthread_mutex_t key_lock = PTHREAD_MUTEX_INITIALIZER;

int weft_key_create(weft_key_t *key, void (*destructor)(void *))
{
	if (!key)
		return EINVAL;
	pthread_mutex_lock(&key_lock);
	for (unsigned i = 0; i < WEFT_KEYS_MAX; i++) {
		unsigned s = atomic_load_explicit(&keys[i].seq, memory_order_relaxed);

		if (!(s & 1)) {
			keys[i].destructor = destructor;
			/* release: publishes the destructor with the live sequence */
			atomic_store_explicit(&keys[i].seq, s + 1, memory_order_release);
			pthread_mutex_unlock(&key_lock);
			*key = i;
			return 0;
		}
	}
	pthread_mutex_unlock(&key_lock);
	return EAGAIN;
}

int weft_key_delete(weft_key_t key)
{
	int rc = EINVAL;

	if (key >= WEFT_KEYS_MAX)
		return EINVAL;
	pthread_mutex_lock(&key_lock);
	{
		unsigned s = atomic_load_explicit(&keys[key].seq, memory_order_relaxed);

		if (s & 1) {
			/* release: later lookups see the key dead */
			atomic_store_explicit(&keys[key].seq, s + 1, memory_order_release);
			rc = 0;
		}
	}
	pthread_mutex_unlock(&key_lock);
	return rc;
}

static unsigned live_seq(weft_key_t key)
{
	/* acquire: pairs with the release store in create */
	return key < WEFT_KEYS_MAX ? atomic_load_explicit(&keys[key].seq, memory_order_acquire) : 0;
}

void *weft_getspecific(weft_key_t key)
{
	struct weft_thread *t = wft_thread_self();
	unsigned s = live_seq(key);
	struct value *vals;

	if (!t || !(s & 1) || key >= t->nspecific)
		return NULL;
	vals = (struct value *)t->specific;
	return vals[key].seq == s ? vals[key].v : NULL;
}

int weft_setspecific(weft_key_t key, const void *value)
{
	struct weft_thread *t = wft_thread_self();
	unsigned s = live_seq(key);
	struct value *vals;

	if (!(s & 1))
		return EINVAL;
	if (!t)
		return EPERM;
	if (key >= t->nspecific) {
		unsigned n = t->nspecific ? t->nspecific : 8;

		while (n <= key)
			n *= 2;
		vals = wft_fault_alloc() ? NULL : realloc(t->specific, n * sizeof(*vals));
		if (!vals)
			return ENOMEM;
		for (unsigned i = t->nspecific; i < n; i++)
			vals[i] = (struct value){ 0, NULL };
		t->specific = (void **)vals;
		t->nspecific = n;
	}
	vals = (struct value *)t->specific;
	vals[key].seq = s;
	vals[key].v = (void *)value;
	return 0;
}

void wft_key_run_destructors(struct weft_thread *t)
{
	struct value *vals = (struct value *)t->specific;

	for (int round = 0; round < WEFT_DESTRUCTOR_ITERATIONS && vals; round++) {
		int ran = 0;

		for (unsigned i = 0; i < t->nspecific; i++) {
			unsigned s = live_seq(i);
			void *v = vals[i].v;

			if (!v || vals[i].seq != s || !(s & 1))
				continue;
			vals[i].v = NULL;
			if (keys[i].destructor) {
				keys[i].destructor(v);
				ran = 1;
				vals = (struct value *)t->specific;   /* may have grown */
			}
		}
		if (!ran)
			break;
	}
}
