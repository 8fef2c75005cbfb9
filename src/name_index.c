/* A set of names by position, open addressing on an FNV-1a hash (see name_index.h). */
#include "name_index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

/* The slot that holds name, or the empty slot where it would go. cap is a power of 2
 * and never full (kept at most half full). */
static uint32_t probe(const uint32_t *slot, uint32_t cap, const char *name, zinf_name_at_fn at,
		      const void *ctx)
{
	uint32_t k = name_hash(name) & (cap - 1);

	while (slot[k] && strcmp(at(ctx, slot[k] - 1), name) != 0)
		k = (k + 1) & (cap - 1);
	return k;
}

uint32_t zinf_name_index_find(const struct zinf_name_index *x, const char *name, zinf_name_at_fn at,
			      const void *ctx)
{
	uint32_t k;

	if (!x->cap)
		return UINT32_MAX;
	k = probe(x->slot, x->cap, name, at, ctx);
	return x->slot[k] ? x->slot[k] - 1 : UINT32_MAX;
}

int zinf_name_index_add(struct zinf_name_index *x, uint32_t i, zinf_name_at_fn at, const void *ctx)
{
	if (2 * (uint64_t)(x->n + 1) > x->cap) {
		uint32_t cap = x->cap ? 2 * x->cap : 64;
		uint32_t *slot;

		if (cap < x->cap)
			return -ENOMEM;
		slot = calloc(cap, sizeof(*slot));
		if (!slot)
			return -ENOMEM;
		for (uint32_t k = 0; k < x->cap; k++)
			if (x->slot[k])
				slot[probe(slot, cap, at(ctx, x->slot[k] - 1), at, ctx)] =
					x->slot[k];
		free(x->slot);
		x->slot = slot;
		x->cap = cap;
	}
	x->slot[probe(x->slot, x->cap, at(ctx, i), at, ctx)] = i + 1;
	x->n++;
	return 0;
}

void zinf_name_index_free(struct zinf_name_index *x)
{
	free(x->slot);
	memset(x, 0, sizeof(*x));
}
