/* zinf_strerror gives a distinct, non-empty name to every zinf code and to errno codes,
 * and never returns NULL for garbage. */
#include <errno.h>

#include "test.h"
#include "zinf/error.h"

int main(void)
{
	static const int codes[] = {ZINF_OK,	  ZINF_ECONFIG, ZINF_EJSON,   ZINF_ECHECKSUM,
				    ZINF_EBUDGET, ZINF_EFORMAT, ZINF_EDEVICE, ZINF_ESTATE};
	const int n = (int)(sizeof(codes) / sizeof(codes[0]));

	for (int i = 0; i < n; i++) {
		const char *s = zinf_strerror(codes[i]);
		T_CHECK(s && *s && strcmp(s, "unknown error") != 0, "code %d has no name",
			codes[i]);
		for (int j = 0; j < i; j++)
			T_CHECK(strcmp(s, zinf_strerror(codes[j])) != 0,
				"codes %d and %d share '%s'", codes[i], codes[j], s);
	}
	T_CHECK_STR(zinf_strerror(-EIO), "Input/output error");
	T_CHECK_STR(zinf_strerror(-ENOSPC), "No space left on device");
	T_CHECK_STR(zinf_strerror(12345), "unknown error");
	T_CHECK_STR(zinf_strerror(-99999), "unknown error");
	return T_EXIT_PASS;
}
