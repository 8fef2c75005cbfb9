/*
 * The config schema: every key zinf reads, with its type, default, range and meaning,
 * in the order of docs/config.md. DeepSpeed's defaults are those of its current code.
 * Keys DeepSpeed has and zinf does not implement are listed as ZK_IGNORED, so that a
 * config that uses them loads with a warning naming them instead of an unknown-key error.
 */
#include <float.h>
#include <stddef.h>
#include <string.h>

#include "config.h"
#include "loss_scale.h"

#define OFF(f) offsetof(struct zinf_config_values, f)
#define INF DBL_MAX
#define ALL_SCHED                                                                                  \
	(ZINF_SCHED_BIT(ZINF_LR_WARMUP) | ZINF_SCHED_BIT(ZINF_LR_WARMUP_DECAY) |                   \
	 ZINF_SCHED_BIT(ZINF_LR_WARMUP_COSINE))
#define LR_DECAY (ZINF_SCHED_BIT(ZINF_LR_WARMUP) | ZINF_SCHED_BIT(ZINF_LR_WARMUP_DECAY))
#define DECAY_COS (ZINF_SCHED_BIT(ZINF_LR_WARMUP_DECAY) | ZINF_SCHED_BIT(ZINF_LR_WARMUP_COSINE))
#define COS ZINF_SCHED_BIT(ZINF_LR_WARMUP_COSINE)

#define SECTION(p, d)                                                                              \
	{                                                                                          \
		.path = p, .type = ZK_OBJECT, .doc = d                                             \
	}
#define IGNORED(p)                                                                                 \
	{                                                                                          \
		.path = p, .type = ZK_IGNORED,                                                     \
		.doc = "DeepSpeed key; not implemented by zinf (warning)"                          \
	}
#define BOOL(p, f, dv, fl, d)                                                                      \
	{                                                                                          \
		.path = p, .type = ZK_BOOL, .offset = OFF(f), .def = dv, .flags = fl, .doc = d     \
	}
#define INT(p, f, dv, lo, hi, fl, d)                                                               \
	{                                                                                          \
		.path = p, .type = ZK_INT, .offset = OFF(f), .def = dv, .min = lo, .max = hi,      \
		.flags = fl, .doc = d                                                              \
	}
#define COUNT(p, f, dv, lo, hi, fl, d)                                                             \
	{                                                                                          \
		.path = p, .type = ZK_COUNT, .offset = OFF(f), .def = dv, .min = lo, .max = hi,    \
		.flags = fl, .doc = d                                                              \
	}
#define BYTES(p, f, dv, lo, fl, d)                                                                 \
	{                                                                                          \
		.path = p, .type = ZK_BYTES, .offset = OFF(f), .def = dv, .min = lo, .max = INF,   \
		.flags = fl, .doc = d                                                              \
	}
#define FLOAT(p, f, dv, lo, hi, fl, d)                                                             \
	{                                                                                          \
		.path = p, .type = ZK_FLOAT, .offset = OFF(f), .def = dv, .min = lo, .max = hi,    \
		.flags = fl, .doc = d                                                              \
	}
#define ENUM(p, f, dv, nm, fl, d)                                                                  \
	{                                                                                          \
		.path = p, .type = ZK_ENUM, .offset = OFF(f), .def = dv, .names = nm, .flags = fl, \
		.doc = d                                                                           \
	}
#define STRING(p, f, d)                                                                            \
	{                                                                                          \
		.path = p, .type = ZK_STRING, .offset = OFF(f), .doc = d                           \
	}

/* The table's layout is kept by hand: clang-format re-lays the whole of it out whenever
 * one entry's length changes. */
/* clang-format off */
const struct zinf_key
	zinf_keys[] =
		{
			/* ---- batch, clipping, printing -------------------------------------------------- */
			COUNT("train_batch_size", train_batch_size, 0, 1, 1e9, ZKF_AUTO,
			      "global batch (sequences per optimizer step) = micro batch x accumulation steps x ranks; any two of the three determine the third"),
			COUNT("train_micro_batch_size_per_gpu", train_micro_batch_size_per_gpu, 0,
			      1, 1e9, ZKF_AUTO, "sequences per forward/backward on one rank"),
			COUNT("gradient_accumulation_steps", gradient_accumulation_steps, 0, 1, 1e9,
			      ZKF_AUTO, "micro-batches accumulated before each optimizer step"),
			FLOAT("gradient_clipping", gradient_clipping, 0, 0, INF, ZKF_AUTO,
			      "clip the global L2 norm of all gradients to this value; 0 = off (auto: 1.0)"),
			COUNT("steps_per_print", steps_per_print, 10, 1, 1e15, 0,
			      "zinf train's progress without a terminal: a line every N optimizer steps "
			      "(and the first, the last and skipped ones; --log-json has every step)"),
			/* ---- precision ----------------------------------------------------------------- */
			SECTION("bf16",
				"bfloat16 training: bf16 parameter copies (fetched, stored, saved), fp32 master weights, gradients and compute, no loss scaling"),
			BOOL("bf16.enabled", bf16.enabled, 0, ZKF_AUTO,
			     "train in bf16 (auto: true unless fp16.enabled is true)"),
			IGNORED("bf16.immediate_grad_update"),
			{.path = "bfloat16",
			 .type = ZK_OBJECT,
			 .alias_of = "bf16",
			 .doc = "old DeepSpeed name of the bf16 section (warning)"},
			{.path = "bfloat16.enabled",
			 .type = ZK_BOOL,
			 .offset = OFF(bf16.enabled),
			 .flags = ZKF_AUTO,
			 .alias_of = "bf16.enabled",
			 .doc = "old name of bf16.enabled"},
			IGNORED("bfloat16.immediate_grad_update"),
			SECTION("fp16", "float16 training: fp16 parameter copies and loss scaling; fp32 master weights, gradients and compute, so a scaled gradient overflows only past fp32's range (DeepSpeed's fp16 gradients, past 65504)"),
			BOOL("fp16.enabled", fp16.enabled, 0, ZKF_AUTO,
			     "train in fp16 with loss scaling (auto: false)"),
			FLOAT("fp16.loss_scale", fp16.loss_scale, 0, 0, ZINF_MAX_LOSS_SCALE, 0,
			      "static loss scale; 0 = dynamic loss scaling"),
			INT("fp16.initial_scale_power", fp16.initial_scale_power, 16, 0, 63, 0,
			    "dynamic scaling starts at 2^initial_scale_power"),
			COUNT("fp16.loss_scale_window", fp16.loss_scale_window, 1000, 1, 1e15, 0,
			      "steps without overflow before the scale doubles"),
			INT("fp16.hysteresis", fp16.hysteresis, 2, 1, 1000000, 0,
			    "overflows tolerated before the scale is lowered"),
			BOOL("fp16.consecutive_hysteresis", fp16.consecutive_hysteresis, 0, 0,
			     "refill hysteresis after each step without overflow"),
			FLOAT("fp16.min_loss_scale", fp16.min_loss_scale, 1, 0, ZINF_MAX_LOSS_SCALE,
			      ZKF_MIN_OPEN,
			      "the scale never goes below this"),
			IGNORED("fp16.auto_cast"),
			IGNORED("fp16.fp16_master_weights_and_grads"),
			/* ---- optimizer ----------------------------------------------------------------- */
			SECTION("optimizer",
				"the optimizer; when absent, AdamW with the defaults below"),
			ENUM("optimizer.type", optimizer.type, ZINF_OPT_ADAMW, "Adam|AdamW",
			     ZKF_ICASE,
			     "AdamW: decoupled weight decay (torch.optim.AdamW); Adam: L2 decay (torch.optim.Adam) unless params.adam_w_mode"),
			SECTION("optimizer.params", "optimizer hyper-parameters"),
			/* lr, eps and weight_decay within fp32, the optimizer kernels' type */
			FLOAT("optimizer.params.lr", optimizer.lr, 1e-3, 0, 1e30, ZKF_AUTO,
			      "peak learning rate (auto: 5e-5, the Hugging Face Trainer default)"),
			{.path = "optimizer.params.betas",
			 .type = ZK_BETAS,
			 .offset = OFF(optimizer.betas),
			 .def_str = "0.9,0.999",
			 .min = 0,
			 .max = 1,
			 .flags = ZKF_AUTO,
			 .doc = "[beta1, beta2], each in [0, 1) (auto: [0.9, 0.999])"},
			FLOAT("optimizer.params.eps", optimizer.eps, 1e-8, 1e-37, 1e30, ZKF_AUTO,
			      "added to the denominator (auto: 1e-8)"),
			FLOAT("optimizer.params.weight_decay", optimizer.weight_decay, 0, 0, 1e30,
			      ZKF_AUTO,
			      "weight decay coefficient, applied to 2-D parameters only (auto: 0)"),
			BOOL("optimizer.params.bias_correction", optimizer.bias_correction, 1, 0,
			     "Adam bias correction"),
			BOOL("optimizer.params.adam_w_mode", optimizer.adam_w_mode, 0, 0,
			     "type Adam only: decoupled weight decay; DeepSpeed's default is true, zinf's false (a warning says so when it matters)"),
			IGNORED("optimizer.params.torch_adam"),
			/* ---- scheduler ----------------------------------------------------------------- */
			SECTION("scheduler",
				"learning-rate schedule; when absent, the rate is constant"),
			ENUM("scheduler.type", scheduler.type, ZINF_LR_CONSTANT,
			     "none|WarmupLR|WarmupDecayLR|WarmupCosineLR", 0,
			     "schedule, with DeepSpeed's names and formulas; none = constant (zinf only)"),
			SECTION("scheduler.params",
				"schedule parameters; each belongs to the types named in its line"),
			{.path = "scheduler.params.warmup_min_lr",
			 .type = ZK_FLOAT,
			 .offset = OFF(scheduler.warmup_min_lr),
			 .def = 0,
			 .min = 0,
			 .max = 1e30, /* (an lr: as optimizer.params.lr) */
			 .flags = ZKF_AUTO,
			 .sched_mask = LR_DECAY,
			 .doc = "WarmupLR, WarmupDecayLR: rate at step 0 (auto: 0)"},
			{.path = "scheduler.params.warmup_max_lr",
			 .type = ZK_FLOAT,
			 .offset = OFF(scheduler.warmup_max_lr),
			 .def = 1e-3,
			 .min = 0,
			 .max = 1e30, /* (an lr: as optimizer.params.lr) */
			 .flags = ZKF_AUTO,
			 .sched_mask = LR_DECAY,
			 .doc = "WarmupLR, WarmupDecayLR: rate at the end of warmup; WarmupLR's default is optimizer.params.lr, as current DeepSpeed's (auto: optimizer.params.lr)"},
			{.path = "scheduler.params.warmup_num_steps",
			 .type = ZK_COUNT,
			 .offset = OFF(scheduler.warmup_num_steps),
			 .def = 1000,
			 .min = 0,
			 .max = 1e12,
			 .flags = ZKF_AUTO,
			 .sched_mask = ALL_SCHED,
			 .doc = "all types: warmup length in steps (auto: 0)"},
			{.path = "scheduler.params.warmup_type",
			 .type = ZK_ENUM,
			 .offset = OFF(scheduler.warmup_type),
			 .def = ZINF_WARMUP_LOG,
			 .names = "log|linear",
			 .sched_mask = ALL_SCHED,
			 .doc = "all types: warmup curve"},
			{.path = "scheduler.params.total_num_steps",
			 .type = ZK_COUNT,
			 .offset = OFF(scheduler.total_num_steps),
			 .def = 0,
			 .min = 1,
			 .max = 1e12,
			 .flags = ZKF_AUTO,
			 .sched_mask = DECAY_COS,
			 .doc = "WarmupDecayLR, WarmupCosineLR: total steps; required (auto: the run's step count)"},
			{.path = "scheduler.params.warmup_min_ratio",
			 .type = ZK_FLOAT,
			 .offset = OFF(scheduler.warmup_min_ratio),
			 .def = 0,
			 .min = 0,
			 .max = 1,
			 .sched_mask = COS,
			 .doc = "WarmupCosineLR: rate at step 0 as a fraction of optimizer.params.lr"},
			{.path = "scheduler.params.cos_min_ratio",
			 .type = ZK_FLOAT,
			 .offset = OFF(scheduler.cos_min_ratio),
			 .def = 1e-4,
			 .min = 0,
			 .max = 1,
			 .sched_mask = COS,
			 .doc = "WarmupCosineLR: final rate as a fraction of optimizer.params.lr"},
			{.path = "scheduler.params.last_batch_iteration",
			 .type = ZK_INT,
			 .offset = OFF(scheduler.last_batch_iteration),
			 .def = -1,
			 .min = -1,
			 .max = 2147483647.0,
			 .sched_mask = ALL_SCHED,
			 .doc = "all types: step to resume the schedule after; -1 = start"},
			/* ---- activation checkpointing -------------------------------------------------- */
			SECTION("activation_checkpointing",
				"DeepSpeed's activation-checkpointing options"),
			BOOL("activation_checkpointing.partition_activations",
			     activation_checkpointing.partition_activations, 0, ZKF_WARN_IF_SET,
			     "shard checkpointed activations across ranks (not implemented yet: warning if true)"),
			BOOL("activation_checkpointing.cpu_checkpointing",
			     activation_checkpointing.cpu_checkpointing, 0, 0,
			     "with --activation-checkpointing: keep each decoder layer's saved input in host memory, not on the device (zinf train refuses it without that flag)"),
			BOOL("activation_checkpointing.contiguous_memory_optimization",
			     activation_checkpointing.contiguous_memory_optimization, 0,
			     ZKF_WARN_IF_SET,
			     "copy checkpoints into one buffer (not implemented yet: warning if true)"),
			COUNT("activation_checkpointing.number_checkpoints",
			      activation_checkpointing.number_checkpoints, 0,
			      0, 1e9, ZKF_WARN_IF_SET,
			      "checkpoints for contiguous_memory_optimization; 0 = unset (warning if set)"),
			BOOL("activation_checkpointing.synchronize_checkpoint_boundary",
			     activation_checkpointing.synchronize_checkpoint_boundary, 0,
			     ZKF_WARN_IF_SET,
			     "synchronize at each checkpoint boundary (not implemented yet: warning if true)"),
			BOOL("activation_checkpointing.profile", activation_checkpointing.profile,
			     0, ZKF_WARN_IF_SET,
			     "profile checkpoint recomputation (not implemented yet: warning if true)"),
			/* ---- async I/O ----------------------------------------------------------------- */
			SECTION("aio", "NVMe I/O (DeepSpeed's aio block)"),
			{.path = "aio.block_size", .type = ZK_BYTES, .offset = OFF(aio.block_size),
			 .def = 1048576, .min = 4096, .max = 1073741824, .flags = ZKF_ALIGN4K,
			 .doc = "bytes per I/O request; large transfers are split into blocks of "
				"this size (at most 1 GiB, io_uring's limit for one buffer)"},
			COUNT("aio.queue_depth", aio.queue_depth, 8, 1, 4096, 0,
			      "requests in flight per ring or thread"),
			COUNT("aio.intra_op_parallelism", aio.intra_op_parallelism, 1,
			      1, 256, 0, "rings or threads one transfer is spread over"),
			{.path = "aio.thread_count",
			 .type = ZK_COUNT,
			 .offset = OFF(aio.intra_op_parallelism),
			 .def = 1,
			 .min = 1,
			 .max = 256,
			 .alias_of = "aio.intra_op_parallelism",
			 .doc = "old name of aio.intra_op_parallelism (warning)"},
			BOOL("aio.single_submit", aio.single_submit, 0, 0,
			     "submit requests one at a time instead of in batches"),
			BOOL("aio.overlap_events", aio.overlap_events, 1, 0,
			     "reap completions while submitting"),
			BOOL("aio.use_gds", aio.use_gds, 0, ZKF_WARN_IF_SET,
			     "GPUDirect Storage (not implemented: warning if true)"),
			/* ---- ZeRO ---------------------------------------------------------------------- */
			SECTION("zero_optimization", "ZeRO partitioning and offload"),
			INT("zero_optimization.stage", zero.stage, 0, 0, 3,
			    0, "0 none, 1 optimizer state, 2 + gradients, 3 + parameters partitioned across ranks"),
			SECTION("zero_optimization.offload_param",
				"where parameters live between uses (stage 3 only)"),
			ENUM("zero_optimization.offload_param.device", zero.offload_param.device,
			     ZINF_OFFLOAD_NONE, "none|cpu|nvme", 0, "parameter home tier"),
			STRING("zero_optimization.offload_param.nvme_path",
			       zero.offload_param.nvme_path,
			       "directory on the NVMe drive (or use zinf.nvme_paths to stripe over several)"),
			BOOL("zero_optimization.offload_param.pin_memory",
			     zero.offload_param.pin_memory, 0, 0,
			     "with device cpu (or nvme's max_in_cpu part) on a CUDA device: page-lock the host homes, for DMA copies (beside zinf.pinned_memory_limit)"),
			COUNT("zero_optimization.offload_param.buffer_count",
			      zero.offload_param.buffer_count, 5,
			      1, 1e6, ZKF_WARN_IF_SET,
			      "DeepSpeed's staging buffers for parameter reads; zinf stages through "
			      "its pool of zinf.pinned_memory_limit (warning unless the default)"),
			COUNT("zero_optimization.offload_param.buffer_size",
			      zero.offload_param.buffer_size, 1e8, 1, 1e15, ZKF_WARN_IF_SET,
			      "elements per DeepSpeed staging buffer (warning unless the default, as "
			      "buffer_count)"),
			COUNT("zero_optimization.offload_param.max_in_cpu",
			      zero.offload_param.max_in_cpu, 0, 0, 1e15, 0,
			      "with device nvme: parameter elements homed in host memory instead, whole modules, "
			      "first fit in registration order; their fetches read no drive (0 none; "
			      "DeepSpeed documents 1e9 but ignores the key)"),
			SECTION("zero_optimization.offload_optimizer",
				"where fp32 master weights and Adam state live"),
			ENUM("zero_optimization.offload_optimizer.device",
			     zero.offload_optimizer.device, ZINF_OFFLOAD_NONE, "none|cpu|nvme", 0,
			     "optimizer-state home tier: none keeps the fp32 master, Adam moments and gradient accumulators on the device (16 bytes a parameter) and updates them there; cpu and nvme run the optimizer on the CPU"),
			STRING("zero_optimization.offload_optimizer.nvme_path",
			       zero.offload_optimizer.nvme_path,
			       "directory on the NVMe drive (or use zinf.nvme_paths)"),
			BOOL("zero_optimization.offload_optimizer.pin_memory",
			     zero.offload_optimizer.pin_memory, 0, 0,
			     "stage through pinned memory (zinf always stages through its bounded pinned pool)"),
			COUNT("zero_optimization.offload_optimizer.buffer_count",
			      zero.offload_optimizer.buffer_count, 4,
			      1, 1e6, ZKF_WARN_IF_SET,
			      "DeepSpeed's staging buffers for optimizer-state I/O; zinf stages whole "
			      "sub-groups in 1-3 slots of its pinned pool (warning unless the default)"),
			BOOL("zero_optimization.offload_optimizer.pipeline_read",
			     zero.offload_optimizer.pipeline_read, 1, 0,
			     "overlap reading sub-group i+1 with updating i (zinf default true; DeepSpeed false)"),
			BOOL("zero_optimization.offload_optimizer.pipeline_write",
			     zero.offload_optimizer.pipeline_write, 1, 0,
			     "overlap writing sub-group i-1 with updating i (zinf default true; DeepSpeed false)"),
			BOOL("zero_optimization.offload_optimizer.fast_init",
			     zero.offload_optimizer.fast_init, 1, 0,
			     "write only the fp32 master of a fresh NVMe optimizer state; its zero Adam moments are neither written nor read back (zinf default true; DeepSpeed false)"),
			FLOAT("zero_optimization.offload_optimizer.ratio",
			      zero.offload_optimizer.ratio, 1.0,
			      0, 1, ZKF_MIN_OPEN,
			      "with device cpu: the fraction of the parameters whose optimizer state is in host memory and updated by the CPU (the first modules, in registration order, whose elements add up to at most that much), the rest keeping theirs on the device and updated there, as DeepSpeed's Twin-Flow; no effect with none (all on the device); with nvme not implemented yet (warning unless 1)"),
			COUNT("zero_optimization.sub_group_size", zero.sub_group_size, 1e9,
			      1, 1e15, 0,
			      "elements per optimizer sub-group (the unit of the pipelined NVMe step)"),
			BOOL("zero_optimization.overlap_comm", zero.overlap_comm, 0, 0,
			     "overlap gradient reduction with backward (default true at stage 3, as "
			     "DeepSpeed; between ranks: no effect with the one rank zinf runs today)"),
			BOOL("zero_optimization.contiguous_gradients", zero.contiguous_gradients, 1,
			     0, "copy gradients into one contiguous buffer as they are produced (zinf's "
			     "gradient buffers are always contiguous per module)"),
			BOOL("zero_optimization.reduce_scatter", zero.reduce_scatter, 1, 0,
			     "reduce gradients with reduce-scatter rather than all-reduce (between "
			     "ranks: no effect with one rank)"),
			BOOL("zero_optimization.allgather_partitions", zero.allgather_partitions, 1,
			     0, "all-gather parameter partitions rather than broadcast (between ranks: "
			     "no effect with one rank)"),
			COUNT(
				"zero_optimization.reduce_bucket_size", zero.reduce_bucket_size,
				5e8, 1, 1e15,
				ZKF_AUTO, "elements reduced at a time (auto: hidden_size^2; between "
				"ranks: no effect with one rank)"),
			COUNT("zero_optimization.allgather_bucket_size", zero.allgather_bucket_size,
			      5e8, 1, 1e15, 0, "elements all-gathered at a time (stages 1-2; between "
			      "ranks: no effect with one rank)"),
			COUNT(
				"zero_optimization.stage3_prefetch_bucket_size",
				zero.stage3_prefetch_bucket_size, 5e7, 0, 1e15,
				ZKF_AUTO, "elements of parameters prefetched ahead of use (auto: 0.9 x hidden_size^2)"),
			COUNT(
				"zero_optimization.stage3_param_persistence_threshold",
				zero.stage3_param_persistence_threshold, 1e5, 0, 1e15,
				ZKF_AUTO, "modules whose parameters add up to at most this many elements stay on the device once fetched, within a quarter of the device budget (DeepSpeed keeps single parameters; auto: 10 x hidden_size)"),
			COUNT("zero_optimization.stage3_max_live_parameters",
			      zero.stage3_max_live_parameters, 1e9, 0, 1e15, 0,
			      "most parameter elements the prefetcher holds on the device (fetches the model asks for are never refused by it)"),
			COUNT("zero_optimization.stage3_max_reuse_distance",
			      zero.stage3_max_reuse_distance, 1e9, 0, 1e15, 0,
			      "a released module needed again within this many elements of other fetches stays cached on the device; one needed later is evicted at once"),
			BOOL("zero_optimization.stage3_gather_16bit_weights_on_model_save",
			     zero.stage3_gather_16bit_weights_on_model_save, 0, 0,
			     "zinf train --save without --save-dtype: write the weights in the 16-bit "
			     "dtype the run trains in (bf16 or fp16), as DeepSpeed's consolidated "
			     "16-bit save, rather than the source checkpoint's (its saves are always "
			     "consolidated)"),
			{.path = "zero_optimization.stage3_gather_fp16_weights_on_model_save",
			 .type = ZK_BOOL,
			 .offset = OFF(zero.stage3_gather_16bit_weights_on_model_save),
			 .alias_of = "zero_optimization.stage3_gather_16bit_weights_on_model_save",
			 .doc = "old name of stage3_gather_16bit_weights_on_model_save (warning)"},
			IGNORED("zero_optimization.cpu_offload"),
			IGNORED("zero_optimization.cpu_offload_params"),
			IGNORED("zero_optimization.cpu_offload_use_pin_memory"),
			IGNORED("zero_optimization.load_from_fp32_weights"),
			IGNORED("zero_optimization.elastic_checkpoint"),
			IGNORED("zero_optimization.round_robin_gradients"),
			IGNORED("zero_optimization.ignore_unused_parameters"),
			IGNORED("zero_optimization.legacy_stage1"),
			IGNORED("zero_optimization.stage3_model_persistence_threshold"),
			IGNORED("zero_optimization.stage3_module_granularity_threshold"),
			IGNORED("zero_optimization.zero_hpz_partition_size"),
			IGNORED("zero_optimization.zero_quantized_weights"),
			IGNORED("zero_optimization.zero_quantized_nontrainable_weights"),
			IGNORED("zero_optimization.zero_quantized_gradients"),
			IGNORED("zero_optimization.mics_shard_size"),
			IGNORED("zero_optimization.mics_hierarchical_params_gather"),
			IGNORED("zero_optimization.memory_efficient_linear"),
			IGNORED("zero_optimization.pipeline_loading_checkpoint"),
			IGNORED("zero_optimization.override_module_apply"),
			IGNORED("zero_optimization.log_trace_cache_warnings"),
			IGNORED("zero_optimization.use_multi_rank_bucket_allreduce"),
			/* ---- zinf's own block ---------------------------------------------------------- */
			SECTION("zinf", "what DeepSpeed cannot express"),
			ENUM("zinf.device", zinf.device, ZINF_DEVICE_AUTO, "auto|cuda|host", 0,
			     "compute device: cuda when a GPU is visible, else the host backend"),
			{.path = "zinf.device_memory_limit",
			 .type = ZK_BYTES,
			 .offset = OFF(zinf.device_memory_limit),
			 .def_str = "auto",
			 .min = 1048576,
			 .max = INF,
			 .flags = ZKF_AUTO |
				  ZKF_AUTO_AT_OPEN, /* cuda: free memory less 1 GiB */
			 .doc = "hard cap on device memory (auto: free GPU memory less 1 GiB on cuda, a quarter of host RAM on host); "
				"at most the GPU's free memory on cuda, the host's memory on host (checked when "
				"the engine starts); on cuda a limit leaving under 1 GiB free is warned of (the "
				"CUDA context, cuBLAS's workspace and kernel code are allocated beside it)"},
			{.path = "zinf.pinned_memory_limit",
			 .type = ZK_BYTES,
			 .offset = OFF(zinf.pinned_memory_limit),
			 .def_str = "auto",
			 .min = 1048576,
			 .max = INF,
			 .flags = ZKF_AUTO,
			 .doc = "size of the one pinned host pool (auto: what the run can use, sized when the model is known, at most a quarter of host RAM and 16 GiB, the value zinf check shows)"},
			{.path = "zinf.nvme_paths",
			 .type = ZK_STRLIST,
			 .offset = OFF(zinf.nvme_paths),
			 .doc = "directories, one per drive (at most 16); NVMe tiers stripe across all of them (default: the nvme_path of offload_param/offload_optimizer; unused, with a warning, when neither is on nvme)"},
			BYTES("zinf.chunk_size", zinf.chunk_size, 33554432, 65536, ZKF_ALIGN4K,
			      "bytes per flat parameter chunk; a parameter larger than a chunk spans several"),
			ENUM("zinf.io_engine", zinf.io_engine, ZINF_IO_AUTO,
			     "auto|io_uring|libaio|psync", 0,
			     "NVMe backend; auto picks the fastest that works here"),
			ENUM("zinf.checksum", zinf.checksum, ZINF_CHECKSUM_NONE, "none|crc32c", 0,
			     "CRC32C per NVMe extent: recorded when a whole extent is written, verified when it is read whole (the shard store always moves whole extents; saving the model from optimizer state on NVMe then reads each sub-group whole, not its master part alone)"),
			STRING("zinf.trace", zinf.trace,
			       "write a Chrome trace-event timeline (Perfetto) to this file at the end of the run (its directory is checked before the run; "
			       "`zinf train` refuses a path that is one of its input files or a file a save "
			       "writes in its checkpoint directories, as for `--log-json`, and the "
			       "`--log-json` file itself)"),
			BOOL("zinf.overlap_optimizer", zinf.overlap_optimizer, 1, 0,
			     "run the optimizer step in the background, module by module in forward order, so the next forward starts while later modules are still updated; a fetch waits only for its own module. No effect with offload_optimizer.device none, or cpu with a ratio below 1 (the update runs in the step, on the device for the state there)"),
			BOOL("zinf.overlap_gradients", zinf.overlap_gradients, 1, 0,
			     "add each module's gradients to the fp32 accumulators on a background thread, so backward goes on with the next module while they are added (and written, with offload_gradients nvme); zinf_step waits for them. No effect with offload_optimizer.device none, or cpu with a ratio below 1 (the sums on the device are added there, the others at once)"),
			ENUM("zinf.offload_gradients", zinf.offload_gradients, ZINF_GRADS_AUTO, "auto|cpu|nvme", 0, "where the fp32 gradient accumulators (4 bytes per parameter) of optimizer state on NVMe live: cpu = host memory; nvme = next to the optimizer state, one extent per sub-group, host memory holding only the sub-groups being accumulated; auto = nvme when they would take more than a quarter of host RAM and seven sub-groups less than that. Needs offload_optimizer.device nvme"),
			BOOL("zinf.remove_stale_run_dir", zinf.remove_stale_run_dir, 0, 0,
			     "also empty an NVMe run directory that a crashed run of another machine or boot left (its lock free) instead of refusing to start; one left by a process of this machine since its boot is always emptied (every process here sees its lock), with a warning. Its files are scratch, as after a resume from a checkpoint. Off by default: another machine's lock is only as good as the filesystem's flock"),
			BOOL("zinf.tf32", zinf.tf32, 0, 0,
			     "cuda model runtime: let cuBLAS round the inputs of its fp32 matrix products to TF32 (10-bit mantissa) and use tensor cores, several times faster on sm_80 and later; off = exact fp32 products, within rounding of the CPU runtime. No effect on the host backend"),
			ENUM("zinf.cuda_sync", zinf.cuda_sync, 0, "auto|spin|yield|blocking", 0,
			     "cuda: how a host thread waits for the GPU (cudaSetDeviceFlags): auto = CUDA's choice (it spins unless contexts outnumber CPUs), spin = least latency, yield, blocking = sleep (in stream, device and event waits: events are made with cudaEventBlockingSync) and leave the core to the CPU optimizer and I/O threads at some latency per wait. No effect on the host backend"),
			/* ---- DeepSpeed keys zinf does not implement ------------------------------------ */
			IGNORED("wall_clock_breakdown"),
			IGNORED("memory_breakdown"),
			IGNORED("prescale_gradients"),
			IGNORED("gradient_predivide_factor"),
			IGNORED("sparse_gradients"),
			IGNORED("communication_data_type"),
			IGNORED("seq_parallel_communication_data_type"),
			IGNORED("dump_state"),
			IGNORED("zero_allow_untested_optimizer"),
			IGNORED("zero_force_ds_cpu_optimizer"),
			IGNORED("disable_allgather"),
			IGNORED("flops_profiler"),
			IGNORED("tensorboard"),
			IGNORED("wandb"),
			IGNORED("csv_monitor"),
			IGNORED("comet"),
			IGNORED("comms_logger"),
			IGNORED("elasticity"),
			IGNORED("autotuning"),
			IGNORED("compression_training"),
			IGNORED("data_efficiency"),
			IGNORED("curriculum_learning"),
			IGNORED("checkpoint"),
			IGNORED("amp"),
			IGNORED("pipeline"),
			IGNORED("sparse_attention"),
			IGNORED("data_types"),
			IGNORED("timers"),
			IGNORED("eigenvalue"),
			IGNORED("progressive_layer_drop"),
			IGNORED("quantize_training"),
			IGNORED("weight_quantization"),
			IGNORED("hybrid_engine"),
			IGNORED("nebula"),
			IGNORED("torch_autocast"),
			IGNORED("tensor_parallel"),
			IGNORED("graph_harvesting"),
};
/* clang-format on */

const int zinf_n_keys = (int)(sizeof(zinf_keys) / sizeof(zinf_keys[0]));

int zinf_key_find(const char *path)
{
	for (int i = 0; i < zinf_n_keys; i++)
		if (strcmp(zinf_keys[i].path, path) == 0)
			return i;
	return -1;
}
