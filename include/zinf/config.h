/*
 * zinf configuration: a DeepSpeed-style JSON file plus a "zinf" block.
 *
 * Every key zinf knows is listed in docs/config.md with its type, default and DeepSpeed
 * equivalent. Loading is strict: malformed JSON, a wrong type, an out-of-range or invalid
 * enum value, an unknown key (with the closest known key suggested) and inconsistent
 * combinations are errors; DeepSpeed keys that zinf does not implement are warnings.
 * Every message is one line: "FILE: key.path: what is wrong (what was expected)".
 *
 * Values keep their source (file, default, auto, derived, set). "auto" (as in Hugging
 * Face's DeepSpeed configs) is accepted where DeepSpeed accepts it and resolved later by
 * zinf_config_resolve() from the model, the launch and the hardware.
 *
 * Threading: a config handle is not thread-safe while it is being loaded, set or
 * resolved; afterwards any number of threads may read it.
 */
#ifndef ZINF_CONFIG_H
#define ZINF_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct zinf_config;

enum zinf_config_source {
	ZINF_SRC_DEFAULT = 0, /* not in the file: the documented default */
	ZINF_SRC_FILE,	      /* given in the file */
	ZINF_SRC_AUTO,	      /* "auto" in the file, not resolved yet */
	ZINF_SRC_RESOLVED,    /* "auto" in the file, resolved by zinf_config_resolve() */
	ZINF_SRC_DERIVED,     /* computed from other keys (e.g. the third batch size) */
	ZINF_SRC_SET,	      /* set by zinf_config_set() (command-line override) */
};

/* Create a config holding every default. *out is owned by the caller; free with
 * zinf_config_destroy(). Returns 0, -EINVAL (out NULL) or -ENOMEM. */
int zinf_config_create(struct zinf_config **out);
/* Free cfg. NULL is a no-op. */
void zinf_config_destroy(struct zinf_config *cfg);

/* Read and validate the JSON file at path into cfg. A load starts from the defaults: what
 * cfg held before (an earlier load, a zinf_config_set) is dropped, so overrides go after
 * it. Returns 0, or ZINF_EJSON / ZINF_ECONFIG / -errno with the
 * one-line message in zinf_config_last_error(). On error cfg keeps no partial state
 * that later calls could mistake for a valid config. */
int zinf_config_load_file(struct zinf_config *cfg, const char *path);
/* Same, from a NUL-terminated JSON text (NULL: -EINVAL); name is used in messages in
 * place of a path (NULL: "config"). */
int zinf_config_load_string(struct zinf_config *cfg, const char *json, const char *name);

/* Override one key with a value written as in JSON ("3", "true", "\"nvme\"", "512MiB"
 * or a bare string for string keys), as the command line does. Source becomes SET.
 * Checks the value like the loader; cross-key checks run again in zinf_config_resolve.
 * Returns 0, ZINF_ECONFIG (also for a NULL key or value) or -EINVAL (cfg NULL); its
 * errors and warnings are named "--set", not the file. */
int zinf_config_set(struct zinf_config *cfg, const char *key, const char *value);
/* As zinf_config_set, for a value a program's own flag gave (origin: its name, such as
 * "--micro-batch-size", 1 to 47 bytes on one line; at most 8 origins a handle): its
 * errors and warnings, and those zinf_config_resolve says about the key, are named
 * origin instead of --set. -EINVAL for a bad origin, with zinf_config_last_error. */
int zinf_config_set_from(struct zinf_config *cfg, const char *key, const char *value,
			 const char *origin);

/* What "auto" values resolve from. Zero fields are unknown: an "auto" that needs one
 * stays unresolved and is an error only when require_all is true. */
struct zinf_config_resolve_info {
	int world_size;	      /* ranks; 0 = 1 */
	uint64_t hidden_size; /* model hidden size, for the bucket-size rules */
	uint64_t total_steps; /* optimizer steps of the run, for total_num_steps */
	/* device memory for device_memory_limit, which resolves to all of it: on a GPU, the
	 * free memory less about 1 GiB for the CUDA context and cuBLAS's workspace (as
	 * "auto" left to the device does) */
	uint64_t device_free_bytes;
	uint64_t host_total_bytes; /* host RAM, for pinned_memory_limit */
	bool require_all;	   /* every "auto" must resolve (true before training) */
	/* a plan's config (zinf plan): the drives it lists are those the plan may use,
	 * so zinf.nvme_paths does not warn when no tier of the config is on nvme */
	bool planning;
};

/* Resolve "auto" values and re-run cross-key checks (batch arithmetic needs the world
 * size); warn of what has no effect and of paths missing on this machine (after the
 * overrides: the values looked at are the run's). info may be NULL: every field
 * unknown. Returns 0, ZINF_ECONFIG, or -EINVAL for a NULL cfg. */
int zinf_config_resolve(struct zinf_config *cfg, const struct zinf_config_resolve_info *info);

/* Write the JSON of the config file src_path (NULL: an empty object) with each
 * "KEY=VALUE" of sets applied (a dotted key names nested objects, made where missing;
 * VALUE is JSON when it parses as a number, true, false, null or a quoted string, else
 * a string) to out_path: written to out_path.partial and renamed, so a failure leaves
 * nothing; an existing out_path is refused unless force. sets may be NULL when n_sets is
 * 0. Returns 0 or a negative code (-EINVAL for a NULL out_path) with one line in err
 * (when err is not NULL). The result is not validated: load it to check it. */
int zinf_config_write_edited(const char *src_path, const char *const *sets, int n_sets,
			     const char *out_path, bool force, char *err, size_t errlen);

/* The last error on cfg as one line ("" if none, or cfg NULL). Valid until the next call
 * on cfg. */
const char *zinf_config_last_error(const struct zinf_config *cfg);

/* Warnings gathered while loading (unimplemented DeepSpeed keys, deprecated names) and
 * resolving (values with no effect, paths missing on this machine), each one line. i < zinf_config_warning_count()
 * (0 for a NULL cfg); NULL for i out of range or a NULL cfg. */
int zinf_config_warning_count(const struct zinf_config *cfg);
const char *zinf_config_warning(const struct zinf_config *cfg, int i);

/* Typed reads by dotted key ("zero_optimization.stage"). Numbers (integers, counts,
 * byte sizes, floats) read as double or uint64; an unresolved "auto" reads as
 * -ENODATA. Returns 0, -ENOENT (no such key, or key NULL) or -EINVAL (wrong type, or
 * cfg or out NULL). *out is written only on success. */
int zinf_config_get_u64(const struct zinf_config *cfg, const char *key, uint64_t *out);
int zinf_config_get_double(const struct zinf_config *cfg, const char *key, double *out);
int zinf_config_get_bool(const struct zinf_config *cfg, const char *key, bool *out);
/* Strings and enums. A string's pointer lives until the key is set again or cfg is
 * loaded or destroyed; an enum's name lives as long as the process. */
int zinf_config_get_string(const struct zinf_config *cfg, const char *key, const char **out);
/* List keys (zinf.nvme_paths): element i, or -ERANGE past the end. */
int zinf_config_get_list(const struct zinf_config *cfg, const char *key, int i, const char **out);
/* Where a key's value came from, or -ENOENT. */
int zinf_config_get_source(const struct zinf_config *cfg, const char *key,
			   enum zinf_config_source *out);

/* Write every key with its value and source, one per line ("text") or as one JSON
 * object ("json": {"key": {"value": v, "source": "file"}, ...}). Returns 0 or -EIO. */
int zinf_config_print(const struct zinf_config *cfg, FILE *f, bool json);

/* Parse a byte size as the config and the CLI write it, starting with a decimal digit:
 * an integer ("4096"), a number
 * in exponent form that is a whole number ("5e8"), or a number with a unit, decimal
 * KB MB GB TB (10^3...) or binary KiB MiB GiB TiB (2^10...), e.g. "512MiB", "1.5GiB",
 * "2GB"; "B" alone is bytes. Returns 0, or -EINVAL (not a size, text or out NULL) /
 * -ERANGE (> 2^64-1 or not a whole number of bytes). Thread-safe. */
int zinf_parse_bytes(const char *text, uint64_t *out);

/* Write bytes to buf in the largest binary unit that keeps it readable ("1 MiB",
 * "1.50 GiB", "4096 B"). Returns buf. Thread-safe. */
char *zinf_format_bytes(uint64_t bytes, char *buf, size_t len);
/* Write v to buf in the fewest significant digits (%g) that read back (strtod) as exactly
 * v: 0.9, not 0.90000000000000002; 5e-05; 0.30000000000000004 for 0.1 + 0.2. NaN and the
 * infinities as printf writes them. 25 bytes hold any double (-2.2250738585072014e-308);
 * a shorter buf is cut. In the C locale's form, as JSON wants it, whatever LC_NUMERIC
 * says. Returns buf. Thread-safe. */
char *zinf_format_double(double v, char *buf, size_t len);
/* strtod in the C locale ('.' the decimal point), whatever LC_NUMERIC says; as strtod
 * otherwise (end may be NULL; errno as strtod sets it). Thread-safe. */
double zinf_strtod(const char *text, char **end);
/* The first raw control character (below 0x20, a NUL too) inside a string of the JSON
 * text [text, text + len), or NULL when there is none. JSON
 * wants them escaped (\n, \t, \u0001); Python's json, which DeepSpeed and Hugging Face
 * read their files with, refuses them where cJSON takes them. Every JSON file zinf reads
 * (configs, config.json, safetensors headers and indexes, its state manifest) is checked
 * with it, so what zinf reads, they read. Thread-safe. */
const char *zinf_json_raw_control(const char *text, size_t len);
/* The host memory this process may use, in bytes: the physical memory, or less where
 * its control group (v1 or v2: a container's, a batch job's) has a lower memory limit
 * (0 when the system does not say). The measure of the host-memory defaults ("auto")
 * and checks. */
uint64_t zinf_host_memory_bytes(void);
/* The CPUs this process may use: those of its affinity mask, fewer where its control
 * group has a lower CPU quota (rounded up); at least 1. mask, when not NULL, gets the
 * affinity mask's count alone: what OpenMP and OpenBLAS start a thread per. */
unsigned zinf_host_cpus(unsigned *mask);

/* Write the reference of every key zinf knows as a Markdown table (key, type, default,
 * accepted values, meaning): the table in docs/config.md. Returns 0 or -EIO. */
int zinf_config_print_reference(FILE *f);

/* Name of a source: "default", "file", "auto", "resolved", "derived", "set". */
const char *zinf_config_source_name(enum zinf_config_source src);

#ifdef __cplusplus
}
#endif
#endif /* ZINF_CONFIG_H */
