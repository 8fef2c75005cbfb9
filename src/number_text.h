/*
 * Printing numbers in the C locale's form on this thread (number_text.c); parsing them is
 * zinf_strtod (zinf/config.h).
 */
#ifndef ZINF_NUMBER_TEXT_H
#define ZINF_NUMBER_TEXT_H

#include <locale.h>

/* Switch this thread to the C locale's numbers until zinf_c_numbers_end(the result);
 * (locale_t)0 when that locale could not be made (nothing switched). */
locale_t zinf_c_numbers_begin(void);
void zinf_c_numbers_end(locale_t was);

#endif /* ZINF_NUMBER_TEXT_H */
