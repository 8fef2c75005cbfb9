/*
 * zinf train --log-json: one JSON object per line per optimizer step (docs/train.md
 * lists the keys). Non-finite numbers are written as null, so every line parses.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "train_internal.h"

/* v in the fewest digits that read back as v: a log compares bit for bit (a resumed
 * run's losses against the uninterrupted run's). */
static void put_num(FILE *f, const char *key, double v)
{
	char text[32];

	if (!isfinite(v))
		fprintf(f, "\"%s\": null", key);
	else
		fprintf(f, "\"%s\": %s", key, zinf_format_double(v, text, sizeof(text)));
}

/* The line of s, into f (a memory stream). */
static void format_line(FILE *f, const struct zinf_train_step *s)
{
	fprintf(f, "{\"step\": %" PRIu64 ", \"steps\": %" PRIu64 ", ", s->step, s->steps);
	put_num(f, "loss", s->loss);
	fputs(", ", f);
	put_num(f, "lr", s->lr);
	fputs(", ", f);
	put_num(f, "grad_norm", s->grad_norm);
	fprintf(f, ", \"tokens\": %" PRIu64 ", ", s->tokens);
	put_num(f, "step_seconds", s->step_seconds);
	fputs(", ", f);
	put_num(f, "fwd_bwd_seconds", s->fwd_bwd_seconds);
	fputs(", ", f);
	put_num(f, "optimizer_seconds", s->optimizer_seconds);
	fputs(", ", f);
	put_num(f, "wait_seconds", s->wait_seconds);
	fputs(", ", f);
	put_num(f, "tokens_per_second", s->tokens_per_second);
	fprintf(f,
		", \"peak_device_bytes\": %" PRIu64 ", \"peak_pinned_bytes\": %" PRIu64
		", \"device_limit_bytes\": %" PRIu64 ", \"pinned_limit_bytes\": %" PRIu64
		", \"bytes\": {\"nvme_read\": %" PRIu64 ", \"nvme_write\": %" PRIu64
		", \"h2d\": %" PRIu64 ", \"d2h\": %" PRIu64 "}, \"skipped\": %s",
		s->peak_device_bytes, s->peak_pinned_bytes, s->device_limit_bytes,
		s->pinned_limit_bytes, s->nvme_read_bytes, s->nvme_write_bytes, s->h2d_bytes,
		s->d2h_bytes, s->skipped ? "true" : "false");
	if (s->has_eval_before) {
		fputs(", ", f);
		put_num(f, "eval_loss_before", s->eval_loss_before);
	}
	if (s->has_eval) {
		fputs(", ", f);
		put_num(f, "eval_loss", s->eval_loss);
	}
	if (s->saved)
		fputs(", \"saved\": true", f);
	fputs("}\n", f);
}

int train_log_write(FILE *f, const struct zinf_train_step *s)
{
	char *line = NULL;
	size_t len = 0, done = 0;
	FILE *m = open_memstream(&line, &len);
	int fd = fileno(f), rc = 0;
	off_t at;

	if (!m)
		return -ENOMEM;
	format_line(m, s);
	if (fclose(m)) {
		free(line);
		return -ENOMEM;
	}
	/* the whole line or none: a regular file cut back to where it ended (a full disk
	 * would otherwise leave half a line that no JSON reader takes) */
	at = lseek(fd, 0, SEEK_CUR);
	while (done < len && !rc) {
		ssize_t n = write(fd, line + done, len - done);
		if (n > 0)
			done += (size_t)n;
		else if (n < 0 && errno != EINTR)
			rc = -errno;
		else if (n == 0)
			rc = -EIO;
	}
	if (rc && done && at >= 0 && ftruncate(fd, at) == 0)
		lseek(fd, at, SEEK_SET);
	free(line);
	return rc;
}
