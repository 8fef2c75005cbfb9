/* --save-total-limit N keeps the newest N checkpoint-<step> directories of the --save
 * directory up to the run's step after each snapshot and removes the older ones, with or
 * without the training state (sharded too), counting snapshots an earlier run left there.
 * Left alone: a newer snapshot of an earlier, longer run (never counted, so the run's own
 * stays); a checkpoint-<step> holding a file zinf did not write (one named like a shard
 * but not one, a directory named like a file), or no config.json; a checkpoint-<step>
 * that is a link to a directory elsewhere (whose files stay); names that are not
 * checkpoint-<digits>; the snapshot the run loaded from (--model, the directory of
 * --init's config.json, --resume unless the run saves its state, when its own snapshots
 * resume in its place and it goes), with a warning the first time, info lines after. Each save and each removal is an info line of
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

/* The lines of the level (tag "info: " or "warn: ") that say what. */
static int lines_with(const char *tag, const char *what)
{
	int n = 0;

	for (const char *line = info; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *hit = strstr(line, what);
		n += !strncmp(line, tag, strlen(tag)) && hit && hit < line + len;
		line += len + (end != NULL);
	}
	return n;
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

	/* runs from a snapshot there: the one loaded from is kept (a warning the first time,
	 * an info line after), the others beyond the newest two go; a --resume source goes
	 * too when the run's own snapshots carry the state */
	static const struct {
		const char *flag, *src, *kept_as; /* --model, --init, --resume */
		uint64_t steps, every;
		bool state;
		const char *newest[2], *gone[2];
	} runs[] = {
		{"--model",
		 "6",
		 "checkpoint-6/model.safetensors",
		 15,
		 12,
		 false,
		 {"checkpoint-12", "checkpoint-8"},
		 {NULL, NULL}},
		{"--init's file",
		 "8/config.json",
		 "checkpoint-8/model.safetensors.index.json",
		 27,
		 24,
		 false,
		 {"checkpoint-24", "checkpoint-12"},
		 {"checkpoint-6", NULL}},
		{"--resume",
		 "8",
		 "checkpoint-8/zinf_state.json",
		 40,
		 18,
		 false,
		 {"checkpoint-36", "checkpoint-24"},
		 {"checkpoint-18", "checkpoint-12"}},
		{"--resume",
		 "8",
		 NULL,
		 60,
		 50,
		 true,
		 {"checkpoint-50", "checkpoint-36"},
		 {"checkpoint-24", "checkpoint-8"}},
	};
	for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
		char src[300], what[200];
		info[0] = 0;
		tf_opts(&d, &o, runs[r].steps, &l);
		snprintf(src, sizeof(src), "%s/checkpoint-%s", save, runs[r].src);
		o.init_config = runs[r].flag[2] == 'i' ? src : NULL;
		o.model_dir = runs[r].flag[2] == 'm' ? src : NULL;
		o.resume_dir = runs[r].flag[2] == 'r' ? src : NULL;
		o.save_dir = save;
		o.save_every = runs[r].every;
		o.save_total_limit = 2;
		o.save_state = runs[r].state;
		tf_run(&o, &res);
		T_CHECK(exists(save, runs[r].newest[0]) && exists(save, runs[r].newest[1]),
			"%s: the newest two (%s, %s) are kept", runs[r].flag, runs[r].newest[0],
			runs[r].newest[1]);
		for (int g = 0; g < 2; g++)
			T_CHECK(!runs[r].gone[g] || !exists(save, runs[r].gone[g]),
				"%s: %s is not removed", runs[r].flag, runs[r].gone[g]);
		if (!runs[r].kept_as)
			continue;
		snprintf(what, sizeof(what),
			 "--save-total-limit: kept, this run loaded from it (%s)", runs[r].flag);
		/* a warning the first time, info lines after (the --resume run rotates twice) */
		T_CHECK(exists(save, runs[r].kept_as) && lines_with("warn: ", what) == 1 &&
				lines_with("info: ", what) ==
					(int)((runs[r].steps - 1) / runs[r].every) - 1,
			"%s: the snapshot the run loaded from is removed, or not said so once:\n%s",
			runs[r].flag, info);
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
