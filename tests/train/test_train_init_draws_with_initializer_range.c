/* --init draws every matrix and the embedding from normal(0, initializer_range) of the
 * model's config.json (default 0.02, as transformers' _init_weights): saved after one
 * step at learning rate 0, the embedding's standard deviation is within 5% of 0.02
 * without the key and of 0.2 with "initializer_range": 0.2, and its mean near 0. An
 * attention_dropout above 0 (zinf applies no dropout) trains with one warning naming it. */
#include <math.h>

#include "safetensors.h"
#include "train_fixture.h"

static int dropout_warnings;

static void count_warning(enum zinf_log_level level, const char *msg, void *user)
{
	(void)user;
	if (level == ZINF_LOG_WARN && strstr(msg, "attention_dropout 0.1: zinf applies no dropout"))
		dropout_warnings++;
}

static double embedding_std(const char *extra_model_json, double *mean)
{
	static const char *const sets[] = {"optimizer.params.lr=0"};
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	struct zinf_st_reader *r;
	const struct zinf_st_tensor_info *t;
	struct tf_dir d;
	char save[200];
	double sum = 0, sq = 0;
	float *v;

	tf_setup(&d, extra_model_json);
	zinf_log_set_level(ZINF_LOG_WARN);
	zinf_log_set_callback(count_warning, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	snprintf(save, sizeof(save), "%s/saved", d.root);
	tf_opts(&d, &o, 1, &l);
	o.config_sets = sets;
	o.n_config_sets = 1;
	o.save_dir = save;
	tf_run(&o, &res);
	T_CHECK_RC(zinf_st_reader_create(&r));
	T_CHECK(zinf_st_reader_open(r, save) == 0, "%s", zinf_st_reader_last_error(r));
	t = zinf_st_reader_find(r, "model.embed_tokens.weight");
	T_CHECK(t != NULL, "no embedding in %s", save);
	v = malloc(t->n_elems * sizeof(*v));
	T_CHECK(v != NULL, "out of memory");
	T_CHECK(zinf_st_reader_read(r, t, v, ZINF_ST_F32) == 0, "%s", zinf_st_reader_last_error(r));
	for (uint64_t i = 0; i < t->n_elems; i++) {
		sum += v[i];
		sq += (double)v[i] * v[i];
	}
	*mean = sum / (double)t->n_elems;
	sq = sqrt(sq / (double)t->n_elems - *mean * *mean);
	free(v);
	zinf_st_reader_destroy(r);
	tf_cleanup(&d);
	return sq;
}

int main(void)
{
	double mean, s = embedding_std(NULL, &mean);

	T_CHECK(fabs(s - 0.02) < 0.05 * 0.02 && fabs(mean) < 0.002,
		"default: std %g mean %g, want 0.02 and 0", s, mean);
	s = embedding_std(", \"initializer_range\": 0.2", &mean);
	T_CHECK(fabs(s - 0.2) < 0.05 * 0.2 && fabs(mean) < 0.02,
		"initializer_range 0.2: std %g mean %g, want 0.2 and 0", s, mean);
	T_CHECK(dropout_warnings == 0, "a dropout warning without attention_dropout");
	embedding_std(", \"attention_dropout\": 0.1", &mean);
	T_CHECK(dropout_warnings == 1, "%d attention_dropout warnings, want 1", dropout_warnings);
	return T_EXIT_PASS;
}
