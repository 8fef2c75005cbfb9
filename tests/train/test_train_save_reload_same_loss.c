/* zinf train --save writes a checkpoint that --model loads back to the same weights: the
 * eval loss before step 1 of the reloaded run equals the eval loss after the last step of
 * the run that saved it (fp32 bit-exact weights, so 1e-6 relative; bf16 parameters saved
 * as bf16 too). The saved directory opens in the project's safetensors reader with
 * Hugging Face's names, shapes and dtype, sharded with an index when over the shard size,
 * and its config.json names the saved dtype (--save-dtype's; without it, with
 * stage3_gather_16bit_weights_on_model_save, a 16-bit run's). Tied embeddings are saved
 * once. */
#include "hf_config.h"
#include "llama_names.h"
#include "safetensors.h"
#include "train_fixture.h"

static void check_layout(const char *dir, enum zinf_st_dtype dtype, bool sharded)
{
	struct zinf_hf_config hf;
	struct zinf_st_reader *r;
	char path[256];
	int n;

	snprintf(path, sizeof(path), "%s/config.json", dir);
	zinf_hf_config_init(&hf);
	T_CHECK(zinf_hf_config_load_file(&hf, path) == 0, "%s", hf.last_error);
	T_CHECK(hf.has_torch_dtype && hf.torch_dtype == dtype, "%s: torch_dtype", path);
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	T_CHECK((access(path, F_OK) == 0) == sharded, "%s: index %s", dir,
		sharded ? "missing" : "unexpected");
	T_CHECK_RC(zinf_st_reader_create(&r));
	T_CHECK(zinf_st_reader_open(r, dir) == 0, "%s", zinf_st_reader_last_error(r));
	T_CHECK(sharded ? zinf_st_reader_file_count(r) > 1 : zinf_st_reader_file_count(r) == 1,
		"%s: %d files", dir, zinf_st_reader_file_count(r));
	n = zinf_llama_names_count(&hf);
	T_CHECK(zinf_st_reader_count(r) == n, "%s: %d tensors, expected %d", dir,
		zinf_st_reader_count(r), n);
	for (int i = 0; i < n; i++) {
		struct zinf_llama_tensor_name tn;
		const struct zinf_st_tensor_info *t;

		T_CHECK_RC(zinf_llama_names_get(&hf, i, &tn));
		t = zinf_st_reader_find(r, tn.name);
		T_CHECK(t != NULL, "%s: tensor %s missing", dir, tn.name);
		T_CHECK(t->ndim == tn.ndim && t->shape[0] == tn.shape[0] &&
				(tn.ndim == 1 || t->shape[1] == tn.shape[1]),
			"%s: tensor %s shape", dir, tn.name);
		T_CHECK(t->dtype == dtype, "%s: tensor %s dtype %s", dir, tn.name,
			zinf_st_dtype_name(t->dtype));
	}
	T_CHECK(zinf_llama_names_check(&hf, r, NULL, 0) == 0, "%s: names check", dir);
	zinf_st_reader_destroy(r);
	zinf_hf_config_free(&hf);
}

/* gather16: the dtype comes from stage3_gather_16bit_weights_on_model_save, not
 * --save-dtype */
static void round_trip(struct tf_dir *d, bool bf16, const char *name, uint64_t shard_bytes,
		       enum zinf_st_dtype want, bool sharded, bool gather16)
{
	static const char *const sets[] = {
		"zero_optimization.stage3_gather_16bit_weights_on_model_save=true"};
	struct zinf_train_opts o;
	struct zinf_train_result a, b;
	struct tf_losses la, lb;
	char save[128];

	snprintf(save, sizeof(save), "%s/%s", d->root, name);
	tf_write_ds(d, "nvme", "cpu", bf16);
	tf_opts(d, &o, 3, &la);
	o.eval_data_path = d->data;
	o.eval_every = 3;
	o.eval_batches = 2;
	o.save_dir = save;
	o.save_max_shard_bytes = shard_bytes;
	if (gather16) {
		o.config_sets = sets;
		o.n_config_sets = 1;
	} else if (want == ZINF_ST_BF16) {
		o.save_dtype = ZINF_DTYPE_BF16;
	}
	tf_run(&o, &a);
	check_layout(save, want, sharded);

	tf_opts(d, &o, 1, &lb);
	o.init_config = NULL;
	o.model_dir = save;
	o.eval_data_path = d->data;
	o.eval_batches = 2;
	tf_run(&o, &b);
	T_CHECK(isfinite(a.last_eval_loss) && a.last_eval_loss < a.first_eval_loss,
		"%s: eval loss %g -> %g", name, a.first_eval_loss, a.last_eval_loss);
	T_CHECK(fabs(b.first_eval_loss - a.last_eval_loss) <= 1e-6 * a.last_eval_loss,
		"%s: reloaded eval loss %.9g, saved run ended at %.9g", name, b.first_eval_loss,
		a.last_eval_loss);
}

int main(void)
{
	struct tf_dir d;

	tf_setup(&d, NULL);
	/* fp32 parameters, default dtype (the init's fp32), shards of 40 kB */
	round_trip(&d, false, "fp32-sharded", 40000, ZINF_ST_F32, true, false);
	/* bf16 parameters saved as bf16 in one file */
	round_trip(&d, true, "bf16-single", 0, ZINF_ST_BF16, false, false);
	/* and without --save-dtype, by DeepSpeed's 16-bit save (the init's dtype is fp32);
	 * an fp32 run keeps fp32 */
	round_trip(&d, true, "bf16-gather16", 0, ZINF_ST_BF16, false, true);
	round_trip(&d, false, "fp32-gather16", 0, ZINF_ST_F32, false, true);
	tf_cleanup(&d);

	tf_setup(&d, ", \"tie_word_embeddings\": true");
	round_trip(&d, false, "tied", 0, ZINF_ST_F32, false, false);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
