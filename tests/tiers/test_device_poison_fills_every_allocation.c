/*
 * ZINF_DEVICE_POISON=1 fills every device allocation with 0xff bytes before it is handed
 * out: a new one, and one that reuses the space of a freed allocation someone wrote
 * (which otherwise keeps the old bytes); without it nothing is filled (no memset bytes).
 */
#include <stdio.h>
#include <stdlib.h>

#include "tiers_test.h"

#define MiB (1ull << 20)

static int all(const uint8_t *p, uint64_t n, uint8_t v)
{
	for (uint64_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

int main(void)
{
	struct zinf_device *dev;
	struct zinf_device_stats st;
	uint8_t *a, *b;

	setenv("ZINF_DEVICE_POISON", "1", 1);
	dev = tt_host_device(8 * MiB, 2);
	T_CHECK_RC(zinf_device_alloc(dev, 1 * MiB, (void **)&a));
	T_CHECK(all(a, 1 * MiB, 0xff), "a new allocation is all 0xff");
	memset(a, 0x5a, 1 * MiB);
	T_CHECK_RC(zinf_device_free(dev, a));
	T_CHECK_RC(zinf_device_alloc(dev, 1 * MiB, (void **)&b));
	T_CHECK(b == a, "the freed space is handed out again (%p, %p)", (void *)a, (void *)b);
	T_CHECK(all(b, 1 * MiB, 0xff), "and filled again, not left with the old bytes");
	T_CHECK_RC(zinf_device_alloc_high(dev, 2 * MiB, (void **)&a));
	T_CHECK(all(a, 2 * MiB, 0xff), "allocations from the top too");
	zinf_device_get_stats(dev, &st);
	T_CHECK(st.memset_bytes == 4 * MiB, "%llu bytes filled",
		(unsigned long long)st.memset_bytes);
	T_CHECK_RC(zinf_device_free(dev, a));
	T_CHECK_RC(zinf_device_free(dev, b));
	zinf_device_destroy(dev);

	setenv("ZINF_DEVICE_POISON", "0", 1);
	dev = tt_host_device(8 * MiB, 2);
	T_CHECK_RC(zinf_device_alloc(dev, 1 * MiB, (void **)&a));
	zinf_device_get_stats(dev, &st);
	T_CHECK(st.memset_bytes == 0, "ZINF_DEVICE_POISON=0 fills nothing");
	T_CHECK_RC(zinf_device_free(dev, a));
	zinf_device_destroy(dev);
	return 0;
}
