/*
 * The save directory's housekeeping.
 *
 * zinf train --save-total-limit: after each --save-every snapshot, keep the newest N
 * save_dir/checkpoint-<step> directories and remove the older ones, as the Hugging Face
 * Trainer's save_total_limit does, counting this run's snapshot and the older ones (a
 * newer one, from an earlier and longer run, is left alone). Only what a zinf save writes
 * is removed: a directory (not a link) holding config.json and otherwise only regular
 * files named as a save names them; one holding anything else is kept whole, with a
 * warning, and so is the one the run loaded from (train_source_dir_init: its --model,
 * its --resume unless its own snapshots carry the state, or --init's file's directory),
 * which the Trainer's rotation would remove. Every removal is relative to
 * save_dir's descriptor and follows no link. The state file goes first, so a checkpoint
 * removed in part never reads as complete.
 *
 * The final save is written into save_dir/final.partial; once complete, a list of its
 * files is written beside them and the directory renamed final.ready (the commit), then
 * its files are renamed into save_dir, the state file last, and the emptied directory is
 * renamed final.done and removed (train_save_publish). Until the commit an earlier save
 * there stays whole; a run stopped after it has its save moved in by the next run
 * (train_save_recover), every step of the move being one that can be done again.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"
#include "zinf/crc32c.h"
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

/* A file name a zinf save writes that a load or a resume reads: config.json,
 * zinf_state.json, and the safetensors of the model and the optimizer state (single,
 * shards or index). */
static bool loaded_file(const char *name)
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

/* A file name a zinf save writes: those a load reads, and the tokenizer and generation
 * files it carries over. */
static bool saved_file(const char *name)
{
	return loaded_file(name) || train_companion_name(name);
}

/* A checkpoint-<k> or checkpoint-<k>.partial name as a save writes it (no leading zero),
 * with k one of this run's --save-every steps from first_step on. */
static bool snapshot_of_run(const struct zinf_train_opts *o, uint64_t first_step, const char *name,
			    bool *partial)
{
	size_t n = strlen(name);
	char base[48];
	uint64_t k;

	*partial = n > 8 && strcmp(name + n - 8, ".partial") == 0;
	if (*partial)
		n -= 8;
	if (n >= sizeof(base) || n < 12 || name[11] == '0')
		return false;
	memcpy(base, name, n);
	base[n] = 0;
	return snapshot_name(base, &k) && o->save_every && k >= first_step && k < o->steps &&
	       k % o->save_every == 0;
}

int train_snapshots_check(const struct zinf_train_opts *o, uint64_t first_step, char *err,
			  size_t errlen)
{
	int rc = train_save_recover(o->save_dir, err, errlen);
	char(*partials)[64] = NULL, why[400]; /* (names of under 48 + 8 characters) */
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;

	if (rc || !o->save_every)
		return rc;
	d = opendir(o->save_dir);
	if (!d) {
		rc = -errno;
		snprintf(err, errlen, "%s: --save: cannot list: %s", o->save_dir, strerror(-rc));
		return rc;
	}
	while (!rc && (de = readdir(d))) {
		bool partial;
		if (!snapshot_of_run(o, first_step, de->d_name, &partial))
			continue;
		if (!partial) {
			snprintf(err, errlen,
				 "%s/%s: --save-every would write over it (remove it first)",
				 o->save_dir, de->d_name);
			rc = -EEXIST;
		} else if (n == cap) {
			void *more =
				realloc(partials, (cap = cap ? 2 * cap : 8) * sizeof(*partials));
			if (!more) {
				snprintf(err, errlen, "out of memory listing %s", o->save_dir);
				rc = -ENOMEM;
			} else {
				partials = more;
			}
		}
		if (!rc && partial)
			memcpy(partials[n++], de->d_name, strlen(de->d_name) + 1);
	}
	closedir(d);
	/* a save a stopped run cut short is garbage, unless it holds foreign files */
	for (size_t i = 0; !rc && i < n; i++)
		if (train_snapshot_remove_partial(o->save_dir, partials[i], why, sizeof(why))) {
			snprintf(err, errlen, "%s/%s: --save-every: %s (remove it first)",
				 o->save_dir, partials[i], why);
			rc = -EEXIST;
		}
	free(partials);
	return rc;
}

bool train_saved_name(const char *name)
{
	return saved_file(name);
}

/* A file name a save that did not finish leaves: a saved file, or one's NAME.tmp, or the
 * final save's list of its files. */
static bool partial_file(const char *name)
{
	size_t n = strlen(name);
	char base[256];

	if (saved_file(name) || !strcmp(name, TRAIN_FINAL_LIST))
		return true;
	if (n <= 4 || n - 4 >= sizeof(base) || strcmp(name + n - 4, ".tmp"))
		return false;
	memcpy(base, name, n - 4);
	base[n - 4] = 0;
	return saved_file(base);
}

bool train_save_dir_name(const struct zinf_train_opts *o, const char *name)
{
	bool partial;

	return !strcmp(name, TRAIN_FINAL_PARTIAL) || !strcmp(name, TRAIN_FINAL_READY) ||
	       !strcmp(name, TRAIN_FINAL_DONE) || snapshot_of_run(o, 1, name, &partial);
}

/* Snapshot name in a save directory (fd parent): removed if it is a real directory (not
 * a link) holding only regular files a save writes, and config.json (for a snapshot under
 * its final name; a .partial one, cut short, may also hold the writers' NAME.tmp files
 * and lack config.json). Everything is relative to the parent's descriptor and never
 * follows a link, so nothing outside the save directory is touched. 0 removed, 1 kept,
 * with the reason in why. */
static int remove_snapshot(int parent, const char *name, bool partial, char *why, size_t whylen)
{
	char foreign[300] = "";
	bool has_config = false;
	struct dirent *de;
	struct stat st;
	int fd = -1;
	DIR *d = NULL;

	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
		if (errno == ENOENT) /* nothing there: nothing to remove */
			return 0;
		snprintf(why, whylen, "%s", strerror(errno));
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(why, whylen, "%s",
			 S_ISLNK(st.st_mode) ? "a symbolic link, not a directory zinf wrote"
					     : "not a directory zinf wrote");
		return 1;
	}
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) { /* (too few descriptors, say) */
		snprintf(why, whylen, "cannot open it: %s", strerror(errno));
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
	/* what is in it may be another run's save: said whatever else it holds */
	if (fstatat(fd, TRAIN_SAVE_LOCK, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		snprintf(why, whylen, "a run saved into it as its --save directory (it holds %s)",
			 TRAIN_SAVE_LOCK);
		closedir(d);
		return 1;
	}
	if (foreign[0] || (!has_config && !partial)) {
		snprintf(why, whylen, "it holds %s, which zinf did not write",
			 foreign[0] ? foreign : "no config.json");
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
		snprintf(why, whylen, "cannot remove it: %s", strerror(errno));
		return 1;
	}
	return 0;
}

static int newest_first(const void *a, const void *b)
{
	const struct snapshot *x = a, *y = b;

	return x->step < y->step ? 1 : x->step > y->step ? -1 : 0;
}

void train_source_dir_init(struct train_source_dir *src, const struct zinf_train_opts *o)
{
	char dir[4096];
	const char *path = NULL;
	struct stat st;

	memset(src, 0, sizeof(*src));
	if (o->model_dir) {
		path = o->model_dir;
		src->flag = "--model";
	} else if (o->resume_dir && !o->save_state) {
		path = o->resume_dir;
		src->flag = "--resume";
	} else if (o->init_config) {
		if (snprintf(dir, sizeof(dir), "%s", o->init_config) >= (int)sizeof(dir))
			return;
		path = dirname(dir); /* (changes its argument: a copy) */
		src->flag = "--init's file";
	}
	if (path && stat(path, &st) == 0) {
		src->set = true;
		src->dev = (uint64_t)st.st_dev;
		src->ino = (uint64_t)st.st_ino;
	}
}

int train_snapshots_rotate(const struct zinf_train_opts *o, struct train_source_dir *src,
			   uint64_t step, char *err, size_t errlen)
{
	const char *save_dir = o->save_dir;
	uint64_t keep = o->save_total_limit;
	struct snapshot *list = NULL, *grown;
	size_t n = 0, cap = 0;
	int parent = open(save_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
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
		memcpy(list[n].name, de->d_name, strlen(de->d_name) + 1); /* (< 48: a snapshot) */
		n++;
	}
	if (n > keep) {
		qsort(list, n, sizeof(*list), newest_first);
		for (size_t i = keep; i < n; i++) {
			char why[400];
			if (src->set && fstatat(parent, list[i].name, &st, 0) == 0 &&
			    (uint64_t)st.st_dev == src->dev && (uint64_t)st.st_ino == src->ino) {
				zinf_logf(
					src->warned ? ZINF_LOG_INFO : ZINF_LOG_WARN,
					"%s/%s: --save-total-limit: kept, this run loaded from it "
					"(%s)",
					save_dir, list[i].name, src->flag);
				src->warned = true;
			} else if (remove_snapshot(parent, list[i].name, false, why, sizeof(why)))
				zinf_logf(ZINF_LOG_WARN, "%s/%s: --save-total-limit: kept, %s",
					  save_dir, list[i].name, why);
			else
				zinf_logf(
					ZINF_LOG_INFO,
					"%s/%s: removed (--save-total-limit %llu: the newest are kept)",
					save_dir, list[i].name, (unsigned long long)keep);
		}
	}
out:
	if (d)
		closedir(d);
	if (parent >= 0)
		close(parent);
	free(list);
	return rc;
}

int train_snapshot_remove_partial(const char *save_dir, const char *name, char *why, size_t whylen)
{
	int parent = open(save_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (parent < 0) {
		snprintf(why, whylen, "%s", strerror(errno));
		return 1;
	}
	rc = remove_snapshot(parent, name, true, why, whylen);
	close(parent);
	if (rc == 0)
		zinf_logf(ZINF_LOG_INFO, "%s/%s: removed, a save a stopped run did not finish",
			  save_dir, name);
	return rc;
}

/* ---- the final save: written aside, committed, moved in ------------------------------- */

/* Which safetensors a saved file's name is of: 1 the model's, 2 the optimizer state's, 0
 * neither (config.json, the state file). */
static int saved_kind(const char *name)
{
	return !strncmp(name, "model", 5) ? 1 : !strncmp(name, "optimizer", 9) ? 2 : 0;
}

/* Move order: the safetensors and the tokenizer and generation files, config.json, the
 * state file last. */
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

struct name_list {
	char **names;
	size_t n, cap;
};

static void name_list_free(struct name_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	memset(l, 0, sizeof(*l));
}

static int name_list_add(struct name_list *l, const char *name)
{
	char **grown;

	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 16;
		grown = realloc(l->names, l->cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		l->names = grown;
	}
	l->names[l->n] = strdup(name);
	if (!l->names[l->n])
		return -ENOMEM;
	l->n++;
	return 0;
}

static bool listed(const struct name_list *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->names[i], name))
			return true;
	return false;
}

/* The files a save wrote into the directory fd, in move order. */
static int list_saved(int fd, struct name_list *l)
{
	int dfd = dup(fd), rc = 0;
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;

	if (!d) {
		rc = -errno;
		if (dfd >= 0)
			close(dfd);
		return rc;
	}
	while ((de = readdir(d)) && !rc)
		if (saved_file(de->d_name))
			rc = name_list_add(l, de->d_name);
	closedir(d);
	if (!rc && l->n > 1) /* (none: names is NULL, which qsort must not get) */
		qsort(l->names, l->n, sizeof(*l->names), by_publish_rank);
	return rc;
}

/* The list a committed save keeps of its files (TRAIN_FINAL_LIST, one name a line), in
 * move order; every name must be one a save writes, and the file holds no NUL byte. */
static int read_list(int fd, struct name_list *l)
{
	char buf[1 << 16];
	ssize_t len;
	int lf = openat(fd, TRAIN_FINAL_LIST, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), rc = 0;

	if (lf < 0)
		return -errno;
	len = read(lf, buf, sizeof(buf) - 1);
	rc = len < 0 ? -errno : len == (ssize_t)sizeof(buf) - 1 ? -EFBIG : 0;
	close(lf);
	if (rc)
		return rc;
	if (memchr(buf, 0, (size_t)len)) /* (a zero-filled tail is no list) */
		return -EBADMSG;
	buf[len] = 0;
	for (char *line = buf, *end; *line && !rc; line = end + 1) {
		end = strchr(line, '\n');
		if (!end)
			return -EBADMSG;
		*end = 0;
		rc = saved_file(line) ? name_list_add(l, line) : -EBADMSG;
	}
	if (!rc && l->n > 1) /* (none: names is NULL, which qsort must not get) */
		qsort(l->names, l->n, sizeof(*l->names), by_publish_rank);
	return rc;
}

/* Write the list of l's names into the directory fd, durably. */
static int write_list(int fd, const struct name_list *l)
{
	int lf = openat(fd, TRAIN_FINAL_LIST, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			0644),
	    rc = 0;
	FILE *f = lf >= 0 ? fdopen(lf, "w") : NULL;

	if (!f) {
		rc = -errno;
		if (lf >= 0)
			close(lf);
		return rc;
	}
	for (size_t i = 0; i < l->n; i++)
		fprintf(f, "%s\n", l->names[i]);
	if (fflush(f) || fsync(lf))
		rc = -errno;
	if (fclose(f) && !rc)
		rc = -errno;
	return rc;
}

/* The saved model and optimizer files of the save directory (fd parent) that the new
 * save's list does not name: an earlier save's single file beside new shards, shards of
 * another count, an optimizer state the new save has none of (without its state file it
 * is of no use). Regular files only, never through a link. Tokenizer and generation
 * files are not removed, as save_pretrained leaves them: a file of such a name may be
 * the user's. */
static void remove_superseded(int parent, const char *save_dir, const struct name_list *l)
{
	int fd = dup(parent);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	struct stat st;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return; /* the listing failed: the earlier files stay, harmless */
	}
	while ((de = readdir(d)))
		if (saved_kind(de->d_name) && saved_file(de->d_name) && !listed(l, de->d_name) &&
		    fstatat(parent, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && unlinkat(parent, de->d_name, 0) == 0)
			zinf_logf(ZINF_LOG_INFO, "%s: removed %s, an earlier save's", save_dir,
				  de->d_name);
	closedir(d);
}

/* Is name in the committed save's directory (fd) or already in the save directory? */
static bool in_ready_or_dir(int fd, int parent, const char *name)
{
	struct stat st;

	return fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
	       fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Has name left the committed save's directory (fd) for the save directory (a move
 * stopped after its rename)? */
static bool moved_in(int fd, int parent, const char *name)
{
	struct stat st;

	return fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) && errno == ENOENT &&
	       fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Move the committed save save_dir/TRAIN_FINAL_READY into save_dir. Every step can be
 * done again after a stop part-way (the list, not the directory's listing, names the new
 * files): the earlier state file removed, the earlier files the new ones supersede
 * removed, each new file renamed in unless it already was (the state file last), and
 * the emptied directory renamed to TRAIN_FINAL_DONE and removed. */
static int move_in(int parent, const char *save_dir, char *err, size_t errlen)
{
	struct name_list l = {0};
	char why[400];
	int fd = openat(parent, TRAIN_FINAL_READY, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int rc = fd >= 0 ? read_list(fd, &l) : -errno;

	if (rc) {
		snprintf(err, errlen, "%s/%s: cannot read its file list %s: %s", save_dir,
			 TRAIN_FINAL_READY, TRAIN_FINAL_LIST, strerror(-rc));
		goto out;
	}
	/* nothing is removed unless every listed file is there to move in, or moved in */
	for (size_t i = 0; i < l.n && !rc; i++)
		if (!in_ready_or_dir(fd, parent, l.names[i]))
			rc = -ENOENT;
	if (rc || !listed(&l, "config.json")) {
		rc = -EBADMSG;
		snprintf(err, errlen,
			 "%s/%s: its file list %s names no config.json, or a file that is in "
			 "neither %s nor %s (move or remove it by hand)",
			 save_dir, TRAIN_FINAL_READY, TRAIN_FINAL_LIST, TRAIN_FINAL_READY,
			 save_dir);
		goto out;
	}
	/* the earlier state goes first; unless the new one is in already (a stop after its
	 * rename, the last: then the rest is in too) */
	if (!(listed(&l, TRAIN_STATE_FILE) && moved_in(fd, parent, TRAIN_STATE_FILE)) &&
	    unlinkat(parent, TRAIN_STATE_FILE, 0) && errno != ENOENT) {
		rc = -errno;
		snprintf(err, errlen, "%s/%s: cannot remove the earlier state: %s", save_dir,
			 TRAIN_STATE_FILE, strerror(errno));
		goto out;
	}
	remove_superseded(parent, save_dir, &l);
	for (size_t i = 0; i < l.n && !rc; i++) {
		const char *f = l.names[i];
		bool moved = moved_in(fd, parent, f); /* before a stop */

		/* the rest is in, durably, before the state */
		if (publish_rank(f) == 2 && fsync(parent))
			rc = -errno;
		if (!rc && !moved && renameat(fd, f, parent, f))
			rc = -errno;
		if (rc)
			snprintf(err, errlen, "%s/%s/%s: cannot move it into %s: %s", save_dir,
				 TRAIN_FINAL_READY, f, save_dir, strerror(-rc));
	}
	if (rc)
		goto out;
	if (renameat(parent, TRAIN_FINAL_READY, parent, TRAIN_FINAL_DONE) || fsync(parent)) {
		rc = -errno;
		snprintf(err, errlen, "%s/%s: cannot mark it moved in: %s", save_dir,
			 TRAIN_FINAL_READY, strerror(errno));
		goto out;
	}
	if (remove_snapshot(parent, TRAIN_FINAL_DONE, true, why, sizeof(why)))
		zinf_logf(ZINF_LOG_WARN, "%s/%s: left, %s", save_dir, TRAIN_FINAL_DONE, why);
out:
	name_list_free(&l);
	if (fd >= 0)
		close(fd);
	return rc;
}

int train_save_publish(const char *save_dir, char *err, size_t errlen)
{
	int parent = open(save_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd = -1, rc;
	struct name_list l = {0};

	if (parent >= 0)
		fd = openat(parent, TRAIN_FINAL_PARTIAL,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	rc = fd >= 0 ? list_saved(fd, &l) : -errno;
	if (!rc)
		rc = write_list(fd, &l);
	if (!rc && fsync(fd)) /* the list's name too, before the commit */
		rc = -errno;
	/* the commit: from here the save is complete, and a stopped run's is moved in by
	 * the next one */
	if (!rc &&
	    (renameat(parent, TRAIN_FINAL_PARTIAL, parent, TRAIN_FINAL_READY) || fsync(parent)))
		rc = -errno;
	if (rc)
		snprintf(err, errlen, "%s/%s: cannot commit the save: %s", save_dir,
			 TRAIN_FINAL_PARTIAL, strerror(-rc));
	else
		rc = move_in(parent, save_dir, err, errlen);
	name_list_free(&l);
	if (fd >= 0)
		close(fd);
	if (parent >= 0)
		close(parent);
	return rc;
}

int train_save_recover(const char *save_dir, char *err, size_t errlen)
{
	static const char *const dirs[] = {TRAIN_FINAL_DONE, TRAIN_FINAL_READY,
					   TRAIN_FINAL_PARTIAL};
	int parent = open(save_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
	struct stat st;
	char why[400];

	if (parent < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot open it: %s", save_dir, strerror(errno));
		return rc;
	}
	for (int i = 0; i < 3 && !rc; i++) {
		if (fstatat(parent, dirs[i], &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (i == 1 && S_ISDIR(st.st_mode)) {
			rc = move_in(parent, save_dir, err, errlen);
			if (!rc)
				zinf_logf(ZINF_LOG_INFO,
					  "%s: moved in the complete save a stopped run left in %s",
					  save_dir, TRAIN_FINAL_READY);
		} else if (remove_snapshot(parent, dirs[i], true, why, sizeof(why))) {
			rc = -EEXIST;
			snprintf(err, errlen,
				 "%s/%s: %s (a save is written there: remove it first)", save_dir,
				 dirs[i], why);
		} else {
			zinf_logf(ZINF_LOG_INFO, "%s/%s: removed, %s", save_dir, dirs[i],
				  i ? "a save a stopped run did not finish"
				    : "a save already moved in");
		}
	}
	close(parent);
	return rc;
}

int train_save_seen(const char *dir, uint64_t *digest, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint32_t sum = 0, n = 0;

	if (!d) {
		int rc = -errno;
		snprintf(err, errlen, "%s: cannot list: %s", dir, strerror(errno));
		return rc;
	}
	/* order-free: a sum over the files of each one's CRC */
	while ((de = readdir(d))) {
		struct {
			uint64_t ino, size;
			int64_t mtime_s, mtime_ns;
		} id = {0};
		struct stat st;
		/* (a final.done holds what has been moved in) */
		bool moving = !strcmp(de->d_name, TRAIN_FINAL_READY);

		/* (not the tokenizer's files: a load does not read them, and a save copies them
		 * as they were when the run started) */
		if (!loaded_file(de->d_name) && !moving)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !moving) {
			id.ino = st.st_ino;
			id.size = (uint64_t)st.st_size;
			id.mtime_s = st.st_mtim.tv_sec;
			id.mtime_ns = st.st_mtim.tv_nsec;
		}
		sum += zinf_crc32c(zinf_crc32c(0, de->d_name, strlen(de->d_name)), &id, sizeof(id));
		n++;
	}
	closedir(d);
	*digest = (uint64_t)n << 32 | sum;
	return 0;
}
