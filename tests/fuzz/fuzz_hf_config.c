/* libFuzzer harness: Hugging Face config.json (zinf_hf_config_load_string), with a
 * round trip: a config that loads is saved (zinf_hf_config_save) and loaded back from
 * the file, and must give the same fields. Input: the JSON text. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "hf_config.h"
#include "zinf/log.h"

static char path[256];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	zinf_log_set_level(ZINF_LOG_ERROR);
	fuzz_scratch();
	snprintf(path, sizeof(path), "%s/config.json", fuzz_dir);
	return 0;
}

#define SAME(f) (a->f == b->f)
static void compare(const struct zinf_hf_config *a, const struct zinf_hf_config *b)
{
	if (!(SAME(model_type) && SAME(vocab_size) && SAME(hidden_size) &&
	      SAME(intermediate_size) && SAME(num_hidden_layers) && SAME(num_attention_heads) &&
	      SAME(num_key_value_heads) && SAME(head_dim) && SAME(max_position_embeddings) &&
	      SAME(rms_norm_eps) && SAME(rope_theta) && SAME(rope_type) && SAME(rope_parameters) &&
	      SAME(tie_word_embeddings) && SAME(attention_bias) && SAME(attention_out_bias) &&
	      SAME(mlp_bias) && SAME(sliding_window) && SAME(max_window_layers) &&
	      SAME(torch_dtype) && SAME(initializer_range) && SAME(attention_dropout))) {
		fprintf(stderr, "round trip changed the config\n");
		abort();
	}
	if (a->rope_type != ZINF_ROPE_DEFAULT &&
	    !(SAME(rope_factor) && SAME(rope_low_freq_factor) && SAME(rope_high_freq_factor) &&
	      SAME(rope_original_max_position_embeddings) && SAME(rope_beta_fast) &&
	      SAME(rope_beta_slow) && SAME(rope_attention_factor) && SAME(rope_mscale) &&
	      SAME(rope_mscale_all_dim) && SAME(rope_truncate))) {
		fprintf(stderr, "round trip changed rope\n");
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct zinf_hf_config cfg, back;

	memcpy(text, data, size);
	text[size] = 0;
	zinf_hf_config_init(&cfg);
	if (zinf_hf_config_load_string(&cfg, text, "fuzz/config.json") == 0) {
		(void)zinf_hf_config_param_count(&cfg);
		if (zinf_hf_config_validate(&cfg, NULL) != 0) {
			fprintf(stderr, "validate fails after load: %s\n", cfg.last_error);
			abort();
		}
		int rc = zinf_hf_config_save(&cfg, path, cfg.torch_dtype);
		if (rc) {
			fprintf(stderr, "save failed: %s\n", cfg.last_error);
			abort();
		}
		zinf_hf_config_init(&back);
		rc = zinf_hf_config_load_file(&back, path);
		if (rc) {
			fprintf(stderr, "reload of the saved config failed: %s\n", back.last_error);
			abort();
		}
		compare(&cfg, &back);
		zinf_hf_config_free(&back);
	}
	zinf_hf_config_free(&cfg);
	free(text);
	return 0;
}
