/* The schema is well formed: unique paths, every key's parent is a section, aliases
 * name a key of the same type, defaults lie in their ranges, enum defaults name a
 * value, and every key has a one-line doc. */
#include "config.h"
#include "test.h"
#include "zinf/zinf.h"

int main(void)
{
	struct zinf_config *cfg;

	T_CHECK_RC(zinf_config_create(&cfg));
	T_CHECK(zinf_n_keys > 100, "only %d keys", zinf_n_keys);
	for (int i = 0; i < zinf_n_keys; i++) {
		const struct zinf_key *k = &zinf_keys[i];
		const char *dot = strrchr(k->path, '.');
		char name[64];

		T_CHECK(zinf_key_find(k->path) == i, "%s listed twice", k->path);
		T_CHECK(k->doc && *k->doc && !strchr(k->doc, '\n'), "%s: doc", k->path);
		if (dot) {
			char parent[256];
			int p;
			snprintf(parent, sizeof(parent), "%.*s", (int)(dot - k->path), k->path);
			p = zinf_key_find(parent);
			T_CHECK(p >= 0 && zinf_keys[p].type == ZK_OBJECT,
				"%s: parent %s is not a section", k->path, parent);
		}
		if (k->alias_of) {
			int t = zinf_key_find(k->alias_of);
			T_CHECK(t >= 0 && zinf_keys[t].type == k->type &&
					zinf_keys[t].offset == k->offset,
				"%s: alias of %s", k->path, k->alias_of);
		}
		if (k->flags & ZKF_AUTO && k->def_str && strcmp(k->def_str, "auto") == 0)
			continue;
		switch (k->type) {
		case ZK_INT:
		case ZK_FLOAT:
			T_CHECK(k->def >= k->min && k->def <= k->max,
				"%s: default %g outside [%g, %g]", k->path, k->def, k->min, k->max);
			break;
		case ZK_COUNT:
		case ZK_BYTES:
			/* 0 with min >= 1 means "unset" (the batch sizes, total_num_steps). */
			T_CHECK((k->def >= k->min && k->def <= k->max) ||
					(k->def == 0 && k->min >= 1),
				"%s: default %g outside [%g, %g]", k->path, k->def, k->min, k->max);
			if (k->flags & ZKF_ALIGN4K)
				T_CHECK((uint64_t)k->def % 4096 == 0, "%s: default unaligned",
					k->path);
			break;
		case ZK_ENUM:
			T_CHECK(zinf_key_enum_name(k, (int)k->def, name, sizeof(name)) == 0,
				"%s: enum default", k->path);
			break;
		default:
			break;
		}
	}
	zinf_config_destroy(cfg);
	return T_EXIT_PASS;
}
