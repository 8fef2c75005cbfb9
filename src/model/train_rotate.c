/*
 * The save directory's housekeeping.
 *
 * zinf train --save-total-limit: after each --save-every snapshot, keep the newest N
 * save_dir/checkpoint-<step> directories and remove the older ones, as the Hugging Face
 * Trainer's save_total_limit does, counting this run's snapshot and the older ones (a
 * newer one, from an earlier and longer run, is left alone). Only what a zinf save writes
 * is removed: a directory (not a link) holding config.json and otherwise only regular
 * files named as a save names them; one holding anything else is kept whole, with a
 * warning. Every removal is relative to save_dir's descriptor and follows no link. The
 * state file goes first, so a checkpoint removed in part never reads as complete.
 *
 * The final save is written into save_dir/final.partial and its files then renamed into
 * save_dir, the state file last (train_save_publish): until then an earlier save there
 * stays whole, and a run killed while it writes leaves only the .partial directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

/* PREFIX-0000K-of-0000N.safetensors, as the writer names shards (5 digits each). */
static bool shard_name(const char *rest)
{
	static const char pattern[] = "-DDDDD-of-DDDDD.safetensors";

	if (strlen(rest) != sizeof(pattern) - 1)
		return false;
	for (size_t i = 0; pattern[i]; i++)
		if (pattern[i] == 'D' ? rest[i] < '0' || rest[i] > '9' : rest[i] != pattern[i])
			return false;
	return true;
}

/* A file name a zinf save writes: config.json, zinf_state.json, and the safetensors of
 * the model and the optimizer state (single, shards or index). */
static bool saved_file(const char *name)
{
	static const char *const prefixes[] = {"model", "optimizer"};

	if (!strcmp(name, "config.json") || !strcmp(name, TRAIN_STATE_FILE))
		return true;
	for (int i = 0; i < 2; i++) {
		size_t p = strlen(prefixes[i]);
		const char *rest = name + p;
		if (strncmp(name, prefixes[i], p))
			continue;
		if (!strcmp(rest, ".safetensors") || !strcmp(rest, ".safetensors.index.json") ||
		    shard_name(rest))
			return true;
	}
	return false;
}

/* A file name a save that did not finish leaves: a saved file, or one's NAME.tmp. */
static bool partial_file(const char *name)
{
	size_t n = strlen(name);
	char base[256];

	if (saved_file(name))
		return true;
	if (n <= 4 || n - 4 >= sizeof(base) || strcmp(name + n - 4, ".tmp"))
		return false;
	memcpy(base, name, n - 4);
	base[n - 4] = 0;
	return saved_file(base);
}

/* Snapshot name in save_dir (fd parent): removed if it is a real directory (not a link)
 * holding only regular files a save writes, and config.json (for a snapshot under its
 * final name; a .partial one, cut short, may also hold the writers' NAME.tmp files and
 * lack config.json). Everything is relative to the parent's descriptor and never
 * follows a link, so nothing outside save_dir is touched. 0 removed, 1 kept (logged as
 * what: the flag that asked). */
static int remove_snapshot(int parent, const char *save_dir, const char *name, bool partial,
			   const char *what)
{
	char foreign[300] = "";
	bool has_config = false;
	struct dirent *de;
	struct stat st;
	int fd;
	DIR *d;

	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		zinf_logf(ZINF_LOG_WARN, "%s/%s: %s: kept, not a directory zinf wrote (%s)",
			  save_dir, name, what, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	while ((de = readdir(d)) && !foreign[0]) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!(partial ? partial_file(de->d_name) : saved_file(de->d_name)) ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			snprintf(foreign, sizeof(foreign), "%s", de->d_name);
		has_config |= !strcmp(de->d_name, "config.json");
	}
	if (foreign[0] || (!has_config && !partial)) {
		zinf_logf(ZINF_LOG_WARN, "%s/%s: %s: kept, it holds %s, which zinf did not write",
			  save_dir, name, what, foreign[0] ? foreign : "no config.json");
		closedir(d);
		return 1;
	}
	unlinkat(fd, TRAIN_STATE_FILE, 0); /* first: the rest is no longer a checkpoint */
	rewinddir(d);
	/* names checked again: only what the scan allowed is removed (anything that
	 * appeared since stays, and so does the directory) */
	while ((de = readdir(d)))
		if ((partial ? partial_file(de->d_name) : saved_file(de->d_name)) &&
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
			unlinkat(fd, de->d_name, 0);
	closedir(d);
	if (unlinkat(parent, name, AT_REMOVEDIR)) {
		zinf_logf(ZINF_LOG_WARN, "%s/%s: %s: cannot remove it: %s", save_dir, name, what,
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

int train_snapshots_rotate(const char *save_dir, uint64_t keep, uint64_t step, char *err,
			   size_t errlen)
{
	struct snapshot *list = NULL, *grown;
	size_t n = 0, cap = 0;
	int parent = open(save_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = parent >= 0 ? fdopendir(dup(parent)) : NULL;
	struct dirent *de;
	uint64_t k;
	int rc = 0;

	if (!d) {
		rc = -errno;
		snprintf(err, errlen, "%s: --save-total-limit: cannot list it: %s", save_dir,
			 strerror(errno));
		goto out;
	}
	/* this run's snapshot and the older ones; newer ones (an earlier, longer run's) are
	 * neither counted nor removed */
	while ((de = readdir(d))) {
		if (!snapshot_name(de->d_name, &k) || k > step)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			grown = realloc(list, cap * sizeof(*list));
			if (!grown) {
				rc = -ENOMEM;
				snprintf(err, errlen, "%s: --save-total-limit: out of memory",
					 save_dir);
				goto out;
			}
			list = grown;
		}
		list[n].step = k;
		snprintf(list[n].name, sizeof(list[n].name), "%s", de->d_name);
		n++;
	}
	if (n > keep) {
		qsort(list, n, sizeof(*list), newest_first);
		for (size_t i = keep; i < n; i++)
			remove_snapshot(parent, save_dir, list[i].name, false,
					"--save-total-limit");
	}
out:
	if (d)
		closedir(d);
	if (parent >= 0)
		close(parent);
	free(list);
	return rc;
}

int train_snapshot_remove_partial(const char *save_dir, const char *name, const char *what)
{
	int parent = open(save_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (parent < 0)
		return 1;
	rc = remove_snapshot(parent, save_dir, name, true, what);
	close(parent);
	if (rc == 0)
		zinf_logf(ZINF_LOG_INFO, "%s/%s: removed, a save a stopped run did not finish",
			  save_dir, name);
	return rc;
}

/* Which safetensors a saved file's name is of: 1 the model's, 2 the optimizer state's, 0
 * neither (config.json, the state file). */
static int saved_kind(const char *name)
{
	return !strncmp(name, "model", 5) ? 1 : !strncmp(name, "optimizer", 9) ? 2 : 0;
}

/* Move order: the safetensors, config.json, the state file last. */
static int publish_rank(const char *name)
{
	return !strcmp(name, TRAIN_STATE_FILE) ? 2 : !strcmp(name, "config.json") ? 1 : 0;
}

static int by_publish_rank(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	int rx = publish_rank(x), ry = publish_rank(y);

	return rx != ry ? rx - ry : strcmp(x, y);
}

/* Does the list of n names hold name? */
static bool listed(char *const *names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return true;
	return false;
}

/* The saved files of save_dir (fd parent) that the new save's names supersede: those
 * of a prefix (model, optimizer) the new save writes that it does not write itself (an
 * earlier save's single file beside new shards, or shards of another count). Regular
 * files only, never through a link. */
static int remove_superseded(int parent, const char *save_dir, char *const *names, size_t n)
{
	int fd = dup(parent);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	struct stat st;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		int kind = saved_kind(de->d_name);
		bool ours = false;

		if (!kind || !saved_file(de->d_name) || listed(names, n, de->d_name))
			continue;
		for (size_t i = 0; i < n && !ours; i++)
			ours = saved_kind(names[i]) == kind;
		if (ours && fstatat(parent, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && unlinkat(parent, de->d_name, 0) == 0)
			zinf_logf(ZINF_LOG_INFO, "%s: removed %s, an earlier save's", save_dir,
				  de->d_name);
	}
	closedir(d);
	return 0;
}

/* Rename dir/name/file (fd) to dir/file (parent). */
static int move_in(int fd, int parent, const char *dir, const char *name, const char *file,
		   char *err, size_t errlen)
{
	int rc;

	if (!renameat(fd, file, parent, file))
		return 0;
	rc = -errno;
	snprintf(err, errlen, "%s/%s/%s: cannot move it into %s: %s", dir, name, file, dir,
		 strerror(errno));
	return rc;
}

int train_save_publish(const char *save_dir, const char *name, char *err, size_t errlen)
{
	int parent = open(save_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd = -1, rc = 0;
	char **names = NULL, **grown;
	size_t n = 0, cap = 0, k;
	struct dirent *de;
	DIR *d = NULL;

	if (parent >= 0)
		fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		rc = -errno;
		snprintf(err, errlen, "%s/%s: cannot open the save to move it into place: %s",
			 save_dir, name, strerror(errno));
		goto out;
	}
	while ((de = readdir(d))) {
		if (!saved_file(de->d_name))
			continue; /* ".", ".." (and nothing else a finished save holds) */
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			grown = realloc(names, cap * sizeof(*names));
			if (!grown)
				goto oom;
			names = grown;
		}
		names[n] = strdup(de->d_name);
		if (!names[n])
			goto oom;
		n++;
	}
	qsort(names, n, sizeof(*names), by_publish_rank);
	/* the earlier save's state first: from here until the new one's is in place the
	 * directory reads as a save without a state */
	if (unlinkat(parent, TRAIN_STATE_FILE, 0) && errno != ENOENT) {
		rc = -errno;
		snprintf(err, errlen, "%s/%s: cannot remove the earlier state: %s", save_dir,
			 TRAIN_STATE_FILE, strerror(errno));
		goto out;
	}
	/* the new files; then the earlier ones they supersede; the state last */
	for (k = 0; k < n && publish_rank(names[k]) < 2 && !rc; k++)
		rc = move_in(fd, parent, save_dir, name, names[k], err, errlen);
	if (!rc) {
		rc = remove_superseded(parent, save_dir, names, n);
		if (rc)
			snprintf(err, errlen, "%s: cannot list it: %s", save_dir, strerror(-rc));
	}
	for (; k < n && !rc; k++)
		rc = move_in(fd, parent, save_dir, name, names[k], err, errlen);
	if (rc)
		goto out;
	if (fsync(parent)) {
		rc = -errno;
		snprintf(err, errlen, "%s: fsync: %s", save_dir, strerror(errno));
		goto out;
	}
	if (unlinkat(parent, name, AT_REMOVEDIR))
		zinf_logf(ZINF_LOG_WARN, "%s/%s: cannot remove it: %s", save_dir, name,
			  strerror(errno));
	goto out;
oom:
	rc = -ENOMEM;
	snprintf(err, errlen, "%s/%s: out of memory for its file list", save_dir, name);
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	if (parent >= 0)
		close(parent);
	return rc;
}
