/*
 * zinf train: parse the flags into a struct zinf_train_opts, run zinf_train_run(), and
 * show progress: a one-line bar redrawn in place on a terminal (step/N, loss, tokens/s,
 * ETA, NVMe GB/s), plain lines every steps_per_print steps otherwise. Exit 0 done, 1
 * failed while running, 2 invalid input (one line on stderr).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "train_flags.h"
#include "zinf/train.h"
#include "zinf/zinf.h"

const char cmd_train_usage[] =
	"usage: zinf train (--model DIR | --init CONFIG.json | --resume DIR) --config DS.json\n"
	"                  --data FILE --seq-len T --steps N [options]\n"
	"Train a Llama-family model (llama, mistral, qwen2) through the offload engine.\n"
	"Batch sizes, precision, optimizer, schedule and tiers come from the config.\n"
	"options:\n"
	"  --model DIR              Hugging Face checkpoint (config.json + safetensors)\n"
	"  --init CONFIG.json       Hugging Face-style config.json: seeded random init\n"
	"  --resume DIR             go on from a checkpoint saved with --save-state, to step N\n"
	"                           (same config, data and flags; checked before step 1)\n"
	"  --config DS.json         DeepSpeed-style config (required)\n"
	"  --set KEY=VALUE          override a config key (repeatable)\n"
	"  --data FILE              training tokens (llm.c token file, or text), or a\n"
	"                           quoted glob pattern of shards ('train_*.bin')\n"
	"  --data-format llmc|text  text: the file's bytes are the tokens (vocab >= 256)\n"
	"  --seq-len T              tokens per row, at most 1048576 and max_position_embeddings\n"
	"                           (or what linear/dynamic/yarn rope scaling stretches it to)\n"
	"  --micro-batch-size B     sequences per micro-batch, for the config's \"auto\"\n"
	"  --gradient-accumulation-steps G  micro-batches per step, for its \"auto\"\n"
	"  --steps N                optimizer steps\n"
	"  --seed S                 random init and shuffling (default 1337)\n"
	"  --shuffle none|seeded    window order (default none: sequential)\n"
	"  --activation-checkpointing  recompute each decoder layer in backward\n"
	"  --eval-data FILE         evaluation tokens (same format as --data)\n"
	"  --eval-every K           evaluate every K steps (and before step 1, after the last)\n"
	"  --eval-batches M         micro-batches per evaluation (default 4)\n"
	"  --save DIR               write config.json + safetensors at the end (and the\n"
	"                           --model/--resume tokenizer and generation files)\n"
	"  --save-dtype bf16|fp16|fp32  (default: the checkpoint's dtype; fp32 with --init;\n"
	"                           16-bit with stage3_gather_16bit_weights_on_model_save)\n"
	"  --save-shard-size BYTES  largest safetensors shard (default 5GB)\n"
	"  --save-every K           also save every K steps, to DIR/checkpoint-<step>\n"
	"  --save-state             saves also hold the optimizer state, for --resume\n"
	"  --save-total-limit N     keep the newest N checkpoint-<step> (with --save-every)\n"
	"  --log-json FILE          one JSON object per line per optimizer step\n"
	"  -q, --quiet              no progress output\n"
	"SIGINT (Ctrl-C) or SIGTERM: stop at the next module (a step caught in its forward and\n"
	"backward is dropped; a --save-every snapshot under way is dropped, the final save\n"
	"finishes), clean up, then end by the signal (status 130/143 in a shell).\n";

struct progress {
	FILE *f;
	bool tty, quiet, drawn;
	bool nvme; /* a step has moved NVMe bytes: the lines show the rate from then on */
};

static void fmt_eta(double seconds, char *buf, size_t len)
{
	long s = seconds > 0 && seconds < 1e8 ? (long)(seconds + 0.5) : 0;

	snprintf(buf, len, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
}

/* Before a line of its own: end the progress bar's line, if one is drawn. */
static void end_bar(struct progress *p)
{
	if (p->drawn)
		fputc('\n', p->f);
	p->drawn = false;
}

/* Not a terminal: a line for the run's first and last steps, every steps_per_print'th
 * and each skipped one (as DeepSpeed prints). */
static bool print_line(const struct zinf_train_step *s)
{
	return s->step == s->resumed_from + 1 || s->step == s->steps || s->skipped ||
	       s->steps_per_print <= 1 || s->step % s->steps_per_print == 0;
}

static void on_step(const struct zinf_train_step *s, void *user)
{
	struct progress *p = user;
	double nvme_gbs, eta;
	char etabuf[32], bar[21], rate[40] = "";
	int fill;

	if (p->quiet)
		return;
	if (s->step == 0) {
		fprintf(p->f, "eval before step %" PRIu64 ": loss %.4f\n", s->resumed_from + 1,
			s->eval_loss);
		return;
	}
	nvme_gbs = s->step_seconds > 0 ? (double)(s->nvme_read_bytes + s->nvme_write_bytes) /
						 s->step_seconds / 1e9
				       : 0;
	p->nvme = p->nvme || s->nvme_read_bytes + s->nvme_write_bytes > 0;
	if (p->nvme && p->tty)
		snprintf(rate, sizeof(rate), " | NVMe %.2f GB/s", nvme_gbs);
	else if (p->nvme)
		snprintf(rate, sizeof(rate), " nvme %.2f GB/s", nvme_gbs);
	eta = s->elapsed_seconds / (double)(s->step - s->resumed_from) *
	      (double)(s->steps - s->step);
	fmt_eta(eta, etabuf, sizeof(etabuf));
	if (!p->tty) {
		if (print_line(s))
			fprintf(p->f,
				"step %" PRIu64 "/%" PRIu64
				" loss %.4f lr %.3g %.0f tok/s%s eta %s%s\n",
				s->step, s->steps, s->loss, s->lr, s->tokens_per_second, rate,
				etabuf, s->skipped ? " (skipped)" : "");
	} else {
		fill = (int)(20 * s->step / (s->steps ? s->steps : 1));
		memset(bar, '#', (size_t)fill);
		memset(bar + fill, '.', (size_t)(20 - fill));
		bar[20] = 0;
		fprintf(p->f,
			"\r[%s] step %" PRIu64 "/%" PRIu64
			" | loss %.4f | %.0f tok/s | ETA %s%s\033[K",
			bar, s->step, s->steps, s->loss, s->tokens_per_second, etabuf, rate);
		p->drawn = true;
		if (s->step == s->steps) {
			fputc('\n', p->f);
			p->drawn = false;
		}
	}
	if (s->has_eval) {
		end_bar(p);
		fprintf(p->f, "eval after step %" PRIu64 ": loss %.4f\n", s->step, s->eval_loss);
	}
	if (s->saved) {
		end_bar(p);
		fprintf(p->f, "saved checkpoint-%" PRIu64 "\n", s->step);
	}
	fflush(p->f);
}

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t stderr_tty; /* the message then starts a line, after ^C */

/* SIGINT, SIGTERM: the run stops at the next module it would fetch (dropping a step in
 * progress) and tears down (its NVMe run directory removed, so the next run is not
 * refused); the handler then gives the signal back its default action, so a second one
 * stops the process at once. */
static void on_stop_signal(int sig)
{
	static const char msg[] =
		"\nzinf train: stopping at the next module (the same signal again: at once)\n";
	size_t skip = stderr_tty ? 0 : 1;
	int saved_errno = errno; /* the interrupted code may be about to read it */

	/* atomic: the engine's update thread reads it (zinf_engine_set_stop) */
	__atomic_store_n(&stop_signal, sig, __ATOMIC_RELAXED);
	if (write(STDERR_FILENO, msg + skip, sizeof(msg) - 1 - skip) < 0) {
		/* nothing to do: the run stops all the same */
	}
	errno = saved_errno;
}

int cmd_train(int argc, char **argv)
{
	static const struct option longopts[] = {
		TRAIN_FLAG_RUN_OPTIONS,
		{"eval-data", required_argument, NULL, TF_EVAL_DATA},
		{"eval-every", required_argument, NULL, TF_EVAL_EVERY},
		{"eval-batches", required_argument, NULL, TF_EVAL_BATCHES},
		{"save", required_argument, NULL, TF_SAVE},
		{"save-dtype", required_argument, NULL, TF_SAVE_DTYPE},
		{"save-shard-size", required_argument, NULL, TF_SAVE_SHARD},
		{"save-every", required_argument, NULL, TF_SAVE_EVERY},
		{"save-state", no_argument, NULL, TF_SAVE_STATE},
		{"save-total-limit", required_argument, NULL, TF_SAVE_TOTAL_LIMIT},
		{"resume", required_argument, NULL, TF_RESUME},
		{"log-json", required_argument, NULL, TF_LOG_JSON},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct zinf_train_opts o;
	struct train_flags flags = {.prog = "zinf train", .o = &o};
	struct zinf_train_result res;
	struct progress prog = {.f = stdout};
	char err[2048];
	bool eval_batches = false, seen[CMD_FLAG_CODES] = {false};
	int c;

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
				cmd_bad_flag(argv, argc));
			return ZINF_EXIT_USAGE;
		}
		if (cmd_flag_once(seen, longopts, c, (const int[]){TF_SET, 0}, "zinf train"))
			return ZINF_EXIT_USAGE;
		if (c == 'q')
			prog.quiet = true;
		else if (train_flag_apply(&flags, c, optarg))
			return ZINF_EXIT_USAGE;
		eval_batches |= c == TF_EVAL_BATCHES;
	}
	if (eval_batches && !o.eval_data_path) { /* (the library cannot tell its default) */
		fprintf(stderr, "zinf train: --eval-batches: needs --eval-data FILE\n");
		return ZINF_EXIT_USAGE;
	}
	if (optind < argc) {
		fprintf(stderr, "zinf train: %s: unexpected argument (try 'zinf train --help')\n",
			argv[optind]);
		return ZINF_EXIT_USAGE;
	}
	/* one rank: under a launcher of several, each would train the whole model alone
	 * (and all but one find --save locked) */
	{
		const char *var;
		int world = cmd_env_world_size("zinf train", &var);

		if (world != 1) {
			if (world > 1)
				fprintf(stderr,
					"zinf train: %s=%d: zinf train runs as one process; training across ranks is not built yet (launch one; unset %s if only this process trains)\n",
					var, world, var);
			return ZINF_EXIT_USAGE;
		}
	}
	o.on_step = on_step;
	o.on_step_user = &prog;
	prog.tty = isatty(fileno(stdout));
	o.stop = &stop_signal;
	stderr_tty = isatty(STDERR_FILENO);
	cmd_catch_stop_signals(on_stop_signal);
	if (zinf_train_run(&o, &res, err, sizeof(err))) {
		if (prog.drawn)
			fputc('\n', stdout);
		fprintf(stderr, "zinf train: %s\n", err);
		if (res.stopped) { /* cleaned up: now end by the signal, so a calling shell
				    * script stops too (its default action since the first) */
			fflush(NULL);
			raise(stop_signal);
			return 128 + stop_signal;
		}
		return res.bad_input ? ZINF_EXIT_USAGE : ZINF_EXIT_FAIL;
	}
	if (!prog.quiet)
		printf("done: %" PRIu64 " steps, loss %.4f -> %.4f, %.1f s; %" PRIu64
		       " parameters, peak device %.1f of %.1f MiB, peak pinned %.1f of %.1f MiB, "
		       "NVMe read %.1f MiB, written %.1f MiB",
		       res.steps, res.first_loss, res.last_loss, res.seconds, res.param_elems,
		       (double)res.peak_device_bytes / 1048576.0,
		       (double)res.device_limit_bytes / 1048576.0,
		       (double)res.peak_pinned_bytes / 1048576.0,
		       (double)res.pinned_limit_bytes / 1048576.0,
		       (double)res.nvme_read_bytes / 1048576.0,
		       (double)res.nvme_write_bytes / 1048576.0);
	if (!prog.quiet && res.host_pinned_bytes)
		printf(", %.1f MiB of host homes page-locked",
		       (double)res.host_pinned_bytes / 1048576.0);
	if (!prog.quiet && o.save_dir)
		printf("; saved to %s in %.1f s (NVMe read %.1f MiB)", o.save_dir, res.save_seconds,
		       (double)res.save_nvme_read_bytes / 1048576.0);
	if (!prog.quiet)
		putchar('\n');
	return ZINF_EXIT_OK;
}
