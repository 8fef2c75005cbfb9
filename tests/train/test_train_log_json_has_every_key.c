/* Every --log-json line parses as one JSON object with the documented keys and types:
 * step (1-based, consecutive), loss, lr, tokens, step_seconds, fwd_bwd_seconds,
 * optimizer_seconds, wait_seconds, tokens_per_second, peak_device_bytes,
 * peak_pinned_bytes, bytes {nvme_read, nvme_write, h2d, d2h}, skipped; eval_loss on the
 * eval steps only, eval_loss_before (the evaluation before step 1) on step 1 only. Parameters on NVMe show NVMe reads; peaks stay within the limits. */
#include <cjson/cJSON.h>

#include "train_fixture.h"

static const char *const number_keys[] = {
	"loss",
	"lr",
	"tokens",
	"step_seconds",
	"fwd_bwd_seconds",
	"optimizer_seconds",
	"wait_seconds",
	"tokens_per_second",
	"peak_device_bytes",
	"peak_pinned_bytes",
	"device_limit_bytes",
	"pinned_limit_bytes",
};

static double num(const cJSON *o, const char *key, int line)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	T_CHECK(cJSON_IsNumber(v), "line %d: %s missing or not a number", line, key);
	return v->valuedouble;
}

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char path[160], buf[4096];
	int line = 0;
	double nvme_reads = 0;
	FILE *f;

	tf_setup(&d, NULL);
	tf_write_ds(&d, "nvme", "cpu", true);
	tf_opts(&d, &o, 4, &l);
	snprintf(path, sizeof(path), "%s/log.jsonl", d.root);
	o.log_json_path = path;
	o.eval_data_path = d.data;
	o.eval_every = 2;
	tf_run(&o, &res);
	f = fopen(path, "r");
	T_CHECK(f != NULL, "%s not written", path);
	while (fgets(buf, sizeof(buf), f)) {
		cJSON *j = cJSON_Parse(buf);
		const cJSON *bytes, *skipped;

		line++;
		T_CHECK(j && cJSON_IsObject(j), "line %d does not parse: %s", line, buf);
		T_CHECK(num(j, "step", line) == line, "line %d: step %g", line,
			num(j, "step", line));
		for (size_t k = 0; k < sizeof(number_keys) / sizeof(number_keys[0]); k++)
			num(j, number_keys[k], line);
		T_CHECK(num(j, "tokens", line) == 2 * 2 * 16, "line %d: tokens", line);
		T_CHECK(num(j, "loss", line) > 0 && num(j, "lr", line) > 0, "line %d: loss, lr",
			line);
		T_CHECK(num(j, "peak_device_bytes", line) <= num(j, "device_limit_bytes", line) &&
				num(j, "peak_pinned_bytes", line) <=
					num(j, "pinned_limit_bytes", line),
			"line %d: peaks over the limits", line);
		bytes = cJSON_GetObjectItemCaseSensitive(j, "bytes");
		T_CHECK(cJSON_IsObject(bytes), "line %d: bytes is not an object", line);
		/* Every step writes the new parameters to their NVMe home and refreshes the
		 * device copies still cached (h2d: this model fits the budget, so later
		 * fetches are hits, not reads). The updates run in the background and count in
		 * the next step's figures, except before an evaluation and at the end, where
		 * the step waits for its own: steps 2 and 4 here. */
		T_CHECK(line % 2 == 1 ||
				(num(bytes, "nvme_write", line) > 0 && num(bytes, "h2d", line) > 0),
			"line %d: params on nvme, no writes or no refreshed copies", line);
		T_CHECK(num(bytes, "d2h", line) > 0, "line %d: no gradients came back", line);
		nvme_reads += num(bytes, "nvme_read", line);
		skipped = cJSON_GetObjectItemCaseSensitive(j, "skipped");
		T_CHECK(cJSON_IsBool(skipped) && cJSON_IsFalse(skipped), "line %d: skipped", line);
		T_CHECK((cJSON_GetObjectItemCaseSensitive(j, "eval_loss") != NULL) ==
				(line % 2 == 0),
			"line %d: eval_loss only every 2 steps", line);
		/* the evaluation before step 1, on step 1's line only */
		T_CHECK((cJSON_GetObjectItemCaseSensitive(j, "eval_loss_before") != NULL) ==
				(line == 1),
			"line %d: eval_loss_before only on step 1", line);
		if (line == 1)
			T_CHECK(num(j, "eval_loss_before", line) > 0, "eval_loss_before");
		cJSON_Delete(j);
	}
	fclose(f);
	T_CHECK(line == 4, "%d lines, expected 4", line);
	T_CHECK(nvme_reads == 0, "cached parameters were read back from nvme: %g bytes",
		nvme_reads);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
