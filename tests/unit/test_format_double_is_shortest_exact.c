/* zinf_format_double writes the fewest significant digits that read back as exactly the
 * same double (what --log-json, zinf plan and the config's messages print): known cases,
 * and for 20000 seeded doubles of every magnitude, the text reads back bit for bit and
 * one digit fewer does not. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "zinf/config.h"

/* significant digits of %g text: those of its mantissa, leading zeros not counted */
static int digits_of(const char *text)
{
	int n = 0;
	bool lead = true;

	for (const char *c = text; *c && *c != 'e'; c++) {
		if (*c < '0' || *c > '9')
			continue;
		if (lead && *c == '0')
			continue;
		lead = false;
		n++;
	}
	return n ? n : 1;
}

int main(void)
{
	static const struct {
		double v;
		const char *text;
	} known[] = {{0.9, "0.9"},
		     {5e-5, "5e-05"},
		     {0.1 + 0.2, "0.30000000000000004"},
		     {1.0, "1"},
		     {-2.5, "-2.5"},
		     {0.0, "0"},
		     {1e15, "1e+15"},
		     {12345678901234567.0, "12345678901234568"},
		     {3.4028234663852886e38, "3.4028234663852886e+38"},
		     {5e-324, "5e-324"}};
	char buf[40], fewer[40];
	uint64_t state = 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		T_CHECK_STR(zinf_format_double(known[i].v, buf, sizeof(buf)), known[i].text);
	T_CHECK_STR(zinf_format_double(INFINITY, buf, sizeof(buf)), "inf");
	T_CHECK_STR(zinf_format_double(-INFINITY, buf, sizeof(buf)), "-inf");
	for (int i = 0; i < 20000; i++) {
		double v;
		int d;

		do { /* any bit pattern that is a finite double */
			state ^= state << 13;
			state ^= state >> 7;
			state ^= state << 17;
			memcpy(&v, &state, sizeof(v));
		} while (!isfinite(v));
		T_CHECK(zinf_format_double(v, buf, sizeof(buf)) == buf, "returns buf");
		T_CHECK(strtod(buf, NULL) == v, "%s does not read back as %a", buf, v);
		d = digits_of(buf);
		T_CHECK(d <= 17, "%s: %d digits", buf, d);
		if (d > 1) {
			snprintf(fewer, sizeof(fewer), "%.*g", d - 1, v);
			T_CHECK(strtod(fewer, NULL) != v, "%s reads back too, shorter than %s",
				fewer, buf);
		}
	}
	return T_EXIT_PASS;
}
