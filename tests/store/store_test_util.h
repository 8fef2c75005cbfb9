/*
 * Shared set-up for the shard-store tests: a host-backend device with a budget, a
 * pinned pool, an I/O engine on a scratch directory of the real disk, and
 * deterministic parameter contents.
 */
#ifndef ZINF_TESTS_STORE_TEST_UTIL_H
#define ZINF_TESTS_STORE_TEST_UTIL_H

#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "device.h"
#include "pinned.h"
#include "store.h"
#include "test.h"
#include "zinf/crc32c.h"
#include "zinf/error.h"
#include "zinf/io.h"
#include "zinf/log.h"

struct t_tiers {
	struct zinf_device *dev;
	struct zinf_pinned *pinned;
	struct zinf_io *io;
	struct zinf_store *store;
	char dir[256];
};

static inline int t_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* Bring up the tiers; io and pinned only when home is nvme or pinned_bytes > 0; with an
 * nvme home, host_elems parameter elements' modules homed in host memory
 * (offload_param.max_in_cpu). The store's mover idles a minute: a kick the store misses
 * hangs the test for that long. */
static inline void t_tiers_up_split(struct t_tiers *t, enum zinf_tier home, uint64_t device_bytes,
				    uint64_t pinned_bytes, uint64_t chunk_size, uint64_t host_elems)
{
	struct zinf_device_opts dopts;
	struct zinf_store_opts sopts;
	char err[512];

	memset(t, 0, sizeof(*t));
	zinf_device_opts_init(&dopts);
	dopts.backend = ZINF_DEVICE_BACKEND_HOST;
	dopts.memory_limit = device_bytes;
	T_CHECK(zinf_device_create(&dopts, &t->dev, err, sizeof(err)) == 0, "device: %s", err);
	if (pinned_bytes) {
		struct zinf_pinned_opts popts;
		zinf_pinned_opts_init(&popts);
		popts.size = pinned_bytes;
		popts.device = t->dev;
		popts.lock = ZINF_PINNED_LOCK_BEST_EFFORT;
		T_CHECK(zinf_pinned_create(&popts, &t->pinned, err, sizeof(err)) == 0, "pinned: %s",
			err);
	}
	if (home == ZINF_TIER_NVME) {
		struct zinf_io_opts iopts;
		snprintf(t->dir, sizeof(t->dir), "/var/tmp/zinf-store-test-XXXXXX");
		T_CHECK(mkdtemp(t->dir), "mkdtemp");
		zinf_io_opts_init(&iopts);
		iopts.nvme_paths[0] = t->dir;
		iopts.n_paths = 1;
		iopts.queue_depth = 16;
		iopts.checksum = ZINF_IO_CHECKSUM_CRC32C;
		iopts.file_size = 256ull << 20;
		T_CHECK(zinf_io_create(&iopts, &t->io, err, sizeof(err)) == 0, "io: %s", err);
	}
	zinf_store_opts_init(&sopts);
	sopts.device = t->dev;
	sopts.pinned = t->pinned;
	sopts.io = t->io;
	sopts.param_home = home;
	sopts.chunk_size = chunk_size;
	sopts.host_elems = host_elems;
	sopts.mover_idle_ns = 60ull * 1000000000ull;
	T_CHECK(zinf_store_create(&sopts, &t->store, err, sizeof(err)) == 0, "store: %s", err);
}

static inline void t_tiers_up(struct t_tiers *t, enum zinf_tier home, uint64_t device_bytes,
			      uint64_t pinned_bytes, uint64_t chunk_size)
{
	t_tiers_up_split(t, home, device_bytes, pinned_bytes, chunk_size, 0);
}

static inline void t_tiers_down(struct t_tiers *t)
{
	zinf_store_destroy(t->store);
	zinf_io_destroy(t->io);
	zinf_pinned_destroy(t->pinned);
	zinf_device_destroy(t->dev);
	if (t->dir[0]) {
		nftw(t->dir, t_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		T_CHECK(access(t->dir, F_OK) != 0, "scratch directory %s left behind", t->dir);
	}
}

/* On the CUDA device (the simulator in a ZINF_CUDA=SIM build): a store with host homes,
 * page-locked with pin, in 256 KiB chunks, holding one module "layer.0" of one bf16
 * parameter "w" of 300 x 1777 (1066200 bytes: five chunks), finalized. */
static inline void t_cuda_host_store_up(struct zinf_device **dev, struct zinf_store **s, bool pin,
					uint32_t *m, uint32_t *p)
{
	uint64_t shape[2] = {300, 1777};
	struct zinf_device_opts dopts;
	struct zinf_store_opts sopts;
	char err[512];

	zinf_device_opts_init(&dopts);
	dopts.backend = ZINF_DEVICE_BACKEND_CUDA;
	dopts.memory_limit = 64ull << 20;
	T_CHECK(zinf_device_create(&dopts, dev, err, sizeof(err)) == 0, "device: %s", err);
	zinf_store_opts_init(&sopts);
	sopts.device = *dev;
	sopts.param_home = ZINF_TIER_HOST;
	sopts.chunk_size = 256ull << 10;
	sopts.pin_host = pin;
	sopts.mover_idle_ns = 60ull * 1000000000ull;
	T_CHECK(zinf_store_create(&sopts, s, err, sizeof(err)) == 0, "store: %s", err);
	T_CHECK_RC(zinf_store_module_add(*s, "layer.0", m));
	T_CHECK_RC(zinf_store_param_add(*s, *m, "w", ZINF_DTYPE_BF16, 2, shape, p));
	T_CHECK(zinf_store_finalize(*s) == 0, "%s", zinf_store_last_error(*s));
}

/* Fill len bytes from (seed): the contents version `seed` of a parameter. */
static inline void t_fill(void *buf, uint64_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
	unsigned char *b = buf;

	for (uint64_t i = 0; i < len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(b + i, &x, len - i < 8 ? len - i : 8);
	}
}

/* Modules "a" and "b" of one 1 MiB bf16 parameter each ("pa", "pb"), finalized, their
 * homes holding src_a and src_b (filled with seeds 1 and 2). */
static inline void t_two_modules(struct t_tiers *t, uint32_t *ma, uint32_t *pa, uint32_t *mb,
				 uint32_t *pb, void *src_a, void *src_b)
{
	uint64_t shape[2] = {512, 1024};

	T_CHECK_RC(zinf_store_module_add(t->store, "a", ma));
	T_CHECK_RC(zinf_store_param_add(t->store, *ma, "pa", ZINF_DTYPE_BF16, 2, shape, pa));
	T_CHECK_RC(zinf_store_module_add(t->store, "b", mb));
	T_CHECK_RC(zinf_store_param_add(t->store, *mb, "pb", ZINF_DTYPE_BF16, 2, shape, pb));
	T_CHECK_RC(zinf_store_finalize(t->store));
	t_fill(src_a, 512 * 1024 * 2, 1);
	t_fill(src_b, 512 * 1024 * 2, 2);
	T_CHECK_RC(zinf_store_param_write(t->store, *pa, src_a));
	T_CHECK_RC(zinf_store_param_write(t->store, *pb, src_b));
}

#endif /* ZINF_TESTS_STORE_TEST_UTIL_H */
