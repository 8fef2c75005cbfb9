/*
 * Hugging Face safetensors reader, reading tensor data (see safetensors.h): pread straight
 * into the caller's buffer when the dtypes match, else through a fixed staging buffer;
 * each tensor read from its start in order is checksummed on the way, so that a file's
 * CRC32C afterwards reads only what was not read (zinf_st_reader_file_crc). Opening a
 * checkpoint is safetensors_read.c.
 */
#include "safetensors_internal.h"
#include "zinf/crc32c.h"
#include "zinf/error.h"
#include <errno.h>
#include <stdlib.h>

/* The reader's staging buffer, allocated on first use (once per reader). */
static int stage_get(struct zinf_st_reader *r, const char *what)
{
	if (!r->stage)
		r->stage = malloc(ST_STAGE_BYTES);
	return r->stage ? 0 : st_rd_fail(r, -ENOMEM, "%s: no memory for a staging buffer", what);
}

int zinf_st_reader_read_elems(struct zinf_st_reader *r, const struct zinf_st_tensor_info *t,
			      uint64_t elem_begin, uint64_t n_elems, void *dst,
			      enum zinf_st_dtype dst_dtype)
{
	uint64_t esz, dsz, off, chunk_elems;
	const struct st_file *f;
	char *out = dst;
	ptrdiff_t ti;
	bool track;
	int rc;

	if (!r || !t || t < r->tensors || t >= r->tensors + r->n_tensors)
		return r ? st_rd_fail(r, -EINVAL, "read: tensor is not from this reader") : -EINVAL;
	if (!st_dtype_valid(dst_dtype))
		return st_rd_fail(r, -EINVAL,
				  "tensor %s: destination dtype %d is not BF16, F16 or F32",
				  t->name, (int)dst_dtype);
	if (t->dtype == ZINF_ST_OTHER)
		return st_rd_fail(
			r, ZINF_EFORMAT,
			"%s: tensor %s: dtype \"%s\" is not supported (expected BF16, F16 "
			"or F32)",
			r->files[t->file].path, t->name, t->dtype_text);
	if (elem_begin > t->n_elems || n_elems > t->n_elems - elem_begin)
		return st_rd_fail(r, -EINVAL,
				  "tensor %s: elements [%llu, +%llu) are outside its %llu elements",
				  t->name, (unsigned long long)elem_begin,
				  (unsigned long long)n_elems, (unsigned long long)t->n_elems);
	if (n_elems && !dst)
		return st_rd_fail(r, -EINVAL, "tensor %s: destination is NULL", t->name);
	if (t->dtype != dst_dtype && stage_get(r, t->name))
		return -ENOMEM;
	f = &r->files[t->file];
	esz = zinf_st_dtype_size(t->dtype);
	dsz = zinf_st_dtype_size(dst_dtype);
	off = t->file_offset + elem_begin * esz;
	ti = t - r->tensors;
	track = elem_begin == r->crc_elems[ti]; /* carries on the tensor's checksum */
	chunk_elems = t->dtype == dst_dtype ? n_elems : ST_STAGE_BYTES / esz;
	while (n_elems > 0) {
		uint64_t k = n_elems < chunk_elems ? n_elems : chunk_elems;
		void *buf = t->dtype == dst_dtype ? (void *)out : r->stage;

		rc = st_pread_full(f->fd, buf, k * esz, off);
		if (rc == ZINF_EFORMAT)
			return st_rd_fail(
				r, rc,
				"%s: tensor %s: short read at offset %llu (file shrank since it was opened?)",
				f->path, t->name, (unsigned long long)off);
		if (rc < 0)
			return st_rd_fail(r, rc, "%s: tensor %s: read at offset %llu: %s", f->path,
					  t->name, (unsigned long long)off, zinf_strerror(rc));
		if (track) {
			r->crc[ti] = zinf_crc32c(r->crc[ti], buf, k * esz);
			r->crc_elems[ti] += k;
		}
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
		return r ? st_rd_fail(r, -EINVAL, "read: tensor is NULL") : -EINVAL;
	return zinf_st_reader_read_elems(r, t, 0, t->n_elems, dst, dst_dtype);
}

/* Carry *crc over bytes [from, to) of f, read now in staging-sized pieces. */
static int crc_range(struct zinf_st_reader *r, const struct st_file *f, uint64_t from, uint64_t to,
		     uint32_t *crc)
{
	int rc;

	if (from < to && stage_get(r, f->path))
		return -ENOMEM;
	while (from < to) {
		uint64_t k = to - from < ST_STAGE_BYTES ? to - from : ST_STAGE_BYTES;
		rc = st_pread_full(f->fd, r->stage, k, from);
		if (rc == ZINF_EFORMAT)
			return st_rd_fail(r, rc,
					  "%s: short read at offset %llu (file shrank since it "
					  "was opened?)",
					  f->path, (unsigned long long)from);
		if (rc < 0)
			return st_rd_fail(r, rc, "%s: read at offset %llu: %s", f->path,
					  (unsigned long long)from, zinf_strerror(rc));
		*crc = zinf_crc32c(*crc, r->stage, k);
		from += k;
	}
	return 0;
}

int zinf_st_reader_file_crc(struct zinf_st_reader *r, int file, uint64_t *size, uint32_t *crc)
{
	const struct st_file *f;
	uint64_t at = 0;
	uint32_t c = 0;
	int rc = 0;

	if (!r || !r->opened || file < 0 || file >= r->n_files)
		return r ? st_rd_fail(r, -EINVAL, "checksum: no file %d", file) : -EINVAL;
	f = &r->files[file];
	/* storage order: the file's tensors by offset; the header and any gaps between */
	for (int i = 0; i < r->n_tensors && !rc; i++) {
		const struct zinf_st_tensor_info *t = &r->tensors[i];
		if (t->file != file)
			continue;
		if (t->file_offset < at)
			return st_rd_fail(r, ZINF_EFORMAT,
					  "%s: tensor %s overlaps the one before it", f->path,
					  t->name);
		rc = crc_range(r, f, at, t->file_offset, &c);
		if (rc)
			break;
		if (r->crc_elems[i] == t->n_elems)
			c = zinf_crc32c_combine(c, r->crc[i], t->nbytes);
		else
			rc = crc_range(r, f, t->file_offset, t->file_offset + t->nbytes, &c);
		at = t->file_offset + t->nbytes;
	}
	if (!rc)
		rc = crc_range(r, f, at, f->size, &c);
	if (rc)
		return rc;
	*size = f->size;
	*crc = c;
	return 0;
}
