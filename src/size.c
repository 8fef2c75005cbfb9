/*
 * Byte sizes in text: "4096", "5e8", "512MiB", "1.5GiB", "2GB". Shared by the config
 * loader and the CLI so that one spelling works everywhere.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "zinf/config.h"
#include "zinf/error.h"

struct unit {
	const char *name;
	double mult;
};

static const struct unit units[] = {
	{"", 1.0},
	{"B", 1.0},
	{"KB", 1e3},
	{"MB", 1e6},
	{"GB", 1e9},
	{"TB", 1e12},
	{"KiB", 1024.0},
	{"MiB", 1048576.0},
	{"GiB", 1073741824.0},
	{"TiB", 1099511627776.0},
};

int zinf_parse_bytes(const char *text, uint64_t *out)
{
	char *end;
	double v;

	/* decimal digits first (strtod would also take whitespace, a sign, hex, inf, nan) */
	if (!text || !out || !isdigit((unsigned char)text[0]) ||
	    strpbrk(text, "xXpP") != NULL) /* no hex: 0x10, 1p3 */
		return -EINVAL;
	errno = 0;
	v = zinf_strtod(text, &end);
	if (end == text || errno == ERANGE || !isfinite(v) || v < 0)
		return end == text ? -EINVAL : -ERANGE;
	while (*end == ' ')
		end++;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].name) != 0)
			continue;
		v *= units[i].mult;
		if (v >= 18446744073709551616.0)
			return -ERANGE;
		if (v != floor(v))
			return -ERANGE;
		*out = (uint64_t)v;
		return 0;
	}
	return -EINVAL;
}

char *zinf_format_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else if (v == floor(v))
		snprintf(buf, len, "%.0f %s", v, names[u]);
	else
		snprintf(buf, len, "%.2f %s", v, names[u]);
	return buf;
}

int zinf_budget_fits_host(const char *what, const char *key, uint64_t bytes, const char *why,
			  char *err, size_t errlen)
{
	uint64_t ram = zinf_host_memory_bytes();
	char a[32], b[32];

	if (!ram || bytes <= ram)
		return 0;
	snprintf(err, errlen, "%s budget: %s %s is more than the %s of memory of this host%s%s%s",
		 what, key, zinf_format_bytes(bytes, a, sizeof(a)),
		 zinf_format_bytes(ram, b, sizeof(b)), why ? " (" : "", why ? why : "",
		 why ? ")" : "");
	return ZINF_EBUDGET;
}
