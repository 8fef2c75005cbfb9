/* The linked library's version (see include/zinf/version.h). */
#include "zinf/version.h"

const char *zinf_version(void)
{
	return ZINF_VERSION_STRING;
}
