/*
 * Loading the model into the engine a parameter-store chunk at a time (zinf train
 * --model, --init, --resume). A module's parameters are cut into pieces where
 * zinf_param_chunk_elems says (the end of a store chunk, or of the parameter), and the
 * pieces that fall in the same chunk, across parameters, go to the engine together
 * (zinf_param_load_ranges): every chunk of the parameter copies is written once, without
 * being read, and the loader holds at most one chunk's elements (a module smaller than a
 * chunk is one batch, as a whole-module load). The caller's fill function produces each
 * piece: read from a checkpoint, or drawn by the seeded init.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "zinf/error.h"

uint64_t train_load_piece_elems = UINT64_MAX;
uint64_t train_load_ranges;

static uint64_t dtype_bytes(enum zinf_dtype t)
{
	return t == ZINF_DTYPE_F32 ? 4 : 2;
}

/* A new capacity for need: need, or twice have when that is more. */
static uint64_t grown(uint64_t have, uint64_t need)
{
	return 2 * have > need ? 2 * have : need;
}

/* Make room for one more range, src_bytes more source bytes and mom_floats more moment
 * floats. The buffers may move: b->off keeps each range's place in them until the
 * flush. */
static int batch_room(struct train_load_batch *b, uint64_t src_bytes, uint64_t mom_floats,
		      char *err, size_t errlen)
{
	if (b->n == b->cap) {
		uint32_t cap = b->cap ? 2 * b->cap : 16;
		struct zinf_param_range *r = realloc(b->r, cap * sizeof(*r));
		uint64_t *off;
		if (!r)
			goto oom;
		b->r = r;
		off = realloc(b->off, cap * 2 * sizeof(*off));
		if (!off)
			goto oom;
		b->off = off;
		b->cap = cap;
	}
	if (b->used + src_bytes > b->have) { /* (at least doubling: many small pieces) */
		uint64_t have = grown(b->have, b->used + src_bytes);
		char *nb = realloc(b->buf, have);
		if (!nb)
			goto oom;
		b->buf = nb;
		b->have = have;
	}
	if (b->mom_used + mom_floats > b->mom_have) {
		uint64_t have = grown(b->mom_have, b->mom_used + mom_floats);
		float *nm = realloc(b->mom, have * sizeof(float));
		if (!nm)
			goto oom;
		b->mom = nm;
		b->mom_have = have;
	}
	return 0;
oom:
	snprintf(err, errlen, "model: out of memory for a load piece of %llu bytes",
		 (unsigned long long)(src_bytes + mom_floats * sizeof(float)));
	return -ENOMEM;
}

/* Hand the batch to the engine (offsets made pointers) and empty it. */
static int batch_flush(struct train_load_batch *b, struct zinf_engine *e, char *err, size_t errlen)
{
	int rc;

	if (!b->n)
		return 0;
	for (uint32_t i = 0; i < b->n; i++) {
		b->r[i].src = b->buf + b->off[2 * i];
		if (b->moments) {
			b->r[i].exp_avg = b->mom + b->off[2 * i + 1];
			b->r[i].exp_avg_sq = b->r[i].exp_avg + b->r[i].n_elems;
		}
	}
	rc = zinf_param_load_ranges(e, b->n, b->r);
	train_load_ranges += b->n;
	if (rc)
		snprintf(err, errlen, "%s", zinf_last_error(e));
	b->n = 0;
	b->used = 0;
	b->mom_used = 0;
	return rc;
}

int train_load_module(struct train_model *tm, struct zinf_engine *e, int mod,
		      const enum zinf_dtype *src_dtype, bool moments, train_fill_fn fill,
		      void *user, struct train_load_batch *b, char *err, size_t errlen)
{
	uint64_t batch_chunk = 0;
	int rc = 0;

	if (train_stop_up(tm->stop)) {
		snprintf(
			err, errlen,
			"stopped while loading, before module %d of %d (asked to stop; nothing trained or saved)",
			mod + 1, tm->L + 2);
		return -EINTR;
	}
	b->moments = moments;
	for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS && !rc; s++) {
		struct zinf_llama_param_info info;
		uint32_t pid = tm->param[mod][s];
		uint64_t esize = dtype_bytes(src_dtype[s]);
		if (!train_model_slot(tm, mod, s, &info))
			continue;
		for (uint64_t first = 0, n; first < info.elems && !rc; first += n) {
			uint64_t chunk = 0, src_bytes;
			n = zinf_param_chunk_elems(e, pid, first, &chunk);
			if (n > train_load_piece_elems)
				n = train_load_piece_elems;
			if (!n) {
				snprintf(err, errlen, "model: parameter %u has no element %llu",
					 pid, (unsigned long long)first);
				rc = ZINF_ESTATE;
				break;
			}
			if (b->n && chunk != batch_chunk)
				rc = batch_flush(b, e, err, errlen);
			batch_chunk = chunk;
			src_bytes = (n * esize + 63) / 64 * 64;
			if (!rc)
				rc = batch_room(b, src_bytes, moments ? 2 * n : 0, err, errlen);
			if (rc)
				break;
			b->r[b->n] = (struct zinf_param_range){.param = pid,
							       .first_elem = first,
							       .n_elems = n,
							       .src_dtype = src_dtype[s]};
			b->off[2 * b->n] = b->used;
			b->off[2 * b->n + 1] = b->mom_used;
			rc = fill(user, s, first, n, b->buf + b->used,
				  moments ? b->mom + b->mom_used : NULL,
				  moments ? b->mom + b->mom_used + n : NULL, err, errlen);
			b->used += src_bytes;
			b->mom_used += moments ? 2 * n : 0;
			b->n++;
		}
	}
	if (!rc)
		rc = batch_flush(b, e, err, errlen);
	b->n = 0;
	b->used = 0;
	b->mom_used = 0;
	return rc;
}

void train_load_batch_free(struct train_load_batch *b)
{
	free(b->r);
	free(b->off);
	free(b->buf);
	free(b->mom);
	memset(b, 0, sizeof(*b));
}
