/*
 * Hugging Face safetensors: a streaming reader and writer, and the bf16/fp16/fp32
 * conversions they use.
 *
 * File layout (little-endian): u64 N, then N bytes of JSON header, then the data
 * buffer. The header maps each tensor name to {"dtype", "shape", "data_offsets":
 * [begin, end)} (offsets relative to the data buffer) and may hold "__metadata__", an
 * object of strings. A sharded checkpoint adds model.safetensors.index.json whose
 * "weight_map" names the shard file of every tensor.
 *
 * The reader parses and validates every header at open (docs/formats.md lists the
 * checks) and then reads one tensor, or a range of its elements, at a time into a caller
 * buffer, converting to the dtype the caller asks for: a checkpoint is never held in
 * memory. The writer takes the list of tensors first (names, dtypes, shapes), lays them
 * out in shards of at most max_shard_bytes, and then accepts their data in pieces, in
 * any tensor order; finishing fsyncs every file and renames it into place, so a crash
 * never leaves a partial file under a final name.
 *
 * Errors: functions return 0 or a negative code (ZINF_EFORMAT for malformed files,
 * -errno for system errors, -EINVAL for bad arguments, ZINF_ESTATE for calls in the wrong
 * order) and keep a one-line message naming the file and the tensor in the handle's
 * last error. Threading: a handle is used by one thread at a time.
 */
#ifndef ZINF_MODEL_SAFETENSORS_H
#define ZINF_MODEL_SAFETENSORS_H

#include <stdbool.h>
#include <stdint.h>

/* Element types zinf reads and writes. A tensor of another safetensors dtype (I64, F64,
 * BOOL, ...) is listed as ZINF_ST_OTHER, its data never read: a checkpoint may carry one
 * the model does not use. */
enum zinf_st_dtype {
	ZINF_ST_BF16 = 0,
	ZINF_ST_F16 = 1,
	ZINF_ST_F32 = 2,
	ZINF_ST_OTHER = 3,
};

#define ZINF_ST_MAX_DIMS 8
/* Largest header the reader accepts (the safetensors format's own limit). */
#define ZINF_ST_MAX_HEADER_BYTES (100ull << 20)

/* "BF16", "F16" or "F32" (the header spelling); "?" for other values (OTHER too). */
const char *zinf_st_dtype_name(enum zinf_st_dtype dtype);
/* Bytes per element: 2, 2 or 4; 0 for other values (OTHER too). */
uint64_t zinf_st_dtype_size(enum zinf_st_dtype dtype);
/* Parse a header dtype ("BF16", "F16", "F32"). Returns 0 or -EINVAL. */
int zinf_st_dtype_parse(const char *text, enum zinf_st_dtype *out);

/* ---- conversions (round to nearest, ties to even; NaN stays NaN, overflow -> inf) ---- */

uint16_t zinf_st_f32_to_bf16(float f);
float zinf_st_bf16_to_f32(uint16_t h);
uint16_t zinf_st_f32_to_f16(float f);
float zinf_st_f16_to_f32(uint16_t h);
/* Convert n_elems elements from src (src_dtype) to dst (dst_dtype); src and dst must not
 * overlap unless the dtypes are equal and src == dst. A conversion between two 16-bit
 * types goes through fp32 (exact), so it rounds once. */
void zinf_st_convert(void *dst, enum zinf_st_dtype dst_dtype, const void *src,
		     enum zinf_st_dtype src_dtype, uint64_t n_elems);

/* ---- reader ---------------------------------------------------------------------------- */

struct zinf_st_tensor_info {
	const char *name;	  /* owned by the reader */
	enum zinf_st_dtype dtype; /* stored dtype */
	char dtype_text[8];	  /* the header's spelling ("I64" for an OTHER) */
	int ndim;		  /* 0 (a scalar) .. ZINF_ST_MAX_DIMS */
	uint64_t shape[ZINF_ST_MAX_DIMS];
	uint64_t n_elems;     /* product of shape (1 for a scalar) */
	uint64_t nbytes;      /* n_elems * zinf_st_dtype_size(dtype) */
	uint64_t file_offset; /* absolute byte offset of the data in its file */
	int file;	      /* index of its file, see zinf_st_reader_file_path() */
};

struct zinf_st_reader;

/* Create an empty reader. Returns 0 or -ENOMEM; free with zinf_st_reader_destroy(). */
int zinf_st_reader_create(struct zinf_st_reader **out);
/* Close every file and free r. NULL is a no-op. */
void zinf_st_reader_destroy(struct zinf_st_reader *r);

/* Open a checkpoint: path is a .safetensors file, a model.safetensors.index.json (or any
 * .json index), or a directory holding model.safetensors.index.json (preferred) or
 * model.safetensors. Parses and validates every header; for an index, every shard it
 * names must exist and hold every tensor mapped to it. Only one open per reader.
 * Returns 0, ZINF_EFORMAT, ZINF_EJSON, -errno; message in zinf_st_reader_last_error(). */
int zinf_st_reader_open(struct zinf_st_reader *r, const char *path);

/* Tensors in storage order (file, then offset): reading them in this order is
 * sequential I/O. */
int zinf_st_reader_count(const struct zinf_st_reader *r);
const struct zinf_st_tensor_info *zinf_st_reader_tensor(const struct zinf_st_reader *r, int i);
/* The tensor called name, or NULL (no error is recorded). */
const struct zinf_st_tensor_info *zinf_st_reader_find(const struct zinf_st_reader *r,
						      const char *name);
/* The entry file opened: the .safetensors file or the index ("" before open). */
const char *zinf_st_reader_path(const struct zinf_st_reader *r);
/* Files opened (1 for a single file, the shards for an index). */
int zinf_st_reader_file_count(const struct zinf_st_reader *r);
const char *zinf_st_reader_file_path(const struct zinf_st_reader *r, int file);

/* Read elements [elem_begin, elem_begin + n_elems) of tensor t (from this reader) into
 * dst, converted to dst_dtype; dst holds n_elems * zinf_st_dtype_size(dst_dtype) bytes.
 * Returns 0, -EINVAL (range outside the tensor), -EIO / ZINF_EFORMAT (short read: the
 * file changed since open). Allocates nothing, except a 1 MiB staging buffer on the
 * reader's first converting read. */
int zinf_st_reader_read_elems(struct zinf_st_reader *r, const struct zinf_st_tensor_info *t,
			      uint64_t elem_begin, uint64_t n_elems, void *dst,
			      enum zinf_st_dtype dst_dtype);
/* The whole tensor: zinf_st_reader_read_elems(r, t, 0, t->n_elems, dst, dst_dtype). */
int zinf_st_reader_read(struct zinf_st_reader *r, const struct zinf_st_tensor_info *t, void *dst,
			enum zinf_st_dtype dst_dtype);

/* The size (at open) and CRC32C of file (0 .. zinf_st_reader_file_count() - 1) as it is
 * on disk. The bytes that reads so far brought, a tensor's from its start in order, are
 * not read again: their checksum was taken as they came; the header, any gaps and the
 * rest are read now. So a caller that read every tensor whole checks the file against
 * a known CRC for the price of its header. Returns 0, -EINVAL, -EIO / ZINF_EFORMAT. */
int zinf_st_reader_file_crc(struct zinf_st_reader *r, int file, uint64_t *size, uint32_t *crc);

/* One line: the last error on r ("" if none). Valid until the next call on r. */
const char *zinf_st_reader_last_error(const struct zinf_st_reader *r);

/* ---- writer ---------------------------------------------------------------------------- */

struct zinf_st_writer_opts {
	/* Data bytes per shard at most (a larger tensor gets a shard of its own). When all
	 * tensors fit in one shard the output is PREFIX.safetensors without an index;
	 * otherwise PREFIX-0000K-of-0000N.safetensors + PREFIX.safetensors.index.json. */
	uint64_t max_shard_bytes; /* default 5 GB (5e9), as Hugging Face saves */
	/* File names: PREFIX.safetensors, or PREFIX-0000K-of-0000N.safetensors and
	 * PREFIX.safetensors.index.json; default "model" (1 to 64 characters, no '/') */
	const char *prefix;
};
void zinf_st_writer_opts_init(struct zinf_st_writer_opts *opts);

struct zinf_st_writer;

/* Create a writer for directory dir (which must exist). opts may be NULL (defaults).
 * Returns 0, -EINVAL (no such directory, a bad prefix) or -ENOMEM; on error *out is NULL. Free with zinf_st_writer_destroy(). */
int zinf_st_writer_create(struct zinf_st_writer **out, const char *dir,
			  const struct zinf_st_writer_opts *opts);
/* Free w; if zinf_st_writer_finish() did not succeed, remove the temporary files it wrote (the
 * final names are never touched). NULL is a no-op. */
void zinf_st_writer_destroy(struct zinf_st_writer *w);

/* Declare a tensor, before any data is written. Returns its index (>= 0) for
 * zinf_st_writer_write(), or -EINVAL (bad name or shape, duplicate name), ZINF_ESTATE
 * (data already written), -ENOMEM. */
int zinf_st_writer_add(struct zinf_st_writer *w, const char *name, enum zinf_st_dtype dtype,
		       int ndim, const uint64_t *shape);
/* Write elements [elem_begin, elem_begin + n_elems) of tensor index from src (in
 * src_dtype, converted to the declared dtype). Each tensor's pieces come in order:
 * elem_begin must equal the count written so far. The first write lays out the shards
 * and creates their temporary files; later adds are refused. Returns 0, -EINVAL, -errno. */
int zinf_st_writer_write(struct zinf_st_writer *w, int index, uint64_t elem_begin, uint64_t n_elems,
			 const void *src, enum zinf_st_dtype src_dtype);
/* Check every tensor was written in full, fsync and rename the shards into place, then
 * write the index (when sharded) the same way and fsync the directory. A stale entry
 * file of the other layout (PREFIX.safetensors vs the index) in dir is removed, so the
 * directory opens as what was just written. Returns 0, ZINF_ESTATE, -errno. */
int zinf_st_writer_finish(struct zinf_st_writer *w);
/* Shards of the layout (valid after the first write or finish). */
int zinf_st_writer_shard_count(const struct zinf_st_writer *w);
/* After zinf_st_writer_finish() succeeded: the name of the i-th file it wrote (the
 * shards in order, then the index when there are two shards or more), with its size and
 * CRC32C, taken from the bytes as they were written (nothing is read back); NULL for i
 * past the last, or before the finish. */
const char *zinf_st_writer_file(const struct zinf_st_writer *w, int i, uint64_t *bytes,
				uint32_t *crc);

/* One line: the last error on w ("" if none). */
const char *zinf_st_writer_last_error(const struct zinf_st_writer *w);

#endif /* ZINF_MODEL_SAFETENSORS_H */
