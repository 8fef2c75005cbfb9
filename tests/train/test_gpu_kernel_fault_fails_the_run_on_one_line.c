/* A kernel that faults on the device (an illegal address: the error is sticky and
 * surfaces at the next synchronisation, not at the launch) fails zinf train with a
 * non-zero code and one line naming the CUDA error, without hanging or crashing, in
 * forward (the third RMSNorm) and in backward (the first SwiGLU backward). Needs a
 * fault injected, so it runs on the CUDA simulator (ZINF_CUDASIM_FAULT) and skips (77)
 * on a real GPU and without CUDA. */
#include <sys/wait.h>

#include "cuda_sim_only.h"
#include "train_fixture.h"

static void run_fault(struct tf_dir *d, const char *fault, const char *where)
{
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char err[1024] = "";
	int rc;

	tf_write_ds(d, "nvme", "cpu", false);
	/* the fixture's host device, moved to cuda */
	{
		static const char *const sets[] = {"zinf.device=cuda",
						   "zinf.device_memory_limit=8MiB"};

		tf_opts(d, &o, 2, &l);
		o.config_sets = sets;
		o.n_config_sets = 2;
	}
	setenv("ZINF_CUDASIM_FAULT", fault, 1);
	rc = zinf_train_run(&o, &res, err, sizeof(err));
	unsetenv("ZINF_CUDASIM_FAULT");
	printf("%s: rc %d: %s\n", fault, rc, err);
	T_CHECK(rc != 0, "%s: the run succeeded", fault);
	T_CHECK(err[0] && !strchr(err, '\n'), "%s: one line: %s", fault, err);
	T_CHECK(strstr(err, "cudaErrorIllegalAddress") || strstr(err, "illegal memory access"),
		"%s: the CUDA error is named: %s", fault, err);
	T_CHECK(strstr(err, where) != NULL, "%s: the message says where (%s): %s", fault, where,
		err);
}

int main(void)
{
	struct tf_dir d;

	require_cuda_simulator("faults are injected only on the CUDA simulator");
	zinf_log_set_level(ZINF_LOG_ERROR);
	tf_setup(&d, NULL);
	/* a fault is sticky for the process, as on a GPU: each case runs in a child */
	for (int i = 0; i < 2; i++) {
		static const char *const faults[] = {"rmsnorm_forward_kernel:3",
						     "swiglu_backward_kernel:1"};
		/* the third RMSNorm is layer 1's first; backward starts at the last layer */
		static const char *const wheres[] = {"layer 1 forward", "layer 1 backward"};
		int status = 0;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		T_CHECK(pid >= 0, "fork");
		if (pid == 0) {
			run_fault(&d, faults[i], wheres[i]);
			exit(0);
		}
		T_CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
				WEXITSTATUS(status) == 0,
			"%s: the case failed (status %d)", faults[i], status);
	}
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
