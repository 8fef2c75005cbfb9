/*
 * The directories a run reads and writes, guarded before step 1 and around the load:
 * - one run saves into a directory at a time: an flock on DIR/.zinf-save.lock, taken
 *   once the directory is made (before step 1) and held to the end; a run that made the
 *   directory and fails removes it again;
 * - a final save a stopped run was moving into a --model or --resume directory is
 *   finished first, under that directory's lock;
 * - an output (--log-json, zinf.trace) names none of the run's inputs and no file a
 *   save writes in its checkpoint directories;
 * - a --model or --resume directory a save moved into while the run loaded it is
 *   refused (the load may have read files of both saves).
 * (--save-every's snapshots are looked at by train_snapshots_check, train_rotate.c.)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokens.h"
#include "train_internal.h"

int train_save_lock(const char *dir, const char *flag, char *err, size_t errlen)
{
	char path[4200];
	int fd, rc;

	snprintf(path, sizeof(path), "%s/%s", dir, TRAIN_SAVE_LOCK);
	for (int tries = 0;; tries++) {
		struct stat held, named;

		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB))
			break;
		/* a failed run that made dir unlinks the lock before it removes dir: a lock
		 * taken on the unlinked file guards nothing, so it is taken again */
		if (fstat(fd, &held) == 0 && stat(path, &named) == 0 &&
		    held.st_dev == named.st_dev && held.st_ino == named.st_ino)
			return fd;
		close(fd);
		if (tries == 100) {
			errno = ESTALE;
			fd = -1;
			break;
		}
	}
	rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
	snprintf(err, errlen, "%s: %s: %s", dir, flag,
		 rc == -EBUSY ? "another live zinf train saves into it (it holds " TRAIN_SAVE_LOCK
				")"
			      : strerror(-rc));
	if (fd >= 0)
		close(fd);
	return rc;
}

int train_save_dir_make(const char *save_dir, bool *made, char *err, size_t errlen)
{
	int rc;

	for (int tries = 0;; tries++) {
		if (mkdir(save_dir, 0755) == 0) {
			*made = true;
		} else if (errno != EEXIST) {
			rc = -errno;
			snprintf(err, errlen, "%s: --save: cannot create: %s", save_dir,
				 strerror(errno));
			return rc;
		}
		rc = train_save_lock(save_dir, "--save", err, errlen);
		/* removed by a failed run that had made it, between the mkdir and the lock */
		if (rc != -ENOENT || *made || tries == 100)
			return rc;
	}
}

void train_save_dir_unmake(const char *save_dir)
{
	char path[4200];
	DIR *d = opendir(save_dir);
	struct dirent *de;
	bool other = d == NULL;

	/* snapshots kept there (a run stopped after some): the directory and its lock file,
	 * which stays in a save directory, stay */
	while (d && !other && (de = readdir(d)))
		other = strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
			strcmp(de->d_name, TRAIN_SAVE_LOCK);
	if (d)
		closedir(d);
	if (other)
		return;
	snprintf(path, sizeof(path), "%s/%s", save_dir, TRAIN_SAVE_LOCK);
	unlink(path);
	rmdir(save_dir);
}

int train_source_finish_move(const char *dir, const char *flag, char *err, size_t errlen)
{
	char path[4200];
	struct stat st;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/%s", dir, TRAIN_FINAL_READY);
	if (lstat(path, &st))
		return 0;
	fd = train_save_lock(dir, flag, err, errlen);
	if (fd < 0)
		return fd;
	rc = train_save_recover(dir, err, errlen);
	close(fd);
	return rc;
}

void (*train_loaded_hook)(const char *dir);

int train_source_unchanged(const char *dir, const char *flag, uint64_t seen, char *err,
			   size_t errlen)
{
	uint64_t now;
	int rc;

	if (train_loaded_hook)
		train_loaded_hook(dir);
	rc = train_save_seen(dir, &now, err, errlen);
	if (!rc && now != seen) {
		snprintf(err, errlen,
			 "%s: %s: a save moved into it while this run read it (the load may mix "
			 "two saves): run again",
			 dir, flag);
		rc = -ESTALE;
	}
	return rc;
}

/* path made absolute and free of links and dots, its last parts allowed not to exist
 * yet (a --save directory is made after the outputs are checked). */
static void resolve(const char *path, char *out, size_t len)
{
	char dir[PATH_MAX], base[PATH_MAX], up[PATH_MAX], *name;

	if (realpath(path, out))
		return;
	if (errno != ENOENT) {
		snprintf(out, len, "%s", path);
		return;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	snprintf(base, sizeof(base), "%s", path);
	snprintf(up, sizeof(up), "%s", dirname(dir));
	if (!strcmp(up, path)) { /* "/" or "." themselves missing: nothing to resolve */
		snprintf(out, len, "%s", path);
		return;
	}
	resolve(up, dir, sizeof(dir));
	name = basename(base);
	if (!strcmp(name, ".")) /* (a missing directory's own links, once it is made) */
		snprintf(out, len, "%s", dir);
	else if (!strcmp(name, ".."))
		snprintf(out, len, "%s", dirname(dir));
	else if (snprintf(out, len, "%s/%s", strcmp(dir, "/") ? dir : "", name) >= (int)len)
		snprintf(out, len, "%s", path);
}

/* Both exist and are one file (or directory). */
static bool same_inode(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* Both name one directory: the same inode, or (either not made yet) the same resolved
 * path. */
static bool same_dir(const char *a, const char *b)
{
	char ra[PATH_MAX], rb[PATH_MAX];

	if (same_inode(a, b))
		return true;
	resolve(a, ra, sizeof(ra));
	resolve(b, rb, sizeof(rb));
	return !strcmp(ra, rb);
}

/* Where a write to path lands, as an absolute path when it can be resolved: path, or
 * what its chain of links names, a file not made yet included (realpath wants the file
 * to exist, and a dangling link is written through all the same). */
static void write_target(const char *path, char *out, size_t len)
{
	char cur[PATH_MAX], to[PATH_MAX], dir[PATH_MAX], next[PATH_MAX];
	ssize_t n;

	snprintf(cur, sizeof(cur), "%s", path);
	for (int hops = 0; hops < 40; hops++) { /* (40: the kernel's own limit) */
		n = readlink(cur, to, sizeof(to) - 1);
		if (n <= 0)
			break;
		to[n] = 0;
		snprintf(dir, sizeof(dir), "%s", cur);
		if (snprintf(next, sizeof(next), "%s/%s", dirname(dir), to) >= (int)sizeof(next))
			break;
		snprintf(cur, sizeof(cur), "%s", to[0] == '/' ? to : next);
	}
	resolve(cur, out, len);
}

/* A file at path (made or not) is one the data pattern matches: its name matches the
 * pattern's last part and its directory is the pattern's, or one of the directories
 * the pattern's directory part matches now (or the path as given matches the whole
 * pattern). */
static bool pattern_matches(const char *pattern, const char *path)
{
	char pd[PATH_MAX], pn[PATH_MAX], target[PATH_MAX], td[PATH_MAX], tn[PATH_MAX];
	char *pdir, *pname, *tdir;
	bool match = false;
	glob_t g;

	if (fnmatch(pattern, path, FNM_PATHNAME | FNM_PERIOD) == 0)
		return true;
	snprintf(pd, sizeof(pd), "%s", pattern);
	snprintf(pn, sizeof(pn), "%s", pattern);
	pdir = dirname(pd);
	pname = basename(pn);
	write_target(path, target, sizeof(target));
	snprintf(td, sizeof(td), "%s", target);
	snprintf(tn, sizeof(tn), "%s", target);
	tdir = dirname(td);
	if (fnmatch(pname, basename(tn), FNM_PERIOD) != 0)
		return false;
	if (!strpbrk(pdir, "*?["))
		return same_dir(pdir, tdir);
	if (glob(pdir, GLOB_ONLYDIR, NULL, &g) == 0)
		for (size_t i = 0; i < g.gl_pathc && !match; i++)
			match = same_dir(g.gl_pathv[i], tdir);
	globfree(&g);
	return match;
}

/* path is the input file, or with data one of the shards its spec names. (A spec that
 * names nothing is refused when the data is opened.) */
static bool names_input(const char *path, const char *input, bool data)
{
	char **shards, why[200];
	size_t n;
	bool same = false;

	if (!data || zinf_token_paths(input, &shards, &n, why, sizeof(why)))
		return same_inode(path, input);
	for (size_t i = 0; i < n && !same; i++)
		same = same_inode(path, shards[i]);
	zinf_token_paths_free(shards, n);
	return same;
}

/* path (written through its links) is not a directory a save of the run makes in
 * --save's directory, nor inside one: a save makes, fills, renames and removes them. */
static int check_in_save_dir(const struct zinf_train_opts *o, const char *path, const char *what,
			     char *err, size_t errlen)
{
	char cur[PATH_MAX], tmp[PATH_MAX], up[PATH_MAX], name[PATH_MAX];
	bool leaf = true;

	write_target(path, cur, sizeof(cur));
	for (;; leaf = false) { /* (basename and dirname change their argument: a copy each) */
		snprintf(tmp, sizeof(tmp), "%s", cur);
		snprintf(name, sizeof(name), "%s", basename(tmp));
		snprintf(tmp, sizeof(tmp), "%s", cur);
		snprintf(up, sizeof(up), "%s", dirname(tmp));
		if (!strcmp(up, cur)) /* "/", "//", ".": the top */
			return 0;
		snprintf(cur, sizeof(cur), "%s", up);
		if (same_dir(cur, o->save_dir) && train_save_dir_name(o, name))
			break;
	}
	snprintf(err, errlen,
		 "%s: %s %s %s, a directory a save of this run makes in the --save directory", path,
		 what, leaf ? "names" : "is inside", name);
	return -EINVAL;
}

int train_check_output(const struct zinf_train_opts *o, const char *what, const char *path,
		       char *err, size_t errlen)
{
	const char *inputs[] = {o->config_path, o->data_path, o->eval_data_path, o->init_config};
	const char *input_flags[] = {"--config", "--data", "--eval-data", "--init"};
	const char *dirs[] = {o->model_dir, o->resume_dir, o->save_dir};
	const char *dir_flags[] = {"--model", "--resume", "--save"};
	char parent[PATH_MAX], base[PATH_MAX], *pdir, *name;

	for (int i = 0; i < 4; i++)
		if (inputs[i] && names_input(path, inputs[i], i == 1 || i == 2)) {
			snprintf(err, errlen, "%s: %s is the %s file (the run would write over it)",
				 path, what, input_flags[i]);
			return -EINVAL;
		}
	for (int i = 1; i < 3; i++) /* a file the data's pattern would read once made */
		if (inputs[i] && zinf_token_spec_is_pattern(inputs[i]) &&
		    pattern_matches(inputs[i], path)) {
			snprintf(err, errlen,
				 "%s: %s matches the %s pattern '%s' (a later run would read it as "
				 "data)",
				 path, what, input_flags[i], inputs[i]);
			return -EINVAL;
		}
	/* a link is judged by what it names (the run writes through it) */
	write_target(path, parent, sizeof(parent));
	snprintf(base, sizeof(base), "%s", parent);
	pdir = dirname(parent); /* (both change their argument: once each) */
	name = basename(base);
	for (int i = 0; i < 3; i++)
		if (dirs[i] && same_dir(pdir, dirs[i]) &&
		    (train_saved_name(name) || !strcmp(name, TRAIN_SAVE_LOCK))) {
			snprintf(err, errlen,
				 "%s: %s names a file a save writes in the %s directory (the run "
				 "would write over it)",
				 path, what, dir_flags[i]);
			return -EINVAL;
		}
	return o->save_dir ? check_in_save_dir(o, path, what, err, errlen) : 0;
}

/* path (the entry as given, or the file its links lead to) has a name a save writes and
 * lies in the save directory. */
static bool saved_over(const char *save_dir, const char *path)
{
	char a[PATH_MAX], b[PATH_MAX], real[PATH_MAX];
	const char *name;

	snprintf(a, sizeof(a), "%s", path);
	snprintf(b, sizeof(b), "%s", path);
	name = basename(b);
	if (same_dir(dirname(a), save_dir) &&
	    (train_saved_name(name) || !strcmp(name, TRAIN_SAVE_LOCK)))
		return true;
	if (!realpath(path, real))
		return false;
	snprintf(a, sizeof(a), "%s", real);
	snprintf(b, sizeof(b), "%s", real);
	name = basename(b);
	return same_dir(dirname(a), save_dir) &&
	       (train_saved_name(name) || !strcmp(name, TRAIN_SAVE_LOCK));
}

int train_check_inputs_unsaved(const struct zinf_train_opts *o, char *err, size_t errlen)
{
	const char *inputs[] = {o->config_path, o->init_config, o->data_path, o->eval_data_path};
	const char *flags[] = {"--config", "--init", "--data", "--eval-data"};
	char **shards, why[200];
	size_t n;
	int rc = 0;

	for (int i = 0; i < 4 && o->save_dir && !rc; i++) {
		if (!inputs[i])
			continue;
		if (i < 2 || zinf_token_paths(inputs[i], &shards, &n, why, sizeof(why))) {
			/* (a data spec that names nothing is refused when the data is opened) */
			if (saved_over(o->save_dir, inputs[i]))
				rc = -EINVAL;
			if (rc)
				snprintf(err, errlen,
					 "%s: the %s file is one a save writes in the --save "
					 "directory %s (the save would write over it)",
					 inputs[i], flags[i], o->save_dir);
			continue;
		}
		for (size_t k = 0; k < n && !rc; k++)
			if (saved_over(o->save_dir, shards[k])) {
				rc = -EINVAL;
				snprintf(
					err, errlen,
					"%s: a %s file is one a save writes in the --save directory "
					"%s (the save would write over it)",
					shards[k], flags[i], o->save_dir);
			}
		zinf_token_paths_free(shards, n);
	}
	return rc;
}

int train_check_outputs_differ(const char *what_a, const char *a, const char *what_b, const char *b,
			       char *err, size_t errlen)
{
	char ta[PATH_MAX], tb[PATH_MAX];

	write_target(a, ta, sizeof(ta));
	write_target(b, tb, sizeof(tb));
	if (strcmp(ta, tb) != 0 && !same_inode(a, b))
		return 0;
	snprintf(err, errlen, "%s: %s is the %s file (one would write over the other)", b, what_b,
		 what_a);
	return -EINVAL;
}
