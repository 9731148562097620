/*
 * runtime/list.h - intrusive lists used by the runtime and the sync objects.
 * Nothing here is thread-safe: the owner of the list protects it.
 */
#ifndef WFT_LIST_H
#define WFT_LIST_H

#include <stddef.h>

#define wft_container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

/* Circular doubly linked list with a sentinel head. */
struct wft_dlist {
	struct wft_dlist *next, *prev;
};

static inline void wft_dlist_init(struct wft_dlist *h)
{
	h->next = h->prev = h;
}

static inline void wft_dlist_insert_after(struct wft_dlist *pos, struct wft_dlist *n)
{
	n->prev = pos;
	n->next = pos->next;
	pos->next->prev = n;
	pos->next = n;
}

static inline void wft_dlist_push_back(struct wft_dlist *h, struct wft_dlist *n)
{
	wft_dlist_insert_after(h->prev, n);
}

static inline void wft_dlist_del(struct wft_dlist *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}

static inline struct wft_dlist *wft_dlist_pop_front(struct wft_dlist *h)
{
	struct wft_dlist *n = h->next;

	if (n == h)
		return NULL;
	wft_dlist_del(n);
	return n;
}

#define wft_dlist_for_each(pos, h) \
	for ((pos) = (h)->next; (pos) != (h); (pos) = (pos)->next)

#endif
