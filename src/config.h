/*
 * Internal view of a loaded config: the typed values the engine reads, and the schema
 * that maps every JSON key to one of them. The schema (config_schema.c) is the single
 * list of keys: the loader, `zinf check`, the docs test and zinf_config_get_* all walk it.
 */
#ifndef ZINF_SRC_CONFIG_H
#define ZINF_SRC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lr_schedule.h" /* enum zinf_lr_schedule_type, zinf_warmup_type */
#include "zinf/config.h"

/* ---- enum values (index into the schema entry's list of names) ---------------------- */
enum zinf_offload_device { ZINF_OFFLOAD_NONE, ZINF_OFFLOAD_CPU, ZINF_OFFLOAD_NVME };
enum zinf_device_kind { ZINF_DEVICE_AUTO, ZINF_DEVICE_CUDA, ZINF_DEVICE_HOST };
enum zinf_io_engine_kind { ZINF_IO_AUTO, ZINF_IO_URING, ZINF_IO_LIBAIO, ZINF_IO_PSYNC };
enum zinf_checksum_kind { ZINF_CHECKSUM_NONE, ZINF_CHECKSUM_CRC32C };
enum zinf_grads_home { ZINF_GRADS_AUTO, ZINF_GRADS_CPU, ZINF_GRADS_NVME };
enum zinf_optimizer_type { ZINF_OPT_ADAM, ZINF_OPT_ADAMW };

struct zinf_strlist {
	char **v; /* owned strings */
	int n;
};

/* Every value the config can hold, grouped as in the JSON file. */
struct zinf_config_values {
	uint64_t train_batch_size;
	uint64_t train_micro_batch_size_per_gpu;
	uint64_t gradient_accumulation_steps;
	double gradient_clipping; /* 0 = off */
	uint64_t steps_per_print;
	struct {
		bool enabled;
	} bf16;
	struct {
		bool enabled;
		double loss_scale; /* 0 = dynamic */
		int initial_scale_power;
		uint64_t loss_scale_window;
		int hysteresis;
		bool consecutive_hysteresis;
		double min_loss_scale;
	} fp16;
	struct {
		int type; /* enum zinf_optimizer_type */
		double lr;
		double betas[2];
		double eps;
		double weight_decay;
		bool bias_correction;
		bool adam_w_mode; /* type Adam only: decoupled decay (DeepSpeed's flag) */
	} optimizer;
	struct {
		int type; /* enum zinf_lr_schedule_type */
		double warmup_min_lr;
		double warmup_max_lr;
		uint64_t warmup_num_steps;
		int warmup_type; /* enum zinf_warmup_type */
		uint64_t total_num_steps;
		double warmup_min_ratio;
		double cos_min_ratio;
		int last_batch_iteration;
	} scheduler;
	struct {
		bool partition_activations;
		bool cpu_checkpointing;
		bool contiguous_memory_optimization;
		uint64_t number_checkpoints;
		bool synchronize_checkpoint_boundary;
		bool profile;
	} activation_checkpointing;
	struct {
		uint64_t block_size; /* bytes */
		uint64_t queue_depth;
		uint64_t intra_op_parallelism;
		bool single_submit;
		bool overlap_events;
		bool use_gds;
	} aio;
	struct {
		int stage;
		struct {
			int device; /* enum zinf_offload_device */
			char *nvme_path;
			bool pin_memory;
			uint64_t buffer_count;
			uint64_t buffer_size; /* elements */
			uint64_t max_in_cpu;  /* elements */
		} offload_param;
		struct {
			int device; /* enum zinf_offload_device */
			char *nvme_path;
			bool pin_memory;
			uint64_t buffer_count;
			bool pipeline_read;
			bool pipeline_write;
			bool fast_init;
			double ratio;
		} offload_optimizer;
		uint64_t sub_group_size; /* elements, as every *_size below but aio's */
		bool overlap_comm;
		bool contiguous_gradients;
		bool reduce_scatter;
		bool allgather_partitions;
		uint64_t reduce_bucket_size;
		uint64_t allgather_bucket_size;
		uint64_t stage3_prefetch_bucket_size;
		uint64_t stage3_param_persistence_threshold;
		uint64_t stage3_max_live_parameters;
		uint64_t stage3_max_reuse_distance;
		bool stage3_gather_16bit_weights_on_model_save;
	} zero;
	struct {
		int device;		      /* enum zinf_device_kind */
		uint64_t device_memory_limit; /* bytes; "auto" = free device memory */
		uint64_t pinned_memory_limit; /* bytes; "auto" = a quarter of host RAM */
		struct zinf_strlist nvme_paths;
		uint64_t chunk_size; /* bytes */
		int io_engine;	     /* enum zinf_io_engine_kind */
		int checksum;	     /* enum zinf_checksum_kind */
		char *trace;
		bool overlap_optimizer;
		bool overlap_gradients;
		int offload_gradients; /* enum zinf_grads_home */
		bool remove_stale_run_dir;
		bool tf32;
		int cuda_sync; /* enum zinf_cuda_sync (device.h) */
	} zinf;
};

/* ---- schema ------------------------------------------------------------------------- */
enum zinf_key_type {
	ZK_OBJECT,  /* a section holding other keys */
	ZK_BOOL,    /* bool */
	ZK_INT,	    /* int, an integer in [min, max] */
	ZK_COUNT,   /* uint64_t, a whole number in [min, max]; 5e8 accepted */
	ZK_BYTES,   /* uint64_t bytes: a whole number or a size string ("512MiB") */
	ZK_FLOAT,   /* double in [min, max] */
	ZK_ENUM,    /* int, index into the '|'-separated names */
	ZK_STRING,  /* char * (a path) */
	ZK_STRLIST, /* struct zinf_strlist; a single string is a list of one */
	ZK_BETAS,   /* double[2], each in [min, max) */
	ZK_IGNORED, /* a DeepSpeed key zinf does not implement: any value, one warning */
};

enum zinf_key_flags {
	ZKF_AUTO = 1u << 0,	   /* accepts "auto" */
	ZKF_WARN_IF_SET = 1u << 1, /* parsed, but a non-default value has no effect yet */
	ZKF_ICASE = 1u << 2,	   /* enum names compare case-insensitively */
	ZKF_MIN_OPEN = 1u << 3,	   /* min is exclusive */
	ZKF_POW2 = 1u << 4,	   /* must be a power of two */
	ZKF_ALIGN4K = 1u << 5,	   /* must be a multiple of 4096 */
	/* "auto" may stay unresolved: the device backend resolves it when it opens */
	ZKF_AUTO_AT_OPEN = 1u << 6,
};

/* Scheduler types a scheduler.params key belongs to (bit = 1 << enum zinf_lr_schedule_type). */
#define ZINF_SCHED_BIT(t) (1u << (t))

struct zinf_key {
	const char *path; /* dotted, as in the file */
	enum zinf_key_type type;
	size_t offset; /* into struct zinf_config_values; unused for OBJECT and IGNORED */
	unsigned flags;
	double def;	      /* default for BOOL, INT, COUNT, BYTES, FLOAT, ENUM (index) */
	const char *def_str;  /* default for STRING/STRLIST (NULL = unset), BETAS ("0.9,0.999"),
				and text shown for defaults that are "auto" */
	double min, max;      /* range for INT, COUNT, BYTES, FLOAT, BETAS */
	const char *names;    /* ENUM: "none|cpu|nvme" */
	unsigned sched_mask;  /* scheduler.params.*: the types that take this key */
	const char *alias_of; /* old DeepSpeed name: the key it stands for */
	const char *doc;      /* one line: meaning, and the DeepSpeed difference if any */
};

extern const struct zinf_key zinf_keys[];
extern const int zinf_n_keys;

/* Index of the key with this dotted path, or -1. */
int zinf_key_find(const char *path);

/* ---- the handle --------------------------------------------------------------------- */
#define ZINF_CONFIG_MAX_WARNINGS 64
#define ZINF_CONFIG_MAX_ORIGINS 8

/* The name messages give a key set by cfg's by_set value who (1 or more): "--set" or the
 * origin zinf_config_set_from gave. */
const char *zinf_config_setter(const struct zinf_config *cfg, unsigned char who);

struct zinf_config {
	struct zinf_config_values v;
	unsigned char *source;	/* enum zinf_config_source per key, zinf_n_keys entries */
	unsigned char *present; /* 1 if the key (or its alias) was in the file */
	unsigned char *is_auto; /* 1 while the value is an unresolved "auto" */
	unsigned char *by_set;	/* who set the key (a null too): 0 none, 1 zinf_config_set
				   (--set), 2 + k zinf_config_set_from of origin[k] */
	char origin[ZINF_CONFIG_MAX_ORIGINS][48]; /* zinf_config_set_from's flags */
	int n_origins;
	unsigned char set_by; /* by_set's value for the set under way */
	char *name;	      /* file path or name, for messages */
	int world_size;	      /* from the last resolve; 1 until then */
	char *warnings[ZINF_CONFIG_MAX_WARNINGS];
	int n_warnings;
	char last_error[1024];
};

static inline void *zinf_key_field(struct zinf_config *cfg, const struct zinf_key *k)
{
	return (char *)&cfg->v + k->offset;
}

static inline const void *zinf_key_cfield(const struct zinf_config *cfg, const struct zinf_key *k)
{
	return (const char *)&cfg->v + k->offset;
}

/* Record a one-line error "NAME: fmt..." and return code. */
int zinf_config_fail(struct zinf_config *cfg, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Record a one-line warning "NAME: fmt..." and log it at warn level. */
void zinf_config_warn(struct zinf_config *cfg, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Cross-key checks. world_size 0 = unknown (at load): batch sizes are checked for
 * divisibility only; otherwise exactly, and the missing one is derived. */
int zinf_config_validate(struct zinf_config *cfg, int world_size);
/* Two spellings of one directory: the same text but for trailing slashes ("/d", "/d/"),
 * or, both there, one inode (a link, "a/../d"). */
bool zinf_config_same_path(const char *a, const char *b);
/* config.c: every key back to its default and source; assign an object's keys under
 * prefix ("" for the top level) from the file, checking each (config_load.c calls it) */
void config_reset(struct zinf_config *cfg);
struct cJSON;
int config_walk(struct zinf_config *cfg, const struct cJSON *obj, const char *prefix);
/* Warnings about this machine (missing nvme paths, with paths) and unimplemented
 * values (for a plan, not zinf.nvme_paths with no NVMe tier): given by
 * zinf_config_resolve, once the file and the overrides are in. */
void zinf_config_warn_environment(struct zinf_config *cfg, bool paths, bool planning);

/* config_describe.c. Describe a key's accepted values ("an integer from 0 to 3"), for
 * messages and docs. */
void zinf_key_expected(const struct zinf_key *k, char *buf, size_t len);
/* A bound or whole number as the descriptions show it (%.15g; 1e+15 and up as 1e+15). */
void zinf_fmt_num(double v, char *buf, size_t len);
/* Name of enum value idx of k into buf. Returns 0 or -ERANGE. */
int zinf_key_enum_name(const struct zinf_key *k, int idx, char *buf, size_t len);
/* Write a key's current value as JSON text (strings quoted). */
void zinf_key_value_json(const struct zinf_config *cfg, int i, char *buf, size_t len);

#endif /* ZINF_SRC_CONFIG_H */
