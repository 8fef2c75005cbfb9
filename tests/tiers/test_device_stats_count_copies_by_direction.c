/*
 * The device counts each copy direction separately: bytes and copies exactly, with
 * non-zero busy time; memset bytes; heap used, peak and live allocations.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tiers_test.h"

#define MiB (1ull << 20)

int main(void)
{
	struct zinf_device *dev;
	struct zinf_device_stats st;
	struct zinf_stream *s;
	uint8_t *h = malloc(8 * MiB), *a, *b;

	dev = tt_host_device(64 * MiB, 2);
	T_CHECK(h, "malloc");
	tt_fill(h, 8 * MiB, 3);
	T_CHECK_RC(zinf_stream_create(dev, &s));
	T_CHECK_RC(zinf_device_alloc(dev, 8 * MiB, (void **)&a));
	T_CHECK_RC(zinf_device_alloc(dev, 8 * MiB, (void **)&b));
	for (int i = 0; i < 3; i++)
		T_CHECK_RC(zinf_device_memcpy_async(s, a, h, 8 * MiB, ZINF_COPY_H2D));
	for (int i = 0; i < 2; i++)
		T_CHECK_RC(zinf_device_memcpy_async(s, b, a, 4 * MiB, ZINF_COPY_D2D));
	T_CHECK_RC(zinf_device_memcpy_async(s, h, b, 1 * MiB, ZINF_COPY_D2H));
	T_CHECK_RC(zinf_device_memset_async(s, a, 0, 3 * MiB));
	T_CHECK_RC(zinf_stream_synchronize(s));
	zinf_device_get_stats(dev, &st);
	T_CHECK(st.copy[ZINF_COPY_H2D].bytes == 24 * MiB && st.copy[ZINF_COPY_H2D].count == 3,
		"h2d %llu bytes in %llu", (unsigned long long)st.copy[ZINF_COPY_H2D].bytes,
		(unsigned long long)st.copy[ZINF_COPY_H2D].count);
	T_CHECK(st.copy[ZINF_COPY_D2D].bytes == 8 * MiB && st.copy[ZINF_COPY_D2D].count == 2,
		"d2d %llu", (unsigned long long)st.copy[ZINF_COPY_D2D].bytes);
	T_CHECK(st.copy[ZINF_COPY_D2H].bytes == 1 * MiB && st.copy[ZINF_COPY_D2H].count == 1,
		"d2h %llu", (unsigned long long)st.copy[ZINF_COPY_D2H].bytes);
	for (int d = 0; d < ZINF_COPY_DIRS; d++)
		T_CHECK(st.copy[d].ns > 0, "%s time counted", zinf_copy_dir_name(d));
	T_CHECK(st.memset_bytes == 3 * MiB, "memset %llu", (unsigned long long)st.memset_bytes);
	T_CHECK(st.used == 16 * MiB && st.peak == 16 * MiB && st.live_allocs == 2 &&
			st.limit == 64 * MiB,
		"heap used %llu peak %llu live %llu", (unsigned long long)st.used,
		(unsigned long long)st.peak, (unsigned long long)st.live_allocs);
	T_CHECK(tt_check(h, 1 * MiB, 3) == UINT64_MAX, "data came back");
	printf("h2d %.2f GB/s\n", (double)st.copy[ZINF_COPY_H2D].bytes / st.copy[ZINF_COPY_H2D].ns);
	T_CHECK_RC(zinf_device_free(dev, a));
	zinf_device_get_stats(dev, &st);
	T_CHECK(st.used == 8 * MiB && st.peak == 16 * MiB, "after free used %llu",
		(unsigned long long)st.used);
	T_CHECK_RC(zinf_device_free(dev, b));
	zinf_stream_destroy(s);
	zinf_device_destroy(dev);
	free(h);
	return T_EXIT_PASS;
}
