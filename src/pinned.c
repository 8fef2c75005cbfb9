/*
 * Pinned pool (see pinned.h): one mapping, placed with hwloc, locked, sub-allocated by
 * an arena with FIFO back-pressure.
 *
 * Create order matters: limits are checked before anything is mapped (so a pool that
 * cannot be locked fails fast with the fix, not with the OOM killer later); the mapping
 * is bound to its NUMA node before its pages are first touched, because first touch is
 * what places a page; locking (mlock, or cudaHostRegister) then faults every page in on
 * that node.
 */
#include <errno.h>
#include <hwloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "arena.h"
#include "budget.h"
#include "device.h"
#include "pinned.h"
#include "thread_error.h"
#include "zinf/config.h"
#include "zinf/error.h"
#include "zinf/log.h"

#define PINNED_MIN_ALIGN 4096ull
#define CAP_IPC_LOCK_BIT 14

struct zinf_pinned {
	void *base; /* (size) bytes, page-aligned */
	uint64_t size;
	uint64_t align;
	struct zinf_device *device; /* registered with it, or NULL */
	bool locked;		    /* mlock or host_register done */
	bool registered;	    /* through the device (undo with unregister) */
	int numa_node;
	struct zinf_arena arena;
	uint64_t err_serial; /* tags this pool's messages (io/thread_error.h) */
};

/* The calling thread's last pool error (io/thread_error.h: the store's mover and the
 * model's, the optimizer's and the gradient worker's threads allocate from one pool). */
static __thread struct zinf_thread_error last_error;

static int set_error(struct zinf_pinned *pool, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int set_error(struct zinf_pinned *pool, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	zinf_thread_error_vset(&last_error, pool, pool ? pool->err_serial : 0, fmt, ap);
	va_end(ap);
	return code;
}

void zinf_pinned_opts_init(struct zinf_pinned_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->lock = ZINF_PINNED_LOCK_REQUIRED;
	opts->numa_bind = true;
	opts->align = PINNED_MIN_ALIGN;
	opts->max_buffers = 4096;
}

/* ---- limits ---------------------------------------------------------------------------- */

/* A "Key:  value" line of /proc/self/status, as an unsigned number in base. */
static bool proc_status_value(const char *key, int base, unsigned long long *out)
{
	char line[256];
	size_t klen = strlen(key);
	bool found = false;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			*out = strtoull(line + klen + 1, NULL, base);
			found = true;
		}
	}
	fclose(f);
	return found;
}

static bool has_cap_ipc_lock(void)
{
	unsigned long long caps = 0;

	return proc_status_value("CapEff", 16, &caps) && (caps >> CAP_IPC_LOCK_BIT) & 1;
}

static const char *fmt_limit(rlim_t v, char *buf, size_t len)
{
	if (v == RLIM_INFINITY)
		return "unlimited";
	return zinf_format_bytes((uint64_t)v, buf, len);
}

int zinf_memlock_check(uint64_t bytes, const char *what, char *err, size_t errlen)
{
	unsigned long long locked_kib = 0;
	struct rlimit rl;
	uint64_t need;
	char a[32], b[32], c[32], d[32];

	if (has_cap_ipc_lock())
		return 0; /* CAP_IPC_LOCK: RLIMIT_MEMLOCK does not apply */
	if (getrlimit(RLIMIT_MEMLOCK, &rl)) {
		snprintf(err, errlen, "%s: getrlimit(RLIMIT_MEMLOCK): %s", what, strerror(errno));
		return -errno;
	}
	proc_status_value("VmLck", 10, &locked_kib);
	need = bytes + (uint64_t)locked_kib * 1024;
	if (rl.rlim_cur == RLIM_INFINITY || (uint64_t)rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max == RLIM_INFINITY || (uint64_t)rl.rlim_max >= need) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
			zinf_logf(ZINF_LOG_INFO,
				  "memlock: raised RLIMIT_MEMLOCK to its hard limit %s",
				  fmt_limit(rl.rlim_max, a, sizeof(a)));
			return 0;
		}
	}
	snprintf(
		err, errlen,
		"%s: cannot lock %s (%s already locked): RLIMIT_MEMLOCK is %s (hard limit %s) and the process lacks CAP_IPC_LOCK; fix: 'ulimit -l unlimited' in the launching shell, a '* - memlock unlimited' line in /etc/security/limits.conf, LimitMEMLOCK=infinity for a systemd service or '--ulimit memlock=-1' for docker; or lower pinned_memory_limit",
		what, zinf_format_bytes(bytes, a, sizeof(a)),
		zinf_format_bytes((uint64_t)locked_kib * 1024, b, sizeof(b)),
		fmt_limit(rl.rlim_cur, c, sizeof(c)), fmt_limit(rl.rlim_max, d, sizeof(d)));
	return -EPERM;
}

/* The memory limit of this process's cgroup (v2 memory.max or v1 limit_in_bytes), or
 * 0 when there is none or it cannot be read. path receives the file it came from. */
static uint64_t cgroup_memory_limit(char *path, size_t plen)
{
	char line[512], rel[512] = "", val[64];
	bool v2 = false;
	uint64_t limit = 0;
	FILE *f = fopen("/proc/self/cgroup", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		if (strncmp(line, "0::", 3) == 0 && !rel[0]) {
			snprintf(rel, sizeof(rel), "%s", line + 3);
			v2 = true;
		} else if (strstr(line, ":memory:")) {
			snprintf(rel, sizeof(rel), "%s", strstr(line, ":memory:") + 8);
			v2 = false;
		}
	}
	fclose(f);
	for (int attempt = 0; attempt < 2 && !limit; attempt++) {
		const char *r = attempt ? "" : rel; /* in a container the view may be rooted */

		if (v2)
			snprintf(path, plen, "/sys/fs/cgroup%s/memory.max", r);
		else
			snprintf(path, plen, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", r);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(val, sizeof(val), f) && strncmp(val, "max", 3) != 0)
			limit = strtoull(val, NULL, 10);
		fclose(f);
		if (!limit)
			break;
	}
	return limit >= (1ull << 62) ? 0 : limit; /* v1 writes "no limit" as ~2^63 */
}

/* ---- placement ------------------------------------------------------------------------- */

/* Bind [base, base + size) to the NUMA node nearest opts->device's GPU, or the calling
 * thread's node. Returns the node's logical index, or -1 (unknown or not bound). Never
 * fails the pool: placement is a speed matter, logged when it cannot be done. */
static int numa_place(void *base, uint64_t size, struct zinf_device *device, bool bind)
{
	hwloc_topology_t topo;
	hwloc_bitmap_t nodes = NULL, cpus = NULL;
	char busid[32];
	int node = -1;

	if (hwloc_topology_init(&topo))
		return -1;
	if (device && zinf_device_registers_dma(device) &&
	    zinf_device_pci_bus_id(device, busid, sizeof(busid)) == 0)
		hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	else
		busid[0] = '\0';
	if (hwloc_topology_load(topo))
		goto out_topo;
	nodes = hwloc_bitmap_alloc();
	cpus = hwloc_bitmap_alloc();
	if (!nodes || !cpus)
		goto out_maps;
	if (busid[0]) {
		hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(topo, busid);
		hwloc_obj_t anc = pci ? hwloc_get_non_io_ancestor_obj(topo, pci) : NULL;

		if (anc && anc->nodeset)
			hwloc_bitmap_copy(nodes, anc->nodeset);
		else
			zinf_logf(ZINF_LOG_WARN, "pinned: GPU %s not found in the hwloc topology",
				  busid);
	} else if (hwloc_get_last_cpu_location(topo, cpus, HWLOC_CPUBIND_THREAD) == 0) {
		hwloc_cpuset_to_nodeset(topo, cpus, nodes);
	}
	if (hwloc_bitmap_iszero(nodes))
		goto out_maps;
	/* hwloc numbers NUMA nodes by OS index in nodesets; report the first. */
	node = hwloc_bitmap_first(nodes);
	if (!bind || hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE) < 2)
		goto out_maps; /* one node: nothing to choose */
	if (hwloc_set_area_membind(topo, base, size, nodes, HWLOC_MEMBIND_BIND,
				   HWLOC_MEMBIND_BYNODESET)) {
		zinf_logf(ZINF_LOG_WARN, "pinned: cannot bind the pool to NUMA node %d: %s", node,
			  strerror(errno));
		node = -1;
	}
out_maps:
	hwloc_bitmap_free(nodes);
	hwloc_bitmap_free(cpus);
out_topo:
	hwloc_topology_destroy(topo);
	return node;
}

/* ---- create / destroy ------------------------------------------------------------------ */

static uint64_t default_size(void)
{
	return zinf_host_memory_bytes() / 4;
}

/* Lock the pool: through the device when it pins for DMA, else mlock. */
static int pool_lock(struct zinf_pinned *pool, char *err, size_t errlen)
{
	int rc;

	if (pool->device && zinf_device_registers_dma(pool->device)) {
		rc = zinf_device_host_register(pool->device, pool->base, pool->size);
		if (rc) {
			snprintf(err, errlen, "pinned pool: %s",
				 zinf_device_last_error(pool->device));
			return rc;
		}
		pool->registered = true;
	} else {
		rc = zinf_memlock_check(pool->size, "pinned pool", err, errlen);
		if (rc)
			return rc;
		if (mlock(pool->base, pool->size)) {
			char sz[32];

			rc = -errno;
			snprintf(
				err, errlen,
				"pinned pool: mlock of %s failed: %s; check 'ulimit -l' and the cgroup memory limit, or lower pinned_memory_limit",
				zinf_format_bytes(pool->size, sz, sizeof(sz)), strerror(errno));
			return rc;
		}
	}
	pool->locked = true;
	return 0;
}

/* Fault every page in (first touch places it) when the pool is not locked. */
static void pool_populate(struct zinf_pinned *pool)
{
	long page = sysconf(_SC_PAGESIZE);

	if (madvise(pool->base, pool->size, MADV_POPULATE_WRITE) == 0)
		return;
	for (uint64_t off = 0; off < pool->size; off += (uint64_t)page)
		((volatile char *)pool->base)[off] = 0;
}

int zinf_pinned_create(const struct zinf_pinned_opts *opts, struct zinf_pinned **out, char *err,
		       size_t errlen)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), size, cg;
	struct zinf_pinned *pool;
	char sz[32], lim[32], cgpath[640];
	int rc;

	*out = NULL;
	if (errlen)
		err[0] = '\0';
	if (opts->align < PINNED_MIN_ALIGN || (opts->align & (opts->align - 1))) {
		snprintf(err, errlen, "pinned pool: align %llu is not a power of two >= 4096",
			 (unsigned long long)opts->align);
		return -EINVAL;
	}
	if ((unsigned)opts->lock > ZINF_PINNED_LOCK_NONE || !opts->max_buffers) {
		snprintf(err, errlen, "pinned pool: invalid lock mode %d or max_buffers %u",
			 (int)opts->lock, opts->max_buffers);
		return -EINVAL;
	}
	size = opts->size ? opts->size : default_size();
	size = (size + page - 1) & ~(page - 1);
	/* pinned memory is host memory that cannot be swapped */
	rc = zinf_budget_fits_host("pinned", "pinned_memory_limit", size, NULL, err, errlen);
	if (rc)
		return rc;
	cg = cgroup_memory_limit(cgpath, sizeof(cgpath));
	if (cg && size > cg) {
		snprintf(
			err, errlen,
			"pinned pool: %s does not fit the cgroup memory limit of %s (%s); raise the container's memory limit or lower pinned_memory_limit",
			zinf_format_bytes(size, sz, sizeof(sz)),
			zinf_format_bytes(cg, lim, sizeof(lim)), cgpath);
		return -ENOMEM;
	}
	/* Fail before mapping when the pool could never be locked. */
	if (opts->lock == ZINF_PINNED_LOCK_REQUIRED &&
	    !(opts->device && zinf_device_registers_dma(opts->device))) {
		rc = zinf_memlock_check(size, "pinned pool", err, errlen);
		if (rc)
			return rc;
	}
	pool = calloc(1, sizeof(*pool));
	if (!pool) {
		snprintf(err, errlen, "pinned pool: out of host memory");
		return -ENOMEM;
	}
	pool->size = size;
	pool->err_serial = zinf_thread_error_serial();
	pool->align = opts->align;
	pool->device = opts->device;
	pool->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pool->base == MAP_FAILED) {
		rc = -errno;
		snprintf(err, errlen, "pinned pool: cannot map %s: %s",
			 zinf_format_bytes(size, sz, sizeof(sz)), strerror(errno));
		goto out_free;
	}
	/* Huge pages where the kernel allows them: fewer TLB misses for the copy engines
	 * and a faster register. Only a hint; the pool works without. */
	madvise(pool->base, size, MADV_HUGEPAGE);
	pool->numa_node = numa_place(pool->base, size, opts->device, opts->numa_bind);
	if (opts->lock != ZINF_PINNED_LOCK_NONE) {
		rc = pool_lock(pool, err, errlen);
		if (rc && opts->lock == ZINF_PINNED_LOCK_REQUIRED)
			goto out_unmap;
		if (rc) {
			zinf_logf(ZINF_LOG_WARN, "%s (continuing unlocked: lock is best-effort)",
				  err);
			err[0] = '\0';
		}
	}
	if (!pool->locked)
		pool_populate(pool);
	rc = zinf_arena_init(&pool->arena, (uint64_t)(uintptr_t)pool->base, size, PINNED_MIN_ALIGN,
			     opts->max_buffers);
	if (rc) {
		snprintf(err, errlen, "pinned pool: bookkeeping for %u buffers: %s",
			 opts->max_buffers, strerror(-rc));
		goto out_unlock;
	}
	zinf_logf(ZINF_LOG_INFO, "pinned pool: %s at %p, %s, NUMA node %d",
		  zinf_format_bytes(size, sz, sizeof(sz)), pool->base,
		  pool->registered ? "registered with the device"
				   : (pool->locked ? "mlocked" : "not locked"),
		  pool->numa_node);
	*out = pool;
	return 0;

out_unlock:
	if (pool->registered)
		zinf_device_host_unregister(pool->device, pool->base, size);
	else if (pool->locked)
		munlock(pool->base, size);
out_unmap:
	munmap(pool->base, size);
out_free:
	free(pool);
	return rc;
}

void zinf_pinned_destroy(struct zinf_pinned *pool)
{
	struct zinf_arena_stats st;

	if (!pool)
		return;
	zinf_arena_get_stats(&pool->arena, &st);
	if (st.live)
		zinf_logf(ZINF_LOG_WARN,
			  "pinned pool destroyed with %llu buffer(s), %llu bytes, live",
			  (unsigned long long)st.live, (unsigned long long)st.used);
	zinf_arena_fini(&pool->arena);
	if (pool->registered && zinf_device_host_unregister(pool->device, pool->base, pool->size))
		zinf_logf(ZINF_LOG_WARN, "pinned pool: %s", zinf_device_last_error(pool->device));
	else if (pool->locked && !pool->registered)
		munlock(pool->base, pool->size);
	munmap(pool->base, pool->size);
	free(pool);
}

/* ---- buffers --------------------------------------------------------------------------- */

static int alloc_error(struct zinf_pinned *pool, int rc, uint64_t len, uint64_t timeout_ns)
{
	struct zinf_arena_stats st;
	char need[32], used[32], lim[32];

	zinf_arena_get_stats(&pool->arena, &st);
	zinf_format_bytes(len, need, sizeof(need));
	zinf_format_bytes(st.used, used, sizeof(used));
	zinf_format_bytes(st.size, lim, sizeof(lim));
	switch (rc) {
	case -E2BIG:
		return set_error(
			pool, ZINF_EBUDGET,
			"pinned budget: a %s buffer can never fit the %s pool (pinned_memory_limit)",
			need, lim);
	case -ETIMEDOUT:
		return set_error(
			pool, -ETIMEDOUT,
			"pinned pool: no room for %s within %.3f s (%s of %s in use by %llu buffers)",
			need, (double)timeout_ns / 1e9, used, lim, (unsigned long long)st.live);
	case -ENOSPC:
	case -EAGAIN:
	case -ENFILE:
		return set_error(
			pool, -EAGAIN,
			"pinned pool: no room for %s now (%s of %s in use by %llu buffers)", need,
			used, lim, (unsigned long long)st.live);
	default:
		return set_error(pool, rc, "pinned pool: buffer of %s: %s", need,
				 zinf_strerror(rc));
	}
}

int zinf_pinned_alloc(struct zinf_pinned *pool, uint64_t len, uint64_t timeout_ns, void **out)
{
	uint64_t off;
	int rc = zinf_arena_alloc_wait(&pool->arena, len, pool->align, timeout_ns, &off);

	*out = rc ? NULL : (char *)pool->base + off;
	return rc ? alloc_error(pool, rc, len, timeout_ns) : 0;
}

int zinf_pinned_try_alloc(struct zinf_pinned *pool, uint64_t len, void **out)
{
	uint64_t off;
	int rc = zinf_arena_alloc(&pool->arena, len, pool->align, &off);

	*out = rc ? NULL : (char *)pool->base + off;
	return rc ? alloc_error(pool, rc, len, 0) : 0;
}

int zinf_pinned_free(struct zinf_pinned *pool, void *p)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)pool->base;

	if (a < b || a - b >= pool->size || zinf_arena_free(&pool->arena, a - b, NULL))
		return set_error(pool, -EINVAL, "pinned free: %p is not a live buffer of the pool",
				 p);
	return 0;
}

void *zinf_pinned_base(const struct zinf_pinned *pool)
{
	return pool->base;
}

uint64_t zinf_pinned_size(const struct zinf_pinned *pool)
{
	return pool->size;
}

bool zinf_pinned_owns(struct zinf_pinned *pool, const void *p, uint64_t len)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)pool->base;

	if (!p || a < b || a - b >= pool->size)
		return false;
	return zinf_arena_contains(&pool->arena, a - b, len ? len : 1);
}

void zinf_pinned_get_stats(struct zinf_pinned *pool, struct zinf_pinned_stats *out)
{
	struct zinf_arena_stats st;

	zinf_arena_get_stats(&pool->arena, &st);
	out->limit = st.size;
	out->used = st.used;
	out->largest_free = st.largest_free;
	out->peak = st.peak;
	out->live_buffers = st.live;
	out->allocs = st.allocs;
	out->failures = st.failures;
	out->waits = st.waits;
	out->wait_ns = st.wait_ns;
	out->locked = pool->locked;
	out->numa_node = pool->numa_node;
}

const char *zinf_pinned_last_error(struct zinf_pinned *pool)
{
	return zinf_thread_error_get(&last_error, pool, pool ? pool->err_serial : 0);
}
