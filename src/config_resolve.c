/*
 * Cross-key rules of the config: the batch-size triple, precision, offload tiers and the
 * stage they need, scheduler parameters by type; warnings about this machine; and the
 * resolution of "auto" values from the model, the launch and the hardware (the rules
 * Hugging Face's DeepSpeed integration uses, where it has one).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "zinf/error.h"

#define KEY(path) key_index(path)

static int key_index(const char *path)
{
	int i = zinf_key_find(path);
	return i < 0 ? 0 : i; /* paths below are all in the schema; a test checks it */
}

/* A value given (in the file or by zinf_config_set) or resolved, not "auto"/default. */
static bool known(const struct zinf_config *cfg, int i)
{
	return !cfg->is_auto[i] &&
	       (cfg->source[i] == ZINF_SRC_FILE || cfg->source[i] == ZINF_SRC_SET ||
		cfg->source[i] == ZINF_SRC_RESOLVED);
}

/* ---- naming where a value came from ------------------------------------------------ */

/* Who on the command line (--set, or a flag zinf_config_set_from named) gave one of
 * keys, a null too (NULL-terminated; "x[3]": list x); NULL when none did. */
static const char *from_set(const struct zinf_config *cfg, const char *const *keys)
{
	for (; *keys; keys++) {
		char base[96];
		int i;

		snprintf(base, sizeof(base), "%.*s", (int)strcspn(*keys, "["), *keys);
		i = KEY(base);
		if (cfg->by_set[i])
			return zinf_config_setter(cfg, cfg->by_set[i]);
		if (cfg->source[i] == ZINF_SRC_SET)
			return "--set";
	}
	return NULL;
}

/* "keys[0]: message", as an error (code) or a warning, named --set when the command line
 * gave one of keys (as zinf_config_set names its own errors), else after the file. */
__attribute__((format(printf, 4, 0))) static int
say(struct zinf_config *cfg, int code, const char *const *keys, const char *fmt, va_list ap)
{
	char msg[512], set_name[sizeof(cfg->origin[0])], *file = cfg->name;
	const char *who = from_set(cfg, keys);
	int rc = 0;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (who) {
		snprintf(set_name, sizeof(set_name), "%s", who);
		cfg->name = set_name;
	}
	if (code)
		rc = zinf_config_fail(cfg, code, "%s: %s", keys[0], msg);
	else
		zinf_config_warn(cfg, "%s: %s", keys[0], msg);
	cfg->name = file;
	return rc;
}

__attribute__((format(printf, 3, 4))) static int
fail_keys(struct zinf_config *cfg, const char *const *keys, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = say(cfg, ZINF_ECONFIG, keys, fmt, ap);
	va_end(ap);
	return rc;
}

__attribute__((format(printf, 3, 4))) static void
warn_keys(struct zinf_config *cfg, const char *const *keys, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(cfg, 0, keys, fmt, ap);
	va_end(ap);
}

#define KEYS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- batch sizes -------------------------------------------------------------------- */

static void set_derived(struct zinf_config *cfg, int i, uint64_t *field, uint64_t v)
{
	*field = v;
	cfg->source[i] = cfg->is_auto[i] ? ZINF_SRC_RESOLVED : ZINF_SRC_DERIVED;
	cfg->is_auto[i] = 0;
}

/* The matching world size if tbs = mb * gas * ws for some whole ws, else 0. */
static uint64_t implied_world(uint64_t tbs, uint64_t mb, uint64_t gas)
{
	return tbs % (mb * gas) == 0 ? tbs / (mb * gas) : 0;
}

static int check_batch(struct zinf_config *cfg, int world)
{
	struct zinf_config_values *v = &cfg->v;
	int i_tbs = KEY("train_batch_size"), i_mb = KEY("train_micro_batch_size_per_gpu"),
	    i_gas = KEY("gradient_accumulation_steps");
	bool tbs = known(cfg, i_tbs), mb = known(cfg, i_mb), gas = known(cfg, i_gas);
	uint64_t ws = world > 0 ? (uint64_t)world : 1;

	/* Values derived by an earlier resolve are recomputed from the given ones. */
	if (!tbs && cfg->source[i_tbs] == ZINF_SRC_DERIVED)
		v->train_batch_size = 0, cfg->source[i_tbs] = ZINF_SRC_DEFAULT;
	if (!mb && cfg->source[i_mb] == ZINF_SRC_DERIVED)
		v->train_micro_batch_size_per_gpu = 0, cfg->source[i_mb] = ZINF_SRC_DEFAULT;
	if (!gas && cfg->source[i_gas] == ZINF_SRC_DERIVED)
		v->gradient_accumulation_steps = 0, cfg->source[i_gas] = ZINF_SRC_DEFAULT;

	if (tbs && mb && gas) {
		uint64_t prod = v->train_micro_batch_size_per_gpu * v->gradient_accumulation_steps;
		uint64_t iw = implied_world(v->train_batch_size, v->train_micro_batch_size_per_gpu,
					    v->gradient_accumulation_steps);
		if (world == 0 && iw)
			return 0; /* consistent for some world size; checked exactly at launch */
		uint64_t total;
		bool wraps = __builtin_mul_overflow(prod, ws, &total);
		if (world == 0 || wraps || total != v->train_batch_size) {
			char hint[64] = "", product[32];
			snprintf(product, sizeof(product), wraps ? "more than 2^64" : "%llu",
				 (unsigned long long)total);
			if (iw && world > 0)
				snprintf(hint, sizeof(hint), "; a world size of %llu would match",
					 (unsigned long long)iw);
			return fail_keys(
				cfg,
				KEYS("train_batch_size", "train_micro_batch_size_per_gpu",
				     "gradient_accumulation_steps"),
				"%llu != train_micro_batch_size_per_gpu %llu x gradient_accumulation_steps %llu x world size %llu = %s (expected train_batch_size = micro batch x accumulation steps x world size%s)",
				(unsigned long long)v->train_batch_size,
				(unsigned long long)v->train_micro_batch_size_per_gpu,
				(unsigned long long)v->gradient_accumulation_steps,
				(unsigned long long)ws, product, hint);
		}
		return 0;
	}
	if (tbs && (mb || gas)) {
		uint64_t given =
			mb ? v->train_micro_batch_size_per_gpu : v->gradient_accumulation_steps;
		const char *gname =
			mb ? "train_micro_batch_size_per_gpu" : "gradient_accumulation_steps";
		uint64_t div = given * ws;
		if (v->train_batch_size % div != 0)
			return fail_keys(
				cfg, KEYS("train_batch_size", gname),
				"%llu is not divisible by %s %llu x world size %llu (expected a multiple of %llu)",
				(unsigned long long)v->train_batch_size, gname,
				(unsigned long long)given, (unsigned long long)ws,
				(unsigned long long)div);
		if (world == 0)
			return 0;
		if (mb)
			set_derived(cfg, i_gas, &v->gradient_accumulation_steps,
				    v->train_batch_size / div);
		else
			set_derived(cfg, i_mb, &v->train_micro_batch_size_per_gpu,
				    v->train_batch_size / div);
		return 0;
	}
	if (world == 0)
		return 0;
	if (tbs) { /* only the global batch: no accumulation, as DeepSpeed */
		if (v->train_batch_size % ws != 0)
			return fail_keys(
				cfg, KEYS("train_batch_size"),
				"%llu is not divisible by world size %llu (expected a multiple of %llu)",
				(unsigned long long)v->train_batch_size, (unsigned long long)ws,
				(unsigned long long)ws);
		set_derived(cfg, i_gas, &v->gradient_accumulation_steps, 1);
		set_derived(cfg, i_mb, &v->train_micro_batch_size_per_gpu,
			    v->train_batch_size / ws);
	} else if (mb) {
		uint64_t steps = gas ? v->gradient_accumulation_steps : 1, total;
		if (__builtin_mul_overflow(v->train_micro_batch_size_per_gpu * steps, ws, &total) ||
		    (double)total > zinf_keys[i_tbs].max)
			return fail_keys(
				cfg,
				KEYS("train_micro_batch_size_per_gpu",
				     "gradient_accumulation_steps"),
				"%llu x gradient_accumulation_steps %llu x world size %llu is more than train_batch_size's maximum %.0f",
				(unsigned long long)v->train_micro_batch_size_per_gpu,
				(unsigned long long)steps, (unsigned long long)ws,
				zinf_keys[i_tbs].max);
		if (!gas)
			set_derived(cfg, i_gas, &v->gradient_accumulation_steps, 1);
		set_derived(cfg, i_tbs, &v->train_batch_size, total);
	}
	return 0;
}

/* ---- the other cross-key rules ------------------------------------------------------ */

static int check_offload(struct zinf_config *cfg, const char *which, int device,
			 const char *nvme_path)
{
	char key[96], dev[96];
	int stage = cfg->v.zero.stage;
	bool param = strcmp(which, "offload_param") == 0;

	if (device == ZINF_OFFLOAD_NONE)
		return 0;
	if (param && stage < 3)
		return fail_keys(
			cfg,
			KEYS("zero_optimization.offload_param.device", "zero_optimization.stage"),
			"%s parameter offload needs zero_optimization.stage 3, got %d (expected stage 3, or offload_param.device none)",
			device == ZINF_OFFLOAD_NVME ? "nvme" : "cpu", stage);
	if (!param && stage < 1)
		return fail_keys(
			cfg,
			KEYS("zero_optimization.offload_optimizer.device",
			     "zero_optimization.stage"),
			"optimizer offload needs zero_optimization.stage 1, 2 or 3, got 0 (expected a ZeRO stage, or offload_optimizer.device none)");
	snprintf(key, sizeof(key), "zero_optimization.%s.nvme_path", which);
	snprintf(dev, sizeof(dev), "zero_optimization.%s.device", which);
	if (device == ZINF_OFFLOAD_NVME && !nvme_path && cfg->v.zinf.nvme_paths.n == 0)
		return fail_keys(
			cfg, KEYS(key, dev),
			"missing; %s.device is nvme (expected a directory on the NVMe drive, or zinf.nvme_paths)",
			which);
	return 0;
}

static int check_scheduler(struct zinf_config *cfg)
{
	const struct zinf_key *tk = &zinf_keys[KEY("scheduler.type")];
	int type = cfg->v.scheduler.type;
	char tname[32];
	int i_total = KEY("scheduler.params.total_num_steps");

	zinf_key_enum_name(tk, type, tname, sizeof(tname));
	for (int i = 0; i < zinf_n_keys; i++) {
		const struct zinf_key *k = &zinf_keys[i];
		char takes[256] = "";
		if (!k->sched_mask || !cfg->present[i])
			continue;
		if (type == ZINF_LR_CONSTANT)
			return fail_keys(
				cfg, KEYS(k->path, "scheduler.type"),
				"scheduler parameters without scheduler.type (expected a type: WarmupLR, WarmupDecayLR or WarmupCosineLR)");
		if (k->sched_mask & ZINF_SCHED_BIT(type))
			continue;
		for (int j = 0; j < zinf_n_keys; j++) {
			if (zinf_keys[j].sched_mask & ZINF_SCHED_BIT(type)) {
				size_t o = strlen(takes);
				snprintf(takes + o, sizeof(takes) - o, "%s%s", o ? ", " : "",
					 zinf_keys[j].path + strlen("scheduler.params."));
			}
		}
		return fail_keys(cfg, KEYS(k->path, "scheduler.type"),
				 "not a parameter of %s (expected one of %s)", tname, takes);
	}
	if ((type == ZINF_LR_WARMUP_DECAY || type == ZINF_LR_WARMUP_COSINE) &&
	    !cfg->present[i_total] && cfg->source[i_total] != ZINF_SRC_SET)
		return fail_keys(
			cfg, KEYS("scheduler.params.total_num_steps", "scheduler.type"),
			"missing; %s needs it (expected the run's total optimizer steps, or \"auto\")",
			tname);
	return 0;
}

int zinf_config_validate(struct zinf_config *cfg, int world_size)
{
	struct zinf_config_values *v = &cfg->v;
	int i_max = KEY("scheduler.params.warmup_max_lr"), rc;

	if (v->fp16.enabled && v->bf16.enabled && !cfg->is_auto[KEY("fp16.enabled")] &&
	    !cfg->is_auto[KEY("bf16.enabled")])
		return fail_keys(
			cfg, KEYS("fp16.enabled", "bf16.enabled"),
			"fp16 and bf16 are both enabled (expected at most one of fp16.enabled, bf16.enabled)");
	rc = check_offload(cfg, "offload_param", v->zero.offload_param.device,
			   v->zero.offload_param.nvme_path);
	if (!rc)
		rc = check_offload(cfg, "offload_optimizer", v->zero.offload_optimizer.device,
				   v->zero.offload_optimizer.nvme_path);
	if (!rc && v->zinf.offload_gradients == ZINF_GRADS_NVME &&
	    v->zero.offload_optimizer.device != ZINF_OFFLOAD_NVME)
		rc = fail_keys(
			cfg,
			KEYS("zinf.offload_gradients",
			     "zero_optimization.offload_optimizer.device"),
			"nvme needs zero_optimization.offload_optimizer.device nvme (expected auto or cpu, or the optimizer state on NVMe)");
	if (!rc)
		rc = check_scheduler(cfg);
	if (!rc)
		rc = check_batch(cfg, world_size);
	if (rc)
		return rc;
	/* DeepSpeed turns overlap_comm on at stage 3 unless told otherwise. */
	if (v->zero.stage == 3 && !cfg->present[KEY("zero_optimization.overlap_comm")] &&
	    cfg->source[KEY("zero_optimization.overlap_comm")] != ZINF_SRC_SET) {
		v->zero.overlap_comm = true;
		cfg->source[KEY("zero_optimization.overlap_comm")] = ZINF_SRC_DERIVED;
	}
	/* DeepSpeed's WarmupLR warms up to the optimizer's rate unless told otherwise (since
	 * mid-2025; WarmupDecayLR keeps 0.001) */
	if (v->scheduler.type == ZINF_LR_WARMUP && !cfg->present[i_max] &&
	    cfg->source[i_max] != ZINF_SRC_SET && !cfg->is_auto[i_max]) {
		v->scheduler.warmup_max_lr = v->optimizer.lr;
		cfg->source[i_max] = ZINF_SRC_DERIVED;
	} else if (v->scheduler.type != ZINF_LR_WARMUP && cfg->source[i_max] == ZINF_SRC_DERIVED) {
		/* derived for a WarmupLR a --set then changed: the default again */
		v->scheduler.warmup_max_lr = zinf_keys[i_max].def;
		cfg->source[i_max] = ZINF_SRC_DEFAULT;
	}
	return 0;
}

/* ---- warnings about this machine and about values without effect ------------------- */

static void warn_missing_dir(struct zinf_config *cfg, const char *key, const char *path)
{
	struct stat st;

	if (path && stat(path, &st) != 0)
		warn_keys(cfg, KEYS(key),
			  "%s does not exist on this machine (an error only when training starts)",
			  path);
	else if (path && !S_ISDIR(st.st_mode))
		warn_keys(cfg, KEYS(key),
			  "%s is not a directory (an error only when training starts)", path);
}

static void warn_missing_paths(struct zinf_config *cfg)
{
	struct zinf_config_values *v = &cfg->v;

	/* (with zinf.nvme_paths, the offload blocks' own paths are not used) */
	if (v->zero.offload_param.device == ZINF_OFFLOAD_NVME && !v->zinf.nvme_paths.n)
		warn_missing_dir(cfg, "zero_optimization.offload_param.nvme_path",
				 v->zero.offload_param.nvme_path);
	if (v->zero.offload_optimizer.device == ZINF_OFFLOAD_NVME && !v->zinf.nvme_paths.n)
		warn_missing_dir(cfg, "zero_optimization.offload_optimizer.nvme_path",
				 v->zero.offload_optimizer.nvme_path);
	if (v->zero.offload_param.device == ZINF_OFFLOAD_NVME ||
	    v->zero.offload_optimizer.device == ZINF_OFFLOAD_NVME) {
		for (int i = 0; i < v->zinf.nvme_paths.n; i++) {
			char key[48];
			snprintf(key, sizeof(key), "zinf.nvme_paths[%d]", i);
			warn_missing_dir(cfg, key, v->zinf.nvme_paths.v[i]);
		}
	}
	if (v->zinf.trace) {
		char dir[1024];
		char *slash;
		snprintf(dir, sizeof(dir), "%s", v->zinf.trace);
		slash = strrchr(dir, '/');
		if (slash && slash != dir) {
			*slash = 0;
			warn_missing_dir(cfg, "zinf.trace", dir);
		}
	}
}

void zinf_config_warn_environment(struct zinf_config *cfg, bool paths, bool planning)
{
	struct zinf_config_values *v = &cfg->v;

	if (paths)
		warn_missing_paths(cfg);
	for (int i = 0; i < zinf_n_keys; i++) {
		const struct zinf_key *k = &zinf_keys[i];
		const void *f = zinf_key_cfield(cfg, k);
		bool differs = false;
		if (!(k->flags & ZKF_WARN_IF_SET) || !cfg->present[i])
			continue;
		if (k->type == ZK_BOOL)
			differs = *(const bool *)f != (k->def != 0);
		else if (k->type == ZK_COUNT)
			differs = *(const uint64_t *)f != (uint64_t)k->def;
		else if (k->type == ZK_FLOAT)
			differs = *(const double *)f != k->def;
		if (differs)
			warn_keys(cfg, KEYS(k->path),
				  "not implemented by zinf yet; the value has no effect");
	}
	if (v->zero.offload_param.max_in_cpu && v->zero.offload_param.device != ZINF_OFFLOAD_NVME)
		warn_keys(cfg,
			  KEYS("zero_optimization.offload_param.max_in_cpu",
			       "zero_optimization.offload_param.device"),
			  "no effect unless the parameters' home is nvme");
	if (v->zinf.nvme_paths.n && !planning &&
	    v->zero.offload_param.device != ZINF_OFFLOAD_NVME &&
	    v->zero.offload_optimizer.device != ZINF_OFFLOAD_NVME)
		warn_keys(cfg,
			  KEYS("zinf.nvme_paths", "zero_optimization.offload_param.device",
			       "zero_optimization.offload_optimizer.device"),
			  "no effect unless offload_param or offload_optimizer is on nvme");
	if (v->zero.offload_optimizer.ratio < 1 &&
	    v->zero.offload_optimizer.device != ZINF_OFFLOAD_CPU)
		warn_keys(
			cfg,
			KEYS("zero_optimization.offload_optimizer.ratio",
			     "zero_optimization.offload_optimizer.device"),
			"%s",
			v->zero.offload_optimizer.device == ZINF_OFFLOAD_NVME
				? "not implemented with nvme yet; the whole optimizer state is on NVMe"
				: "no effect unless the optimizer state's home is cpu (with none all of it is on the device)");
	if (v->optimizer.type == ZINF_OPT_ADAM && v->optimizer.weight_decay > 0 &&
	    !cfg->present[KEY("optimizer.params.adam_w_mode")])
		warn_keys(
			cfg, KEYS("optimizer.type", "optimizer.params.weight_decay"),
			"Adam applies weight_decay as L2 in zinf, but DeepSpeed's Adam decouples it by default (set optimizer.params.adam_w_mode, or use AdamW)");
	if (v->scheduler.total_num_steps &&
	    v->scheduler.total_num_steps < v->scheduler.warmup_num_steps &&
	    !cfg->is_auto[KEY("scheduler.params.total_num_steps")] &&
	    !cfg->is_auto[KEY("scheduler.params.warmup_num_steps")]) /* "auto": 0 */
		warn_keys(
			cfg,
			KEYS("scheduler.params.total_num_steps",
			     "scheduler.params.warmup_num_steps"),
			"%llu is less than warmup_num_steps %llu; the rate warms up through warmup_num_steps all the same, then falls at once to the schedule's final rate",
			(unsigned long long)v->scheduler.total_num_steps,
			(unsigned long long)v->scheduler.warmup_num_steps);
}

/* ---- "auto" ------------------------------------------------------------------------- */

static void resolve_u64(struct zinf_config *cfg, const char *path, uint64_t value)
{
	int i = KEY(path);

	if (!cfg->is_auto[i])
		return;
	*(uint64_t *)zinf_key_field(cfg, &zinf_keys[i]) = value;
	cfg->is_auto[i] = 0;
	cfg->source[i] = ZINF_SRC_RESOLVED;
}

static void resolve_double(struct zinf_config *cfg, const char *path, double value)
{
	int i = KEY(path);

	if (!cfg->is_auto[i])
		return;
	*(double *)zinf_key_field(cfg, &zinf_keys[i]) = value;
	cfg->is_auto[i] = 0;
	cfg->source[i] = ZINF_SRC_RESOLVED;
}

static void resolve_bool(struct zinf_config *cfg, const char *path, bool value)
{
	int i = KEY(path);

	if (!cfg->is_auto[i])
		return;
	*(bool *)zinf_key_field(cfg, &zinf_keys[i]) = value;
	cfg->is_auto[i] = 0;
	cfg->source[i] = ZINF_SRC_RESOLVED;
}

/* Defaults of Hugging Face's TrainingArguments, which its DeepSpeed integration uses
 * for the same "auto" keys. */
#define HF_LR 5e-5
#define HF_MAX_GRAD_NORM 1.0

int zinf_config_resolve(struct zinf_config *cfg, const struct zinf_config_resolve_info *info)
{
	struct zinf_config_values *v;
	int world = info && info->world_size > 0 ? info->world_size : 1;
	uint64_t h = info ? info->hidden_size : 0;
	int rc;

	if (!cfg)
		return -EINVAL;
	v = &cfg->v;
	cfg->last_error[0] = 0;
	/* here, not at the load: --set overrides come between (a path given on the command
	 * line in place of the file's is the one looked at); a run about to start reports a
	 * missing path as its error instead */
	zinf_config_warn_environment(cfg, !(info && info->require_all), info && info->planning);
	resolve_double(cfg, "gradient_clipping", HF_MAX_GRAD_NORM);
	/* Both backends compute in bf16, so "auto" means bf16 unless fp16 was asked for. */
	resolve_bool(cfg, "fp16.enabled", false);
	resolve_bool(cfg, "bf16.enabled", !v->fp16.enabled);
	resolve_double(cfg, "optimizer.params.lr", HF_LR);
	if (cfg->is_auto[KEY("optimizer.params.betas")]) {
		int i = KEY("optimizer.params.betas");
		v->optimizer.betas[0] = 0.9;
		v->optimizer.betas[1] = 0.999;
		cfg->is_auto[i] = 0;
		cfg->source[i] = ZINF_SRC_RESOLVED;
	}
	resolve_double(cfg, "optimizer.params.eps", 1e-8);
	resolve_double(cfg, "optimizer.params.weight_decay", 0.0);
	resolve_double(cfg, "scheduler.params.warmup_min_lr", 0.0);
	resolve_double(cfg, "scheduler.params.warmup_max_lr", v->optimizer.lr);
	resolve_u64(cfg, "scheduler.params.warmup_num_steps", 0);
	if (info && info->total_steps)
		resolve_u64(cfg, "scheduler.params.total_num_steps", info->total_steps);
	if (h) {
		resolve_u64(cfg, "zero_optimization.reduce_bucket_size", h * h);
		resolve_u64(cfg, "zero_optimization.stage3_prefetch_bucket_size",
			    (uint64_t)(0.9 * (double)(h * h)));
		resolve_u64(cfg, "zero_optimization.stage3_param_persistence_threshold", 10 * h);
	}
	/* zinf.device_memory_limit: given the device's free memory, that; else "auto" stays
	 * for the device backend to resolve when it opens (cuda: free memory less
	 * 1 GiB; host: a quarter of RAM), which zinf.device "auto" decides */
	if (info && info->device_free_bytes)
		resolve_u64(cfg, "zinf.device_memory_limit", info->device_free_bytes);
	if (info && info->host_total_bytes) {
		if (v->zinf.device == ZINF_DEVICE_HOST)
			resolve_u64(cfg, "zinf.device_memory_limit", info->host_total_bytes / 4);
		uint64_t quarter = info->host_total_bytes / 4;
		resolve_u64(cfg, "zinf.pinned_memory_limit",
			    quarter < (16ull << 30) ? quarter : 16ull << 30);
	}
	rc = zinf_config_validate(cfg, world);
	if (rc)
		return rc;
	cfg->world_size = world;
	if (v->zero.offload_optimizer.device == ZINF_OFFLOAD_NVME && v->zero.sub_group_size < 1024)
		warn_keys(
			cfg,
			KEYS("zero_optimization.sub_group_size",
			     "zero_optimization.offload_optimizer.device"),
			"%llu elements with the optimizer on NVMe: each of a sub-group's master, m and v is padded to an I/O block of at least 4 KiB (1024 elements), so the state takes %.1fx its size on NVMe or more, in as many times more requests a step",
			(unsigned long long)v->zero.sub_group_size,
			1024.0 / (double)(v->zero.sub_group_size ? v->zero.sub_group_size : 1));
	if (info && info->total_steps && v->scheduler.total_num_steps &&
	    v->scheduler.total_num_steps < info->total_steps &&
	    v->scheduler.total_num_steps >= v->scheduler.warmup_num_steps && /* (else above) */
	    cfg->source[KEY("scheduler.params.total_num_steps")] != ZINF_SRC_RESOLVED &&
	    (v->scheduler.type == ZINF_LR_WARMUP_DECAY ||
	     v->scheduler.type == ZINF_LR_WARMUP_COSINE))
		warn_keys(
			cfg, KEYS("scheduler.params.total_num_steps"),
			"%llu is less than the run's %llu optimizer steps; the steps after it run at the schedule's final learning rate",
			(unsigned long long)v->scheduler.total_num_steps,
			(unsigned long long)info->total_steps);
	if (!info || !info->require_all)
		return 0;
	/* the micro batch first: the other batch sizes' "auto" follow from it */
	if (cfg->is_auto[KEY("train_micro_batch_size_per_gpu")])
		return fail_keys(
			cfg, KEYS("train_micro_batch_size_per_gpu"),
			"\"auto\" could not be resolved here (expected a value in the config, or zinf train's --micro-batch-size)");
	for (int i = 0; i < zinf_n_keys; i++) {
		if (!cfg->is_auto[i])
			continue;
		if (zinf_keys[i].flags & ZKF_AUTO_AT_OPEN)
			continue; /* the device backend's (zinf.device_memory_limit, above) */
		return fail_keys(
			cfg, KEYS(zinf_keys[i].path),
			"\"auto\" could not be resolved here (expected a value in the config or on the command line)");
	}
	if (!v->train_batch_size || !v->train_micro_batch_size_per_gpu)
		return fail_keys(
			cfg, KEYS("train_micro_batch_size_per_gpu", "train_batch_size"),
			"not set (expected train_batch_size or train_micro_batch_size_per_gpu in the config or on the command line)");
	return 0;
}
