/*
 * Numbers as text in the C locale's form, whatever the process's LC_NUMERIC: JSON, the
 * config, the training state and the trace all want '.' as the decimal point, and a
 * program embedding the library may have set a locale with a decimal comma (the CLI sets
 * none). Parsing goes through strtod_l, printing through uselocale on the calling thread
 * only, so other threads' locales are left alone.
 */
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "number_text.h"
#include "zinf/config.h"

static pthread_once_t c_once = PTHREAD_ONCE_INIT;
static locale_t c_numbers; /* (locale_t)0 if newlocale failed: the process's own is used */

static void c_numbers_make(void)
{
	c_numbers = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

static locale_t c_locale(void)
{
	pthread_once(&c_once, c_numbers_make);
	return c_numbers;
}

locale_t zinf_c_numbers_begin(void)
{
	locale_t c = c_locale();

	return c ? uselocale(c) : (locale_t)0;
}

void zinf_c_numbers_end(locale_t was)
{
	if (was)
		uselocale(was);
}

double zinf_strtod(const char *text, char **end)
{
	locale_t c = c_locale();

	return c ? strtod_l(text, end, c) : strtod(text, end);
}

char *zinf_format_double(double v, char *buf, size_t len)
{
	locale_t was = zinf_c_numbers_begin();

	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, v);
		if (zinf_strtod(buf, NULL) == v)
			break;
	}
	zinf_c_numbers_end(was);
	return buf;
}
