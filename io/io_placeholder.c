/* Placeholder until the I/O engine lands: keeps the zinf_io object library non-empty. */
#include "zinf/error.h"

int zinf_io_placeholder(void);
int zinf_io_placeholder(void)
{
	return ZINF_OK;
}
