/* zinf_parse_bytes accepts integers, whole exponent forms and KB..TB / KiB..TiB units,
 * and refuses negatives (behind whitespace too), hex, inf and nan, fractions of a byte,
 * unknown units and overflow. */
#include <errno.h>

#include "test.h"
#include "zinf/config.h"

static void ok(const char *text, uint64_t want)
{
	uint64_t got = 0;
	int rc = zinf_parse_bytes(text, &got);

	T_CHECK(rc == 0 && got == want, "'%s': rc %d, got %llu, want %llu", text, rc,
		(unsigned long long)got, (unsigned long long)want);
}

static void bad(const char *text, int want_rc)
{
	uint64_t got = 12345;
	int rc = zinf_parse_bytes(text, &got);

	T_CHECK(rc == want_rc && got == 12345, "'%s': rc %d (want %d), out touched: %llu", text, rc,
		want_rc, (unsigned long long)got);
}

int main(void)
{
	char buf[32];

	ok("4096", 4096);
	ok("5e8", 500000000);
	ok("1MiB", 1048576);
	ok("512MiB", 536870912);
	ok("1.5GiB", 1610612736);
	ok("2GB", 2000000000);
	ok("3 KiB", 3072);
	ok("7B", 7);
	ok("1TiB", 1099511627776ull);
	bad("", -EINVAL);
	bad("-1", -EINVAL);
	bad("\t-1", -EINVAL); /* strtod skips the tab: was 2^64 - 1 */
	bad("\n4096", -EINVAL);
	bad(" 1", -EINVAL);
	bad("+1", -EINVAL);
	bad("0x10", -EINVAL);
	bad("1p3", -EINVAL);
	bad("nan", -EINVAL);
	bad("inf", -EINVAL);
	bad("12XB", -EINVAL);
	bad("1g", -EINVAL);
	bad("MiB", -EINVAL);
	bad("1.5", -ERANGE);
	bad("0.0001KB", -ERANGE);
	ok("0.5KB", 500);
	bad("100000000TiB", -ERANGE);
	T_CHECK_STR(zinf_format_bytes(1048576, buf, sizeof(buf)), "1 MiB");
	T_CHECK_STR(zinf_format_bytes(1610612736, buf, sizeof(buf)), "1.50 GiB");
	T_CHECK_STR(zinf_format_bytes(4095, buf, sizeof(buf)), "4.00 KiB");
	T_CHECK_STR(zinf_format_bytes(1023, buf, sizeof(buf)), "1023 B");
	return T_EXIT_PASS;
}
