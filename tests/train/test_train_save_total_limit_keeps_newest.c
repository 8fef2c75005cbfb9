/* --save-total-limit N keeps the newest N checkpoint-<step> directories of the --save
 * directory up to the run's step after each snapshot and removes the older ones, with or
 * without the training state (sharded too), counting snapshots an earlier run left there.
 * Left alone: a newer snapshot of an earlier, longer run (never counted, so the run's own
 * stays); a checkpoint-<step> holding a file zinf did not write (one named like a shard
 * but not one, a directory named like a file), or no config.json; a checkpoint-<step>
 * that is a link to a directory elsewhere (whose files stay); names that are not
 * checkpoint-<digits>; the snapshot the run loaded from (--model, or the directory of
 * --init's config.json), with a warning. Each save and each removal is an info line of
 * the log. Without
 * --save-every it is refused on one line before step 1 (0
 * is refused by the CLI: test_train_cli_rejects_bad_input). */
#include <errno.h>

#include "train_fixture.h"
#include "zinf/log.h"

/* the warning and info lines of a run, one after another, each after its level */
static char info[16384];

static void take_info(enum zinf_log_level level, const char *msg, void *user)
{
	const char *tag = level == ZINF_LOG_WARN   ? "warn: "
			  : level == ZINF_LOG_INFO ? "info: "
						   : NULL;

	(void)user;
	if (tag && strlen(info) + strlen(tag) + strlen(msg) + 2 < sizeof(info)) {
		strcat(info, tag);
		strcat(info, msg);
		strcat(info, "\n");
	}
}

/* A line of the level (tag "info: " or "warn: ") names save/name and says what. */
static bool logged(const char *tag, const char *save, const char *name, const char *what)
{
	char line[600];

	snprintf(line, sizeof(line), "%s%s/%s: %s", tag, save, name, what);
	return strstr(info, line) != NULL;
}

static bool exists(const char *root, const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	return stat(path, &st) == 0;
}

static void touch(const char *root, const char *name)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	f = fopen(path, "w");
	T_CHECK(f && fputs("x\n", f) >= 0 && fclose(f) == 0, "write %s", path);
}

/* Directory root/name with files a and b in it (NULL: none). */
static void make_dir(const char *root, const char *name, const char *a, const char *b)
{
	char dir[512];

	snprintf(dir, sizeof(dir), "%s/%s", root, name);
	T_CHECK(mkdir(dir, 0755) == 0, "mkdir %s", dir);
	if (a)
		touch(dir, a);
	if (b)
		touch(dir, b);
}

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char save[256], dir[300], elsewhere[256], err[1024];

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	snprintf(save, sizeof(save), "%s/out", d.root);
	T_CHECK(mkdir(save, 0755) == 0, "mkdir %s", save);
	/* left by someone else: an older snapshot with a note in it, an older plain one
	 * (sharded), names that are not snapshots, older snapshots that are not all zinf's
	 * (a look-alike shard name, a directory named like a file, no config.json), an
	 * earlier and longer run's newest snapshot */
	make_dir(save, "checkpoint-1", "config.json", "notes.txt");
	make_dir(save, "checkpoint-0", "config.json", "model-00001-of-00002.safetensors");
	make_dir(save, "checkpoint-x", NULL, NULL);
	make_dir(save, "checkpoint-3.partial", NULL, NULL);
	make_dir(save, "checkpoint-0001", "config.json", "model-best.safetensors");
	make_dir(save, "checkpoint-00", "config.json", NULL);
	make_dir(save, "checkpoint-00/model.safetensors", NULL, NULL);
	make_dir(save, "checkpoint-000", "model.safetensors", NULL);
	make_dir(save, "checkpoint-900", "config.json", NULL);
	/* an old snapshot a run then saved into directly (--save DIR/checkpoint-000000) */
	make_dir(save, "checkpoint-000000", "config.json", ".zinf-save.lock");
	touch(save, "checkpoint-000000/notes.txt"); /* the lock is said, whatever else is there */
	/* a link to a directory elsewhere, holding files named as zinf names them */
	snprintf(elsewhere, sizeof(elsewhere), "%s/precious", d.root);
	make_dir(d.root, "precious", "config.json", "model.safetensors");
	snprintf(dir, sizeof(dir), "%s/checkpoint-00000", save);
	T_CHECK(symlink(elsewhere, dir) == 0, "symlink %s", dir);

	zinf_log_set_level(ZINF_LOG_INFO);
	zinf_log_set_callback(take_info, NULL);
	for (int state = 0; state < 2; state++) {
		info[0] = 0; /* this pass's lines */
		tf_opts(&d, &o, 7, &l);
		o.save_dir = save;
		o.save_every = 2;
		o.save_total_limit = 2;
		o.save_state = state;
		o.save_max_shard_bytes = state ? 100000 : 0; /* shards and indexes */
		if (state) {
			/* the first run's snapshots are there: go on to later steps */
			o.steps = 11;
			o.save_every = 8; /* 4 would write over the first run's checkpoint-4 */
		}
		tf_run(&o, &res);
		if (!state) {
			T_CHECK(exists(save, "checkpoint-4") && exists(save, "checkpoint-6"),
				"the newest two are kept");
			T_CHECK(!exists(save, "checkpoint-2"), "checkpoint-2 is removed");
			T_CHECK(logged("info: ", save, "checkpoint-6", "saved, step 6") &&
					logged("info: ", save, "checkpoint-2",
					       "removed (--save-total-limit 2") &&
					!logged("info: ", save, "checkpoint-4", "removed") &&
					logged("info: ", d.root, "out", "saved, step 7"),
				"the saves and removals are not logged at info:\n%s", info);
		} else {
			T_CHECK(exists(save, "checkpoint-8") && exists(save, "checkpoint-6"),
				"the newest two of both runs are kept");
			T_CHECK(!exists(save, "checkpoint-4"),
				"the first run's checkpoint-4 is removed");
			T_CHECK(exists(save, "checkpoint-8/zinf_state.json") &&
					exists(save,
					       "checkpoint-8/optimizer.safetensors.index.json"),
				"checkpoint-8 has its sharded state");
		}
		T_CHECK(!exists(save, "checkpoint-0"), "the old plain snapshot is removed");
		T_CHECK(exists(save, "checkpoint-1/notes.txt") &&
				exists(save, "checkpoint-1/config.json"),
			"a snapshot with a foreign file is kept whole");
		T_CHECK(exists(save, "checkpoint-x") && exists(save, "checkpoint-3.partial"),
			"names that are not snapshots are left alone");
		T_CHECK(exists(save, "checkpoint-0001/model-best.safetensors") &&
				exists(save, "checkpoint-00/model.safetensors") &&
				exists(save, "checkpoint-000/model.safetensors"),
			"snapshots not all zinf's are kept whole");
		T_CHECK(exists(elsewhere, "config.json") && exists(elsewhere, "model.safetensors"),
			"files behind a linked snapshot are left");
		T_CHECK(exists(save, "checkpoint-900"), "an earlier run's newer snapshot is left");
		T_CHECK(exists(save, "checkpoint-000000/config.json") &&
				logged("warn: ", save, "checkpoint-000000",
				       "--save-total-limit: kept, a run saved into it as its --save "
				       "directory"),
			"a snapshot a run saved into is not kept, or not said why:\n%s", info);
		T_CHECK(exists(save, "model.safetensors") ||
				exists(save, "model.safetensors.index.json"),
			"the final save");
	}

	/* a run from a snapshot there (--model), then one from another's config.json
	 * (--init): the snapshot it loaded from is kept, with a warning, the others go */
	for (int from_init = 0; from_init < 2; from_init++) {
		char src[300];
		info[0] = 0;
		tf_opts(&d, &o, from_init ? 27 : 15, &l);
		snprintf(src, sizeof(src), "%s/checkpoint-%s", save,
			 from_init ? "8/config.json" : "6");
		o.init_config = from_init ? src : NULL;
		o.model_dir = from_init ? NULL : src;
		o.save_dir = save;
		o.save_every = from_init ? 24 : 12;
		o.save_total_limit = 2;
		tf_run(&o, &res);
		T_CHECK(exists(save, from_init ? "checkpoint-24" : "checkpoint-12") &&
				exists(save, "checkpoint-8/config.json"),
			"the newest two are kept");
		T_CHECK(exists(save, from_init ? "checkpoint-8/model.safetensors.index.json"
					       : "checkpoint-6/model.safetensors") &&
				logged("warn: ", save, from_init ? "checkpoint-8" : "checkpoint-6",
				       from_init ? "--save-total-limit: kept, the run's --init "
						   "checkpoint"
						 : "--save-total-limit: kept, the run's --model "
						   "checkpoint"),
			"the snapshot the run loaded from is removed, or not said why:\n%s", info);
		T_CHECK(!from_init || !exists(save, "checkpoint-6"),
			"a snapshot the run did not load from is removed");
	}

	tf_opts(&d, &o, 3, &l);
	o.save_dir = save;
	o.save_total_limit = 2;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EINVAL &&
			strstr(err, "--save-total-limit") && strstr(err, "--save-every") &&
			!strchr(err, '\n'),
		"without --save-every: %s", err);
	T_CHECK(l.n == 0, "no step ran");
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
