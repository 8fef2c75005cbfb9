/*
 * Reading a loaded config: typed getters by dotted key, and the full listing (text or
 * JSON) with each value's source that `zinf check` prints.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static const char *const source_names[] = {"default", "file", "auto", "resolved", "derived", "set"};

const char *zinf_config_source_name(enum zinf_config_source src)
{
	return (unsigned)src < sizeof(source_names) / sizeof(source_names[0]) ? source_names[src]
									      : "?";
}

/* The key a getter reads: aliases read their new name; sections and ignored keys hold
 * no value. */
static int value_key(const char *key, const struct zinf_key **out)
{
	int i = key ? zinf_key_find(key) : -1;

	if (i < 0)
		return -ENOENT;
	if (zinf_keys[i].alias_of)
		i = zinf_key_find(zinf_keys[i].alias_of);
	if (zinf_keys[i].type == ZK_OBJECT || zinf_keys[i].type == ZK_IGNORED)
		return -EINVAL;
	*out = &zinf_keys[i];
	return i;
}

int zinf_config_get_double(const struct zinf_config *cfg, const char *key, double *out)
{
	const struct zinf_key *k;
	int i = value_key(key, &k);

	if (!cfg || !out)
		return -EINVAL;
	const void *f;

	if (i < 0)
		return i;
	if (cfg->is_auto[i])
		return -ENODATA;
	f = zinf_key_cfield(cfg, k);
	switch (k->type) {
	case ZK_INT:
		*out = *(const int *)f;
		return 0;
	case ZK_COUNT:
	case ZK_BYTES:
		*out = (double)*(const uint64_t *)f;
		return 0;
	case ZK_FLOAT:
		*out = *(const double *)f;
		return 0;
	default:
		return -EINVAL;
	}
}

int zinf_config_get_u64(const struct zinf_config *cfg, const char *key, uint64_t *out)
{
	const struct zinf_key *k;
	int i = value_key(key, &k);

	if (!cfg || !out)
		return -EINVAL;
	double d;
	int rc;

	if (i < 0)
		return i;
	if (k->type == ZK_COUNT || k->type == ZK_BYTES) {
		if (cfg->is_auto[i])
			return -ENODATA;
		*out = *(const uint64_t *)zinf_key_cfield(cfg, k);
		return 0;
	}
	rc = zinf_config_get_double(cfg, key, &d);
	if (rc)
		return rc;
	/* checked before the cast: a double outside [0, 2^64) has no uint64 value */
	if (!(d >= 0) || d >= 18446744073709551616.0 || d != floor(d))
		return -EINVAL;
	*out = (uint64_t)d;
	return 0;
}

int zinf_config_get_bool(const struct zinf_config *cfg, const char *key, bool *out)
{
	const struct zinf_key *k;
	int i = value_key(key, &k);

	if (!cfg || !out)
		return -EINVAL;

	if (i < 0)
		return i;
	if (k->type != ZK_BOOL)
		return -EINVAL;
	if (cfg->is_auto[i])
		return -ENODATA;
	*out = *(const bool *)zinf_key_cfield(cfg, k);
	return 0;
}

/* Every enum key's value names, split once from the schema's "a|b|c": strings that live
 * as long as the process, as zinf_config_get_string's pointers must outlive cfg's next
 * read. names[i] is key i's list, NULL-terminated (NULL for a key that is no enum). */
static const char ***enum_names;
static pthread_once_t enum_once = PTHREAD_ONCE_INIT;

static void split_enum_names(void)
{
	const char ***names = calloc((size_t)zinf_n_keys, sizeof(*names));

	for (int i = 0; names && i < zinf_n_keys; i++) {
		const struct zinf_key *k = &zinf_keys[i];
		size_t len = k->names ? strlen(k->names) : 0;
		int n = 1;
		char *text, *p;

		if (k->type != ZK_ENUM || !k->names)
			continue;
		for (const char *c = k->names; *c; c++)
			n += *c == '|';
		names[i] = calloc((size_t)n + 1, sizeof(char *));
		text = malloc(len + 1);
		if (!names[i] || !text) {
			free(text);
			continue; /* (get_string then answers -ENOMEM for this key) */
		}
		memcpy(text, k->names, len + 1);
		p = text;
		for (int v = 0; v < n; v++) {
			char *bar = strchr(p, '|');
			if (bar)
				*bar = 0;
			names[i][v] = p;
			p = bar ? bar + 1 : p + strlen(p);
		}
	}
	enum_names = names;
}

int zinf_config_get_string(const struct zinf_config *cfg, const char *key, const char **out)
{
	const struct zinf_key *k;
	int i = value_key(key, &k);

	if (!cfg || !out)
		return -EINVAL;

	if (i < 0)
		return i;
	if (k->type == ZK_STRING) {
		*out = *(char *const *)zinf_key_cfield(cfg, k);
		return 0;
	}
	if (k->type == ZK_ENUM) {
		int v = *(const int *)zinf_key_cfield(cfg, k);

		pthread_once(&enum_once, split_enum_names);
		if (!enum_names || !enum_names[i])
			return -ENOMEM;
		if (v < 0)
			return -ERANGE;
		for (int n = 0; n <= v; n++)
			if (!enum_names[i][n])
				return -ERANGE;
		*out = enum_names[i][v];
		return 0;
	}
	return -EINVAL;
}

int zinf_config_get_list(const struct zinf_config *cfg, const char *key, int idx, const char **out)
{
	const struct zinf_key *k;
	int i = value_key(key, &k);
	const struct zinf_strlist *l;

	if (!cfg || !out)
		return -EINVAL;
	if (i < 0)
		return i;
	if (k->type != ZK_STRLIST)
		return -EINVAL;
	l = zinf_key_cfield(cfg, k);
	if (idx < 0 || idx >= l->n)
		return -ERANGE;
	*out = l->v[idx];
	return 0;
}

int zinf_config_get_source(const struct zinf_config *cfg, const char *key,
			   enum zinf_config_source *out)
{
	int i = key ? zinf_key_find(key) : -1;

	if (!cfg || !out)
		return -EINVAL;
	if (i < 0)
		return -ENOENT;
	if (zinf_keys[i].alias_of)
		i = zinf_key_find(zinf_keys[i].alias_of);
	*out = (enum zinf_config_source)cfg->source[i];
	return 0;
}

/* ---- listing ------------------------------------------------------------------------ */

static void json_string(const char *s, char *buf, size_t len)
{
	size_t o = 0;

	if (len < 3)
		return;
	buf[o++] = '"';
	for (; *s && o + 3 < len; s++) {
		if (*s == '"' || *s == '\\')
			buf[o++] = '\\';
		buf[o++] = (*s >= 0 && *s < 0x20) ? '?' : *s;
	}
	buf[o++] = '"';
	buf[o] = 0;
}

void zinf_key_value_json(const struct zinf_config *cfg, int i, char *buf, size_t len)
{
	const struct zinf_key *k = &zinf_keys[i];
	const void *f = zinf_key_cfield(cfg, k);
	char name[64];

	if (cfg->is_auto[i]) {
		snprintf(buf, len, "\"auto\"");
		return;
	}
	switch (k->type) {
	case ZK_BOOL:
		snprintf(buf, len, "%s", *(const bool *)f ? "true" : "false");
		break;
	case ZK_INT:
		snprintf(buf, len, "%d", *(const int *)f);
		break;
	case ZK_COUNT:
	case ZK_BYTES:
		snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)f);
		break;
	case ZK_FLOAT:
		zinf_format_double(*(const double *)f, buf, len);
		break;
	case ZK_ENUM:
		zinf_key_enum_name(k, *(const int *)f, name, sizeof(name));
		json_string(name, buf, len);
		break;
	case ZK_STRING:
		if (*(char *const *)f)
			json_string(*(char *const *)f, buf, len);
		else
			snprintf(buf, len, "null");
		break;
	case ZK_STRLIST: {
		const struct zinf_strlist *l = f;
		size_t o = 0;
		buf[o++] = '[';
		for (int n = 0; n < l->n && o + 4 < len; n++) {
			if (n)
				buf[o++] = ',';
			json_string(l->v[n], buf + o, len - o - 2);
			o += strlen(buf + o);
		}
		buf[o++] = ']';
		buf[o] = 0;
		break;
	}
	case ZK_BETAS: {
		char b1[32], b2[32];
		zinf_format_double(((const double *)f)[0], b1, sizeof(b1));
		zinf_format_double(((const double *)f)[1], b2, sizeof(b2));
		snprintf(buf, len, "[%s, %s]", b1, b2);
		break;
	}
	case ZK_OBJECT:
	case ZK_IGNORED:
		snprintf(buf, len, "null");
		break;
	}
}

/* Keys with a value of their own (not sections, ignored keys or old names). */
static bool listed(int i)
{
	const struct zinf_key *k = &zinf_keys[i];
	return k->type != ZK_OBJECT && k->type != ZK_IGNORED && !k->alias_of;
}

int zinf_config_print(const struct zinf_config *cfg, FILE *f, bool json)
{
	char val[1200];
	bool first = true;

	if (!cfg || !f)
		return -EINVAL;
	if (json)
		fputs("{", f);
	for (int i = 0; i < zinf_n_keys; i++) {
		const char *src;
		if (!listed(i))
			continue;
		zinf_key_value_json(cfg, i, val, sizeof(val));
		src = zinf_config_source_name((enum zinf_config_source)cfg->source[i]);
		/* A count with no default (the batch sizes) reads 0 until given: unset, null */
		if (zinf_keys[i].type == ZK_COUNT && !cfg->is_auto[i] &&
		    (double)*(const uint64_t *)zinf_key_cfield(cfg, &zinf_keys[i]) <
			    zinf_keys[i].min)
			snprintf(val, sizeof(val), json ? "null" : "unset");
		if (json) {
			fprintf(f, "%s\n  \"%s\": {\"value\": %s, \"source\": \"%s\"}",
				first ? "" : ",", zinf_keys[i].path, val, src);
		} else {
			const struct zinf_key *k = &zinf_keys[i];
			uint64_t n = k->type == ZK_BYTES
					     ? *(const uint64_t *)zinf_key_cfield(cfg, k)
					     : 0;
			char human[48] = "";
			if (k->type == ZK_BYTES && !cfg->is_auto[i] && n >= 1024) {
				char b[32];
				snprintf(human, sizeof(human), " (%s)",
					 zinf_format_bytes(n, b, sizeof(b)));
			}
			fprintf(f, "%-62s = %s%s  # %s\n", k->path, val, human, src);
		}
		first = false;
	}
	if (json)
		fputs("\n}\n", f);
	return ferror(f) ? -EIO : 0;
}

/* ---- reference ---------------------------------------------------------------------- */

static const char *type_name(const struct zinf_key *k)
{
	switch (k->type) {
	case ZK_OBJECT:
		return "section";
	case ZK_BOOL:
		return "bool";
	case ZK_INT:
		return "integer";
	case ZK_COUNT:
		return "count";
	case ZK_BYTES:
		return "bytes";
	case ZK_FLOAT:
		return "number";
	case ZK_ENUM:
		return "enum";
	case ZK_STRING:
		return "path";
	case ZK_STRLIST:
		return "paths";
	case ZK_BETAS:
		return "[b1, b2]";
	case ZK_IGNORED:
		return "any";
	}
	return "?";
}

int zinf_config_print_reference(FILE *f)
{
	struct zinf_config *fresh;
	char val[256], want[256];

	if (!f)
		return -EINVAL;
	if (zinf_config_create(&fresh))
		return -ENOMEM;
	fputs("| key | type | default | accepted values | meaning |\n|---|---|---|---|---|\n", f);
	for (int i = 0; i < zinf_n_keys; i++) {
		const struct zinf_key *k = &zinf_keys[i];
		bool has_value = k->type != ZK_OBJECT && k->type != ZK_IGNORED;
		if (has_value) {
			zinf_key_value_json(fresh, k->alias_of ? zinf_key_find(k->alias_of) : i,
					    val, sizeof(val));
			if (k->type == ZK_COUNT && !fresh->is_auto[i] && k->def < k->min)
				snprintf(val, sizeof(val), "unset");
			zinf_key_expected(k, want, sizeof(want));
		} else {
			snprintf(val, sizeof(val), "-");
			snprintf(want, sizeof(want), "%s",
				 k->type == ZK_OBJECT ? "an object" : "anything (warning)");
		}
		fprintf(f, "| `%s` | %s | `%s` | %s | %s |\n", k->path, type_name(k), val, want,
			k->doc);
	}
	zinf_config_destroy(fresh);
	return ferror(f) ? -EIO : 0;
}
