/*
 * zinf error codes.
 *
 * Every library function that can fail returns int: 0 on success or a negative code.
 * Codes are negative errno values (-EINVAL, -ENOMEM, -EIO, ...) or one of the zinf codes
 * below, which live outside the errno range. The caller never reads errno.
 * zinf_strerror() names a code; the handle that failed keeps a one-line message with
 * context (key, file, offset and a hint) - see e.g. zinf_config_last_error(). Read it
 * after a call returned non-zero: some calls clear it (zinf_config_load*,
 * zinf_config_set, zinf_config_resolve, zinf_adam_step), others leave it as it was when
 * they succeed, like errno (the engine's: zinf_last_error).
 *
 * NULL arguments, unless a function's comment says otherwise:
 *   - *_destroy(NULL) does nothing; *_last_error(NULL) returns "".
 *   - A handle must otherwise be a live handle; the zinf_config_*, zinf_plan_* and
 *     zinf_adam_* calls (and every zinf_adam_nvme_* call) also refuse NULL with -EINVAL.
 *   - A NULL required pointer (text, buffer, array, out-pointer) is refused with -EINVAL
 *     before anything changes; an out-pointer documented "may be NULL" is optional.
 *   - An err/errlen pair may be NULL (or errlen 0): no message is written.
 *   - helpers that cannot fail (*_opts_init, zinf_crc32c with len > 0, zinf_format_bytes
 *     and zinf_format_double with len > 0, zinf_error_one_line) require their pointers.
 */
#ifndef ZINF_ERROR_H
#define ZINF_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

enum zinf_error {
	ZINF_OK = 0,
	ZINF_ECONFIG = -10001,	 /* a configuration value or combination is invalid */
	ZINF_EJSON = -10002,	 /* malformed JSON */
	ZINF_ECHECKSUM = -10003, /* stored data failed its CRC32C check */
	ZINF_EBUDGET = -10004,	 /* a memory tier budget cannot hold what was asked */
	ZINF_EFORMAT = -10005,	 /* a file (checkpoint, weights, tokens) is malformed */
	ZINF_EDEVICE = -10006,	 /* the device backend (CUDA) reported an error */
	ZINF_ESTATE = -10007,	 /* call not valid in the handle's current state */
};

/* A static, human-readable name for code (negative errno or enum zinf_error).
 * Never NULL. Thread-safe. */
const char *zinf_strerror(int code);

/* Make msg one line, in place: each control character (a newline or tab that a file's
 * key or value brought into a message) becomes '?'. Messages and log lines of the
 * library and the CLI pass through it. */
void zinf_error_one_line(char *msg);

#ifdef __cplusplus
}
#endif
#endif /* ZINF_ERROR_H */
