/* safetensors dtypes, conversions (round to nearest even) and file helpers. */
#include "safetensors_internal.h"
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
	case ZINF_ST_OTHER:
		break;
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
	case ZINF_ST_OTHER:
		break;
	}
	return 0;
}

uint64_t st_other_dtype_size(const char *text)
{
	static const struct {
		const char *name;
		uint64_t size;
	} other[] = {
		{"BOOL", 1}, {"U8", 1},	 {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2},
		{"U16", 2},  {"I32", 4}, {"U32", 4}, {"I64", 8},     {"U64", 8},     {"F64", 8},
	};

	for (size_t i = 0; text && i < sizeof(other) / sizeof(other[0]); i++)
		if (strcmp(text, other[i].name) == 0)
			return other[i].size;
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
	case ZINF_ST_OTHER:
		break;
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
	case ZINF_ST_OTHER:
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

bool st_dtype_valid(enum zinf_st_dtype dtype)
{
	return zinf_st_dtype_size(dtype) != 0;
}

/* a * b into *out; false on overflow. */
bool st_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

/* ---- file I/O ---------------------------------------------------------------------------- */

/* Read exactly len bytes at off. Returns 0, -errno, or ZINF_EFORMAT at end of file. */
int st_pread_full(int fd, void *buf, uint64_t len, uint64_t off)
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

int st_pwrite_full(int fd, const void *buf, uint64_t len, uint64_t off)
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

char *st_path_join(const char *dir, const char *name)
{
	char *p = NULL;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	return p;
}

/* The directory part of path ("." when there is none). */
char *st_path_dir(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return strdup(".");
	if (slash == path)
		return strdup("/");
	return strndup(path, (size_t)(slash - path));
}

int st_fsync_dir(const char *dir)
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

int st_write_file_atomic(const char *path, const char *text, size_t len)
{
	char *tmp = NULL;
	int fd, rc = 0;

	if (asprintf(&tmp, "%s.tmp", path) < 0)
		return -ENOMEM;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		rc = -errno;
	if (rc == 0)
		rc = st_pwrite_full(fd, text, len, 0);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0 && close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0)
		unlink(tmp);
	free(tmp);
	return rc;
}
