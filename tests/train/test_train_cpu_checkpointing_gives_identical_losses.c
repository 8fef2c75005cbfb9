/* activation_checkpointing.cpu_checkpointing keeps each decoder layer's saved input in
 * host memory instead of the runtime's: with --activation-checkpointing the per-step
 * losses and the eval losses (before step 1 and after steps 2 and 3) are bit-identical
 * to checkpoints kept in the runtime's memory, for fp32 and bf16, gradient accumulation
 * 2, and 2 and 3 layers (both parities of the two-buffer ring); without that flag the
 * run is refused before it starts, naming the key and the flag, and so is a run whose
 * checkpoints would need more than half of the machine's memory. */
#include "train_fixture.h"
#include "zinf/error.h"

#define STEPS 3

struct record {
	struct tf_losses l;
	double eval[STEPS + 1];
	int n_eval;
};

static void on_step(const struct zinf_train_step *s, void *user)
{
	struct record *r = user;

	if (s->has_eval && r->n_eval <= STEPS)
		r->eval[r->n_eval++] = s->eval_loss;
	tf_on_step(s, &r->l);
}

static void run(struct tf_dir *d, const char *model, bool bf16, bool cpu_ckpt, struct record *r)
{
	static const char *const sets[] = {"activation_checkpointing.cpu_checkpointing=true"};
	struct zinf_train_opts o;
	struct zinf_train_result res;

	memset(r, 0, sizeof(*r));
	tf_write_ds(d, "nvme", "cpu", bf16);
	tf_opts(d, &o, STEPS, &r->l);
	o.init_config = model;
	o.on_step = on_step;
	o.on_step_user = r;
	o.activation_checkpointing = true;
	o.eval_data_path = d->data;
	o.eval_every = 2;
	if (cpu_ckpt) {
		o.config_sets = sets;
		o.n_config_sets = 1;
	}
	tf_run(&o, &res);
	T_CHECK(r->l.n == STEPS, "%d steps", r->l.n);
	T_CHECK(r->n_eval >= 2, "%d eval losses", r->n_eval);
	r->eval[r->n_eval] = res.first_eval_loss; /* after the others */
}

/* The fixture's model with 3 layers instead of 2, next to it. */
static void write_three_layers(const struct tf_dir *d, char *path, size_t len)
{
	char text[4096], *p;
	FILE *f = fopen(d->model, "r");
	size_t n;

	T_CHECK(f != NULL, "read %s", d->model);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	p = strstr(text, "\"num_hidden_layers\": 2");
	T_CHECK(p != NULL, "the fixture's layer count");
	p[strlen("\"num_hidden_layers\": ")] = '3';
	snprintf(path, len, "%s/three.json", d->root);
	f = fopen(path, "w");
	T_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
}

int main(void)
{
	static const char *const sets[] = {"activation_checkpointing.cpu_checkpointing=true"};
	struct tf_dir d;
	struct record dev, host;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	char three[256], err[1024];

	zinf_log_set_level(ZINF_LOG_ERROR);
	tf_setup(&d, NULL);
	write_three_layers(&d, three, sizeof(three));
	for (int layers = 2; layers <= 3; layers++)
		for (int bf16 = 0; bf16 < 2; bf16++) {
			const char *model = layers == 2 ? d.model : three;

			run(&d, model, bf16, false, &dev);
			run(&d, model, bf16, true, &host);
			for (int i = 0; i < STEPS; i++)
				T_CHECK(dev.l.loss[i] == host.l.loss[i],
					"%d layers %s step %d: loss %.9g with checkpoints in runtime "
					"memory, %.9g in host memory",
					layers, bf16 ? "bf16" : "fp32", i + 1, dev.l.loss[i],
					host.l.loss[i]);
			T_CHECK(dev.n_eval == host.n_eval, "eval counts %d, %d", dev.n_eval,
				host.n_eval);
			for (int i = 0; i <= dev.n_eval; i++)
				T_CHECK(dev.eval[i] == host.eval[i],
					"%d layers %s eval %d: %.9g vs %.9g", layers,
					bf16 ? "bf16" : "fp32", i, dev.eval[i], host.eval[i]);
			T_CHECK(dev.l.loss[0] != dev.l.loss[STEPS - 1], "the loss moved");
		}

	tf_write_ds(&d, "nvme", "cpu", false);
	tf_opts(&d, &o, STEPS, &dev.l);
	o.config_sets = sets;
	o.n_config_sets = 1;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == ZINF_ECONFIG,
		"cpu_checkpointing without --activation-checkpointing is refused");
	T_CHECK(strstr(err, "activation_checkpointing.cpu_checkpointing") &&
			strstr(err, "--activation-checkpointing") && !strchr(err, '\n'),
		"one line naming the key and the flag: %s", err);
	T_CHECK(dev.l.n == 0, "no step ran");

	{ /* 32 checkpointed layer inputs of 4096 x 4096 floats per sequence: 2 GiB each */
		char big[256], batch[64];
		const char *const big_sets[] = {sets[0], batch};
		uint64_t ram = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
		FILE *f;

		snprintf(big, sizeof(big), "%s/big.json", d.root);
		f = fopen(big, "w");
		T_CHECK(f &&
				fprintf(f,
					"{\"model_type\": \"llama\", \"vocab_size\": 256,"
					" \"hidden_size\": 4096, \"intermediate_size\": 11008,"
					" \"num_hidden_layers\": 33, \"num_attention_heads\": 32,"
					" \"max_position_embeddings\": 4096}\n") > 0 &&
				fclose(f) == 0,
			"write %s", big);
		snprintf(batch, sizeof(batch), "train_micro_batch_size_per_gpu=%llu",
			 (unsigned long long)(ram / (4ull << 30) + 1));
		tf_opts(&d, &o, STEPS, &dev.l);
		o.init_config = big;
		o.seq_len = 4096;
		o.activation_checkpointing = true;
		o.config_sets = big_sets;
		o.n_config_sets = 2;
		T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == ZINF_EBUDGET,
			"checkpoints beyond half the host memory are refused: %s", err);
		T_CHECK(strstr(err, "cpu_checkpointing") && strstr(err, "host memory") &&
				!strchr(err, '\n'),
			"one line naming the key and the memory: %s", err);
		T_CHECK(dev.l.n == 0, "no step ran");
	}
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
