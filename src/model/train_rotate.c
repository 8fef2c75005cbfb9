/*
 * zinf train --save-total-limit: after each --save-every snapshot, keep the newest N
 * save_dir/checkpoint-<step> directories and remove the older ones, as the Hugging Face
 * Trainer's save_total_limit does. Only what a zinf save writes is removed: a directory
 * holding any other file (or a subdirectory) is kept whole, with a warning. The state
 * file goes first, so a checkpoint removed in part never reads as complete.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"
#include "zinf/log.h"

struct snapshot {
	uint64_t step;
	char name[48];
};

/* checkpoint-<digits>, the step not overflowing. */
static bool snapshot_name(const char *name, uint64_t *step)
{
	const char *digits = name + 11;
	char *end;

	if (strncmp(name, "checkpoint-", 11) || !*digits || strlen(name) >= 48)
		return false;
	for (const char *c = digits; *c; c++)
		if (*c < '0' || *c > '9')
			return false;
	errno = 0;
	*step = strtoull(digits, &end, 10);
	return errno == 0 && !*end;
}

/* A file name a zinf save writes: config.json, zinf_state.json, and the safetensors of
 * the model and the optimizer state (single, shards or index). */
static bool saved_file(const char *name)
{
	static const char *const prefixes[] = {"model", "optimizer"};
	size_t n = strlen(name);

	if (!strcmp(name, "config.json") || !strcmp(name, TRAIN_STATE_FILE))
		return true;
	for (int i = 0; i < 2; i++) {
		size_t p = strlen(prefixes[i]);
		if (strncmp(name, prefixes[i], p))
			continue;
		if (!strcmp(name + p, ".safetensors") ||
		    !strcmp(name + p, ".safetensors.index.json"))
			return true;
		if (name[p] == '-' && n > p + 12 && !strcmp(name + n - 12, ".safetensors"))
			return true; /* PREFIX-0000K-of-0000N.safetensors */
	}
	return false;
}

/* Remove dir if it holds only files a save writes; 0 removed, 1 kept (logged). */
static int remove_snapshot(const char *dir)
{
	char path[4200 + 258], foreign[256] = "";
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st;

	if (!d) {
		zinf_logf(ZINF_LOG_WARN, "%s: --save-total-limit: cannot open it: %s; kept", dir,
			  strerror(errno));
		return 1;
	}
	while ((de = readdir(d)) && !foreign[0]) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!saved_file(de->d_name) || lstat(path, &st) || !S_ISREG(st.st_mode))
			snprintf(foreign, sizeof(foreign), "%s", de->d_name);
	}
	closedir(d);
	if (foreign[0]) {
		zinf_logf(ZINF_LOG_WARN,
			  "%s: --save-total-limit: kept, it holds %s, which zinf did not write",
			  dir, foreign);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/%s", dir, TRAIN_STATE_FILE);
	unlink(path); /* first: what is left is no longer a complete checkpoint */
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	if (rmdir(dir)) {
		zinf_logf(ZINF_LOG_WARN, "%s: --save-total-limit: cannot remove it: %s", dir,
			  strerror(errno));
		return 1;
	}
	return 0;
}

static int newest_first(const void *a, const void *b)
{
	const struct snapshot *x = a, *y = b;

	return x->step < y->step ? 1 : x->step > y->step ? -1 : 0;
}

int train_snapshots_rotate(const char *save_dir, uint64_t keep, char *err, size_t errlen)
{
	struct snapshot *list = NULL, *grown;
	size_t n = 0, cap = 0;
	DIR *d = opendir(save_dir);
	struct dirent *de;
	char path[4200];
	uint64_t step;

	if (!d) {
		int rc = -errno;
		snprintf(err, errlen, "%s: --save-total-limit: cannot list it: %s", save_dir,
			 strerror(errno));
		return rc;
	}
	while ((de = readdir(d))) {
		if (!snapshot_name(de->d_name, &step))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			grown = realloc(list, cap * sizeof(*list));
			if (!grown) {
				free(list);
				closedir(d);
				snprintf(err, errlen, "%s: --save-total-limit: out of memory",
					 save_dir);
				return -ENOMEM;
			}
			list = grown;
		}
		list[n].step = step;
		snprintf(list[n].name, sizeof(list[n].name), "%s", de->d_name);
		n++;
	}
	closedir(d);
	if (n > keep) {
		qsort(list, n, sizeof(*list), newest_first);
		for (size_t i = keep; i < n; i++) {
			snprintf(path, sizeof(path), "%s/%s", save_dir, list[i].name);
			remove_snapshot(path);
		}
	}
	free(list);
	return 0;
}
