/*
 * Hugging Face safetensors reader, opening a checkpoint (see safetensors.h and
 * docs/formats.md): a single file or an index and its shards. Every header is validated
 * before anything is read (dtype, shape, offsets inside the data buffer, byte size =
 * elements x dtype size, no two tensors overlapping, no duplicate names), so a read
 * never leaves the file. Reading the tensors' data and checksumming the files is
 * safetensors_read_data.c.
 */
#include "safetensors_internal.h"
#include "zinf/config.h" /* zinf_json_raw_control */
#include "zinf/error.h"
#include "zinf/log.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- reader ------------------------------------------------------------------------------ */

int st_rd_fail(struct zinf_st_reader *r, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->last_error, sizeof(r->last_error), fmt, ap);
	va_end(ap);
	zinf_logf(ZINF_LOG_DEBUG, "%s", r->last_error);
	return code;
}

int zinf_st_reader_create(struct zinf_st_reader **out)
{
	struct zinf_st_reader *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r)
		return -ENOMEM;
	*out = r;
	return 0;
}

static void reader_clear(struct zinf_st_reader *r)
{
	for (int i = 0; i < r->n_tensors; i++)
		free((char *)r->tensors[i].name);
	free(r->tensors);
	free(r->by_name);
	free(r->crc);
	free(r->crc_elems);
	r->tensors = NULL;
	r->by_name = NULL;
	r->crc = NULL;
	r->crc_elems = NULL;
	r->n_tensors = 0;
	for (int i = 0; i < r->n_files; i++) {
		if (r->files[i].fd >= 0)
			close(r->files[i].fd);
		free(r->files[i].path);
	}
	free(r->files);
	r->files = NULL;
	r->n_files = 0;
	free(r->path);
	r->path = NULL;
}

void zinf_st_reader_destroy(struct zinf_st_reader *r)
{
	if (!r)
		return;
	reader_clear(r);
	free(r->stage);
	free(r);
}

const char *zinf_st_reader_last_error(const struct zinf_st_reader *r)
{
	return r ? r->last_error : "";
}

/* A JSON number that is a non-negative integer exactly representable in a double. */
static bool json_uint(const cJSON *item, uint64_t *out)
{
	double d;

	if (!cJSON_IsNumber(item))
		return false;
	d = item->valuedouble;
	if (!(d >= 0.0) || d > ST_MAX_JSON_INT || d != (double)(uint64_t)d)
		return false;
	*out = (uint64_t)d;
	return true;
}

/* A parsed header entry before it joins the reader. */
struct st_entry {
	char *name;
	enum zinf_st_dtype dtype;
	char dtype_text[8];  /* as the header spells it */
	uint64_t other_size; /* an OTHER's bytes per element */
	int ndim;
	uint64_t shape[ZINF_ST_MAX_DIMS];
	uint64_t n_elems, begin, end;
};

static int entry_cmp_begin(const void *a, const void *b)
{
	const struct st_entry *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

static int entry_cmp_name(const void *a, const void *b)
{
	const struct st_entry *x = a, *y = b;

	return strcmp(x->name, y->name);
}

static void entries_free(struct st_entry *e, int n)
{
	for (int i = 0; e && i < n; i++)
		free(e[i].name);
	free(e);
}

static int check_metadata(struct zinf_st_reader *r, const char *path, const cJSON *meta)
{
	const cJSON *kv;

	if (!cJSON_IsObject(meta))
		return st_rd_fail(
			r, ZINF_EFORMAT,
			"%s: \"__metadata__\" is not an object (expected string keys and values)",
			path);
	cJSON_ArrayForEach(kv, meta)
	{
		if (!cJSON_IsString(kv))
			return st_rd_fail(r, ZINF_EFORMAT,
					  "%s: \"__metadata__\": value of \"%s\" is not a string",
					  path, kv->string);
	}
	return 0;
}

/* Parse one tensor entry of path's header into e (e->name already set). */
static int parse_entry(struct zinf_st_reader *r, const char *path, const cJSON *obj,
		       struct st_entry *e, uint64_t data_bytes)
{
	const char *name = e->name;
	const cJSON *dtype = NULL, *shape = NULL, *offs = NULL, *kv, *dim;
	uint64_t esz, nbytes;
	int n;

	if (!cJSON_IsObject(obj))
		return st_rd_fail(
			r, ZINF_EFORMAT,
			"%s: tensor %s: entry is not an object (expected dtype, shape, data_offsets)",
			path, name);
	cJSON_ArrayForEach(kv, obj)
	{
		if (strcmp(kv->string, "dtype") == 0 && !dtype)
			dtype = kv;
		else if (strcmp(kv->string, "shape") == 0 && !shape)
			shape = kv;
		else if (strcmp(kv->string, "data_offsets") == 0 && !offs)
			offs = kv;
		else
			return st_rd_fail(
				r, ZINF_EFORMAT,
				"%s: tensor %s: unexpected or repeated key \"%s\" (expected dtype, shape, data_offsets)",
				path, name, kv->string);
	}
	if (!dtype || !shape || !offs)
		return st_rd_fail(r, ZINF_EFORMAT, "%s: tensor %s: missing \"%s\"", path, name,
				  !dtype   ? "dtype"
				  : !shape ? "shape"
					   : "data_offsets");
	if (!cJSON_IsString(dtype))
		return st_rd_fail(r, ZINF_EFORMAT, "%s: tensor %s: dtype is not a string", path,
				  name);
	/* another safetensors dtype is listed, its tensor refused only if it is read */
	e->other_size = st_other_dtype_size(dtype->valuestring);
	if (e->other_size)
		e->dtype = ZINF_ST_OTHER;
	else if (zinf_st_dtype_parse(dtype->valuestring, &e->dtype) < 0)
		return st_rd_fail(
			r, ZINF_EFORMAT,
			"%s: tensor %s: dtype \"%.32s\" is not a safetensors dtype (expected BF16, F16 or F32)",
			path, name, dtype->valuestring);
	snprintf(e->dtype_text, sizeof(e->dtype_text), "%s", dtype->valuestring);
	if (!cJSON_IsArray(shape))
		return st_rd_fail(r, ZINF_EFORMAT,
				  "%s: tensor %s: shape is not an array of integers", path, name);
	n = cJSON_GetArraySize(shape);
	if (n > ZINF_ST_MAX_DIMS)
		return st_rd_fail(r, ZINF_EFORMAT,
				  "%s: tensor %s: shape has %d dimensions (expected at most %d)",
				  path, name, n, ZINF_ST_MAX_DIMS);
	e->ndim = 0;
	e->n_elems = 1;
	cJSON_ArrayForEach(dim, shape)
	{
		uint64_t d;

		if (!json_uint(dim, &d) || d > ST_MAX_DIM)
			return st_rd_fail(
				r, ZINF_EFORMAT,
				"%s: tensor %s: shape[%d] is not a non-negative integer below 2^48",
				path, name, e->ndim);
		if (!st_mul_u64(e->n_elems, d, &e->n_elems))
			return st_rd_fail(r, ZINF_EFORMAT,
					  "%s: tensor %s: shape overflows 64 bits of elements",
					  path, name);
		e->shape[e->ndim++] = d;
	}
	if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
	    !json_uint(cJSON_GetArrayItem(offs, 0), &e->begin) ||
	    !json_uint(cJSON_GetArrayItem(offs, 1), &e->end))
		return st_rd_fail(
			r, ZINF_EFORMAT,
			"%s: tensor %s: data_offsets is not [begin, end] of non-negative integers",
			path, name);
	if (e->begin > e->end)
		return st_rd_fail(
			r, ZINF_EFORMAT,
			"%s: tensor %s: data_offsets [%llu, %llu] are reversed (expected begin <= end)",
			path, name, (unsigned long long)e->begin, (unsigned long long)e->end);
	if (e->end > data_bytes)
		return st_rd_fail(
			r, ZINF_EFORMAT,
			"%s: tensor %s: data_offsets [%llu, %llu] end past the data buffer of %llu bytes",
			path, name, (unsigned long long)e->begin, (unsigned long long)e->end,
			(unsigned long long)data_bytes);
	esz = e->dtype == ZINF_ST_OTHER ? e->other_size : zinf_st_dtype_size(e->dtype);
	if (!st_mul_u64(e->n_elems, esz, &nbytes) || nbytes != e->end - e->begin)
		return st_rd_fail(
			r, ZINF_EFORMAT,
			"%s: tensor %s: data_offsets [%llu, %llu] hold %llu bytes but shape x %s needs %llu x %llu",
			path, name, (unsigned long long)e->begin, (unsigned long long)e->end,
			(unsigned long long)(e->end - e->begin), e->dtype_text,
			(unsigned long long)e->n_elems, (unsigned long long)esz);
	return 0;
}

/* Read and check path's header length. */
static int read_header_len(struct zinf_st_reader *r, struct st_file *f, uint64_t *hlen)
{
	unsigned char b[8];
	int rc;

	if (f->size < 8)
		return st_rd_fail(
			r, ZINF_EFORMAT,
			"%s: file is %llu bytes (expected at least the 8-byte header length)",
			f->path, (unsigned long long)f->size);
	rc = st_pread_full(f->fd, b, 8, 0);
	if (rc < 0)
		return st_rd_fail(r, rc, "%s: reading the header length: %s", f->path,
				  zinf_strerror(rc));
	*hlen = 0;
	for (int i = 7; i >= 0; i--)
		*hlen = (*hlen << 8) | b[i];
	if (*hlen > ZINF_ST_MAX_HEADER_BYTES)
		return st_rd_fail(
			r, ZINF_EFORMAT,
			"%s: header length %llu exceeds the %llu-byte limit (corrupt file?)",
			f->path, (unsigned long long)*hlen,
			(unsigned long long)ZINF_ST_MAX_HEADER_BYTES);
	if (*hlen > f->size - 8)
		return st_rd_fail(
			r, ZINF_EFORMAT,
			"%s: header length %llu runs past the end of the file (%llu bytes)",
			f->path, (unsigned long long)*hlen, (unsigned long long)f->size);
	if (*hlen < 2)
		return st_rd_fail(r, ZINF_EFORMAT,
				  "%s: header length %llu is too short for a JSON object", f->path,
				  (unsigned long long)*hlen);
	return 0;
}

/* Parse the JSON header of f into entries (sorted by begin offset, checked). */
static int parse_header(struct zinf_st_reader *r, struct st_file *f, struct st_entry **out,
			int *n_out)
{
	uint64_t hlen = 0, data_bytes;
	struct st_entry *e = NULL;
	const char *end = NULL, *raw;
	cJSON *root = NULL;
	const cJSON *kv;
	char *text = NULL;
	int rc, n = 0, cap;

	*out = NULL;
	*n_out = 0;
	rc = read_header_len(r, f, &hlen);
	if (rc < 0)
		return rc;
	f->data_begin = 8 + hlen;
	data_bytes = f->size - f->data_begin;
	text = malloc(hlen + 1);
	if (!text)
		return st_rd_fail(r, -ENOMEM, "%s: no memory for a %llu-byte header", f->path,
				  (unsigned long long)hlen);
	rc = st_pread_full(f->fd, text, hlen, 8);
	if (rc < 0) {
		rc = st_rd_fail(r, rc, "%s: reading the header: %s", f->path, zinf_strerror(rc));
		goto out_text;
	}
	text[hlen] = '\0';
	if (text[0] != '{') {
		rc = st_rd_fail(r, ZINF_EFORMAT,
				"%s: header does not start with '{' (expected a JSON object)",
				f->path);
		goto out_text;
	}
	root = cJSON_ParseWithLengthOpts(text, hlen, &end, 0);
	if (!root) {
		const char *at = cJSON_GetErrorPtr();
		uint64_t pos = at && at >= text && at <= text + hlen ? (uint64_t)(at - text) : 0;

		rc = st_rd_fail(r, ZINF_EFORMAT,
				"%s: header is not valid JSON (error near byte %llu)", f->path,
				(unsigned long long)(8 + pos));
		goto out_text;
	}
	raw = zinf_json_raw_control(text, hlen);
	if (raw) {
		rc = st_rd_fail(r, ZINF_EFORMAT,
				"%s: header is not valid JSON (a control character 0x%02x inside a "
				"string at byte %llu; expected it escaped)",
				f->path, (unsigned char)*raw,
				(unsigned long long)(8 + (raw - text)));
		goto out_root;
	}
	for (const char *p = end; p && p < text + hlen; p++) {
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
			rc = st_rd_fail(
				r, ZINF_EFORMAT,
				"%s: header has bytes after its JSON object at byte %llu (expected space padding)",
				f->path, (unsigned long long)(8 + (uint64_t)(p - text)));
			goto out_root;
		}
	}
	if (!cJSON_IsObject(root)) {
		rc = st_rd_fail(r, ZINF_EFORMAT, "%s: header is not a JSON object", f->path);
		goto out_root;
	}
	cap = cJSON_GetArraySize(root);
	e = calloc((size_t)cap + 1, sizeof(*e));
	if (!e) {
		rc = st_rd_fail(r, -ENOMEM, "%s: no memory for %d header entries", f->path, cap);
		goto out_root;
	}
	cJSON_ArrayForEach(kv, root)
	{
		if (strcmp(kv->string, "__metadata__") == 0) {
			rc = check_metadata(r, f->path, kv);
			if (rc < 0)
				goto out_entries;
			continue;
		}
		if (kv->string[0] == '\0') {
			rc = st_rd_fail(r, ZINF_EFORMAT, "%s: a tensor has an empty name", f->path);
			goto out_entries;
		}
		e[n].name = strdup(kv->string);
		if (!e[n].name) {
			rc = st_rd_fail(r, -ENOMEM, "%s: no memory", f->path);
			goto out_entries;
		}
		n++;
		rc = parse_entry(r, f->path, kv, &e[n - 1], data_bytes);
		if (rc < 0)
			goto out_entries;
	}
	qsort(e, (size_t)n, sizeof(*e), entry_cmp_name);
	for (int i = 1; i < n; i++) {
		if (strcmp(e[i - 1].name, e[i].name) == 0) {
			rc = st_rd_fail(r, ZINF_EFORMAT,
					"%s: tensor %s appears twice in the header", f->path,
					e[i].name);
			goto out_entries;
		}
	}
	qsort(e, (size_t)n, sizeof(*e), entry_cmp_begin);
	for (int i = 1; i < n; i++) {
		if (e[i].begin < e[i - 1].end) {
			rc = st_rd_fail(
				r, ZINF_EFORMAT,
				"%s: tensor %s: data_offsets [%llu, %llu] overlap tensor %s [%llu, %llu]",
				f->path, e[i].name, (unsigned long long)e[i].begin,
				(unsigned long long)e[i].end, e[i - 1].name,
				(unsigned long long)e[i - 1].begin,
				(unsigned long long)e[i - 1].end);
			goto out_entries;
		}
	}
	*out = e;
	*n_out = n;
	e = NULL;
	rc = 0;
out_entries:
	entries_free(e, n);
out_root:
	cJSON_Delete(root);
out_text:
	free(text);
	return rc;
}

/* Out of file descriptors (a reader keeps every shard open while it loads, and
 * checkpoints of thousands of shards exist): raise the soft limit to the hard one, as
 * the zinf CLI does at start. Whether there is more room now. */
static bool more_files_allowed(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
		return false;
	zinf_logf(ZINF_LOG_INFO, "safetensors: raising the open-file limit from %llu to %llu",
		  (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
	rl.rlim_cur = rl.rlim_max;
	return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

static int file_open(struct zinf_st_reader *r, struct st_file *f, const char *path)
{
	struct stat st;

	f->fd = -1;
	f->path = strdup(path);
	if (!f->path)
		return st_rd_fail(r, -ENOMEM, "%s: no memory", path);
	f->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO: refused below */
	if (f->fd < 0 && errno == EMFILE && more_files_allowed())
		f->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (f->fd < 0)
		return st_rd_fail(r, -errno, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(f->fd, &st) < 0)
		return st_rd_fail(r, -errno, "%s: cannot stat: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return st_rd_fail(r, -EINVAL, "%s: not a regular file", path);
	f->size = (uint64_t)st.st_size;
	return 0;
}

static int add_file(struct zinf_st_reader *r, const char *path)
{
	struct st_file *files = realloc(r->files, (size_t)(r->n_files + 1) * sizeof(*files));

	if (!files)
		return st_rd_fail(r, -ENOMEM, "%s: no memory", path);
	r->files = files;
	memset(&files[r->n_files], 0, sizeof(files[0]));
	files[r->n_files].fd = -1;
	r->n_files++;
	return file_open(r, &files[r->n_files - 1], path);
}

static void tensor_from_entry(struct zinf_st_tensor_info *t, struct st_entry *e,
			      const struct st_file *f, int file)
{
	t->name = e->name;
	e->name = NULL; /* moved */
	t->dtype = e->dtype;
	memcpy(t->dtype_text, e->dtype_text, sizeof(t->dtype_text));
	t->ndim = e->ndim;
	memcpy(t->shape, e->shape, sizeof(t->shape));
	t->n_elems = e->n_elems;
	t->nbytes = e->end - e->begin;
	t->file_offset = f->data_begin + e->begin;
	t->file = file;
}

static int reader_push(struct zinf_st_reader *r, struct st_entry *e, int file)
{
	struct zinf_st_tensor_info *t =
		realloc(r->tensors, (size_t)(r->n_tensors + 1) * sizeof(*t));

	if (!t)
		return st_rd_fail(r, -ENOMEM, "%s: no memory", r->files[file].path);
	r->tensors = t;
	tensor_from_entry(&t[r->n_tensors++], e, &r->files[file], file);
	return 0;
}

static int by_name_cmp(const void *a, const void *b, void *ctx)
{
	const struct zinf_st_reader *r = ctx;

	return strcmp(r->tensors[*(const int *)a].name, r->tensors[*(const int *)b].name);
}

static int build_name_index(struct zinf_st_reader *r)
{
	r->by_name = malloc((size_t)(r->n_tensors ? r->n_tensors : 1) * sizeof(int));
	if (!r->by_name)
		return st_rd_fail(r, -ENOMEM, "no memory for the tensor index");
	for (int i = 0; i < r->n_tensors; i++)
		r->by_name[i] = i;
	qsort_r(r->by_name, (size_t)r->n_tensors, sizeof(int), by_name_cmp, r);
	return 0;
}

static int open_single(struct zinf_st_reader *r, const char *path)
{
	struct st_entry *e;
	int rc, n;

	rc = add_file(r, path);
	if (rc < 0)
		return rc;
	rc = parse_header(r, &r->files[0], &e, &n);
	if (rc < 0)
		return rc;
	for (int i = 0; i < n && rc == 0; i++)
		rc = reader_push(r, &e[i], 0);
	entries_free(e, n);
	return rc;
}

/* A shard name from an index: a plain file name in the index's directory. */
static bool shard_name_ok(const char *s)
{
	return s[0] != '\0' && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* Read a whole small file into *text (NUL-terminated, caller frees). */
static int read_small_file(struct zinf_st_reader *r, const char *path, uint64_t limit, char **text)
{
	struct st_file f = {.fd = -1};
	int rc;

	*text = NULL;
	rc = file_open(r, &f, path);
	if (rc < 0)
		goto out;
	if (f.size > limit) {
		rc = st_rd_fail(r, ZINF_EFORMAT,
				"%s: %llu bytes is larger than the %llu-byte limit", path,
				(unsigned long long)f.size, (unsigned long long)limit);
		goto out;
	}
	*text = malloc(f.size + 1);
	if (!*text) {
		rc = st_rd_fail(r, -ENOMEM, "%s: no memory", path);
		goto out;
	}
	rc = st_pread_full(f.fd, *text, f.size, 0);
	if (rc < 0) {
		rc = st_rd_fail(r, rc, "%s: read failed: %s", path, zinf_strerror(rc));
		free(*text);
		*text = NULL;
		goto out;
	}
	(*text)[f.size] = '\0';
	if (strlen(*text) != f.size) {
		rc = st_rd_fail(r, ZINF_EJSON, "%s: NUL byte at byte %zu (expected JSON text)",
				path, strlen(*text));
		free(*text);
		*text = NULL;
	}
out:
	if (f.fd >= 0)
		close(f.fd);
	free(f.path);
	return rc;
}

/* One parsed shard while an index is being opened: its entries (in file order), and
 * their names sorted, to find each weight_map entry in log n (an entry's name pointer
 * stays valid once moved into the reader's tensors, which then own the string). */
struct st_name_ref {
	const char *name;
	int entry;
};

struct st_shard_entries {
	struct st_entry *e;
	struct st_name_ref *by_name;
	int n;
};

static int name_ref_cmp(const void *a, const void *b)
{
	return strcmp(((const struct st_name_ref *)a)->name, ((const struct st_name_ref *)b)->name);
}

static int open_index(struct zinf_st_reader *r, const char *index_path)
{
	struct st_shard_entries *shards = NULL;
	const cJSON *map, *kv;
	cJSON *root = NULL;
	char *dir = NULL, *text;
	const char *raw;
	int rc = 0;

	rc = read_small_file(r, index_path, ZINF_ST_MAX_HEADER_BYTES, &text);
	if (rc < 0)
		return rc;
	/* the whole file is the object: nothing but white space after it */
	root = cJSON_ParseWithOpts(text, NULL, 1);
	raw = root ? zinf_json_raw_control(text, strlen(text)) : NULL;
	if (raw)
		rc = st_rd_fail(r, ZINF_EJSON,
				"%s: not a JSON object (a control character 0x%02x inside a string "
				"at byte %lld; expected it escaped)",
				index_path, (unsigned char)*raw, (long long)(raw - text));
	free(text);
	if (rc < 0)
		goto out;
	if (!root || !cJSON_IsObject(root)) {
		rc = st_rd_fail(r, ZINF_EJSON, "%s: not a JSON object", index_path);
		goto out;
	}
	map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(map) || !map->child) {
		rc = st_rd_fail(
			r, ZINF_EFORMAT,
			"%s: weight_map: missing or empty (expected an object mapping tensor names to shard files)",
			index_path);
		goto out;
	}
	dir = st_path_dir(index_path);
	if (!dir) {
		rc = st_rd_fail(r, -ENOMEM, "%s: no memory", index_path);
		goto out;
	}
	/* Open the shards in the order their names sort, each once. */
	cJSON_ArrayForEach(kv, map)
	{
		bool seen = false;
		char *path;

		if (!cJSON_IsString(kv) || !shard_name_ok(kv->valuestring)) {
			rc = st_rd_fail(
				r, ZINF_EFORMAT,
				"%s: weight_map: tensor %s: value is not a shard file name in the same directory",
				index_path, kv->string);
			goto out;
		}
		for (int i = 0; i < r->n_files && !seen; i++) {
			const char *base = strrchr(r->files[i].path, '/');

			seen = strcmp(base ? base + 1 : r->files[i].path, kv->valuestring) == 0;
		}
		if (seen)
			continue;
		path = st_path_join(dir, kv->valuestring);
		if (!path) {
			rc = st_rd_fail(r, -ENOMEM, "%s: no memory", index_path);
			goto out;
		}
		rc = add_file(r, path);
		free(path);
		if (rc < 0) {
			char inner[ST_ERR_BYTES / 2];

			snprintf(inner, sizeof(inner), "%.500s", r->last_error);
			rc = st_rd_fail(r, rc, "%s: weight_map: tensor %s: shard %s", index_path,
					kv->string, inner);
			goto out;
		}
	}
	shards = calloc((size_t)r->n_files, sizeof(*shards));
	if (!shards) {
		rc = st_rd_fail(r, -ENOMEM, "%s: no memory", index_path);
		goto out;
	}
	for (int i = 0; i < r->n_files; i++) {
		rc = parse_header(r, &r->files[i], &shards[i].e, &shards[i].n);
		if (rc < 0)
			goto out;
		shards[i].by_name = malloc((size_t)(shards[i].n ? shards[i].n : 1) *
					   sizeof(*shards[i].by_name));
		if (!shards[i].by_name) {
			rc = st_rd_fail(r, -ENOMEM, "%s: no memory", index_path);
			goto out;
		}
		for (int k = 0; k < shards[i].n; k++)
			shards[i].by_name[k] = (struct st_name_ref){shards[i].e[k].name, k};
		qsort(shards[i].by_name, (size_t)shards[i].n, sizeof(*shards[i].by_name),
		      name_ref_cmp);
	}
	/* Every weight_map entry must be in its shard; duplicates in the map are errors. */
	cJSON_ArrayForEach(kv, map)
	{
		struct st_entry *hit = NULL;
		struct st_name_ref want = {kv->string, 0}, *ref;
		int file = 0;

		for (; file < r->n_files; file++) {
			const char *base = strrchr(r->files[file].path, '/');

			if (strcmp(base ? base + 1 : r->files[file].path, kv->valuestring) == 0)
				break;
		}
		ref = bsearch(&want, shards[file].by_name, (size_t)shards[file].n, sizeof(*ref),
			      name_ref_cmp);
		if (ref && shards[file].e[ref->entry].name) /* (NULL: moved, listed twice) */
			hit = &shards[file].e[ref->entry];
		if (!hit) {
			for (int i = 0; i < r->n_tensors && !hit; i++)
				if (strcmp(r->tensors[i].name, kv->string) == 0)
					rc = st_rd_fail(r, ZINF_EFORMAT,
							"%s: weight_map: tensor %s is listed twice",
							index_path, kv->string);
			if (rc == 0)
				rc = st_rd_fail(r, ZINF_EFORMAT,
						"%s: weight_map: tensor %s: not found in shard %s",
						index_path, kv->string, r->files[file].path);
			goto out;
		}
		rc = reader_push(r, hit, file);
		if (rc < 0)
			goto out;
	}
out:
	for (int i = 0; shards && i < r->n_files; i++) {
		entries_free(shards[i].e, shards[i].n);
		free(shards[i].by_name);
	}
	free(shards);
	free(dir);
	cJSON_Delete(root);
	return rc;
}

static int tensor_cmp_storage(const void *a, const void *b)
{
	const struct zinf_st_tensor_info *x = a, *y = b;

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->file_offset < y->file_offset ? -1 : x->file_offset > y->file_offset;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

int zinf_st_reader_open(struct zinf_st_reader *r, const char *path)
{
	struct stat st;
	char *entry = NULL;
	int rc;

	if (!r || !path)
		return -EINVAL;
	r->last_error[0] = '\0';
	if (r->opened)
		return st_rd_fail(r, ZINF_ESTATE, "%s: this reader already holds a checkpoint",
				  path);
	if (stat(path, &st) < 0)
		return st_rd_fail(r, -errno, "%s: %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		entry = st_path_join(path, "model.safetensors.index.json");
		if (entry && access(entry, F_OK) != 0) {
			free(entry);
			entry = st_path_join(path, "model.safetensors");
			if (entry && access(entry, F_OK) != 0) {
				free(entry);
				return st_rd_fail(
					r, -ENOENT,
					"%s: no model.safetensors.index.json or model.safetensors in this directory",
					path);
			}
		}
		if (!entry)
			return st_rd_fail(r, -ENOMEM, "%s: no memory", path);
		path = entry;
	}
	r->opened = true;
	r->path = strdup(path);
	if (!r->path)
		rc = st_rd_fail(r, -ENOMEM, "%s: no memory", path);
	else if (ends_with(path, ".json"))
		rc = open_index(r, path);
	else
		rc = open_single(r, path);
	if (rc == 0) {
		qsort(r->tensors, (size_t)r->n_tensors, sizeof(*r->tensors), tensor_cmp_storage);
		rc = build_name_index(r);
	}
	/* A name in two shards' weight_map entries ({"x": "a", "x": "b"}: cJSON keeps both
	 * keys) is found in each shard above; only one could be read by name. */
	for (int i = 1; rc == 0 && i < r->n_tensors; i++)
		if (strcmp(r->tensors[r->by_name[i - 1]].name, r->tensors[r->by_name[i]].name) == 0)
			rc = st_rd_fail(r, ZINF_EFORMAT,
					"%s: weight_map: tensor %s is listed twice", path,
					r->tensors[r->by_name[i]].name);
	if (rc == 0) {
		r->crc = calloc((size_t)r->n_tensors + 1, sizeof(*r->crc));
		r->crc_elems = calloc((size_t)r->n_tensors + 1, sizeof(*r->crc_elems));
		if (!r->crc || !r->crc_elems)
			rc = st_rd_fail(r, -ENOMEM, "no memory for the tensors' checksums");
	}
	if (rc < 0) {
		reader_clear(r);
		r->opened = false;
	} else
		zinf_logf(ZINF_LOG_DEBUG, "%s: %d tensors in %d file(s)", path, r->n_tensors,
			  r->n_files);
	free(entry);
	return rc;
}

int zinf_st_reader_count(const struct zinf_st_reader *r)
{
	return r->n_tensors;
}

const struct zinf_st_tensor_info *zinf_st_reader_tensor(const struct zinf_st_reader *r, int i)
{
	return i >= 0 && i < r->n_tensors ? &r->tensors[i] : NULL;
}

const struct zinf_st_tensor_info *zinf_st_reader_find(const struct zinf_st_reader *r,
						      const char *name)
{
	int lo = 0, hi = r->n_tensors - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		int c = strcmp(name, r->tensors[r->by_name[mid]].name);

		if (c == 0)
			return &r->tensors[r->by_name[mid]];
		if (c < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return NULL;
}

const char *zinf_st_reader_path(const struct zinf_st_reader *r)
{
	return r->path ? r->path : "";
}

int zinf_st_reader_file_count(const struct zinf_st_reader *r)
{
	return r->n_files;
}

const char *zinf_st_reader_file_path(const struct zinf_st_reader *r, int file)
{
	return file >= 0 && file < r->n_files ? r->files[file].path : NULL;
}
