/* A --log-json file the run made goes again when the run ends without a line in it: a run
 * refused before step 1 (a decoder layer larger than the device budget) or stopped in its
 * load leaves no file where there was none (made through a link: the link stays; inside a
 * --save directory the run made: the directory goes too), and an earlier log
 * byte-identical; a run stopped after its first step keeps the log it made, with that
 * step's line. --log-json /dev/stdout where stdout is a file opened for appending
 * appends (the file's earlier lines kept). */
#include <errno.h>
#include <fcntl.h>

#include "train_fixture.h"

static volatile int stop_now;

static void stop_after_step_1(const struct zinf_train_step *s, void *user)
{
	tf_on_step(s, user);
	if (s->step == 1)
		__atomic_store_n(&stop_now, 1, __ATOMIC_RELAXED); /* (as a handler would) */
}

/* A model whose decoder layer (4 MiB of fp32 weights) is more than the 1 MiB device
 * budget of tf_write_ds: refused once the engine is made, after the log is. */
static void write_wide_model(const struct tf_dir *d, char *path, size_t len)
{
	char text[512];
	int n = snprintf(text, sizeof(text),
			 "{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 256,"
			 " \"intermediate_size\": 1024, \"num_hidden_layers\": 1,"
			 " \"num_attention_heads\": 4}\n");

	snprintf(path, len, "%s/wide.json", d->root);
	tf_write_all(path, text, (size_t)n);
}

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char log[160], kept[160], wide[160], err[1024];
	const char earlier[] = "{\"step\": 1, \"loss\": 5.5}\n";
	char *text;
	size_t n;

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	write_wide_model(&d, wide, sizeof(wide));
	snprintf(log, sizeof(log), "%s/log.jsonl", d.root);
	snprintf(kept, sizeof(kept), "%s/kept.jsonl", d.root);

	/* refused before step 1, after the log was made */
	tf_opts(&d, &o, 2, &l);
	o.init_config = wide;
	o.log_json_path = log;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) != 0 && res.bad_input, "not refused: %s",
		err);
	T_CHECK(strstr(err, "device") != NULL, "refused for another reason: %s", err);
	T_CHECK(access(log, F_OK) != 0 && errno == ENOENT, "refused run left %s", log);

	/* through a link to no file yet: the file made goes, the link stays */
	{
		char link[200], target[200], save[200], inside[240];
		struct stat st;

		snprintf(link, sizeof(link), "%s/log.lnk", d.root);
		snprintf(target, sizeof(target), "%s/target.jsonl", d.root);
		T_CHECK(symlink(target, link) == 0, "symlink %s", link);
		o.log_json_path = link;
		T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) != 0, "not refused");
		T_CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode), "the link %s was removed",
			link);
		T_CHECK(access(target, F_OK) != 0, "the file made through the link was left");
		/* inside a --save directory the run made: both go */
		snprintf(save, sizeof(save), "%s/newsave", d.root);
		snprintf(inside, sizeof(inside), "%s/log.jsonl", save);
		o.save_dir = save;
		o.log_json_path = inside;
		T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) != 0, "not refused");
		T_CHECK(access(save, F_OK) != 0, "the --save directory made was left: %s", save);
		o.save_dir = NULL;
	}

	/* an earlier log is left as it was */
	tf_write_all(kept, earlier, sizeof(earlier) - 1);
	o.log_json_path = kept;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) != 0, "not refused");
	tf_read_all(kept, &text, &n);
	T_CHECK(n == sizeof(earlier) - 1 && !memcmp(text, earlier, n), "earlier log changed");
	free(text);

	/* stopped in its load: no step, no file */
	tf_opts(&d, &o, 2, &l);
	o.log_json_path = log;
	__atomic_store_n(&stop_now, 1, __ATOMIC_RELAXED);
	o.stop = &stop_now;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EINTR && res.stopped,
		"not stopped: %s", err);
	T_CHECK(l.n == 0, "%d steps ran", l.n);
	T_CHECK(access(log, F_OK) != 0 && errno == ENOENT, "stopped run left %s", log);

	/* stopped after step 1: its line stays */
	tf_opts(&d, &o, 4, &l);
	o.log_json_path = log;
	o.on_step = stop_after_step_1;
	__atomic_store_n(&stop_now, 0, __ATOMIC_RELAXED);
	o.stop = &stop_now;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EINTR && res.stopped,
		"not stopped: %s", err);
	tf_read_all(log, &text, &n);
	T_CHECK(l.n == 1 && strncmp(text, "{\"step\": 1,", 11) == 0 && strchr(text, '\n') &&
			!strchr(text, '\n')[1],
		"stopped run's log is not step 1's line: %s", text);
	free(text);

	/* --log-json /dev/stdout, stdout a file opened for appending (a shell's >>) */
	{
		char app[200];
		int fd, saved = dup(STDOUT_FILENO);

		snprintf(app, sizeof(app), "%s/app.log", d.root);
		tf_write_all(app, "old\n", 4);
		fd = open(app, O_WRONLY | O_APPEND);
		T_CHECK(fd >= 0 && saved >= 0 && dup2(fd, STDOUT_FILENO) == STDOUT_FILENO, "dup2");
		close(fd);
		tf_opts(&d, &o, 2, &l);
		o.log_json_path = "/dev/stdout";
		T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == 0, "train: %s", err);
		T_CHECK(dup2(saved, STDOUT_FILENO) == STDOUT_FILENO, "dup2 back");
		close(saved);
		tf_read_all(app, &text, &n);
		T_CHECK(strncmp(text, "old\n{\"step\": 1,", 15) == 0 &&
				strstr(text, "{\"step\": 2,"),
			"stdout's file lost its line or lacks the log: %s", text);
		free(text);
	}
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
