/* A save from --model or --resume carries the source's tokenizer and generation files
 * (tokenizer.json, generation_config.json, ...) into the final save and every
 * checkpoint-<step>, byte for byte, as regular files (a link in the source, as a Hugging
 * Face cache has, is followed), from the files the run opened when it started (one
 * replaced during the run is saved as it was); other files (README.md) are not carried.
 * A save that carries such files removes the earlier save's that it does not carry; one
 * that carries none (--init) leaves them. A snapshot holding them is one --save-total-limit
 * removes. With --save, such a name that is not a regular file is refused on one line
 * before step 1, the earlier save untouched; without --save it is not looked at. A
 * --log-json naming one of them in the --model directory is refused. */
#include <errno.h>

#include "train_fixture.h"

static const char tokenizer[] = "{\"model\": {\"type\": \"BPE\"}}\n";
static const char *const carried[] = {"tokenizer.json", "tokenizer_config.json",
				      "generation_config.json", "chat_template.jinja"};

static void put(const char *dir, const char *name, const char *text)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	tf_write_all(path, text, strlen(text));
}

static bool exists(const char *dir, const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

/* dir/name is a regular file (not a link) with the bytes of src/name. */
static void same_regular(const char *src, const char *dir, const char *name)
{
	char a[512], b[512];
	struct stat st;

	snprintf(a, sizeof(a), "%s/%s", src, name);
	snprintf(b, sizeof(b), "%s/%s", dir, name);
	T_CHECK(lstat(b, &st) == 0 && S_ISREG(st.st_mode), "%s is a regular file", b);
	tf_same_file(a, b);
}

struct swap {
	struct tf_losses *l;
	char path[512]; /* replaced by other bytes at step 1 */
};

static void swap_on_step(const struct zinf_train_step *s, void *user)
{
	struct swap *w = user;
	char tmp[600];

	tf_on_step(s, w->l);
	if (s->step != 1 || !w->path[0])
		return;
	snprintf(tmp, sizeof(tmp), "%s.new", w->path);
	tf_write_all(tmp, "{\"replaced\": true}\n", 19);
	T_CHECK(rename(tmp, w->path) == 0, "rename over %s", w->path);
}

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	struct swap w;
	char base[256], blobs[256], out[256], out2[256], ck[300], path[512], keep[512];
	char err[1024];

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	snprintf(base, sizeof(base), "%s/base", d.root);
	snprintf(blobs, sizeof(blobs), "%s/blobs", d.root);
	snprintf(out, sizeof(out), "%s/out", d.root);
	snprintf(out2, sizeof(out2), "%s/out2", d.root);
	T_CHECK(mkdir(blobs, 0755) == 0, "mkdir %s", blobs);

	/* a checkpoint with a tokenizer beside it; generation_config.json a link to a blob */
	tf_opts(&d, &o, 1, &l);
	o.save_dir = base;
	tf_run(&o, &res);
	put(base, "tokenizer.json", tokenizer);
	put(d.root, "tokenizer.json.orig", tokenizer);
	put(base, "tokenizer_config.json", "{\"bos_token\": \"<s>\"}\n");
	put(base, "chat_template.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}\n");
	put(base, "README.md", "# a model card\n");
	put(blobs, "gen", "{\"eos_token_id\": [1, 2]}\n");
	snprintf(path, sizeof(path), "%s/generation_config.json", base);
	T_CHECK(symlink("../blobs/gen", path) == 0, "symlink %s", path);
	snprintf(keep, sizeof(keep), "%s/tokenizer.json.orig", d.root);

	/* fine-tuned with snapshots and the state; tokenizer.json replaced after step 1 */
	tf_opts(&d, &o, 2, &l);
	o.init_config = NULL;
	o.model_dir = base;
	o.save_dir = out;
	o.save_every = 1;
	o.save_state = true;
	w.l = &l;
	snprintf(w.path, sizeof(w.path), "%s/tokenizer.json", base);
	o.on_step = swap_on_step;
	o.on_step_user = &w;
	tf_run(&o, &res);
	T_CHECK(l.n == 2, "two steps ran");
	snprintf(ck, sizeof(ck), "%s/checkpoint-1", out);
	for (int i = 1; i < 4; i++) {
		same_regular(base, out, carried[i]);
		same_regular(base, ck, carried[i]);
	}
	snprintf(path, sizeof(path), "%s/tokenizer.json", out);
	tf_same_file(keep, path); /* as opened, not as replaced */
	snprintf(path, sizeof(path), "%s/tokenizer.json", ck);
	tf_same_file(keep, path);
	T_CHECK(!exists(out, "README.md") && !exists(ck, "README.md"), "README.md is not carried");
	T_CHECK(!exists(out, "tokenizer.json.tmp") && !exists(out, "tokenizer.model"),
		"no partial copy, nothing the source lacks");
	/* the source as it was again, for the runs below */
	snprintf(path, sizeof(path), "%s/tokenizer.json", base);
	put(base, "tokenizer.json", tokenizer);

	/* resumed: the checkpoint's own copies are carried on */
	tf_opts(&d, &o, 2, &l);
	o.init_config = NULL;
	o.resume_dir = ck;
	o.save_dir = out2;
	tf_run(&o, &res);
	T_CHECK(l.n == 1, "the resumed run ran step 2");
	for (int i = 0; i < 4; i++)
		same_regular(ck, out2, carried[i]);

	/* another tokenizer into the same --save directory: the earlier files it does not
	 * carry are removed, a file of the user's is kept */
	for (int i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s/%s", base, carried[i]);
		T_CHECK(unlink(path) == 0, "unlink %s", path);
	}
	put(base, "tokenizer.model", "sentencepiece bytes\n");
	put(out, "notes.txt", "mine\n");
	tf_opts(&d, &o, 5, &l);
	o.init_config = NULL;
	o.model_dir = base;
	o.save_dir = out;
	o.save_every = 2;
	o.save_total_limit = 1;
	tf_run(&o, &res);
	same_regular(base, out, "tokenizer.model");
	for (int i = 0; i < 4; i++)
		T_CHECK(!exists(out, carried[i]), "the earlier save's %s is removed", carried[i]);
	T_CHECK(exists(out, "notes.txt"), "the user's file is kept");
	T_CHECK(exists(out, "checkpoint-4") && !exists(out, "checkpoint-2") &&
			!exists(out, "checkpoint-1"),
		"--save-total-limit removes snapshots holding a tokenizer");
	T_CHECK(exists(out, "checkpoint-4/tokenizer.model"), "the snapshot holds it");

	/* --init carries nothing and removes nothing */
	tf_opts(&d, &o, 1, &l);
	o.save_dir = out;
	tf_run(&o, &res);
	same_regular(base, out, "tokenizer.model");

	/* a name the save would carry that is not a regular file: refused before step 1 */
	snprintf(path, sizeof(path), "%s/tokenizer.json", base);
	T_CHECK(mkdir(path, 0755) == 0, "mkdir %s", path);
	snprintf(keep, sizeof(keep), "%s/model.safetensors", out);
	{
		char *before, *after;
		size_t nb, na;
		tf_read_all(keep, &before, &nb);
		tf_opts(&d, &o, 2, &l);
		o.init_config = NULL;
		o.model_dir = base;
		o.save_dir = out;
		T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EINVAL &&
				strstr(err, "tokenizer.json") && strstr(err, "--model") &&
				strstr(err, "not a regular file") && !strchr(err, '\n'),
			"a directory named tokenizer.json: %s", err);
		T_CHECK(l.n == 0, "no step ran");
		tf_read_all(keep, &after, &na);
		T_CHECK(nb == na && memcmp(before, after, nb) == 0,
			"the earlier save is untouched");
		free(before);
		free(after);
	}
	/* without --save nothing is carried, so it is not looked at */
	tf_opts(&d, &o, 1, &l);
	o.init_config = NULL;
	o.model_dir = base;
	tf_run(&o, &res);
	T_CHECK(l.n == 1, "trained without --save");

	/* a log written over the --model directory's tokenizer_config.json: refused */
	put(base, "tokenizer_config.json", "{}\n");
	tf_opts(&d, &o, 1, &l);
	o.init_config = NULL;
	o.model_dir = base;
	snprintf(path, sizeof(path), "%s/tokenizer_config.json", base);
	o.log_json_path = path;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EINVAL &&
			strstr(err, "a file a save writes") && strstr(err, "--model"),
		"--log-json over a tokenizer file: %s", err);
	{
		char *x;
		size_t n;
		tf_read_all(path, &x, &n);
		T_CHECK(n == 3 && !memcmp(x, "{}\n", 3), "the tokenizer file is untouched");
		free(x);
	}
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
