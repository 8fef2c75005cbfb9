/*
 * zinf train: the run. Checks every input first (model config and checkpoint, the
 * DeepSpeed config resolved for this model and run, data files against the vocabulary
 * and sequence length, the save directory), then brings up the engine, loads the model,
 * runs the optimizer steps (train_loop.c) and the save at the end, and tears down.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokens.h"
#include "train_run.h"
#include "zinf/config.h"
#include "zinf/error.h"
#include "zinf/log.h"

void zinf_train_opts_init(struct zinf_train_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->seed = 1337;
	opts->eval_batches = 4;
	opts->save_dtype = ZINF_DTYPE_NONE;
}

/* ---- setup: every check before anything runs ------------------------------------------- */

static int check_opts(const struct zinf_train_opts *o, char *err, size_t errlen)
{
	struct stat st;

	if (!!o->model_dir + !!o->init_config + !!o->resume_dir != 1) {
		snprintf(
			err, errlen,
			"model: give exactly one of --model DIR, --init CONFIG.json and --resume DIR");
		return -EINVAL;
	}
	if (!o->config_path || !o->data_path) {
		snprintf(err, errlen, "%s: required (--config DS.json, --data FILE)",
			 !o->config_path ? "--config" : "--data");
		return -EINVAL;
	}
	if (train_check_config_sets(o->config_sets, o->n_config_sets, err, errlen))
		return -EINVAL;
	if (!o->seq_len || !o->steps) {
		snprintf(err, errlen, "%s: required, at least 1",
			 !o->steps ? "--steps" : "--seq-len");
		return -EINVAL;
	}
	if (o->steps > (1ull << 53)) { /* the engine's step counts (zinf_engine_progress_set) */
		snprintf(err, errlen, "--steps %llu: at most 2^53 (9007199254740992)",
			 (unsigned long long)o->steps);
		return -EINVAL;
	}
	if (o->seq_len > TRAIN_MAX_SEQ_LEN) {
		snprintf(err, errlen, "--seq-len %llu: at most %u", (unsigned long long)o->seq_len,
			 TRAIN_MAX_SEQ_LEN);
		return -EINVAL;
	}
	if (o->eval_every && !o->eval_data_path) {
		snprintf(err, errlen, "--eval-every: needs --eval-data FILE");
		return -EINVAL;
	}
	if (o->eval_data_path && (!o->eval_batches || o->eval_batches > 1000000000)) {
		snprintf(err, errlen, "--eval-batches %llu: expected 1 to 1000000000 (as the CLI)",
			 (unsigned long long)o->eval_batches);
		return -EINVAL;
	}
	if (o->save_dtype != ZINF_DTYPE_NONE && o->save_dtype != ZINF_DTYPE_F32 &&
	    o->save_dtype != ZINF_DTYPE_BF16 && o->save_dtype != ZINF_DTYPE_F16) {
		snprintf(err, errlen, "--save-dtype: %d is not bf16, fp16 or fp32", o->save_dtype);
		return -EINVAL;
	}
	if (o->model_dir && (stat(o->model_dir, &st) || !S_ISDIR(st.st_mode))) {
		snprintf(err, errlen, "%s: --model: not a directory", o->model_dir);
		return -ENOENT;
	}
	if (o->resume_dir && (stat(o->resume_dir, &st) || !S_ISDIR(st.st_mode))) {
		snprintf(err, errlen, "%s: --resume: not a directory", o->resume_dir);
		return -ENOENT;
	}
	if (o->save_every && !o->save_dir) {
		snprintf(err, errlen, "--save-every %llu: needs --save DIR",
			 (unsigned long long)o->save_every);
		return -EINVAL;
	}
	if (o->save_total_limit && !o->save_every) {
		snprintf(err, errlen, "--save-total-limit %llu: needs --save-every",
			 (unsigned long long)o->save_total_limit);
		return -EINVAL;
	}
	if (!o->save_dir &&
	    (o->save_state || o->save_dtype != ZINF_DTYPE_NONE || o->save_max_shard_bytes)) {
		snprintf(err, errlen, "%s: needs --save DIR",
			 o->save_state			    ? "--save-state"
			 : o->save_dtype != ZINF_DTYPE_NONE ? "--save-dtype"
							    : "--save-shard-size");
		return -EINVAL;
	}
	if (o->save_dir) {
		char parent[4096], *up;

		if (stat(o->save_dir, &st) == 0) {
			if (!S_ISDIR(st.st_mode)) {
				snprintf(err, errlen, "%s: --save: exists and is not a directory",
					 o->save_dir);
				return -ENOTDIR;
			}
			return 0;
		}
		snprintf(parent, sizeof(parent), "%s", o->save_dir);
		up = dirname(parent);
		if (stat(up, &st)) {
			int e = errno;

			snprintf(err, errlen, "%s: --save: its parent %s: %s", o->save_dir, up,
				 e == ENOENT ? "does not exist (only the last level is made)"
					     : strerror(e));
			return -e;
		}
		if (!S_ISDIR(st.st_mode)) {
			snprintf(err, errlen, "%s: --save: its parent %s is not a directory",
				 o->save_dir, up);
			return -ENOTDIR;
		}
	}
	return 0;
}

int train_batch_flag_check(const struct zinf_config *cfg, const char *flag, uint64_t want,
			   const char *key, char *err, size_t errlen)
{
	enum zinf_config_source src = ZINF_SRC_DEFAULT;
	uint64_t have = 0;

	if (zinf_config_get_u64(cfg, key, &have) || !have || have == want)
		return 0;
	zinf_config_get_source(cfg, key, &src);
	snprintf(err, errlen,
		 "%s %llu: %s sets %s to %llu (give it as \"auto\", or leave the flag out)", flag,
		 (unsigned long long)want, src == ZINF_SRC_SET ? "--set" : "the config", key,
		 (unsigned long long)have);
	return ZINF_ECONFIG;
}

/* A batch size given as a flag (want, 0: not given) fills key where the config leaves it
 * "auto" or unset, as the Hugging Face Trainer fills DeepSpeed's; a value the config sets
 * must be the same. */
static int batch_flag(struct train_run *r, const char *flag, uint64_t want, const char *key,
		      char *err, size_t errlen)
{
	char v[32];
	int rc;

	if (!want)
		return 0;
	rc = train_batch_flag_check(r->cfg, flag, want, key, err, errlen);
	if (rc)
		return rc;
	snprintf(v, sizeof(v), "%llu", (unsigned long long)want);
	rc = zinf_config_set_from(r->cfg, key, v, flag);
	if (rc)
		snprintf(err, errlen, "%s", zinf_config_last_error(r->cfg));
	return rc;
}

/* Where key's value came from, for a message: --micro-batch-size, --set, or the config
 * file. */
static const char *origin(const struct train_run *r, const char *key)
{
	enum zinf_config_source src;

	if (!strcmp(key, "train_micro_batch_size_per_gpu") && r->o->micro_batch_size)
		return "--micro-batch-size";
	return zinf_config_get_source(r->cfg, key, &src) == 0 && src == ZINF_SRC_SET
		       ? "--set"
		       : r->o->config_path;
}

static int setup_config(struct train_run *r, char *err, size_t errlen)
{
	const struct zinf_train_opts *o = r->o;
	struct zinf_config_resolve_info info = {0};
	bool bf16 = false, fp16 = false;
	int rc;

	rc = zinf_config_create(&r->cfg);
	if (rc)
		return rc;
	rc = zinf_config_load_file(r->cfg, o->config_path);
	for (int i = 0; !rc && i < o->n_config_sets; i++) {
		char kv[4096], *eq;

		snprintf(kv, sizeof(kv), "%s", o->config_sets[i]);
		eq = strchr(kv, '=');
		if (!eq) {
			snprintf(err, errlen, "--set %s: expected KEY=VALUE", o->config_sets[i]);
			return -EINVAL;
		}
		*eq = 0;
		rc = zinf_config_set(r->cfg, kv, eq + 1);
	}
	if (!rc) { /* (a config error is reported below) */
		rc = batch_flag(r, "--micro-batch-size", o->micro_batch_size,
				"train_micro_batch_size_per_gpu", err, errlen);
		if (!rc)
			rc = batch_flag(r, "--gradient-accumulation-steps",
					o->gradient_accumulation_steps,
					"gradient_accumulation_steps", err, errlen);
		if (rc)
			return rc;
	}
	info.world_size = 1;
	info.hidden_size = r->tm.hf.hidden_size;
	info.total_steps = o->steps;
	info.host_total_bytes = zinf_host_memory_bytes();
	info.require_all = true;
	if (!rc)
		rc = zinf_config_resolve(r->cfg, &info);
	if (!rc)
		rc = zinf_config_get_u64(r->cfg, "train_micro_batch_size_per_gpu", &r->B);
	if (!rc)
		rc = zinf_config_get_u64(r->cfg, "gradient_accumulation_steps", &r->gas);
	if (!rc)
		rc = zinf_config_get_bool(r->cfg, "bf16.enabled", &bf16);
	if (!rc)
		rc = zinf_config_get_bool(r->cfg, "fp16.enabled", &fp16);
	if (!rc)
		rc = zinf_config_get_bool(r->cfg, "activation_checkpointing.cpu_checkpointing",
					  &r->cpu_ckpt);
	if (!rc)
		rc = zinf_config_get_bool(r->cfg, "zinf.tf32", &r->tf32);
	if (!rc)
		rc = zinf_config_get_u64(r->cfg, "steps_per_print", &r->print_every);
	if (!rc)
		rc = zinf_config_get_bool(
			r->cfg, "zero_optimization.stage3_gather_16bit_weights_on_model_save",
			&r->save_16bit);
	if (rc) {
		const char *msg = zinf_config_last_error(r->cfg);

		snprintf(err, errlen, "%s", *msg ? msg : "config: batch sizes or precision unset");
		return rc;
	}
	if (r->cpu_ckpt && !o->activation_checkpointing) {
		snprintf(err, errlen,
			 "%s: activation_checkpointing.cpu_checkpointing: true needs "
			 "--activation-checkpointing (without it no layer input is a checkpoint)",
			 origin(r, "activation_checkpointing.cpu_checkpointing"));
		return ZINF_ECONFIG;
	}
	if (r->cpu_ckpt && o->activation_checkpointing) {
		/* refused now rather than killed for memory mid-run */
		uint64_t need = train_pass_cpu_ckpt_bytes(&r->tm, r->B, o->seq_len);
		char a[32], b[32];

		if (need > info.host_total_bytes / 2) {
			snprintf(err, errlen,
				 "%s: activation_checkpointing.cpu_checkpointing: the checkpoints "
				 "need %s of host memory, more than half of this machine's %s",
				 origin(r, "activation_checkpointing.cpu_checkpointing"),
				 zinf_format_bytes(need, a, sizeof(a)),
				 zinf_format_bytes(info.host_total_bytes, b, sizeof(b)));
			return ZINF_EBUDGET;
		}
	}
	if (r->B * o->seq_len > (1u << 30)) {
		snprintf(err, errlen,
			 "%s: train_micro_batch_size_per_gpu %llu x --seq-len %llu is too large",
			 origin(r, "train_micro_batch_size_per_gpu"), (unsigned long long)r->B,
			 (unsigned long long)o->seq_len);
		return ZINF_ECONFIG;
	}
	r->tm.param_dtype = bf16 ? ZINF_DTYPE_BF16 : fp16 ? ZINF_DTYPE_F16 : ZINF_DTYPE_F32;
	return 0;
}

static int setup_data(struct train_run *r, struct train_data *d, const char *path, bool shuffle,
		      char *err, size_t errlen)
{
	const struct zinf_train_opts *o = r->o;
	char why[512];
	size_t n;
	int rc;

	rc = zinf_token_file_create(&d->tf);
	if (rc)
		return rc;
	rc = zinf_token_file_open(d->tf, path,
				  o->data_text ? ZINF_TOKEN_FORMAT_TEXT : ZINF_TOKEN_FORMAT_LLMC);
	if (rc) {
		snprintf(err, errlen, "%s", zinf_token_file_last_error(d->tf));
		return rc;
	}
	if (o->data_text && r->vocab < 256) {
		snprintf(
			err, errlen,
			"%s: --data-format text needs a vocabulary of at least 256 (the model has %llu)",
			path, (unsigned long long)r->vocab);
		return ZINF_ECONFIG;
	}
	n = zinf_token_file_shards(d->tf); /* what a pattern matched */
	if (n > 1)
		zinf_logf(ZINF_LOG_INFO, "%s: %llu tokens in %zu shards, %s to %s", path,
			  (unsigned long long)zinf_token_file_count(d->tf), n,
			  zinf_token_file_shard_path(d->tf, 0),
			  zinf_token_file_shard_path(d->tf, n - 1));
	else if (strcmp(zinf_token_file_shard_path(d->tf, 0), path))
		zinf_logf(ZINF_LOG_INFO, "%s: %llu tokens in 1 shard, %s", path,
			  (unsigned long long)zinf_token_file_count(d->tf),
			  zinf_token_file_shard_path(d->tf, 0));
	rc = zinf_token_windows_init(&d->win, zinf_token_file_count(d->tf), r->B, o->seq_len,
				     shuffle, o->seed, why, sizeof(why));
	if (rc)
		snprintf(err, errlen, "%s: %s", path, why);
	return rc;
}

/* What a saved state records of this run; with resume_dir, its checkpoint's state
 * (read first thing by setup) checked against this run, and the step to go on from. */
static int setup_state(struct train_run *r, char *err, size_t errlen)
{
	const struct zinf_train_opts *o = r->o;
	int rc;

	r->first_step = 1;
	r->now.data_tokens = zinf_token_file_count(r->data.tf);
	r->now.seq_len = o->seq_len;
	r->now.seed = o->seed;
	r->now.shuffle = o->shuffle;
	if (!o->save_state && !o->resume_dir)
		return 0;
	rc = train_state_data_crc(r->data.tf, &r->now.data_crc, err, errlen);
	if (!rc)
		rc = train_state_numerics(r->cfg, &r->now.numerics, err, errlen);
	if (rc || !o->resume_dir)
		return rc;
	rc = train_state_check(&r->ck, &r->now, o->resume_dir, err, errlen);
	if (rc)
		return rc;
	if (r->ck.step >= o->steps) {
		snprintf(err, errlen, "--steps %llu: %s is at step %llu already",
			 (unsigned long long)o->steps, o->resume_dir,
			 (unsigned long long)r->ck.step);
		return -EINVAL;
	}
	r->first_step = r->ck.step + 1;
	return 0;
}

/* The outputs, --log-json and zinf.trace: none an input or a saved file, nor each other. */
static int check_outputs(struct train_run *r, char *err, size_t errlen)
{
	const char *log = r->o->log_json_path, *trace = NULL;
	int rc = 0;

	zinf_config_get_string(r->cfg, "zinf.trace", &trace);
	if (trace && !*trace)
		trace = NULL;
	if (log)
		rc = train_check_output(r->o, "--log-json", log, err, errlen);
	if (!rc && trace)
		rc = train_check_output(r->o, "zinf.trace", trace, err, errlen);
	if (!rc && trace && log)
		rc = train_check_outputs_differ("--log-json", log, "zinf.trace", trace, err,
						errlen);
	if (!rc && trace && log) { /* the trace is written as PATH.tmp, renamed to PATH */
		char tmp[4200];

		snprintf(tmp, sizeof(tmp), "%s.tmp", trace);
		rc = train_check_outputs_differ("--log-json", log, "zinf.trace's temporary file",
						tmp, err, errlen);
	}
	return rc;
}

/* --data against the vocabulary, whole: a small file (read in well under a second)
 * before step 1, a larger one as the steps go (zinf_token_scan_check in the loop). */
static int start_scan(struct train_run *r, char *err, size_t errlen)
{
	struct zinf_token_file *tf = r->data.tf;
	int rc = zinf_token_scan_start(tf, r->vocab, &r->scan);

	if (rc) {
		snprintf(err, errlen, "%s: cannot start its scan: %s", r->o->data_path,
			 zinf_strerror(rc));
		return rc;
	}
	if (!r->scan || zinf_token_file_count(tf) * (uint64_t)zinf_token_file_token_bytes(tf) >
				TRAIN_SCAN_WAIT_BYTES)
		return 0;
	zinf_token_scan_wait(r->scan);
	return zinf_token_scan_check(r->scan, err, errlen);
}

/* What every evaluation reads (its first --eval-batches micro-batches), read once before
 * the model loads: a token beyond the vocabulary is refused now, not after the load with
 * the --log-json file emptied. Once the windows have gone round the file every token has
 * been read, so no more than that is. An evaluation that wraps round the file is said. */
static int check_eval_data(struct train_run *r, char *err, size_t errlen)
{
	const struct zinf_train_opts *o = r->o;
	uint64_t n = zinf_token_file_count(r->eval.tf), per_batch = r->B * o->seq_len;
	uint64_t once = (n - 1) / per_batch + 1;	    /* micro-batches that cover the file */
	bool wraps = o->eval_batches > (n - 1) / per_batch; /* eval_batches * B * T + 1 > n */

	for (uint64_t i = 0; i < o->eval_batches && i < once; i++) {
		int rc = zinf_token_file_read_batch(r->eval.tf, &r->eval.win, i, r->vocab,
						    r->inputs, r->targets);
		if (rc) {
			snprintf(err, errlen, "%s", zinf_token_file_last_error(r->eval.tf));
			return rc;
		}
	}
	if (wraps)
		zinf_logf(ZINF_LOG_WARN,
			  "%s: --eval-batches %llu of %llu x %llu tokens read more than the file's "
			  "%llu: the windows wrap round to its start and count some tokens again",
			  o->eval_data_path, (unsigned long long)o->eval_batches,
			  (unsigned long long)r->B, (unsigned long long)o->seq_len,
			  (unsigned long long)n);
	return 0;
}

static int setup(struct train_run *r, char *err, size_t errlen)
{
	const struct zinf_train_opts *o = r->o;
	const struct zinf_hf_config *hf = &r->tm.hf;
	int rc;

	rc = check_opts(o, err, errlen);
	if (!rc)
		rc = zinf_cpu_model_check_address_space(err, errlen);
	if (!rc && o->model_dir)
		rc = train_source_finish_move(o->model_dir, "--model", err, errlen);
	if (!rc && o->resume_dir)
		rc = train_source_finish_move(o->resume_dir, "--resume", err, errlen);
	train_source_dir_init(&r->src_dir, o); /* as it is now: a link may move later */
	if (!rc && (o->model_dir || o->resume_dir))
		rc = train_save_seen(o->model_dir ? o->model_dir : o->resume_dir, &r->src_seen, err,
				     errlen);
	/* read now: every save of the run writes them as they were when it started */
	if (!rc && o->save_dir && (o->model_dir || o->resume_dir))
		rc = train_companions_read(&r->companions,
					   o->model_dir ? o->model_dir : o->resume_dir,
					   o->model_dir ? "--model" : "--resume", err, errlen);
	/* every file the resume loads is checked against the state's list first */
	if (!rc && o->resume_dir)
		rc = train_state_read(o->resume_dir, &r->ck, err, errlen);
	if (!rc)
		rc = train_model_config(&r->tm, o, err, errlen);
	if (rc)
		return rc;
	/* a sliding window does not bound T: attention masks keys beyond it */
	rc = train_model_check_seq_len(hf, o->seq_len, err, errlen);
	if (rc)
		return rc;
	if (o->model_dir || o->resume_dir) {
		rc = train_model_check_checkpoint(
			&r->tm, o->model_dir ? o->model_dir : o->resume_dir, err, errlen);
		if (rc)
			return rc;
	}
	rc = setup_config(r, err, errlen);
	if (!rc)
		rc = check_outputs(r, err, errlen);
	if (!rc)
		rc = train_check_inputs_unsaved(o, err, errlen);
	if (rc)
		return rc;
	r->vocab = hf->vocab_size;
	rc = setup_data(r, &r->data, o->data_path, o->shuffle, err, errlen);
	if (!rc)
		rc = start_scan(r, err, errlen);
	if (!rc && o->eval_data_path)
		rc = setup_data(r, &r->eval, o->eval_data_path, false, err, errlen);
	if (!rc)
		rc = setup_state(r, err, errlen);
	/* the save directory is made (so a path that cannot be is refused now) and locked
	 * before its .partial snapshots are looked at */
	if (!rc && o->save_dir) {
		rc = train_save_dir_make(o->save_dir, &r->save_dir_made, err, errlen);
		if (rc >= 0) {
			r->save_lock = rc;
			rc = train_snapshots_check(o, r->first_step, err, errlen);
		}
	}
	if (rc)
		return rc;
	r->inputs = malloc(r->B * o->seq_len * sizeof(int32_t));
	r->targets = malloc(r->B * o->seq_len * sizeof(int32_t));
	if (!r->inputs || !r->targets) {
		snprintf(err, errlen, "out of memory for a micro-batch of %llu tokens",
			 (unsigned long long)(r->B * o->seq_len));
		return -ENOMEM;
	}
	if (o->eval_data_path) {
		rc = check_eval_data(r, err, errlen);
		if (rc)
			return rc;
	}
	if (o->log_json_path) {
		/* opened (so a path that cannot be written is refused now) but emptied only
		 * when the run starts: a run refused later leaves an earlier log as it was */
		/* (a FIFO with no reader fails at once, ENXIO, instead of waiting for one; the
		 * descriptor then blocks as usual, so /dev/stdout into a pipe works) */
		int fd = open(o->log_json_path, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0 && errno == ENOENT) {
			fd = open(o->log_json_path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK,
				  0644); /* (through a dangling link too) */
			/* (the path of the file made: a link to it stays a link) */
			if (fd >= 0)
				r->log_made = realpath(o->log_json_path, NULL);
		}
		if (fd >= 0)
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
		r->log = fd >= 0 ? fdopen(fd, "w") : NULL;
		if (!r->log) {
			rc = -errno;
			if (fd >= 0)
				close(fd);
			snprintf(err, errlen, "%s: --log-json: cannot create: %s", o->log_json_path,
				 rc == -ENXIO
					 ? "a FIFO no process reads yet (start its reader first)"
					 : strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* The most a step holds on the device at once, against the budget before step 1: each
 * module with its gradient buffers (a decoder layer in its backward), and a tied head
 * with the embedding (both out while the head runs). */
static int check_device_room(struct train_run *r, char *err, size_t errlen)
{
	const struct train_model *tm = &r->tm;
	int rc = 0;

	for (int m = 0; m < tm->L + 2 && !rc; m++)
		rc = zinf_engine_check_room(r->e, 1, &tm->module[m], true);
	if (!rc && tm->lc.tie_word_embeddings)
		rc = zinf_engine_check_room(
			r->e, 2, (const uint32_t[2]){tm->module[0], tm->module[tm->L + 1]}, true);
	if (rc)
		snprintf(err, errlen, "%s", zinf_last_error(r->e));
	return rc;
}

/* Engine, parameters, runtime: a budget that cannot hold the model is refused here. */
static int start(struct train_run *r, char *err, size_t errlen)
{
	struct train_pass_opts po = {
		.ckpt = r->o->activation_checkpointing, .cpu_ckpt = r->cpu_ckpt, .tf32 = r->tf32};
	int rc;

	rc = zinf_engine_create(r->cfg, &r->e, err, errlen);
	if (!rc) /* a stop cuts an optimizer update short: the run saves nothing after it */
		zinf_engine_set_stop(r->e, r->o->stop);
	r->tm.stop = r->o->stop; /* and a load or a pass, at its next module */
	if (!rc)
		rc = train_model_register(&r->tm, r->e, err, errlen);
	if (!rc && r->o->resume_dir)
		rc = train_state_check_device(&r->ck, r->e, r->o->resume_dir, err, errlen);
	if (!rc && r->o->resume_dir)
		rc = train_state_load(&r->tm, r->e, r->o->resume_dir, &r->ck, err, errlen);
	else if (!rc)
		rc = train_model_load(&r->tm, r->e, r->o, err, errlen);
	if (!rc && (r->o->model_dir || r->o->resume_dir))
		rc = train_source_unchanged(r->o->model_dir ? r->o->model_dir : r->o->resume_dir,
					    r->o->model_dir ? "--model" : "--resume", r->src_seen,
					    err, errlen);
	/* the optimizer state's writes, which go on after the load: their errors are its */
	if (!rc && (rc = zinf_engine_sync(r->e)) != 0)
		snprintf(err, errlen, "load: %s", zinf_last_error(r->e));
	if (!rc)
		rc = train_pass_create(&r->pass, &r->tm, r->e, (int)r->B, (int)r->o->seq_len, &po,
				       err, errlen);
	if (!rc)
		rc = check_device_room(r, err, errlen);
	return rc;
}

/* Whether fd is the file descriptor other is open on. */
static bool same_file(int fd, int other)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && fstat(other, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

/* The log emptied when the run starts, if it is a regular file (a pipe, a terminal or
 * /dev/null is written as it is); one that is the process's stdout or stderr (a
 * --log-json /dev/stdout into `>> file`) is appended to instead. 0 or -errno. */
static int log_start(FILE *log)
{
	struct stat st;
	int fd = fileno(log);

	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	if (same_file(fd, STDOUT_FILENO) || same_file(fd, STDERR_FILENO))
		return fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_APPEND) ? -errno : 0;
	return ftruncate(fd, 0) ? -errno : 0;
}

/* A --log-json file this run made and wrote no line into (a refused or stopped run, or
 * one failing in step 1) goes again, as the save directory it made does: only while its
 * path still names it (a link the path went through stays). */
static void unmake_empty_log(struct train_run *r)
{
	struct stat a, b;

	if (!fflush(r->log) && !fstat(fileno(r->log), &a) && !lstat(r->log_made, &b) &&
	    a.st_size == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		unlink(r->log_made);
}

static void finish(struct train_run *r, bool failed)
{
	/* the engine and its files first: their descriptors back (a run refused for too
	 * few of them can still read its save directory) */
	train_companions_free(&r->companions);
	zinf_token_scan_stop(r->scan);
	if (r->pass.m)
		train_pass_destroy(&r->pass);
	zinf_engine_destroy(r->e);
	zinf_token_file_destroy(r->data.tf);
	zinf_token_file_destroy(r->eval.tf);
	if (r->drop_final)
		train_drop_partial(r->o->save_dir, TRAIN_FINAL_PARTIAL);
	if (r->log && failed && r->log_made) /* (before: it may lie in the save directory) */
		unmake_empty_log(r);
	free(r->log_made);
	if (failed && r->save_dir_made) /* as it was: no directory (unless it holds more) */
		train_save_dir_unmake(r->o->save_dir);
	if (r->save_lock >= 0)
		close(r->save_lock);
	if (r->log)
		fclose(r->log);
	free(r->inputs);
	free(r->targets);
	train_model_free(&r->tm);
	train_state_free(&r->now);
	train_state_free(&r->ck);
	zinf_config_destroy(r->cfg);
}

static void fill_result(struct train_run *r, struct zinf_train_result *res)
{
	struct zinf_stats st;

	zinf_engine_get_stats(r->e, &st);
	res->param_elems = r->tm.param_elems;
	res->peak_device_bytes = st.device_peak;
	res->peak_pinned_bytes = st.pinned_peak;
	res->device_limit_bytes = st.device_limit;
	res->pinned_limit_bytes = st.pinned_limit;
	res->host_pinned_bytes = st.host_pinned;
	res->nvme_read_bytes = st.nvme_to_pinned.bytes;
	res->nvme_write_bytes = st.pinned_to_nvme.bytes;
}

int zinf_train_run(const struct zinf_train_opts *opts, struct zinf_train_result *result, char *err,
		   size_t errlen)
{
	struct zinf_train_result local;
	struct zinf_train_result *res = result ? result : &local;
	struct train_run r;
	double t0 = train_now_seconds();
	char scratch[1024];
	int rc;

	if (!err || !errlen) { /* no message wanted: one is still built (it is read below) */
		err = scratch;
		errlen = sizeof(scratch);
	}
	if (!opts) {
		snprintf(err, errlen, "train: opts is NULL (required)");
		return -EINVAL;
	}
	memset(&r, 0, sizeof(r));
	r.save_lock = -1;
	memset(res, 0, sizeof(*res));
	res->first_eval_loss = res->last_eval_loss = NAN;
	res->first_loss = res->last_loss = NAN;
	err[0] = 0;
	r.o = opts;
	rc = setup(&r, err, errlen);
	if (!rc)
		rc = start(&r, err, errlen);
	if (!rc && r.log && (rc = log_start(r.log)) != 0)
		snprintf(err, errlen, "%s: --log-json: cannot empty it: %s", opts->log_json_path,
			 strerror(-rc));
	if (rc == -EINTR && train_stop_up(opts->stop)) { /* in a load */
		res->stopped = true;
		goto out;
	}
	if (rc) {
		/* Everything up to here is a check of the input, except running out of
		 * memory, a failing device, a directory another live run holds (the same
		 * command works once it ends) and the process's limits (ulimit -n, -f, -u). */
		res->bad_input = rc != -ENOMEM && rc != -EIO && rc != ZINF_EDEVICE &&
				 rc != -EBUSY && rc != -EMFILE && rc != -ENFILE && rc != -EFBIG &&
				 rc != -EAGAIN;
		goto out;
	}
	rc = train_run_loop(&r, res, err, errlen);
	if (rc == -EINTR && train_stop_up(opts->stop)) {
		res->stopped = true;
		goto out;
	}
	if (rc) {
		/* A token out of the vocabulary shows only when its batch is read. */
		res->bad_input = rc == ZINF_EFORMAT;
		goto out;
	}
	fill_result(&r, res);
	if (opts->save_dir)
		rc = train_save_final(&r, res, err, errlen);
	if (!rc && (rc = zinf_engine_write_trace(r.e)) != 0) { /* a run's output, as its log */
		if (opts->save_dir)
			snprintf(err, errlen, "%s (the save in %s is complete)",
				 zinf_last_error(r.e), opts->save_dir);
		else
			snprintf(err, errlen, "%s", zinf_last_error(r.e));
	}
out:
	res->seconds = train_now_seconds() - t0;
	finish(&r, rc != 0);
	zinf_error_one_line(err); /* names and values from files may hold a newline */
	return rc;
}
