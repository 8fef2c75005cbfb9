/*
 * The flags zinf train and zinf bench train share: their getopt_long codes and how each
 * sets a struct zinf_train_opts. Errors are one line on stderr prefixed with the
 * command's name.
 */
#ifndef ZINF_TOOLS_TRAIN_FLAGS_H
#define ZINF_TOOLS_TRAIN_FLAGS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "zinf/train.h"

enum train_flag {
	TF_MODEL = 256,
	TF_INIT,
	TF_CONFIG,
	TF_SET,
	TF_DATA,
	TF_DATA_FORMAT,
	TF_SEQ_LEN,
	TF_MICRO_BATCH,
	TF_GRAD_ACCUM,
	TF_STEPS,
	TF_SEED,
	TF_SHUFFLE,
	TF_CKPT,
	TF_EVAL_DATA,
	TF_EVAL_EVERY,
	TF_EVAL_BATCHES,
	TF_SAVE,
	TF_SAVE_DTYPE,
	TF_SAVE_SHARD,
	TF_SAVE_EVERY,
	TF_SAVE_STATE,
	TF_SAVE_TOTAL_LIMIT,
	TF_RESUME,
	TF_LOG_JSON,
	TF_FIRST_FREE /* a command's own flags start here */
};

#define TRAIN_FLAGS_MAX_SETS 64

/* The getopt_long entries of the flags that describe a training run (what zinf train and
 * zinf bench train both take). */
/* clang-format off */
#define TRAIN_FLAG_RUN_OPTIONS                                                  \
	{"model", required_argument, NULL, TF_MODEL},                           \
	{"init", required_argument, NULL, TF_INIT},                             \
	{"config", required_argument, NULL, TF_CONFIG},                         \
	{"set", required_argument, NULL, TF_SET},                               \
	{"data", required_argument, NULL, TF_DATA},                             \
	{"data-format", required_argument, NULL, TF_DATA_FORMAT},               \
	{"seq-len", required_argument, NULL, TF_SEQ_LEN},                       \
	{"micro-batch-size", required_argument, NULL, TF_MICRO_BATCH},          \
	{"gradient-accumulation-steps", required_argument, NULL, TF_GRAD_ACCUM}, \
	{"steps", required_argument, NULL, TF_STEPS},                           \
	{"seed", required_argument, NULL, TF_SEED},                             \
	{"shuffle", required_argument, NULL, TF_SHUFFLE},                       \
	{"activation-checkpointing", no_argument, NULL, TF_CKPT}
/* clang-format on */

struct train_flags {
	const char *prog; /* "zinf train": the prefix of error lines */
	struct zinf_train_opts *o;
	const char *sets[TRAIN_FLAGS_MAX_SETS]; /* --set KEY=VALUE, in order */
	int n_sets;
};

/* Apply flag c (a TF_* code) with its argument to f->o. Returns 0, or -1 after printing
 * the error. */
int train_flag_apply(struct train_flags *f, int c, const char *arg);
/* A whole non-negative decimal number. Returns 0, or -1 after printing the error. */
int train_flag_u64(const char *prog, const char *flag, const char *text, uint64_t *out);

#endif /* ZINF_TOOLS_TRAIN_FLAGS_H */
