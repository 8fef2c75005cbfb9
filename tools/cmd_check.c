/*
 * zinf check CONFIG: load and validate a DeepSpeed-style config, resolve what can be
 * resolved here, and print every value with its source. Exit 0 valid, 2 invalid.
 * A config is judged on its own: things about this machine (a missing nvme_path) are
 * warnings, errors only when training starts.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "zinf/zinf.h"

const char cmd_check_usage[] =
	"usage: zinf check [options] CONFIG\n"
	"Validate a DeepSpeed-style JSON config (plus its \"zinf\" block) and print every\n"
	"value with its source: file, default, auto, resolved, derived or set.\n"
	"Exit status: 0 valid, 2 invalid (one line on stderr names the key and the problem).\n"
	"\n"
	"options:\n"
	"  --world-size N    ranks the batch sizes are checked for (default: $WORLD_SIZE,\n"
	"                    $OMPI_COMM_WORLD_SIZE, $PMI_SIZE, else 1)\n"
	"  --hidden-size N   model hidden size, to resolve \"auto\" bucket sizes\n"
	"  --set KEY=VALUE   override one key (repeatable), e.g. --set zero_optimization.stage=3\n"
	"  --json            print the resolved config as one JSON object\n"
	"  -q, --quiet       print nothing but warnings and errors\n"
	"  -h, --help        this text\n";

/* Parse a whole number from 1 to max given as opt; 0 on error (message printed). */
static unsigned long long parse_positive(const char *opt, const char *text, unsigned long long max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || end == text || *end || v == 0 || v > max || text[0] < '0' || text[0] > '9') {
		fprintf(stderr, "zinf check: %s: '%s' is not a whole number from 1 to %llu\n", opt,
			text, max);
		return 0;
	}
	return v;
}

#define MAX_HIDDEN_SIZE (1u << 24) /* as config.json's; hidden_size^2 stays exact */

/* The log with the config's own warnings left out (they are printed from the config,
 * once each): those name the file (user) or "--set" first. */
static void log_all_but_config_warnings(enum zinf_log_level level, const char *msg, void *user)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	const char *path = user;
	size_t n = strlen(path);

	if (level == ZINF_LOG_WARN &&
	    ((strncmp(msg, path, n) == 0 && msg[n] == ':') || strncmp(msg, "--set: ", 7) == 0))
		return;
	fprintf(stderr, "zinf: %s: %s\n", names[level], msg);
}

int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{"world-size", required_argument, NULL, 'w'},
		{"hidden-size", required_argument, NULL, 'H'},
		{"set", required_argument, NULL, 's'},
		{"json", no_argument, NULL, 'j'},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct zinf_config_resolve_info info = {.world_size = 1};
	struct zinf_config *cfg = NULL;
	const char *sets[64];
	int n_sets = 0, c, rc, status = ZINF_EXIT_USAGE;
	bool json = false, quiet = false, world_given = false, seen[CMD_FLAG_CODES] = {false};

	optind = 1;
	opterr = 0; /* one line of our own below */
	while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
		/* a second --world-size or --hidden-size would replace the first unsaid */
		if (cmd_flag_once(seen, opts, c, (const int[]){'s', '?', 0}, "zinf check"))
			return ZINF_EXIT_USAGE;
		switch (c) {
		case 'w':
			info.world_size =
				(int)parse_positive("--world-size", optarg, CMD_MAX_WORLD_SIZE);
			if (info.world_size <= 0)
				return ZINF_EXIT_USAGE;
			world_given = true;
			break;
		case 'H':
			info.hidden_size = parse_positive("--hidden-size", optarg, MAX_HIDDEN_SIZE);
			if (!info.hidden_size)
				return ZINF_EXIT_USAGE;
			break;
		case 's':
			if (!strchr(optarg, '=') || n_sets == 64) {
				fprintf(stderr, "zinf check: --set: '%s' %s\n", optarg,
					n_sets == 64 ? "is one more than 64 --set flags"
						     : "is not KEY=VALUE");
				return ZINF_EXIT_USAGE;
			}
			sets[n_sets++] = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'q':
			quiet = true;
			break;
		case 'h':
			fputs(cmd_check_usage, stdout);
			return ZINF_EXIT_OK;
		default:
			fprintf(stderr,
				"zinf check: %s: unknown or incomplete option (see zinf check --help)\n",
				cmd_bad_flag(argv, argc));
			return ZINF_EXIT_USAGE;
		}
	}
	/* the launcher's variable only when --world-size did not say (and not for --help) */
	if (!world_given && (info.world_size = cmd_env_world_size("zinf check", NULL)) == 0)
		return ZINF_EXIT_USAGE;
	if (optind != argc - 1) {
		fprintf(stderr,
			"zinf check: %s (expected one CONFIG file; see 'zinf check --help')\n",
			optind == argc ? "no config file given"
				       : "more than one config file given");
		return ZINF_EXIT_USAGE;
	}
	/* The config's warnings are printed below from the config itself, once each: the
	 * log's copies are dropped, and its other lines kept when ZINF_LOG asks for them. */
	if (!getenv("ZINF_LOG"))
		zinf_log_set_level(ZINF_LOG_ERROR);
	else
		zinf_log_set_callback(log_all_but_config_warnings, argv[optind]);
	info.host_total_bytes = zinf_host_memory_bytes(); /* "auto" pinned limits resolve */
	if (zinf_config_create(&cfg)) {
		fprintf(stderr, "zinf check: out of memory\n");
		return ZINF_EXIT_FAIL;
	}
	rc = zinf_config_load_file(cfg, argv[optind]);
	for (int i = 0; !rc && i < n_sets; i++) {
		char key[256];
		const char *eq = strchr(sets[i], '=');
		snprintf(key, sizeof(key), "%.*s", (int)(eq - sets[i]), sets[i]);
		rc = zinf_config_set(cfg, key, eq + 1);
	}
	if (!rc)
		rc = zinf_config_resolve(cfg, &info);
	for (int i = 0; i < zinf_config_warning_count(cfg); i++)
		fprintf(stderr, "warning: %s\n", zinf_config_warning(cfg, i));
	if (rc) {
		fprintf(stderr, "%s\n", zinf_config_last_error(cfg));
		goto out;
	}
	if (!quiet && zinf_config_print(cfg, stdout, json)) {
		status = ZINF_EXIT_FAIL;
		goto out;
	}
	status = ZINF_EXIT_OK;
out:
	zinf_config_destroy(cfg);
	return status;
}
