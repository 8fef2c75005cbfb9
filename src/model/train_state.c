/*
 * zinf train --save-state / --resume: the training state beside a saved model, so that a
 * run continues bit-identically from it. A checkpoint directory then holds, besides
 * config.json and the model's safetensors:
 *   - optimizer.safetensors (or optimizer-0000K-of-0000N.safetensors + its index): every
 *     parameter's fp32 master, exp_avg and exp_avg_sq, named NAME.master, NAME.exp_avg and
 *     NAME.exp_avg_sq after the model's tensor NAME, streamed in pieces
 *     (train_state_write.c);
 *   - zinf_state.json, written last (fsync, rename): the step, the optimizer's progress
 *     and loss scaler, the data position and order, the config keys that decide the
 *     numbers, and every file of the checkpoint with its size and CRC32C
 *     (train_state_files.c), sealed with its own CRC32C.
 * This file writes the manifest; train_state_read.c reads, checks and loads it.
 * docs/formats.md describes the format; resuming checks all of it before step 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "safetensors.h"
#include "safetensors_internal.h"
#include "train_state_internal.h"
#include "zinf/config.h" /* zinf_format_double */
#include "zinf/crc32c.h"
#include "zinf/error.h"

static const char *const part_name[3] = {"master", "exp_avg", "exp_avg_sq"};

const char *train_state_part_name(int k)
{
	return part_name[k];
}

void train_state_free(struct train_state *st)
{
	cJSON_Delete(st->numerics);
	st->numerics = NULL;
	train_file_sums_free(&st->deferred);
}

/* ---- the keys that decide the numbers ------------------------------------------------------ */

/* Config keys whose values must be the same to continue a run bit-identically: the batch
 * shape, precision, optimizer, schedule and clipping. Where parameters and state live (the
 * tiers) may change between runs. */
static bool numerics_key(const char *key)
{
	static const char *const prefixes[] = {"train_micro_batch_size_per_gpu",
					       "gradient_accumulation_steps",
					       "gradient_clipping",
					       "bf16.",
					       "fp16.",
					       "optimizer.",
					       "scheduler.",
					       "zinf.tf32"};

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

int train_state_numerics(const struct zinf_config *cfg, cJSON **out, char *err, size_t errlen)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	cJSON *all = NULL, *keep = NULL, *it;
	int rc = -ENOMEM;

	*out = NULL;
	if (!f)
		goto out;
	rc = zinf_config_print(cfg, f, true);
	if (fclose(f) && !rc)
		rc = -EIO;
	if (rc)
		goto out;
	rc = -ENOMEM;
	all = cJSON_Parse(text);
	keep = cJSON_CreateObject();
	if (!all || !keep)
		goto out;
	cJSON_ArrayForEach(it, all)
	{
		cJSON *v = cJSON_GetObjectItemCaseSensitive(it, "value");
		if (!v || !numerics_key(it->string))
			continue;
		if (!cJSON_AddItemToObject(keep, it->string, cJSON_Duplicate(v, true)))
			goto out;
	}
	*out = keep;
	keep = NULL;
	rc = 0;
out:
	if (rc)
		snprintf(err, errlen, "config: cannot list its values for the training state (%s)",
			 zinf_strerror(rc));
	cJSON_Delete(all);
	cJSON_Delete(keep);
	free(text);
	return rc;
}

/* ---- saving ----------------------------------------------------------------------------------- */

/* name's entry: its size and CRC32C as written when sums has them (the size checked on
 * disk), else read from the file. */
static int add_file(cJSON *files, const char *dir, const char *name,
		    const struct train_file_sums *sums, char *err, size_t errlen)
{
	const struct train_file_sum *sum = train_file_sums_find(sums, name);
	char path[4200], crc_text[16];
	struct stat st;
	uint64_t size;
	uint32_t crc;
	cJSON *f;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (sum) {
		if (lstat(path, &st)) {
			rc = -errno;
			snprintf(err, errlen, "%s: %s", path, zinf_strerror(rc));
			return rc;
		}
		if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != sum->bytes) {
			snprintf(err, errlen, "%s: %lld bytes on disk, %" PRIu64 " written", path,
				 (long long)st.st_size, sum->bytes);
			return ZINF_EFORMAT;
		}
		size = sum->bytes;
		crc = sum->crc;
	} else {
		rc = train_state_file_crc(path, &size, &crc, err, errlen);
		if (rc)
			return rc;
	}
	snprintf(crc_text, sizeof(crc_text), "%08" PRIx32, crc);
	f = cJSON_CreateObject();
	if (!f || !cJSON_AddItemToArray(files, f) || !cJSON_AddStringToObject(f, "name", name) ||
	    !cJSON_AddNumberToObject(f, "bytes", (double)size) ||
	    !cJSON_AddStringToObject(f, "crc32c", crc_text)) {
		snprintf(err, errlen, "%s: out of memory for the file list", path);
		return -ENOMEM;
	}
	return 0;
}

static cJSON *progress_json(const struct zinf_engine_progress *p)
{
	cJSON *o = cJSON_CreateObject();
	char scale[40];

	/* a string: the shortest text that reads back gives the double exactly, a JSON
	 * number may not (cJSON prints 15 significant digits when they read back as nearly
	 * equal) */
	zinf_format_double(p->loss_scale, scale, sizeof(scale)); /* (exact, in any locale) */
	if (!o || !cJSON_AddNumberToObject(o, "optimizer_steps", (double)p->steps) ||
	    !cJSON_AddNumberToObject(o, "skipped_steps", (double)p->skipped) ||
	    !cJSON_AddStringToObject(o, "loss_scale", scale) ||
	    !cJSON_AddNumberToObject(o, "scaler_iteration", (double)p->scaler_iteration) ||
	    !cJSON_AddNumberToObject(o, "scaler_last_overflow_iter",
				     (double)p->scaler_last_overflow_iter) ||
	    !cJSON_AddNumberToObject(o, "scaler_hysteresis_left",
				     (double)p->scaler_hysteresis_left)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *data_json(const struct train_state *st)
{
	cJSON *o = cJSON_CreateObject();
	char hex[16], seed[24];

	snprintf(hex, sizeof(hex), "%08" PRIx32, st->data_crc);
	snprintf(seed, sizeof(seed), "%" PRIu64, st->seed); /* any 64-bit seed, exactly */
	if (!o || !cJSON_AddNumberToObject(o, "tokens", (double)st->data_tokens) ||
	    !cJSON_AddNumberToObject(o, "seq_len", (double)st->seq_len) ||
	    !cJSON_AddStringToObject(o, "seed", seed) ||
	    !cJSON_AddBoolToObject(o, "shuffle", st->shuffle) ||
	    !cJSON_AddStringToObject(o, "sample_crc32c", hex)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* Write text to dir/name through name.tmp, fsync, rename and fsync of dir. */
static int write_atomic(const char *dir, const char *name, const char *text, char *err,
			size_t errlen)
{
	char path[4200];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	rc = st_write_file_atomic(path, text, strlen(text));
	if (!rc)
		rc = st_fsync_dir(dir);
	if (rc)
		snprintf(err, errlen, "%s: cannot write: %s", path, zinf_strerror(rc));
	return rc;
}

/* Add item to o, or free it when that fails. */
static bool add_owned(cJSON *o, const char *key, cJSON *item)
{
	if (item && cJSON_AddItemToObject(o, key, item))
		return true;
	cJSON_Delete(item);
	return false;
}

int train_state_save(struct train_model *tm, struct zinf_engine *e, const char *dir,
		     const struct train_state *st, struct train_model_writer *mw,
		     uint64_t max_shard_bytes, struct train_file_sums *sums, char *err,
		     size_t errlen)
{
	struct zinf_engine_progress prog;
	cJSON *root = NULL, *files, *names = NULL, *name;
	char *text = NULL, *sealed = NULL;
	size_t len;
	int rc;

	rc = train_state_write_optimizer(tm, e, dir, max_shard_bytes, mw, sums, err, errlen);
	if (rc)
		return rc;
	rc = zinf_engine_progress_get(e, &prog);
	if (rc) {
		snprintf(err, errlen, "%s: %s", dir, zinf_last_error(e));
		return rc;
	}
	rc = -ENOMEM;
	root = cJSON_CreateObject();
	if (!root || !cJSON_AddStringToObject(root, "format", STATE_FORMAT) ||
	    !cJSON_AddNumberToObject(root, "version", STATE_VERSION) ||
	    !cJSON_AddNumberToObject(root, "step", (double)st->step) ||
	    !cJSON_AddNumberToObject(root, "world_size", 1) ||
	    !cJSON_AddStringToObject(root, "device",
				     train_state_device_name(zinf_engine_device_kind(e))) ||
	    !add_owned(root, "optimizer", progress_json(&prog)) ||
	    !add_owned(root, "data", data_json(st)) ||
	    !add_owned(root, "numerics", cJSON_Duplicate(st->numerics, true)) ||
	    !(files = cJSON_AddArrayToObject(root, "files")))
		goto out_oom;
	names = train_state_checkpoint_files(dir, &rc, err, errlen);
	cJSON_ArrayForEach(name, names)
	{
		rc = add_file(files, dir, name->valuestring, sums, err, errlen);
		if (rc)
			break;
	}
	if (rc)
		goto out;
	text = cJSON_Print(root);
	if (!text)
		goto out_oom;
	len = strlen(text);
	if (len < 2 || strcmp(text + len - 2, "\n}")) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s/%s: unexpected JSON layout", dir, TRAIN_STATE_FILE);
		goto out;
	}
	len -= 2; /* the body: the text without its closing "\n}" */
	sealed = malloc(len + sizeof(MANIFEST_CRC_TAG) + 16);
	if (!sealed)
		goto out_oom;
	snprintf(sealed, len + sizeof(MANIFEST_CRC_TAG) + 16,
		 "%.*s" MANIFEST_CRC_TAG "%08" PRIx32 "\"\n}\n", (int)len, text,
		 train_state_manifest_crc(text, len));
	rc = write_atomic(dir, TRAIN_STATE_FILE, sealed, err, errlen);
	goto out;
out_oom:
	rc = -ENOMEM;
	snprintf(err, errlen, "%s/%s: out of memory", dir, TRAIN_STATE_FILE);
out:
	free(sealed);
	free(text);
	cJSON_Delete(names);
	cJSON_Delete(root);
	return rc;
}
