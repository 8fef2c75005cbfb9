/*
 * Layout, pinned budget, create and destroy of the NVMe optimizer step
 * (include/zinf/optim.h, "Pipelined NVMe optimizer step"; the pipeline is optim_nvme.c).
 *
 * Layout: sub-group g (elements [g * sub_group_size, ...), the last one shorter) lives
 * in one extent as master | m | v, each part padded to the I/O alignment, so its state
 * is read and written with one request each way (the I/O engine splits it into
 * block_size pieces over its lanes). All extents have the size of a full sub-group, so
 * any extent can hold any sub-group; there is one spare extent per staging buffer.
 * With fast_init a sub-group whose moments are zero holds only its master part (the m
 * and v parts of its extent are not written), and one that is all zero holds nothing.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim_nvme.h"
#include "pinned.h"
#include "zinf/config.h"
#include "zinf/error.h"
#include "zinf/io.h"
#include "zinf/log.h"

/* ---- create / destroy ---------------------------------------------------------------- */

static unsigned slots_needed(const struct zinf_adam_nvme_opts *o, uint64_t n_groups)
{
	unsigned n = 1 + (unsigned)o->pipeline_read + (unsigned)o->pipeline_write;

	return n_groups < n ? (unsigned)n_groups : n;
}

void zinf_adam_nvme_opts_init(struct zinf_adam_nvme_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->sub_group_size = 1000000000ull; /* DeepSpeed's default, 1e9 */
	opts->pipeline_read = true;
	opts->pipeline_write = true;
	opts->fast_init = true;
}

static uint64_t groups_of(const struct zinf_adam_nvme_opts *o)
{
	return o->n_elems / o->sub_group_size + (o->n_elems % o->sub_group_size != 0);
}

/* n_elems, sub_group_size and their sub-group count within bounds (opts_check says why
 * not) */
static bool sizes_ok(const struct zinf_adam_nvme_opts *o)
{
	return o && o->n_elems && o->n_elems <= NVME_MAX_ELEMS && o->sub_group_size &&
	       groups_of(o) <= NVME_MAX_GROUPS;
}

static uint64_t extent_bytes_of(const struct zinf_adam_nvme_opts *o, uint64_t align)
{
	uint64_t full = o->sub_group_size < o->n_elems ? o->sub_group_size : o->n_elems;

	return 3 * nvme_part_bytes(full, align);
}

uint64_t zinf_adam_nvme_pinned_bytes(const struct zinf_adam_nvme_opts *o, uint64_t align)
{
	if (!sizes_ok(o))
		return 0;
	if (align < NVME_MIN_ALIGN)
		align = NVME_MIN_ALIGN;
	return slots_needed(o, groups_of(o)) * extent_bytes_of(o, align);
}

uint64_t zinf_adam_nvme_extent_bytes(const struct zinf_adam_nvme_opts *o)
{
	uint64_t align;

	if (!sizes_ok(o) || !o->io)
		return 0;
	align = zinf_io_alignment(o->io);
	return extent_bytes_of(o, align > NVME_MIN_ALIGN ? align : NVME_MIN_ALIGN);
}

uint64_t zinf_adam_nvme_drive_bytes(const struct zinf_adam_nvme_opts *o)
{
	uint64_t extent = zinf_adam_nvme_extent_bytes(o), groups;

	if (!extent)
		return 0;
	groups = groups_of(o);
	/* as extents_setup: one extent per sub-group, one spare per staging buffer */
	return (groups + slots_needed(o, groups)) * zinf_io_extent_footprint(o->io, extent);
}

static int opts_check(const struct zinf_adam_nvme_opts *o, char *msg, uint64_t len)
{
	if (!o) {
		snprintf(msg, len, "NVMe optimizer: opts is NULL");
		return -EINVAL;
	}
	if (!o->adam || !o->io) {
		snprintf(msg, len, "NVMe optimizer: opts.adam %p, opts.io %p (both required)",
			 (void *)o->adam, (void *)o->io);
		return -EINVAL;
	}
	if (!o->n_elems || o->n_elems > NVME_MAX_ELEMS) {
		snprintf(msg, len, "NVMe optimizer: opts.n_elems %" PRIu64 ": expected 1 to 2^56",
			 o->n_elems);
		return -EINVAL;
	}
	if (!o->sub_group_size) {
		snprintf(msg, len,
			 "NVMe optimizer: sub_group_size 0: expected a positive element count");
		return -EINVAL;
	}
	if (groups_of(o) > NVME_MAX_GROUPS) {
		snprintf(msg, len,
			 "NVMe optimizer: sub_group_size %" PRIu64 " cuts %" PRIu64
			 " elements into %" PRIu64 " sub-groups, more than 2^32 (raise it)",
			 o->sub_group_size, o->n_elems, groups_of(o));
		return -EINVAL;
	}
	return 0;
}

/* "N B (x MiB)": exact for the reader who compares, rounded for the one who skims. */
static const char *bytes_str(uint64_t bytes, char *buf, size_t len)
{
	char human[32];

	zinf_format_bytes(bytes, human, sizeof(human));
	if (bytes < 1024)
		snprintf(buf, len, "%s", human);
	else
		snprintf(buf, len, "%" PRIu64 " B (%s)", bytes, human);
	return buf;
}

/* The pool cannot hold the buffers: say how many bytes are needed and what would fit. */
static int pool_too_small(const struct zinf_adam_nvme *h, uint64_t pool_size, uint64_t pool_free,
			  char *msg, uint64_t len)
{
	uint64_t need = h->n_slots * h->extent_bytes;
	/* a smaller sub-group means more sub-groups: as many buffers as the pipelines use */
	unsigned slots = 1 + (unsigned)h->pipeline_read + (unsigned)h->pipeline_write;
	uint64_t fit = pool_free / slots / 3 / h->align * h->align / sizeof(float);
	char a[64], b[64], c[64], d[64], lower[96] = "";

	if (fit > 0) /* (a pool too small for the smallest sub-group: the limit alone) */
		snprintf(lower, sizeof(lower),
			 " or lower sub_group_size to at most %" PRIu64 " elements", fit);
	snprintf(msg, len,
		 "NVMe optimizer: pinned pool of %s with %s free cannot hold %u staging buffer%s "
		 "of %s (a sub-group of %" PRIu64 " elements: fp32 master, m and v) = %s; raise "
		 "pinned_memory_limit by %" PRIu64 " B%s",
		 bytes_str(pool_size, a, sizeof(a)), bytes_str(pool_free, b, sizeof(b)), h->n_slots,
		 h->n_slots > 1 ? "s" : "", bytes_str(h->extent_bytes, c, sizeof(c)),
		 h->sub_group_size < h->n_elems ? h->sub_group_size : h->n_elems,
		 bytes_str(need, d, sizeof(d)), need > pool_free ? need - pool_free : need, lower);
	return ZINF_EBUDGET;
}

static int pool_setup(struct zinf_adam_nvme *h, struct zinf_pinned *pool, uint64_t pinned_bytes,
		      char *msg, uint64_t len)
{
	uint64_t need = h->n_slots * h->extent_bytes;
	struct zinf_pinned_stats st;
	int rc;

	if (!pool) {
		struct zinf_pinned_opts po;
		uint64_t size = pinned_bytes ? pinned_bytes : need;

		if (size < need)
			return pool_too_small(h, size, size, msg, len);
		zinf_pinned_opts_init(&po);
		po.size = size;
		po.lock = ZINF_PINNED_LOCK_BEST_EFFORT;
		po.align = h->align;
		rc = zinf_pinned_create(&po, &pool, msg, len);
		if (rc)
			return rc;
		h->own_pool = true;
		/* fixed buffers for io_uring; a handle that has a region already keeps it */
		h->registered = zinf_io_register_buffer(h->io, zinf_pinned_base(pool),
							zinf_pinned_size(pool)) == 0;
	}
	h->pool = pool;
	zinf_pinned_get_stats(pool, &st);
	if (need > st.limit || need > st.limit - st.used)
		return pool_too_small(h, st.limit, st.limit - st.used, msg, len);
	for (unsigned i = 0; i < h->n_slots; i++) {
		void *p = NULL;

		rc = zinf_pinned_try_alloc(pool, h->extent_bytes, &p);
		if (rc == 0 && (uintptr_t)p % h->align) {
			zinf_pinned_free(pool, p);
			snprintf(
				msg, len,
				"NVMe optimizer: pinned buffer %p is not aligned to the %" PRIu64
				" bytes the I/O engine needs (create the pool with that alignment)",
				p, h->align);
			return -EINVAL;
		}
		if (rc) {
			zinf_pinned_get_stats(pool, &st);
			return pool_too_small(h, st.limit, st.limit - st.used, msg, len);
		}
		h->slots[i].buf = p;
	}
	return 0;
}

static int extents_setup(struct zinf_adam_nvme *h, char *msg, uint64_t len)
{
	uint64_t total = h->n_groups + h->n_slots;
	char sz[32];

	for (uint64_t i = 0; i < total; i++) {
		uint32_t id;
		int rc = zinf_io_extent_alloc(h->io, h->extent_bytes, &id);

		if (rc) {
			snprintf(msg, len,
				 "NVMe optimizer: extent %" PRIu64 " of %" PRIu64 " (%s each): %s",
				 i, total, zinf_format_bytes(h->extent_bytes, sz, sizeof(sz)),
				 zinf_io_last_error(h->io));
			return rc;
		}
		h->n_alloc++;
		if (i < h->n_groups)
			h->group_extent[i] = id;
		else
			h->spares[h->n_spares++] = id;
	}
	return 0;
}

int zinf_adam_nvme_create_in_pool(const struct zinf_adam_nvme_opts *opts, struct zinf_pinned *pool,
				  struct zinf_adam_nvme **out, char *err, uint64_t err_len)
{
	char msg[512] = "";
	struct zinf_adam_nvme *h;
	uint64_t align;
	int rc;

	if (out)
		*out = NULL;
	rc = opts_check(opts, msg, sizeof(msg));
	if (!rc && !out) {
		snprintf(msg, sizeof(msg), "NVMe optimizer: out is NULL");
		rc = -EINVAL;
	}
	if (rc)
		goto out_msg;
	h = calloc(1, sizeof(*h));
	rc = -ENOMEM;
	if (!h)
		goto out_msg;
	align = zinf_io_alignment(opts->io);
	h->adam = opts->adam;
	h->io = opts->io;
	h->align = align > NVME_MIN_ALIGN ? align : NVME_MIN_ALIGN;
	h->n_elems = opts->n_elems;
	h->sub_group_size = opts->sub_group_size;
	h->n_groups = groups_of(opts);
	h->extent_bytes = extent_bytes_of(opts, h->align);
	h->pipeline_read = opts->pipeline_read;
	h->pipeline_write = opts->pipeline_write;
	h->fast_init = opts->fast_init;
	h->crc32c = opts->crc32c;
	h->n_slots = slots_needed(opts, h->n_groups);
	for (unsigned i = 0; i < h->n_slots; i++)
		h->slots[i].h = h;
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->cond, NULL);
	h->group_extent = calloc(h->n_groups, sizeof(*h->group_extent));
	h->updated = calloc(h->n_groups, 1);
	h->written = calloc(h->n_groups, 1);
	h->spares = calloc(h->n_slots, sizeof(*h->spares));
	h->zeroed = calloc(h->n_groups, 1);
	h->master_crc = calloc(h->n_groups, sizeof(*h->master_crc));
	if (!h->group_extent || !h->updated || !h->written || !h->spares || !h->zeroed ||
	    !h->master_crc) {
		snprintf(msg, sizeof(msg),
			 "NVMe optimizer: out of memory for %" PRIu64 " sub-groups", h->n_groups);
		goto out_destroy;
	}
	rc = pool_setup(h, pool, opts->pinned_bytes, msg, sizeof(msg));
	if (rc)
		goto out_destroy;
	rc = extents_setup(h, msg, sizeof(msg));
	if (rc)
		goto out_destroy;
	*out = h;
	return 0;

out_destroy:
	zinf_adam_nvme_destroy(h);
out_msg:
	if (!msg[0])
		snprintf(msg, sizeof(msg), "NVMe optimizer: %s", zinf_strerror(rc));
	zinf_logf(ZINF_LOG_DEBUG, "zinf optim nvme: %s", msg);
	if (err && err_len)
		snprintf(err, err_len, "%s", msg);
	return rc;
}

int zinf_adam_nvme_create(const struct zinf_adam_nvme_opts *opts, struct zinf_adam_nvme **out,
			  char *err, uint64_t err_len)
{
	return zinf_adam_nvme_create_in_pool(opts, NULL, out, err, err_len);
}

void zinf_adam_nvme_destroy(struct zinf_adam_nvme *h)
{
	if (!h)
		return;
	zinf_adam_nvme_drain(h);
	/* the first n_alloc entries of group_extent, then the spares, are the extents */
	for (uint64_t i = 0; i < h->n_alloc && i < h->n_groups; i++)
		zinf_io_extent_free(h->io, h->group_extent[i]);
	for (unsigned i = 0; h->spares && i < h->n_spares; i++)
		zinf_io_extent_free(h->io, h->spares[i]);
	if (h->registered)
		zinf_io_unregister_buffer(h->io);
	for (unsigned i = 0; h->pool && i < h->n_slots; i++) {
		if (h->slots[i].buf)
			zinf_pinned_free(h->pool, h->slots[i].buf);
	}
	if (h->own_pool)
		zinf_pinned_destroy(h->pool);
	free(h->spares);
	free(h->updated);
	free(h->written);
	free(h->zeroed);
	free(h->master_crc);
	free(h->group_extent);
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

const char *zinf_adam_nvme_last_error(const struct zinf_adam_nvme *h)
{
	return h ? h->last_error : "";
}

/* ---- layout ------------------------------------------------------------------------ */

void zinf_adam_nvme_get_info(const struct zinf_adam_nvme *h, struct zinf_adam_nvme_info *out)
{
	uint64_t bytes = 0;

	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (!h)
		return;
	for (uint64_t g = 0; g < h->n_groups; g++) {
		uint64_t first, n;

		nvme_group_range(h, g, &first, &n);
		bytes += 3 * nvme_part_bytes(n, h->align);
	}
	out->n_elems = h->n_elems;
	out->sub_group_size = h->sub_group_size;
	out->n_sub_groups = h->n_groups;
	out->extent_bytes = h->extent_bytes;
	out->n_extents = h->n_groups + h->n_slots;
	out->buffer_bytes = h->extent_bytes;
	out->n_buffers = h->n_slots;
	out->step_read_bytes = bytes;
	out->step_write_bytes = bytes;
}

int zinf_adam_nvme_sub_group(const struct zinf_adam_nvme *h, uint64_t i, uint64_t *first_elem,
			     uint64_t *n_elems, uint64_t *request_bytes)
{
	uint64_t first, n;

	if (!h || i >= h->n_groups)
		return -EINVAL;
	nvme_group_range(h, i, &first, &n);
	if (first_elem)
		*first_elem = first;
	if (n_elems)
		*n_elems = n;
	if (request_bytes)
		*request_bytes = 3 * nvme_part_bytes(n, h->align);
	return 0;
}
