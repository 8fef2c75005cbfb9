/* Timeline of complete events on named tracks, written as Chrome trace JSON (see
 * timeline.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "number_text.h"
#include "timeline.h"

struct event {
	uint64_t t0, t1; /* ns */
	uint8_t track;
	char name[47];
};

struct zinf_timeline {
	pthread_mutex_t lock;
	struct event *ev;
	uint64_t n, cap;
	uint64_t origin; /* ns: time 0 of the file */
};

static const char *const track_names[ZINF_TRACKS] = {
	"NVMe read", "NVMe write", "H2D copy", "D2H copy", "compute", "wait for data", "optimizer",
};

uint64_t zinf_timeline_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int zinf_timeline_create(struct zinf_timeline **out)
{
	struct zinf_timeline *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->cap = 4096;
	t->ev = malloc(t->cap * sizeof(*t->ev));
	if (!t->ev) {
		free(t);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->lock, NULL);
	t->origin = zinf_timeline_now_ns();
	*out = t;
	return 0;
}

void zinf_timeline_destroy(struct zinf_timeline *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t->ev);
	free(t);
}

void zinf_timeline_add(struct zinf_timeline *t, enum zinf_track track, const char *name,
		       uint64_t t0_ns, uint64_t t1_ns)
{
	struct event *e;

	if (!t || (unsigned)track >= ZINF_TRACKS)
		return;
	pthread_mutex_lock(&t->lock);
	if (t->n == t->cap) {
		struct event *v = realloc(t->ev, 2 * t->cap * sizeof(*v));
		if (!v) { /* out of memory: drop the event rather than fail the work */
			pthread_mutex_unlock(&t->lock);
			return;
		}
		t->ev = v;
		t->cap *= 2;
	}
	e = &t->ev[t->n++];
	e->t0 = t0_ns;
	e->t1 = t1_ns > t0_ns ? t1_ns : t0_ns;
	e->track = (uint8_t)track;
	snprintf(e->name, sizeof(e->name), "%s", name);
	pthread_mutex_unlock(&t->lock);
}

uint64_t zinf_timeline_count(struct zinf_timeline *t)
{
	uint64_t n;

	pthread_mutex_lock(&t->lock);
	n = t->n;
	pthread_mutex_unlock(&t->lock);
	return n;
}

static void json_name(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc((unsigned char)*s < 0x20 ? '?' : *s, f);
	}
	fputc('"', f);
}

int zinf_timeline_check_path(const char *path, char *why, size_t why_len)
{
	const char *slash = strrchr(path, '/');
	char dir[4096] = ".";
	struct stat st;

	if (slash == path) {
		snprintf(dir, sizeof(dir), "/");
	} else if (slash && snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path) >=
				    (int)sizeof(dir)) {
		snprintf(why, why_len, "%s", strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
		snprintf(why, why_len, "%s: %s", dir, strerror(ENOTDIR));
		return -ENOTDIR;
	}
	if (access(dir, W_OK | X_OK) != 0) {
		int rc = -errno;
		snprintf(why, why_len, "the directory %s: %s", dir, strerror(-rc));
		return rc;
	}
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(why, why_len, "%s", strerror(EISDIR));
		return -EISDIR;
	}
	return 0;
}

int zinf_timeline_write(struct zinf_timeline *t, const char *path)
{
	char tmp[4096];
	FILE *f;
	locale_t was;
	int rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	pthread_mutex_lock(&t->lock);
	fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", f);
	fputs("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": \"zinf\"}}",
	      f);
	for (int k = 0; k < ZINF_TRACKS; k++) {
		fprintf(f,
			",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
			k + 1, track_names[k]);
		fprintf(f,
			",\n{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": {\"sort_index\": %d}}",
			k + 1, k);
	}
	was = zinf_c_numbers_begin(); /* %.3f with a '.', as JSON wants */
	for (uint64_t i = 0; i < t->n; i++) {
		const struct event *e = &t->ev[i];
		double ts = (double)(e->t0 - (e->t0 >= t->origin ? t->origin : e->t0)) / 1000.0;
		fputs(",\n{\"name\": ", f);
		json_name(f, e->name);
		fprintf(f, ", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f}",
			e->track + 1, ts, (double)(e->t1 - e->t0) / 1000.0);
	}
	zinf_c_numbers_end(was);
	pthread_mutex_unlock(&t->lock);
	fputs("\n]}\n", f);
	if (fflush(f) || ferror(f) || fsync(fileno(f)))
		rc = -EIO;
	if (fclose(f) && !rc)
		rc = -EIO;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}
