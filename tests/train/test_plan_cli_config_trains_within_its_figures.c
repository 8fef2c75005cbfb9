/* zinf plan's chosen config trains: for a device budget between the device figures of
 * "parameters on the device" and "parameters in host memory", the plan refuses the first
 * and chooses the second, writes the user's config with the placement set (its other
 * keys kept), and zinf train with it runs within the budget, its pinned peak within the
 * plan's pool. The plan's device figure is the one train checks: a page below it, train
 * refuses before step 1. Bad input exits 2 with one line on stderr: no --seq-len, a size
 * of 0, an unknown flag, a missing --init file, --seq-len past max_position_embeddings
 * (or past what yarn rope scaling stretches it to, which is allowed up to there),
 * and --write-config onto an existing file without --force (left byte-identical). An
 * --nvme-path missing here is said to leave the NVMe free space unknown, and why. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_util.h"
#include "test.h"

static const char *zinf_bin;
static char dir[] = "/var/tmp/zinf-plan-cli-XXXXXX";

static void write_file(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	T_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
}

static char *read_file(const char *name)
{
	char path[256], *buf = calloc(1, 1 << 20);
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	T_CHECK(f && buf, "cannot read %s", path);
	n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

/* Run zinf ARGS in dir with stdout to out.txt and stderr to err.txt; the exit status. */
static int run(const char *args)
{
	char cmd[4096];
	int status;

	snprintf(cmd, sizeof(cmd), "cd '%s' && '%s' %s >out.txt 2>err.txt", dir, zinf_bin, args);
	status = system(cmd);
	T_CHECK(WIFEXITED(status), "%s: did not exit", args);
	return WEXITSTATUS(status);
}

static void expect_usage(const char *args, const char *says)
{
	char *err;
	int lines = 0;

	T_CHECK(run(args) == 2, "%s: exit status not 2", args);
	err = read_file("err.txt");
	for (char *p = err; *p; p++)
		lines += *p == '\n';
	T_CHECK(lines == 1 && strstr(err, says), "%s: expected one line saying '%s':\n%s", args,
		says, err);
	free(err);
}

static uint64_t row_u64(cJSON *plan, int row, const char *key)
{
	cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItem(plan, "rows"), row);
	cJSON *v = cJSON_GetObjectItem(r, key);

	T_CHECK(cJSON_IsNumber(v), "row %d: no %s", row, key);
	return (uint64_t)cJSON_GetNumberValue(v);
}

static cJSON *plan_json(const char *extra)
{
	char args[1024], *out;
	cJSON *j;
	int rc;

	snprintf(args, sizeof(args),
		 "plan --init model.json --config ds.json --seq-len 64 --json %s", extra);
	rc = run(args);
	T_CHECK(rc == 0 || rc == 1, "%s: exit %d", args, rc);
	out = read_file("out.txt");
	j = cJSON_Parse(out);
	T_CHECK(j, "%s: not JSON:\n%s", args, out);
	free(out);
	/* the config's zinf.nvme_paths, with no tier on nvme, are the drives the plan may
	 * use: not "no effect" */
	out = read_file("err.txt");
	T_CHECK(!strstr(out, "nvme_paths"), "%s: warns of the drives it plans on:\n%s", args, out);
	free(out);
	return j;
}

int main(int argc, char **argv)
{
	char args[2048], text[8192], *cfg_text, *before, *after;
	uint64_t dev_home, dev_cpu, pinned_cpu, budget, peak_dev = 0, peak_pin = 0;
	cJSON *plan, *written, *line;

	T_CHECK(argc == 2, "usage: %s ZINF", argv[0]);
	zinf_bin = argv[1];
	T_CHECK(mkdtemp(dir), "mkdtemp");
	write_file("model.json",
		   "{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 128,"
		   " \"intermediate_size\": 352, \"num_hidden_layers\": 4,"
		   " \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
		   " \"max_position_embeddings\": 256, \"tie_word_embeddings\": false}");
	snprintf(text, sizeof(text),
		 "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 1,"
		 " \"bf16\": {\"enabled\": true},"
		 " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.002}},"
		 /* ratio set: the rows keep all the optimizer state in host memory, none
		  * moved to the device in Twin-Flow style (test_plan_ratio_...) */
		 " \"zero_optimization\": {\"offload_optimizer\": {\"ratio\": 1}},"
		 " \"zinf\": {\"device\": \"host\", \"nvme_paths\": [\"%s\"]}}",
		 dir);
	write_file("ds.json", text);
	for (int i = 0; i < (int)sizeof(text) - 1; i++)
		text[i] = (char)('a' + (i * 7 + i / 13) % 26);
	text[sizeof(text) - 1] = 0;
	write_file("data.txt", text);

	/* the figures with room to spare, then a budget between those of the rows with the
	 * optimizer in host memory and the parameters on the device (1) or there too (2) */
	plan = plan_json("--device-memory 1GiB");
	dev_home = row_u64(plan, 1, "device_bytes");
	dev_cpu = row_u64(plan, 2, "device_bytes");
	cJSON_Delete(plan);
	T_CHECK(dev_cpu < dev_home && dev_cpu >= (1ull << 20), "device figures %llu, %llu",
		(unsigned long long)dev_home, (unsigned long long)dev_cpu);
	budget = (dev_home + dev_cpu) / 2 / 4096 * 4096;
	snprintf(args, sizeof(args), "--device-memory %llu --write-config out.json",
		 (unsigned long long)budget);
	plan = plan_json(args);
	T_CHECK((int)cJSON_GetNumberValue(cJSON_GetObjectItem(plan, "chosen")) == 2,
		"a budget of %llu: row 2 not chosen", (unsigned long long)budget);
	pinned_cpu = row_u64(plan, 2, "pinned_bytes");
	cJSON_Delete(plan);
	cfg_text = read_file("out.json");
	written = cJSON_Parse(cfg_text);
	T_CHECK(written, "out.json is not JSON:\n%s", cfg_text);
	T_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(
			       cJSON_GetObjectItem(
				       cJSON_GetObjectItem(written, "zero_optimization"),
				       "offload_param"),
			       "device")),
		       "cpu") == 0,
		"out.json: offload_param.device not cpu:\n%s", cfg_text);
	T_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(
			cJSON_GetObjectItem(cJSON_GetObjectItem(written, "optimizer"), "params"),
			"lr")) == 0.002,
		"out.json lost the optimizer's lr:\n%s", cfg_text);
	cJSON_Delete(written);
	free(cfg_text);

	/* zinf train with it: within the budget and the pool */
	T_CHECK(run("train --init model.json --config out.json --data data.txt --data-format "
		    "text --seq-len 64 --steps 2 --log-json log.jsonl -q") == 0,
		"train with the plan's config failed:\n%s", read_file("err.txt"));
	{
		char *all = read_file("log.jsonl"), *save = NULL;
		for (char *l = strtok_r(all, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			line = cJSON_Parse(l);
			T_CHECK(line, "log line not JSON: %s", l);
			peak_dev = (uint64_t)cJSON_GetNumberValue(
				cJSON_GetObjectItem(line, "peak_device_bytes"));
			peak_pin = (uint64_t)cJSON_GetNumberValue(
				cJSON_GetObjectItem(line, "peak_pinned_bytes"));
			cJSON_Delete(line);
		}
		free(all);
	}
	fprintf(stderr, "budget %llu: peak device %llu; pool %llu: peak pinned %llu\n",
		(unsigned long long)budget, (unsigned long long)peak_dev,
		(unsigned long long)pinned_cpu, (unsigned long long)peak_pin);
	T_CHECK(peak_dev > 0 && peak_dev <= budget, "peak device %llu, budget %llu",
		(unsigned long long)peak_dev, (unsigned long long)budget);
	T_CHECK(peak_pin > 0 && peak_pin <= pinned_cpu, "peak pinned %llu, plan's pool %llu",
		(unsigned long long)peak_pin, (unsigned long long)pinned_cpu);
	/* a page under the plan's device figure: train refuses before step 1 */
	snprintf(args, sizeof(args),
		 "train --init model.json --config out.json --data data.txt --data-format text "
		 "--seq-len 64 --steps 2 -q --set zinf.device_memory_limit=%llu",
		 (unsigned long long)(dev_cpu - 4096));
	T_CHECK(run(args) != 0, "train ran with %llu bytes, under the plan's %llu",
		(unsigned long long)(dev_cpu - 4096), (unsigned long long)dev_cpu);
	snprintf(args, sizeof(args),
		 "train --init model.json --config out.json --data data.txt --data-format text "
		 "--seq-len 64 --steps 1 -q --set zinf.device_memory_limit=%llu",
		 (unsigned long long)dev_cpu);
	T_CHECK(run(args) == 0, "train refused the plan's own figure %llu:\n%s",
		(unsigned long long)dev_cpu, read_file("err.txt"));

	/* no --config and no --micro-batch-size (the README's flow): the plan is for a
	 * micro-batch of 1, and the written config says so, so that train takes it */
	T_CHECK(run("plan --init model.json --seq-len 64 --device-memory 1GiB --set "
		    "zinf.device=host --write-config plain.json") == 0,
		"plan without --config failed:\n%s", read_file("err.txt"));
	cfg_text = read_file("plain.json");
	written = cJSON_Parse(cfg_text);
	T_CHECK(written && cJSON_GetNumberValue(cJSON_GetObjectItem(
				   written, "train_micro_batch_size_per_gpu")) == 1,
		"plain.json does not set the micro-batch of 1 planned for:\n%s", cfg_text);
	cJSON_Delete(written);
	free(cfg_text);
	T_CHECK(run("train --init model.json --config plain.json --data data.txt --data-format "
		    "text --seq-len 64 --steps 1 -q") == 0,
		"train refused the config plan wrote without --config:\n%s", read_file("err.txt"));

	/* planning a smaller machine: the host backend's "auto" budget is a quarter of the
	 * --host-memory given, not of this machine's (a GPU, when there is one, is probed) */
	T_CHECK(run("plan --init model.json --seq-len 64 --host-memory 1GiB --json") <= 1,
		"plan for a 1 GiB host failed:\n%s", read_file("err.txt"));
	{
		char *out = read_file("out.txt");
		cJSON *j = cJSON_Parse(out);
		T_CHECK(j, "not JSON:\n%s", out);
		T_CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "device")), "host") ||
				cJSON_GetNumberValue(cJSON_GetObjectItem(j, "device_bytes")) ==
					268435456.0,
			"a 1 GiB host's device budget is not 256 MiB:\n%s", out);
		cJSON_Delete(j);
		free(out);
	}

	/* bad input */
	/* the host backend's heap is host memory: a budget beyond it is refused, as train
	 * refuses it */
	expect_usage("plan --init model.json --seq-len 64 --set zinf.device=host --device-memory "
		     "3GiB --host-memory 2GiB",
		     "--device-memory 3 GiB is more than the 2 GiB of host memory");
	expect_usage("plan --init model.json --seq-len 64 --set zinf.device=host --set "
		     "zinf.device_memory_limit=3GiB --host-memory 2GiB",
		     "zinf.device_memory_limit 3 GiB is more than the 2 GiB of host memory");
	/* an NVMe path missing here: its free space unknown, said with the reason */
	T_CHECK(run("plan --init model.json --seq-len 64 --nvme-path /nonexistent/zinf-nvme") == 0,
		"plan with a missing --nvme-path");
	{
		char *out = read_file("out.txt");
		T_CHECK(strstr(out, "NVMe free space unknown: ") &&
				strstr(out, "--nvme-path /nonexistent/zinf-nvme: No such file or "
					    "directory"),
			"a missing --nvme-path's free space not said unknown:\n%s", out);
		free(out);
	}
	/* the host device's budget of a --host-memory too small: named as that flag */
	expect_usage(
		"plan --init model.json --seq-len 64 --set zinf.device=host --host-memory 1MiB",
		"--host-memory 1 MiB: the host device's budget, a quarter of it, is under");
	expect_usage("plan --init model.json", "--seq-len");
	/* a --micro-batch-size a --set contradicts: refused, as train refuses it */
	expect_usage("plan --init model.json --seq-len 64 --set train_micro_batch_size_per_gpu=4 "
		     "--micro-batch-size 3",
		     "--micro-batch-size 3: --set sets train_micro_batch_size_per_gpu to 4");
	expect_usage("plan --init model.json --seq-len 64 --device-memory 0", "--device-memory");
	expect_usage("plan --init model.json --seq-len 64 --device-memory 4KiB",
		     "--device-memory: 4096 is out of range (expected a byte size >= 1048576");
	expect_usage("plan --init model.json --seq-len 64 --bogus", "--bogus");
	expect_usage("plan --init model.json --seq-len 64 --seq-len 32",
		     "--seq-len: given twice (expected once)");
	expect_usage("plan --init missing.json --seq-len 64", "missing.json");
	expect_usage("plan --init model.json --seq-len 4096", "max_position_embeddings");
	/* yarn stretches 256 positions to 2048, as zinf train allows */
	write_file("yarn.json",
		   "{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 128,"
		   " \"intermediate_size\": 352, \"num_hidden_layers\": 4,"
		   " \"num_attention_heads\": 4, \"max_position_embeddings\": 256,"
		   " \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 8}}");
	T_CHECK(run("plan --init yarn.json --seq-len 2048") == 0,
		"plan refused the 2048 positions yarn reaches:\n%s", read_file("err.txt"));
	expect_usage(
		"plan --init yarn.json --seq-len 2049",
		"--seq-len 2049: expected 1 to the 2048 positions the model's yarn rope scaling reaches");
	/* past what zinf train takes, whatever the model's positions */
	write_file("long.json",
		   "{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 128,"
		   " \"intermediate_size\": 352, \"num_hidden_layers\": 4,"
		   " \"num_attention_heads\": 4, \"max_position_embeddings\": 4194304}");
	expect_usage("plan --init long.json --seq-len 2097152",
		     "--seq-len 2097152: at most 1048576");
	before = read_file("out.json");
	expect_usage("plan --init model.json --config ds.json --seq-len 64 --device-memory 1GiB "
		     "--write-config out.json",
		     "exists");
	after = read_file("out.json");
	T_CHECK(strcmp(before, after) == 0, "out.json changed by a refused --write-config");
	free(after);
	after = read_file("out.txt"); /* refused before a plan is printed */
	T_CHECK(!*after, "a refused --write-config printed:\n%s", after);
	free(before);
	free(after);
	T_CHECK(run("plan --init model.json --config ds.json --seq-len 64 --device-memory 1GiB "
		    "--write-config out.json --force") == 0,
		"--force did not replace out.json");

	snprintf(args, sizeof(args), "rm -rf '%s'", dir);
	T_CHECK(system(args) == 0, "cannot remove %s", dir);
	return T_EXIT_PASS;
}
