/* The flags zinf train and zinf bench train share (see train_flags.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_flags.h"
#include "zinf/zinf.h"

/* text as a whole number: 0, -EINVAL (not one: " -1", "+1", "1e3") or -ERANGE (> 2^64-1). */
static int parse_u64(const char *text, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (text[0] < '0' || text[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE)
		return -ERANGE;
	*out = v;
	return 0;
}

int train_flag_u64(const char *prog, const char *flag, const char *text, uint64_t *out)
{
	int rc = parse_u64(text, out);

	if (rc == -ERANGE) /* (past 2^64 - 1; the flag's own bound may be lower) */
		fprintf(stderr, "%s: %s %s: too large\n", prog, flag, text);
	else if (rc)
		fprintf(stderr, "%s: %s %s: not a whole number\n", prog, flag, text);
	return rc ? -1 : 0;
}

/* A whole number >= 1, at most the config's bound for a batch size (1e9). */
static int positive(const char *prog, const char *flag, const char *text, uint64_t *out)
{
	int rc = parse_u64(text, out);

	if (rc == -EINVAL) {
		fprintf(stderr, "%s: %s %s: not a whole number\n", prog, flag, text);
		return -1;
	}
	if (rc || *out < 1 || *out > 1000000000) {
		fprintf(stderr, "%s: %s %s: expected 1 to 1000000000\n", prog, flag, text);
		return -1;
	}
	return 0;
}

static int parse_choice(const char *prog, const char *flag, const char *text, const char *a,
			const char *b, bool *is_b)
{
	if (strcmp(text, a) && strcmp(text, b)) {
		fprintf(stderr, "%s: %s %s: expected %s or %s\n", prog, flag, text, a, b);
		return -1;
	}
	*is_b = strcmp(text, b) == 0;
	return 0;
}

static int parse_dtype(const char *prog, const char *text, enum zinf_dtype *out)
{
	if (strcmp(text, "bf16") == 0)
		*out = ZINF_DTYPE_BF16;
	else if (strcmp(text, "fp16") == 0)
		*out = ZINF_DTYPE_F16;
	else if (strcmp(text, "fp32") == 0)
		*out = ZINF_DTYPE_F32;
	else {
		fprintf(stderr, "%s: --save-dtype %s: expected bf16, fp16 or fp32\n", prog, text);
		return -1;
	}
	return 0;
}

int train_flag_apply(struct train_flags *f, int c, const char *arg)
{
	struct zinf_train_opts *o = f->o;

	switch (c) {
	case TF_MODEL:
		o->model_dir = arg;
		return 0;
	case TF_INIT:
		o->init_config = arg;
		return 0;
	case TF_CONFIG:
		o->config_path = arg;
		return 0;
	case TF_SET:
		if (f->n_sets >= TRAIN_FLAGS_MAX_SETS) {
			fprintf(stderr, "%s: --set: more than %d overrides\n", f->prog,
				TRAIN_FLAGS_MAX_SETS);
			return -1;
		}
		f->sets[f->n_sets++] = arg;
		o->config_sets = f->sets;
		o->n_config_sets = f->n_sets;
		return 0;
	case TF_DATA:
		o->data_path = arg;
		return 0;
	case TF_DATA_FORMAT:
		return parse_choice(f->prog, "--data-format", arg, "llmc", "text", &o->data_text);
	case TF_SEQ_LEN:
		return train_flag_u64(f->prog, "--seq-len", arg, &o->seq_len);
	case TF_MICRO_BATCH:
		return positive(f->prog, "--micro-batch-size", arg, &o->micro_batch_size);
	case TF_GRAD_ACCUM:
		return positive(f->prog, "--gradient-accumulation-steps", arg,
				&o->gradient_accumulation_steps);
	case TF_STEPS:
		return train_flag_u64(f->prog, "--steps", arg, &o->steps);
	case TF_SEED:
		return train_flag_u64(f->prog, "--seed", arg, &o->seed);
	case TF_SHUFFLE:
		return parse_choice(f->prog, "--shuffle", arg, "none", "seeded", &o->shuffle);
	case TF_CKPT:
		o->activation_checkpointing = true;
		return 0;
	case TF_EVAL_DATA:
		o->eval_data_path = arg;
		return 0;
	case TF_EVAL_EVERY:
		return train_flag_u64(f->prog, "--eval-every", arg, &o->eval_every);
	case TF_EVAL_BATCHES:
		return positive(f->prog, "--eval-batches", arg, &o->eval_batches);
	case TF_SAVE:
		o->save_dir = arg;
		return 0;
	case TF_SAVE_DTYPE:
		return parse_dtype(f->prog, arg, &o->save_dtype);
	case TF_SAVE_SHARD:
		if (zinf_parse_bytes(arg, &o->save_max_shard_bytes) || !o->save_max_shard_bytes) {
			fprintf(stderr, "%s: --save-shard-size %s: not a byte size\n", f->prog,
				arg);
			return -1;
		}
		return 0;
	case TF_SAVE_EVERY:
		return train_flag_u64(f->prog, "--save-every", arg, &o->save_every);
	case TF_SAVE_TOTAL_LIMIT:
		if (train_flag_u64(f->prog, "--save-total-limit", arg, &o->save_total_limit))
			return -1;
		if (!o->save_total_limit) {
			fprintf(stderr, "%s: --save-total-limit 0: must be >= 1\n", f->prog);
			return -1;
		}
		return 0;
	case TF_SAVE_STATE:
		o->save_state = true;
		return 0;
	case TF_RESUME:
		o->resume_dir = arg;
		return 0;
	case TF_LOG_JSON:
		o->log_json_path = arg;
		return 0;
	}
	fprintf(stderr, "%s: bad option (try '%s --help')\n", f->prog, f->prog);
	return -1;
}
