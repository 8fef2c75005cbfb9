/*
 * Config loading: a file or a string of JSON text -> cJSON tree (with line and column,
 * and the text at the error, for malformed JSON; raw control characters in strings
 * refused as Python's json refuses them) -> config_walk (config.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "zinf/error.h"

/* Line and column (1-based) of position pos in text. */
static void line_col(const char *text, const char *pos, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (const char *p = text; p < pos && *p; p++) {
		if (*p == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

const char *zinf_json_raw_control(const char *text, size_t len)
{
	bool in_string = false;

	for (const char *p = text; p < text + len; p++) {
		if (!in_string) {
			in_string = *p == '"';
		} else if (*p == '\\') {
			if (p + 1 >= text + len)
				break;
			p++;
		} else if (*p == '"') {
			in_string = false;
		} else if ((unsigned char)*p < 0x20) {
			return p;
		}
	}
	return NULL;
}

static int set_name(struct zinf_config *cfg, const char *name)
{
	char *copy = strdup(name ? name : "config");

	if (!copy)
		return -ENOMEM;
	free(cfg->name);
	cfg->name = copy;
	return 0;
}

int zinf_config_load_string(struct zinf_config *cfg, const char *json, const char *name)
{
	const char *end = NULL;
	cJSON *root;
	int rc;

	if (!cfg)
		return -EINVAL;
	if (!json) /* refused before anything changes: what cfg held stays */
		return zinf_config_fail(cfg, -EINVAL, "no JSON text given (json is NULL)");
	config_reset(cfg);
	if (set_name(cfg, name))
		return zinf_config_fail(cfg, -ENOMEM, "out of memory for the config's name");
	root = cJSON_ParseWithOpts(json, &end, true);
	if (root) {
		const char *raw = zinf_json_raw_control(json, strlen(json));
		if (raw) {
			int line, col;
			cJSON_Delete(root);
			line_col(json, raw, &line, &col);
			return zinf_config_fail(
				cfg, ZINF_EJSON,
				"line %d, column %d: malformed JSON: a control character (0x%02x) inside a string (expected it escaped, as \\n or \\t)",
				line, col, (unsigned char)*raw);
		}
	}
	if (!root) {
		int line, col;
		char near[40];
		size_t n;
		if (!end)
			end = json;
		line_col(json, end, &line, &col);
		for (n = 0; n < 24 && end[n] && end[n] != '\n'; n++)
			near[n] = end[n];
		near[n] = 0;
		if (strspn(json, " \t\r\n") == strlen(json))
			return zinf_config_fail(
				cfg, ZINF_EJSON,
				"malformed JSON: the file is empty (expected a JSON object)");
		if (!end[strspn(end, " \t\r\n")] || !n) {
			/* at the end of the file or of a line: show what comes before */
			const char *stop = end, *from;
			while (stop > json && strchr(" \t\r\n", stop[-1]))
				stop--;
			for (from = stop; from > json && from[-1] != '\n' && stop - from < 24;)
				from--;
			from += strspn(from, " \t");
			snprintf(near, sizeof(near), "%.*s", (int)(stop - from), from);
			if (!end[strspn(end, " \t\r\n")])
				return zinf_config_fail(
					cfg, ZINF_EJSON,
					"line %d, column %d: malformed JSON: unexpected end of file after '%s' (expected the closing brackets, and no comma before them)",
					line, col, near);
			return zinf_config_fail(
				cfg, ZINF_EJSON,
				"line %d, column %d: malformed JSON after '%s' (expected valid JSON: check for a missing or extra comma, quote or bracket)",
				line, col, near);
		}
		return zinf_config_fail(
			cfg, ZINF_EJSON,
			"line %d, column %d: malformed JSON near '%s' (expected valid JSON: check for a missing comma, quote or bracket)",
			line, col, near);
	}
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return zinf_config_fail(
			cfg, ZINF_ECONFIG,
			"(top level): wrong type: not an object (expected a JSON object of config keys)");
	}
	rc = config_walk(cfg, root, "");
	cJSON_Delete(root);
	if (!rc)
		rc = zinf_config_validate(cfg, 0);
	if (rc) {
		char keep[sizeof(cfg->last_error)];
		memcpy(keep, cfg->last_error, sizeof(keep));
		config_reset(cfg);
		memcpy(cfg->last_error, keep, sizeof(keep));
		return rc;
	}
	cfg->last_error[0] = 0;
	return 0;
}

int zinf_config_load_file(struct zinf_config *cfg, const char *path)
{
	FILE *f;
	char *buf = NULL;
	struct stat st;
	long size;
	int fd, rc;

	if (!cfg)
		return -EINVAL;
	if (!path)
		return zinf_config_fail(cfg, -EINVAL, "no config path given (path is NULL)");
	if (set_name(cfg, path))
		return zinf_config_fail(cfg, -ENOMEM, "out of memory for the config's name");
	/* (a FIFO opens at once, to be refused, rather than waiting for a writer) */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return zinf_config_fail(cfg, -errno,
					"cannot open: %s (expected a readable JSON file)",
					strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return zinf_config_fail(cfg, -EINVAL, "not a regular file (expected a JSON file)");
	}
	f = fdopen(fd, "rb");
	if (!f) {
		rc = -errno;
		close(fd);
		return zinf_config_fail(cfg, rc, "cannot read: %s", strerror(-rc));
	}
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		rc = zinf_config_fail(cfg, -EIO, "cannot read: %s (expected a regular file)",
				      strerror(errno));
		goto out_close;
	}
	if (size > 16 << 20) {
		rc = zinf_config_fail(cfg, -EFBIG,
				      "file is %ld bytes (expected a config under 16 MiB)", size);
		goto out_close;
	}
	buf = malloc((size_t)size + 1);
	if (!buf) {
		rc = zinf_config_fail(cfg, -ENOMEM, "cannot allocate %ld bytes to read it", size);
		goto out_close;
	}
	if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
		rc = zinf_config_fail(cfg, -EIO, "cannot read: short read (expected %ld bytes)",
				      size);
		goto out_free;
	}
	buf[size] = 0;
	if (strlen(buf) != (size_t)size) {
		rc = zinf_config_fail(cfg, ZINF_EJSON,
				      "byte %zu: NUL byte in the file (expected JSON text)",
				      strlen(buf));
		goto out_free;
	}
	rc = zinf_config_load_string(cfg, buf, path);
out_free:
	free(buf);
out_close:
	fclose(f);
	return rc;
}

/* ---- writing an edited copy (zinf plan --write-config) --------------------------------- */

/* obj[key] = item, replacing what was there. */
static void put_item(cJSON *obj, const char *key, cJSON *item)
{
	if (cJSON_GetObjectItemCaseSensitive(obj, key))
		cJSON_ReplaceItemInObjectCaseSensitive(obj, key, item);
	else
		cJSON_AddItemToObject(obj, key, item);
}

/* Set the dotted key to value in obj, making the objects on the way. */
static int edit_set(cJSON *obj, const char *key, const char *value)
{
	char part[256];
	const char *dot = strchr(key, '.');
	cJSON *v, *child;

	if (!dot) {
		v = cJSON_Parse(value);
		if (!v || !(cJSON_IsNumber(v) || cJSON_IsBool(v) || cJSON_IsNull(v) ||
			    cJSON_IsString(v))) {
			cJSON_Delete(v);
			v = cJSON_CreateString(value);
		}
		if (!v)
			return -ENOMEM;
		put_item(obj, key, v);
		return 0;
	}
	if ((size_t)(dot - key) >= sizeof(part))
		return -EINVAL;
	memcpy(part, key, (size_t)(dot - key));
	part[dot - key] = 0;
	child = cJSON_GetObjectItemCaseSensitive(obj, part);
	if (!child || !cJSON_IsObject(child)) {
		child = cJSON_CreateObject();
		if (!child)
			return -ENOMEM;
		put_item(obj, part, child);
	}
	return edit_set(child, dot + 1, value);
}

static cJSON *edit_source(const char *src_path, char *err, size_t errlen)
{
	struct zinf_config *check;
	char *text = NULL;
	cJSON *root = NULL;
	long size;
	FILE *f;

	if (!src_path)
		return cJSON_CreateObject();
	if (zinf_config_create(&check))
		return NULL;
	if (zinf_config_load_file(check, src_path)) { /* the loader's checks and messages */
		snprintf(err, errlen, "%s", zinf_config_last_error(check));
		zinf_config_destroy(check);
		return NULL;
	}
	zinf_config_destroy(check);
	f = fopen(src_path, "rb");
	if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)size + 1)) &&
	    fread(text, 1, (size_t)size, f) == (size_t)size) {
		text[size] = 0;
		root = cJSON_Parse(text);
	}
	if (!root)
		snprintf(err, errlen, "%s: cannot read it again", src_path);
	free(text);
	if (f)
		fclose(f);
	return root;
}

int zinf_config_write_edited(const char *src_path, const char *const *sets, int n_sets,
			     const char *out_path, bool force, char *err, size_t errlen)
{
	char partial[4096], key[256];
	cJSON *root;
	char *json = NULL;
	FILE *f = NULL;
	int rc = 0;

	if (!err)
		errlen = 0;
	if (!out_path || (n_sets > 0 && !sets)) {
		snprintf(err, errlen, "edit config: %s is NULL (required)",
			 !out_path ? "out_path" : "sets");
		return -EINVAL;
	}
	if (snprintf(partial, sizeof(partial), "%s.partial", out_path) >= (int)sizeof(partial)) {
		snprintf(err, errlen, "%s: path too long", out_path);
		return -ENAMETOOLONG;
	}
	if (!force && access(out_path, F_OK) == 0) {
		snprintf(err, errlen, "%s: exists (expected a new file; --force replaces it)",
			 out_path);
		return -EEXIST;
	}
	root = edit_source(src_path, err, errlen);
	if (!root)
		return -EINVAL;
	for (int i = 0; i < n_sets && !rc; i++) {
		const char *eq = strchr(sets[i], '=');
		if (!eq || eq == sets[i] || (size_t)(eq - sets[i]) >= sizeof(key)) {
			snprintf(err, errlen, "--set %s: expected KEY=VALUE", sets[i]);
			rc = -EINVAL;
			break;
		}
		memcpy(key, sets[i], (size_t)(eq - sets[i]));
		key[eq - sets[i]] = 0;
		rc = edit_set(root, key, eq + 1);
		if (rc)
			snprintf(err, errlen, "--set %s: cannot set it", sets[i]);
	}
	if (!rc && !(json = cJSON_Print(root))) {
		snprintf(err, errlen, "%s: out of memory", out_path);
		rc = -ENOMEM;
	}
	if (!rc && !(f = fopen(partial, "w"))) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot create: %s", partial, strerror(errno));
	}
	if (!rc && (fputs(json, f) < 0 || fputc('\n', f) < 0 || fflush(f) || fsync(fileno(f)))) {
		rc = -errno ? -errno : -EIO;
		snprintf(err, errlen, "%s: cannot write: %s", partial, strerror(-rc));
	}
	if (f && fclose(f) && !rc) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot write: %s", partial, strerror(errno));
	}
	if (!rc && rename(partial, out_path)) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot rename to %s: %s", partial, out_path,
			 strerror(errno));
	}
	if (rc && f)
		unlink(partial);
	free(json);
	cJSON_Delete(root);
	return rc;
}
