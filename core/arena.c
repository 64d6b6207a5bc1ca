/* arena.c: bump allocation in chunks; everything a graph or context allocates
 * this way is freed in one call.  Out of memory is a broken invariant here
 * (we cannot report it without memory): kf_oom ends the process cleanly. */
#include <stdlib.h>
#include <string.h>
#include "kf_int.h"

void *kf_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		kf_oom();
	return q;
}

void *kf_xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);
	if (!p)
		kf_oom();
	return p;
}

void kf_grow(void **arr, uint32_t *cap, uint32_t need, size_t sz)
{
	if (need <= *cap)
		return;
	uint64_t c = *cap ? *cap : 16;
	while (c < need)
		c *= 2;
	if (c > UINT32_MAX - 1)
		c = UINT32_MAX - 1;
	*arr = kf_xrealloc(*arr, (size_t)c * sz);
	*cap = (uint32_t)c;
}

/* n bytes at the given alignment (a power of two, at most 16), not zeroed.
 * A chunk has KF_ARENA_SLACK bytes past its capacity, never handed out, so
 * that any allocation may be read that far past its end. */
void *kf_arena_bytes(kf_arena *a, size_t n, size_t align)
{
	struct kf_chunk *c = a->head;
	size_t off = c ? (c->used + align - 1) & ~(align - 1) : 0;
	if (!c || off > c->cap || c->cap - off < n) {
		size_t cap = 64 * 1024;
		if (a->total / 4 > cap)
			cap = a->total / 4; /* grow geometrically: few chunks for big graphs */
		if (cap < n)
			cap = n;
		c = malloc(sizeof *c + cap + KF_ARENA_SLACK);
		if (!c)
			kf_oom();
		c->cap = cap;
		c->used = 0;
		c->next = a->head;
		a->head = c;
		a->total += cap;
		off = 0;
	}
	c->used = off + n;
	a->used += n;
	return c->data + off;
}

void *kf_alloc(kf_arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	void *p = kf_arena_bytes(a, n, 16);
	memset(p, 0, n);
	return p;
}

char *kf_strdup_arena(kf_arena *a, const char *s, size_t n)
{
	char *p = kf_arena_bytes(a, n + 1, 1); /* packed: names are most of a big graph's strings */
	memcpy(p, s, n);
	p[n] = 0;
	return p;
}

void kf_arena_free(kf_arena *a)
{
	struct kf_chunk *c = a->head;
	while (c) {
		struct kf_chunk *next = c->next;
		free(c);
		c = next;
	}
	memset(a, 0, sizeof *a);
}
