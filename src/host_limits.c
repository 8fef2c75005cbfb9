/*
 * The host's limits on this process. A cgroup's limit is found by walking from the
 * process's group (/proc/self/cgroup) up to the hierarchy's mount (/proc/self/mountinfo
 * names where it is mounted and which part of the hierarchy the mount shows, as inside
 * a container), taking the lowest limit met: a job's group may sit below a parent that
 * holds less. Both versions are read, for hosts that mount both.
 */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host_limits.h"
#include "zinf/config.h"

#define PATH_LEN 4096

/* Values at or above this are v1's "no limit" (the largest page-aligned long). */
#define V1_NO_LIMIT (1ull << 62)

/* One hierarchy's group directory (under root) and its mount point; false when the
 * process is in none for this controller. */
struct group_dir {
	char dir[PATH_LEN];
	size_t mount_len; /* dir's first mount_len characters: the mount point */
};

static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	bool ok;

	if (!f)
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

/* true when list (comma-separated) holds word */
static bool list_has(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; p && *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len == n && !strncmp(p, word, n))
			return true;
		p = end ? end + 1 : NULL;
	}
	return false;
}

/* The process's group path in the v2 hierarchy (controller NULL) or in the v1 hierarchy
 * holding controller. */
static bool group_path(const char *root, const char *controller, char *out, size_t len)
{
	char path[PATH_LEN], line[PATH_LEN];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/proc/self/cgroup", root);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		c2[1 + strcspn(c2 + 1, "\n")] = '\0';
		if (controller ? list_has(c1 + 1, controller) : !strcmp(line, "0:")) {
			snprintf(out, len, "%s", c2 + 1);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* The mount of the v2 hierarchy (controller NULL) or of the v1 one holding controller:
 * the part of the hierarchy it shows (mroot) and where (mpoint). */
static bool find_mount(const char *root, const char *controller, char *mroot, char *mpoint,
		       size_t len)
{
	char path[PATH_LEN], line[PATH_LEN];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/proc/self/mountinfo", root);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		/* id parent dev root point options [optional...] - fstype source superoptions */
		char *save = NULL, *field[5], *sep = strstr(line, " - "), *fstype, *super;
		int n = 0;
		if (!sep)
			continue;
		*sep = '\0';
		fstype = strtok_r(sep + 3, " \n", &save);
		strtok_r(NULL, " \n", &save); /* source */
		super = strtok_r(NULL, " \n", &save);
		if (!fstype ||
		    (controller ? strcmp(fstype, "cgroup") || !super || !list_has(super, controller)
				: strcmp(fstype, "cgroup2")))
			continue;
		save = NULL;
		for (char *t = strtok_r(line, " ", &save); t && n < 5;
		     t = strtok_r(NULL, " ", &save))
			field[n++] = t;
		if (n < 5)
			continue;
		snprintf(mroot, len, "%s", field[3]);
		snprintf(mpoint, len, "%s", field[4]);
		found = true;
	}
	fclose(f);
	return found;
}

static bool group_dir(const char *root, const char *controller, struct group_dir *g)
{
	char gpath[PATH_LEN], mroot[PATH_LEN], mpoint[PATH_LEN];
	const char *rel = "";
	size_t rl;
	int n;

	if (!group_path(root, controller, gpath, sizeof(gpath)) ||
	    !find_mount(root, controller, mroot, mpoint, sizeof(mroot)))
		return false;
	rl = strlen(mroot);
	/* the group below the mount's root: its path from there; else (another namespace's
	 * view) the mount's own directory */
	if (!strcmp(mroot, "/"))
		rel = gpath;
	else if (!strncmp(gpath, mroot, rl) && (gpath[rl] == '/' || !gpath[rl]))
		rel = gpath + rl;
	n = snprintf(g->dir, sizeof(g->dir), "%s%s", root, mpoint);
	if (n < 0 || (size_t)n >= sizeof(g->dir))
		return false;
	g->mount_len = (size_t)n;
	while (g->mount_len > 1 && g->dir[g->mount_len - 1] == '/')
		g->dir[--g->mount_len] = '\0';
	n = snprintf(g->dir + g->mount_len, sizeof(g->dir) - g->mount_len, "%s",
		     strcmp(rel, "/") ? rel : "");
	return n >= 0 && (size_t)n < sizeof(g->dir) - g->mount_len;
}

/* Up one level; false at the mount point. */
static bool group_up(struct group_dir *g)
{
	char *slash;

	if (strlen(g->dir) <= g->mount_len)
		return false;
	slash = strrchr(g->dir + g->mount_len, '/');
	if (!slash)
		return false;
	*slash = '\0';
	return true;
}

/* A whole decimal number with nothing after it but blanks. */
static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	*v = strtoull(s, &end, 10);
	while (*end == ' ' || *end == '\t')
		end++;
	return !*end;
}

static void lower(uint64_t *limit, uint64_t v)
{
	if (v && (!*limit || v < *limit))
		*limit = v;
}

static void lower_cpus(double *limit, double v)
{
	if (v > 0 && (!*limit || v < *limit))
		*limit = v;
}

/* v2: memory.max ("max" or bytes); cpu.max ("max PERIOD" or "QUOTA PERIOD"). */
static void read_v2(const char *root, struct zinf_host_limits *out)
{
	struct group_dir g;
	char path[PATH_LEN + 16], line[256];

	if (!group_dir(root, NULL, &g))
		return;
	do {
		uint64_t v, quota, period;
		char *sp;
		snprintf(path, sizeof(path), "%s/memory.max", g.dir);
		if (read_line(path, line, sizeof(line)) && parse_u64(line, &v))
			lower(&out->memory, v);
		snprintf(path, sizeof(path), "%s/cpu.max", g.dir);
		if (read_line(path, line, sizeof(line)) && (sp = strchr(line, ' '))) {
			*sp = '\0';
			if (parse_u64(line, &quota) && parse_u64(sp + 1, &period) && period)
				lower_cpus(&out->cpus, (double)quota / (double)period);
		}
	} while (group_up(&g));
}

/* v1: memory.limit_in_bytes; cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us. */
static void read_v1(const char *root, struct zinf_host_limits *out)
{
	struct group_dir g;
	char path[PATH_LEN + 32], line[256];

	if (group_dir(root, "memory", &g))
		do {
			uint64_t v;
			snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", g.dir);
			if (read_line(path, line, sizeof(line)) && parse_u64(line, &v) &&
			    v < V1_NO_LIMIT)
				lower(&out->memory, v);
		} while (group_up(&g));
	if (group_dir(root, "cpu", &g))
		do {
			uint64_t quota, period;
			snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", g.dir);
			if (!read_line(path, line, sizeof(line)) || !parse_u64(line, &quota))
				continue; /* "-1": none */
			snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", g.dir);
			if (read_line(path, line, sizeof(line)) && parse_u64(line, &period) &&
			    period)
				lower_cpus(&out->cpus, (double)quota / (double)period);
		} while (group_up(&g));
}

void zinf_host_limits_read(const char *root, struct zinf_host_limits *out)
{
	out->memory = 0;
	out->cpus = 0;
	read_v2(root, out);
	read_v1(root, out);
}

uint64_t zinf_host_memory_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
	struct zinf_host_limits lim;

	zinf_host_limits_read("", &lim);
	if (lim.memory && (!ram || lim.memory < ram))
		return lim.memory;
	return ram;
}

unsigned zinf_host_cpus(unsigned *mask)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = online > 0 ? (unsigned)online : 1;
	struct zinf_host_limits lim;
	cpu_set_t set;

	if (!sched_getaffinity(0, sizeof(set), &set) && CPU_COUNT(&set) > 0)
		n = (unsigned)CPU_COUNT(&set);
	if (mask)
		*mask = n;
	zinf_host_limits_read("", &lim);
	if (lim.cpus > 0 && ceil(lim.cpus) < (double)n)
		n = (unsigned)ceil(lim.cpus);
	return n ? n : 1;
}

unsigned zinf_cpu_count(void)
{
	return zinf_host_cpus(NULL);
}
