/*
 * safetensors internals shared by the reader (safetensors_read.c opens a checkpoint,
 * safetensors_read_data.c reads its tensors), the writer (safetensors_write.c) and the
 * dtype conversions and file helpers (safetensors_common.c). See safetensors.h and docs/formats.md.
 */
#ifndef ZINF_MODEL_SAFETENSORS_INTERNAL_H
#define ZINF_MODEL_SAFETENSORS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "safetensors data is little-endian; this code reads it in place");

#define ST_STAGE_BYTES (1u << 20) /* conversion staging buffer, per handle */
#define ST_ERR_BYTES 1024
#define ST_PREFIX_MAX 64		   /* longest file name prefix of a writer */
#define ST_MAX_DIM (1ull << 48)		   /* any larger dimension is corrupt */
#define ST_MAX_JSON_INT 9007199254740992.0 /* 2^53: integers exact in a double */

bool st_dtype_valid(enum zinf_st_dtype dtype);
/* Bytes per element of a safetensors dtype zinf does not read (I64, F64, BOOL, ...: an
 * OTHER tensor's), or 0 when text names none. */
uint64_t st_other_dtype_size(const char *text);
bool st_mul_u64(uint64_t a, uint64_t b, uint64_t *out);
int st_pread_full(int fd, void *buf, uint64_t len, uint64_t off);
int st_pwrite_full(int fd, const void *buf, uint64_t len, uint64_t off);
char *st_path_join(const char *dir, const char *name);
char *st_path_dir(const char *path);
int st_fsync_dir(const char *dir);
/* text (len bytes) into path through path.tmp: written whole, fsynced, renamed over
 * path; the directory is not synced (st_fsync_dir). 0, or a negative errno with path
 * untouched and path.tmp removed. */
int st_write_file_atomic(const char *path, const char *text, size_t len);

/* ---- the reader's handle -------------------------------------------------------------- */

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
	/* (n_tensors) CRC32C of each tensor's first crc_elems elements, as reads from its
	 * start in order brought them: zinf_st_reader_file_crc then reads only the rest */
	uint32_t *crc;
	uint64_t *crc_elems;
	bool opened;
	void *stage; /* ST_STAGE_BYTES, allocated on the first converting read */
	char last_error[ST_ERR_BYTES];
};

/* Record the reader's one-line last error (and log it at debug); returns code. */
__attribute__((format(printf, 3, 4))) int st_rd_fail(struct zinf_st_reader *r, int code,
						     const char *fmt, ...);

#endif /* ZINF_MODEL_SAFETENSORS_INTERNAL_H */
