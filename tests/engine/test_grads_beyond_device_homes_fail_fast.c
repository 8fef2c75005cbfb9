/* With parameters homed on the device (offload_param none) nothing can be evicted: a
 * gradient buffer (or device memory for activations) that does not fit beside the homes
 * is refused at once with ZINF_EBUDGET and a one-line message, not waited for forever
 * (zinf_store_alloc_scratch used to count the homes as cached modules that could give
 * way, and polled for room every millisecond). The engine stays usable: a module whose
 * gradients do fit still gets them, and the engine is destroyed cleanly. */
#include <signal.h>
#include <unistd.h>

#include "config_fixture.h"
#include "test.h"
#include "zinf/engine.h"
#include "zinf/zinf.h"

#define BIG_ELEMS (160u * 1024u) /* 640 KiB of f32: a home and its gradients > 1 MiB */
#define SMALL_ELEMS 1024u

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL: a device allocation waited for room that cannot come\n";

	(void)sig;
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

int main(void)
{
	struct zinf_config *cfg;
	struct zinf_engine *e;
	uint64_t big_shape[1] = {BIG_ELEMS}, small_shape[1] = {SMALL_ELEMS};
	uint32_t m[2], p[2];
	char err[512];
	void *act = NULL;
	const char *msg;
	int rc;

	zinf_log_set_level(ZINF_LOG_ERROR);
	signal(SIGALRM, on_alarm);
	alarm(20);
	cfg = t_config(
		"{\"train_micro_batch_size_per_gpu\": 1,"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01}},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"none\"},"
		" \"offload_optimizer\": {\"device\": \"cpu\"}},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"1MiB\","
		" \"pinned_memory_limit\": \"2MiB\"}}",
		"homes.json", false);
	T_CHECK(zinf_engine_create(cfg, &e, err, sizeof(err)) == 0, "%s", err);
	T_CHECK_RC(zinf_module_add(e, "big", &m[0]));
	T_CHECK_RC(zinf_param_add(e, m[0], "big.weight", ZINF_DTYPE_F32, 1, big_shape, 0, &p[0]));
	T_CHECK_RC(zinf_module_add(e, "small", &m[1]));
	T_CHECK_RC(
		zinf_param_add(e, m[1], "small.weight", ZINF_DTYPE_F32, 1, small_shape, 0, &p[1]));
	T_CHECK(zinf_engine_finalize(e) == 0, "%s", zinf_last_error(e));

	/* the check before a first step says so too */
	T_CHECK(zinf_engine_check_room(e, 1, &m[0], true) == ZINF_EBUDGET,
		"check_room passed a module whose gradients cannot fit: %s", zinf_last_error(e));

	T_CHECK(zinf_module_fetch(e, m[0]) == 0 && zinf_module_wait(e, m[0]) == 0, "%s",
		zinf_last_error(e));
	rc = zinf_module_grads(e, m[0]);
	msg = zinf_last_error(e);
	T_CHECK(rc == ZINF_EBUDGET, "gradients beyond the homes: returned %d, want %d (%s)", rc,
		ZINF_EBUDGET, msg);
	T_CHECK(strstr(msg, "device budget") && !strchr(msg, '\n'),
		"want one line naming the device budget: %s", msg);
	T_CHECK(!zinf_param_grad(e, p[0]), "a refused gradient buffer is out");
	T_CHECK_RC(zinf_module_release(e, m[0]));

	/* device memory for activations: the same */
	rc = zinf_engine_device_alloc(e, 512u * 1024u, &act);
	T_CHECK(rc == ZINF_EBUDGET && !act, "activations beyond the homes: returned %d (%s)", rc,
		zinf_last_error(e));

	/* what fits still comes */
	T_CHECK(zinf_module_fetch(e, m[1]) == 0 && zinf_module_wait(e, m[1]) == 0, "%s",
		zinf_last_error(e));
	T_CHECK(zinf_module_grads(e, m[1]) == 0, "small gradients: %s", zinf_last_error(e));
	T_CHECK(zinf_param_grad(e, p[1]), "no gradient buffer for the small module");
	T_CHECK_RC(zinf_module_grads_ready(e, m[1]));
	T_CHECK_RC(zinf_module_release(e, m[1]));
	T_CHECK(zinf_engine_sync(e) == 0, "%s", zinf_last_error(e));
	zinf_engine_destroy(e);
	zinf_config_destroy(cfg);
	alarm(0);
	return T_EXIT_PASS;
}
