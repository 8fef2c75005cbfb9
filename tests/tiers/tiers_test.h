/*
 * Helpers shared by the tiers tests: a reproducible byte pattern per (seed, offset), so
 * any block can be checked without keeping a copy, and a host device with a budget.
 */
#ifndef ZINF_TESTS_TIERS_TEST_H
#define ZINF_TESTS_TIERS_TEST_H

#include <stdint.h>
#include <string.h>

#include "device.h"
#include "test.h"

static inline uint64_t tt_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* Fill len bytes (a multiple of 8) with the pattern of seed. */
static inline void tt_fill(void *p, uint64_t len, uint64_t seed)
{
	uint64_t *w = p;

	for (uint64_t i = 0; i < len / 8; i++)
		w[i] = tt_mix(seed * 0x9e3779b97f4a7c15ull + i);
}

/* Index of the first 8-byte word that differs from seed's pattern, or UINT64_MAX. */
static inline uint64_t tt_check(const void *p, uint64_t len, uint64_t seed)
{
	const uint64_t *w = p;

	for (uint64_t i = 0; i < len / 8; i++) {
		if (w[i] != tt_mix(seed * 0x9e3779b97f4a7c15ull + i))
			return i;
	}
	return UINT64_MAX;
}

/* A small xorshift generator for test decisions. */
static inline uint64_t tt_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

static inline struct zinf_device *tt_host_device(uint64_t limit, unsigned threads)
{
	struct zinf_device_opts o;
	struct zinf_device *dev;
	char err[512];
	int rc;

	zinf_device_opts_init(&o);
	o.backend = ZINF_DEVICE_BACKEND_HOST;
	o.memory_limit = limit;
	o.copy_threads = threads;
	rc = zinf_device_create(&o, &dev, err, sizeof(err));
	T_CHECK(rc == 0, "host device create: %d %s", rc, err);
	return dev;
}

#endif /* ZINF_TESTS_TIERS_TEST_H */
