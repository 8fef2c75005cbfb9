/*
 * Config values: a cJSON tree (config_load.c reads and parses the text) walked against
 * the schema (config_schema.c) into typed values with their sources, and --set
 * overrides. Strict: the first problem ends the load with one line "NAME: key.path:
 * what is wrong (what was expected)" and the handle goes back to its defaults, so a
 * failed load leaves nothing half-set.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "zinf/error.h"
#include "zinf/io.h"
#include "zinf/log.h"

/* ---- messages ----------------------------------------------------------------------- */

int zinf_config_fail(struct zinf_config *cfg, int code, const char *fmt, ...)
{
	char msg[sizeof(cfg->last_error) - 128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(cfg->last_error, sizeof(cfg->last_error), "%s: %s",
		 cfg->name ? cfg->name : "config", msg);
	zinf_error_one_line(cfg->last_error);
	zinf_logf(ZINF_LOG_DEBUG, "%s", cfg->last_error);
	return code;
}

void zinf_config_warn(struct zinf_config *cfg, const char *fmt, ...)
{
	char msg[512], line[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(line, sizeof(line), "%s: %s", cfg->name ? cfg->name : "config", msg);
	zinf_error_one_line(line);
	for (int i = 0; i < cfg->n_warnings; i++)
		if (strcmp(cfg->warnings[i], line) == 0)
			return;
	zinf_logf(ZINF_LOG_WARN, "%s", line);
	if (cfg->n_warnings < ZINF_CONFIG_MAX_WARNINGS) {
		char *copy = strdup(line);
		if (copy)
			cfg->warnings[cfg->n_warnings++] = copy;
	}
}

/* ---- defaults and lifecycle --------------------------------------------------------- */

static void strlist_clear(struct zinf_strlist *l)
{
	for (int i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

static int strlist_push(struct zinf_strlist *l, const char *s)
{
	char **v = realloc(l->v, (size_t)(l->n + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	l->v = v;
	l->v[l->n] = strdup(s);
	if (!l->v[l->n])
		return -ENOMEM;
	l->n++;
	return 0;
}

/* Free what a key owns and put its default back. */
static void key_reset(struct zinf_config *cfg, int i)
{
	const struct zinf_key *k = &zinf_keys[i];
	void *f = zinf_key_field(cfg, k);

	cfg->source[i] = ZINF_SRC_DEFAULT;
	cfg->present[i] = 0;
	cfg->by_set[i] = 0;
	cfg->is_auto[i] = k->def_str && strcmp(k->def_str, "auto") == 0;
	if (k->alias_of)
		return; /* shares its field with the key it stands for */
	switch (k->type) {
	case ZK_BOOL:
		*(bool *)f = k->def != 0;
		break;
	case ZK_INT:
	case ZK_ENUM:
		*(int *)f = (int)k->def;
		break;
	case ZK_COUNT:
	case ZK_BYTES:
		*(uint64_t *)f = (uint64_t)k->def;
		break;
	case ZK_FLOAT:
		*(double *)f = k->def;
		break;
	case ZK_STRING:
		free(*(char **)f);
		*(char **)f = NULL;
		break;
	case ZK_STRLIST:
		strlist_clear(f);
		break;
	case ZK_BETAS: { /* "b1,b2", in the C locale's form */
		char *comma;
		((double *)f)[0] = zinf_strtod(k->def_str, &comma);
		((double *)f)[1] = zinf_strtod(comma + 1, NULL);
		break;
	}
	case ZK_OBJECT:
	case ZK_IGNORED:
		break;
	}
}

void config_reset(struct zinf_config *cfg)
{
	for (int i = 0; i < zinf_n_keys; i++)
		key_reset(cfg, i);
	for (int i = 0; i < cfg->n_warnings; i++)
		free(cfg->warnings[i]);
	cfg->n_warnings = 0;
	cfg->world_size = 1;
}

int zinf_config_create(struct zinf_config **out)
{
	struct zinf_config *cfg;

	if (!out)
		return -EINVAL;
	*out = NULL;
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return -ENOMEM;
	cfg->source = calloc((size_t)zinf_n_keys, 1);
	cfg->present = calloc((size_t)zinf_n_keys, 1);
	cfg->is_auto = calloc((size_t)zinf_n_keys, 1);
	cfg->by_set = calloc((size_t)zinf_n_keys, 1);
	if (!cfg->source || !cfg->present || !cfg->is_auto || !cfg->by_set) {
		zinf_config_destroy(cfg);
		return -ENOMEM;
	}
	config_reset(cfg);
	cfg->set_by = 1;
	*out = cfg;
	return 0;
}

void zinf_config_destroy(struct zinf_config *cfg)
{
	if (!cfg)
		return;
	if (cfg->source && cfg->present && cfg->is_auto && cfg->by_set)
		config_reset(cfg);
	free(cfg->source);
	free(cfg->present);
	free(cfg->is_auto);
	free(cfg->by_set);
	free(cfg->name);
	free(cfg);
}

const char *zinf_config_last_error(const struct zinf_config *cfg)
{
	return cfg ? cfg->last_error : "";
}

int zinf_config_warning_count(const struct zinf_config *cfg)
{
	return cfg ? cfg->n_warnings : 0;
}

const char *zinf_config_warning(const struct zinf_config *cfg, int i)
{
	return cfg && i >= 0 && i < cfg->n_warnings ? cfg->warnings[i] : NULL;
}

/* ---- messages about values --------------------------------------------------------- */

/* One-line description of a JSON value as found ("string \"3\"", "number 4.5"). */
static void json_describe(const cJSON *j, char *buf, size_t len)
{
	if (cJSON_IsString(j))
		snprintf(buf, len, "string \"%.60s\"", j->valuestring);
	else if (cJSON_IsNumber(j)) {
		char num[32];
		zinf_format_double(j->valuedouble, num, sizeof(num));
		snprintf(buf, len, "number %s", num);
	} else if (cJSON_IsBool(j))
		snprintf(buf, len, "%s", cJSON_IsTrue(j) ? "true" : "false");
	else if (cJSON_IsNull(j))
		snprintf(buf, len, "null");
	else if (cJSON_IsArray(j))
		snprintf(buf, len, "a list of %d", cJSON_GetArraySize(j));
	else
		snprintf(buf, len, "an object");
}

static int fail_type(struct zinf_config *cfg, const struct zinf_key *k, const char *path,
		     const cJSON *j)
{
	char got[96], want[192];

	json_describe(j, got, sizeof(got));
	zinf_key_expected(k, want, sizeof(want));
	return zinf_config_fail(cfg, ZINF_ECONFIG, "%s: wrong type: %s (expected %s)", path, got,
				want);
}

static int fail_range(struct zinf_config *cfg, const struct zinf_key *k, const char *path,
		      const char *shown)
{
	char want[192];

	zinf_key_expected(k, want, sizeof(want));
	return zinf_config_fail(cfg, ZINF_ECONFIG, "%s: %s is out of range (expected %s)", path,
				shown, want);
}

/* ---- setting one value -------------------------------------------------------------- */

static bool in_range(const struct zinf_key *k, double v)
{
	if (k->flags & ZKF_MIN_OPEN ? v <= k->min : v < k->min)
		return false;
	return v <= k->max;
}

static int set_whole(struct zinf_config *cfg, const struct zinf_key *k, const char *path,
		     const cJSON *j, double v)
{
	char shown[64];

	zinf_fmt_num(v, shown, sizeof(shown));
	if (!isfinite(v) || v != floor(v))
		return fail_type(cfg, k, path, j);
	if (!in_range(k, v) && k->type == ZK_COUNT && k->max >= 1e15 && v > k->max) {
		zinf_format_double(v, shown, sizeof(shown));
		return zinf_config_fail(
			cfg, ZINF_ECONFIG,
			"%s: %s is out of range (expected a whole number up to 1e15)", path, shown);
	}
	if (!in_range(k, v))
		return fail_range(cfg, k, path, shown);
	if (k->type == ZK_INT)
		*(int *)zinf_key_field(cfg, k) = (int)v;
	else
		*(uint64_t *)zinf_key_field(cfg, k) = (uint64_t)v;
	return 0;
}

static int set_bytes(struct zinf_config *cfg, const struct zinf_key *k, const char *path,
		     const cJSON *j)
{
	uint64_t bytes;
	char shown[96];

	if (cJSON_IsNumber(j)) {
		double v = j->valuedouble;
		if (!isfinite(v) || v != floor(v))
			return fail_type(cfg, k, path, j);
		if (v < 0 || v >= 18446744073709551616.0) { /* a whole number, out of range */
			zinf_fmt_num(v, shown, sizeof(shown));
			return fail_range(cfg, k, path, shown);
		}
		bytes = (uint64_t)v;
		snprintf(shown, sizeof(shown), "%.17g", v); /* (a whole number: no decimal point) */
	} else if (cJSON_IsString(j)) {
		if (zinf_parse_bytes(j->valuestring, &bytes) != 0)
			return fail_type(cfg, k, path, j);
		snprintf(shown, sizeof(shown), "\"%.60s\"", j->valuestring);
	} else {
		return fail_type(cfg, k, path, j);
	}
	if ((double)bytes < k->min || (double)bytes > k->max)
		return fail_range(cfg, k, path, shown);
	if ((k->flags & ZKF_ALIGN4K) && bytes % 4096)
		return zinf_config_fail(
			cfg, ZINF_ECONFIG,
			"%s: %s is not a multiple of 4096 (expected a size aligned for O_DIRECT, e.g. \"1MiB\")",
			path, shown);
	*(uint64_t *)zinf_key_field(cfg, k) = bytes;
	return 0;
}

static int set_enum(struct zinf_config *cfg, const struct zinf_key *k, const char *path,
		    const cJSON *j)
{
	const char *s, *p;
	int idx = 0;

	if (!cJSON_IsString(j))
		return fail_type(cfg, k, path, j);
	s = j->valuestring;
	for (p = k->names;; idx++) {
		const char *end = strchr(p, '|');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		bool eq =
			(k->flags & ZKF_ICASE) ? strncasecmp(p, s, n) == 0 : strncmp(p, s, n) == 0;
		if (eq && strlen(s) == n) {
			*(int *)zinf_key_field(cfg, k) = idx;
			return 0;
		}
		if (!end)
			break;
		p = end + 1;
	}
	{
		char want[192];
		zinf_key_expected(k, want, sizeof(want));
		return zinf_config_fail(cfg, ZINF_ECONFIG,
					"%s: invalid value \"%.60s\" (expected %s)", path, s, want);
	}
}

static int set_string(struct zinf_config *cfg, const struct zinf_key *k, const char *path,
		      const cJSON *j)
{
	char **f = zinf_key_field(cfg, k);
	char *copy;

	if (cJSON_IsArray(j) && strstr(k->path, ".nvme_path")) /* several drives */
		return zinf_config_fail(
			cfg, ZINF_ECONFIG,
			"%s: wrong type: a list of %d (expected one path; to stripe over several drives, list them in zinf.nvme_paths)",
			path, cJSON_GetArraySize(j));
	if (!cJSON_IsString(j))
		return fail_type(cfg, k, path, j);
	if (!*j->valuestring)
		return zinf_config_fail(cfg, ZINF_ECONFIG, "%s: empty string (expected a path)",
					path);
	copy = strdup(j->valuestring);
	if (!copy)
		return zinf_config_fail(cfg, -ENOMEM, "%s: out of memory", path);
	free(*f);
	*f = copy;
	return 0;
}

bool zinf_config_same_path(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	struct stat sa, sb;

	while (la > 1 && a[la - 1] == '/')
		la--;
	while (lb > 1 && b[lb - 1] == '/')
		lb--;
	if (la == lb && strncmp(a, b, la) == 0)
		return true;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* The paths of j (a string or a list of them) into l, checked. */
static int list_build(struct zinf_config *cfg, const struct zinf_key *k, const char *path,
		      const cJSON *j, struct zinf_strlist *l)
{
	const cJSON *e;
	int i = 0;

	if (cJSON_IsString(j) && *j->valuestring)
		return strlist_push(l, j->valuestring)
			       ? zinf_config_fail(cfg, -ENOMEM, "%s: out of memory", path)
			       : 0;
	if (!cJSON_IsArray(j))
		return fail_type(cfg, k, path, j);
	if (cJSON_GetArraySize(j) > ZINF_IO_MAX_PATHS)
		return zinf_config_fail(cfg, ZINF_ECONFIG,
					"%s: %d paths (expected at most %d drives)", path,
					cJSON_GetArraySize(j), ZINF_IO_MAX_PATHS);
	cJSON_ArrayForEach(e, j)
	{
		if (!cJSON_IsString(e) || !*e->valuestring) {
			char got[96];
			json_describe(e, got, sizeof(got));
			return zinf_config_fail(
				cfg, ZINF_ECONFIG,
				"%s[%d]: wrong type: %s (expected a non-empty path string)", path,
				i, got);
		}
		for (int d = 0; d < l->n; d++)
			if (zinf_config_same_path(l->v[d], e->valuestring))
				return strcmp(l->v[d], e->valuestring) == 0
					       ? zinf_config_fail(
							 cfg, ZINF_ECONFIG,
							 "%s[%d]: \"%.60s\" is listed twice (expected each drive once)",
							 path, i, e->valuestring)
					       : zinf_config_fail(
							 cfg, ZINF_ECONFIG,
							 "%s[%d]: \"%.60s\" is the directory of [%d] \"%.60s\" (expected each drive once)",
							 path, i, e->valuestring, d, l->v[d]);
		if (strlist_push(l, e->valuestring))
			return zinf_config_fail(cfg, -ENOMEM, "%s: out of memory", path);
		i++;
	}
	return 0;
}

static int set_strlist(struct zinf_config *cfg, const struct zinf_key *k, const char *path,
		       const cJSON *j)
{
	struct zinf_strlist *l = zinf_key_field(cfg, k), n = {0};
	int rc = list_build(cfg, k, path, j, &n);

	if (rc) { /* the list stays as it was */
		strlist_clear(&n);
		return rc;
	}
	strlist_clear(l);
	*l = n;
	return 0;
}

static int set_betas(struct zinf_config *cfg, const struct zinf_key *k, const char *path,
		     const cJSON *j)
{
	double *f = zinf_key_field(cfg, k);
	double b[2];

	if (!cJSON_IsArray(j) || cJSON_GetArraySize(j) != 2)
		return fail_type(cfg, k, path, j);
	for (int i = 0; i < 2; i++) {
		const cJSON *e = cJSON_GetArrayItem(j, i);
		char shown[64];
		if (!cJSON_IsNumber(e))
			return fail_type(cfg, k, path, j);
		b[i] = e->valuedouble;
		if (!(b[i] >= k->min && b[i] < k->max)) {
			char num[32];
			zinf_format_double(b[i], num, sizeof(num));
			snprintf(shown, sizeof(shown), "beta%d %s", i + 1, num);
			return fail_range(cfg, k, path, shown);
		}
	}
	f[0] = b[0];
	f[1] = b[1];
	return 0;
}

/* Set key i from JSON value j (already known not to be "auto"). */
static int key_set_json(struct zinf_config *cfg, int i, const char *path, const cJSON *j)
{
	const struct zinf_key *k = &zinf_keys[i];

	switch (k->type) {
	case ZK_BOOL:
		if (!cJSON_IsBool(j))
			return fail_type(cfg, k, path, j);
		*(bool *)zinf_key_field(cfg, k) = cJSON_IsTrue(j);
		return 0;
	case ZK_INT:
	case ZK_COUNT:
		if (!cJSON_IsNumber(j))
			return fail_type(cfg, k, path, j);
		return set_whole(cfg, k, path, j, j->valuedouble);
	case ZK_BYTES:
		return set_bytes(cfg, k, path, j);
	case ZK_FLOAT: {
		char shown[64];
		if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble))
			return fail_type(cfg, k, path, j);
		zinf_format_double(j->valuedouble, shown, sizeof(shown));
		if (!in_range(k, j->valuedouble))
			return fail_range(cfg, k, path, shown);
		*(double *)zinf_key_field(cfg, k) = j->valuedouble;
		return 0;
	}
	case ZK_ENUM:
		return set_enum(cfg, k, path, j);
	case ZK_STRING:
		return set_string(cfg, k, path, j);
	case ZK_STRLIST:
		return set_strlist(cfg, k, path, j);
	case ZK_BETAS:
		return set_betas(cfg, k, path, j);
	case ZK_OBJECT:
	case ZK_IGNORED:
		break;
	}
	return 0;
}

static bool json_is_auto(const cJSON *j)
{
	return cJSON_IsString(j) && strcmp(j->valuestring, "auto") == 0;
}

/* Store j into key i (or the key it is an alias of) with source src. */
static int key_assign(struct zinf_config *cfg, int i, const char *path, const cJSON *j,
		      enum zinf_config_source src)
{
	const struct zinf_key *k = &zinf_keys[i];
	int target = k->alias_of ? zinf_key_find(k->alias_of) : i;
	int rc;

	if (json_is_auto(j) && (zinf_keys[target].flags & ZKF_AUTO)) {
		key_reset(cfg, target);
		cfg->is_auto[target] = 1;
		cfg->source[target] = src == ZINF_SRC_FILE ? ZINF_SRC_AUTO : src;
		cfg->present[target] = 1;
		cfg->by_set[target] = src == ZINF_SRC_SET ? cfg->set_by : 0;
		return 0;
	}
	rc = key_set_json(cfg, i, path, j);
	if (rc)
		return rc;
	cfg->is_auto[target] = 0;
	cfg->source[target] = src;
	cfg->present[target] = 1;
	cfg->by_set[target] = src == ZINF_SRC_SET ? cfg->set_by : 0;
	return 0;
}

/* ---- unknown keys: the closest known one -------------------------------------------- */

static int edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int row[128];

	if (lb >= sizeof(row) / sizeof(row[0]) || la >= 128)
		return 1000;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		int diag = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int up = row[j];
			int cost = tolower((unsigned char)a[i - 1]) !=
				   tolower((unsigned char)b[j - 1]);
			int best = diag + cost;
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

static const char *leaf_of(const char *path)
{
	const char *dot = strrchr(path, '.');
	return dot ? dot + 1 : path;
}

static bool parent_is(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);
	if (n == 0)
		return strchr(path, '.') == NULL;
	return strncmp(path, prefix, n) == 0 && path[n] == '.' && !strchr(path + n + 1, '.');
}

static int fail_unknown(struct zinf_config *cfg, const char *prefix, const char *name,
			const char *path)
{
	const char *best = NULL;
	int best_d = 1000;

	/* A sibling spelled nearly the same... */
	for (int i = 0; i < zinf_n_keys; i++) {
		int d;
		if (!parent_is(zinf_keys[i].path, prefix))
			continue;
		d = edit_distance(name, leaf_of(zinf_keys[i].path));
		if (d < best_d) {
			best_d = d;
			best = leaf_of(zinf_keys[i].path);
		}
	}
	if (best && best_d <= (int)(strlen(name) > 6 ? strlen(name) / 3 : 2))
		return zinf_config_fail(cfg, ZINF_ECONFIG, "%s: unknown key; did you mean %s?",
					path, best);
	/* ...or the same name in another section (a key put at the wrong level). */
	for (int i = 0; i < zinf_n_keys; i++) {
		if (zinf_keys[i].alias_of || strcmp(leaf_of(zinf_keys[i].path), name) != 0)
			continue;
		return zinf_config_fail(
			cfg, ZINF_ECONFIG, "%s: unknown key here; did you mean %s%s?", path,
			strchr(zinf_keys[i].path, '.') ? "" : "the top-level ", zinf_keys[i].path);
	}
	return zinf_config_fail(
		cfg, ZINF_ECONFIG,
		"%s: unknown key (expected one of the keys of %s listed in docs/config.md)", path,
		*prefix ? prefix : "the top level");
}

/* ---- walking the document ----------------------------------------------------------- */

static void warn_old_name(struct zinf_config *cfg, const char *given, const char *new_name)
{
	zinf_config_warn(cfg, "%s: old DeepSpeed name, accepted; use %s", given, new_name);
}

/* Whether keys a and b are in the same section (an old name beside its new one). */
static bool same_parent(const char *a, const char *b)
{
	size_t la = (size_t)(leaf_of(a) - a), lb = (size_t)(leaf_of(b) - b);

	return la == lb && strncmp(a, b, la) == 0;
}

int config_walk(struct zinf_config *cfg, const cJSON *obj, const char *prefix)
{
	const cJSON *child;

	cJSON_ArrayForEach(child, obj)
	{
		char path[256];
		const struct zinf_key *k;
		int i;

		snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", child->string);
		for (const cJSON *prev = obj->child; prev != child; prev = prev->next)
			if (strcmp(prev->string, child->string) == 0)
				return zinf_config_fail(
					cfg, ZINF_ECONFIG,
					"%s: key given twice (expected each key once)", path);
		i = zinf_key_find(path);
		if (i < 0)
			return fail_unknown(cfg, prefix, child->string, path);
		k = &zinf_keys[i];
		if (k->type == ZK_IGNORED) {
			zinf_config_warn(cfg, "%s: DeepSpeed key not implemented by zinf; ignored",
					 path);
			continue;
		}
		/* DeepSpeed's None ("offload_param": null, "number_checkpoints": null in its
		 * documented examples): as if not given, the default applies */
		if (cJSON_IsNull(child))
			continue;
		/* an old name, of a key or of a section (bfloat16) whose keys alias: warned, and
		 * refused beside its new one (an old section's keys were checked with it) */
		if (k->alias_of && same_parent(k->path, k->alias_of)) {
			if (cfg->present[zinf_key_find(k->alias_of)] ||
			    cJSON_GetObjectItemCaseSensitive(obj, leaf_of(k->alias_of)))
				return zinf_config_fail(
					cfg, ZINF_ECONFIG,
					"%s: given together with its new name %s (expected one of the two)",
					path, k->alias_of);
			warn_old_name(cfg, path, k->alias_of);
		}
		if (k->type == ZK_OBJECT) {
			int rc;
			if (!cJSON_IsObject(child))
				return fail_type(cfg, k, path, child);
			cfg->present[i] = 1;
			cfg->source[i] = ZINF_SRC_FILE;
			rc = config_walk(cfg, child, path);
			if (rc)
				return rc;
			continue;
		}
		{
			int rc = key_assign(cfg, i, path, child, ZINF_SRC_FILE);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* ---- overrides ---------------------------------------------------------------------- */

/* Keys whose values may be written on the command line without JSON quotes. */
static bool is_textual(enum zinf_key_type t)
{
	return t == ZK_STRING || t == ZK_ENUM || t == ZK_STRLIST || t == ZK_BYTES;
}

/* --set KEY=null: DeepSpeed's None, as in a file: key i back to its default (the key an
 * old name stands for too; a section: every key in it), marked as the command line's. */
static int set_null(struct zinf_config *cfg, int i)
{
	const struct zinf_key *k = &zinf_keys[i];
	size_t len = strlen(k->path);

	for (int j = 0; j < zinf_n_keys; j++) {
		const char *p = zinf_keys[j].path;
		bool hit = j == i || (k->alias_of && strcmp(p, k->alias_of) == 0) ||
			   (k->type == ZK_OBJECT && strncmp(p, k->path, len) == 0 && p[len] == '.');
		if (hit) {
			key_reset(cfg, j);
			cfg->by_set[j] = cfg->set_by;
		}
	}
	return 0;
}

/* --set of an old name warns, as in a file; an old name and its new one both set is
 * refused, as in a file (by_set[i] of an old name: it was the one given). */
static int set_alias_check(struct zinf_config *cfg, int i, const char *key)
{
	const struct zinf_key *k = &zinf_keys[i];

	for (int a = 0; a < zinf_n_keys; a++) {
		const struct zinf_key *o = &zinf_keys[a];
		/* (a key reset by --set KEY=null has its default's source: no clash) */
		bool clash = k->alias_of ? strcmp(o->path, k->alias_of) == 0 && cfg->by_set[a] &&
						   cfg->source[a] == ZINF_SRC_SET && !cfg->by_set[i]
					 : o->alias_of && strcmp(o->alias_of, k->path) == 0 &&
						   cfg->by_set[a] && cfg->source[i] == ZINF_SRC_SET;
		if (clash)
			return zinf_config_fail(
				cfg, ZINF_ECONFIG,
				"%s: given together with %s %s (expected one of the two)", key,
				k->alias_of ? "its new name" : "its old name", o->path);
	}
	if (k->alias_of) {
		warn_old_name(cfg, key, k->alias_of);
		cfg->by_set[i] = cfg->set_by;
	}
	return 0;
}

/* --set OLD=null: the key (or section) the old name stands for goes back to its default,
 * with the old name's warning. */
static int null_target(struct zinf_config *cfg, int i, const char *key)
{
	if (!zinf_keys[i].alias_of)
		return i;
	warn_old_name(cfg, key, zinf_keys[i].alias_of);
	return zinf_key_find(zinf_keys[i].alias_of);
}

/* The ignored key (a DeepSpeed section zinf does not implement) that path lies in, or
 * -1. */
static int ignored_parent(const char *path)
{
	char up[256];

	for (const char *dot = strchr(path, '.'); dot; dot = strchr(dot + 1, '.')) {
		int i;

		snprintf(up, sizeof(up), "%.*s", (int)(dot - path), path);
		i = zinf_key_find(up);
		if (i >= 0 && zinf_keys[i].type == ZK_IGNORED)
			return i;
	}
	return -1;
}

/* The first key of section i in the schema (i's own path when it has none; an old name's
 * section: its new one's). */
static const char *first_child(int i)
{
	size_t len;

	if (zinf_keys[i].alias_of && zinf_key_find(zinf_keys[i].alias_of) >= 0)
		i = zinf_key_find(zinf_keys[i].alias_of);
	len = strlen(zinf_keys[i].path);

	for (int j = i + 1; j < zinf_n_keys; j++)
		if (!strncmp(zinf_keys[j].path, zinf_keys[i].path, len) &&
		    zinf_keys[j].path[len] == '.' && zinf_keys[j].type != ZK_IGNORED)
			return zinf_keys[j].path;
	return zinf_keys[i].path;
}

static int config_set(struct zinf_config *cfg, const char *key, const char *value)
{
	int i = key ? zinf_key_find(key) : -1;
	cJSON *j;
	int rc;

	if (!key || !value)
		return zinf_config_fail(cfg, ZINF_ECONFIG, "%s: no %s given (expected KEY=VALUE)",
					key ? key : "(null)", key ? "value" : "key");
	if (i >= 0 && zinf_keys[i].type == ZK_OBJECT && strcmp(value, "null") == 0)
		return set_null(cfg, null_target(cfg, i, key));
	if (i < 0) /* a key inside an ignored section (flops_profiler.enabled) */
		i = ignored_parent(key);
	if (i >= 0 && zinf_keys[i].type == ZK_IGNORED) { /* as in a file */
		zinf_config_warn(cfg, "%s: DeepSpeed key not implemented by zinf; ignored",
				 zinf_keys[i].path);
		return 0;
	}
	if (i < 0 || zinf_keys[i].type == ZK_OBJECT) {
		const char *dot = strrchr(key, '.');
		char prefix[256] = "";
		if (i >= 0)
			return zinf_config_fail(
				cfg, ZINF_ECONFIG,
				"%s: a section, not a value (expected one of its keys, such as %s)",
				key, first_child(i));
		if (dot)
			snprintf(prefix, sizeof(prefix), "%.*s", (int)(dot - key), key);
		return fail_unknown(cfg, prefix, dot ? dot + 1 : key, key);
	}
	j = cJSON_ParseWithOpts(value, NULL, true);
	if (j && cJSON_IsNull(j)) {
		cJSON_Delete(j);
		return set_null(cfg, null_target(cfg, i, key));
	}
	/* a byte size's bare word is text (512MiB); another JSON value stays itself, so a
	 * wrong type is named as given (true, [1]) */
	if (!j || (is_textual(zinf_keys[i].type) && zinf_keys[i].type != ZK_BYTES &&
		   !cJSON_IsString(j) && !(zinf_keys[i].type == ZK_STRLIST && cJSON_IsArray(j)))) {
		/* A bare word: nvme, /mnt/nvme0, 512MiB. */
		cJSON_Delete(j);
		j = cJSON_CreateString(value);
		if (!j)
			return zinf_config_fail(cfg, -ENOMEM, "--set %s: out of memory", key);
	}
	rc = set_alias_check(cfg, i, key);
	if (!rc)
		rc = key_assign(cfg, i, key, j, ZINF_SRC_SET);
	cJSON_Delete(j);
	return rc;
}

const char *zinf_config_setter(const struct zinf_config *cfg, unsigned char who)
{
	return who >= 2 && who - 2 < cfg->n_origins ? cfg->origin[who - 2] : "--set";
}

/* config_set named who (by_set's value) in its messages and in the keys it sets. */
static int set_as(struct zinf_config *cfg, const char *key, const char *value, unsigned char who)
{
	char name[sizeof(cfg->origin[0])], *file = cfg->name;
	int rc;

	/* what goes wrong here is the command line's, not the file's: name it so */
	snprintf(name, sizeof(name), "%s", zinf_config_setter(cfg, who));
	cfg->last_error[0] = 0;
	cfg->name = name;
	cfg->set_by = who;
	rc = config_set(cfg, key, value);
	cfg->set_by = 1;
	cfg->name = file;
	return rc;
}

int zinf_config_set(struct zinf_config *cfg, const char *key, const char *value)
{
	return cfg ? set_as(cfg, key, value, 1) : -EINVAL;
}

int zinf_config_set_from(struct zinf_config *cfg, const char *key, const char *value,
			 const char *origin)
{
	int k = 0;

	if (!cfg)
		return -EINVAL;
	if (!origin || !*origin || strlen(origin) >= sizeof(cfg->origin[0]) || strchr(origin, '\n'))
		return zinf_config_fail(cfg, -EINVAL,
					"config set: origin: expected a name of 1 to %zu bytes on "
					"one line",
					sizeof(cfg->origin[0]) - 1);
	while (k < cfg->n_origins && strcmp(cfg->origin[k], origin) != 0)
		k++;
	if (k == ZINF_CONFIG_MAX_ORIGINS)
		return zinf_config_fail(cfg, -EINVAL, "config set: more than %d origins",
					ZINF_CONFIG_MAX_ORIGINS);
	if (k == cfg->n_origins)
		snprintf(cfg->origin[cfg->n_origins++], sizeof(cfg->origin[0]), "%s", origin);
	return set_as(cfg, key, value, (unsigned char)(2 + k));
}
