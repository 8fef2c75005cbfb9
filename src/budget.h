/*
 * Budgets measured against this host's memory (src/size.c): the host device backend's
 * heap and the pinned pool are host memory, so a limit beyond it is a promise a step
 * would break.
 */
#ifndef ZINF_SRC_BUDGET_H
#define ZINF_SRC_BUDGET_H

#include <stddef.h>
#include <stdint.h>

/* 0 when bytes fit the host's memory (or the system does not say how much it has);
 * else ZINF_EBUDGET with "WHAT budget: KEY N is more than the M of memory of this
 * host" and why (NULL: nothing) in err. */
int zinf_budget_fits_host(const char *what, const char *key, uint64_t bytes, const char *why,
			  char *err, size_t errlen);

#endif /* ZINF_SRC_BUDGET_H */
