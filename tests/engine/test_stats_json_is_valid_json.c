/*
 * zinf_stats_json writes one valid JSON object: every counter as given, and a time that
 * is not a finite number (a caller-filled struct) as null, never nan or inf, which no
 * JSON parser takes. A write that fails (a full disk: /dev/full, buffered) is -EIO.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "test.h"
#include "zinf/zinf.h"

static cJSON *written(const struct zinf_stats *st)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	cJSON *j;

	T_CHECK(f && zinf_stats_json(st, f) == 0 && fclose(f) == 0, "zinf_stats_json");
	j = cJSON_Parse(text);
	T_CHECK(j, "not JSON: %s", text);
	free(text);
	return j;
}

int main(void)
{
	struct zinf_stats st = {0};
	cJSON *j, *link;

	st.device_peak = 123456789;
	st.steps = 7;
	st.wait_seconds = 0.25;
	st.nvme_to_pinned.bytes = 4096;
	st.nvme_to_pinned.seconds = 1.5;
	j = written(&st);
	link = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "links"), "nvme_to_pinned");
	T_CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "device"),
							 "peak")) == 123456789.0 &&
			cJSON_GetNumberValue(cJSON_GetObjectItem(j, "steps")) == 7.0 &&
			cJSON_GetNumberValue(cJSON_GetObjectItem(j, "wait_seconds")) == 0.25 &&
			cJSON_GetNumberValue(cJSON_GetObjectItem(link, "bytes")) == 4096.0 &&
			cJSON_GetNumberValue(cJSON_GetObjectItem(link, "seconds")) == 1.5,
		"values not as given");
	cJSON_Delete(j);

	st.wait_seconds = NAN;
	st.optimizer_seconds = INFINITY;
	st.nvme_to_pinned.seconds = -INFINITY;
	j = written(&st);
	link = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "links"), "nvme_to_pinned");
	T_CHECK(cJSON_IsNull(cJSON_GetObjectItem(j, "wait_seconds")) &&
			cJSON_IsNull(cJSON_GetObjectItem(j, "optimizer_seconds")) &&
			cJSON_IsNull(cJSON_GetObjectItem(link, "seconds")),
		"a time that is not finite is not null");
	cJSON_Delete(j);

	FILE *full = fopen("/dev/full", "w");
	if (full) { /* (a machine without it: nothing to check) */
		T_CHECK(zinf_stats_json(&st, full) == -EIO, "a failed write returned 0");
		fclose(full);
	}
	return T_EXIT_PASS;
}
