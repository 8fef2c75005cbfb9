/* zinf.offload_gradients nvme: with the optimizer state on NVMe, the gradient
 * accumulators go there too, one extent per sub-group, and host memory holds only the
 * sub-groups being accumulated or written, the step's read-ahead and the new copies of
 * the modules being written: the host peak stays within seven fp32 sub-groups, one bf16
 * sub-group and two modules' bf16 copies (2.3 MB here, where host accumulators alone
 * take 4 bytes per parameter, 4.9 MB); every step writes and reads the gradients once,
 * and training gives the same parameters bit for bit. */
#include <unistd.h>

#include "toy_trainer.h"

#define SUB_GROUP 50000 /* a module (204800 elements) spans five sub-groups */

static void train(const char *dir, const char *grads, struct toy_run *out)
{
	char json[1536];

	snprintf(
		json, sizeof(json),
		"{\"train_micro_batch_size_per_gpu\": 1, \"bf16\": {\"enabled\": true},"
		" \"gradient_clipping\": 1.0,"
		" \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.01, \"weight_decay\": 0.1}},"
		" \"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
		"  \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"%s\"},"
		"  \"sub_group_size\": %d},"
		" \"zinf\": {\"device\": \"host\", \"device_memory_limit\": \"2MiB\", \"pinned_memory_limit\": \"8MiB\","
		"  \"chunk_size\": \"64KiB\", \"offload_gradients\": \"%s\"}}",
		dir, dir, SUB_GROUP, grads);
	toy_train(json, false, out);
}

int main(void)
{
	char dir[] = "/var/tmp/zinf-grads-test-XXXXXX";
	const uint64_t total = (uint64_t)N_MOD * ELEMS, grad_bytes = total * 4;
	const uint64_t sub_bytes = (SUB_GROUP * 4 + 4095) / 4096 * 4096;
	/* three open, two being written, two read ahead by the step */
	const uint64_t bound = 7 * sub_bytes + SUB_GROUP * 2 + 2 * ELEMS * 2 + 16384;
	struct toy_run cpu, nvme;

	zinf_log_set_level(ZINF_LOG_ERROR);
	T_CHECK(mkdtemp(dir), "mkdtemp");
	train(dir, "cpu", &cpu);
	train(dir, "nvme", &nvme);
	T_CHECK(memcmp(cpu.params, nvme.params, grad_bytes) == 0,
		"gradients on nvme changed the result");
	T_CHECK(cpu.st.host_peak >= grad_bytes, "cpu: host peak %llu below the accumulators %llu",
		(unsigned long long)cpu.st.host_peak, (unsigned long long)grad_bytes);
	T_CHECK(nvme.st.host_peak <= bound, "nvme: host peak %llu bytes, over %llu",
		(unsigned long long)nvme.st.host_peak, (unsigned long long)bound);
	/* each step writes every sub-group's sum once and the step reads it once */
	T_CHECK(nvme.st.pinned_to_nvme.bytes >= cpu.st.pinned_to_nvme.bytes + STEPS * grad_bytes,
		"nvme: %llu bytes written, cpu %llu: expected at least %llu more",
		(unsigned long long)nvme.st.pinned_to_nvme.bytes,
		(unsigned long long)cpu.st.pinned_to_nvme.bytes,
		(unsigned long long)(STEPS * grad_bytes));
	/* reads: the parameter store's vary with timing; the optimizer's do not */
	T_CHECK(nvme.st.nvme_to_pinned.bytes >= STEPS * (grad_bytes + 3 * grad_bytes),
		"nvme: %llu bytes read, under the %llu of the state and the gradients",
		(unsigned long long)nvme.st.nvme_to_pinned.bytes,
		(unsigned long long)(STEPS * 4 * grad_bytes));
	T_CHECK(nvme.st.nvme_peak >= cpu.st.nvme_peak + grad_bytes,
		"nvme: the gradient extents are not counted in nvme_peak");
	free(cpu.params);
	free(nvme.params);
	T_CHECK(rmdir(dir) == 0, "scratch directory left non-empty");
	return T_EXIT_PASS;
}
