/* A save from --model or --resume carries the source's tokenizer and generation files
 * (tokenizer.json, generation_config.json, Mistral's tokenizer.model.v3, ...) into the
 * final save and every checkpoint-<step>, byte for byte, as regular files, from a
 * directory laid out as a Hugging Face cache snapshot (every file a link into a blob
 * directory). They are the files as they were when the run started: one renamed over
 * during the load (which is not refused as a save moving in) or rewritten in place after
 * a step is saved as it was. Other files (README.md, a look-alike name) are not carried.
 * An earlier save's files of those names that a save does not carry are left, and so is
 * a user's file. A snapshot holding them is one --save-total-limit removes. With --save,
 * such a name that is a directory, a FIFO, a link to nothing or a link loop is refused on
 * one line before step 1, the earlier save's files untouched; without --save they are not
 * looked at. A --log-json naming one of them in the --model directory is refused. */
#include <errno.h>
#include <signal.h>

#include "train_fixture.h"
#include "train_internal.h" /* train_loaded_hook */

static const char *const carried[] = {"tokenizer.json", "tokenizer_config.json",
				      "generation_config.json", "chat_template.jinja",
				      "tokenizer.model.v3"};
#define N_CARRIED 5

static char root[64];

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

/* Move dir/name to blobs/name and leave a relative link in its place. */
static void into_blob(const char *dir, const char *name)
{
	char a[512], b[512], target[300];

	snprintf(a, sizeof(a), "%s/%s", dir, name);
	snprintf(b, sizeof(b), "%s/blobs/%s", root, name);
	snprintf(target, sizeof(target), "../blobs/%s", name);
	T_CHECK(rename(a, b) == 0 && symlink(target, a) == 0, "link %s", a);
}

/* The load's end: tokenizer_config.json renamed over by other bytes. */
static void replace_during_load(const char *dir)
{
	char a[512], b[520];

	snprintf(a, sizeof(a), "%s/tokenizer_config.json", dir);
	snprintf(b, sizeof(b), "%s.new", a);
	tf_write_all(b, "{\"replaced\": 1}\n", 16);
	T_CHECK(rename(b, a) == 0, "rename over %s", a);
}

/* After step 1: tokenizer.json's blob rewritten in place. */
static void rewrite_on_step(const struct zinf_train_step *s, void *user)
{
	char path[512];

	tf_on_step(s, user);
	if (s->step != 1)
		return;
	snprintf(path, sizeof(path), "%s/blobs/tokenizer.json", root);
	tf_write_all(path, "{\"rewritten\": 1}\n", 17);
}

/* Every file of dir (names and bytes) into a list, to compare after a refused run. */
static void listing(const char *dir, char *buf, size_t len)
{
	char cmd[400];
	FILE *p;
	size_t n;

	snprintf(cmd, sizeof(cmd), "cd '%s' && find . -type f | sort | xargs cksum", dir);
	p = popen(cmd, "r");
	T_CHECK(p, "%s", cmd);
	n = fread(buf, 1, len - 1, p);
	buf[n] = 0;
	T_CHECK(pclose(p) == 0 && n > 0 && n < len - 1, "%s", cmd);
}

static void refused(const struct tf_dir *d, const char *base, const char *out, const char *name,
		    const char *why)
{
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	static char before[1 << 14], after[1 << 14];
	char err[1024];

	listing(out, before, sizeof(before));
	tf_opts(d, &o, 2, &l);
	o.init_config = NULL;
	o.model_dir = base;
	o.save_dir = out;
	alarm(60); /* a FIFO opened for reading would wait for a writer */
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) != 0 && strstr(err, name) &&
			strstr(err, "--model") && strstr(err, why) && !strchr(err, '\n'),
		"%s: %s", name, err);
	alarm(0);
	T_CHECK(l.n == 0, "no step ran");
	listing(out, after, sizeof(after));
	T_CHECK(!strcmp(before, after), "the earlier save is untouched");
	/* without --save it is not looked at */
	tf_opts(d, &o, 1, &l);
	o.init_config = NULL;
	o.model_dir = base;
	tf_run(&o, &res);
	T_CHECK(l.n == 1, "trained without --save beside %s", name);
}

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char base[256], orig[256], out[256], out2[256], ck[300], path[512], err[1024];

	tf_setup(&d, NULL);
	snprintf(root, sizeof(root), "%s", d.root);
	tf_write_ds(&d, "cpu", "cpu", false);
	snprintf(base, sizeof(base), "%s/base", d.root);
	snprintf(orig, sizeof(orig), "%s/orig", d.root);
	snprintf(out, sizeof(out), "%s/out", d.root);
	snprintf(out2, sizeof(out2), "%s/out2", d.root);
	snprintf(path, sizeof(path), "%s/blobs", d.root);
	T_CHECK(mkdir(path, 0755) == 0 && mkdir(orig, 0755) == 0, "mkdir");

	/* a checkpoint with a tokenizer beside it, every file a link into blobs/ */
	tf_opts(&d, &o, 1, &l);
	o.save_dir = base;
	tf_run(&o, &res);
	for (int at = 0; at < 2; at++) {
		const char *dir = at ? base : orig;
		put(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\"}}\n");
		put(dir, "tokenizer_config.json", "{\"bos_token\": \"<s>\"}\n");
		put(dir, "generation_config.json", "{\"eos_token_id\": [1, 2]}\n");
		put(dir, "chat_template.jinja", "{% for m in messages %}{{ m }}{% endfor %}\n");
		put(dir, "tokenizer.model.v3", "sentencepiece v3\n");
	}
	put(base, "README.md", "# a model card\n");
	put(base, "tokenizer.model.vx", "not a versioned name\n");
	into_blob(base, "config.json");
	into_blob(base, "model.safetensors");
	for (int i = 0; i < N_CARRIED; i++)
		into_blob(base, carried[i]);

	/* fine-tuned with snapshots and the state, the source changed during the run */
	tf_opts(&d, &o, 3, &l);
	o.init_config = NULL;
	o.model_dir = base;
	o.save_dir = out;
	o.save_every = 1;
	o.save_state = true;
	o.on_step = rewrite_on_step;
	train_loaded_hook = replace_during_load;
	tf_run(&o, &res);
	train_loaded_hook = NULL;
	T_CHECK(l.n == 3, "three steps ran");
	for (int k = 0; k < 3; k++) {
		const char *dir = out;
		if (k)
			snprintf(ck, sizeof(ck), "%s/checkpoint-%d", out, k), dir = ck;
		for (int i = 0; i < N_CARRIED; i++)
			same_regular(orig, dir, carried[i]);
		T_CHECK(!exists(dir, "README.md") && !exists(dir, "tokenizer.model.vx") &&
				!exists(dir, "tokenizer.json.tmp") &&
				!exists(dir, "tokenizer.model"),
			"%s: nothing else carried, no partial copy", dir);
	}
	/* resumed: the checkpoint's own copies are carried on */
	snprintf(ck, sizeof(ck), "%s/checkpoint-1", out);
	tf_opts(&d, &o, 2, &l);
	o.init_config = NULL;
	o.resume_dir = ck;
	o.save_dir = out2;
	tf_run(&o, &res);
	T_CHECK(l.n == 1, "the resumed run ran step 2");
	for (int i = 0; i < N_CARRIED; i++)
		same_regular(orig, out2, carried[i]);

	/* another tokenizer into the same --save directory: written over the files of its
	 * names; the earlier ones it does not carry are left, as is a file of the user's */
	for (int i = 0; i < N_CARRIED; i++) {
		snprintf(path, sizeof(path), "%s/%s", base, carried[i]);
		T_CHECK(unlink(path) == 0, "unlink %s", path);
	}
	put(base, "tokenizer.json", "{\"model\": {\"type\": \"Unigram\"}}\n");
	put(out, "vocab.json", "{\"mine\": 0}\n");
	tf_opts(&d, &o, 7, &l);
	o.init_config = NULL;
	o.model_dir = base;
	o.save_dir = out;
	o.save_every = 3;
	o.save_total_limit = 1;
	tf_run(&o, &res);
	same_regular(base, out, "tokenizer.json");
	for (int i = 1; i < N_CARRIED; i++)
		same_regular(orig, out, carried[i]);
	T_CHECK(exists(out, "vocab.json"), "the user's file is kept");
	T_CHECK(exists(out, "checkpoint-6") && !exists(out, "checkpoint-3") &&
			!exists(out, "checkpoint-2") && !exists(out, "checkpoint-1"),
		"--save-total-limit removes snapshots holding a tokenizer");
	snprintf(ck, sizeof(ck), "%s/checkpoint-6", out);
	same_regular(base, ck, "tokenizer.json");

	/* --init carries nothing and removes nothing */
	tf_opts(&d, &o, 1, &l);
	o.save_dir = out;
	tf_run(&o, &res);
	same_regular(base, out, "tokenizer.json");

	/* a name the save would carry that is not a regular file: refused before step 1 */
	snprintf(path, sizeof(path), "%s/tokenizer_config.json", base);
	T_CHECK(mkdir(path, 0755) == 0, "mkdir %s", path);
	refused(&d, base, out, "tokenizer_config.json", "not a regular file");
	T_CHECK(rmdir(path) == 0 && mkfifo(path, 0644) == 0, "mkfifo %s", path);
	refused(&d, base, out, "tokenizer_config.json", "not a regular file");
	T_CHECK(unlink(path) == 0 && symlink("../blobs/gone", path) == 0, "symlink %s", path);
	refused(&d, base, out, "tokenizer_config.json", "a link to nothing");
	T_CHECK(unlink(path) == 0 && symlink("tokenizer_config.json", path) == 0, "symlink %s",
		path);
	refused(&d, base, out, "tokenizer_config.json", "cannot open it");
	T_CHECK(unlink(path) == 0, "unlink %s", path);

	/* a log written over the --model directory's tokenizer.json: refused */
	tf_opts(&d, &o, 1, &l);
	o.init_config = NULL;
	o.model_dir = base;
	snprintf(path, sizeof(path), "%s/tokenizer.json", base);
	o.log_json_path = path;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EINVAL &&
			strstr(err, "a file a save writes") && strstr(err, "--model"),
		"--log-json over a tokenizer file: %s", err);
	same_regular(base, out, "tokenizer.json"); /* (the same bytes as before) */
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
