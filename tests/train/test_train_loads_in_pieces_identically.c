/* zinf train loads the model a parameter-store chunk at a time: pieces that end on the
 * store's chunks, those of one chunk handed over together. On a model whose layers span
 * several 64 KiB chunks, with parameters crossing chunk ends, cutting the pieces further,
 * into 777 elements, gives the same run bit for bit:
 *   - --init: the seeded values do not depend on the pieces (the same losses, and the
 *     saved model.safetensors byte-identical);
 *   - --model, from checkpoints saved in bf16, fp16 and fp32: the same losses;
 *   - the pieces were cut (more ranges reached the engine), and the run read no more
 *     from NVMe: no chunk was read back to put a piece in (each written once), also with
 *     chunks larger than a layer;
 * with bf16 parameters and optimizer state on NVMe, and fp32 in host memory. (--resume in
 * pieces: test_train_resume_is_bit_identical.) */
#include "train_fixture.h"
#include "train_internal.h" /* train_load_piece_elems, train_load_ranges */

#define STEPS 3

struct counts {
	uint64_t nvme_read, ranges;
};

/* One run; returns the bytes it read from NVMe and the ranges its load handed over. */
static const char *config_set; /* a --set for the next runs, or NULL */

static struct counts run(struct tf_dir *d, const char *model_dir, const char *save_dir,
			 enum zinf_dtype save_dtype, uint64_t piece, struct tf_losses *l)
{
	struct zinf_train_opts o;
	struct zinf_train_result res;
	uint64_t ranges = train_load_ranges;

	train_load_piece_elems = piece;
	tf_opts(d, &o, STEPS, l);
	if (model_dir) {
		o.init_config = NULL;
		o.model_dir = model_dir;
	}
	o.save_dir = save_dir;
	o.save_dtype = save_dir ? save_dtype : ZINF_DTYPE_NONE;
	o.config_sets = &config_set;
	o.n_config_sets = config_set ? 1 : 0;
	tf_run(&o, &res);
	T_CHECK(l->n == STEPS, "%d steps reported", l->n);
	train_load_piece_elems = UINT64_MAX;
	return (struct counts){res.nvme_read_bytes, train_load_ranges - ranges};
}

static void cut_without_reads(struct counts whole, struct counts pieces, const char *what)
{
	T_CHECK(pieces.ranges > whole.ranges, "%s: %llu ranges in pieces, %llu whole", what,
		(unsigned long long)pieces.ranges, (unsigned long long)whole.ranges);
	T_CHECK(pieces.nvme_read == whole.nvme_read,
		"%s: %llu bytes read from NVMe in pieces, %llu whole (a chunk read back)", what,
		(unsigned long long)pieces.nvme_read, (unsigned long long)whole.nvme_read);
}

static void same(const struct tf_losses *a, const struct tf_losses *b, const char *what)
{
	for (int i = 0; i < STEPS; i++)
		T_CHECK(a->loss[i] == b->loss[i], "%s: step %d loss %.17g whole, %.17g in pieces",
			what, i + 1, a->loss[i], b->loss[i]);
}

static void check(struct tf_dir *d, const char *home, bool bf16)
{
	static const enum zinf_dtype saves[] = {ZINF_DTYPE_BF16, ZINF_DTYPE_F16, ZINF_DTYPE_F32};
	static const char *save_names[] = {"bf16", "fp16", "fp32"};
	struct tf_losses whole, pieces;
	struct counts cw, cp;
	char sa[192], sb[192], fa[256], fb[256], what[96];

	tf_write_ds(d, home, home, bf16);
	for (int k = 0; k < 3; k++) {
		snprintf(what, sizeof(what), "%s, %s, saved as %s", home, bf16 ? "bf16" : "fp32",
			 save_names[k]);
		snprintf(sa, sizeof(sa), "%s/whole-%s-%d", d->root, home, k);
		snprintf(sb, sizeof(sb), "%s/pieces-%s-%d", d->root, home, k);
		cw = run(d, NULL, sa, saves[k], UINT64_MAX, &whole);
		cp = run(d, NULL, sb, saves[k], 777, &pieces);
		same(&whole, &pieces, what);
		cut_without_reads(cw, cp, what);
		snprintf(fa, sizeof(fa), "%s/model.safetensors", sa);
		snprintf(fb, sizeof(fb), "%s/model.safetensors", sb);
		tf_same_file(fa, fb);

		cw = run(d, sa, NULL, saves[k], UINT64_MAX, &whole);
		cp = run(d, sa, NULL, saves[k], 777, &pieces);
		same(&whole, &pieces, what);
		cut_without_reads(cw, cp, what);
	}
}

/* Layers of about 110K values (220 KB in bf16) over 64 KiB chunks, the MLP's matrices
 * (32K values each) crossing chunk ends. */
static const char model_json[] =
	"{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 64,"
	" \"intermediate_size\": 512, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
	" \"num_key_value_heads\": 2, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-5}\n";

int main(void)
{
	struct tf_dir d;

	tf_setup(&d, NULL);
	tf_write_all(d.model, model_json, strlen(model_json));
	check(&d, "nvme", true);
	check(&d, "cpu", false);
	/* chunks larger than a layer: a module is one batch, its odd-sized pieces packed
	 * together in the engine's staging (which holds just the largest module) */
	config_set = "zinf.chunk_size=1MiB";
	check(&d, "nvme", true);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
