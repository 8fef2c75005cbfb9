/*
 * "auto" picks cuda when a GPU is visible and host otherwise, and says which at info
 * level; asking for cuda where there is none fails with a one-line reason.
 */
#include <stdio.h>
#include <string.h>

#include "tiers_test.h"
#include "zinf/log.h"

static char logged[4096];

static void capture(enum zinf_log_level level, const char *msg, void *user)
{
	if (level == ZINF_LOG_INFO && strlen(logged) + strlen(msg) + 2 < sizeof(logged)) {
		strcat(logged, msg);
		strcat(logged, "\n");
	}
}

int main(void)
{
	struct zinf_device_opts o;
	struct zinf_device *dev;
	enum zinf_device_backend b;
	int ngpu = zinf_device_cuda_count();
	char err[512];

	zinf_log_set_level(ZINF_LOG_INFO);
	zinf_log_set_callback(capture, NULL);
	zinf_device_opts_init(&o);
	o.memory_limit = 64ull << 20; /* a GPU may have less free than auto would want */
	T_CHECK(o.backend == ZINF_DEVICE_BACKEND_AUTO, "auto is the default");
	T_CHECK_RC(zinf_device_create(&o, &dev, err, sizeof(err)));
	b = ngpu > 0 ? ZINF_DEVICE_BACKEND_CUDA : ZINF_DEVICE_BACKEND_HOST;
	T_CHECK(zinf_device_backend(dev) == b, "picked %s with %d GPU(s)",
		zinf_device_backend_name(zinf_device_backend(dev)), ngpu);
	T_CHECK(strstr(logged, ngpu > 0 ? "using the cuda backend" : "using the host backend"),
		"logged: %s", logged);
	T_CHECK(strstr(logged, zinf_device_name(dev)), "name logged: %s", logged);
	zinf_device_destroy(dev);

	o.backend = ZINF_DEVICE_BACKEND_CUDA;
	if (ngpu == 0) {
		T_CHECK(zinf_device_create(&o, &dev, err, sizeof(err)) < 0, "cuda without a GPU");
		T_CHECK(dev == NULL && strstr(err, "cuda") && !strchr(err, '\n'), "err: %s", err);
		printf("cuda requested without a GPU: %s\n", err);
	}
	o.backend = ZINF_DEVICE_BACKEND_HOST;
	o.memory_limit = 0; /* auto on the host: a share of available memory */
	T_CHECK_RC(zinf_device_create(&o, &dev, err, sizeof(err)));
	T_CHECK(dev->heap_size > 0, "auto host budget");
	zinf_device_destroy(dev);
	T_CHECK(zinf_device_backend_parse("host", &b) == 0 && b == ZINF_DEVICE_BACKEND_HOST,
		"parse host");
	zinf_log_set_callback(NULL, NULL);
	return T_EXIT_PASS;
}
