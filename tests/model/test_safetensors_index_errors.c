/*
 * A sharded checkpoint's model.safetensors.index.json is checked against its shards: a
 * weight_map entry naming a missing shard file, a tensor that is not in its shard, a
 * shard name that leaves the directory, a tensor listed twice (in one shard or in two
 * that both hold it), an empty or malformed index (text after its object, a NUL byte) all
 * fail with one line naming the index and the tensor. Checking the checkpoint
 * against the model's config names a missing tensor and a wrong shape with its file.
 */
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hf_config.h"
#include "llama_names.h"
#include "safetensors.h"
#include "test.h"
#include "zinf/error.h"

static char *dir;
static int n_shards;
static char norm_shard[64]; /* the shard holding model.norm.weight */

/* The file name of shard k (1-based) of the intact checkpoint. */
static const char *shard(int k)
{
	static char names[4][64];
	static int next;
	char *s = names[next++ % 4];

	snprintf(s, 64, "model-%05d-of-%05d.safetensors", k, n_shards);
	return s;
}

/* An index text with the given weight_map body (printf-style). */
__attribute__((format(printf, 1, 2))) static char *index_text(const char *fmt, ...)
{
	static char buf[1024];
	char body[900];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	snprintf(buf, sizeof(buf), "{\"metadata\":{},\"weight_map\":{%s}}", body);
	return buf;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

static char *in_dir(const char *name)
{
	char *p = NULL;

	T_CHECK(asprintf(&p, "%s/%s", dir, name) > 0, "asprintf");
	return p;
}

static void write_text(const char *name, const char *text)
{
	char *p = in_dir(name);
	FILE *f = fopen(p, "w");

	T_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", p);
	free(p);
}

/* Write the checkpoint of cfg, optionally leaving out one tensor or bending a shape. */
static void write_checkpoint(const struct zinf_hf_config *cfg, uint64_t max_shard, const char *skip,
			     const char *bend)
{
	struct zinf_st_writer_opts opts;
	struct zinf_st_writer *w;
	static float zeros[64 * 64];
	int n = zinf_llama_names_count(cfg), idx;

	zinf_st_writer_opts_init(&opts);
	opts.max_shard_bytes = max_shard;
	T_CHECK_RC(zinf_st_writer_create(&w, dir, &opts));
	static uint64_t elems[256];
	int n_added = 0;

	for (int i = 0; i < n; i++) { /* declare every tensor, then write them */
		struct zinf_llama_tensor_name t;

		zinf_llama_names_get(cfg, i, &t);
		if (skip && strcmp(t.name, skip) == 0)
			continue;
		if (bend && strcmp(t.name, bend) == 0)
			t.shape[0]--, t.n_elems = t.shape[0] * (t.ndim == 2 ? t.shape[1] : 1);
		idx = zinf_st_writer_add(w, t.name, ZINF_ST_BF16, t.ndim, t.shape);
		T_CHECK(idx == n_added, "add %s: %s", t.name, zinf_st_writer_last_error(w));
		elems[n_added++] = t.n_elems;
	}
	for (int i = 0; i < n_added; i++)
		T_CHECK_RC(zinf_st_writer_write(w, i, 0, elems[i], zeros, ZINF_ST_F32));
	T_CHECK(zinf_st_writer_finish(w) == 0, "finish: %s", zinf_st_writer_last_error(w));
	zinf_st_writer_destroy(w);
}

static void expect_open_fail(const char *what, const char *n1, const char *n2)
{
	struct zinf_st_reader *r;
	int rc;

	T_CHECK_RC(zinf_st_reader_create(&r));
	rc = zinf_st_reader_open(r, dir);
	T_CHECK(rc < 0, "%s: open succeeded", what);
	T_CHECK(strstr(zinf_st_reader_last_error(r), "model.safetensors.index.json"),
		"%s: message lacks the index: %s", what, zinf_st_reader_last_error(r));
	T_CHECK(!n1 || strstr(zinf_st_reader_last_error(r), n1), "%s: message lacks '%s': %s", what,
		n1, zinf_st_reader_last_error(r));
	T_CHECK(!n2 || strstr(zinf_st_reader_last_error(r), n2), "%s: message lacks '%s': %s", what,
		n2, zinf_st_reader_last_error(r));
	zinf_st_reader_destroy(r);
}

static void expect_check_fail(const struct zinf_hf_config *cfg, const char *n1, const char *n2)
{
	struct zinf_st_reader *r;
	char err[512];

	T_CHECK_RC(zinf_st_reader_create(&r));
	T_CHECK(zinf_st_reader_open(r, dir) == 0, "open: %s", zinf_st_reader_last_error(r));
	T_CHECK(zinf_llama_names_check(cfg, r, err, sizeof(err)) == ZINF_EFORMAT, "check passed");
	T_CHECK(strstr(err, n1) && strstr(err, n2), "check message: %s (want %s, %s)", err, n1, n2);
	T_CHECK(strstr(err, dir), "check message lacks the path: %s", err);
	zinf_st_reader_destroy(r);
}

int main(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct zinf_hf_config cfg;
	struct zinf_st_reader *r;
	char err[512], *p;

	T_CHECK(asprintf(&dir, "%s/zinf_stidx_XXXXXX", base) > 0 && mkdtemp(dir), "mkdtemp");
	zinf_hf_config_init(&cfg);
	cfg.vocab_size = 50;
	cfg.hidden_size = 8;
	cfg.intermediate_size = 24;
	cfg.num_hidden_layers = 2;
	cfg.num_attention_heads = 2;
	T_CHECK_RC(zinf_hf_config_validate(&cfg, "tiny"));

	/* The intact checkpoint: 4 shards, opens through the directory and the index. */
	write_checkpoint(&cfg, 1000, NULL, NULL);
	T_CHECK_RC(zinf_st_reader_create(&r));
	p = in_dir("model.safetensors.index.json");
	T_CHECK(zinf_st_reader_open(r, p) == 0, "open index: %s", zinf_st_reader_last_error(r));
	n_shards = zinf_st_reader_file_count(r);
	{
		const struct zinf_st_tensor_info *t = zinf_st_reader_find(r, "model.norm.weight");
		const char *f = zinf_st_reader_file_path(r, t->file);

		snprintf(norm_shard, sizeof(norm_shard), "%s", strrchr(f, '/') + 1);
	}
	T_CHECK(n_shards > 2, "expected shards, got %d", n_shards);
	T_CHECK(zinf_llama_names_check(&cfg, r, err, sizeof(err)) == 0, "check: %s", err);
	zinf_st_reader_destroy(r);
	free(p);

	/* A shard missing on disk. */
	p = in_dir(shard(2));
	T_CHECK(access(p, F_OK) == 0, "no shard %s", p);
	{
		char *q = in_dir("moved.bin");

		T_CHECK(rename(p, q) == 0, "rename");
		expect_open_fail("missing shard", shard(2), "cannot open");
		T_CHECK(rename(q, p) == 0, "rename back");
		free(q);
	}
	free(p);

	/* Index entries that are wrong. */
	write_text("model.safetensors.index.json",
		   index_text("\"model.norm.weight\":\"%s\"", shard(1)));
	expect_open_fail("tensor not in its shard", "tensor model.norm.weight",
			 "not found in shard");
	write_text("model.safetensors.index.json",
		   index_text("\"model.norm.weight\":\"../%s\"", shard(n_shards)));
	expect_open_fail("shard outside the directory", "tensor model.norm.weight",
			 "not a shard file name");
	write_text("model.safetensors.index.json",
		   index_text("\"model.norm.weight\":\"%s\",\"model.norm.weight\":\"%s\"",
			      norm_shard, norm_shard));
	expect_open_fail("tensor listed twice", "model.norm.weight", "listed twice");
	{ /* twice, in two shards that both hold it: only one could be read by name */
		char *from = in_dir(norm_shard), *to = in_dir("copy.safetensors"), cmd[700];

		snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
		T_CHECK(system(cmd) == 0, "%s", cmd);
		write_text("model.safetensors.index.json",
			   index_text("\"model.norm.weight\":\"%s\",\"model.norm.weight\":"
				      "\"copy.safetensors\"",
				      norm_shard));
		expect_open_fail("tensor listed in two shards", "model.norm.weight",
				 "listed twice");
		T_CHECK(unlink(to) == 0, "unlink %s", to);
		free(from);
		free(to);
	}
	{ /* text after the object, and a NUL byte, are not JSON */
		char text[1100];

		snprintf(text, sizeof(text), "%s junk ]]",
			 index_text("\"model.norm.weight\":\"%s\"", norm_shard));
		write_text("model.safetensors.index.json", text);
		expect_open_fail("text after the index's object", "not a JSON object", NULL);
		write_text("model.safetensors.index.json",
			   index_text("\"model.norm.weight\":\"%s\"", norm_shard));
		char *p2 = in_dir("model.safetensors.index.json");
		FILE *f = fopen(p2, "a");
		T_CHECK(f && fputc(0, f) == 0 && fputs(" junk", f) >= 0 && fclose(f) == 0,
			"append to %s", p2);
		free(p2);
		expect_open_fail("a NUL byte in the index", "NUL byte", NULL);
	}
	write_text("model.safetensors.index.json", "{\"weight_map\":{}}");
	expect_open_fail("empty weight_map", "weight_map", NULL);
	write_text("model.safetensors.index.json",
		   "{\"weight_map\":{\"model.norm\t.weight\":\"nope.safetensors\"}}");
	expect_open_fail("a raw tab in the index",
			 "control character 0x09 inside a string at byte 26", NULL);
	write_text("model.safetensors.index.json", "{\"weight_map\":");
	expect_open_fail("malformed index", "not a JSON object", NULL);
	write_text("model.safetensors.index.json",
		   "{\"weight_map\":{\"model.norm.weight\":\"nope.safetensors\"}}");
	expect_open_fail("unknown shard", "nope.safetensors", "cannot open");

	/* A valid index over a subset opens (only what the map lists) but fails the model
	 * check, naming the first missing tensor. */
	write_text("model.safetensors.index.json",
		   index_text("\"model.norm.weight\":\"%s\"", norm_shard));
	expect_check_fail(&cfg, "tensor model.embed_tokens.weight: missing",
			  "expected shape [50, 8]");

	/* Fresh single-file checkpoints: one tensor missing, one with a wrong shape. The
	 * writer removes the stale index, so the directory opens as the single file. */
	write_checkpoint(&cfg, 5000000000ull, "model.layers.1.mlp.up_proj.weight", NULL);
	p = in_dir("model.safetensors.index.json");
	T_CHECK(access(p, F_OK) != 0, "stale index left behind");
	free(p);
	expect_check_fail(&cfg, "tensor model.layers.1.mlp.up_proj.weight: missing", "[24, 8]");
	write_checkpoint(&cfg, 5000000000ull, NULL, "model.layers.0.self_attn.k_proj.weight");
	expect_check_fail(&cfg, "tensor model.layers.0.self_attn.k_proj.weight: shape [7, 8]",
			  "(expected [8, 8])");

	/* No checkpoint at all in a directory. */
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	T_CHECK(mkdir(dir, 0700) == 0, "mkdir");
	T_CHECK_RC(zinf_st_reader_create(&r));
	T_CHECK(zinf_st_reader_open(r, dir) == -ENOENT, "empty dir opened");
	T_CHECK(strstr(zinf_st_reader_last_error(r),
		       "no model.safetensors.index.json or model.safetensors"),
		"msg: %s", zinf_st_reader_last_error(r));
	zinf_st_reader_destroy(r);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(dir);
	zinf_hf_config_free(&cfg);
	return T_EXIT_PASS;
}
