/*
 * How the schema's keys and values are put in words, for error messages, `zinf help
 * config` and docs/config.md: a key's accepted values, an enum value's name, numbers in
 * their shortest exact form.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

void zinf_fmt_num(double v, char *buf, size_t len)
{
	if (v >= 1e15 && v < 1e300)
		snprintf(buf, len, "%.0e", v);
	else
		snprintf(buf, len, "%.15g", v);
}

void zinf_key_expected(const struct zinf_key *k, char *buf, size_t len)
{
	char lo[32], hi[32], names[256];
	const char *auto_s = (k->flags & ZKF_AUTO) ? " or \"auto\"" : "";

	zinf_fmt_num(k->min, lo, sizeof(lo));
	zinf_fmt_num(k->max, hi, sizeof(hi));
	switch (k->type) {
	case ZK_BOOL:
		snprintf(buf, len, "%s",
			 (k->flags & ZKF_AUTO) ? "true, false or \"auto\"" : "true or false");
		break;
	case ZK_INT:
		snprintf(buf, len, "an integer from %s to %s%s", lo, hi, auto_s);
		break;
	case ZK_COUNT:
		if (k->max >= 1e15)
			snprintf(buf, len, "a whole number >= %s%s", lo, auto_s);
		else
			snprintf(buf, len, "a whole number from %s to %s%s", lo, hi, auto_s);
		break;
	case ZK_BYTES: {
		char range[80];
		if (k->max >= 1e300)
			snprintf(range, sizeof(range), ">= %s", lo);
		else
			snprintf(range, sizeof(range), "from %s to %s", lo, hi);
		snprintf(buf, len, "a byte size %s%s such as 1048576 or \"1MiB\"%s", range,
			 (k->flags & ZKF_ALIGN4K) ? ", a multiple of 4096," : "", auto_s);
		break;
	}
	case ZK_FLOAT:
		if (k->max >= 1e300)
			snprintf(buf, len, "a number %s %s%s",
				 (k->flags & ZKF_MIN_OPEN) ? ">" : ">=", lo, auto_s);
		else
			snprintf(buf, len, "a number %s %s and <= %s%s",
				 (k->flags & ZKF_MIN_OPEN) ? ">" : ">=", lo, hi, auto_s);
		break;
	case ZK_ENUM: {
		size_t o = 0;
		for (const char *p = k->names; *p && o + 3 < sizeof(names); p++) {
			if (*p == '|') {
				names[o++] = ',';
				names[o++] = ' ';
			} else {
				names[o++] = *p;
			}
		}
		names[o] = 0;
		snprintf(buf, len, "one of %s%s", names, auto_s);
		break;
	}
	case ZK_STRING:
		snprintf(buf, len, "a string (a path)");
		break;
	case ZK_STRLIST:
		snprintf(buf, len, "a list of paths, or one path");
		break;
	case ZK_BETAS:
		snprintf(buf, len, "[beta1, beta2], each >= %s and < %s%s", lo, hi, auto_s);
		break;
	case ZK_OBJECT:
		snprintf(buf, len, "an object");
		break;
	case ZK_IGNORED:
		snprintf(buf, len, "anything");
		break;
	}
}

int zinf_key_enum_name(const struct zinf_key *k, int idx, char *buf, size_t len)
{
	const char *p = k->names;
	const char *end;

	for (int n = 0; n < idx; n++) {
		p = strchr(p, '|');
		if (!p)
			return -ERANGE;
		p++;
	}
	end = strchr(p, '|');
	snprintf(buf, len, "%.*s", (int)(end ? (size_t)(end - p) : strlen(p)), p);
	return 0;
}
