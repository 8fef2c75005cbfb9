/*
 * zinf train: parse the flags into a struct zinf_train_opts, run zinf_train_run(), and
 * show progress: a one-line bar redrawn in place on a terminal (step/N, loss, tokens/s,
 * ETA, NVMe GB/s), one plain line per step otherwise. Exit 0 done, 1 failed while
 * running, 2 invalid input (one line on stderr).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "zinf/train.h"
#include "zinf/zinf.h"

const char cmd_train_usage[] =
	"usage: zinf train (--model DIR | --init CONFIG.json) --config DS.json --data FILE\n"
	"                  --seq-len T --steps N [options]\n"
	"Train a Llama-family model (llama, mistral, qwen2) through the offload engine.\n"
	"Batch sizes, precision, optimizer, schedule and tiers come from the config.\n"
	"options:\n"
	"  --model DIR              Hugging Face checkpoint (config.json + safetensors)\n"
	"  --init CONFIG.json       Hugging Face-style config.json: seeded random init\n"
	"  --config DS.json         DeepSpeed-style config (required)\n"
	"  --set KEY=VALUE          override a config key (repeatable)\n"
	"  --data FILE              training tokens (llm.c token file, or text)\n"
	"  --data-format llmc|text  text: the file's bytes are the tokens (vocab >= 256)\n"
	"  --seq-len T              tokens per row (<= max_position_embeddings)\n"
	"  --steps N                optimizer steps\n"
	"  --seed S                 random init and shuffling (default 1337)\n"
	"  --shuffle none|seeded    window order (default none: sequential)\n"
	"  --activation-checkpointing  recompute each decoder layer in backward\n"
	"  --eval-data FILE         evaluation tokens (same format as --data)\n"
	"  --eval-every K           evaluate every K steps (and before step 1, after the last)\n"
	"  --eval-batches M         micro-batches per evaluation (default 4)\n"
	"  --save DIR               write config.json + safetensors at the end\n"
	"  --save-dtype bf16|fp16|fp32  (default: the checkpoint's dtype; fp32 with --init)\n"
	"  --save-shard-size BYTES  largest safetensors shard (default 5GB)\n"
	"  --log-json FILE          one JSON object per line per optimizer step\n"
	"  -q, --quiet              no progress output\n";

enum {
	OPT_MODEL = 256,
	OPT_INIT,
	OPT_CONFIG,
	OPT_SET,
	OPT_DATA,
	OPT_DATA_FORMAT,
	OPT_SEQ_LEN,
	OPT_STEPS,
	OPT_SEED,
	OPT_SHUFFLE,
	OPT_CKPT,
	OPT_EVAL_DATA,
	OPT_EVAL_EVERY,
	OPT_EVAL_BATCHES,
	OPT_SAVE,
	OPT_SAVE_DTYPE,
	OPT_SAVE_SHARD,
	OPT_LOG_JSON,
};

struct progress {
	FILE *f;
	bool tty, quiet, drawn;
};

static int parse_u64(const char *flag, const char *text, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || end == text || *end || text[0] == '-') {
		fprintf(stderr, "zinf train: %s %s: not a whole number\n", flag, text);
		return -1;
	}
	*out = v;
	return 0;
}

static void fmt_eta(double seconds, char *buf, size_t len)
{
	long s = seconds > 0 && seconds < 1e8 ? (long)(seconds + 0.5) : 0;

	snprintf(buf, len, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

static void on_step(const struct zinf_train_step *s, void *user)
{
	struct progress *p = user;
	double nvme_gbs, eta;
	char etabuf[32], bar[21];
	int fill;

	if (p->quiet)
		return;
	if (s->step == 0) {
		fprintf(p->f, "eval before step 1: loss %.4f\n", s->eval_loss);
		return;
	}
	nvme_gbs = s->step_seconds > 0 ? (double)(s->nvme_read_bytes + s->nvme_write_bytes) /
						 s->step_seconds / 1e9
				       : 0;
	eta = s->elapsed_seconds / (double)s->step * (double)(s->steps - s->step);
	fmt_eta(eta, etabuf, sizeof(etabuf));
	if (!p->tty) {
		fprintf(p->f,
			"step %" PRIu64 "/%" PRIu64
			" loss %.4f lr %.3g %.0f tok/s nvme %.2f GB/s eta %s%s\n",
			s->step, s->steps, s->loss, s->lr, s->tokens_per_second, nvme_gbs, etabuf,
			s->skipped ? " (skipped)" : "");
	} else {
		fill = (int)(20 * s->step / (s->steps ? s->steps : 1));
		memset(bar, '#', (size_t)fill);
		memset(bar + fill, '.', (size_t)(20 - fill));
		bar[20] = 0;
		fprintf(p->f,
			"\r[%s] step %" PRIu64 "/%" PRIu64
			" | loss %.4f | %.0f tok/s | ETA %s | NVMe %.2f GB/s\033[K",
			bar, s->step, s->steps, s->loss, s->tokens_per_second, etabuf, nvme_gbs);
		p->drawn = true;
		if (s->step == s->steps) {
			fputc('\n', p->f);
			p->drawn = false;
		}
	}
	if (s->has_eval) {
		if (p->drawn)
			fputc('\n', p->f);
		fprintf(p->f, "eval after step %" PRIu64 ": loss %.4f\n", s->step, s->eval_loss);
	}
	fflush(p->f);
}

static int parse_choice(const char *flag, const char *text, const char *a, const char *b,
			bool *is_b)
{
	if (strcmp(text, a) && strcmp(text, b)) {
		fprintf(stderr, "zinf train: %s %s: expected %s or %s\n", flag, text, a, b);
		return -1;
	}
	*is_b = strcmp(text, b) == 0;
	return 0;
}

static int parse_dtype(const char *text, enum zinf_dtype *out)
{
	if (strcmp(text, "bf16") == 0)
		*out = ZINF_DTYPE_BF16;
	else if (strcmp(text, "fp16") == 0)
		*out = ZINF_DTYPE_F16;
	else if (strcmp(text, "fp32") == 0)
		*out = ZINF_DTYPE_F32;
	else {
		fprintf(stderr, "zinf train: --save-dtype %s: expected bf16, fp16 or fp32\n", text);
		return -1;
	}
	return 0;
}

/* Apply one flag to o. Returns 0, or -1 after printing the error. */
static int apply_flag(int c, const char *arg, struct zinf_train_opts *o, const char **sets,
		      int *n_sets, int max_sets, bool *quiet)
{
	switch (c) {
	case OPT_MODEL:
		o->model_dir = arg;
		return 0;
	case OPT_INIT:
		o->init_config = arg;
		return 0;
	case OPT_CONFIG:
		o->config_path = arg;
		return 0;
	case OPT_SET:
		if (*n_sets >= max_sets) {
			fprintf(stderr, "zinf train: --set: more than %d overrides\n", max_sets);
			return -1;
		}
		sets[(*n_sets)++] = arg;
		return 0;
	case OPT_DATA:
		o->data_path = arg;
		return 0;
	case OPT_DATA_FORMAT:
		return parse_choice("--data-format", arg, "llmc", "text", &o->data_text);
	case OPT_SEQ_LEN:
		return parse_u64("--seq-len", arg, &o->seq_len);
	case OPT_STEPS:
		return parse_u64("--steps", arg, &o->steps);
	case OPT_SEED:
		return parse_u64("--seed", arg, &o->seed);
	case OPT_SHUFFLE:
		return parse_choice("--shuffle", arg, "none", "seeded", &o->shuffle);
	case OPT_CKPT:
		o->activation_checkpointing = true;
		return 0;
	case OPT_EVAL_DATA:
		o->eval_data_path = arg;
		return 0;
	case OPT_EVAL_EVERY:
		return parse_u64("--eval-every", arg, &o->eval_every);
	case OPT_EVAL_BATCHES:
		return parse_u64("--eval-batches", arg, &o->eval_batches);
	case OPT_SAVE:
		o->save_dir = arg;
		return 0;
	case OPT_SAVE_DTYPE:
		return parse_dtype(arg, &o->save_dtype);
	case OPT_SAVE_SHARD:
		if (zinf_parse_bytes(arg, &o->save_max_shard_bytes) || !o->save_max_shard_bytes) {
			fprintf(stderr, "zinf train: --save-shard-size %s: not a byte size\n", arg);
			return -1;
		}
		return 0;
	case OPT_LOG_JSON:
		o->log_json_path = arg;
		return 0;
	case 'q':
		*quiet = true;
		return 0;
	}
	fprintf(stderr, "zinf train: bad option (try 'zinf train --help')\n");
	return -1;
}

int cmd_train(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"model", required_argument, NULL, OPT_MODEL},
		{"init", required_argument, NULL, OPT_INIT},
		{"config", required_argument, NULL, OPT_CONFIG},
		{"set", required_argument, NULL, OPT_SET},
		{"data", required_argument, NULL, OPT_DATA},
		{"data-format", required_argument, NULL, OPT_DATA_FORMAT},
		{"seq-len", required_argument, NULL, OPT_SEQ_LEN},
		{"steps", required_argument, NULL, OPT_STEPS},
		{"seed", required_argument, NULL, OPT_SEED},
		{"shuffle", required_argument, NULL, OPT_SHUFFLE},
		{"activation-checkpointing", no_argument, NULL, OPT_CKPT},
		{"eval-data", required_argument, NULL, OPT_EVAL_DATA},
		{"eval-every", required_argument, NULL, OPT_EVAL_EVERY},
		{"eval-batches", required_argument, NULL, OPT_EVAL_BATCHES},
		{"save", required_argument, NULL, OPT_SAVE},
		{"save-dtype", required_argument, NULL, OPT_SAVE_DTYPE},
		{"save-shard-size", required_argument, NULL, OPT_SAVE_SHARD},
		{"log-json", required_argument, NULL, OPT_LOG_JSON},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	enum { MAX_SETS = 64 };
	const char *sets[MAX_SETS];
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct progress prog = {.f = stdout};
	char err[2048];
	int c, n_sets = 0;

	zinf_train_opts_init(&o);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
		if (c == 'h') {
			fputs(cmd_train_usage, stdout);
			return ZINF_EXIT_OK;
		}
		if (c == '?' || c == ':') {
			fprintf(stderr,
				"zinf train: %s: unknown option or missing value (try 'zinf train --help')\n",
				argv[optind - 1]);
			return ZINF_EXIT_USAGE;
		}
		if (apply_flag(c, optarg, &o, sets, &n_sets, MAX_SETS, &prog.quiet))
			return ZINF_EXIT_USAGE;
	}
	if (optind < argc) {
		fprintf(stderr, "zinf train: %s: unexpected argument (try 'zinf train --help')\n",
			argv[optind]);
		return ZINF_EXIT_USAGE;
	}
	o.config_sets = sets;
	o.n_config_sets = n_sets;
	o.on_step = on_step;
	o.on_step_user = &prog;
	prog.tty = isatty(fileno(stdout));
	if (zinf_train_run(&o, &res, err, sizeof(err))) {
		if (prog.drawn)
			fputc('\n', stdout);
		fprintf(stderr, "zinf train: %s\n", err);
		return res.bad_input ? ZINF_EXIT_USAGE : ZINF_EXIT_FAIL;
	}
	if (!prog.quiet)
		printf("done: %" PRIu64 " steps, loss %.4f -> %.4f, %.1f s; %" PRIu64
		       " parameters, peak device %.1f of %.1f MiB, peak pinned %.1f of %.1f MiB, "
		       "NVMe read %.1f MiB, written %.1f MiB%s%s\n",
		       res.steps, res.first_loss, res.last_loss, res.seconds, res.param_elems,
		       (double)res.peak_device_bytes / 1048576.0,
		       (double)res.device_limit_bytes / 1048576.0,
		       (double)res.peak_pinned_bytes / 1048576.0,
		       (double)res.pinned_limit_bytes / 1048576.0,
		       (double)res.nvme_read_bytes / 1048576.0,
		       (double)res.nvme_write_bytes / 1048576.0, o.save_dir ? "; saved to " : "",
		       o.save_dir ? o.save_dir : "");
	return ZINF_EXIT_OK;
}
