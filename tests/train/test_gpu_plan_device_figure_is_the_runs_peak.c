/* zinf plan's device figure for the cuda model runtime is what the run takes: for the
 * tiny model with parameters in host memory or on NVMe, the optimizer state in host
 * memory, on NVMe or on the device, with and without activation checkpointing (C 128, 2 layers, a
 * vocabulary of 256, where the embedding and the head stay on the device, and of 4096,
 * where they are 4 times a layer), zinf train given exactly
 * the plan's device figure as zinf.device_memory_limit runs with a peak of that many
 * bytes, and given a page less is refused before step 1. The GPU runtime's sizes (its
 * activations, workspaces, layer inputs) are computed by the same layout functions it
 * allocates with; this compares them with its allocations. With prefetching and
 * background gradient copies off the peak is the figure to the byte; with them on (the
 * defaults) the run goes through at the figure too, fetched-ahead modules giving way (the
 * gradient buffers are then placed above them, not in the middle of the room the modules
 * share). Skips (77) without a GPU (a ZINF_CUDA=SIM build runs it on the
 * CUDA simulator). */
#include "gpu_test.h"
#include "train_fixture.h"

/* The config's sets: the device and an auto pinned pool, and (exact) no prefetching and
 * no gradient copies in the background, so the peak does not depend on the mover's
 * timing. */
#define N_SETS 4
static int n_sets;

/* The plan's row for param/optimizer, at a device budget of its own figure (persistent
 * small modules depend on the budget: iterate until it stands still). */
static uint64_t plan_figure(const struct tf_dir *d, const char *param, const char *optimizer,
			    const char *const *sets, bool ckpt)
{
	struct zinf_plan_opts o;
	struct zinf_plan_result *r = calloc(1, sizeof(*r));
	uint64_t x = 64ull << 20;
	char err[512];

	T_CHECK(r != NULL, "calloc");
	for (int i = 0; i < 6; i++) {
		const struct zinf_plan_row *row = NULL;
		zinf_plan_opts_init(&o);
		o.init_config = d->model;
		o.config_path = d->ds;
		o.config_sets = sets;
		o.n_config_sets = n_sets;
		o.seq_len = 16;
		o.activation_checkpointing = ckpt;
		o.device_bytes = x;
		T_CHECK(zinf_train_plan(&o, r, err, sizeof(err)) == 0, "plan: %s", err);
		T_CHECK(r->device_kind == ZINF_ENGINE_DEVICE_CUDA, "planned for the host backend");
		for (int k = 0; k < ZINF_PLAN_ROWS; k++)
			if (!strcmp(r->rows[k].param, param) &&
			    !strcmp(r->rows[k].optimizer, optimizer))
				row = &r->rows[k];
		T_CHECK(row && row->tried && row->need.fits, "%s/%s: no fit at %llu: %s", param,
			optimizer, (unsigned long long)x, row ? row->why : "no such row");
		if (row->need.device_bytes == x)
			break;
		x = row->need.device_bytes;
	}
	free(r);
	return x;
}

/* tf_setup's model made wider (C 128, I 256), so that every figure is above the
 * smallest budget a config takes (1 MiB), with a vocabulary of vocab: 256 makes the
 * embedding and the head small enough to stay on the device (persistent), 4096 makes
 * them larger than a layer (the shape of Llama 3's 128K vocabulary). */
static void write_model(const struct tf_dir *d, int vocab)
{
	FILE *f = fopen(d->model, "w");

	T_CHECK(f != NULL, "write %s", d->model);
	fprintf(f,
		"{\"model_type\": \"llama\", \"vocab_size\": %d, \"hidden_size\": 128,"
		" \"intermediate_size\": 256, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
		" \"num_key_value_heads\": 2, \"max_position_embeddings\": 64}\n",
		vocab);
	fclose(f);
}

/* zinf train with a device budget of limit bytes: 0 and the peak, or the error. */
static int train(const struct tf_dir *d, const char *const *sets, bool ckpt, uint64_t limit,
		 uint64_t *peak, char *err, size_t errlen)
{
	char budget[64];
	const char *all[N_SETS + 1];
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	int rc;

	for (int i = 0; i < n_sets; i++)
		all[i] = sets[i];
	snprintf(budget, sizeof(budget), "zinf.device_memory_limit=%llu",
		 (unsigned long long)limit);
	all[n_sets] = budget;
	tf_opts(d, &o, 2, &l);
	o.activation_checkpointing = ckpt;
	o.config_sets = all;
	o.n_config_sets = n_sets + 1;
	rc = zinf_train_run(&o, &res, err, errlen);
	if (!rc) {
		T_CHECK(l.n == 2, "%d steps", l.n);
		*peak = res.peak_device_bytes;
	}
	return rc;
}

/* One shape: at the plan's figure the run goes through (prefetching: what was fetched
 * ahead gives way), its peak that figure to the byte (exact), and a page less is
 * refused. */
static void check_case(const struct tf_dir *d, const char *const *sets, int vocab,
		       const char *param, const char *optimizer, bool ckpt, bool exact)
{
	char what[128], err[1024];
	uint64_t figure, peak = 0;
	int rc;

	snprintf(what, sizeof(what), "vocabulary %d, %s/%s%s%s", vocab, param, optimizer,
		 ckpt ? ", checkpointing" : "", exact ? "" : ", prefetching");
	figure = plan_figure(d, param, optimizer, sets, ckpt);
	rc = train(d, sets, ckpt, figure, &peak, err, sizeof(err));
	T_CHECK(rc == 0, "%s: refused at the plan's %llu bytes: %s", what,
		(unsigned long long)figure, err);
	printf("%s: plan %llu bytes, peak %llu\n", what, (unsigned long long)figure,
	       (unsigned long long)peak);
	if (exact)
		T_CHECK(peak == figure, "%s: plan %llu bytes, the run's peak %llu", what,
			(unsigned long long)figure, (unsigned long long)peak);
	rc = train(d, sets, ckpt, figure - 4096, &peak, err, sizeof(err));
	T_CHECK(rc != 0 && strstr(err, "device"),
		"%s: a page under the plan's %llu bytes: rc %d, %s", what,
		(unsigned long long)figure, rc, rc ? err : "it ran");
}

int main(int argc, char **argv)
{
	static const char *const placements[][2] = {
		{"cpu", "cpu"}, {"nvme", "cpu"}, {"nvme", "nvme"}, {"none", "none"}};
	const char *sets[N_SETS] = {"zinf.device=cuda", "zinf.pinned_memory_limit=auto",
				    "zero_optimization.stage3_prefetch_bucket_size=0",
				    "zinf.overlap_gradients=false"};
	struct tf_dir d;

	(void)argc;
	(void)argv;
	t_require_gpu();
	tf_setup(&d, NULL);
	for (int vocab = 256; vocab <= 4096; vocab *= 16) {
		write_model(&d, vocab);
		for (int p = 0; p < 4; p++) { /* bf16 from the third */
			tf_write_ds(&d, placements[p][0], placements[p][1], p >= 2);
			for (int k = 0; k < 4;
			     k++) { /* exact (k < 2), then the defaults; k odd: checkpointing */
				n_sets = k < 2 ? N_SETS : 2;
				check_case(&d, sets, vocab, placements[p][0], placements[p][1],
					   k % 2, k < 2);
			}
		}
	}
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
