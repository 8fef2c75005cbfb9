/* A zinf train process killed (SIGKILL) while it writes its final save into a directory
 * that holds an earlier complete save leaves that earlier save whole: the same bytes in
 * every file (model and optimizer state in shards, index files, config.json,
 * zinf_state.json) and no other, and it still resumes. The final save is written into
 * DIR/final.partial and moved in only once complete; the next run into DIR removes the
 * final.partial the killed one left and ends with the files of an uninterrupted run, the
 * earlier save's shards and index files (superseded by single files) removed. A run
 * killed once its save is complete (DIR/final.ready, while it is moved in; and stopped
 * again after one more file moved) has it moved in by the next run that reads DIR
 * (--resume DIR here; a run saving into DIR does it too): then DIR holds the
 * uninterrupted run's files and no other. A final.partial holding
 * a file zinf did not write is refused on one line, and kept.
 *
 * Usage: test_train_killed_final_save_keeps_the_earlier_save ZINF_BIN */
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "train_fixture.h"

static const char *zinf_bin;
static struct tf_dir d;

/* `zinf train ... --steps steps extra` (stdout and stderr to /dev/null), as a shell
 * command line; --init unless extra resumes. */
static void command(char *buf, size_t len, int steps, const char *extra)
{
	bool resumes = strstr(extra, "--resume") != NULL;

	snprintf(buf, len,
		 "exec '%s' train %s%s%s --config '%s' --data '%s' --data-format text "
		 "--seq-len 16 --seed 7 -q --steps %d --set zinf.remove_stale_run_dir=true %s "
		 ">/dev/null 2>&1",
		 zinf_bin, resumes ? "" : "--init '", resumes ? "" : d.model, resumes ? "" : "'",
		 d.ds, d.data, steps, extra);
}

static int run(int steps, const char *extra)
{
	char cmd[2048];
	int status;

	command(cmd, sizeof(cmd), steps, extra);
	status = system(cmd);
	T_CHECK(WIFEXITED(status), "%s: did not exit", cmd);
	return WEXITSTATUS(status);
}

static pid_t start(int steps, const char *extra)
{
	char cmd[2048];

	command(cmd, sizeof(cmd), steps, extra);
	return tf_spawn(cmd);
}

static bool exists(const char *dir, const char *name)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

/* Every regular file of ref is in dir with the same bytes, and dir holds no other
 * (the lock file and final.* aside). */
static void same_dir(const char *ref, const char *dir)
{
	const char *both[2] = {ref, dir};

	for (int k = 0; k < 2; k++) {
		DIR *dd = opendir(both[k]);
		struct dirent *de;

		T_CHECK(dd != NULL, "opendir %s", both[k]);
		while ((de = readdir(dd))) {
			char a[600], b[600];
			struct stat st;
			if (de->d_name[0] == '.' || !strncmp(de->d_name, "final.", 6))
				continue;
			snprintf(a, sizeof(a), "%s/%s", both[k], de->d_name);
			snprintf(b, sizeof(b), "%s/%s", both[1 - k], de->d_name);
			T_CHECK(lstat(a, &st) == 0 && S_ISREG(st.st_mode), "%s: not a file", a);
			T_CHECK(access(b, F_OK) == 0, "%s is in %s, not in %s", de->d_name, both[k],
				both[1 - k]);
			if (k == 0)
				tf_same_file(a, b);
		}
		closedir(dd);
	}
}

/* How many entries of dir have names containing part. */
static int count_named(const char *dir, const char *part)
{
	DIR *dd = opendir(dir);
	struct dirent *de;
	int n = 0;

	T_CHECK(dd != NULL, "opendir %s", dir);
	while ((de = readdir(dd)))
		n += strstr(de->d_name, part) != NULL;
	closedir(dd);
	return n;
}

static void copy_dir(const char *from, const char *to)
{
	char cmd[1300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -a '%s' '%s'", to, from, to);
	T_CHECK(system(cmd) == 0, "%s", cmd);
}

/* Start the later run into a copy of the earlier save, kill it once dir/name exists; true
 * when dir/name is still there (the kill landed while it was). */
static bool kill_when(const char *earlier, const char *save, const char *name)
{
	char path[400], extra[700];
	int status;
	pid_t pid;

	copy_dir(earlier, save);
	snprintf(path, sizeof(path), "%s/%s", save, name);
	snprintf(extra, sizeof(extra), "--save '%s' --save-state", save);
	pid = start(4, extra);
	while (access(path, F_OK) != 0 && waitpid(pid, &status, WNOHANG) == 0)
		usleep(50);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return access(path, F_OK) == 0;
}

int main(int argc, char **argv)
{
	char earlier[300], whole[300], save[300], extra[1400], partial[400];
	bool landed = false;

	T_CHECK(argc == 2, "usage: %s ZINF_BIN", argv[0]);
	zinf_bin = argv[1];
	tf_setup(&d, NULL);
	tf_write_ds(&d, "nvme", "nvme", true);

	/* the earlier save: 2 steps, model and optimizer state in shards */
	snprintf(earlier, sizeof(earlier), "%s/earlier", d.root);
	snprintf(extra, sizeof(extra), "--save '%s' --save-state --save-shard-size 40000", earlier);
	T_CHECK(run(2, extra) == 0, "the earlier run failed");
	T_CHECK(exists(earlier, "model.safetensors.index.json") &&
			exists(earlier, "optimizer.safetensors.index.json") &&
			exists(earlier, "zinf_state.json") &&
			count_named(earlier, "model-0000") >= 2 &&
			count_named(earlier, "optimizer-0000") >= 2,
		"the earlier save is not sharded, or has no state");
	/* the uninterrupted later run: 4 steps, single files */
	snprintf(whole, sizeof(whole), "%s/whole", d.root);
	snprintf(extra, sizeof(extra), "--save '%s' --save-state", whole);
	T_CHECK(run(4, extra) == 0, "the uninterrupted run failed");

	/* the later run into a copy of the earlier save, killed as soon as its final save
	 * starts (tried until a kill lands inside it) */
	for (int i = 0; i < 8 && !landed; i++) {
		snprintf(save, sizeof(save), "%s/killed-%d", d.root, i);
		snprintf(partial, sizeof(partial), "%s/final.partial", save);
		landed = kill_when(earlier, save, "final.partial");
		fprintf(stderr, "try %d: the kill landed %s the final save\n", i,
			landed ? "inside" : "outside");
		if (!landed) {
			/* it finished: the later save in place of the earlier one */
			same_dir(whole, save);
			continue;
		}
		same_dir(earlier, save);
		snprintf(extra, sizeof(extra), "--resume '%s'", save);
		T_CHECK(run(3, extra) == 0, "%s: the earlier save does not resume", save);
	}
	T_CHECK(landed, "no kill landed inside the final save in 8 tries");

	/* killed while the complete save is moved in: the next run moves it in */
	landed = false;
	for (int i = 0; i < 20 && !landed; i++) {
		char moving[300];
		snprintf(moving, sizeof(moving), "%s/moving-%d", d.root, i);
		landed = kill_when(earlier, moving, "final.ready");
		fprintf(stderr, "try %d: the kill landed %s the move\n", i,
			landed ? "inside" : "outside");
		T_CHECK(landed || !exists(moving, "final.partial"), "%s: killed before", moving);
		if (landed) {
			/* and stopped again right after moving the model in (a copy), or right
			 * after moving the last file, the state (another copy) */
			char cmd[2400], one[320], all[320];
			snprintf(one, sizeof(one), "%s-one", moving);
			snprintf(all, sizeof(all), "%s-all", moving);
			snprintf(
				cmd, sizeof(cmd),
				"cp -a '%s' '%s' && cp -a '%s' '%s' && cd '%s/final.ready' && "
				"{ [ ! -e model.safetensors ] || mv model.safetensors ..; } && "
				"cd '%s/final.ready' && for f in *; do [ \"$f\" = zinf_files.txt ] || "
				"mv \"$f\" ..; done",
				moving, one, moving, all, one, all);
			T_CHECK(system(cmd) == 0, "%s", cmd);
			T_CHECK(exists(all, "zinf_state.json"), "%s: no state moved in", all);
			for (int k = 0; k < 3; k++) {
				const char *dir = k == 0 ? moving : k == 1 ? one : all;
				snprintf(extra, sizeof(extra), "--resume '%s'", dir);
				T_CHECK(run(5, extra) == 0, "%s: does not resume", dir);
				T_CHECK(!exists(dir, "final.ready") && !exists(dir, "final.done"),
					"%s: the move is left", dir);
				same_dir(whole, dir);
			}
		}
		same_dir(whole, moving);
	}
	T_CHECK(landed, "no kill landed inside the move in 20 tries");

	/* going on into the same directory: the partial one removed, the later save's
	 * files, the earlier save's shards and index files gone */
	snprintf(extra, sizeof(extra), "--save '%s' --save-state", save);
	T_CHECK(run(4, extra) == 0, "the run into %s after the kill failed", save);
	T_CHECK(!exists(save, "final.partial"), "%s is left", partial);
	T_CHECK(exists(whole, "model.safetensors") && exists(whole, "optimizer.safetensors"),
		"the later save is not in single files");
	same_dir(whole, save); /* the earlier save's shards and index files gone */

	/* a final.partial holding a file zinf did not write is refused, and kept */
	T_CHECK(mkdir(partial, 0755) == 0, "mkdir %s", partial);
	snprintf(extra, sizeof(extra), "%s/notes.txt", partial);
	tf_write_all(extra, "mine", 4);
	snprintf(extra, sizeof(extra), "--save '%s' --save-state", save);
	T_CHECK(run(4, extra) == 2, "a final.partial with a foreign file is not refused");
	T_CHECK(exists(partial, "notes.txt"), "the foreign file is gone");
	same_dir(whole, save);

	/* a committed save whose list names a file that is nowhere is refused before
	 * anything is removed */
	snprintf(
		extra, sizeof(extra),
		"rm -r '%s' && mkdir '%s/final.ready' && "
		"printf 'model-00001-of-00002.safetensors\\nconfig.json\\n' >'%s/final.ready/zinf_files.txt'",
		partial, save, save);
	T_CHECK(system(extra) == 0, "%s", extra);
	snprintf(extra, sizeof(extra), "--save '%s' --save-state", save);
	T_CHECK(run(4, extra) == 2, "a final.ready naming missing files is not refused");
	same_dir(whole, save);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
