/*
 * Minimal test support: one small executable per test, exit 0 pass, 1 fail, 77 skip.
 * A failed check prints file:line, the expression and a formatted reason, then exits 1
 * at once, so no test can pass after a failure.
 */
#ifndef ZINF_TESTS_TEST_H
#define ZINF_TESTS_TEST_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_EXIT_PASS 0
#define T_EXIT_FAIL 1
#define T_EXIT_SKIP 77

#define T_CHECK(cond, ...)                                                                         \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);   \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(T_EXIT_FAIL);                                                         \
		}                                                                                  \
	} while (0)

#define T_CHECK_RC(expr)                                                                           \
	do {                                                                                       \
		int t_rc_ = (expr);                                                                \
		T_CHECK(t_rc_ == 0, "%s returned %d", #expr, t_rc_);                               \
	} while (0)

#define T_CHECK_STR(got, want)                                                                     \
	do {                                                                                       \
		const char *t_got_ = (got), *t_want_ = (want);                                     \
		T_CHECK(t_got_ &&strcmp(t_got_, t_want_) == 0, "\n  got:  %s\n  want: %s",         \
			t_got_ ? t_got_ : "(null)", t_want_);                                      \
	} while (0)

#define T_SKIP(...)                                                                                \
	do {                                                                                       \
		fprintf(stderr, "skip: ");                                                         \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fputc('\n', stderr);                                                               \
		exit(T_EXIT_SKIP);                                                                 \
	} while (0)

#endif /* ZINF_TESTS_TEST_H */
