/*
 * zinf logging.
 *
 * The library never prints to stdout and never exits. It logs to stderr, or to a
 * callback the application installs, at or above a level. The level comes from the
 * environment variable ZINF_LOG=error|warn|info|debug (default warn), read on first use,
 * and can be changed at run time. All functions here are thread-safe.
 */
#ifndef ZINF_LOG_H
#define ZINF_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

enum zinf_log_level {
	ZINF_LOG_ERROR = 0,
	ZINF_LOG_WARN = 1,
	ZINF_LOG_INFO = 2,
	ZINF_LOG_DEBUG = 3,
};

/* Receives one message (no trailing newline) at a level; user is passed through.
 * Called from whichever library thread logs, one message at a time under the logger's
 * lock: it must not call zinf (zinf_logf, zinf_log_set_callback, or anything that may
 * log), which would wait for that lock for ever. */
typedef void (*zinf_log_fn)(enum zinf_log_level level, const char *msg, void *user);

/* Install fn (NULL restores the stderr logger). */
void zinf_log_set_callback(zinf_log_fn fn, void *user);
/* Messages above level are dropped. Overrides ZINF_LOG. A level outside ERROR..DEBUG
 * is taken as the nearest one. */
void zinf_log_set_level(enum zinf_log_level level);
enum zinf_log_level zinf_log_get_level(void);
/* Log one printf-style message at level through the current sink. Used by every layer
 * of the library (io/ included) and available to applications that want one stream. */
void zinf_logf(enum zinf_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Parse "error", "warn", "info" or "debug". Returns 0, or -EINVAL for other text. */
int zinf_log_parse_level(const char *text, enum zinf_log_level *out);

#ifdef __cplusplus
}
#endif
#endif /* ZINF_LOG_H */
