/*
 * Hugging Face safetensors reader and writer (see safetensors.h and docs/formats.md).
 *
 * Reader: every header is validated before anything is read (dtype, shape, offsets
 * inside the data buffer, byte size = elements x dtype size, no two tensors overlapping,
 * no duplicate names), so a read never leaves the file. Data is read with pread, straight
 * into the caller's buffer when the dtypes match, else through a fixed staging buffer.
 *
 * Writer: tensors are declared first; the first write lays them out (shards filled in
 * declaration order, within a shard the wider dtypes first so every tensor is aligned to
 * its element size with no holes, as the safetensors library requires), writes each
 * shard's header to NAME.tmp and presizes it. Pieces are pwritten at their offsets.
 * finish() fsyncs and renames each shard, then the index, then fsyncs the directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "safetensors.h"
#include "zinf/error.h"
#include "zinf/log.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "safetensors data is little-endian; this code reads it in place");

#define ST_STAGE_BYTES (1u << 20) /* conversion staging buffer, per handle */
#define ST_ERR_BYTES 1024
#define ST_MAX_DIM (1ull << 48)		   /* any larger dimension is corrupt */
#define ST_MAX_JSON_INT 9007199254740992.0 /* 2^53: integers exact in a double */

/* ---- dtypes and conversions ---------------------------------------------------------- */

const char *zinf_st_dtype_name(enum zinf_st_dtype dtype)
{
	switch (dtype) {
	case ZINF_ST_BF16:
		return "BF16";
	case ZINF_ST_F16:
		return "F16";
	case ZINF_ST_F32:
		return "F32";
	}
	return "?";
}

uint64_t zinf_st_dtype_size(enum zinf_st_dtype dtype)
{
	switch (dtype) {
	case ZINF_ST_BF16:
	case ZINF_ST_F16:
		return 2;
	case ZINF_ST_F32:
		return 4;
	}
	return 0;
}

int zinf_st_dtype_parse(const char *text, enum zinf_st_dtype *out)
{
	static const enum zinf_st_dtype all[] = {ZINF_ST_BF16, ZINF_ST_F16, ZINF_ST_F32};

	for (size_t i = 0; text && i < sizeof(all) / sizeof(all[0]); i++) {
		if (strcmp(text, zinf_st_dtype_name(all[i])) == 0) {
			*out = all[i];
			return 0;
		}
	}
	return -EINVAL;
}

static uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

uint16_t zinf_st_f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);

	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep the sign, make it quiet */
		return (uint16_t)((u >> 16) | 0x0040u);
	u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
	return (uint16_t)(u >> 16);
}

float zinf_st_bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

uint16_t zinf_st_f32_to_f16(float f)
{
	uint32_t u = f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);

	u &= 0x7fffffffu;
	if (u > 0x7f800000u)
		return sign | 0x7e00u; /* NaN */
	if (u >= 0x477ff000u)	       /* >= 65520: rounds past the largest half, 65504 */
		return sign | 0x7c00u;
	if (u < 0x38800000u) {	      /* below 2^-14: a half subnormal, in units of 2^-24 */
		if (u <= 0x33000000u) /* <= 2^-25: rounds to zero (2^-25 ties to even 0) */
			return sign;
		uint32_t exp = u >> 23;
		uint32_t mant = (u & 0x7fffffu) | 0x800000u;
		uint32_t shift = 126 - exp; /* 14..24 */
		uint32_t q = mant >> shift;
		uint32_t rem = mant & ((1u << shift) - 1);
		uint32_t half = 1u << (shift - 1);

		if (rem > half || (rem == half && (q & 1u)))
			q++; /* may carry into the smallest normal, which encodes right */
		return sign | (uint16_t)q;
	}
	u += 0xfffu + ((u >> 13) & 1u); /* round at bit 13, ties to even */
	u -= 112u << 23;		/* rebias the exponent: 127 -> 15 */
	return sign | (uint16_t)(u >> 13);
}

float zinf_st_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t mant = h & 0x3ffu;

	if (exp == 0) {
		float v = (float)mant * 0x1p-24f; /* exact: at most 10 significant bits */
		return (sign ? -v : v);
	}
	if (exp == 31)
		return bits_f32(sign | 0x7f800000u | (mant << 13));
	return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

static inline float load_f32(const void *src, enum zinf_st_dtype dtype, uint64_t i)
{
	switch (dtype) {
	case ZINF_ST_BF16:
		return zinf_st_bf16_to_f32(((const uint16_t *)src)[i]);
	case ZINF_ST_F16:
		return zinf_st_f16_to_f32(((const uint16_t *)src)[i]);
	case ZINF_ST_F32:
		return ((const float *)src)[i];
	}
	return 0.0f;
}

static inline void store_f32(void *dst, enum zinf_st_dtype dtype, uint64_t i, float v)
{
	switch (dtype) {
	case ZINF_ST_BF16:
		((uint16_t *)dst)[i] = zinf_st_f32_to_bf16(v);
		break;
	case ZINF_ST_F16:
		((uint16_t *)dst)[i] = zinf_st_f32_to_f16(v);
		break;
	case ZINF_ST_F32:
		((float *)dst)[i] = v;
		break;
	}
}

void zinf_st_convert(void *dst, enum zinf_st_dtype dst_dtype, const void *src,
		     enum zinf_st_dtype src_dtype, uint64_t n_elems)
{
	const uint16_t *s16 = src;
	const float *s32 = src;
	uint16_t *d16 = dst;
	float *d32 = dst;

	if (dst_dtype == src_dtype) {
		if (dst != src)
			memcpy(dst, src, n_elems * zinf_st_dtype_size(src_dtype));
		return;
	}
	/* The common pairs get loops of their own, which the compiler vectorises. */
	if (src_dtype == ZINF_ST_BF16 && dst_dtype == ZINF_ST_F32) {
		for (uint64_t i = 0; i < n_elems; i++)
			d32[i] = bits_f32((uint32_t)s16[i] << 16);
	} else if (src_dtype == ZINF_ST_F32 && dst_dtype == ZINF_ST_BF16) {
		for (uint64_t i = 0; i < n_elems; i++)
			d16[i] = zinf_st_f32_to_bf16(s32[i]);
	} else if (src_dtype == ZINF_ST_F16 && dst_dtype == ZINF_ST_F32) {
		for (uint64_t i = 0; i < n_elems; i++)
			d32[i] = zinf_st_f16_to_f32(s16[i]);
	} else if (src_dtype == ZINF_ST_F32 && dst_dtype == ZINF_ST_F16) {
		for (uint64_t i = 0; i < n_elems; i++)
			d16[i] = zinf_st_f32_to_f16(s32[i]);
	} else {
		for (uint64_t i = 0; i < n_elems; i++)
			store_f32(dst, dst_dtype, i, load_f32(src, src_dtype, i));
	}
}

static bool dtype_valid(enum zinf_st_dtype dtype)
{
	return zinf_st_dtype_size(dtype) != 0;
}

/* a * b into *out; false on overflow. */
static bool mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

/* ---- file I/O ---------------------------------------------------------------------------- */

/* Read exactly len bytes at off. Returns 0, -errno, or ZINF_EFORMAT at end of file. */
static int pread_full(int fd, void *buf, uint64_t len, uint64_t off)
{
	char *p = buf;

	while (len > 0) {
		size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
		ssize_t n = pread(fd, p, chunk, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return ZINF_EFORMAT;
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

static int pwrite_full(int fd, const void *buf, uint64_t len, uint64_t off)
{
	const char *p = buf;

	while (len > 0) {
		size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
		ssize_t n = pwrite(fd, p, chunk, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return 0;
}

static char *path_join(const char *dir, const char *name)
{
	char *p = NULL;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	return p;
}

/* The directory part of path ("." when there is none). */
static char *path_dir(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0 && errno != EINVAL) /* some file systems refuse fsync on a dir */
		rc = -errno;
	close(fd);
	return rc;
}

/* ---- reader ------------------------------------------------------------------------------ */

struct st_file {
	char *path;
	int fd;
	uint64_t size;	     /* bytes, at open */
	uint64_t data_begin; /* 8 + header length */
};

struct zinf_st_reader {
	char *path; /* the entry file: the single file or the index */
	struct st_file *files;
	int n_files;
	struct zinf_st_tensor_info *tensors; /* storage order */
	int n_tensors;
	int *by_name; /* tensor indices sorted by name, for zinf_st_reader_find */
	bool opened;
	void *stage; /* ST_STAGE_BYTES, allocated on the first converting read */
	char last_error[ST_ERR_BYTES];
};

__attribute__((format(printf, 3, 4))) static int rd_fail(struct zinf_st_reader *r, int code,
							 const char *fmt, ...)
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
	r->tensors = NULL;
	r->by_name = NULL;
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
		return rd_fail(
			r, ZINF_EFORMAT,
			"%s: \"__metadata__\" is not an object (expected string keys and values)",
			path);
	cJSON_ArrayForEach(kv, meta)
	{
		if (!cJSON_IsString(kv))
			return rd_fail(r, ZINF_EFORMAT,
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
		return rd_fail(
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
			return rd_fail(
				r, ZINF_EFORMAT,
				"%s: tensor %s: unexpected or repeated key \"%s\" (expected dtype, shape, data_offsets)",
				path, name, kv->string);
	}
	if (!dtype || !shape || !offs)
		return rd_fail(r, ZINF_EFORMAT, "%s: tensor %s: missing \"%s\"", path, name,
			       !dtype	? "dtype"
			       : !shape ? "shape"
					: "data_offsets");
	if (!cJSON_IsString(dtype))
		return rd_fail(r, ZINF_EFORMAT, "%s: tensor %s: dtype is not a string", path, name);
	if (zinf_st_dtype_parse(dtype->valuestring, &e->dtype) < 0)
		return rd_fail(
			r, ZINF_EFORMAT,
			"%s: tensor %s: dtype \"%.32s\" is not supported (expected BF16, F16 or F32)",
			path, name, dtype->valuestring);
	if (!cJSON_IsArray(shape))
		return rd_fail(r, ZINF_EFORMAT, "%s: tensor %s: shape is not an array of integers",
			       path, name);
	n = cJSON_GetArraySize(shape);
	if (n > ZINF_ST_MAX_DIMS)
		return rd_fail(r, ZINF_EFORMAT,
			       "%s: tensor %s: shape has %d dimensions (expected at most %d)", path,
			       name, n, ZINF_ST_MAX_DIMS);
	e->ndim = 0;
	e->n_elems = 1;
	cJSON_ArrayForEach(dim, shape)
	{
		uint64_t d;

		if (!json_uint(dim, &d) || d > ST_MAX_DIM)
			return rd_fail(
				r, ZINF_EFORMAT,
				"%s: tensor %s: shape[%d] is not a non-negative integer below 2^48",
				path, name, e->ndim);
		if (!mul_u64(e->n_elems, d, &e->n_elems))
			return rd_fail(r, ZINF_EFORMAT,
				       "%s: tensor %s: shape overflows 64 bits of elements", path,
				       name);
		e->shape[e->ndim++] = d;
	}
	if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
	    !json_uint(cJSON_GetArrayItem(offs, 0), &e->begin) ||
	    !json_uint(cJSON_GetArrayItem(offs, 1), &e->end))
		return rd_fail(
			r, ZINF_EFORMAT,
			"%s: tensor %s: data_offsets is not [begin, end] of non-negative integers",
			path, name);
	if (e->begin > e->end)
		return rd_fail(
			r, ZINF_EFORMAT,
			"%s: tensor %s: data_offsets [%llu, %llu] are reversed (expected begin <= end)",
			path, name, (unsigned long long)e->begin, (unsigned long long)e->end);
	if (e->end > data_bytes)
		return rd_fail(
			r, ZINF_EFORMAT,
			"%s: tensor %s: data_offsets [%llu, %llu] end past the data buffer of %llu bytes",
			path, name, (unsigned long long)e->begin, (unsigned long long)e->end,
			(unsigned long long)data_bytes);
	esz = zinf_st_dtype_size(e->dtype);
	if (!mul_u64(e->n_elems, esz, &nbytes) || nbytes != e->end - e->begin)
		return rd_fail(
			r, ZINF_EFORMAT,
			"%s: tensor %s: data_offsets [%llu, %llu] hold %llu bytes but shape x %s needs %llu x %llu",
			path, name, (unsigned long long)e->begin, (unsigned long long)e->end,
			(unsigned long long)(e->end - e->begin), zinf_st_dtype_name(e->dtype),
			(unsigned long long)e->n_elems, (unsigned long long)esz);
	return 0;
}

/* Read and check path's header length. */
static int read_header_len(struct zinf_st_reader *r, struct st_file *f, uint64_t *hlen)
{
	unsigned char b[8];
	int rc;

	if (f->size < 8)
		return rd_fail(
			r, ZINF_EFORMAT,
			"%s: file is %llu bytes (expected at least the 8-byte header length)",
			f->path, (unsigned long long)f->size);
	rc = pread_full(f->fd, b, 8, 0);
	if (rc < 0)
		return rd_fail(r, rc, "%s: reading the header length: %s", f->path,
			       zinf_strerror(rc));
	*hlen = 0;
	for (int i = 7; i >= 0; i--)
		*hlen = (*hlen << 8) | b[i];
	if (*hlen > ZINF_ST_MAX_HEADER_BYTES)
		return rd_fail(r, ZINF_EFORMAT,
			       "%s: header length %llu exceeds the %llu-byte limit (corrupt file?)",
			       f->path, (unsigned long long)*hlen,
			       (unsigned long long)ZINF_ST_MAX_HEADER_BYTES);
	if (*hlen > f->size - 8)
		return rd_fail(r, ZINF_EFORMAT,
			       "%s: header length %llu runs past the end of the file (%llu bytes)",
			       f->path, (unsigned long long)*hlen, (unsigned long long)f->size);
	if (*hlen < 2)
		return rd_fail(r, ZINF_EFORMAT,
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
	const char *end = NULL;
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
		return rd_fail(r, -ENOMEM, "%s: no memory for a %llu-byte header", f->path,
			       (unsigned long long)hlen);
	rc = pread_full(f->fd, text, hlen, 8);
	if (rc < 0) {
		rc = rd_fail(r, rc, "%s: reading the header: %s", f->path, zinf_strerror(rc));
		goto out_text;
	}
	text[hlen] = '\0';
	if (text[0] != '{') {
		rc = rd_fail(r, ZINF_EFORMAT,
			     "%s: header does not start with '{' (expected a JSON object)",
			     f->path);
		goto out_text;
	}
	root = cJSON_ParseWithLengthOpts(text, hlen, &end, 0);
	if (!root) {
		const char *at = cJSON_GetErrorPtr();
		uint64_t pos = at && at >= text && at <= text + hlen ? (uint64_t)(at - text) : 0;

		rc = rd_fail(r, ZINF_EFORMAT, "%s: header is not valid JSON (error near byte %llu)",
			     f->path, (unsigned long long)(8 + pos));
		goto out_text;
	}
	for (const char *p = end; p && p < text + hlen; p++) {
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
			rc = rd_fail(
				r, ZINF_EFORMAT,
				"%s: header has bytes after its JSON object at byte %llu (expected space padding)",
				f->path, (unsigned long long)(8 + (uint64_t)(p - text)));
			goto out_root;
		}
	}
	if (!cJSON_IsObject(root)) {
		rc = rd_fail(r, ZINF_EFORMAT, "%s: header is not a JSON object", f->path);
		goto out_root;
	}
	cap = cJSON_GetArraySize(root);
	e = calloc((size_t)cap + 1, sizeof(*e));
	if (!e) {
		rc = rd_fail(r, -ENOMEM, "%s: no memory for %d header entries", f->path, cap);
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
			rc = rd_fail(r, ZINF_EFORMAT, "%s: a tensor has an empty name", f->path);
			goto out_entries;
		}
		e[n].name = strdup(kv->string);
		if (!e[n].name) {
			rc = rd_fail(r, -ENOMEM, "%s: no memory", f->path);
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
			rc = rd_fail(r, ZINF_EFORMAT, "%s: tensor %s appears twice in the header",
				     f->path, e[i].name);
			goto out_entries;
		}
	}
	qsort(e, (size_t)n, sizeof(*e), entry_cmp_begin);
	for (int i = 1; i < n; i++) {
		if (e[i].begin < e[i - 1].end) {
			rc = rd_fail(
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

static int file_open(struct zinf_st_reader *r, struct st_file *f, const char *path)
{
	struct stat st;

	f->fd = -1;
	f->path = strdup(path);
	if (!f->path)
		return rd_fail(r, -ENOMEM, "%s: no memory", path);
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0)
		return rd_fail(r, -errno, "%s: cannot open: %s", path, strerror(errno));
	if (fstat(f->fd, &st) < 0)
		return rd_fail(r, -errno, "%s: cannot stat: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return rd_fail(r, -EINVAL, "%s: not a regular file", path);
	f->size = (uint64_t)st.st_size;
	return 0;
}

static int add_file(struct zinf_st_reader *r, const char *path)
{
	struct st_file *files = realloc(r->files, (size_t)(r->n_files + 1) * sizeof(*files));

	if (!files)
		return rd_fail(r, -ENOMEM, "%s: no memory", path);
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
		return rd_fail(r, -ENOMEM, "%s: no memory", r->files[file].path);
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
		return rd_fail(r, -ENOMEM, "no memory for the tensor index");
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
		rc = rd_fail(r, ZINF_EFORMAT, "%s: %llu bytes is larger than the %llu-byte limit",
			     path, (unsigned long long)f.size, (unsigned long long)limit);
		goto out;
	}
	*text = malloc(f.size + 1);
	if (!*text) {
		rc = rd_fail(r, -ENOMEM, "%s: no memory", path);
		goto out;
	}
	rc = pread_full(f.fd, *text, f.size, 0);
	if (rc < 0) {
		rc = rd_fail(r, rc, "%s: read failed: %s", path, zinf_strerror(rc));
		free(*text);
		*text = NULL;
		goto out;
	}
	(*text)[f.size] = '\0';
out:
	if (f.fd >= 0)
		close(f.fd);
	free(f.path);
	return rc;
}

/* One parsed shard while an index is being opened. */
struct st_shard_entries {
	struct st_entry *e; /* sorted by name after parsing */
	int n;
};

static int open_index(struct zinf_st_reader *r, const char *index_path)
{
	struct st_shard_entries *shards = NULL;
	const cJSON *map, *kv;
	cJSON *root = NULL;
	char *dir = NULL, *text;
	int rc = 0;

	rc = read_small_file(r, index_path, ZINF_ST_MAX_HEADER_BYTES, &text);
	if (rc < 0)
		return rc;
	root = cJSON_Parse(text);
	free(text);
	if (!root || !cJSON_IsObject(root)) {
		rc = rd_fail(r, ZINF_EJSON, "%s: not a JSON object", index_path);
		goto out;
	}
	map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
	if (!cJSON_IsObject(map) || !map->child) {
		rc = rd_fail(
			r, ZINF_EFORMAT,
			"%s: weight_map: missing or empty (expected an object mapping tensor names to shard files)",
			index_path);
		goto out;
	}
	dir = path_dir(index_path);
	if (!dir) {
		rc = rd_fail(r, -ENOMEM, "%s: no memory", index_path);
		goto out;
	}
	/* Open the shards in the order their names sort, each once. */
	cJSON_ArrayForEach(kv, map)
	{
		bool seen = false;
		char *path;

		if (!cJSON_IsString(kv) || !shard_name_ok(kv->valuestring)) {
			rc = rd_fail(
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
		path = path_join(dir, kv->valuestring);
		if (!path) {
			rc = rd_fail(r, -ENOMEM, "%s: no memory", index_path);
			goto out;
		}
		rc = add_file(r, path);
		free(path);
		if (rc < 0) {
			char inner[ST_ERR_BYTES / 2];

			snprintf(inner, sizeof(inner), "%.500s", r->last_error);
			rc = rd_fail(r, rc, "%s: weight_map: tensor %s: shard %s", index_path,
				     kv->string, inner);
			goto out;
		}
	}
	shards = calloc((size_t)r->n_files, sizeof(*shards));
	if (!shards) {
		rc = rd_fail(r, -ENOMEM, "%s: no memory", index_path);
		goto out;
	}
	for (int i = 0; i < r->n_files; i++) {
		rc = parse_header(r, &r->files[i], &shards[i].e, &shards[i].n);
		if (rc < 0)
			goto out;
	}
	/* Every weight_map entry must be in its shard; duplicates in the map are errors. */
	cJSON_ArrayForEach(kv, map)
	{
		struct st_entry key = {.name = kv->string}, *hit = NULL;
		int file = 0;

		for (; file < r->n_files; file++) {
			const char *base = strrchr(r->files[file].path, '/');

			if (strcmp(base ? base + 1 : r->files[file].path, kv->valuestring) == 0)
				break;
		}
		for (int i = 0; i < shards[file].n && !hit; i++)
			if (shards[file].e[i].name && strcmp(shards[file].e[i].name, key.name) == 0)
				hit = &shards[file].e[i];
		if (!hit) {
			for (int i = 0; i < r->n_tensors && !hit; i++)
				if (strcmp(r->tensors[i].name, key.name) == 0)
					rc = rd_fail(r, ZINF_EFORMAT,
						     "%s: weight_map: tensor %s is listed twice",
						     index_path, key.name);
			if (rc == 0)
				rc = rd_fail(r, ZINF_EFORMAT,
					     "%s: weight_map: tensor %s: not found in shard %s",
					     index_path, key.name, r->files[file].path);
			goto out;
		}
		rc = reader_push(r, hit, file);
		if (rc < 0)
			goto out;
	}
out:
	for (int i = 0; shards && i < r->n_files; i++)
		entries_free(shards[i].e, shards[i].n);
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
		return rd_fail(r, ZINF_ESTATE, "%s: this reader already holds a checkpoint", path);
	if (stat(path, &st) < 0)
		return rd_fail(r, -errno, "%s: %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		entry = path_join(path, "model.safetensors.index.json");
		if (entry && access(entry, F_OK) != 0) {
			free(entry);
			entry = path_join(path, "model.safetensors");
			if (entry && access(entry, F_OK) != 0) {
				free(entry);
				return rd_fail(
					r, -ENOENT,
					"%s: no model.safetensors.index.json or model.safetensors in this directory",
					path);
			}
		}
		if (!entry)
			return rd_fail(r, -ENOMEM, "%s: no memory", path);
		path = entry;
	}
	r->opened = true;
	r->path = strdup(path);
	if (!r->path)
		rc = rd_fail(r, -ENOMEM, "%s: no memory", path);
	else if (ends_with(path, ".json"))
		rc = open_index(r, path);
	else
		rc = open_single(r, path);
	if (rc == 0) {
		qsort(r->tensors, (size_t)r->n_tensors, sizeof(*r->tensors), tensor_cmp_storage);
		rc = build_name_index(r);
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

int zinf_st_reader_read_elems(struct zinf_st_reader *r, const struct zinf_st_tensor_info *t,
			      uint64_t elem_begin, uint64_t n_elems, void *dst,
			      enum zinf_st_dtype dst_dtype)
{
	uint64_t esz, dsz, off, chunk_elems;
	const struct st_file *f;
	char *out = dst;
	int rc;

	if (!r || !t || t < r->tensors || t >= r->tensors + r->n_tensors)
		return r ? rd_fail(r, -EINVAL, "read: tensor is not from this reader") : -EINVAL;
	if (!dtype_valid(dst_dtype))
		return rd_fail(r, -EINVAL,
			       "tensor %s: destination dtype %d is not BF16, F16 or F32", t->name,
			       (int)dst_dtype);
	if (elem_begin > t->n_elems || n_elems > t->n_elems - elem_begin)
		return rd_fail(r, -EINVAL,
			       "tensor %s: elements [%llu, +%llu) are outside its %llu elements",
			       t->name, (unsigned long long)elem_begin, (unsigned long long)n_elems,
			       (unsigned long long)t->n_elems);
	if (n_elems && !dst)
		return rd_fail(r, -EINVAL, "tensor %s: destination is NULL", t->name);
	if (t->dtype != dst_dtype && !r->stage) {
		r->stage = malloc(ST_STAGE_BYTES); /* once per reader, on the first conversion */
		if (!r->stage)
			return rd_fail(r, -ENOMEM, "tensor %s: no memory for conversion", t->name);
	}
	f = &r->files[t->file];
	esz = zinf_st_dtype_size(t->dtype);
	dsz = zinf_st_dtype_size(dst_dtype);
	off = t->file_offset + elem_begin * esz;
	chunk_elems = t->dtype == dst_dtype ? n_elems : ST_STAGE_BYTES / esz;
	while (n_elems > 0) {
		uint64_t k = n_elems < chunk_elems ? n_elems : chunk_elems;
		void *buf = t->dtype == dst_dtype ? (void *)out : r->stage;

		rc = pread_full(f->fd, buf, k * esz, off);
		if (rc == ZINF_EFORMAT)
			return rd_fail(
				r, rc,
				"%s: tensor %s: short read at offset %llu (file shrank since it was opened?)",
				f->path, t->name, (unsigned long long)off);
		if (rc < 0)
			return rd_fail(r, rc, "%s: tensor %s: read at offset %llu: %s", f->path,
				       t->name, (unsigned long long)off, zinf_strerror(rc));
		if (buf != out)
			zinf_st_convert(out, dst_dtype, buf, t->dtype, k);
		out += k * dsz;
		off += k * esz;
		n_elems -= k;
	}
	return 0;
}

int zinf_st_reader_read(struct zinf_st_reader *r, const struct zinf_st_tensor_info *t, void *dst,
			enum zinf_st_dtype dst_dtype)
{
	if (!t)
		return r ? rd_fail(r, -EINVAL, "read: tensor is NULL") : -EINVAL;
	return zinf_st_reader_read_elems(r, t, 0, t->n_elems, dst, dst_dtype);
}

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
};

struct st_wshard {
	char *name; /* final file name */
	char *final_path, *tmp_path;
	int fd;
	uint64_t data_begin; /* 8 + padded header length */
	uint64_t data_bytes;
};

struct zinf_st_writer {
	char *dir;
	struct zinf_st_writer_opts opts;
	struct st_wtensor *tensors;
	int n_tensors, cap_tensors;
	struct st_wshard *shards;
	int n_shards;
	bool laid_out, finished, failed;
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
	if (!dtype_valid(dtype))
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
		if (shape[i] > ST_MAX_DIM || !mul_u64(t->n_elems, shape[i], &t->n_elems))
			return wr_fail(w, -EINVAL, "%s: tensor %s: shape[%d] = %llu is too large",
				       w->dir, name, i, (unsigned long long)shape[i]);
		t->shape[i] = shape[i];
	}
	if (!mul_u64(t->n_elems, zinf_st_dtype_size(dtype), &t->nbytes))
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
	rc = pwrite_full(s->fd, len8, 8, 0);
	if (rc == 0)
		rc = pwrite_full(s->fd, h.p, hlen, 8);
	free(h.p);
	if (rc == 0 && ftruncate(s->fd, (off_t)(s->data_begin + s->data_bytes)) < 0)
		rc = -errno;
	if (rc < 0)
		return wr_fail(w, rc, "%s: writing the header: %s", s->tmp_path, zinf_strerror(rc));
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
		if (n_shards == 1)
			sh->name = strdup("model.safetensors");
		else if (asprintf(&sh->name, "model-%05d-of-%05d.safetensors", s + 1, n_shards) < 0)
			sh->name = NULL;
		sh->final_path = sh->name ? path_join(w->dir, sh->name) : NULL;
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
	if (!dtype_valid(src_dtype) || (n_elems && !src))
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
		rc = pwrite_full(s->fd, buf, k * esz, off);
		if (rc < 0) {
			w->failed = true;
			return wr_fail(w, rc, "%s: tensor %s: write at offset %llu: %s",
				       s->tmp_path, t->name, (unsigned long long)off,
				       zinf_strerror(rc));
		}
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
	char *path = path_join(w->dir, name), *tmp = NULL;
	int fd = -1, rc = 0;

	if (!path || asprintf(&tmp, "%s.tmp", path) < 0) {
		free(path);
		return wr_fail(w, -ENOMEM, "%s: no memory", w->dir);
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		rc = -errno;
	if (rc == 0)
		rc = pwrite_full(fd, text, len, 0);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0 && close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0) {
		unlink(tmp);
		wr_fail(w, rc, "%s: %s", tmp, zinf_strerror(rc));
	}
	free(tmp);
	free(path);
	return rc;
}

static int write_index(struct zinf_st_writer *w)
{
	struct st_text x = {0};
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
	rc = write_file_atomic(w, "model.safetensors.index.json", x.p, x.len);
	free(x.p);
	return rc;
}

int zinf_st_writer_finish(struct zinf_st_writer *w)
{
	const char *stale;
	char *stale_path;
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
	for (int i = 0; i < w->n_shards; i++) {
		struct st_wshard *s = &w->shards[i];

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
	stale = w->n_shards > 1 ? "model.safetensors" : "model.safetensors.index.json";
	stale_path = path_join(w->dir, stale);
	if (stale_path && unlink(stale_path) == 0)
		zinf_logf(ZINF_LOG_INFO, "%s: removed the stale %s", w->dir, stale);
	free(stale_path);
	rc = fsync_dir(w->dir);
	if (rc < 0) {
		w->failed = true;
		return wr_fail(w, rc, "%s: fsync of the directory: %s", w->dir, zinf_strerror(rc));
	}
	w->finished = true;
	return 0;
}
