/*
 * `zinf train --model DIR` on the Hugging Face checkpoints that gen_llama_fixture.py
 * writes beside its torch fixtures (a mistral one with a sliding window smaller than T and
 * GQA; a qwen2 one with q/k/v biases and use_sliding_window in the layers from
 * max_window_layers on; a llama one with mlp_bias and attention_bias) reports, in
 * --log-json, a first-step loss equal to torch's (1e-5 relative): the checkpoint's
 * tokens.bin under --shuffle none feeds exactly the fixture's tokens and targets, with
 * micro-batch B and no accumulation, fp32 parameters.
 *
 * The run saves in shards of 16 KiB (so with an index): the saved config.json keeps
 * mlp_bias, sliding_window and max_window_layers, the saved safetensors hold every tensor
 * the config names (the MLP biases included) with its shape, and training resumes from
 * the saved directory.
 *
 * With --device=cuda first it runs on the cuda device backend (the cuda model runtime
 * against torch's losses: test_gpu_first_loss_matches_torch_checkpoints), and skips (77)
 * without a GPU.
 * Usage: test_train_first_loss_matches_torch_checkpoints [--device=cuda] ZINF_BIN
 *        FIXTURE_BASE...
 */
#include <sys/wait.h>

#include "../model/test_llama_net.h"
#include "device.h"
#include "gpu_test.h"
#include "hf_config.h"
#include "llama_names.h"
#include "safetensors.h"
#include "train_fixture.h"

static struct tf_dir d;

/* The loss of the first line of a --log-json file. */
static double first_logged_loss(const char *path)
{
	char line[4096];
	const char *at;
	FILE *f = fopen(path, "r");

	T_CHECK(f != NULL, "no log %s", path);
	T_CHECK(fgets(line, sizeof(line), f) != NULL, "empty log %s", path);
	fclose(f);
	at = strstr(line, "\"loss\": ");
	T_CHECK(at != NULL, "no loss in %s: %s", path, line);
	return strtod(at + 8, NULL);
}

static const char *device = "host";

static void write_ds(const char *path, int B)
{
	FILE *f = fopen(path, "w");

	T_CHECK(f != NULL, "write %s", path);
	fprintf(f,
		"{\"train_micro_batch_size_per_gpu\": %d, \"gradient_accumulation_steps\": 1,"
		" \"gradient_clipping\": 1.0, \"bf16\": {\"enabled\": false},"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"none\"},"
		"  \"offload_optimizer\": {\"device\": \"cpu\"}},"
		" \"zinf\": {\"device\": \"%s\", \"device_memory_limit\": \"%s\","
		"  \"pinned_memory_limit\": \"4MiB\", \"chunk_size\": \"64KiB\"}}\n",
		B, device, strcmp(device, "host") ? "64MiB" : "4MiB");
	fclose(f);
}

/* Run zinf train on model dir and data (a directory holding tokens.bin); return the first
 * logged loss. save may be NULL. */
static double train(const char *zinf_bin, const char *model, const char *data, const char *ds,
		    int T, const char *save)
{
	char cmd[8192], log[160], errpath[160], saveopt[512] = "";
	int status;

	snprintf(log, sizeof(log), "%s/log.jsonl", d.root);
	snprintf(errpath, sizeof(errpath), "%s/stderr.txt", d.root);
	unlink(log);
	if (save)
		snprintf(saveopt, sizeof(saveopt), "--save '%s' --save-shard-size 16KiB", save);
	snprintf(cmd, sizeof(cmd),
		 "'%s' train --model '%s' --config '%s' --data '%s/tokens.bin' --seq-len %d"
		 " --steps 1 --shuffle none --log-json '%s' %s -q >/dev/null 2>'%s'",
		 zinf_bin, model, ds, data, T, log, saveopt, errpath);
	status = system(cmd);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char buf[2048] = "";
		FILE *f = fopen(errpath, "r");

		if (f) {
			buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
			fclose(f);
		}
		T_CHECK(0, "zinf train --model %s failed: %s", model, buf);
	}
	return first_logged_loss(log);
}

/* The saved directory is a complete checkpoint of the same architecture. */
static void check_saved(const char *model, const char *saved)
{
	struct zinf_hf_config a, b;
	struct zinf_st_reader *r;
	char path[1024], err[1024];

	snprintf(path, sizeof(path), "%s/config.json", model);
	zinf_hf_config_init(&a);
	T_CHECK(zinf_hf_config_load_file(&a, path) == 0, "%s", a.last_error);
	snprintf(path, sizeof(path), "%s/config.json", saved);
	zinf_hf_config_init(&b);
	T_CHECK(zinf_hf_config_load_file(&b, path) == 0, "%s", b.last_error);
	T_CHECK(a.model_type == b.model_type && a.mlp_bias == b.mlp_bias &&
			a.attention_bias == b.attention_bias &&
			a.sliding_window == b.sliding_window &&
			a.max_window_layers == b.max_window_layers,
		"%s: saved config.json lost a field (window %llu -> %llu, layers %llu -> %llu,"
		" mlp_bias %d -> %d)",
		model, (unsigned long long)a.sliding_window, (unsigned long long)b.sliding_window,
		(unsigned long long)a.max_window_layers, (unsigned long long)b.max_window_layers,
		a.mlp_bias, b.mlp_bias);
	T_CHECK_RC(zinf_st_reader_create(&r));
	T_CHECK(zinf_st_reader_open(r, saved) == 0, "%s", zinf_st_reader_last_error(r));
	T_CHECK(zinf_st_reader_file_count(r) > 1, "%s: not sharded", saved);
	T_CHECK(zinf_llama_names_check(&b, r, err, sizeof(err)) == 0, "%s", err);
	T_CHECK(zinf_st_reader_count(r) == zinf_llama_names_count(&b),
		"%s: %d tensors saved, the config names %d", saved, zinf_st_reader_count(r),
		zinf_llama_names_count(&b));
	if (b.mlp_bias)
		T_CHECK(zinf_st_reader_find(r, "model.layers.1.mlp.down_proj.bias") != NULL,
			"%s: no MLP bias saved", saved);
	zinf_st_reader_destroy(r);
	zinf_hf_config_free(&a);
	zinf_hf_config_free(&b);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strncmp(argv[1], "--device=", 9)) {
		device = argv[1] + 9;
		argv++;
		argc--;
		if (!strcmp(device, "cuda"))
			t_require_gpu();
	}
	T_CHECK(argc >= 3, "usage: %s [--device=cuda] ZINF_BIN FIXTURE_BASE...", argv[0]);
	tf_setup(&d, NULL);
	for (int i = 2; i < argc; i++) {
		struct fixture f;
		char ds[160], saved[160];
		double want, got, again, e;

		fixture_load(argv[i], &f);
		want = *(const float *)fixture_get(&f, "loss", 1);
		snprintf(ds, sizeof(ds), "%s/ds-%d.json", d.root, i);
		snprintf(saved, sizeof(saved), "%s/saved-%d", d.root, i);
		write_ds(ds, f.B);
		got = train(argv[1], argv[i], argv[i], ds, f.T, saved);
		e = fabs(got - want) / fabs(want);
		printf("%s (%s): first loss %.9g, torch %.9g, rel err %.2e\n", argv[i], device, got,
		       want, e);
		T_CHECK(e <= 1e-5, "%s: zinf train's first loss %.9g, torch's %.9g (rel %.2e)",
			argv[i], got, want, e);
		check_saved(argv[i], saved);
		/* the saved model has taken one step: it loads and its loss has moved */
		again = train(argv[1], saved, argv[i], ds, f.T, NULL);
		printf("  from the saved checkpoint: %.9g\n", again);
		T_CHECK(isfinite(again) && fabs(again - want) > 1e-6,
			"%s: loss from the saved checkpoint %.9g (first %.9g)", argv[i], again,
			want);
		free(f.bin);
	}
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
