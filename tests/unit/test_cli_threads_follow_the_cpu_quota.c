/*
 * Under a control group's CPU quota lower than the affinity mask (a container's, a batch
 * job's), the zinf CLI runs OpenMP and OpenBLAS on the quota's CPUs, not a thread per CPU
 * of the mask, unless the user set their thread counts (kept as set); without a quota
 * the CPUs are the mask's. The test makes a child cgroup (v1 cpu, or v2 with the cpu
 * controller) with a quota of one CPU under this process's own group and runs `zinf
 * version` in it; it skips (77) where that cannot be done (not root, no writable cpu
 * controller, a CLI that cannot re-execute itself) or the mask holds one CPU. A serial
 * OpenBLAS (one thread whatever it is told) is expected to say 1.
 */
#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "zinf/config.h"

/* The directory of this process's group in the hierarchy that has the cpu controller
 * (v1) or in the unified one (v2); false if none is found. */
static bool own_group(char *dir, size_t len, bool *v2)
{
	char line[1024], path[512] = "", v1_path[512] = "", mnt[512], root[512], opts[512];
	FILE *f = fopen("/proc/self/cgroup", "r");
	bool found = false;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':'), *p;
		if (!ctl || !(p = strchr(ctl + 1, ':')))
			continue;
		*p++ = '\0';
		p[strcspn(p, "\n")] = '\0';
		ctl++;
		if (!*ctl) {
			snprintf(path, sizeof(path), "%s", p);
			continue;
		}
		for (char *tok = strtok(ctl, ","); tok; tok = strtok(NULL, ","))
			if (!strcmp(tok, "cpu"))
				snprintf(v1_path, sizeof(v1_path), "%s", p);
	}
	fclose(f);
	f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - "), fstype[64];
		const char *want;
		if (!sep || sscanf(line, "%*s %*s %*s %511s %511s", root, mnt) != 2 ||
		    sscanf(sep + 3, "%63s %*s %511s", fstype, opts) != 2)
			continue;
		if (!strcmp(fstype, "cgroup") && *v1_path) {
			bool cpu = false;
			for (char *tok = strtok(opts, ","); tok; tok = strtok(NULL, ","))
				cpu |= !strcmp(tok, "cpu");
			if (!cpu)
				continue;
			want = v1_path;
			*v2 = false;
		} else if (!strcmp(fstype, "cgroup2") && *path && !*v1_path) {
			want = path;
			*v2 = true;
		} else {
			continue;
		}
		if (strncmp(want, root, strlen(root)) != 0)
			continue;
		snprintf(dir, len, "%s%s", mnt, !strcmp(root, "/") ? want : want + strlen(root));
		found = true;
	}
	fclose(f);
	return found;
}

static char made_dir[1100]; /* removed at exit, the test passing or not */

static void remove_made_dir(void)
{
	if (*made_dir)
		rmdir(made_dir);
}

static bool write_file(const char *dir, const char *name, const char *text)
{
	char path[1200];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return false;
	ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok;
}

int main(int argc, char **argv)
{
	char group[1024], *dir = made_dir, env[2600], line[256], want[128];
	unsigned mask, cpus = zinf_host_cpus(&mask);
	int omp = 0, blas_told_2 = 0;
	bool v2 = false, made;
	cpu_set_t set;

	T_CHECK(argc == 2, "usage: %s ZINF_CLI", argv[0]);
	if (sched_getaffinity(0, sizeof(set), &set) || CPU_COUNT(&set) < 2 || geteuid() != 0 ||
	    !own_group(group, sizeof(group), &v2)) {
		fprintf(stderr, "skip: needs root, 2 CPUs and a cgroup cpu controller\n");
		return T_EXIT_SKIP;
	}
	/* the CLI re-executes itself with its defaults (a static build cannot) */
	t_version_line(argv[1], "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT", "OpenMP wait policy ",
		       line, sizeof(line));
	if (strcmp(line, "passive")) {
		fprintf(stderr, "skip: the CLI does not re-execute itself (wait policy %s)\n",
			line);
		return T_EXIT_SKIP;
	}
	/* what OpenBLAS runs when told 2 (a serial build: 1) */
	t_version_line(argv[1], "env OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2", "threads ", line,
		       sizeof(line));
	T_CHECK(sscanf(line, "OpenMP %d, OpenBLAS %d", &omp, &blas_told_2) == 2 && omp == 2 &&
			(blas_told_2 == 1 || blas_told_2 == 2),
		"told 2 threads: %s", line);
	/* without a quota of our own: the mask's CPUs, a thread each */
	if (cpus == mask) {
		snprintf(want, sizeof(want), "%u (affinity mask %u)", mask, mask);
		t_version_line(argv[1], "env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS", "CPUs ",
			       line, sizeof(line));
		T_CHECK(!strcmp(line, want), "no quota: CPUs %s, expected %s", line, want);
	}
	snprintf(dir, sizeof(made_dir), "%s/zinf-test-%d", group, (int)getpid());
	made = mkdir(dir, 0755) == 0;
	if (!made)
		*made_dir = '\0';
	atexit(remove_made_dir);
	if (!made || !(v2 ? write_file(dir, "cpu.max", "100000 100000")
			  : write_file(dir, "cpu.cfs_period_us", "100000") &&
				       write_file(dir, "cpu.cfs_quota_us", "100000"))) {
		fprintf(stderr, "skip: cannot make a cgroup with a CPU quota under %s: %s\n", group,
			strerror(errno));
		return T_EXIT_SKIP;
	}
	snprintf(env, sizeof(env), "sh -c 'echo $$ > \"%s/cgroup.procs\"' 2>&1", dir);
	if (t_run(env, line, sizeof(line)) != 0) {
		fprintf(stderr, "skip: cannot move a process into %s: %s\n", dir, line);
		return T_EXIT_SKIP;
	}
	snprintf(env, sizeof(env),
		 "sh -c 'echo $$ > \"%s/cgroup.procs\" && exec env -u OMP_NUM_THREADS "
		 "-u OPENBLAS_NUM_THREADS -u GOTO_NUM_THREADS \"$@\"' sh",
		 dir);
	t_version_line(argv[1], env, "CPUs ", line, sizeof(line));
	T_CHECK(!strncmp(line, "1 (", 3), "quota of 1 CPU: CPUs %s", line);
	t_version_line(argv[1], env, "threads ", line, sizeof(line));
	T_CHECK(!strcmp(line, "OpenMP 1, OpenBLAS 1"),
		"quota of 1 CPU: threads %s, expected OpenMP 1, OpenBLAS 1", line);
	/* the user's own count is kept */
	snprintf(env, sizeof(env),
		 "sh -c 'echo $$ > \"%s/cgroup.procs\" && exec env OMP_NUM_THREADS=2 "
		 "OPENBLAS_NUM_THREADS=2 \"$@\"' sh",
		 dir);
	t_version_line(argv[1], env, "threads ", line, sizeof(line));
	snprintf(want, sizeof(want), "OpenMP 2, OpenBLAS %d", blas_told_2);
	T_CHECK(!strcmp(line, want), "quota of 1 CPU, the user's 2 threads: threads %s, not %s",
		line, want);
	T_CHECK(rmdir(dir) == 0, "rmdir %s: %s", dir, strerror(errno));
	*made_dir = '\0';
	return T_EXIT_PASS;
}
