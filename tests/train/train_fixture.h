/*
 * Test support for zinf train: a scratch directory with a tiny Hugging Face-style config,
 * a DeepSpeed config written per test, and a repetitive text to train on; a runner that
 * collects every step's loss. Header-only: every test is one executable.
 */
#ifndef ZINF_TESTS_TRAIN_FIXTURE_H
#define ZINF_TESTS_TRAIN_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "zinf/log.h"
#include "zinf/train.h"

#define TF_MAX_STEPS 64

struct tf_dir {
	char root[64];	 /* the scratch directory */
	char model[128]; /* tiny config.json (init) */
	char data[128];	 /* repetitive text */
	char nvme[128];	 /* NVMe scratch for the engine */
	char ds[128];	 /* DeepSpeed config of the last tf_write_ds */
};

/* A tiny byte-level Llama: V 256, C 32, 2 layers, 4 heads of 8, 2 kv heads, I 64. */
static inline void tf_setup(struct tf_dir *d, const char *extra_model_json)
{
	FILE *f;

	zinf_log_set_level(ZINF_LOG_ERROR);
	snprintf(d->root, sizeof(d->root), "/var/tmp/zinf-train-test-XXXXXX");
	T_CHECK(mkdtemp(d->root), "mkdtemp");
	snprintf(d->model, sizeof(d->model), "%s/tiny.json", d->root);
	snprintf(d->data, sizeof(d->data), "%s/text.txt", d->root);
	snprintf(d->nvme, sizeof(d->nvme), "%s/nvme", d->root);
	T_CHECK(mkdir(d->nvme, 0755) == 0, "mkdir %s", d->nvme);
	f = fopen(d->model, "w");
	T_CHECK(f != NULL, "write %s", d->model);
	fprintf(f,
		"{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 32,"
		" \"intermediate_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
		" \"num_key_value_heads\": 2, \"max_position_embeddings\": 64,"
		" \"rms_norm_eps\": 1e-5%s}\n",
		extra_model_json ? extra_model_json : "");
	fclose(f);
	f = fopen(d->data, "w");
	T_CHECK(f != NULL, "write %s", d->data);
	for (int i = 0; i < 400; i++)
		fprintf(f, "the quick brown fox %d jumps over the lazy dog.\n", i % 7);
	fclose(f);
}

/* The tiny model of tf_setup with 40 layers in d->root/deep.json (path): 363 tensors,
 * so a checkpoint saved a shard a tensor has over 300 shards. */
static inline void tf_write_deep_model(const struct tf_dir *d, char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/deep.json", d->root);
	f = fopen(path, "w");
	T_CHECK(f, "%s", path);
	fprintf(f, "{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 32,"
		   " \"intermediate_size\": 64, \"num_hidden_layers\": 40,"
		   " \"num_attention_heads\": 4}\n");
	fclose(f);
}

/* Write a DeepSpeed config: params homed on param_home (none, cpu, nvme), optimizer
 * state on opt_home (cpu, nvme), bf16 or fp32, micro batch 2, accumulation 2. */
static inline void tf_write_ds(struct tf_dir *d, const char *param_home, const char *opt_home,
			       bool bf16)
{
	FILE *f;

	snprintf(d->ds, sizeof(d->ds), "%s/ds-%s-%s-%d.json", d->root, param_home, opt_home, bf16);
	f = fopen(d->ds, "w");
	T_CHECK(f != NULL, "write %s", d->ds);
	fprintf(f,
		"{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2,"
		" \"gradient_clipping\": 1.0, \"bf16\": {\"enabled\": %s},"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.003, \"weight_decay\": 0.01}},"
		" \"zero_optimization\": {\"stage\": 3,"
		"  \"offload_param\": {\"device\": \"%s\", \"nvme_path\": \"%s\"},"
		"  \"offload_optimizer\": {\"device\": \"%s\", \"nvme_path\": \"%s\"},"
		"  \"sub_group_size\": 20000},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"1MiB\","
		"  \"pinned_memory_limit\": \"4MiB\", \"chunk_size\": \"64KiB\"}}\n",
		bf16 ? "true" : "false", param_home, d->nvme, opt_home, d->nvme);
	fclose(f);
}

struct tf_losses {
	int n;
	double loss[TF_MAX_STEPS + 1];
	struct zinf_train_step last;
};

static inline void tf_on_step(const struct zinf_train_step *s, void *user)
{
	struct tf_losses *l = user;

	if (s->step == 0 || l->n >= TF_MAX_STEPS)
		return;
	l->loss[l->n++] = s->loss;
	l->last = *s;
}

static inline void tf_opts(const struct tf_dir *d, struct zinf_train_opts *o, uint64_t steps,
			   struct tf_losses *l)
{
	zinf_train_opts_init(o);
	o->init_config = d->model;
	o->config_path = d->ds;
	o->data_path = d->data;
	o->data_text = true;
	o->seq_len = 16;
	o->steps = steps;
	o->seed = 7;
	memset(l, 0, sizeof(*l));
	o->on_step = tf_on_step;
	o->on_step_user = l;
}

static inline void tf_run(const struct zinf_train_opts *o, struct zinf_train_result *res)
{
	char err[1024];

	T_CHECK(zinf_train_run(o, res, err, sizeof(err)) == 0, "train: %s", err);
}

/* A whole file into a new buffer (NUL-terminated, *len bytes before the NUL). */
static inline void tf_read_all(const char *path, char **data, size_t *len)
{
	FILE *f = fopen(path, "rb");
	long n;

	T_CHECK(f != NULL, "open %s", path);
	T_CHECK(fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0,
		"size of %s", path);
	*data = malloc((size_t)n + 1);
	T_CHECK(*data && fread(*data, 1, (size_t)n, f) == (size_t)n, "read %s", path);
	(*data)[n] = 0;
	*len = (size_t)n;
	fclose(f);
}

/* Files a and b hold the same bytes. */
static inline void tf_same_file(const char *a, const char *b)
{
	char *x, *y;
	size_t nx, ny;

	tf_read_all(a, &x, &nx);
	tf_read_all(b, &y, &ny);
	T_CHECK(nx == ny && memcmp(x, y, nx) == 0, "%s (%zu bytes) and %s (%zu bytes) differ", a,
		nx, b, ny);
	free(x);
	free(y);
}

static inline void tf_write_all(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	T_CHECK(f && fwrite(data, 1, len, f) == len && fclose(f) == 0, "write %s", path);
}

/* Start cmd through the shell in a child process; its pid. */
static inline pid_t tf_spawn(const char *cmd)
{
	pid_t pid = fork();

	T_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static inline void tf_cleanup(struct tf_dir *d)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->root);
	T_CHECK(system(cmd) == 0, "cleanup %s", d->root);
}

#endif /* ZINF_TESTS_TRAIN_FIXTURE_H */
