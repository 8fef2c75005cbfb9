/* With zinf.trace set, the engine writes a Chrome trace-event file at destroy: valid
 * JSON with a named track per kind of work and complete events ("X", ts, dur) for NVMe
 * reads, host-to-device copies, compute per module and the optimizer; without it, no
 * file is written. */
#include <cjson/cJSON.h>
#include <unistd.h>

#include "config_fixture.h"
#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	T_CHECK(f, "no trace file %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	T_CHECK(buf && fread(buf, 1, (size_t)n, f) == (size_t)n, "read");
	fclose(f);
	return buf;
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-timeline-test-XXXXXX", json[1024], err[512], trace[300];
	const char *want[] = {"NVMe read", "H2D copy", "compute", "optimizer", "D2H copy"};
	int tid_of[5], events[5] = {0};
	struct zinf_config *cfg;
	struct zinf_engine *e;
	struct zinf_step_result r;
	uint32_t m[2], p[2];
	uint64_t shape[1] = {100000};
	float *buf = calloc(100000, sizeof(float));
	cJSON *root, *ev;
	char *text;

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	snprintf(trace, sizeof(trace), "%s/trace.json", dir);
	snprintf(
		json, sizeof(json),
		"{\"train_micro_batch_size_per_gpu\": 1, \"zero_optimization\": {\"stage\": 3,"
		" \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
		" \"offload_optimizer\": {\"device\": \"cpu\"}},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"4MiB\", \"pinned_memory_limit\": \"4MiB\","
		" \"chunk_size\": \"64KiB\", \"trace\": \"%s\"}}",
		dir, trace);
	cfg = t_config(json, "t.json", true);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	for (int i = 0; i < 2; i++) {
		char name[16];
		snprintf(name, sizeof(name), "layers.%d", i);
		T_CHECK_RC(zinf_module_add(e, name, &m[i]));
		T_CHECK_RC(zinf_param_add(e, m[i], name, ZINF_DTYPE_F32, 1, shape, 0, &p[i]));
	}
	T_CHECK_RC(zinf_engine_finalize(e));
	for (int i = 0; i < 2; i++) {
		T_CHECK_RC(zinf_param_load(e, p[i], buf, ZINF_DTYPE_F32));
		T_CHECK(zinf_module_fetch(e, m[i]) == 0 && zinf_module_wait(e, m[i]) == 0, "%s",
			zinf_last_error(e));
		T_CHECK_RC(zinf_module_grads(e, m[i]));
		zinf_param_grad(e, p[i])[0] = 1.0f;
		T_CHECK_RC(zinf_module_grads_ready(e, m[i]));
		T_CHECK_RC(zinf_module_release(e, m[i]));
	}
	T_CHECK_RC(zinf_step(e, &r));
	T_CHECK(access(trace, F_OK) != 0, "trace written before destroy");
	zinf_engine_destroy(e);

	text = slurp(trace);
	root = cJSON_Parse(text);
	T_CHECK(root && cJSON_IsArray(cJSON_GetObjectItem(root, "traceEvents")),
		"not a Chrome trace:\n%.200s", text);
	for (int k = 0; k < 5; k++) {
		tid_of[k] = -1;
		cJSON_ArrayForEach(ev, cJSON_GetObjectItem(root, "traceEvents"))
		{
			cJSON *args = cJSON_GetObjectItem(ev, "args");
			cJSON *name = args ? cJSON_GetObjectItem(args, "name") : NULL;
			if (strcmp(cJSON_GetObjectItem(ev, "name")->valuestring, "thread_name") ==
				    0 &&
			    name && strcmp(name->valuestring, want[k]) == 0)
				tid_of[k] = cJSON_GetObjectItem(ev, "tid")->valueint;
		}
		T_CHECK(tid_of[k] > 0, "no track named %s", want[k]);
	}
	cJSON_ArrayForEach(ev, cJSON_GetObjectItem(root, "traceEvents"))
	{
		cJSON *ph = cJSON_GetObjectItem(ev, "ph");
		if (strcmp(ph->valuestring, "X") != 0)
			continue;
		T_CHECK(cJSON_IsNumber(cJSON_GetObjectItem(ev, "ts")) &&
				cJSON_GetObjectItem(ev, "dur")->valuedouble >= 0,
			"event without ts/dur");
		for (int k = 0; k < 5; k++)
			events[k] += cJSON_GetObjectItem(ev, "tid")->valueint == tid_of[k];
	}
	for (int k = 0; k < 5; k++)
		T_CHECK(events[k] > 0, "no %s events", want[k]);
	cJSON_Delete(root);
	free(text);
	unlink(trace);
	zinf_config_destroy(cfg);
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");
	free(buf);
	return T_EXIT_PASS;
}
