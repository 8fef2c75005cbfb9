/*
 * config.json of llama (Llama 3 rope scaling, GQA, tied), mistral (sliding_window null,
 * defaults for head_dim) and qwen2 (q/k/v biases, sliding window off) load with the
 * documented fields and defaults; each malformed field fails with one line naming the
 * file and the field (a key twice in any object, nested too, among them); saving writes a config that loads back equal, keeps keys zinf
 * does not interpret and carries the save dtype. llama's mlp_bias adds the MLP biases to
 * the tensor list; mistral's and qwen2's sliding-window fields (sliding_window,
 * use_sliding_window, max_window_layers, layer_types) load and save back. transformers
 * 5's rope_parameters (rope_type, rope_theta and the llama3 factors in one object) load
 * like the older rope_theta + rope_scaling; linear, dynamic and yarn rope scaling load,
 * reach their scaled lengths, save back and refuse bad keys; initializer_range and
 * attention_dropout load with their checks. Numbers save back as they were written
 * (32.0 stays a float, a 20-digit integer whole).
 * Usage: test_hf_config_llama_mistral_qwen2 DATA_DIR
 */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf_config.h"
#include "llama_names.h"
#include "test.h"
#include "zinf/error.h"

static const char *data_dir;

static void load(struct zinf_hf_config *cfg, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", data_dir, name);
	zinf_hf_config_init(cfg);
	T_CHECK(zinf_hf_config_load_file(cfg, path) == 0, "%s: %s", path, cfg->last_error);
}

/* Load text; expect code and a message with "cfg.json: " + needle. */
static void expect_fail(const char *json, int code, const char *needle)
{
	struct zinf_hf_config cfg;
	char want[512];
	int rc;

	zinf_hf_config_init(&cfg);
	rc = zinf_hf_config_load_string(&cfg, json, "cfg.json");
	T_CHECK(rc == code, "returned %d (%s), expected %d for %s", rc, cfg.last_error, code, json);
	snprintf(want, sizeof(want), "cfg.json: %s", needle);
	T_CHECK(strstr(cfg.last_error, want), "message: %s\n  want: %s", cfg.last_error, want);
	T_CHECK(!strchr(cfg.last_error, '\n'), "message is not one line");
	T_CHECK(cfg.json == NULL && cfg.hidden_size == 0, "state left after a failed load");
	zinf_hf_config_free(&cfg);
}

#define BASE                                                                                       \
	"\"model_type\":\"llama\",\"vocab_size\":100,\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2"

static void check_errors(void)
{
	expect_fail("{" BASE ",\"num_attention_heads\":32,\"num_key_value_heads\":12}",
		    ZINF_ECONFIG, "num_key_value_heads: 12 does not divide num_attention_heads 32");
	expect_fail("{\"model_type\":\"gpt2\"}", ZINF_ECONFIG,
		    "model_type: \"gpt2\" is not supported");
	expect_fail("{\"vocab_size\":3}", ZINF_ECONFIG, "model_type: missing");
	expect_fail("{\"model_type\":\"llama\",\"vocab_size\":100,\"intermediate_size\":128,"
		    "\"num_hidden_layers\":2,\"num_attention_heads\":4}",
		    ZINF_ECONFIG, "hidden_size: missing (expected a positive integer)");
	expect_fail("{" BASE ",\"num_attention_heads\":\"4\"}", ZINF_ECONFIG,
		    "num_attention_heads: non-number is not an integer");
	expect_fail("{" BASE ",\"num_attention_heads\":4.5}", ZINF_ECONFIG,
		    "num_attention_heads: value is not an integer");
	expect_fail("{" BASE ",\"num_attention_heads\":0}", ZINF_ECONFIG,
		    "num_attention_heads: value is not an integer in [1,");
	expect_fail("{" BASE ",\"num_attention_heads\":3}", ZINF_ECONFIG,
		    "hidden_size: 64 is not a multiple of num_attention_heads 3");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"head_dim\":15}", ZINF_ECONFIG,
		    "head_dim: 15 is odd");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rms_norm_eps\":-1}", ZINF_ECONFIG,
		    "rms_norm_eps: expected a positive number");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"initializer_range\":0}", ZINF_ECONFIG,
		    "initializer_range: expected a positive number");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"attention_dropout\":1}", ZINF_ECONFIG,
		    "attention_dropout: expected a number from 0");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"attention_dropout\":\"0.1\"}",
		    ZINF_ECONFIG, "attention_dropout: expected a number from 0");
	{
		struct zinf_hf_config c;

		zinf_hf_config_init(&c);
		T_CHECK(zinf_hf_config_load_string(
				&c,
				"{" BASE ",\"num_attention_heads\":4,"
				"\"initializer_range\":0.05,\"attention_dropout\":0.1}",
				"cfg.json") == 0,
			"%s", c.last_error);
		T_CHECK(c.initializer_range == 0.05 && c.attention_dropout == 0.1,
			"initializer_range %g, attention_dropout %g", c.initializer_range,
			c.attention_dropout);
		zinf_hf_config_free(&c);
	}
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_theta\":\"x\"}", ZINF_ECONFIG,
		    "rope_theta: expected a positive number");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_scaling\":{\"rope_type\":"
		    "\"longrope\",\"factor\":4}}",
		    ZINF_ECONFIG, "rope_scaling.rope_type: \"longrope\" is not supported");
	expect_fail(
		"{" BASE ",\"num_attention_heads\":4,\"rope_scaling\":{\"rope_type\":\"llama3\","
		"\"factor\":8,\"low_freq_factor\":1,\"high_freq_factor\":4}}",
		ZINF_ECONFIG,
		"rope_scaling.original_max_position_embeddings: missing (rope_type \"llama3\" needs it)");
	expect_fail("{" BASE
		    ",\"num_attention_heads\":4,\"rope_scaling\":{\"rope_type\":\"llama3\","
		    "\"factor\":-8,\"low_freq_factor\":1,\"high_freq_factor\":4,"
		    "\"original_max_position_embeddings\":8192}}",
		    ZINF_ECONFIG, "rope_scaling.factor: expected a positive number");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_scaling\":{\"type\":\"llama3\","
		    "\"factor\":8,\"low_freq_factor\":4,\"high_freq_factor\":1,"
		    "\"original_max_position_embeddings\":8192}}",
		    ZINF_ECONFIG,
		    "rope_scaling.high_freq_factor: 1 is not above low_freq_factor 4");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_parameters\":7}", ZINF_ECONFIG,
		    "rope_parameters: expected an object with rope_type and rope_theta");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_parameters\":{\"rope_type\":"
		    "\"default\",\"rope_theta\":1e4},\"rope_scaling\":{\"rope_type\":\"llama3\"}}",
		    ZINF_ECONFIG, "rope_scaling: given with rope_parameters");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_parameters\":{\"rope_type\":"
		    "\"su\",\"rope_theta\":1e4,\"factor\":4}}",
		    ZINF_ECONFIG, "rope_parameters.rope_type: \"su\" is not supported");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_parameters\":{\"rope_type\":"
		    "\"default\",\"rope_theta\":-1}}",
		    ZINF_ECONFIG, "rope_parameters.rope_theta: expected a positive number");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_parameters\":{\"rope_type\":"
		    "\"llama3\",\"rope_theta\":5e5,\"factor\":8}}",
		    ZINF_ECONFIG,
		    "rope_parameters.low_freq_factor: missing (rope_type \"llama3\" needs it)");
	/* a raw tab inside a string: Python's json (transformers') refuses it, cJSON not */
	expect_fail(
		"{" BASE ",\"num_attention_heads\":4,\"architectures\":[\"Llama\tForCausalLM\"]}",
		ZINF_EJSON, "malformed JSON: a control character (0x09) inside a string at byte");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"tie_word_embeddings\":1}", ZINF_ECONFIG,
		    "tie_word_embeddings: expected true or false");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"torch_dtype\":\"int8\"}", ZINF_ECONFIG,
		    "torch_dtype: \"int8\" is not supported");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"hidden_act\":\"gelu\"}", ZINF_ECONFIG,
		    "hidden_act: only \"silu\"");
	expect_fail("{\"model_type\":\"mistral\",\"vocab_size\":100,\"hidden_size\":64,"
		    "\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
		    "\"mlp_bias\":true}",
		    ZINF_ECONFIG, "mlp_bias: true is not supported for model_type mistral");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"mlp_bias\":1}", ZINF_ECONFIG,
		    "mlp_bias: expected true or false");
	expect_fail("{\"model_type\":\"qwen2\",\"vocab_size\":100,\"hidden_size\":64,"
		    "\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
		    "\"max_window_layers\":-1}",
		    ZINF_ECONFIG, "max_window_layers: value is not an integer in [0, 65536]");
	expect_fail(
		"{\"model_type\":\"qwen2\",\"vocab_size\":100,\"hidden_size\":64,"
		"\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
		"\"use_sliding_window\":true,\"sliding_window\":8,\"max_window_layers\":1,"
		"\"layer_types\":[\"full_attention\",\"full_attention\"]}",
		ZINF_ECONFIG,
		"layer_types[1]: \"full_attention\" is not supported (expected \"sliding_attention\"");
	expect_fail("{\"model_type\":\"mistral\",\"vocab_size\":100,\"hidden_size\":64,"
		    "\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
		    "\"layer_types\":[\"sliding_attention\"]}",
		    ZINF_ECONFIG,
		    "layer_types: expected an array of num_hidden_layers = 2 strings");
	expect_fail("{\"model_type\":\"mistral\",\"vocab_size\":100,\"hidden_size\":64,"
		    "\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
		    "\"sliding_window\":0}",
		    ZINF_ECONFIG, "sliding_window: value is not an integer in [1,");
	expect_fail("{\"model_type\":\"llama\",\"vocab_size\":1e30}", ZINF_ECONFIG,
		    "vocab_size: value is not an integer in [1, 16777216]");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"vocab_size\":1000}", ZINF_ECONFIG,
		    "vocab_size: appears twice");
	/* values the runtimes' float and int would change */
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rms_norm_eps\":1e-300}", ZINF_ECONFIG,
		    "rms_norm_eps: expected a positive number within float range");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_scaling\":{\"rope_type\":"
		    "\"llama3\",\"factor\":8.0,\"low_freq_factor\":1,\"high_freq_factor\":4,"
		    "\"original_max_position_embeddings\":4294967304}}",
		    ZINF_ECONFIG,
		    "rope_scaling.original_max_position_embeddings: value is not an integer in "
		    "[1, 2147483647]");
	/* nested too: transformers would take the last, zinf took the first */
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_scaling\":{\"rope_type\":"
		    "\"llama3\",\"factor\":8.0,\"factor\":2.0,\"low_freq_factor\":1,"
		    "\"high_freq_factor\":4,\"original_max_position_embeddings\":8192}}",
		    ZINF_ECONFIG, "rope_scaling.factor: appears twice");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"extra\":[{\"a\":1},{\"b\":1,"
		    "\"b\":2}]}",
		    ZINF_ECONFIG, "extra.[].b: appears twice");
	expect_fail("{" BASE ",", ZINF_EJSON, "malformed JSON near byte");
	expect_fail("[1,2]", ZINF_EJSON, "expected a JSON object");
	expect_fail("{" BASE ",\"num_attention_heads\":4} trailing", ZINF_EJSON, "malformed JSON");
}

static void check_samples(void)
{
	struct zinf_hf_config c;

	load(&c, "config_llama.json");
	T_CHECK(c.model_type == ZINF_HF_LLAMA && c.vocab_size == 128256 && c.hidden_size == 2048 &&
			c.intermediate_size == 8192 && c.num_hidden_layers == 16 &&
			c.num_attention_heads == 32 && c.num_key_value_heads == 8 &&
			c.head_dim == 64 && c.max_position_embeddings == 131072,
		"llama dims");
	T_CHECK(c.rms_norm_eps == 1e-5 && c.rope_theta == 500000.0, "llama eps/theta");
	T_CHECK(c.initializer_range == 0.02 && c.attention_dropout == 0.0,
		"llama initializer_range %g, attention_dropout %g", c.initializer_range,
		c.attention_dropout);
	T_CHECK(c.rope_type == ZINF_ROPE_LLAMA3 && c.rope_factor == 32.0 &&
			c.rope_low_freq_factor == 1.0 && c.rope_high_freq_factor == 4.0 &&
			c.rope_original_max_position_embeddings == 8192,
		"llama3 rope scaling");
	T_CHECK(c.tie_word_embeddings && !c.attention_bias && !c.attention_out_bias, "llama flags");
	T_CHECK(c.has_torch_dtype && c.torch_dtype == ZINF_ST_BF16 && c.sliding_window == 0,
		"dtype");
	T_CHECK(zinf_hf_config_param_count(&c) == 1235814400ull,
		"Llama-3.2-1B has 1235814400 params, got %llu",
		(unsigned long long)zinf_hf_config_param_count(&c));
	T_CHECK(zinf_llama_names_count(&c) == 1 + 16 * 9 + 1, "tied llama has no lm_head");
	zinf_hf_config_free(&c);

	load(&c, "config_mistral.json");
	T_CHECK(c.model_type == ZINF_HF_MISTRAL && c.head_dim == 128 &&
			c.num_key_value_heads == 8 && c.max_position_embeddings == 32768 &&
			c.rope_theta == 1e6,
		"mistral dims");
	T_CHECK(c.rope_type == ZINF_ROPE_DEFAULT && !c.tie_word_embeddings && !c.attention_bias &&
			c.sliding_window == 0,
		"mistral flags (sliding_window null = none)");
	T_CHECK(zinf_hf_config_param_count(&c) == 7248023552ull,
		"Mistral-7B-v0.3 has 7248023552, got %llu",
		(unsigned long long)zinf_hf_config_param_count(&c));
	T_CHECK(zinf_llama_names_count(&c) == 1 + 32 * 9 + 2, "mistral names");
	zinf_hf_config_free(&c);

	load(&c, "config_qwen2.json");
	T_CHECK(c.model_type == ZINF_HF_QWEN2 && c.head_dim == 64 && c.num_key_value_heads == 2 &&
			c.rms_norm_eps == 1e-6 && c.torch_dtype == ZINF_ST_F16,
		"qwen2 dims");
	T_CHECK(c.attention_bias && !c.attention_out_bias && c.tie_word_embeddings &&
			c.sliding_window == 0,
		"qwen2: q/k/v biases, o without, use_sliding_window false");
	T_CHECK(zinf_hf_config_param_count(&c) == 494032768ull,
		"Qwen2-0.5B has 494032768, got %llu",
		(unsigned long long)zinf_hf_config_param_count(&c));
	T_CHECK(zinf_llama_names_count(&c) == 1 + 24 * 12 + 1, "qwen2 names");
	{
		struct zinf_llama_tensor_name t;

		T_CHECK_RC(zinf_llama_names_get(&c, 2, &t));
		T_CHECK_STR(t.name, "model.layers.0.self_attn.q_proj.bias");
		T_CHECK(t.ndim == 1 && t.shape[0] == 896 && t.module == 1, "q bias shape");
		T_CHECK_RC(zinf_llama_names_get(&c, 4, &t));
		T_CHECK_STR(t.name, "model.layers.0.self_attn.k_proj.bias");
		T_CHECK(t.shape[0] == 128, "k bias is nkv * head_dim");
		T_CHECK_RC(zinf_llama_names_get(&c, 1 + 12 + 2, &t));
		T_CHECK_STR(t.name, "model.layers.1.self_attn.k_proj.weight");
		T_CHECK(t.shape[0] == 128 && t.shape[1] == 896 && t.module == 2, "k shape");
		T_CHECK_RC(zinf_llama_names_get(&c, 1 + 24 * 12, &t));
		T_CHECK_STR(t.name, "model.norm.weight");
		T_CHECK(t.module == 25, "final norm in the head module");
		T_CHECK(zinf_llama_names_get(&c, 1 + 24 * 12 + 1, &t) == -EINVAL, "past the end");
	}
	zinf_hf_config_free(&c);

	/* Defaults: no kv heads, head_dim, eps, theta, rope_scaling, dtype; llama bias. */
	zinf_hf_config_init(&c);
	T_CHECK_RC(
		zinf_hf_config_load_string(&c,
					   "{" BASE ",\"num_attention_heads\":4,"
					   "\"attention_bias\":true,\"num_key_value_heads\":null,"
					   "\"rope_scaling\":null}",
					   "d.json"));
	T_CHECK(c.num_key_value_heads == 4 && c.head_dim == 16 && c.rms_norm_eps == 1e-6 &&
			c.rope_theta == 10000.0 && c.rope_type == ZINF_ROPE_DEFAULT &&
			!c.has_torch_dtype && c.max_position_embeddings == 2048,
		"llama defaults");
	T_CHECK(c.attention_bias && c.attention_out_bias, "llama attention_bias covers o_proj");
	{
		struct zinf_llama_tensor_name t;

		T_CHECK(zinf_llama_names_count(&c) == 1 + 2 * 13 + 2, "llama with every bias");
		T_CHECK_RC(zinf_llama_names_get(&c, 8, &t));
		T_CHECK_STR(t.name, "model.layers.0.self_attn.o_proj.bias");
		T_CHECK_RC(zinf_llama_names_get(&c, 1 + 2 * 13 + 1, &t));
		T_CHECK_STR(t.name, "lm_head.weight");
		T_CHECK(t.shape[0] == 100 && t.shape[1] == 64 && t.module == 3, "lm_head");
	}
	zinf_hf_config_free(&c);

	/* transformers 5: the rotary settings in rope_parameters */
	zinf_hf_config_init(&c);
	T_CHECK_RC(zinf_hf_config_load_string(
		&c,
		"{" BASE ",\"num_attention_heads\":4,\"rope_parameters\":{\"rope_type\":\"llama3\","
		"\"rope_theta\":500000.0,\"factor\":32.0,\"low_freq_factor\":1.0,"
		"\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192}}",
		"v5.json"));
	T_CHECK(c.rope_theta == 500000.0 && c.rope_type == ZINF_ROPE_LLAMA3 &&
			c.rope_factor == 32.0 && c.rope_low_freq_factor == 1.0 &&
			c.rope_high_freq_factor == 4.0 &&
			c.rope_original_max_position_embeddings == 8192,
		"rope_parameters llama3: theta %g", c.rope_theta);
	zinf_hf_config_free(&c);
	zinf_hf_config_init(&c);
	T_CHECK_RC(zinf_hf_config_load_string(&c,
					      "{" BASE
					      ",\"num_attention_heads\":4,\"rope_parameters\":"
					      "{\"rope_type\":\"default\",\"rope_theta\":1e6}}",
					      "v5d.json"));
	T_CHECK(c.rope_theta == 1e6 && c.rope_type == ZINF_ROPE_DEFAULT,
		"rope_parameters default: theta %g", c.rope_theta);
	zinf_hf_config_free(&c);
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

static void check_save(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct zinf_hf_config a, b;
	char *dir = NULL, *path = NULL, text[8192];
	FILE *f;
	size_t n;

	T_CHECK(asprintf(&dir, "%s/zinf_hfcfg_XXXXXX", base) > 0 && mkdtemp(dir), "mkdtemp");
	T_CHECK(asprintf(&path, "%s/config.json", dir) > 0, "asprintf");
	for (int k = 0; k < 4; k++) {
		static const char *names[] = {"config_llama.json", "config_mistral.json",
					      "config_qwen2.json", "config_llama_v5.json"};

		load(&a, names[k]);
		T_CHECK(zinf_hf_config_save(&a, path, ZINF_ST_F32) == 0, "save: %s", a.last_error);
		zinf_hf_config_init(&b);
		T_CHECK(zinf_hf_config_load_file(&b, path) == 0, "reload: %s", b.last_error);
		T_CHECK(a.model_type == b.model_type && a.vocab_size == b.vocab_size &&
				a.hidden_size == b.hidden_size &&
				a.intermediate_size == b.intermediate_size &&
				a.num_hidden_layers == b.num_hidden_layers &&
				a.num_attention_heads == b.num_attention_heads &&
				a.num_key_value_heads == b.num_key_value_heads &&
				a.head_dim == b.head_dim &&
				a.max_position_embeddings == b.max_position_embeddings &&
				a.rms_norm_eps == b.rms_norm_eps && a.rope_theta == b.rope_theta &&
				a.rope_type == b.rope_type && a.rope_factor == b.rope_factor &&
				a.rope_low_freq_factor == b.rope_low_freq_factor &&
				a.rope_high_freq_factor == b.rope_high_freq_factor &&
				a.rope_original_max_position_embeddings ==
					b.rope_original_max_position_embeddings &&
				a.tie_word_embeddings == b.tie_word_embeddings &&
				a.attention_bias == b.attention_bias &&
				a.attention_out_bias == b.attention_out_bias &&
				a.sliding_window == b.sliding_window,
			"%s: reloaded config differs", names[k]);
		T_CHECK(b.torch_dtype == ZINF_ST_F32, "save dtype not written");
		f = fopen(path, "r");
		n = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
		text[n] = '\0';
		T_CHECK(strstr(text, "\"bos_token_id\""), "unknown keys dropped: %s", text);
		T_CHECK(strstr(text, "\"torch_dtype\":\t\"float32\""), "torch_dtype: %s", text);
		T_CHECK(a.rope_parameters == (k == 3) && b.rope_parameters == a.rope_parameters &&
				(k != 3 || !strstr(text, "\"rope_scaling\"")),
			"%s: the rotary settings saved in another form: %s", names[k], text);
		zinf_hf_config_free(&a);
		zinf_hf_config_free(&b);
	}
	/* A config built in code (no loaded JSON) saves with architectures and loads. */
	zinf_hf_config_init(&a);
	a.vocab_size = 256;
	a.hidden_size = 32;
	a.intermediate_size = 64;
	a.num_hidden_layers = 2;
	a.num_attention_heads = 4;
	a.num_key_value_heads = 2;
	T_CHECK(zinf_hf_config_save(&a, path, ZINF_ST_BF16) == 0, "save built: %s", a.last_error);
	zinf_hf_config_init(&b);
	T_CHECK(zinf_hf_config_load_file(&b, path) == 0, "reload built: %s", b.last_error);
	T_CHECK(b.num_key_value_heads == 2 && b.head_dim == 8 && b.torch_dtype == ZINF_ST_BF16,
		"built config");
	f = fopen(path, "r");
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	T_CHECK(strstr(text, "LlamaForCausalLM"), "no architectures: %s", text);
	zinf_hf_config_free(&b);
	/* An invalid config is not written. */
	a.num_key_value_heads = 3;
	T_CHECK(zinf_hf_config_save(&a, path, ZINF_ST_BF16) == ZINF_ECONFIG,
		"invalid config saved");
	zinf_hf_config_free(&a);
	/* A missing file names itself. */
	T_CHECK(zinf_hf_config_load_file(&a, "/nonexistent/config.json") == -ENOENT,
		"missing file");
	T_CHECK(strstr(a.last_error, "/nonexistent/config.json: cannot open"), "msg: %s",
		a.last_error);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(dir);
	free(path);
}

/* Load json, save it, load it back; both loads must agree on the window, bias and rope
 * fields. The saved text goes to text (textlen bytes) unless it is NULL. */
static void round_trip_text(const char *json, struct zinf_hf_config *a, char *text, size_t textlen)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct zinf_hf_config b;
	char *dir = NULL, *path = NULL;

	zinf_hf_config_init(a);
	T_CHECK(zinf_hf_config_load_string(a, json, "w.json") == 0, "%s: %s", json, a->last_error);
	T_CHECK(asprintf(&dir, "%s/zinf_hfcfg_XXXXXX", base) > 0 && mkdtemp(dir), "mkdtemp");
	T_CHECK(asprintf(&path, "%s/config.json", dir) > 0, "asprintf");
	T_CHECK(zinf_hf_config_save(a, path, ZINF_ST_F32) == 0, "save: %s", a->last_error);
	zinf_hf_config_init(&b);
	T_CHECK(zinf_hf_config_load_file(&b, path) == 0, "reload: %s", b.last_error);
	T_CHECK(a->sliding_window == b.sliding_window &&
			a->max_window_layers == b.max_window_layers && a->mlp_bias == b.mlp_bias &&
			a->attention_bias == b.attention_bias,
		"%s: reloaded window/bias fields differ (window %llu/%llu, layers %llu/%llu)", json,
		(unsigned long long)a->sliding_window, (unsigned long long)b.sliding_window,
		(unsigned long long)a->max_window_layers, (unsigned long long)b.max_window_layers);
	T_CHECK(a->rope_type == b.rope_type && a->rope_parameters == b.rope_parameters &&
			a->rope_theta == b.rope_theta && a->rope_factor == b.rope_factor &&
			a->rope_original_max_position_embeddings ==
				b.rope_original_max_position_embeddings &&
			a->rope_beta_fast == b.rope_beta_fast &&
			a->rope_beta_slow == b.rope_beta_slow &&
			a->rope_attention_factor == b.rope_attention_factor &&
			a->rope_mscale == b.rope_mscale &&
			a->rope_mscale_all_dim == b.rope_mscale_all_dim &&
			a->rope_truncate == b.rope_truncate,
		"%s: reloaded rope fields differ", json);
	if (text) {
		FILE *f = fopen(path, "r");
		size_t n;

		T_CHECK(f != NULL, "open %s", path);
		n = fread(text, 1, textlen - 1, f);
		fclose(f);
		text[n] = '\0';
	}
	zinf_hf_config_free(&b);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(dir);
	free(path);
}

static void round_trip(const char *json, struct zinf_hf_config *a)
{
	round_trip_text(json, a, NULL, 0);
}

#define SHAPE                                                                                      \
	"\"vocab_size\":100,\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":4," \
	"\"num_attention_heads\":4"

/* mlp_bias (llama) adds three tensors per layer in state-dict order; mistral's and qwen2's
 * window fields load with Hugging Face's defaults and survive a save. */
static void check_windows_and_mlp_bias(void)
{
	struct zinf_hf_config c;
	struct zinf_llama_tensor_name t;

	round_trip("{\"model_type\":\"llama\"," SHAPE ",\"mlp_bias\":true}", &c);
	T_CHECK(c.mlp_bias && !c.attention_bias && c.sliding_window == 0, "llama mlp_bias");
	T_CHECK(zinf_llama_names_count(&c) == 1 + 4 * 12 + 2, "llama with mlp biases: %d names",
		zinf_llama_names_count(&c));
	T_CHECK(zinf_hf_config_param_count(&c) ==
			2 * 100 * 64 + 64 +
				4 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64 + 2 * 128 + 64),
		"param count with mlp biases: %llu",
		(unsigned long long)zinf_hf_config_param_count(&c));
	{
		static const char *order[] = {"mlp.gate_proj.weight", "mlp.gate_proj.bias",
					      "mlp.up_proj.weight",   "mlp.up_proj.bias",
					      "mlp.down_proj.weight", "mlp.down_proj.bias"};
		char want[96];

		for (int i = 0; i < 6; i++) {
			T_CHECK_RC(zinf_llama_names_get(&c, 1 + 4 + i, &t));
			snprintf(want, sizeof(want), "model.layers.0.%s", order[i]);
			T_CHECK_STR(t.name, want);
			T_CHECK(t.module == 1, "module of %s", t.name);
		}
		T_CHECK_RC(zinf_llama_names_get(&c, 1 + 5, &t));
		T_CHECK(t.ndim == 1 && t.shape[0] == 128, "gate bias shape (I)");
		T_CHECK_RC(zinf_llama_names_get(&c, 1 + 9, &t));
		T_CHECK(t.ndim == 1 && t.shape[0] == 64, "down bias shape (C)");
	}
	zinf_hf_config_free(&c);

	/* mistral: sliding_window absent = 4096 (MistralConfig's default), every layer */
	round_trip("{\"model_type\":\"mistral\"," SHAPE "}", &c);
	T_CHECK(c.sliding_window == 4096 && c.max_window_layers == 0, "mistral default window");
	zinf_hf_config_free(&c);
	round_trip("{\"model_type\":\"mistral\"," SHAPE ",\"sliding_window\":7,"
		   "\"layer_types\":[\"sliding_attention\",\"sliding_attention\","
		   "\"sliding_attention\",\"sliding_attention\"]}",
		   &c);
	T_CHECK(c.sliding_window == 7 && c.max_window_layers == 0, "mistral window 7");
	zinf_hf_config_free(&c);

	/* qwen2: the window only with use_sliding_window; max_window_layers defaults to 28 */
	round_trip("{\"model_type\":\"qwen2\"," SHAPE ",\"use_sliding_window\":true,"
		   "\"sliding_window\":16,\"max_window_layers\":2,"
		   "\"layer_types\":[\"full_attention\",\"full_attention\",\"sliding_attention\","
		   "\"sliding_attention\"]}",
		   &c);
	T_CHECK(c.sliding_window == 16 && c.max_window_layers == 2 && c.attention_bias,
		"qwen2 window in layers 2 and 3");
	zinf_hf_config_free(&c);
	round_trip("{\"model_type\":\"qwen2\"," SHAPE ",\"use_sliding_window\":true,"
		   "\"sliding_window\":16}",
		   &c);
	T_CHECK(c.sliding_window == 16 && c.max_window_layers == 28, "qwen2 default layers");
	zinf_hf_config_free(&c);
	/* use_sliding_window without sliding_window: Qwen2Config's default, 4096 */
	round_trip("{\"model_type\":\"qwen2\"," SHAPE ",\"use_sliding_window\":true}", &c);
	T_CHECK(c.sliding_window == 4096 && c.max_window_layers == 28, "qwen2 default window %llu",
		(unsigned long long)c.sliding_window);
	zinf_hf_config_free(&c);
	round_trip("{\"model_type\":\"qwen2\"," SHAPE ",\"use_sliding_window\":true,"
		   "\"sliding_window\":null}",
		   &c);
	T_CHECK(c.sliding_window == 0, "qwen2 window null with use_sliding_window: none");
	zinf_hf_config_free(&c);
	round_trip("{\"model_type\":\"qwen2\"," SHAPE ",\"sliding_window\":16,"
		   "\"max_window_layers\":0}",
		   &c);
	T_CHECK(c.sliding_window == 0 && c.max_window_layers == 0,
		"qwen2 without use_sliding_window has no window");
	zinf_hf_config_free(&c);
	load(&c, "config_qwen2.json");
	T_CHECK(c.max_window_layers == 24 && c.sliding_window == 0, "Qwen2-0.5B window fields");
	zinf_hf_config_free(&c);
}

/* linear, dynamic and yarn rope scaling, in both forms and with the legacy "type" key:
 * the fields, yarn's optional keys, the positions each reaches, a save that keeps them
 * (and keys zinf does not read), and one-line errors for each bad key. */
static void check_rope_types(void)
{
	struct zinf_hf_config c;
	char text[8192];

	round_trip("{" BASE ",\"num_attention_heads\":4,\"max_position_embeddings\":2048,"
		   "\"rope_scaling\":{\"type\":\"linear\",\"factor\":4.0}}",
		   &c);
	T_CHECK(c.rope_type == ZINF_ROPE_LINEAR && c.rope_factor == 4.0 &&
			zinf_hf_config_max_positions(&c) == 8192,
		"linear: factor %g, %llu positions", c.rope_factor,
		(unsigned long long)zinf_hf_config_max_positions(&c));
	zinf_hf_config_free(&c);
	round_trip("{" BASE ",\"num_attention_heads\":4,\"max_position_embeddings\":8,"
		   "\"rope_parameters\":{\"rope_type\":\"dynamic\",\"rope_theta\":5e5,"
		   "\"factor\":2}}",
		   &c);
	T_CHECK(c.rope_type == ZINF_ROPE_DYNAMIC && c.rope_parameters && c.rope_theta == 5e5 &&
			zinf_hf_config_max_positions(&c) == 16,
		"dynamic in rope_parameters");
	zinf_hf_config_free(&c);
	/* Qwen2.5's suggested long-context setting: the context stays 32768, yarn stretches it */
	round_trip_text("{" BASE ",\"num_attention_heads\":4,\"max_position_embeddings\":32768,"
			"\"rope_scaling\":{\"factor\":4.0,\"original_max_position_embeddings\":"
			"32768,\"type\":\"yarn\",\"note\":\"kept\"}}",
			&c, text, sizeof(text));
	T_CHECK(c.rope_type == ZINF_ROPE_YARN && c.rope_factor == 4.0 &&
			c.rope_original_max_position_embeddings == 32768 && c.rope_beta_fast == 0 &&
			c.rope_beta_slow == 0 && c.rope_attention_factor == 0 && c.rope_truncate &&
			zinf_hf_config_max_positions(&c) == 131072,
		"yarn defaults");
	T_CHECK(strstr(text, "\"type\":\t\"yarn\"") && !strstr(text, "rope_type") &&
			strstr(text, "\"note\"") && !strstr(text, "beta_fast"),
		"yarn saved under its legacy type key, other keys kept, no defaults added: %s",
		text);
	T_CHECK(strstr(text, "\"factor\":\t4.0"), "the factor 4.0 saved as an integer: %s", text);
	zinf_hf_config_free(&c);
	/* numbers are written back as they were written: a float stays one (transformers
	 * 4.31 to 4.41 refuse an integer rope factor), an integer past 2^53 stays whole, and
	 * a string holding digits is no number; a value changed keeps the float form */
	round_trip_text("{" BASE ",\"num_attention_heads\":4,\"max_position_embeddings\":64,"
			"\"rope_theta\":500000.0,\"rms_norm_eps\":1e-05,\"note\":\"a\\\"1.5-2\","
			"\"big\":12345678901234567890,\"list\":[1.0,2,{\"x\":-3.50}],"
			"\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.0}}",
			&c, text, sizeof(text));
	T_CHECK(strstr(text, "\"rope_theta\":\t500000.0,") &&
			strstr(text, "\"rms_norm_eps\":\t1e-05,") &&
			strstr(text, "\"big\":\t12345678901234567890,") &&
			strstr(text, "[1.0, 2, {") && strstr(text, "\"x\":\t-3.50") &&
			strstr(text, "\"factor\":\t2.0") && strstr(text, "\"a\\\"1.5-2\""),
		"numbers not written back as they were written: %s", text);
	c.rope_factor = 8;
	{
		const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
		char *d = NULL, *p = NULL;
		FILE *f;
		size_t n;

		T_CHECK(asprintf(&d, "%s/zinf_hfcfg_XXXXXX", base) > 0 && mkdtemp(d), "mkdtemp");
		T_CHECK(asprintf(&p, "%s/config.json", d) > 0, "asprintf");
		T_CHECK(zinf_hf_config_save(&c, p, ZINF_ST_F32) == 0, "save: %s", c.last_error);
		f = fopen(p, "r");
		T_CHECK(f != NULL, "open %s", p);
		n = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
		text[n] = '\0';
		T_CHECK(strstr(text, "\"factor\":\t8.0"), "a changed float saved as an integer: %s",
			text);
		nftw(d, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
		free(d);
		free(p);
	}
	zinf_hf_config_free(&c);
	round_trip_text("{" BASE ",\"num_attention_heads\":4,\"max_position_embeddings\":4096,"
			"\"rope_parameters\":{\"rope_type\":\"yarn\",\"rope_theta\":1e4,"
			"\"factor\":40,\"beta_fast\":16,\"beta_slow\":2,\"mscale\":0.707,"
			"\"mscale_all_dim\":1,\"attention_factor\":1.5,\"truncate\":false}}",
			&c, text, sizeof(text));
	T_CHECK(c.rope_beta_fast == 16 && c.rope_beta_slow == 2 && c.rope_mscale == 0.707 &&
			c.rope_mscale_all_dim == 1 && c.rope_attention_factor == 1.5 &&
			!c.rope_truncate && c.rope_original_max_position_embeddings == 0 &&
			zinf_hf_config_max_positions(&c) == 163840,
		"yarn with every key");
	T_CHECK(strstr(text, "\"truncate\":\tfalse") &&
			!strstr(text, "original_max_position_embeddings"),
		"yarn's keys saved as given: %s", text);
	zinf_hf_config_free(&c);
	round_trip("{" BASE ",\"num_attention_heads\":4,\"partial_rotary_factor\":1.0}", &c);
	zinf_hf_config_free(&c);
	/* as transformers: 0 betas and mscales mean not given; a top-level
	 * original_max_position_embeddings wins over the rope object's */
	round_trip("{" BASE ",\"num_attention_heads\":4,\"max_position_embeddings\":131072,"
		   "\"original_max_position_embeddings\":4096,\"rope_scaling\":{\"type\":\"yarn\","
		   "\"factor\":32,\"original_max_position_embeddings\":8192,\"beta_fast\":0,"
		   "\"beta_slow\":0,\"mscale\":0,\"mscale_all_dim\":0}}",
		   &c);
	T_CHECK(c.rope_original_max_position_embeddings == 4096 && c.rope_beta_fast == 0 &&
			c.rope_beta_slow == 0 && c.rope_mscale == 0 && c.rope_mscale_all_dim == 0 &&
			zinf_hf_config_max_positions(&c) == 131072,
		"top-level context %llu, zeros as not given",
		(unsigned long long)c.rope_original_max_position_embeddings);
	zinf_hf_config_free(&c);

	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_scaling\":{\"type\":\"linear\"}}",
		    ZINF_ECONFIG, "rope_scaling.factor: missing (rope_type \"linear\" needs it)");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_parameters\":{\"rope_type\":"
		    "\"dynamic\",\"rope_theta\":1e4,\"factor\":0}}",
		    ZINF_ECONFIG, "rope_parameters.factor: expected a positive number");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"head_dim\":2,\"rope_scaling\":"
		    "{\"rope_type\":\"dynamic\",\"factor\":2}}",
		    ZINF_ECONFIG, "rope_scaling: rope_type \"dynamic\" needs head_dim >= 4");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_scaling\":{\"rope_type\":"
		    "\"yarn\",\"factor\":4,\"truncate\":\"yes\"}}",
		    ZINF_ECONFIG, "rope_scaling.truncate: expected true or false");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_scaling\":{\"rope_type\":"
		    "\"yarn\",\"factor\":4,\"beta_fast\":-1}}",
		    ZINF_ECONFIG, "rope_scaling.beta_fast: expected a positive number");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_scaling\":{\"rope_type\":"
		    "\"yarn\",\"factor\":4,\"original_max_position_embeddings\":0.5}}",
		    ZINF_ECONFIG,
		    "rope_scaling.original_max_position_embeddings: value is not an integer");
	/* transformers reads a null truncate as false: refused rather than guessed */
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_scaling\":{\"rope_type\":"
		    "\"yarn\",\"factor\":4,\"truncate\":null}}",
		    ZINF_ECONFIG, "rope_scaling.truncate: expected true or false");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_theta\":1,\"rope_scaling\":{"
		    "\"rope_type\":\"yarn\",\"factor\":4}}",
		    ZINF_ECONFIG, "rope_theta: 1 must be above 1 with rope_type \"yarn\"");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"max_position_embeddings\":4294967296,"
		    "\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}}",
		    ZINF_ECONFIG, "rope_scaling: yarn's context 4294967296");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"original_max_position_embeddings\":"
		    "-5,\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}}",
		    ZINF_ECONFIG, "original_max_position_embeddings: value is not an integer");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"partial_rotary_factor\":0.5}",
		    ZINF_ECONFIG, "partial_rotary_factor: only 1 is supported");
	expect_fail("{" BASE ",\"num_attention_heads\":4,\"rope_parameters\":{\"rope_type\":"
		    "\"default\",\"rope_theta\":1e4,\"partial_rotary_factor\":0.25}}",
		    ZINF_ECONFIG, "rope_parameters.partial_rotary_factor: only 1 is supported");
}

int main(int argc, char **argv)
{
	if (argc < 2)
		T_SKIP("usage: %s DATA_DIR", argv[0]);
	data_dir = argv[1];
	check_errors();
	check_samples();
	check_save();
	check_windows_and_mlp_bias();
	check_rope_types();
	return T_EXIT_PASS;
}
