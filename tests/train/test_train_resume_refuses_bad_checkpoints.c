/* zinf train --resume refuses, before step 1 and on one line naming the file, field or
 * flag, a checkpoint it cannot continue bit-identically: one without a training state
 * (saved without --save-state), a damaged or truncated file (size and CRC32C in
 * zinf_state.json), a malformed zinf_state.json (not JSON, another format or version, a
 * field missing or out of range, any byte changed without its manifest_crc32c, the file a
 * FIFO or a directory), an optimizer state missing a tensor, and a run that is
 * not the same (--seq-len, --seed, --shuffle, other data of another or the same length,
 * a numerics config key, --steps not beyond the checkpoint's step), a file list that
 * leaves out a file the resume reads, names a FIFO or a name with a newline, progress that
 * does not add up to the step, and flags that do not go together (--resume with
 * --model, --save-state without --save). Every refusal leaves the checkpoint as it was
 * and creates no --save directory. */
#include <dirent.h>
#include <errno.h>

#include "train_fixture.h"
#include "zinf/crc32c.h"
#include "zinf/error.h"

static void shell(const char *fmt, const char *a, const char *b, const char *c)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), fmt, a, b, c);
	T_CHECK(system(cmd) == 0, "%s", cmd);
}

/* A copy of the good checkpoint to damage. */
static void copy_ck(const char *good, const char *to)
{
	shell("rm -rf '%s' && cp -r '%s' '%s'", to, good, to);
}

/* Replace from with to in dir's zinf_state.json, and seal it again as a save does (the
 * last member, manifest_crc32c, is the CRC32C of the bytes before it followed by "\n}"),
 * so that the check a case is about is reached; with raw the old seal stays. */
static void edit_state_as(const char *dir, const char *from, const char *to, bool raw)
{
	static const char tag[] = ",\n\t\"manifest_crc32c\":\t\"";
	char path[512], *text, *at, *out, *seal;
	size_t len;

	snprintf(path, sizeof(path), "%s/zinf_state.json", dir);
	tf_read_all(path, &text, &len);
	at = strstr(text, from);
	T_CHECK(at != NULL, "%s not in %s", from, path);
	out = malloc(len + strlen(to) + 64);
	memcpy(out, text, (size_t)(at - text));
	strcpy(out + (at - text), to);
	strcat(out, at + strlen(from));
	seal = strstr(out, tag);
	if (!raw && seal) {
		size_t body = (size_t)(seal - out);
		uint32_t crc = zinf_crc32c(zinf_crc32c(0, out, body), "\n}", 2);
		sprintf(seal, "%s%08x\"\n}\n", tag, crc);
	}
	tf_write_all(path, out, strlen(out));
	free(text);
	free(out);
}

static void edit_state(const char *dir, const char *from, const char *to)
{
	edit_state_as(dir, from, to, false);
}

/* One edit of the manifest and what its refusal names. */
struct edit {
	const char *from, *to;
	bool raw; /* keep the old seal */
	int code;
	const char *want1, *want2;
};

static const struct edit edits[] = {
	{"{", "[", false, ZINF_EJSON, "zinf_state.json", "not valid JSON"},
	{"\"optimizer_steps\":\t2", "\"optimizer_steps\":\t1", true, ZINF_EFORMAT,
	 "zinf_state.json", "manifest_crc32c"},
	{"\"version\":\t1", "\"version\": 1", true, ZINF_EFORMAT, "zinf_state.json",
	 "manifest_crc32c"}, /* whitespace too */
	{"\"version\":\t1", "\"version\":\t2", false, ZINF_EFORMAT, "zinf_state.json", "version"},
	{"zinf-train-state", "deepspeed", false, ZINF_EFORMAT, "zinf_state.json", "format"},
	{"\"data\":", "\"datum\":", false, ZINF_EFORMAT, "zinf_state.json", "data:"},
	{"\"seq_len\":\t16", "\"seq_len\":\t-16", false, ZINF_EFORMAT, "zinf_state.json",
	 "data.seq_len"},
	{"\"loss_scale\":\t\"", "\"loss_scale\":\t\"-", false, ZINF_EFORMAT, "zinf_state.json",
	 "optimizer.loss_scale"},
	{"\"crc32c\":\t\"", "\"crc32c\":\t\"x", false, ZINF_EFORMAT, "zinf_state.json", "crc32c"},
	{"\"name\":\t\"config.json\"", "\"name\":\t\"../good/config.json\"", false, ZINF_EFORMAT,
	 "zinf_state.json", "files[0].name"},
	{"\"name\":\t\"config.json\"", "\"name\":\t\"config\\njson\"", false, ZINF_EFORMAT,
	 "files[0].name", NULL},
	/* progress that does not add up to the step */
	{"\"optimizer_steps\":\t2", "\"optimizer_steps\":\t1000", false, ZINF_EFORMAT,
	 "zinf_state.json", "do not add up to step 2"},
	{"\"scaler_iteration\":\t0", "\"scaler_iteration\":\t2", false, ZINF_EFORMAT,
	 "optimizer.scaler_iteration", "without fp16"},
};

/* Every file of dir (names, sizes, contents) folded into one number. */
static void dir_sum(const char *dir, uint64_t *sum)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	T_CHECK(d != NULL, "open %s", dir);
	*sum = 0;
	while ((de = readdir(d))) {
		char path[512], *x;
		size_t n;
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		tf_read_all(path, &x, &n);
		/* order-independent: a sum over files of (name, content) checksums */
		*sum += (uint64_t)zinf_crc32c(zinf_crc32c(0, de->d_name, strlen(de->d_name)), x,
					      n) +
			((uint64_t)n << 32);
		free(x);
	}
	closedir(d);
}

struct refusal {
	struct tf_dir *d;
	char save[256]; /* the --save directory each refused run names */
	char log[256];	/* the --log-json file each refused run names: an earlier run's */
};

/* Change one byte of the file at path: byte at of the first occurrence of near to to, or
 * with near NULL, flip a bit of the middle byte (in the optimizer state: tensor data). */
static void change_byte(const char *path, const char *near, size_t at, char to)
{
	char *x, *p;
	size_t n;

	tf_read_all(path, &x, &n);
	if (near) {
		p = memmem(x, n, near, strlen(near));
		T_CHECK(p && at < strlen(near), "%s: no %s in it", path, near);
		p[at] = to;
	} else {
		x[n / 2] ^= 0x10;
	}
	tf_write_all(path, x, n);
	free(x);
}

/* o is refused with code (0: any) and one line holding want1 and want2; no step ran, no
 * save directory appeared, and an earlier run's --log-json file is as it was. */
static void refused(struct refusal *rf, struct zinf_train_opts *o, struct tf_losses *l, int code,
		    const char *want1, const char *want2)
{
	static const char earlier[] = "{\"step\": 1, \"an earlier run\": true}\n";
	struct zinf_train_result res;
	struct stat st;
	char err[1024], *log;
	size_t n;
	int rc;

	tf_write_all(rf->log, earlier, sizeof(earlier) - 1);
	o->log_json_path = rf->log;
	rc = zinf_train_run(o, &res, err, sizeof(err));
	o->log_json_path = NULL;
	tf_read_all(rf->log, &log, &n);
	T_CHECK(n == sizeof(earlier) - 1 && !memcmp(log, earlier, n),
		"%s: the earlier --log-json file was changed (%zu bytes)", want1, n);
	free(log);

	T_CHECK(rc != 0 && (code == 0 || rc == code), "%s: rc %d (want %d): %s", want1, rc, code,
		err);
	T_CHECK(strstr(err, want1) && (!want2 || strstr(err, want2)) && !strchr(err, '\n'),
		"one line naming %s%s%s: %s", want1, want2 ? " and " : "", want2 ? want2 : "", err);
	T_CHECK(res.bad_input, "%s: counted as bad input", want1);
	T_CHECK(l->n == 0, "%s: %d steps ran", want1, l->n);
	T_CHECK(stat(rf->save, &st) != 0, "%s: %s was created", want1, rf->save);
}

/* Options resuming from ck for 4 steps, the way the checkpoint's run went. */
static void resume_opts(struct refusal *rf, struct zinf_train_opts *o, struct tf_losses *l,
			const char *ck)
{
	tf_opts(rf->d, o, 4, l);
	o->init_config = NULL;
	o->resume_dir = ck;
	o->save_dir = rf->save;
	o->save_state = true;
}

int main(void)
{
	struct tf_dir d;
	struct refusal rf = {.d = &d};
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char good[256], plain[256], bad[256], path[512], other_data[256];
	uint64_t before_sum, after_sum;
	const char *set_lr[] = {"optimizer.params.lr=0.001"};

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	snprintf(good, sizeof(good), "%s/good", d.root);
	snprintf(plain, sizeof(plain), "%s/plain", d.root);
	snprintf(bad, sizeof(bad), "%s/bad", d.root);
	snprintf(rf.save, sizeof(rf.save), "%s/never", d.root);
	snprintf(rf.log, sizeof(rf.log), "%s/earlier.jsonl", d.root);

	/* the checkpoints: 2 steps with and without the state */
	tf_opts(&d, &o, 2, &l);
	o.save_dir = good;
	o.save_state = true;
	tf_run(&o, &res);
	o.save_dir = plain;
	o.save_state = false;
	tf_run(&o, &res);
	dir_sum(good, &before_sum);

	resume_opts(&rf, &o, &l, plain);
	refused(&rf, &o, &l, -ENOENT, "zinf_state.json", "--save-state");

	/* damaged files */
	copy_ck(good, bad);
	snprintf(path, sizeof(path), "%s/optimizer.safetensors", bad);
	change_byte(path, NULL, 0, 0);
	resume_opts(&rf, &o, &l, bad);
	refused(&rf, &o, &l, ZINF_EFORMAT, "optimizer.safetensors", "CRC32C");
	/* a byte of a tensor's name: the state then lacks a tensor, and the CRC says why */
	copy_ck(good, bad);
	change_byte(path, ".exp_avg\"", 7, 'h');
	refused(&rf, &o, &l, ZINF_EFORMAT, "optimizer.safetensors", "CRC32C");
	/* a byte of the header that no parse looks at: the CRC covers the header too */
	copy_ck(good, bad);
	change_byte(path, "\"format\":\"pt\"", 11, 'T');
	refused(&rf, &o, &l, ZINF_EFORMAT, "optimizer.safetensors", "CRC32C");
	copy_ck(good, bad);
	snprintf(path, sizeof(path), "%s/model.safetensors", bad);
	T_CHECK(truncate(path, 1000) == 0, "truncate %s", path);
	refused(&rf, &o, &l, ZINF_EFORMAT, "model.safetensors", "bytes");

	/* malformed state: one edit of the manifest each (sealed again unless raw) */
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		const struct edit *ed = &edits[i];
		copy_ck(good, bad);
		edit_state_as(bad, ed->from, ed->to, ed->raw);
		refused(&rf, &o, &l, ed->code, ed->want1, ed->want2);
	}
	/* the manifest itself a FIFO (never waited on) or a directory */
	copy_ck(good, bad);
	snprintf(path, sizeof(path), "%s/zinf_state.json", bad);
	T_CHECK(unlink(path) == 0 && mkfifo(path, 0644) == 0, "mkfifo %s", path);
	refused(&rf, &o, &l, ZINF_EFORMAT, "zinf_state.json", "not a regular file");
	T_CHECK(unlink(path) == 0 && mkdir(path, 0755) == 0, "mkdir %s", path);
	refused(&rf, &o, &l, ZINF_EFORMAT, "zinf_state.json", "not a regular file");

	/* an optimizer state without a tensor the model has (its checksum made to match) */
	copy_ck(good, bad);
	{
		char *x, *at, old_crc[16], new_crc[16];
		size_t n;
		uint32_t crc;
		snprintf(path, sizeof(path), "%s/optimizer.safetensors", bad);
		tf_read_all(path, &x, &n);
		crc = zinf_crc32c(0, x, n);
		snprintf(old_crc, sizeof(old_crc), "%08x", crc);
		at = memmem(x, n, "model.norm.weight.exp_avg_sq", 28);
		T_CHECK(at != NULL, "tensor name in the header");
		at[0] = 'M'; /* renamed: the model's tensor is missing */
		tf_write_all(path, x, n);
		snprintf(new_crc, sizeof(new_crc), "%08x", zinf_crc32c(0, x, n));
		free(x);
		edit_state(bad, old_crc, new_crc);
	}
	refused(&rf, &o, &l, ZINF_EFORMAT, "model.norm.weight.exp_avg_sq", "missing");

	/* a list that leaves out a file the resume reads (an extra file in its place) */
	copy_ck(good, bad);
	{
		char *x, from[256], to[256], extra[512];
		size_t n;
		snprintf(path, sizeof(path), "%s/model.safetensors", bad);
		tf_read_all(path, &x, &n);
		snprintf(from, sizeof(from),
			 "\"name\":\t\"model.safetensors\",\n\t\t\t\"bytes\":\t%zu,\n\t\t\t"
			 "\"crc32c\":\t\"%08x\"",
			 n, zinf_crc32c(0, x, n));
		free(x);
		snprintf(extra, sizeof(extra), "%s/extra.bin", bad);
		tf_write_all(extra, "x\n", 2);
		snprintf(to, sizeof(to),
			 "\"name\":\t\"extra.bin\",\n\t\t\t\"bytes\":\t2,\n\t\t\t"
			 "\"crc32c\":\t\"%08x\"",
			 zinf_crc32c(0, "x\n", 2));
		edit_state(bad, from, to);
	}
	refused(&rf, &o, &l, ZINF_EFORMAT, "model.safetensors", "listed 0 times");
	/* a name that is not a regular file, or not a plain name */
	copy_ck(good, bad);
	snprintf(path, sizeof(path), "%s/fifo", bad);
	T_CHECK(mkfifo(path, 0644) == 0, "mkfifo %s", path);
	edit_state(bad, "\"name\":\t\"config.json\"", "\"name\":\t\"fifo\"");
	refused(&rf, &o, &l, ZINF_EFORMAT, "fifo", "not a regular file");

	/* not the same run */
	resume_opts(&rf, &o, &l, good);
	o.seq_len = 8;
	refused(&rf, &o, &l, ZINF_ECONFIG, "--seq-len", NULL);
	resume_opts(&rf, &o, &l, good);
	o.seed = 8;
	refused(&rf, &o, &l, ZINF_ECONFIG, "--seed", NULL);
	resume_opts(&rf, &o, &l, good);
	o.shuffle = true;
	refused(&rf, &o, &l, ZINF_ECONFIG, "--shuffle", NULL);
	resume_opts(&rf, &o, &l, good);
	snprintf(other_data, sizeof(other_data), "%s/other.txt", d.root);
	shell("cp '%s' '%s' && echo one more line >> '%s'", d.data, other_data, other_data);
	o.data_path = other_data;
	refused(&rf, &o, &l, ZINF_ECONFIG, "tokens", "not the same data");
	resume_opts(&rf, &o, &l, good);
	/* the same length, one byte changed */
	shell("cp '%s' '%s' && printf Q | dd of='%s' bs=1 seek=100 conv=notrunc 2>/dev/null",
	      d.data, other_data, other_data);
	o.data_path = other_data;
	refused(&rf, &o, &l, ZINF_ECONFIG, "sample CRC32C", "not the same data");
	resume_opts(&rf, &o, &l, good);
	o.config_sets = set_lr;
	o.n_config_sets = 1;
	refused(&rf, &o, &l, ZINF_ECONFIG, "optimizer.params.lr", "--model");
	resume_opts(&rf, &o, &l, good);
	o.steps = 2;
	refused(&rf, &o, &l, -EINVAL, "--steps 2", "at step 2");

	/* flags */
	resume_opts(&rf, &o, &l, good);
	o.model_dir = plain;
	refused(&rf, &o, &l, -EINVAL, "--resume", "exactly one");
	resume_opts(&rf, &o, &l, good);
	o.save_dir = NULL;
	refused(&rf, &o, &l, -EINVAL, "--save-state", "--save");

	/* a seed beyond 2^53 is kept exactly */
	{
		char big[256];
		snprintf(big, sizeof(big), "%s/bigseed", d.root);
		tf_opts(&d, &o, 2, &l);
		o.seed = 18446744073709551557ull;
		o.save_dir = big;
		o.save_state = true;
		tf_run(&o, &res);
		resume_opts(&rf, &o, &l, big);
		o.seed = 18446744073709551557ull;
		o.save_dir = NULL;
		o.save_state = false;
		tf_run(&o, &res);
		T_CHECK(l.n == 2, "a 64-bit seed resumes (%d steps)", l.n);
	}

	/* the checkpoint itself is untouched, and still resumes */
	dir_sum(good, &after_sum);
	T_CHECK(after_sum == before_sum, "the checkpoint changed");
	resume_opts(&rf, &o, &l, good);
	tf_run(&o, &res);
	T_CHECK(res.steps == 2 && l.n == 2, "resumed for steps 3 and 4 (%llu)",
		(unsigned long long)res.steps);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
