/*
 * What this process may use of the host (src/host_limits.c): the CPUs it may run on and
 * the limits of its control groups (v1 and v2), as a container or a batch scheduler's
 * job (Slurm, Kubernetes) sets them. zinf_host_memory_bytes and zinf_cpu_count apply
 * them; reading is split out so that tests can feed a made-up tree.
 */
#ifndef ZINF_SRC_HOST_LIMITS_H
#define ZINF_SRC_HOST_LIMITS_H

#include <stdint.h>

struct zinf_host_limits {
	uint64_t memory; /* the lowest memory limit on the way to the root, bytes; 0: none */
	double cpus;	 /* the lowest CPU quota (quota / period), in CPUs; 0: none */
};

/* The limits of this process's cgroups, reading /proc/self/cgroup, /proc/self/mountinfo
 * and the cgroup files under root ("" for this host; a test's directory holding a
 * made-up proc/ and sys/). What cannot be read or parsed counts as no limit. */
void zinf_host_limits_read(const char *root, struct zinf_host_limits *out);

/* The CPUs this process may use: those of its affinity mask, fewer under a cgroup CPU
 * quota (rounded up); at least 1. */
unsigned zinf_cpu_count(void);

#endif /* ZINF_SRC_HOST_LIMITS_H */
