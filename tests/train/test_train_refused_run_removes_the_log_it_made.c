/* A --log-json file the run made goes again when the run ends without a line in it: a run
 * refused before step 1 (a decoder layer larger than the device budget) or stopped in its load
 * leaves no file where there was none, and an earlier log byte-identical; a run stopped
 * after its first step keeps the log it made, with that step's line. */
#include <errno.h>

#include "train_fixture.h"

static volatile int stop_now;

static void stop_after_step_1(const struct zinf_train_step *s, void *user)
{
	tf_on_step(s, user);
	if (s->step == 1)
		stop_now = 1;
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
	stop_now = 1;
	o.stop = &stop_now;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EINTR && res.stopped,
		"not stopped: %s", err);
	T_CHECK(l.n == 0, "%d steps ran", l.n);
	T_CHECK(access(log, F_OK) != 0 && errno == ENOENT, "stopped run left %s", log);

	/* stopped after step 1: its line stays */
	tf_opts(&d, &o, 4, &l);
	o.log_json_path = log;
	o.on_step = stop_after_step_1;
	stop_now = 0;
	o.stop = &stop_now;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EINTR && res.stopped,
		"not stopped: %s", err);
	tf_read_all(log, &text, &n);
	T_CHECK(l.n == 1 && strncmp(text, "{\"step\": 1,", 11) == 0 && strchr(text, '\n') &&
			!strchr(text, '\n')[1],
		"stopped run's log is not step 1's line: %s", text);
	free(text);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
