/* A --log-json write that fails (here the file-size limit, RLIMIT_FSIZE, as a full disk
 * would) fails the run on one line naming the file and the error, and leaves the log
 * holding whole lines only: the line cut short is taken back. A log that is not a
 * regular file (/dev/null) is written as it is, not emptied first (that was refused). */
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>

#include "train_fixture.h"

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	struct rlimit lim = {.rlim_cur = 700, .rlim_max = RLIM_INFINITY};
	char log[160], err[1024], *text;
	size_t n;

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	tf_opts(&d, &o, 4, &l);
	o.log_json_path = "/dev/null";
	tf_run(&o, &res);
	T_CHECK(l.n == 4, "with --log-json /dev/null: %d steps", l.n);

	/* a line is about 500 bytes: the second crosses the limit */
	snprintf(log, sizeof(log), "%s/log.jsonl", d.root);
	tf_opts(&d, &o, 4, &l);
	o.log_json_path = log;
	signal(SIGXFSZ, SIG_IGN); /* the write then fails with EFBIG */
	T_CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == -EFBIG && !res.bad_input,
		"a failed log write did not fail the run: %s", err);
	lim.rlim_cur = RLIM_INFINITY;
	T_CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
	T_CHECK(strstr(err, log) && strstr(err, "--log-json: write failed: File too large") &&
			!strchr(err, '\n'),
		"not one line naming the log and the error: %s", err);
	tf_read_all(log, &text, &n);
	T_CHECK(n > 0 && n < 700 && text[n - 1] == '\n' && strchr(text, '\n') == text + n - 1 &&
			strncmp(text, "{\"step\": 1,", 11) == 0,
		"the log is not step 1's whole line alone (%zu bytes): %s", n, text);
	free(text);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
