/* libFuzzer harness: the file list of a committed final save (final.ready/zinf_files.txt,
 * read by train_save_recover when a stopped run left it, and moved in). A save
 * directory (fuzz_util.h) holds a user's notes.txt and an earlier save's zinf_state.json,
 * tokenizer.json and model-00001-of-00002.safetensors ("old"), and final.ready with the
 * list and the files it names ("new"). Input: two bytes, two bits per listed name (the
 * first eight): 0 the file is in final.ready, 1 in the save directory only (moved in
 * before a stop), 2 in both, 3 in neither; then the list's text. The recovery must
 * succeed exactly when the list is well formed (names a save writes, one a line, each
 * ending in a newline; no NUL byte), names config.json and every name is in
 * one of the two places; then each is in the save directory with the right contents, an
 * earlier save's model and state files it does not name are gone, and final.ready is
 * gone. Otherwise nothing is touched. The user's file always stays. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "train_internal.h"
#include "zinf/log.h"

#define MAX_NAMES 2048

static char save[160], ready[200];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	zinf_log_set_level(ZINF_LOG_ERROR);
	fuzz_scratch();
	snprintf(save, sizeof(save), "%s/save", fuzz_dir);
	snprintf(ready, sizeof(ready), "%s/%s", save, TRAIN_FINAL_READY);
	return 0;
}

static void put(const char *dir, const char *name, const void *p, size_t n)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n))
		abort();
	close(fd);
}

/* The contents of dir/name: "old", "new", "" (another), or NULL when it is not there. */
static const char *what(const char *dir, const char *name)
{
	char path[512], buf[8];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	return n == 3 && !memcmp(buf, "old", 3)	  ? "old"
	       : n == 3 && !memcmp(buf, "new", 3) ? "new"
						  : "";
}

static bool there(const char *dir, const char *name)
{
	return what(dir, name) != NULL;
}

static void fail(const char *why, const char *name, int rc, const char *err)
{
	fprintf(stderr, "%s: %s (rc %d: %s)\n", why, name, rc, err);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const earlier[] = {"zinf_state.json", "tokenizer.json",
					      "model-00001-of-00002.safetensors"};
	char *text, *names[MAX_NAMES], err[1024] = "";
	int where[MAX_NAMES], n = 0, rc;
	bool well_formed = true, has_config = false, all_there = true;

	if (size < 2 || size > 4096)
		return 0;
	fuzz_scratch_remove();
	if (mkdir(fuzz_dir, 0700) || mkdir(save, 0700) || mkdir(ready, 0700))
		abort();
	put(save, "notes.txt", "mine", 4);
	for (size_t i = 0; i < sizeof(earlier) / sizeof(earlier[0]); i++)
		put(save, earlier[i], "old", 3);
	put(ready, TRAIN_FINAL_LIST, data + 2, size - 2);

	/* the list as the reader takes it: one name a line, no NUL byte anywhere */
	text = strndup((const char *)data + 2, size - 2);
	if (memchr(data + 2, 0, size - 2))
		well_formed = false;
	for (char *line = text, *end; *line && well_formed; line = end + 1) {
		end = strchr(line, '\n');
		if (!end || !train_saved_name((*end = 0, line)) || n == MAX_NAMES) {
			well_formed = false;
			break;
		}
		names[n] = line;
		where[n] = n < 8 ? (data[n / 4] >> (2 * (n % 4))) & 3 : 0;
		has_config |= !strcmp(line, "config.json");
		n++;
	}
	for (int i = 0; i < n && well_formed; i++) {
		/* a name listed twice is placed as its first listing says */
		for (int j = 0; j < i; j++)
			if (!strcmp(names[j], names[i]))
				where[i] = where[j];
		/* tokenizer.model.v<digits> may be too long a name for a file: in neither place */
		if (strlen(names[i]) > 200) {
			all_there = false;
			continue;
		}
		if (where[i] == 0 || where[i] == 2)
			put(ready, names[i], "new", 3);
		if (where[i] == 1 || where[i] == 2)
			put(save, names[i], "old", 3);
		all_there &= where[i] != 3 || there(save, names[i]);
	}
	bool expect = well_formed && has_config && all_there;
	rc = train_save_recover(save, err, sizeof(err));
	if ((rc == 0) != expect)
		fail(expect ? "refused a good list" : "took a bad list", "", rc, err);
	if (!there(save, "notes.txt"))
		fail("the user's file went", "notes.txt", rc, err);
	if (rc) {
		if (!there(ready, TRAIN_FINAL_LIST))
			fail("a refused save was touched", TRAIN_FINAL_LIST, rc, err);
		for (size_t i = 0; i < sizeof(earlier) / sizeof(earlier[0]); i++)
			if (!there(save, earlier[i]))
				fail("a refused save removed an earlier file", earlier[i], rc, err);
	} else {
		if (there(save, TRAIN_FINAL_READY) || there(save, TRAIN_FINAL_DONE))
			fail("left", TRAIN_FINAL_READY, rc, err);
		for (int i = 0; i < n; i++) {
			const char *w = what(save, names[i]);
			const char *want = where[i] == 1 || where[i] == 3 ? "old" : "new";
			if (!w || strcmp(w, want))
				fail("a listed file is not the right one", names[i], rc, err);
		}
		for (size_t i = 0; i < sizeof(earlier) / sizeof(earlier[0]); i++) {
			bool listed = false;
			for (int j = 0; j < n; j++)
				listed |= !strcmp(names[j], earlier[i]);
			/* the tokenizer may be the user's: it stays */
			if (!listed && there(save, earlier[i]) != (i == 1))
				fail("an earlier file unlisted", earlier[i], rc, err);
		}
	}
	free(text);
	return 0;
}
