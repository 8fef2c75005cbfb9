/* The host memory and CPUs zinf plans with follow the process's control groups, read
 * from made-up /proc/self and /sys/fs/cgroup trees: v2 (memory.max, cpu.max) and v1
 * (memory.limit_in_bytes, cpu.cfs_quota_us over cpu.cfs_period_us); the lowest limit
 * from the process's group up to the mount counts, a parent's too; a mount showing only
 * part of the hierarchy (a container's) is resolved through its root; "max", -1, v1's
 * huge "no limit", garbage and missing files are no limit. On this host the public
 * figures stay within the physical memory and the online CPUs. */
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host_limits.h"
#include "test.h"
#include "zinf/config.h"

static char root[256];

static void put(const char *rel, const char *fmt, ...)
{
	char path[1024], dir[1024];
	va_list ap;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(p - path), path);
		mkdir(dir, 0755);
	}
	f = fopen(path, "w");
	T_CHECK(f, "cannot write %s", path);
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

static void fresh(void)
{
	char cmd[512];

	if (root[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		T_CHECK(system(cmd) == 0, "%s", cmd);
	}
	snprintf(root, sizeof(root), "/tmp/zinf-limits-XXXXXX");
	T_CHECK(mkdtemp(root), "mkdtemp");
}

static void expect(uint64_t memory, double cpus, const char *what)
{
	struct zinf_host_limits l;

	zinf_host_limits_read(root, &l);
	T_CHECK(l.memory == memory && l.cpus == cpus, "%s: memory %llu, cpus %g; want %llu, %g",
		what, (unsigned long long)l.memory, l.cpus, (unsigned long long)memory, cpus);
}

#define V2_MOUNT "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev shared:4 - cgroup2 cgroup2 rw\n"

int main(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	uint64_t ram = (uint64_t)pages * (uint64_t)page, host;
	unsigned cpus = zinf_cpu_count();

	/* v2: the job's limit, then a parent's lower one; quotas rounded by the caller */
	fresh();
	put("proc/self/cgroup", "0::/system.slice/job.scope\n");
	put("proc/self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n" V2_MOUNT);
	put("sys/fs/cgroup/system.slice/job.scope/memory.max", "1073741824\n");
	put("sys/fs/cgroup/system.slice/job.scope/cpu.max", "150000 100000\n");
	put("sys/fs/cgroup/system.slice/memory.max", "max\n");
	put("sys/fs/cgroup/system.slice/cpu.max", "max 100000\n");
	expect(1073741824, 1.5, "v2 job limits");
	put("sys/fs/cgroup/system.slice/memory.max", "536870912\n");
	put("sys/fs/cgroup/memory.max", "268435456\n"); /* the mount's own: counts too */
	expect(268435456, 1.5, "v2 parent limits");

	/* v2 unlimited, garbage and empty files: none */
	fresh();
	put("proc/self/cgroup", "0::/a\n");
	put("proc/self/mountinfo", V2_MOUNT);
	put("sys/fs/cgroup/a/memory.max", "max\n");
	put("sys/fs/cgroup/a/cpu.max", "max 100000\n");
	expect(0, 0, "v2 max");
	put("sys/fs/cgroup/a/memory.max", "12x\n");
	put("sys/fs/cgroup/a/cpu.max", "100000 0\n");
	expect(0, 0, "v2 garbage");
	put("sys/fs/cgroup/a/memory.max", "");
	put("sys/fs/cgroup/a/cpu.max", "-5 100000\n");
	expect(0, 0, "v2 empty");

	/* a container's view: the mount shows only its own part of the hierarchy */
	fresh();
	put("proc/self/cgroup", "0::/docker/abc/inner\n");
	put("proc/self/mountinfo",
	    "40 30 0:26 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n");
	put("sys/fs/cgroup/inner/memory.max", "max\n");
	put("sys/fs/cgroup/memory.max", "2147483648\n");
	expect(2147483648ull, 0, "v2 mount root");
	/* a group outside the mount's part (another namespace's view): the mount's own */
	put("proc/self/cgroup", "0::/elsewhere\n");
	expect(2147483648ull, 0, "v2 group outside the mount");

	/* v1, controllers on separate mounts, v1's "no limit" */
	fresh();
	put("proc/self/cgroup", "9:name=systemd:/\n4:memory:/process_api/x\n"
				"1:cpu,cpuacct:/slurm/uid_0/job_7\n0::/\n");
	put("proc/self/mountinfo",
	    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup "
	    "rw,cpu,cpuacct\n");
	put("sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes", "9223372036854771712\n");
	put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
	put("sys/fs/cgroup/cpu,cpuacct/slurm/uid_0/job_7/cpu.cfs_quota_us", "-1\n");
	put("sys/fs/cgroup/cpu,cpuacct/slurm/uid_0/job_7/cpu.cfs_period_us", "100000\n");
	expect(0, 0, "v1 unlimited");
	put("sys/fs/cgroup/memory/process_api/memory.limit_in_bytes", "4294967296\n");
	put("sys/fs/cgroup/cpu,cpuacct/slurm/uid_0/cpu.cfs_quota_us", "250000\n");
	put("sys/fs/cgroup/cpu,cpuacct/slurm/uid_0/cpu.cfs_period_us", "100000\n");
	expect(4294967296ull, 2.5, "v1 parent limits");

	/* both mounted (hybrid): the lower of the two */
	put("proc/self/mountinfo",
	    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	    "41 31 0:40 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
	put("sys/fs/cgroup/unified/memory.max", "1048576\n");
	expect(1048576, 0, "hybrid");

	/* nothing readable: none */
	fresh();
	expect(0, 0, "no proc files");

	/* this host: within the physical memory and the online CPUs */
	host = zinf_host_memory_bytes();
	T_CHECK(host > 0 && host <= ram, "host memory %llu of %llu physical",
		(unsigned long long)host, (unsigned long long)ram);
	T_CHECK(cpus >= 1 && cpus <= (unsigned)sysconf(_SC_NPROCESSORS_ONLN), "cpus %u", cpus);
	fresh();
	{
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		T_CHECK(system(cmd) == 0, "%s", cmd);
	}
	return T_EXIT_PASS;
}
