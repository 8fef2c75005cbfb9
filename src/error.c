/*
 * Error codes to text. Negative errno values go through strerror_r's static table;
 * zinf's own codes (enum zinf_error) have their own names.
 */
#include <string.h>

#include "zinf/error.h"

const char *zinf_strerror(int code)
{
	switch (code) {
	case ZINF_OK:
		return "success";
	case ZINF_ECONFIG:
		return "invalid configuration";
	case ZINF_EJSON:
		return "malformed JSON";
	case ZINF_ECHECKSUM:
		return "checksum mismatch";
	case ZINF_EBUDGET:
		return "memory budget exceeded";
	case ZINF_EFORMAT:
		return "malformed file";
	case ZINF_EDEVICE:
		return "device error";
	case ZINF_ESTATE:
		return "invalid state for this call";
	}
	if (code < 0 && code > -4096) {
		/* strerrordesc_np is thread-safe and returns NULL for unknown values. */
		const char *s = strerrordesc_np(-code);
		if (s)
			return s;
	}
	return "unknown error";
}

void zinf_error_one_line(char *msg)
{
	for (unsigned char *c = (unsigned char *)msg; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			*c = '?';
}
