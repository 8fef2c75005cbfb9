/* zinf train stopped by SIGINT or SIGTERM (Ctrl-C, a scheduler's stop) ends the step in
 * progress and stops before the next, then ends by the signal (a shell's 130, 143: it
 * cleans up first, then raises the signal again with its default action), one line naming
 * the step it stopped before, every step before it in --log-json, no --save directory
 * (nothing saved, the directory it made removed) and its NVMe run directory removed; the
 * next run on the same NVMe path starts.
 *
 * Usage: test_train_stops_cleanly_on_a_signal ZINF_BIN */
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include "train_fixture.h"

static const char *zinf_bin;
static struct tf_dir d;

static int count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	int n = 0, c;

	if (!f)
		return 0;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static int entries(const char *dir)
{
	DIR *dd = opendir(dir);
	struct dirent *de;
	int n = 0;

	T_CHECK(dd != NULL, "opendir %s", dir);
	while ((de = readdir(dd)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(dd);
	return n;
}

/* A long run, sent sig once its log has a step; checks what it left. */
static void stop_with(int sig)
{
	char cmd[2048], log[300], save[300], errpath[300], *text;
	const char *at;
	unsigned long before;
	size_t len;
	int status;
	pid_t pid;

	snprintf(log, sizeof(log), "%s/log-%d.jsonl", d.root, sig);
	snprintf(save, sizeof(save), "%s/save-%d", d.root, sig);
	snprintf(errpath, sizeof(errpath), "%s/stderr-%d.txt", d.root, sig);
	snprintf(cmd, sizeof(cmd),
		 "exec '%s' train --init '%s' --config '%s' --data '%s' --data-format text "
		 "--seq-len 16 --steps 1000000 -q --log-json '%s' --save '%s' >/dev/null 2>'%s'",
		 zinf_bin, d.model, d.ds, d.data, log, save, errpath);
	pid = tf_spawn(cmd);
	while (count_lines(log) < 1) {
		T_CHECK(waitpid(pid, &status, WNOHANG) == 0, "the run ended before a step");
		usleep(1000);
	}
	T_CHECK(entries(d.nvme) > 0, "the run has no NVMe run directory to remove");
	kill(pid, sig);
	T_CHECK(waitpid(pid, &status, 0) == pid, "wait");
	T_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == sig,
		"signal %d: status %#x, expected an end by the signal", sig, status);
	tf_read_all(errpath, &text, &len);
	at = strstr(text, "zinf train: stopped before step ");
	T_CHECK(at && sscanf(at, "zinf train: stopped before step %lu", &before) == 1,
		"signal %d: stderr does not say where it stopped:\n%s", sig, text);
	fprintf(stderr, "signal %d: stopped before step %lu\n", sig, before);
	T_CHECK((unsigned long)count_lines(log) == before - 1,
		"%d steps logged, stopped before %lu", count_lines(log), before);
	free(text);
	T_CHECK(access(save, F_OK) != 0, "%s was made", save);
	T_CHECK(entries(d.nvme) == 0, "signal %d: the NVMe run directory is left", sig);
}

int main(int argc, char **argv)
{
	char cmd[2048];

	T_CHECK(argc == 2, "usage: %s ZINF_BIN", argv[0]);
	zinf_bin = argv[1];
	tf_setup(&d, NULL);
	tf_write_ds(&d, "nvme", "nvme", true);
	stop_with(SIGINT);
	stop_with(SIGTERM);
	/* the next run on the same NVMe path starts */
	snprintf(cmd, sizeof(cmd),
		 "'%s' train --init '%s' --config '%s' --data '%s' --data-format text "
		 "--seq-len 16 --steps 2 -q >/dev/null 2>&1",
		 zinf_bin, d.model, d.ds, d.data);
	T_CHECK(system(cmd) == 0, "the next run failed: %s", cmd);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
