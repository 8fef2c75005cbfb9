/*
 * zinf plan: where a model's training state fits on this machine (or on the sizes
 * given), placement by placement, and the config of the first that fits.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "train_flags.h"
#include "zinf/train.h"
#include "zinf/zinf.h"

const char cmd_plan_usage[] =
	"usage: zinf plan (--model DIR | --init CONFIG.json) --seq-len T [options]\n"
	"Say where a Llama-family model's training state fits: for each placement of the\n"
	"parameters and of the optimizer state (device, cpu, nvme) the device,\n"
	"pinned, host and NVMe bytes a run needs, with the formulas zinf train checks before\n"
	"step 1, against this machine's sizes or those given. The first placement that fits\n"
	"(the table is fastest first) is chosen; --write-config writes it as a config.\n"
	"Exit status: 0 a placement fits, 1 none does, 2 invalid input.\n"
	"\n"
	"options:\n"
	"  --model DIR              Hugging Face checkpoint (its config.json is read)\n"
	"  --init CONFIG.json       Hugging Face-style config.json\n"
	"  --config DS.json         DeepSpeed-style config to start from (batch size,\n"
	"                           precision, zinf block; default: the defaults)\n"
	"  --set KEY=VALUE          override a config key (repeatable)\n"
	"  --seq-len T              tokens per row\n"
	"  --micro-batch-size B     sequences per micro-batch (default: the config's, or 1)\n"
	"  --activation-checkpointing  as zinf train's flag\n"
	"  --device-memory SIZE     the device budget to plan for (default: the config's\n"
	"                           zinf.device_memory_limit, else this machine's device)\n"
	"  --host-memory SIZE       host RAM (default: this machine's)\n"
	"  --nvme-path DIR          NVMe directory for the placements on NVMe (default: the\n"
	"                           config's; none: those rows are skipped)\n"
	"  --nvme-free SIZE         free NVMe space (default: measured on the path)\n"
	"  --write-config FILE      write the chosen placement's config (refused if FILE\n"
	"                           exists, unless --force)\n"
	"  --force                  replace FILE\n"
	"  --json                   print the plan as one JSON object\n"
	"  -h, --help               this text\n"
	"SIZE: bytes, or with a unit: 80GiB, 512MiB, 1e9.\n";

static int size_flag(const char *flag, const char *text, uint64_t *out)
{
	if (zinf_parse_bytes(text, out) || !*out) {
		fprintf(stderr, "zinf plan: %s %s: expected a size such as 80GiB or 1e9 (> 0)\n",
			flag, text);
		return -1;
	}
	return 0;
}

static const char *fmt(uint64_t bytes, char *buf)
{
	return zinf_format_bytes(bytes, buf, 32);
}

/* A parameter count as people say it: 8.03 B, 124 M, 1.2 T, or the number below a
 * million (a unit from where three digits round to 1000 of the one below). */
static const char *fmt_count(uint64_t n, char *buf, size_t len)
{
	static const struct {
		double one;
		const char *unit;
	} units[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if ((double)n >= 0.9995 * units[i].one) {
			snprintf(buf, len, "%.3g %s", (double)n / units[i].one, units[i].unit);
			return buf;
		}
	}
	snprintf(buf, len, "%llu", (unsigned long long)n);
	return buf;
}

static void print_table(const struct zinf_plan_opts *o, const struct zinf_plan_result *r)
{
	char a[32], b[32], c[32], d[32];

	printf("model: %s parameters (%s), %d layers; micro-batch %llu%s x %llu tokens%s\n",
	       fmt_count(r->param_elems, a, sizeof(a)), r->dtype_name, r->layers,
	       (unsigned long long)r->B, r->B_assumed ? " (the config sets none)" : "",
	       (unsigned long long)r->T,
	       o->activation_checkpointing ? ", activation checkpointing" : "");
	printf("machine: device (%s) %s, host %s, pinned %s%s, NVMe %s%s\n",
	       r->device_kind == ZINF_ENGINE_DEVICE_CUDA ? "cuda" : "host", fmt(r->device_bytes, a),
	       fmt(r->host_bytes, b), r->pinned_auto ? "up to " : "", fmt(r->pinned_bytes, c),
	       r->nvme_free_known ? fmt(r->nvme_free_bytes, d)
	       : r->has_nvme	  ? "?"
				  : "none",
	       r->nvme_free_known ? " free" : "");
	if (r->has_nvme && !r->nvme_free_known && r->nvme_free_why[0])
		printf("NVMe free space unknown: %s (the rows on NVMe are judged without it; "
		       "give --nvme-free SIZE)\n",
		       r->nvme_free_why);
	printf("model runtime: %s of device memory, %s of host memory (activations, buffers)\n\n",
	       fmt(r->runtime_device_bytes, a), fmt(r->runtime_host_bytes, b));
	printf("%-8s %-9s %11s %11s %11s %11s  %s\n", "params", "optimizer", "device", "pinned",
	       "host", "nvme", "fits");
	for (int i = 0; i < ZINF_PLAN_ROWS; i++) {
		const struct zinf_plan_row *w = &r->rows[i];
		const char *param = strcmp(w->param, "none") == 0 ? "device" : w->param;
		const char *opt = strcmp(w->optimizer, "none") == 0 ? "device" : w->optimizer;
		if (!w->tried) {
			printf("%-8s %-9s %11s %11s %11s %11s  no: %s\n", param, opt, "-", "-", "-",
			       "-", w->why);
			continue;
		}
		printf("%-8s %-9s %11s %11s %11s %11s  %s%s%s\n", param, opt,
		       fmt(w->need.device_bytes, a), fmt(w->need.pinned_bytes, b),
		       fmt(w->need.host_bytes, c),
		       w->need.nvme_bytes ? fmt(w->need.nvme_bytes, d) : "-",
		       w->need.fits ? "yes" : "no: ", w->need.fits ? "" : w->why,
		       i == r->chosen ? "  <- chosen" : "");
	}
	if (r->chosen >= 0) {
		const struct zinf_plan_row *w = &r->rows[r->chosen];
		printf("\nchosen: zero_optimization.stage %d, offload_param.device %s, "
		       "offload_optimizer.device %s",
		       w->stage, w->param, w->optimizer);
		if (strcmp(w->optimizer, "nvme") == 0)
			printf(", sub_group_size %llu", (unsigned long long)w->sub_group_size);
		if (strcmp(w->param, "nvme") == 0 && w->max_in_cpu)
			printf(", offload_param.max_in_cpu %llu",
			       (unsigned long long)w->max_in_cpu);
		if (strcmp(w->optimizer, "cpu") == 0 && w->ratio > 0 && w->ratio < 1)
			printf(", offload_optimizer.ratio %s",
			       zinf_format_double(w->ratio, a, sizeof(a)));
		printf("\n");
	} else {
		printf("\nnothing fits: a larger device, more host memory or NVMe space, a shorter "
		       "--seq-len or micro-batch%s\n",
		       o->activation_checkpointing ? "" : ", --activation-checkpointing");
	}
}

static void print_json(const struct zinf_plan_result *r)
{
	char num[32];

	printf("{\"param_elems\": %llu, \"dtype\": \"%s\", \"layers\": %d, \"B\": %llu, \"T\": %llu,"
	       " \"device\": \"%s\", \"device_bytes\": %llu, \"host_bytes\": %llu,"
	       " \"pinned_bytes\": %llu, \"pinned_auto\": %s, \"nvme_free_bytes\": ",
	       (unsigned long long)r->param_elems, r->dtype_name, r->layers,
	       (unsigned long long)r->B, (unsigned long long)r->T,
	       r->device_kind == ZINF_ENGINE_DEVICE_CUDA ? "cuda" : "host",
	       (unsigned long long)r->device_bytes, (unsigned long long)r->host_bytes,
	       (unsigned long long)r->pinned_bytes, r->pinned_auto ? "true" : "false");
	if (r->nvme_free_known)
		printf("%llu", (unsigned long long)r->nvme_free_bytes);
	else
		printf("null"); /* no path, or not measured */
	printf(", \"runtime_device_bytes\": %llu, \"runtime_host_bytes\": %llu, \"chosen\": %d,"
	       " \"rows\": [",
	       (unsigned long long)r->runtime_device_bytes,
	       (unsigned long long)r->runtime_host_bytes, r->chosen);
	for (int i = 0; i < ZINF_PLAN_ROWS; i++) {
		const struct zinf_plan_row *w = &r->rows[i];
		printf("%s{\"param\": \"%s\", \"optimizer\": \"%s\", \"stage\": %d, \"tried\": %s",
		       i ? ", " : "", w->param, w->optimizer, w->stage,
		       w->tried ? "true" : "false");
		if (w->tried)
			printf(", \"sub_group_size\": %llu, \"max_in_cpu\": %llu, \"ratio\": %s,"
			       " \"device_bytes\": %llu,"
			       " \"device_base_bytes\": %llu, \"pinned_bytes\": %llu,"
			       " \"host_bytes\": %llu, \"host_checked_bytes\": %llu,"
			       " \"nvme_bytes\": %llu, \"grads_on_nvme\": %s, \"fits\": %s",
			       (unsigned long long)w->sub_group_size,
			       (unsigned long long)w->max_in_cpu,
			       zinf_format_double(w->ratio, num, sizeof(num)),
			       (unsigned long long)w->need.device_bytes,
			       (unsigned long long)w->need.device_base,
			       (unsigned long long)w->need.pinned_bytes,
			       (unsigned long long)w->need.host_bytes,
			       (unsigned long long)w->need.host_checked,
			       (unsigned long long)w->need.nvme_bytes,
			       w->need.grads_on_nvme ? "true" : "false",
			       w->need.fits ? "true" : "false");
		if (w->why[0]) {
			printf(", \"why\": \"");
			for (const char *p = w->why; *p; p++)
				printf(*p == '"' || *p == '\\' ? "\\%c" : "%c", *p);
			printf("\"");
		}
		printf("}");
	}
	printf("]}\n");
}

int cmd_plan(int argc, char **argv)
{
	static const struct option opts[] = {
		{"model", required_argument, NULL, 'm'},
		{"init", required_argument, NULL, 'i'},
		{"config", required_argument, NULL, 'c'},
		{"set", required_argument, NULL, 's'},
		{"seq-len", required_argument, NULL, 'T'},
		{"micro-batch-size", required_argument, NULL, 'B'},
		{"activation-checkpointing", no_argument, NULL, 'a'},
		{"device-memory", required_argument, NULL, 'D'},
		{"host-memory", required_argument, NULL, 'H'},
		{"nvme-path", required_argument, NULL, 'n'},
		{"nvme-free", required_argument, NULL, 'N'},
		{"write-config", required_argument, NULL, 'w'},
		{"force", no_argument, NULL, 'f'},
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct zinf_plan_opts o;
	struct zinf_plan_result *r;
	const char *sets[64], *out = NULL;
	bool json = false, force = false, seen[CMD_FLAG_CODES] = {false};
	char err[1024] = "";
	int c, rc;

	zinf_plan_opts_init(&o);
	o.config_sets = sets;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (cmd_flag_once(seen, opts, c, (const int[]){'s', ':', '?', 0}, "zinf plan"))
			return ZINF_EXIT_USAGE;
		switch (c) {
		case 'm':
			o.model_dir = optarg;
			break;
		case 'i':
			o.init_config = optarg;
			break;
		case 'c':
			o.config_path = optarg;
			break;
		case 's':
			if (o.n_config_sets == 64) {
				fprintf(stderr, "zinf plan: --set: more than 64\n");
				return ZINF_EXIT_USAGE;
			}
			sets[o.n_config_sets++] = optarg;
			break;
		case 'T':
			if (train_flag_u64("zinf plan", "--seq-len", optarg, &o.seq_len))
				return ZINF_EXIT_USAGE;
			break;
		case 'B':
			if (train_flag_u64("zinf plan", "--micro-batch-size", optarg,
					   &o.micro_batch_size))
				return ZINF_EXIT_USAGE;
			if (!o.micro_batch_size || o.micro_batch_size > 1000000000) {
				fprintf(stderr,
					"zinf plan: --micro-batch-size %s: expected 1 to 1000000000\n",
					optarg);
				return ZINF_EXIT_USAGE;
			}
			break;
		case 'a':
			o.activation_checkpointing = true;
			break;
		case 'D':
			if (size_flag("--device-memory", optarg, &o.device_bytes))
				return ZINF_EXIT_USAGE;
			break;
		case 'H':
			if (size_flag("--host-memory", optarg, &o.host_bytes))
				return ZINF_EXIT_USAGE;
			break;
		case 'n':
			o.nvme_path = optarg;
			break;
		case 'N':
			if (size_flag("--nvme-free", optarg, &o.nvme_free_bytes))
				return ZINF_EXIT_USAGE;
			break;
		case 'w':
			out = optarg;
			break;
		case 'f':
			force = true;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			fputs(cmd_plan_usage, stdout);
			return ZINF_EXIT_OK;
		case ':':
			fprintf(stderr, "zinf plan: %s: needs a value (try 'zinf plan --help')\n",
				cmd_bad_flag(argv, argc));
			return ZINF_EXIT_USAGE;
		default:
			fprintf(stderr, "zinf plan: %s: unknown option (try 'zinf plan --help')\n",
				cmd_bad_flag(argv, argc));
			return ZINF_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zinf plan: %s: unexpected argument (try 'zinf plan --help')\n",
			argv[optind]);
		return ZINF_EXIT_USAGE;
	}
	if (!o.model_dir == !o.init_config || !o.seq_len) {
		fprintf(stderr, "zinf plan: needs --model DIR or --init CONFIG.json (one), and "
				"--seq-len T (try 'zinf plan --help')\n");
		return ZINF_EXIT_USAGE;
	}
	/* refused before the plan is printed (zinf_plan_write_config checks again) */
	if (out && !force && access(out, F_OK) == 0) {
		fprintf(stderr,
			"zinf plan: --write-config %s: exists (expected a new file; --force replaces it)\n",
			out);
		return ZINF_EXIT_USAGE;
	}
	r = malloc(sizeof(*r));
	if (!r) {
		fprintf(stderr, "zinf plan: out of memory\n");
		return ZINF_EXIT_FAIL;
	}
	rc = zinf_train_plan(&o, r, err, sizeof(err));
	if (rc) {
		zinf_error_one_line(err);
		fprintf(stderr, "zinf plan: %s\n", err);
		rc = r->bad_input ? ZINF_EXIT_USAGE : ZINF_EXIT_FAIL;
		free(r);
		return rc;
	}
	if (json)
		print_json(r);
	else
		print_table(&o, r);
	rc = r->chosen >= 0 ? ZINF_EXIT_OK : ZINF_EXIT_FAIL;
	if (out && r->chosen >= 0) {
		if (zinf_plan_write_config(&o, r, r->chosen, out, force, err, sizeof(err))) {
			zinf_error_one_line(err);
			fprintf(stderr, "zinf plan: --write-config %s\n", err);
			rc = ZINF_EXIT_USAGE;
		} else if (!json) {
			printf("wrote %s\n", out);
		}
	} else if (out) {
		fprintf(stderr, "zinf plan: --write-config %s: nothing fits, nothing written\n",
			out);
	}
	free(r);
	return rc;
}
