/*
 * Allocations from the top of the device heap (zinf_device_alloc_high, the store's
 * gradient and scratch buffers) take the highest free space, aligned, and never split
 * the room first fit packs long-lived buffers into from the bottom: with a buffer held
 * at the top, a module-sized buffer still fits below it, and vice versa; with the heap
 * nearly full, a high buffer that fits only in the top hole goes there; a request too
 * large for any hole fails as fragmentation, like the low one.
 */
#include "tiers_test.h"
#include "zinf/error.h"

#define KiB 1024ull
#define LIMIT (1024 * KiB)

int main(void)
{
	struct zinf_device *dev = tt_host_device(LIMIT, 1);
	char *base, *lo1, *lo2, *hi1, *hi2, *x;

	/* the heap's start: the first low allocation of an empty heap */
	T_CHECK_RC(zinf_device_alloc(dev, 1, (void **)&base));
	T_CHECK_RC(zinf_device_free(dev, base));

	T_CHECK_RC(zinf_device_alloc_high(dev, 300 * KiB, (void **)&hi1));
	T_CHECK(hi1 == base + LIMIT - 300 * KiB, "high buffer at +%td, want the top %llu",
		hi1 - base, (unsigned long long)(LIMIT - 300 * KiB));
	T_CHECK_RC(zinf_device_alloc(dev, 700 * KiB, (void **)&lo1));
	T_CHECK(lo1 == base, "low buffer at +%td, want the bottom", lo1 - base);
	T_CHECK_RC(zinf_device_free(dev, lo1));
	T_CHECK_RC(zinf_device_free(dev, hi1));

	/* an odd size is still aligned (256 bytes) at the top */
	T_CHECK_RC(zinf_device_alloc_high(dev, 1000, (void **)&hi1));
	T_CHECK(((uintptr_t)hi1 & 255) == 0 && hi1 + 1000 <= base + LIMIT &&
			hi1 + 1000 + 256 > base + LIMIT,
		"odd high buffer at +%td", hi1 - base);
	T_CHECK_RC(zinf_device_free(dev, hi1));

	/* holes at the bottom and the top: a high buffer that fits only the top hole */
	T_CHECK_RC(zinf_device_alloc(dev, 100 * KiB, (void **)&lo1));	   /* [0, 100) */
	T_CHECK_RC(zinf_device_alloc(dev, 500 * KiB, (void **)&lo2));	   /* [100, 600) */
	T_CHECK_RC(zinf_device_alloc(dev, 200 * KiB, (void **)&hi1));	   /* [600, 800) */
	T_CHECK_RC(zinf_device_free(dev, lo1));				   /* hole [0, 100) */
	T_CHECK_RC(zinf_device_alloc_high(dev, 150 * KiB, (void **)&hi2)); /* top hole only */
	T_CHECK(hi2 == base + LIMIT - 150 * KiB, "high buffer at +%td", hi2 - base);
	T_CHECK(zinf_device_alloc_high(dev, 120 * KiB, (void **)&x) == ZINF_EBUDGET,
		"120 KiB fits no hole (100 and 74 KiB free)");
	T_CHECK(strstr(zinf_device_last_error(dev), "fragmented"), "named: %s",
		zinf_device_last_error(dev));
	T_CHECK_RC(zinf_device_alloc_high(dev, 90 * KiB, (void **)&x)); /* the top of [0,100) */
	T_CHECK(x == base + 10 * KiB, "high buffer in the bottom hole at +%td", x - base);
	T_CHECK_RC(zinf_device_free(dev, x));
	T_CHECK_RC(zinf_device_free(dev, hi2));
	T_CHECK_RC(zinf_device_free(dev, hi1));
	T_CHECK_RC(zinf_device_free(dev, lo2));
	zinf_device_destroy(dev);
	return T_EXIT_PASS;
}
