/*
 * Hugging Face safetensors writer (see safetensors.h and docs/formats.md). Tensors are
 * declared first; the first write lays them out (shards filled in declaration order,
 * within a shard the wider dtypes first so every tensor is aligned to its element size
 * with no holes, as the safetensors library requires), writes each shard's header to
 * NAME.tmp and presizes it. Pieces are pwritten at their offsets. finish() fsyncs and
 * renames each shard, then the index, then fsyncs the directory.
 */
#include "safetensors_internal.h"
#include "zinf/crc32c.h"
#include "zinf/error.h"
#include "zinf/log.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- writer ------------------------------------------------------------------------------ */

struct st_wtensor {
	char *name;
	enum zinf_st_dtype dtype;
	int ndim;
	uint64_t shape[ZINF_ST_MAX_DIMS];
	uint64_t n_elems, nbytes;
	int shard;
	uint64_t begin;		/* offset in the shard's data buffer */
	uint64_t written_elems; /* pieces so far */
	uint32_t crc;		/* CRC32C of the bytes written so far (pieces come in order) */
};

struct st_wshard {
	char *name; /* final file name */
	char *final_path, *tmp_path;
	int fd;
	uint64_t data_begin; /* 8 + padded header length */
	uint64_t data_bytes;
	uint32_t crc; /* the header's CRC32C; at finish, the whole file's */
};

struct zinf_st_writer {
	char *dir;
	struct zinf_st_writer_opts opts;
	struct st_wtensor *tensors;
	int n_tensors, cap_tensors;
	struct st_wshard *shards;
	int n_shards;
	bool laid_out, finished, failed;
	char index_name[ST_PREFIX_MAX + 32]; /* when sharded: the index file, */
	uint64_t index_bytes;		     /* its size */
	uint32_t index_crc;		     /* and CRC32C */
	void *stage;
	char last_error[ST_ERR_BYTES];
};

__attribute__((format(printf, 3, 4))) static int wr_fail(struct zinf_st_writer *w, int code,
							 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->last_error, sizeof(w->last_error), fmt, ap);
	va_end(ap);
	zinf_logf(ZINF_LOG_DEBUG, "%s", w->last_error);
	return code;
}

void zinf_st_writer_opts_init(struct zinf_st_writer_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->max_shard_bytes = 5000000000ull;
	opts->prefix = "model";
}

int zinf_st_writer_create(struct zinf_st_writer **out, const char *dir,
			  const struct zinf_st_writer_opts *opts)
{
	struct zinf_st_writer *w;
	struct stat st;

	*out = NULL;
	if (!dir || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	if (opts)
		w->opts = *opts;
	else
		zinf_st_writer_opts_init(&w->opts);
	if (w->opts.max_shard_bytes == 0)
		w->opts.max_shard_bytes = UINT64_MAX;
	if (!w->opts.prefix)
		w->opts.prefix = "model";
	if (!*w->opts.prefix || strlen(w->opts.prefix) > ST_PREFIX_MAX ||
	    strchr(w->opts.prefix, '/')) {
		free(w);
		return -EINVAL;
	}
	w->dir = strdup(dir);
	w->stage = malloc(ST_STAGE_BYTES);
	if (!w->dir || !w->stage) {
		free(w->dir);
		free(w->stage);
		free(w);
		return -ENOMEM;
	}
	*out = w;
	return 0;
}

void zinf_st_writer_destroy(struct zinf_st_writer *w)
{
	if (!w)
		return;
	for (int i = 0; i < w->n_shards; i++) {
		struct st_wshard *s = &w->shards[i];

		if (s->fd >= 0)
			close(s->fd);
		if (!w->finished && s->tmp_path)
			unlink(s->tmp_path);
		free(s->name);
		free(s->final_path);
		free(s->tmp_path);
	}
	free(w->shards);
	for (int i = 0; i < w->n_tensors; i++)
		free(w->tensors[i].name);
	free(w->tensors);
	free(w->stage);
	free(w->dir);
	free(w);
}

const char *zinf_st_writer_last_error(const struct zinf_st_writer *w)
{
	return w ? w->last_error : "";
}

int zinf_st_writer_shard_count(const struct zinf_st_writer *w)
{
	return w->n_shards;
}

static bool name_ok(const char *name)
{
	if (!name || !name[0] || strlen(name) > 1024 || strcmp(name, "__metadata__") == 0)
		return false;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		if (*p < 0x20 || *p == '"' || *p == '\\')
			return false;
	return true;
}

int zinf_st_writer_add(struct zinf_st_writer *w, const char *name, enum zinf_st_dtype dtype,
		       int ndim, const uint64_t *shape)
{
	struct st_wtensor *t;

	if (!w)
		return -EINVAL;
	if (w->laid_out)
		return wr_fail(w, ZINF_ESTATE, "%s: tensor %s: declared after data was written",
			       w->dir, name ? name : "(null)");
	if (!name_ok(name))
		return wr_fail(
			w, -EINVAL,
			"%s: tensor name \"%.64s\" is empty, too long, reserved or has quotes, backslashes or control characters",
			w->dir, name ? name : "(null)");
	if (!st_dtype_valid(dtype))
		return wr_fail(w, -EINVAL, "%s: tensor %s: dtype %d is not BF16, F16 or F32",
			       w->dir, name, (int)dtype);
	if (ndim < 0 || ndim > ZINF_ST_MAX_DIMS || (ndim > 0 && !shape))
		return wr_fail(w, -EINVAL, "%s: tensor %s: %d dimensions (expected 0..%d)", w->dir,
			       name, ndim, ZINF_ST_MAX_DIMS);
	for (int i = 0; i < w->n_tensors; i++)
		if (strcmp(w->tensors[i].name, name) == 0)
			return wr_fail(w, -EINVAL, "%s: tensor %s: declared twice", w->dir, name);
	if (w->n_tensors == w->cap_tensors) {
		int cap = w->cap_tensors ? 2 * w->cap_tensors : 64;

		t = realloc(w->tensors, (size_t)cap * sizeof(*t));
		if (!t)
			return wr_fail(w, -ENOMEM, "%s: no memory", w->dir);
		w->tensors = t;
		w->cap_tensors = cap;
	}
	t = &w->tensors[w->n_tensors];
	memset(t, 0, sizeof(*t));
	t->dtype = dtype;
	t->ndim = ndim;
	t->n_elems = 1;
	for (int i = 0; i < ndim; i++) {
		if (shape[i] > ST_MAX_DIM || !st_mul_u64(t->n_elems, shape[i], &t->n_elems))
			return wr_fail(w, -EINVAL, "%s: tensor %s: shape[%d] = %llu is too large",
				       w->dir, name, i, (unsigned long long)shape[i]);
		t->shape[i] = shape[i];
	}
	if (!st_mul_u64(t->n_elems, zinf_st_dtype_size(dtype), &t->nbytes))
		return wr_fail(w, -EINVAL, "%s: tensor %s: byte size overflows", w->dir, name);
	t->name = strdup(name);
	if (!t->name)
		return wr_fail(w, -ENOMEM, "%s: no memory", w->dir);
	return w->n_tensors++;
}

/* A growable text buffer for headers and the index. */
struct st_text {
	char *p;
	size_t len, cap;
	bool oom;
};

__attribute__((format(printf, 2, 3))) static void text_add(struct st_text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->oom)
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (t->len + (size_t)n + 1 > t->cap) {
		size_t cap = (t->cap ? t->cap * 2 : 4096) + (size_t)n;
		char *p = realloc(t->p, cap);

		if (!p) {
			t->oom = true;
			return;
		}
		t->p = p;
		t->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	t->len += (size_t)n;
}

static void text_tensor(struct st_text *h, const struct st_wtensor *t)
{
	text_add(h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, zinf_st_dtype_name(t->dtype));
	for (int d = 0; d < t->ndim; d++)
		text_add(h, "%s%llu", d ? "," : "", (unsigned long long)t->shape[d]);
	text_add(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t->begin,
		 (unsigned long long)(t->begin + t->nbytes));
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

/* Within a shard: wider dtypes first (alignment without holes), then declaration order. */
static int wt_layout_cmp(const void *a, const void *b, void *ctx)
{
	const struct zinf_st_writer *w = ctx;
	const struct st_wtensor *x = &w->tensors[*(const int *)a];
	const struct st_wtensor *y = &w->tensors[*(const int *)b];
	int c = cmp_u64(zinf_st_dtype_size(y->dtype), zinf_st_dtype_size(x->dtype));

	return c ? c : (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* Write shard s's header (tensors order[0..n)) to its temp file and presize it. */
static int shard_begin(struct zinf_st_writer *w, struct st_wshard *s, const int *order, int n)
{
	struct st_text h = {0};
	unsigned char len8[8];
	uint64_t hlen, pad;
	int rc;

	text_add(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (int i = 0; i < n; i++)
		text_tensor(&h, &w->tensors[order[i]]);
	text_add(&h, "}");
	pad = (8 - (8 + h.len) % 8) % 8; /* data starts 8-byte aligned, as safetensors pads */
	for (uint64_t i = 0; i < pad; i++)
		text_add(&h, " ");
	if (h.oom) {
		free(h.p);
		return wr_fail(w, -ENOMEM, "%s: no memory for a header", s->tmp_path);
	}
	hlen = h.len;
	for (int i = 0; i < 8; i++)
		len8[i] = (unsigned char)(hlen >> (8 * i));
	s->data_begin = 8 + hlen;
	s->fd = open(s->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (s->fd < 0) {
		free(h.p);
		return wr_fail(w, -errno, "%s: cannot create: %s", s->tmp_path, strerror(errno));
	}
	rc = st_pwrite_full(s->fd, len8, 8, 0);
	if (rc == 0)
		rc = st_pwrite_full(s->fd, h.p, hlen, 8);
	s->crc = zinf_crc32c(zinf_crc32c(0, len8, 8), h.p, hlen);
	free(h.p);
	if (rc < 0) {
		close(s->fd);
		s->fd = -1;
		return wr_fail(w, rc, "%s: writing the header: %s", s->tmp_path, zinf_strerror(rc));
	}
	if (ftruncate(s->fd, (off_t)(s->data_begin + s->data_bytes)) < 0) {
		rc = -errno; /* (a file-size limit, ulimit -f, below it: EFBIG) */
		close(s->fd);
		s->fd = -1;
		return wr_fail(w, rc, "%s: cannot size it to %llu bytes: %s", s->tmp_path,
			       (unsigned long long)(s->data_begin + s->data_bytes),
			       zinf_strerror(rc));
	}
	/* closed until written to: one shard open at a time, however many there are */
	if (close(s->fd) < 0)
		rc = -errno;
	s->fd = -1;
	if (rc < 0)
		return wr_fail(w, rc, "%s: closing it: %s", s->tmp_path, zinf_strerror(rc));
	return 0;
}

/* Shard s open for writing, the one shard open (a save writes its tensors in order, so
 * each shard is opened once). */
static int shard_open(struct zinf_st_writer *w, struct st_wshard *s)
{
	if (s->fd >= 0)
		return 0;
	for (int i = 0; i < w->n_shards; i++)
		if (w->shards[i].fd >= 0) {
			close(w->shards[i].fd); /* (its data reaches disk at finish's fsync) */
			w->shards[i].fd = -1;
		}
	s->fd = open(s->tmp_path, O_WRONLY | O_CLOEXEC);
	if (s->fd < 0)
		return wr_fail(w, -errno, "%s: cannot open: %s", s->tmp_path, strerror(errno));
	return 0;
}

static int writer_layout(struct zinf_st_writer *w)
{
	int *order = NULL, rc = 0, n_shards = 0;
	uint64_t cur = 0;

	if (w->n_tensors == 0)
		return wr_fail(w, -EINVAL, "%s: no tensors declared", w->dir);
	/* Shard assignment in declaration order, as Hugging Face splits state dicts. */
	for (int i = 0; i < w->n_tensors; i++) {
		struct st_wtensor *t = &w->tensors[i];

		if (n_shards == 0 || (cur > 0 && (cur >= w->opts.max_shard_bytes ||
						  t->nbytes > w->opts.max_shard_bytes - cur))) {
			n_shards++;
			cur = 0;
		}
		t->shard = n_shards - 1;
		cur += t->nbytes;
	}
	w->shards = calloc((size_t)n_shards, sizeof(*w->shards));
	order = malloc((size_t)w->n_tensors * sizeof(int));
	if (!w->shards || !order) {
		free(order);
		return wr_fail(w, -ENOMEM, "%s: no memory", w->dir);
	}
	w->n_shards = n_shards;
	for (int s = 0; s < n_shards; s++)
		w->shards[s].fd = -1;
	w->laid_out = true;
	for (int s = 0, first = 0; s < n_shards && rc == 0; s++) {
		struct st_wshard *sh = &w->shards[s];
		int n = 0;

		while (first + n < w->n_tensors && w->tensors[first + n].shard == s) {
			order[n] = first + n;
			n++;
		}
		qsort_r(order, (size_t)n, sizeof(int), wt_layout_cmp, w);
		for (int i = 0; i < n; i++) {
			w->tensors[order[i]].begin = sh->data_bytes;
			sh->data_bytes += w->tensors[order[i]].nbytes;
		}
		if (n_shards == 1) {
			if (asprintf(&sh->name, "%s.safetensors", w->opts.prefix) < 0)
				sh->name = NULL;
		} else if (asprintf(&sh->name, "%s-%05d-of-%05d.safetensors", w->opts.prefix, s + 1,
				    n_shards) < 0) {
			sh->name = NULL;
		}
		sh->final_path = sh->name ? st_path_join(w->dir, sh->name) : NULL;
		if (sh->final_path && asprintf(&sh->tmp_path, "%s.tmp", sh->final_path) < 0)
			sh->tmp_path = NULL;
		if (!sh->tmp_path) {
			rc = wr_fail(w, -ENOMEM, "%s: no memory", w->dir);
			break;
		}
		rc = shard_begin(w, sh, order, n);
		first += n;
	}
	free(order);
	if (rc < 0)
		w->failed = true;
	return rc;
}

int zinf_st_writer_write(struct zinf_st_writer *w, int index, uint64_t elem_begin, uint64_t n_elems,
			 const void *src, enum zinf_st_dtype src_dtype)
{
	struct st_wtensor *t;
	struct st_wshard *s;
	uint64_t esz, off;
	const char *in = src;
	int rc;

	if (!w)
		return -EINVAL;
	if (w->failed || w->finished)
		return wr_fail(w, ZINF_ESTATE, "%s: writer has %s", w->dir,
			       w->finished ? "finished" : "failed");
	if (index < 0 || index >= w->n_tensors)
		return wr_fail(w, -EINVAL, "%s: tensor index %d is not declared", w->dir, index);
	t = &w->tensors[index];
	if (!st_dtype_valid(src_dtype) || (n_elems && !src))
		return wr_fail(w, -EINVAL, "%s: tensor %s: bad source (dtype %d, %s)", w->dir,
			       t->name, (int)src_dtype, src ? "buffer" : "NULL");
	if (elem_begin != t->written_elems || n_elems > t->n_elems - t->written_elems)
		return wr_fail(
			w, -EINVAL,
			"%s: tensor %s: piece [%llu, +%llu) is not the next part of its %llu elements (%llu written)",
			w->dir, t->name, (unsigned long long)elem_begin,
			(unsigned long long)n_elems, (unsigned long long)t->n_elems,
			(unsigned long long)t->written_elems);
	if (!w->laid_out) {
		rc = writer_layout(w);
		if (rc < 0)
			return rc;
	}
	s = &w->shards[t->shard];
	rc = shard_open(w, s);
	if (rc < 0) {
		w->failed = true;
		return rc;
	}
	esz = zinf_st_dtype_size(t->dtype);
	off = s->data_begin + t->begin + elem_begin * esz;
	while (n_elems > 0) {
		uint64_t k = t->dtype == src_dtype ? n_elems : ST_STAGE_BYTES / esz;
		const void *buf = in;

		if (k > n_elems)
			k = n_elems;
		if (t->dtype != src_dtype) {
			zinf_st_convert(w->stage, t->dtype, in, src_dtype, k);
			buf = w->stage;
		}
		rc = st_pwrite_full(s->fd, buf, k * esz, off);
		if (rc < 0) {
			w->failed = true;
			return wr_fail(w, rc, "%s: tensor %s: write at offset %llu: %s",
				       s->tmp_path, t->name, (unsigned long long)off,
				       zinf_strerror(rc));
		}
		t->crc = zinf_crc32c(t->crc, buf, k * esz);
		in += k * zinf_st_dtype_size(src_dtype);
		off += k * esz;
		n_elems -= k;
		t->written_elems += k;
	}
	return 0;
}

static int name_cmp_idx(const void *a, const void *b, void *ctx)
{
	const struct zinf_st_writer *w = ctx;

	return strcmp(w->tensors[*(const int *)a].name, w->tensors[*(const int *)b].name);
}

/* Write text to dir/name through name.tmp + fsync + rename. */
static int write_file_atomic(struct zinf_st_writer *w, const char *name, const char *text,
			     size_t len)
{
	char *path = st_path_join(w->dir, name);
	int rc;

	if (!path)
		return wr_fail(w, -ENOMEM, "%s: no memory", w->dir);
	rc = st_write_file_atomic(path, text, len);
	if (rc < 0)
		wr_fail(w, rc, "%s: %s", path, zinf_strerror(rc));
	free(path);
	return rc;
}

static int write_index(struct zinf_st_writer *w)
{
	struct st_text x = {0};
	char name[ST_PREFIX_MAX + 32];
	uint64_t total = 0;
	int *order, rc;

	order = malloc((size_t)w->n_tensors * sizeof(int));
	if (!order)
		return wr_fail(w, -ENOMEM, "%s: no memory", w->dir);
	for (int i = 0; i < w->n_tensors; i++) {
		order[i] = i;
		total += w->tensors[i].nbytes;
	}
	qsort_r(order, (size_t)w->n_tensors, sizeof(int), name_cmp_idx, w);
	text_add(&x, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {\n",
		 (unsigned long long)total);
	for (int i = 0; i < w->n_tensors; i++) {
		const struct st_wtensor *t = &w->tensors[order[i]];

		text_add(&x, "    \"%s\": \"%s\"%s\n", t->name, w->shards[t->shard].name,
			 i + 1 < w->n_tensors ? "," : "");
	}
	text_add(&x, "  }\n}\n");
	free(order);
	if (x.oom) {
		free(x.p);
		return wr_fail(w, -ENOMEM, "%s: no memory for the index", w->dir);
	}
	snprintf(name, sizeof(name), "%s.safetensors.index.json", w->opts.prefix);
	rc = write_file_atomic(w, name, x.p, x.len);
	if (rc == 0) {
		snprintf(w->index_name, sizeof(w->index_name), "%s", name);
		w->index_bytes = x.len;
		w->index_crc = zinf_crc32c(0, x.p, x.len);
	}
	free(x.p);
	return rc;
}

static int file_order_cmp(const void *a, const void *b, void *ctx)
{
	const struct zinf_st_writer *w = ctx;
	const struct st_wtensor *x = &w->tensors[*(const int *)a],
				*y = &w->tensors[*(const int *)b];

	return x->shard != y->shard ? (x->shard > y->shard) - (x->shard < y->shard)
				    : (x->begin > y->begin) - (x->begin < y->begin);
}

/* Each shard's CRC32C from its header's and its tensors' (taken as they were written),
 * combined in file order: the checksum of the file without reading it back. */
static int shard_crcs(struct zinf_st_writer *w)
{
	int *order = malloc((size_t)w->n_tensors * sizeof(int));
	uint64_t at = 0;

	if (!order)
		return wr_fail(w, -ENOMEM, "%s: no memory", w->dir);
	for (int i = 0; i < w->n_tensors; i++)
		order[i] = i;
	qsort_r(order, (size_t)w->n_tensors, sizeof(int), file_order_cmp, w);
	for (int i = 0; i < w->n_tensors; i++) {
		const struct st_wtensor *t = &w->tensors[order[i]];
		struct st_wshard *s = &w->shards[t->shard];

		if (i == 0 || t->shard != w->tensors[order[i - 1]].shard)
			at = 0;
		if (t->begin != at) { /* the layout has no holes: the bytes checked are the file */
			free(order);
			return wr_fail(w, ZINF_ESTATE, "%s: tensor %s at %llu, expected %llu",
				       s->tmp_path, t->name, (unsigned long long)t->begin,
				       (unsigned long long)at);
		}
		s->crc = zinf_crc32c_combine(s->crc, t->crc, t->nbytes);
		at += t->nbytes;
	}
	free(order);
	return 0;
}

const char *zinf_st_writer_file(const struct zinf_st_writer *w, int i, uint64_t *bytes,
				uint32_t *crc)
{
	if (!w || !w->finished || i < 0 || i > w->n_shards ||
	    (i == w->n_shards && !w->index_name[0]))
		return NULL;
	if (i == w->n_shards) {
		*bytes = w->index_bytes;
		*crc = w->index_crc;
		return w->index_name;
	}
	*bytes = w->shards[i].data_begin + w->shards[i].data_bytes;
	*crc = w->shards[i].crc;
	return w->shards[i].name;
}

int zinf_st_writer_finish(struct zinf_st_writer *w)
{
	char stale[ST_PREFIX_MAX + 32], *stale_path;
	int rc;

	if (!w)
		return -EINVAL;
	if (w->failed || w->finished)
		return wr_fail(w, ZINF_ESTATE, "%s: writer has %s", w->dir,
			       w->finished ? "finished" : "failed");
	if (!w->laid_out) {
		rc = writer_layout(w);
		if (rc < 0)
			return rc;
	}
	for (int i = 0; i < w->n_tensors; i++) {
		const struct st_wtensor *t = &w->tensors[i];

		if (t->written_elems != t->n_elems)
			return wr_fail(w, ZINF_ESTATE,
				       "%s: tensor %s: %llu of %llu elements written",
				       w->shards[t->shard].tmp_path, t->name,
				       (unsigned long long)t->written_elems,
				       (unsigned long long)t->n_elems);
	}
	rc = shard_crcs(w);
	if (rc < 0)
		return rc;
	for (int i = 0; i < w->n_shards; i++) {
		struct st_wshard *s = &w->shards[i];

		rc = shard_open(w, s);
		if (rc < 0) {
			w->failed = true;
			return rc;
		}
		rc = fsync(s->fd) < 0 ? -errno : 0;
		if (close(s->fd) < 0 && rc == 0)
			rc = -errno;
		s->fd = -1;
		if (rc == 0 && rename(s->tmp_path, s->final_path) < 0)
			rc = -errno;
		if (rc < 0) {
			w->failed = true;
			return wr_fail(w, rc, "%s: %s", s->tmp_path, zinf_strerror(rc));
		}
		free(s->tmp_path); /* renamed: nothing to clean up any more */
		s->tmp_path = NULL;
	}
	if (w->n_shards > 1) {
		rc = write_index(w);
		if (rc < 0) {
			w->failed = true;
			return rc;
		}
	}
	snprintf(stale, sizeof(stale), "%s.safetensors%s", w->opts.prefix,
		 w->n_shards > 1 ? "" : ".index.json");
	stale_path = st_path_join(w->dir, stale);
	if (stale_path && unlink(stale_path) == 0)
		zinf_logf(ZINF_LOG_INFO, "%s: removed the stale %s", w->dir, stale);
	free(stale_path);
	rc = st_fsync_dir(w->dir);
	if (rc < 0) {
		w->failed = true;
		return wr_fail(w, rc, "%s: fsync of the directory: %s", w->dir, zinf_strerror(rc));
	}
	w->finished = true;
	return 0;
}
