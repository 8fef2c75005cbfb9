/*
 * ZINF_DEVICE_POISON=1 fills every device heap allocation with 0xff bytes before it is
 * handed out: a new one, one from the top of the heap, and one that reuses the space of
 * a freed allocation someone wrote; without it (unset, or any value but 1) that reused
 * space keeps the old bytes. It also fills an allocation when it is freed, so device work
 * still queued on it (a free before its event) reads 0xff. The fills are not counted as
 * memsets.
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

/* Allocate, write 0x5a, free, allocate the same space again: its first byte (and in
 * *freed the first byte right after the free). */
static uint8_t reused_byte(const char *poison, uint8_t *freed)
{
	struct zinf_device *dev;
	struct zinf_device_stats st;
	uint8_t *a, *b, first;

	if (poison)
		setenv("ZINF_DEVICE_POISON", poison, 1);
	else
		unsetenv("ZINF_DEVICE_POISON");
	dev = tt_host_device(8 * MiB, 2);
	T_CHECK_RC(zinf_device_alloc(dev, 1 * MiB, (void **)&a));
	memset(a, 0x5a, 1 * MiB);
	T_CHECK_RC(zinf_device_free(dev, a));
	*freed = a[0]; /* the host backend's heap stays mapped: what queued work would read */
	if (*freed == 0xff)
		T_CHECK(all(a, 1 * MiB, 0xff), "filled whole at the free");
	T_CHECK_RC(zinf_device_alloc(dev, 1 * MiB, (void **)&b));
	T_CHECK(b == a, "the freed space is handed out again (%p, %p)", (void *)a, (void *)b);
	first = b[0];
	if (first == 0xff)
		T_CHECK(all(b, 1 * MiB, 0xff), "filled whole");
	zinf_device_get_stats(dev, &st);
	T_CHECK(st.memset_bytes == 0, "%llu fill bytes counted as memsets",
		(unsigned long long)st.memset_bytes);
	T_CHECK_RC(zinf_device_free(dev, b));
	zinf_device_destroy(dev);
	return first;
}

int main(void)
{
	struct zinf_device *dev;
	uint8_t *a, freed;

	T_CHECK(reused_byte("1", &freed) == 0xff, "ZINF_DEVICE_POISON=1 fills reused space");
	T_CHECK(freed == 0xff, "ZINF_DEVICE_POISON=1 fills a freed allocation at its free");
	T_CHECK(reused_byte(NULL, &freed) == 0x5a && freed == 0x5a,
		"unset: freed and reused space keeps the old bytes");
	T_CHECK(reused_byte("0", &freed) == 0x5a && freed == 0x5a, "0: no fill");
	T_CHECK(reused_byte("yes", &freed) == 0x5a && freed == 0x5a, "only 1 turns it on");

	setenv("ZINF_DEVICE_POISON", "1", 1);
	dev = tt_host_device(8 * MiB, 2);
	T_CHECK_RC(zinf_device_alloc_high(dev, 2 * MiB, (void **)&a));
	T_CHECK(all(a, 2 * MiB, 0xff), "allocations from the top are filled too");
	T_CHECK_RC(zinf_device_free(dev, a));
	zinf_device_destroy(dev);
	return 0;
}
