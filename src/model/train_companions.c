/*
 * The files beside a Hugging Face checkpoint's weights that a save carries over: the
 * tokenizer (tokenizer.json, tokenizer.model, ...) and the generation settings
 * (generation_config.json), which save_pretrained and the Trainer write beside the
 * weights, and without which the saved directory does not load as the model it came from
 * (AutoTokenizer, generate()'s stop tokens, an inference server). The run opens them when
 * it starts, through links (a Hugging Face cache's snapshot links to its blobs), and
 * copies each save from the files it opened: a source changed or removed meanwhile does
 * not change what it saves.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"

static const char *const names[TRAIN_COMPANIONS] = {
	"generation_config.json",
	"tokenizer.json",
	"tokenizer_config.json",
	"special_tokens_map.json",
	"tokenizer.model",
	"added_tokens.json",
	"vocab.json",
	"merges.txt",
	"chat_template.jinja",
	"chat_template.json",
};

bool train_companion_name(const char *name)
{
	for (int i = 0; i < TRAIN_COMPANIONS; i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

void train_companions_init(struct train_companions *c)
{
	for (int i = 0; i < TRAIN_COMPANIONS; i++)
		c->fd[i] = -1;
}

void train_companions_close(struct train_companions *c)
{
	for (int i = 0; i < TRAIN_COMPANIONS; i++) {
		if (c->fd[i] >= 0)
			close(c->fd[i]);
		c->fd[i] = -1;
	}
}

int train_companions_open(struct train_companions *c, const char *dir, const char *flag, char *err,
			  size_t errlen)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (dfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s: cannot open: %s", dir, flag, strerror(errno));
		return rc;
	}
	for (int i = 0; i < TRAIN_COMPANIONS && !rc; i++) {
		struct stat st;
		int fd = openat(dfd, names[i], O_RDONLY | O_CLOEXEC | O_NONBLOCK);

		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0 || fstat(fd, &st) != 0)
			rc = -errno;
		else if (!S_ISREG(st.st_mode))
			rc = -EINVAL;
		if (rc) {
			snprintf(err, errlen,
				 "%s/%s: %s: --save copies it beside the saved model, but %s", dir,
				 names[i], flag,
				 rc == -EINVAL ? "it is not a regular file" : strerror(-rc));
			if (fd >= 0)
				close(fd);
			break;
		}
		c->fd[i] = fd;
	}
	close(dfd);
	if (rc)
		train_companions_close(c);
	return rc;
}

/* src (from offset 0) into the new file dst, durably: 0 or -errno. */
static int copy_fd(int src, int dst)
{
	char buf[1 << 16];
	off_t at = 0;

	for (;;) {
		ssize_t n = pread(src, buf, sizeof(buf), at);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		for (ssize_t done = 0; done < n;) {
			ssize_t w = write(dst, buf + done, (size_t)(n - done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return -errno;
			done += w;
		}
		at += n;
	}
	return fsync(dst) ? -errno : 0;
}

int train_companions_copy(const struct train_companions *c, const char *dir, char *err,
			  size_t errlen)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
	const char *failed = NULL;

	if (dfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot open: %s", dir, strerror(errno));
		return rc;
	}
	for (int i = 0; i < TRAIN_COMPANIONS && !rc; i++) {
		char tmp[64];
		int fd;

		if (c->fd[i] < 0)
			continue;
		/* NAME.tmp, then renamed: a save cut short never leaves a part of one */
		snprintf(tmp, sizeof(tmp), "%s.tmp", names[i]);
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0)
			rc = -errno;
		if (!rc)
			rc = copy_fd(c->fd[i], fd);
		if (fd >= 0 && close(fd) && !rc)
			rc = -errno;
		if (!rc && renameat(dfd, tmp, dfd, names[i]))
			rc = -errno;
		if (rc)
			failed = names[i];
	}
	close(dfd);
	if (rc)
		snprintf(err, errlen, "%s/%s: cannot write it: %s", dir, failed, strerror(-rc));
	return rc;
}
