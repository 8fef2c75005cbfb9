/*
 * The files beside a Hugging Face checkpoint's weights that a save carries over: the
 * tokenizer (tokenizer.json, tokenizer.model, Mistral's tekken.json, ...) and the
 * generation settings (generation_config.json), which save_pretrained and the Trainer
 * write beside the weights, and without which the saved directory does not load as the
 * model it came from (AutoTokenizer, generate()'s stop tokens, an inference server).
 *
 * The run reads them into memory when it starts, through links (a Hugging Face cache's
 * snapshot links to its blobs): every save of the run then writes the same bytes,
 * whatever happens to the source meanwhile. They are small (a large vocabulary's
 * tokenizer.json is tens of MB); one over TRAIN_COMPANION_MAX is refused as not one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors_internal.h"
#include "train_internal.h"
#include "zinf/error.h"

#define TRAIN_COMPANION_MAX (256ull << 20)

static const char *const names[] = {
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
	"tekken.json",
};

/* tokenizer.model.v<digits>, optionally m<digits>: mistral-common's versioned names
 * (Mistral-7B-Instruct-v0.3's tokenizer.model.v3). */
static bool mistral_versioned(const char *name)
{
	static const char prefix[] = "tokenizer.model.v";
	const char *c = name + sizeof(prefix) - 1;

	if (strncmp(name, prefix, sizeof(prefix) - 1) || *c < '0' || *c > '9')
		return false;
	while (*c >= '0' && *c <= '9')
		c++;
	if (*c == 'm' && c[1] >= '0' && c[1] <= '9')
		for (c++; *c >= '0' && *c <= '9';)
			c++;
	return !*c;
}

bool train_companion_name(const char *name)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return true;
	return mistral_versioned(name);
}

void train_companions_free(struct train_companions *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->v[i].name);
		free(c->v[i].data);
	}
	free(c->v);
	memset(c, 0, sizeof(*c));
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct train_companion *)a)->name,
		      ((const struct train_companion *)b)->name);
}

/* dir/name (fd dfd) into a new companion of c; 0, or a negative code with the reason in
 * why. */
static int read_one(struct train_companions *c, int dfd, const char *name, char *why, size_t whylen)
{
	/* O_NONBLOCK: a FIFO would hold the open until a writer came (it is refused below) */
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), rc = 0;
	struct train_companion one = {0};
	struct train_companion *grown;
	struct stat st;

	if (fd < 0) {
		rc = -errno;
		if (errno == ENOENT && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			snprintf(why, whylen, "it is a link to nothing");
		else
			snprintf(why, whylen, "cannot open it: %s", strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		snprintf(why, whylen, "cannot stat it: %s", strerror(-rc));
	} else if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		snprintf(why, whylen, "it is not a regular file");
	} else if ((uint64_t)st.st_size > TRAIN_COMPANION_MAX) {
		rc = -EFBIG;
		snprintf(why, whylen, "it is %lld bytes, more than a tokenizer file's %llu MiB",
			 (long long)st.st_size, TRAIN_COMPANION_MAX >> 20);
	}
	one.len = rc ? 0 : (size_t)st.st_size;
	one.name = rc ? NULL : strdup(name);
	one.data = rc ? NULL : malloc(one.len ? one.len : 1);
	if (!rc && (!one.name || !one.data)) {
		rc = -ENOMEM;
		snprintf(why, whylen, "out of memory for its %zu bytes", one.len);
	}
	if (!rc && (rc = st_pread_full(fd, one.data, one.len, 0)) != 0)
		snprintf(why, whylen, "cannot read it: %s",
			 rc == ZINF_EFORMAT ? "it shrank while read" : strerror(-rc));
	close(fd);
	if (!rc && !(grown = realloc(c->v, (c->n + 1) * sizeof(*grown)))) {
		rc = -ENOMEM;
		snprintf(why, whylen, "out of memory");
	}
	if (rc) {
		free(one.name);
		free(one.data);
		return rc;
	}
	c->v = grown;
	c->v[c->n++] = one;
	return 0;
}

int train_companions_read(struct train_companions *c, const char *dir, const char *flag, char *err,
			  size_t errlen)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char why[200];
	int rc = 0;

	if (!d) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s: cannot list it: %s", dir, flag, strerror(-rc));
		return rc;
	}
	while (!rc && (errno = 0, de = readdir(d)))
		if (train_companion_name(de->d_name) &&
		    (rc = read_one(c, dirfd(d), de->d_name, why, sizeof(why))) != 0)
			snprintf(err, errlen,
				 "%s/%s: %s: --save copies it beside the saved model, but %s", dir,
				 de->d_name, flag, why);
	if (!rc && errno) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s: cannot list it: %s", dir, flag, strerror(-rc));
	}
	closedir(d);
	if (rc)
		train_companions_free(c);
	else if (c->n > 1)
		qsort(c->v, c->n, sizeof(*c->v), by_name);
	return rc;
}

int train_companions_write(const struct train_companions *c, const char *dir, char *err,
			   size_t errlen)
{
	int rc = 0;

	if (!c->n)
		return 0;
	if (mkdir(dir, 0755) && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "%s: --save: cannot create: %s", dir, strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < c->n; i++) {
		char *path = st_path_join(dir, c->v[i].name);

		/* as NAME.tmp, fsynced, renamed: a save cut short never holds part of one */
		rc = path ? st_write_file_atomic(path, c->v[i].data, c->v[i].len) : -ENOMEM;
		if (rc) {
			snprintf(err, errlen, "%s/%s: --save: cannot write it: %s", dir,
				 c->v[i].name, strerror(-rc));
			free(path);
			return rc;
		}
		free(path);
	}
	rc = st_fsync_dir(dir);
	if (rc)
		snprintf(err, errlen, "%s: --save: cannot sync it: %s", dir, strerror(-rc));
	return rc;
}
