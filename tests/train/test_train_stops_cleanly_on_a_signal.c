/* zinf train stopped by SIGINT or SIGTERM (Ctrl-C, a scheduler's stop) stops at the next
 * module it would fetch (a step in its forward and backward is dropped; between steps it
 * stops before the next), then ends by the signal (a shell's 130, 143: it cleans up first,
 * then raises the signal again with its default action), one line naming the step it
 * stopped before, every step before it in --log-json, no --save directory (nothing saved,
 * the directory it made removed; with snapshots, none after the stop) and its NVMe run
 * directory removed; the next run on the same NVMe path starts. A signal sent well
 * inside a long step (400 micro-batches) stops it there, one inside a long evaluation
 * after a step (600 batches) stops after that step's report, one as a 300-layer model's load begins stops that load, and one of a
 * few sent to a run whose steps are mostly their optimizer update (in zinf_step) stops
 * that update, and one sent as a --save-every snapshot begins (of the model, and of the
 * model with its state) drops that snapshot (its .partial removed) after logging its
 * step, the earlier snapshot kept whole: the line says so. A SIGINT the caller ignores
 * (a script's `zinf train &`, `trap '' INT`) stays ignored: the run goes on to its end, exit 0.
 *
 * Usage: test_train_stops_cleanly_on_a_signal ZINF_BIN */
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include "train_fixture.h"

static const char *zinf_bin;
static struct tf_dir d;
static pid_t running; /* the run under test, until reaped */

/* A failed check exits at once: a run of a million steps must not outlive the test. */
static void kill_running(void)
{
	if (running > 0)
		kill(running, SIGKILL);
}

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

enum when { BETWEEN, MID_STEP, MID_EVAL, LOADING, UPDATE, SNAPSHOT, SNAPSHOT_STATE };

static useconds_t update_delay; /* UPDATE: after the first step's line */

static char deep_model[300]; /* 300 layers: its load takes a while */

static void write_deep_model(void)
{
	FILE *f;

	snprintf(deep_model, sizeof(deep_model), "%s/deep300.json", d.root);
	f = fopen(deep_model, "w");
	T_CHECK(f != NULL, "write %s", deep_model);
	fprintf(f, "{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 32,"
		   " \"intermediate_size\": 64, \"num_hidden_layers\": 300,"
		   " \"num_attention_heads\": 4, \"max_position_embeddings\": 64}\n");
	fclose(f);
}

/* A long run, sent sig once its log has a step (MID_STEP: 50 ms later, inside the next
 * step's forward and backward; MID_EVAL: 150 ms later, inside the evaluation of 600 batches
 * after the next step; LOADING: as soon as its NVMe run directory appears, in the load of
 * a 300-layer model; UPDATE: update_delay later, in a run whose steps are mostly their
 * optimizer update; SNAPSHOT, SNAPSHOT_STATE: as soon as the 300-layer model's second
 * --save-every snapshot (the model; the model and its state) is writing its
 * safetensors under checkpoint-2.partial); checks what it left.
 * Returns whether it stopped where it was meant to when that can miss (UPDATE: in an
 * update; SNAPSHOT: in the snapshot, not after it). */
static bool stop_with(int sig, enum when when)
{
	static int serial; /* fresh files for each run */
	static const char *const extra[] = {
		[BETWEEN] = "",
		/* the update before the log line, not overlapping the next step (a slow
		 * machine's background update would be hit 50 ms on) */
		[MID_STEP] =
			"--set gradient_accumulation_steps=400 --set zinf.overlap_optimizer=false",
		[MID_EVAL] = "--eval-every 1 --eval-batches 600 --eval-data",
		[LOADING] = "",
		[UPDATE] = "--set zinf.overlap_optimizer=false --set "
			   "zero_optimization.sub_group_size=1000 --set "
			   "gradient_accumulation_steps=1",
		/* the limit bounds the disk a run that goes on uses */
		[SNAPSHOT] = "--save-every 1 --save-total-limit 2",
		[SNAPSHOT_STATE] = "--save-every 1 --save-total-limit 2 --save-state"};
	char cmd[2048], log[300], save[300], errpath[300], writing[360], done[340], *text;
	const char *at,
		*in_update =
			"in an optimizer update (asked to stop; the update is cut short, nothing saved)\n";
	bool hit = false, is_snap = when == SNAPSHOT || when == SNAPSHOT_STATE;
	unsigned long before;
	size_t len;
	int status;
	pid_t pid;

	serial++;
	snprintf(log, sizeof(log), "%s/log-%d-%d.jsonl", d.root, sig, serial);
	snprintf(save, sizeof(save), "%s/save-%d-%d", d.root, sig, serial);
	snprintf(errpath, sizeof(errpath), "%s/stderr-%d-%d.txt", d.root, sig, serial);
	snprintf(cmd, sizeof(cmd),
		 "exec '%s' train --init '%s' --config '%s' --data '%s' --data-format text "
		 "--seq-len 16 --steps 1000000 -q --log-json '%s' --save '%s' %s %s >/dev/null "
		 "2>'%s'",
		 zinf_bin, when == LOADING || is_snap ? deep_model : d.model, d.ds, d.data, log,
		 save, extra[when], when == MID_EVAL ? d.data : "", errpath);
	/* the snapshot's file being written: it exists only while the snapshot is */
	snprintf(writing, sizeof(writing), "%s/checkpoint-2.partial/%s.safetensors.tmp", save,
		 when == SNAPSHOT_STATE ? "optimizer" : "model");
	snprintf(done, sizeof(done), "%s/checkpoint-2", save);
	pid = running = tf_spawn(cmd);
	for (int waited = 0;
	     when == LOADING ? entries(d.nvme) == 0
	     : is_snap	     ? access(writing, F_OK) != 0
				 /* missed (descheduled): signal anyway, a miss is retried */
				 && access(done, F_OK) != 0 && waited < 30000
		       : count_lines(log) < 1;
	     waited++) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			running = 0; /* reaped: its pid may be reused */
		T_CHECK(w == 0, "the run ended before a step");
		usleep(1000);
	}
	T_CHECK(entries(d.nvme) > 0, "the run has no NVMe run directory to remove");
	if (when == MID_STEP || when == MID_EVAL) /* the evaluation: after step 2 */
		usleep(when == MID_EVAL ? 150000 : 50000);
	else if (when == UPDATE)
		usleep(update_delay);
	kill(pid, sig);
	T_CHECK(waitpid(pid, &status, 0) == pid, "wait");
	running = 0;
	T_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == sig,
		"signal %d: status %#x, expected an end by the signal", sig, status);
	tf_read_all(errpath, &text, &len);
	/* stderr is a file: the handler's line is there, with no empty line before it */
	T_CHECK(strstr(text, "zinf train: stopping at the next module") && text[0] != '\n' &&
			!strstr(text, "\n\n"),
		"signal %d: an empty line on stderr, or no stop line:\n%s", sig, text);
	if (when == LOADING) { /* nothing trained, nothing logged */
		at = strstr(text, "zinf train: stopped while loading, before module ");
		T_CHECK(at && strstr(at, "(asked to stop; nothing trained or saved)\n"),
			"signal %d in the load: not stopped there:\n%s", sig, text);
		before = 1;
	} else if (when == MID_EVAL) { /* the step before it is done and logged */
		at = strstr(text, "zinf train: stopped after step ");
		T_CHECK(at && sscanf(at, "zinf train: stopped after step %lu", &before) == 1 &&
				strstr(at, "in the evaluation after it (asked to stop)\n"),
			"signal %d in an evaluation: not stopped there:\n%s", sig, text);
		before++;
	} else if (is_snap && (at = strstr(text, "zinf train: stopped after step "))) {
		/* step N (2, or later when the signal was late) done and logged, its snapshot
		 * dropped */
		T_CHECK(sscanf(at, "zinf train: stopped after step %lu", &before) == 1 &&
				strstr(at, "in its snapshot (asked to stop; the snapshot is "
					   "dropped, earlier ones stay)\n"),
			"signal %d in a snapshot: not stopped there:\n%s", sig, text);
		hit = true;
		before++;
	} else {
		at = strstr(text, "zinf train: stopped before step ");
		T_CHECK(at && sscanf(at, "zinf train: stopped before step %lu", &before) == 1,
			"signal %d: stderr does not say where it stopped:\n%s", sig, text);
		T_CHECK(when != MID_STEP ||
				strstr(at,
				       "in its forward and backward (asked to stop; the step is dropped)\n"),
			"signal %d in a step's forward and backward: not stopped there:\n%s", sig,
			text);
		hit = when == UPDATE && strstr(at, in_update) != NULL;
	}
	fprintf(stderr, "signal %d: stopped before step %lu\n", sig, before);
	T_CHECK(strchr(at, '\n') && strchr(at, '\n')[1] == '\0',
		"signal %d: more than the one line after the stop:\n%s", sig, text);
	T_CHECK((unsigned long)count_lines(log) == before - 1,
		"%d steps logged, stopped before %lu", count_lines(log), before);
	free(text);
	if (is_snap) { /* nothing half-written or after the stop; the snapshot before whole */
		snprintf(done, sizeof(done), "%s/checkpoint-%lu.partial", save, before - 1);
		T_CHECK(access(done, F_OK) != 0, "%s is left", done);
		snprintf(done, sizeof(done), "%s/checkpoint-%lu", save, hit ? before - 1 : before);
		T_CHECK(access(done, F_OK) != 0, "%s was saved after the stop", done);
		snprintf(done, sizeof(done), "%s/checkpoint-%lu/%s", save, before - 2,
			 when == SNAPSHOT_STATE ? "zinf_state.json" : "config.json");
		T_CHECK(!hit || before < 3 || access(done, F_OK) == 0, "%s: not whole", done);
		/* the directory keeps its snapshots, so it stays, lock file included */
		snprintf(done, sizeof(done), "%s/.zinf-save.lock", save);
		T_CHECK(!hit || before < 3 || access(done, F_OK) == 0, "%s: removed", done);
	} else {
		T_CHECK(access(save, F_OK) != 0, "%s was made", save);
	}
	T_CHECK(entries(d.nvme) == 0, "signal %d: the NVMe run directory is left", sig);
	return hit;
}

static void ignored_signal_stays_ignored(void)
{
	char cmd[2048], log[300];
	int status, before;
	pid_t pid;

	snprintf(log, sizeof(log), "%s/log-ignored.jsonl", d.root);
	snprintf(cmd, sizeof(cmd),
		 "trap '' INT; exec '%s' train --init '%s' --config '%s' --data '%s' "
		 "--data-format text --seq-len 16 --steps 300 -q --log-json '%s' >/dev/null 2>&1",
		 zinf_bin, d.model, d.ds, d.data, log);
	pid = running = tf_spawn(cmd);
	while (count_lines(log) < 1) {
		T_CHECK(waitpid(pid, &status, WNOHANG) == 0, "the run ended before a step");
		usleep(1000);
	}
	before = count_lines(log);
	kill(pid, SIGINT);
	T_CHECK(waitpid(pid, &status, 0) == pid, "wait");
	running = 0;
	T_CHECK(before < 300, "the run had ended before the signal");
	T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		"an ignored SIGINT sent after step %d: status %#x, expected exit 0", before,
		status);
	T_CHECK(count_lines(log) == 300, "%d of 300 steps logged", count_lines(log));
}

int main(int argc, char **argv)
{
	char cmd[2048];

	T_CHECK(argc == 2, "usage: %s ZINF_BIN", argv[0]);
	zinf_bin = argv[1];
	atexit(kill_running);
	tf_setup(&d, NULL);
	tf_write_ds(&d, "nvme", "nvme", true);
	stop_with(SIGINT, BETWEEN);
	stop_with(SIGTERM, BETWEEN);
	ignored_signal_stays_ignored();
	stop_with(SIGTERM, MID_STEP);
	stop_with(SIGINT, MID_EVAL);
	write_deep_model();
	stop_with(SIGTERM, LOADING);
	/* steps of ~2 ms of compute and ~6 ms of update (60 NVMe sub-groups, in zinf_step):
	 * a signal lands in an update within a few tries */
	bool hit = false;
	for (int i = 0; i < 16 && !hit; i++) {
		update_delay = (useconds_t)(i * 1777 % 9000);
		hit = stop_with(SIGTERM, UPDATE);
	}
	T_CHECK(hit, "16 signals, none stopped an optimizer update");
	/* a 300-layer model's snapshot, without and with its state: a signal as it begins
	 * lands in it */
	for (int w = SNAPSHOT; w <= SNAPSHOT_STATE; w++) {
		hit = false;
		for (int i = 0; i < 4 && !hit; i++)
			hit = stop_with(SIGTERM, (enum when)w);
		T_CHECK(hit, "4 signals, none stopped a snapshot (%s)",
			w == SNAPSHOT ? "the model" : "with its state");
	}
	/* the next run on the same NVMe path starts */
	snprintf(cmd, sizeof(cmd),
		 "'%s' train --init '%s' --config '%s' --data '%s' --data-format text "
		 "--seq-len 16 --steps 2 -q >/dev/null 2>&1",
		 zinf_bin, d.model, d.ds, d.data);
	T_CHECK(system(cmd) == 0, "the next run failed: %s", cmd);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
