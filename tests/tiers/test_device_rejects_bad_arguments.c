/*
 * Every device interface names what is wrong with bad input, in one line: copies whose
 * pointers are on the wrong side for their direction or run past an allocation, memset
 * outside device memory, frees of foreign pointers, streams and events of another
 * device, bad options, and (host backend) freeing memory that queued work still uses.
 * Memset itself sets exactly the bytes asked for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiers_test.h"
#include "zinf/error.h"

#define MiB (1ull << 20)

static void expect_error(struct zinf_device *dev, int rc, int want, const char *needle)
{
	const char *msg = zinf_device_last_error(dev);

	T_CHECK(rc == want, "rc %d, want %d (%s)", rc, want, msg);
	T_CHECK(strstr(msg, needle), "message \"%s\" lacks \"%s\"", msg, needle);
	T_CHECK(!strchr(msg, '\n'), "one line: %s", msg);
}

/* Free while a queued op still writes the buffer: one copy thread busy with a large
 * memset on stream a keeps stream b's small memset queued for milliseconds. */
static void free_while_queued(void)
{
	struct zinf_device *dev = tt_host_device(160 * MiB, 1);
	struct zinf_stream *a, *b;
	uint8_t *big, *small;
	int refused = 0;

	T_CHECK_RC(zinf_stream_create(dev, &a));
	T_CHECK_RC(zinf_stream_create(dev, &b));
	T_CHECK_RC(zinf_device_alloc(dev, 128 * MiB, (void **)&big));
	for (int round = 0; round < 10 && !refused; round++) {
		T_CHECK_RC(zinf_device_alloc(dev, 4096, (void **)&small));
		T_CHECK_RC(zinf_device_memset_async(a, big, round, 128 * MiB));
		T_CHECK_RC(zinf_device_memset_async(b, small + 64, 1, 512));
		if (zinf_device_free(dev, small) == ZINF_ESTATE) {
			refused = 1;
			expect_error(dev, ZINF_ESTATE, ZINF_ESTATE,
				     "is still used by a queued memset of 512 bytes");
			T_CHECK_RC(zinf_stream_synchronize(b));
			T_CHECK_RC(zinf_device_free(dev, small)); /* idle now */
		} else {
			T_CHECK_RC(zinf_stream_synchronize(b)); /* the free won the race */
		}
		T_CHECK_RC(zinf_device_synchronize(dev));
	}
	T_CHECK(refused, "a free of memory under a queued op was never refused");
	T_CHECK_RC(zinf_device_free(dev, big));
	zinf_stream_destroy(a);
	zinf_stream_destroy(b);
	zinf_device_destroy(dev);
}

int main(void)
{
	struct zinf_device *dev = tt_host_device(16 * MiB, 2), *other = tt_host_device(MiB, 1);
	struct zinf_device_opts o;
	struct zinf_stream *s, *s_other;
	struct zinf_event *e, *e_other;
	uint8_t *d, *d2, *none, host[4096] = {0};
	char err[512];
	int x;

	T_CHECK_RC(zinf_stream_create(dev, &s));
	T_CHECK_RC(zinf_stream_create(other, &s_other));
	T_CHECK_RC(zinf_event_create(dev, &e));
	T_CHECK_RC(zinf_event_create(other, &e_other));
	T_CHECK_RC(zinf_device_alloc(dev, 4096, (void **)&d));
	T_CHECK_RC(zinf_device_alloc(dev, 4096, (void **)&d2));

	/* Memset sets exactly [d + 100, d + 100 + 1000). */
	T_CHECK_RC(zinf_device_memset_async(s, d, 0x11, 4096));
	T_CHECK_RC(zinf_device_memset_async(s, d + 100, 0xab, 1000));
	T_CHECK_RC(zinf_device_memcpy_async(s, host, d, 4096, ZINF_COPY_D2H));
	T_CHECK_RC(zinf_stream_synchronize(s));
	for (int i = 0; i < 4096; i++)
		T_CHECK(host[i] == (i >= 100 && i < 1100 ? 0xab : 0x11), "byte %d = 0x%02x", i,
			host[i]);

	/* Directions: each side must be where the direction says. */
	expect_error(dev, zinf_device_memcpy_async(s, host, d, 64, ZINF_COPY_H2D), -EINVAL,
		     "h2d copy of 64 bytes: destination");
	expect_error(dev, zinf_device_memcpy_async(s, d, d2, 64, ZINF_COPY_H2D), -EINVAL,
		     "h2d copy of 64 bytes: source");
	expect_error(dev, zinf_device_memcpy_async(s, d, host, 64, ZINF_COPY_D2H), -EINVAL,
		     "d2h copy of 64 bytes: destination");
	expect_error(dev, zinf_device_memcpy_async(s, d, host, 64, ZINF_COPY_D2D), -EINVAL,
		     "d2d copy of 64 bytes: source");
	expect_error(dev, zinf_device_memcpy_async(s, d, NULL, 64, ZINF_COPY_H2D), -EINVAL,
		     "source is NULL");
	expect_error(dev, zinf_device_memcpy_async(s, d, host, 64, (enum zinf_copy_dir)7), -EINVAL,
		     "direction 7");
	/* Running past the end of an allocation (into the next one) is refused. */
	expect_error(dev, zinf_device_memcpy_async(s, d + 4000, host, 200, ZINF_COPY_H2D), -EINVAL,
		     "is not inside one device allocation");
	expect_error(dev, zinf_device_memset_async(s, d + 4000, 0, 200), -EINVAL,
		     "memset of 200 bytes");
	expect_error(dev, zinf_device_memset_async(s, host, 0, 16), -EINVAL, "memset of 16 bytes");
	/* Length 0 is a no-op, even with odd pointers. */
	T_CHECK_RC(zinf_device_memcpy_async(s, host, host, 0, ZINF_COPY_H2D));

	/* Frees. */
	expect_error(dev, zinf_device_free(dev, host), -EINVAL, "is not a live device allocation");
	expect_error(dev, zinf_device_free(dev, d + 256), -EINVAL,
		     "is not a live device allocation");
	T_CHECK_RC(zinf_device_free(dev, NULL));
	expect_error(dev, zinf_device_alloc(dev, 0, (void **)&none), -EINVAL, "size 0");

	/* Streams and events of another device. */
	expect_error(dev, zinf_event_record(e, s_other), -EINVAL, "does not belong to device");
	expect_error(dev, zinf_stream_wait_event(s, e_other), -EINVAL, "does not belong to device");

	/* Host register of device memory, and the host backend has no PCI id. */
	expect_error(dev, zinf_device_host_register(dev, d, 4096), -EINVAL, "is device memory");
	expect_error(dev, zinf_device_pci_bus_id(dev, err, sizeof(err)), -ENOTSUP, "no GPU");

	/* Options. */
	zinf_device_opts_init(&o);
	o.backend = (enum zinf_device_backend)9;
	T_CHECK(zinf_device_create(&o, &other, err, sizeof(err)) == -EINVAL, "bad backend");
	T_CHECK(strstr(err, "backend 9"), "%s", err);
	zinf_device_opts_init(&o);
	o.backend = ZINF_DEVICE_BACKEND_HOST;
	o.max_allocs = 0;
	T_CHECK(zinf_device_create(&o, &other, err, sizeof(err)) == -EINVAL, "max_allocs 0");
	T_CHECK(strstr(err, "max_allocs"), "%s", err);
	T_CHECK(zinf_device_backend_parse("gpu", (enum zinf_device_backend *)&x) == -EINVAL,
		"parse gpu");

	zinf_event_destroy(e);
	zinf_event_destroy(e_other);
	zinf_stream_destroy(s);
	zinf_stream_destroy(s_other);
	T_CHECK_RC(zinf_device_free(dev, d));
	T_CHECK_RC(zinf_device_free(dev, d2));
	zinf_device_destroy(dev);
	zinf_device_destroy(other);
	free_while_queued();
	return T_EXIT_PASS;
}
