/* A zinf train process killed (SIGKILL) at any moment while it saves a checkpoint with
 * its state after every step leaves only checkpoints that are complete or refused: every
 * checkpoint-<step> under its final name has its zinf_state.json and resumes, and a
 * directory without a complete save (the final save cut short, a .partial one) has no
 * state a resume would take. Six kills, each after a given snapshot at a point of the next
 * step and its save. The killed run's
 * NVMe run directory is emptied by the next run without zinf.remove_stale_run_dir (its
 * lock file names a process of this machine's boot, gone), with a warning naming it.
 * After each kill the run goes on from its newest checkpoint into the same directory (the
 * .partial snapshot it left is removed) and ends with the uninterrupted run's files,
 * byte for byte.
 *
 * Usage: test_train_killed_save_leaves_resumable_checkpoints ZINF_BIN */
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "train_fixture.h"

#define STEPS 40

static const char *zinf_bin;
static struct tf_dir d;

/* The common flags of a run in this test. */
static void base_args(char *buf, size_t len)
{
	snprintf(buf, len, "--config '%s' --data '%s' --data-format text --seq-len 16 --seed 7 -q",
		 d.ds, d.data);
}

static pid_t start(const char *save)
{
	char cmd[2048], base[1024];
	pid_t pid;

	base_args(base, sizeof(base));
	snprintf(cmd, sizeof(cmd),
		 "exec '%s' train --init '%s' %s --steps %d --save '%s' --save-every 1 "
		 "--save-state >/dev/null 2>&1",
		 zinf_bin, d.model, base, STEPS, save);
	pid = tf_spawn(cmd);
	return pid;
}

/* `zinf train --resume dir --steps steps` exits with this status (stderr to errfile).
 * No run here sets zinf.remove_stale_run_dir: a killed run's NVMe run directory is
 * emptied by the next, on this machine. */
static int resume_as(const char *dir, int steps, const char *errfile)
{
	char cmd[2048], base[1024];
	int status;

	base_args(base, sizeof(base));
	snprintf(cmd, sizeof(cmd), "'%s' train --resume '%s' %s --steps %d >/dev/null 2>'%s'",
		 zinf_bin, dir, base, steps, errfile);
	status = system(cmd);
	T_CHECK(WIFEXITED(status), "%s: did not exit", cmd);
	return WEXITSTATUS(status);
}

static int resume(const char *dir, int steps)
{
	return resume_as(dir, steps, "/dev/null");
}

static bool has_state(const char *dir)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/zinf_state.json", dir);
	return access(path, F_OK) == 0;
}

/* The files of a save in a and b are the same, byte for byte. */
static void same_save(const char *a, const char *b)
{
	static const char *const names[] = {"model.safetensors", "optimizer.safetensors",
					    "zinf_state.json"};

	for (int i = 0; i < 3; i++) {
		char pa[600], pb[600], *x, *y;
		size_t nx, ny;
		snprintf(pa, sizeof(pa), "%s/%s", a, names[i]);
		snprintf(pb, sizeof(pb), "%s/%s", b, names[i]);
		tf_read_all(pa, &x, &nx);
		tf_read_all(pb, &y, &ny);
		T_CHECK(nx == ny && !memcmp(x, y, nx), "%s differs from %s", pb, pa);
		free(x);
		free(y);
	}
}

/* Go on from save/checkpoint-<newest> into save itself, as after a crash: the
 * checkpoint-<newest + 1>.partial the killed run left is removed, and the run ends with
 * the uninterrupted run's files. */
static void resume_into(const char *save, int newest, const char *whole)
{
	char cmd[2600], base[1024], ck[600];
	int status;

	base_args(base, sizeof(base));
	snprintf(ck, sizeof(ck), "%s/checkpoint-%d", save, newest);
	snprintf(cmd, sizeof(cmd),
		 "'%s' train --resume '%s' %s --steps %d --save '%s' --save-every 1 --save-state "
		 ">/dev/null 2>&1",
		 zinf_bin, ck, base, STEPS, save);
	status = system(cmd);
	T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s failed", cmd);
	same_save(whole, save);
}

/* After a kill: the newest and the oldest complete snapshots resume; every snapshot
 * under its final name has a state; the final save resumes if it has one. Returns the
 * newest complete snapshot's step (0: none). */
static int check(const char *save, int *complete)
{
	DIR *dir = opendir(save);
	struct dirent *de;
	int newest = 0, oldest = 0, partial = 0, k;
	char path[600];

	*complete = 0;
	if (!dir)
		return 0; /* killed before the first save */
	while ((de = readdir(dir))) {
		char extra;
		int fields = sscanf(de->d_name, "checkpoint-%d%c", &k, &extra);
		partial += fields == 2;
		if (fields != 1)
			continue; /* checkpoint-<k>.partial and the final save's files */
		snprintf(path, sizeof(path), "%s/%s", save, de->d_name);
		T_CHECK(has_state(path), "%s: a final name without its state", path);
		(*complete)++;
		newest = k > newest ? k : newest;
		oldest = !oldest || k < oldest ? k : oldest;
	}
	closedir(dir);
	for (int i = 0; i < 2 && newest; i++) {
		k = i ? oldest : newest;
		snprintf(path, sizeof(path), "%s/checkpoint-%d", save, k);
		T_CHECK(resume(path, k + 1) == 0, "%s does not resume", path);
	}
	fprintf(stderr, "%s: %d complete snapshots, %d partial, final save %s\n", save, *complete,
		partial, has_state(save) ? "complete" : "absent or cut short");
	if (has_state(save))
		T_CHECK(resume(save, STEPS + 1) == 0, "the final save %s does not resume", save);
	else
		T_CHECK(resume(save, STEPS + 1) == 2, "%s without a state is not refused", save);
	return newest;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_for(double seconds)
{
	struct timespec ts = {.tv_sec = (time_t)seconds,
			      .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};

	nanosleep(&ts, NULL);
}

/* Wait (polling) until save/checkpoint-<k><suffix> exists; when it appeared. The run
 * must still be running (it is killed after). */
static double wait_path(const char *save, pid_t pid, int k, const char *suffix)
{
	char path[300];
	double t0 = now();

	snprintf(path, sizeof(path), "%s/checkpoint-%d%s", save, k, suffix);
	while (access(path, F_OK) != 0) {
		T_CHECK(waitpid(pid, NULL, WNOHANG) == 0 || access(path, F_OK) == 0,
			"the run ended before %s", path);
		T_CHECK(now() - t0 < 300, "no %s in 300 s", path);
		sleep_for(0.0002);
	}
	return now();
}

static double wait_snapshot(const char *save, pid_t pid, int k)
{
	return wait_path(save, pid, k, "");
}

int main(int argc, char **argv)
{
	char save[256], first[300], whole[256];
	int newest, status, complete;
	double t0, t_first, step;
	bool taken_over = false, partial_left = false;
	pid_t pid;

	T_CHECK(argc == 2, "usage: %s ZINF_BIN", argv[0]);
	zinf_bin = argv[1];
	tf_setup(&d, NULL);
	tf_write_ds(&d, "nvme", "nvme", true);

	/* an uninterrupted run: how long a step and its save take */
	snprintf(save, sizeof(save), "%s/whole", d.root);
	pid = start(save);
	t0 = now();
	t_first = wait_snapshot(save, pid, 1);
	T_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		"the uninterrupted run failed");
	step = (now() - t_first) / (STEPS - 1);
	fprintf(stderr, "uninterrupted: first save after %.3f s, then %.4f s a step and save\n",
		t_first - t0, step);
	check(save, &complete);
	T_CHECK(complete == STEPS - 1 && has_state(save), "%d snapshots", complete);
	snprintf(whole, sizeof(whole), "%s", save);

	for (int i = 0; i < 6; i++) {
		/* once checkpoint-<2 + 6i> is there, at a point of the next step and save:
		 * progress, not time, places the kills (a slower machine moves them less) */
		snprintf(save, sizeof(save), "%s/killed-%d", d.root, i);
		pid = start(save);
		wait_snapshot(save, pid, 2 + 6 * i);
		sleep_for(step * (0.2 + 0.3 * (i % 3)));
		kill(pid, SIGKILL);
		T_CHECK(waitpid(pid, &status, 0) == pid, "wait");
		snprintf(first, sizeof(first), "%s/checkpoint-1", save);
		if (!taken_over) {
			/* without the key, the killed run's directory is emptied, naming it */
			char errfile[300], *text, want[64];
			size_t len;
			snprintf(errfile, sizeof(errfile), "%s/stderr.txt", d.root);
			T_CHECK(resume_as(first, 2, errfile) == 0, "the killed run's directory "
								   "was not taken over");
			taken_over = true;
			tf_read_all(errfile, &text, &len);
			snprintf(want, sizeof(want), "left by process %ld", (long)pid);
			T_CHECK(strstr(text, "emptying run directory") && strstr(text, want),
				"no warning naming process %ld: %s", (long)pid, text);
			free(text);
		}
		newest = check(save, &complete);
		T_CHECK(complete > 0 && newest > 0, "kill %d: no checkpoint", i);
		if (newest < STEPS)
			resume_into(save, newest, whole);
	}
	/* killed while a snapshot is being written: its .partial stays, under no final
	 * name, and going on in place removes it (tried until a kill lands there) */
	for (int i = 0; i < 5 && !partial_left; i++) {
		char partial[320];
		snprintf(save, sizeof(save), "%s/mid-save-%d", d.root, i);
		pid = start(save);
		wait_path(save, pid, 10 + i, ".partial");
		kill(pid, SIGKILL);
		T_CHECK(waitpid(pid, &status, 0) == pid, "wait");
		snprintf(partial, sizeof(partial), "%s/checkpoint-%d.partial", save, 10 + i);
		partial_left = access(partial, F_OK) == 0;
		newest = check(save, &complete);
		resume_into(save, newest, whole);
		T_CHECK(access(partial, F_OK) != 0, "%s is left after going on", partial);
	}
	T_CHECK(partial_left, "no kill landed inside a save in 5 tries");
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
