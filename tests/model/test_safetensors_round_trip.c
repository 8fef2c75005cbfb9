/*
 * Writing a small Llama checkpoint with the safetensors writer and reading it back gives
 * the same names, shapes, dtypes and bits, in bf16, fp16 and fp32, as one file and as
 * shards with an index; the layout is what Hugging Face's loader expects (8-byte aligned
 * data, no holes, "__metadata__" {"format": "pt"}, a sorted weight_map with total_size);
 * pieces may arrive in any tensor order; unfinished writers leave no file behind; 300
 * shards are written under a limit of 64 open files.
 */
#include <dirent.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hf_config.h"
#include "llama_names.h"
#include "safetensors.h"
#include "test.h"
#include "zinf/error.h"

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static char *make_tmpdir(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *p = NULL;

	T_CHECK(asprintf(&p, "%s/zinf_st_XXXXXX", base) > 0, "asprintf");
	T_CHECK(mkdtemp(p), "mkdtemp %s", p);
	return p;
}

static int count_files(const char *dir, const char *suffix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	T_CHECK(d, "opendir %s", dir);
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name), m = strlen(suffix);

		n += l >= m && strcmp(e->d_name + l - m, suffix) == 0;
	}
	closedir(d);
	return n;
}

/* Deterministic value of element k of tensor t, already representable in dtype. */
static float value_of(int t, uint64_t k, enum zinf_st_dtype dtype)
{
	uint64_t h = (uint64_t)t * 0x9e3779b97f4a7c15ull + k * 0xbf58476d1ce4e5b9ull;
	float v;

	h ^= h >> 29;
	v = (float)((int64_t)(h % 20001) - 10000) / 997.0f;
	if (dtype == ZINF_ST_BF16)
		return zinf_st_bf16_to_f32(zinf_st_f32_to_bf16(v));
	if (dtype == ZINF_ST_F16)
		return zinf_st_f16_to_f32(zinf_st_f32_to_f16(v));
	return v;
}

static void tiny_config(struct zinf_hf_config *cfg)
{
	zinf_hf_config_init(cfg);
	cfg->vocab_size = 67;
	cfg->hidden_size = 16;
	cfg->intermediate_size = 40;
	cfg->num_hidden_layers = 3;
	cfg->num_attention_heads = 4;
	cfg->num_key_value_heads = 2;
	cfg->model_type = ZINF_HF_QWEN2;
	cfg->attention_bias = true;
	T_CHECK_RC(zinf_hf_config_validate(cfg, "tiny"));
}

/* Check the raw layout of one written file as the safetensors library requires it. */
static void check_layout(const char *path, struct zinf_st_reader *r, int file)
{
	FILE *f = fopen(path, "rb");
	uint64_t hlen = 0, size, expect;
	unsigned char b[8];
	char *hdr;

	T_CHECK(f, "open %s", path);
	T_CHECK(fread(b, 1, 8, f) == 8, "read");
	for (int i = 7; i >= 0; i--)
		hlen = (hlen << 8) | b[i];
	hdr = calloc(1, hlen + 1);
	T_CHECK(hdr && fread(hdr, 1, hlen, f) == hlen, "read header");
	fseek(f, 0, SEEK_END);
	size = (uint64_t)ftell(f);
	fclose(f);
	T_CHECK((8 + hlen) % 8 == 0, "%s: data starts at %llu, not 8-byte aligned", path,
		(unsigned long long)(8 + hlen));
	T_CHECK(strstr(hdr, "\"__metadata__\":{\"format\":\"pt\"}"), "%s: no format pt: %s", path,
		hdr);
	free(hdr);
	/* Tensors of this file, in storage order, must tile [8 + hlen, size) exactly. */
	expect = 8 + hlen;
	for (int i = 0; i < zinf_st_reader_count(r); i++) {
		const struct zinf_st_tensor_info *t = zinf_st_reader_tensor(r, i);

		if (t->file != file)
			continue;
		T_CHECK(t->file_offset == expect, "%s: tensor %s at %llu, expected %llu (hole)",
			path, t->name, (unsigned long long)t->file_offset,
			(unsigned long long)expect);
		T_CHECK(t->file_offset % zinf_st_dtype_size(t->dtype) == 0, "%s misaligned",
			t->name);
		expect += t->nbytes;
	}
	T_CHECK(expect == size, "%s: data ends at %llu, file is %llu bytes", path,
		(unsigned long long)expect, (unsigned long long)size);
}

static void check_index(const char *dir, int n_shards)
{
	char *path = NULL, *text;
	FILE *f;
	long n;

	T_CHECK(asprintf(&path, "%s/model.safetensors.index.json", dir) > 0, "asprintf");
	f = fopen(path, "rb");
	T_CHECK(f, "no index %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	text = calloc(1, (size_t)n + 1);
	T_CHECK(fread(text, 1, (size_t)n, f) == (size_t)n, "read");
	fclose(f);
	T_CHECK(strstr(text, "\"total_size\""), "no total_size: %s", text);
	T_CHECK(strstr(text, "\"weight_map\""), "no weight_map");
	/* Keys sorted: lm_head < model.embed_tokens < model.layers.0 < model.norm. */
	T_CHECK(strstr(text, "\"lm_head.weight\"") <
				strstr(text, "\"model.embed_tokens.weight\"") &&
			strstr(text, "\"model.layers.0.mlp.down_proj.weight\"") <
				strstr(text, "\"model.norm.weight\""),
		"weight_map not sorted");
	{
		char name[64];

		snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", n_shards, n_shards);
		T_CHECK(strstr(text, name), "index does not name %s", name);
	}
	free(text);
	free(path);
}

static void round_trip(enum zinf_st_dtype dtype, uint64_t max_shard, bool reverse, bool pieces)
{
	struct zinf_st_writer_opts opts;
	struct zinf_st_writer *w;
	struct zinf_st_reader *r;
	struct zinf_hf_config cfg;
	char *dir = make_tmpdir(), err[512];
	int n, shards;
	float *buf, *back;
	uint16_t *raw;

	tiny_config(&cfg);
	n = zinf_llama_names_count(&cfg);
	zinf_st_writer_opts_init(&opts);
	opts.max_shard_bytes = max_shard;
	T_CHECK_RC(zinf_st_writer_create(&w, dir, &opts));
	for (int i = 0; i < n; i++) {
		struct zinf_llama_tensor_name t;

		T_CHECK_RC(zinf_llama_names_get(&cfg, i, &t));
		T_CHECK(zinf_st_writer_add(w, t.name, dtype, t.ndim, t.shape) == i, "add %s",
			t.name);
	}
	buf = malloc(67 * 16 * sizeof(float));
	back = malloc(67 * 16 * sizeof(float));
	raw = malloc(67 * 16 * sizeof(uint16_t));
	for (int j = 0; j < n; j++) {
		int i = reverse ? n - 1 - j : j;
		struct zinf_llama_tensor_name t;
		uint64_t step;

		zinf_llama_names_get(&cfg, i, &t);
		for (uint64_t k = 0; k < t.n_elems; k++)
			buf[k] = value_of(i, k, dtype);
		/* fp32 source converted by the writer; pieces of 7 elements when asked. */
		step = pieces ? 7 : t.n_elems;
		for (uint64_t k = 0; k < t.n_elems; k += step) {
			uint64_t m = t.n_elems - k < step ? t.n_elems - k : step;

			T_CHECK_RC(zinf_st_writer_write(w, i, k, m, buf + k, ZINF_ST_F32));
		}
	}
	T_CHECK_RC(zinf_st_writer_finish(w));
	shards = zinf_st_writer_shard_count(w);
	zinf_st_writer_destroy(w);
	T_CHECK(count_files(dir, ".tmp") == 0, "temporary files left in %s", dir);
	if (max_shard < 1000000) {
		T_CHECK(shards > 2, "expected several shards at %llu bytes, got %d",
			(unsigned long long)max_shard, shards);
		T_CHECK(count_files(dir, ".safetensors") == shards, "shard files");
		check_index(dir, shards);
	} else {
		T_CHECK(shards == 1, "one shard expected, got %d", shards);
		T_CHECK(count_files(dir, ".json") == 0, "no index expected for one file");
	}

	T_CHECK_RC(zinf_st_reader_create(&r));
	T_CHECK(zinf_st_reader_open(r, dir) == 0, "open: %s", zinf_st_reader_last_error(r));
	T_CHECK(zinf_st_reader_count(r) == n, "%d tensors, expected %d", zinf_st_reader_count(r),
		n);
	T_CHECK(zinf_st_reader_file_count(r) == shards, "files");
	T_CHECK(zinf_llama_names_check(&cfg, r, err, sizeof(err)) == 0, "check: %s", err);
	for (int f = 0; f < zinf_st_reader_file_count(r); f++)
		check_layout(zinf_st_reader_file_path(r, f), r, f);
	for (int i = 0; i < n; i++) {
		struct zinf_llama_tensor_name t;
		const struct zinf_st_tensor_info *ti;

		zinf_llama_names_get(&cfg, i, &t);
		ti = zinf_st_reader_find(r, t.name);
		T_CHECK(ti, "tensor %s missing", t.name);
		T_CHECK(ti->dtype == dtype && ti->ndim == t.ndim && ti->shape[0] == t.shape[0] &&
				(t.ndim == 1 || ti->shape[1] == t.shape[1]),
			"tensor %s: dtype/shape changed", t.name);
		T_CHECK_RC(zinf_st_reader_read(r, ti, back, ZINF_ST_F32));
		for (uint64_t k = 0; k < t.n_elems; k++)
			T_CHECK(back[k] == value_of(i, k, dtype), "%s[%llu]: %g != %g", t.name,
				(unsigned long long)k, back[k], value_of(i, k, dtype));
		if (dtype != ZINF_ST_F32) { /* same-dtype read: the stored bits */
			T_CHECK_RC(zinf_st_reader_read(r, ti, raw, dtype));
			for (uint64_t k = 0; k < t.n_elems; k++) {
				float v = dtype == ZINF_ST_BF16 ? zinf_st_bf16_to_f32(raw[k])
								: zinf_st_f16_to_f32(raw[k]);
				T_CHECK(v == back[k], "%s[%llu] raw", t.name,
					(unsigned long long)k);
			}
		}
		/* A range read equals the same slice of the whole. */
		if (t.n_elems > 10) {
			T_CHECK_RC(zinf_st_reader_read_elems(r, ti, 3, 5, buf, ZINF_ST_F32));
			T_CHECK(memcmp(buf, back + 3, 5 * sizeof(float)) == 0, "range read");
			T_CHECK(zinf_st_reader_read_elems(r, ti, t.n_elems - 2, 3, buf,
							  ZINF_ST_F32) == -EINVAL,
				"range past the end accepted");
			T_CHECK(strstr(zinf_st_reader_last_error(r), t.name),
				"error names the tensor: %s", zinf_st_reader_last_error(r));
		}
	}
	zinf_st_reader_destroy(r);
	free(buf);
	free(back);
	free(raw);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(dir);
	zinf_hf_config_free(&cfg);
}

/* Unfinished writers: finish refuses a missing piece, destroy removes the temp files. */
static void unfinished(void)
{
	uint64_t shape[2] = {4, 3};
	float x[12] = {0};
	struct zinf_st_writer *w;
	char *dir = make_tmpdir();

	T_CHECK_RC(zinf_st_writer_create(&w, dir, NULL));
	T_CHECK(zinf_st_writer_add(w, "a", ZINF_ST_BF16, 2, shape) == 0, "add");
	T_CHECK(zinf_st_writer_add(w, "b", ZINF_ST_F32, 2, shape) == 1, "add");
	T_CHECK(zinf_st_writer_add(w, "a", ZINF_ST_F32, 2, shape) == -EINVAL, "duplicate accepted");
	T_CHECK(zinf_st_writer_add(w, "bad\"name", ZINF_ST_F32, 2, shape) == -EINVAL,
		"quote accepted");
	T_CHECK_RC(zinf_st_writer_write(w, 0, 0, 12, x, ZINF_ST_F32));
	T_CHECK(zinf_st_writer_add(w, "c", ZINF_ST_F32, 2, shape) == ZINF_ESTATE,
		"add after write");
	T_CHECK(zinf_st_writer_write(w, 1, 5, 2, x, ZINF_ST_F32) == -EINVAL, "out-of-order piece");
	T_CHECK_RC(zinf_st_writer_write(w, 1, 0, 6, x, ZINF_ST_F32));
	T_CHECK(zinf_st_writer_finish(w) == ZINF_ESTATE, "finish with a missing piece");
	T_CHECK(strstr(zinf_st_writer_last_error(w), "tensor b: 6 of 12 elements written"),
		"msg: %s", zinf_st_writer_last_error(w));
	T_CHECK(count_files(dir, ".tmp") == 1, "temp file expected while writing");
	zinf_st_writer_destroy(w);
	T_CHECK(count_files(dir, ".tmp") == 0 && count_files(dir, ".safetensors") == 0,
		"unfinished writer left files");
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

/* More shards than the process may have files open: 300 one-tensor shards under a limit
 * of 64 descriptors (the writer held every shard open until the end, and a save of
 * many small shards failed with EMFILE after training). */
static void many_shards(void)
{
	enum { N = 300 };
	uint64_t shape[1] = {256};
	static float x[256];
	struct rlimit old, low;
	struct zinf_st_writer_opts o;
	struct zinf_st_writer *w;
	struct zinf_st_reader *r;
	char *dir = make_tmpdir(), name[32], path[600];
	float got[256];

	T_CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0, "getrlimit");
	low = old;
	low.rlim_cur = 64;
	T_CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0, "setrlimit");
	zinf_st_writer_opts_init(&o);
	o.max_shard_bytes = 1024; /* one tensor of 1 KiB a shard */
	T_CHECK_RC(zinf_st_writer_create(&w, dir, &o));
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "t%03d", i);
		T_CHECK(zinf_st_writer_add(w, name, ZINF_ST_F32, 1, shape) == i, "add %s", name);
	}
	for (int i = 0; i < N; i++) {
		for (int k = 0; k < 256; k++)
			x[k] = (float)(i * 256 + k);
		T_CHECK(zinf_st_writer_write(w, i, 0, 256, x, ZINF_ST_F32) == 0, "write %d: %s", i,
			zinf_st_writer_last_error(w));
	}
	T_CHECK(zinf_st_writer_finish(w) == 0, "finish: %s", zinf_st_writer_last_error(w));
	zinf_st_writer_destroy(w);
	T_CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0, "setrlimit back");
	T_CHECK(count_files(dir, ".safetensors") == N, "%d shards",
		count_files(dir, ".safetensors"));
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	T_CHECK_RC(zinf_st_reader_create(&r));
	T_CHECK(zinf_st_reader_open(r, path) == 0, "read back: %s", zinf_st_reader_last_error(r));
	for (int i = 0; i < N; i += 37) {
		snprintf(name, sizeof(name), "t%03d", i);
		const struct zinf_st_tensor_info *ti = zinf_st_reader_find(r, name);
		T_CHECK(ti && zinf_st_reader_read(r, ti, got, ZINF_ST_F32) == 0, "read %s: %s",
			name, zinf_st_reader_last_error(r));
		for (int k = 0; k < 256; k++)
			T_CHECK(got[k] == (float)(i * 256 + k), "%s[%d] = %g", name, k, got[k]);
	}
	zinf_st_reader_destroy(r);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

int main(void)
{
	static const enum zinf_st_dtype dtypes[] = {ZINF_ST_BF16, ZINF_ST_F16, ZINF_ST_F32};

	for (int d = 0; d < 3; d++) {
		round_trip(dtypes[d], 5000000000ull, false, false);
		round_trip(dtypes[d], 4096, true, true);
	}
	unfinished();
	many_shards();
	return T_EXIT_PASS;
}
