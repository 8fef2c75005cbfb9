/*
 * Logging: a level and a sink (stderr or the application's callback), both global.
 * The level is read from ZINF_LOG on first use. Messages are formatted into a stack
 * buffer and written with one call, so concurrent threads never interleave a line.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zinf/error.h"
#include "zinf/log.h"

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static enum zinf_log_level log_level = ZINF_LOG_WARN;
static zinf_log_fn log_fn;
static void *log_user;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int zinf_log_parse_level(const char *text, enum zinf_log_level *out)
{
	for (int i = 0; out && i < 4; i++) {
		if (text && strcmp(text, level_names[i]) == 0) {
			*out = (enum zinf_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

static void log_init(void)
{
	const char *env = getenv("ZINF_LOG");
	enum zinf_log_level level;

	if (!env || !*env)
		return;
	if (zinf_log_parse_level(env, &level) == 0)
		log_level = level;
	else
		fprintf(stderr,
			"zinf: warn: ZINF_LOG=%s: unknown level (expected error, warn, info or debug)\n",
			env);
}

void zinf_log_set_callback(zinf_log_fn fn, void *user)
{
	pthread_mutex_lock(&log_lock);
	log_fn = fn;
	log_user = user;
	pthread_mutex_unlock(&log_lock);
}

void zinf_log_set_level(enum zinf_log_level level)
{
	if ((int)level < ZINF_LOG_ERROR)
		level = ZINF_LOG_ERROR;
	if ((int)level > ZINF_LOG_DEBUG)
		level = ZINF_LOG_DEBUG;
	pthread_once(&log_once, log_init);
	__atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

enum zinf_log_level zinf_log_get_level(void)
{
	pthread_once(&log_once, log_init);
	return __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

void zinf_logf(enum zinf_log_level level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if ((int)level < ZINF_LOG_ERROR) /* (an out-of-range level: the nearest one) */
		level = ZINF_LOG_ERROR;
	if (level > zinf_log_get_level())
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	zinf_error_one_line(msg);

	pthread_mutex_lock(&log_lock);
	if (log_fn)
		log_fn(level, msg, log_user);
	else
		fprintf(stderr, "zinf: %s: %s\n", level_names[level], msg);
	pthread_mutex_unlock(&log_lock);
}
