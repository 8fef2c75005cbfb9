/*
 * A set of names, by index: the store refuses a module or parameter name registered
 * twice without comparing each new name with all the others (a mixture-of-experts model
 * registers tens of thousands of parameters). The names stay the caller's; the index
 * keeps positions in the caller's array and asks for a name through a callback.
 */
#ifndef ZINF_NAME_INDEX_H
#define ZINF_NAME_INDEX_H

#include <stdint.h>

struct zinf_name_index {
	uint32_t *slot; /* cap slots: 0 empty, else position + 1 */
	uint32_t cap, n;
};

/* The name at position i of the caller's array. */
typedef const char *(*zinf_name_at_fn)(const void *ctx, uint32_t i);

/* The position of name, or UINT32_MAX when it is not in the set. */
uint32_t zinf_name_index_find(const struct zinf_name_index *x, const char *name, zinf_name_at_fn at,
			      const void *ctx);
/* Add position i (its name not in the set yet): 0, or -ENOMEM with nothing changed. */
int zinf_name_index_add(struct zinf_name_index *x, uint32_t i, zinf_name_at_fn at, const void *ctx);
void zinf_name_index_free(struct zinf_name_index *x);

#endif /* ZINF_NAME_INDEX_H */
