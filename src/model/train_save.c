/*
 * zinf train --save: write the engine's parameters (from the fp32 master weights) as a
 * Hugging Face checkpoint: config.json + model.safetensors, or shards and
 * model.safetensors.index.json when larger than the shard size. Tensors are named, shaped
 * and ordered as Hugging Face's state dict (llama_names.h), written one at a time in
 * pieces of train_state_piece_elems read from the masters (16 MiB of fp32 held, not the
 * largest tensor: 4.2 GB for a 70B model's embedding). With --save-state, the training
 * state's save writes the masters into a writer begun here, from the pieces of the state
 * it reads anyway (train_state_write.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "llama_names.h"
#include "safetensors.h"
#include "train_internal.h"
#include "zinf/error.h"

static enum zinf_st_dtype st_of_dtype(enum zinf_dtype d)
{
	return d == ZINF_DTYPE_BF16  ? ZINF_ST_BF16
	       : d == ZINF_DTYPE_F16 ? ZINF_ST_F16
				     : ZINF_ST_F32;
}

uint32_t train_model_param_of_name(const struct train_model *tm, const char *name)
{
	for (int mod = 0; mod < tm->L + 2; mod++) {
		for (int s = 0; s < ZINF_LLAMA_MAX_PARAMS; s++) {
			struct zinf_llama_param_info info;

			if (train_model_slot(tm, mod, s, &info) && strcmp(info.name, name) == 0)
				return tm->param[mod][s];
		}
	}
	return TRAIN_NO_PARAM;
}

int train_model_tensor(const struct train_model *tm, int i, const char *dir,
		       struct zinf_llama_tensor_name *tn, uint32_t *param, char *err, size_t errlen)
{
	zinf_llama_names_get(&tm->hf, i, tn);
	*param = train_model_param_of_name(tm, tn->name);
	if (*param != TRAIN_NO_PARAM)
		return 0;
	snprintf(err, errlen, "%s: tensor %s: no engine parameter holds it", dir, tn->name);
	return -EINVAL;
}

/* Declare every tensor in the model's order, in dtype: the writer's tensor i is the
 * model's tensor i. */
static int declare(struct train_model *tm, struct zinf_st_writer *w, enum zinf_dtype dtype,
		   const char *dir, char *err, size_t errlen)
{
	int n = zinf_llama_names_count(&tm->hf), rc;
	struct zinf_llama_tensor_name tn;

	for (int i = 0; i < n; i++) {
		zinf_llama_names_get(&tm->hf, i, &tn);
		rc = zinf_st_writer_add(w, tn.name, st_of_dtype(dtype), tn.ndim, tn.shape);
		if (rc < 0) {
			snprintf(err, errlen, "%s: tensor %s: %s", dir, tn.name,
				 zinf_st_writer_last_error(w));
			return rc;
		}
	}
	return 0;
}

int train_save_stop_asked(const struct train_model *tm, const char *dir, const char *tensor,
			  char *err, size_t errlen)
{
	if (!train_stop_up(tm->save_stop))
		return 0;
	snprintf(err, errlen, "%s: stopped before tensor %s (asked to stop)", dir, tensor);
	return -EINTR;
}

/* Every tensor's fp32 master in pieces, rounded to the writer's dtype as it writes. */
static int write_tensors(struct train_model *tm, struct zinf_engine *e, struct zinf_st_writer *w,
			 float *buf, uint64_t piece, const char *dir, char *err, size_t errlen)
{
	int n = zinf_llama_names_count(&tm->hf), rc;
	struct zinf_llama_tensor_name tn;

	for (int i = 0; i < n; i++) {
		uint32_t p;

		rc = train_model_tensor(tm, i, dir, &tn, &p, err, errlen);
		if (rc)
			return rc;
		for (uint64_t at = 0; at < tn.n_elems; at += piece) {
			uint64_t k = tn.n_elems - at < piece ? tn.n_elems - at : piece;
			rc = train_save_stop_asked(tm, dir, tn.name, err, errlen);
			if (rc)
				return rc;
			rc = zinf_param_state_save(e, p, at, k, buf, NULL, NULL);
			if (rc) {
				snprintf(err, errlen, "%s: tensor %s: %s", dir, tn.name,
					 zinf_last_error(e));
				return rc;
			}
			rc = zinf_st_writer_write(w, i, at, k, buf, ZINF_ST_F32);
			if (rc) {
				snprintf(err, errlen, "%s", zinf_st_writer_last_error(w));
				return rc;
			}
		}
	}
	return 0;
}

int train_model_writer_begin(struct train_model *tm, const char *dir, enum zinf_dtype dtype,
			     uint64_t max_shard_bytes, struct train_model_writer *mw, char *err,
			     size_t errlen)
{
	struct zinf_st_writer_opts wo;
	int rc;

	mw->w = NULL;
	mw->dtype = dtype;
	if (mkdir(dir, 0755) && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot create the save directory: %s", dir,
			 strerror(errno));
		return rc;
	}
	zinf_st_writer_opts_init(&wo);
	if (max_shard_bytes)
		wo.max_shard_bytes = max_shard_bytes;
	rc = zinf_st_writer_create(&mw->w, dir, &wo);
	if (rc) {
		mw->w = NULL;
		snprintf(err, errlen, "%s: cannot start writing safetensors (%d)", dir, rc);
		return rc;
	}
	rc = declare(tm, mw->w, dtype, dir, err, errlen);
	if (rc)
		train_model_writer_drop(mw);
	return rc;
}

int train_model_writer_end(struct train_model *tm, struct train_model_writer *mw, const char *dir,
			   struct train_file_sums *sums, char *err, size_t errlen)
{
	char path[4096];
	int rc = zinf_st_writer_finish(mw->w);

	if (rc) {
		snprintf(err, errlen, "%s", zinf_st_writer_last_error(mw->w));
		goto out;
	}
	if (sums && train_file_sums_add(sums, mw->w)) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory for the file list", dir);
		goto out;
	}
	snprintf(path, sizeof(path), "%s/config.json", dir);
	rc = zinf_hf_config_save(&tm->hf, path, st_of_dtype(mw->dtype));
	if (rc)
		snprintf(err, errlen, "%s", tm->hf.last_error);
out:
	train_model_writer_drop(mw);
	return rc;
}

void train_model_writer_drop(struct train_model_writer *mw)
{
	zinf_st_writer_destroy(mw->w);
	mw->w = NULL;
}

int train_model_save(struct train_model *tm, struct zinf_engine *e, const char *dir,
		     enum zinf_dtype dtype, uint64_t max_shard_bytes, struct train_file_sums *sums,
		     char *err, size_t errlen)
{
	uint64_t piece = train_state_piece_of(tm);
	struct train_model_writer mw;
	float *buf = malloc((piece ? piece : 1) * sizeof(float));
	int rc;

	if (!buf) {
		snprintf(err, errlen, "%s: out of memory for a piece of a tensor", dir);
		return -ENOMEM;
	}
	rc = train_model_writer_begin(tm, dir, dtype, max_shard_bytes, &mw, err, errlen);
	if (!rc) {
		rc = write_tensors(tm, e, mw.w, buf, piece, dir, err, errlen);
		if (rc)
			train_model_writer_drop(&mw);
		else
			rc = train_model_writer_end(tm, &mw, dir, sums, err, errlen);
	}
	free(buf);
	return rc;
}
