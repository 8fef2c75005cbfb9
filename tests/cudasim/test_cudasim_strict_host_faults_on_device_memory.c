/* With ZINF_CUDASIM_STRICT_HOST=1 (CTest sets it for the tests of a simulator build) a
 * host read or write through a device pointer, which a GPU turns into a crash or garbage,
 * ends the process at once with exit 99 and a line naming the address, while the device's
 * own work (copies both ways, a memset, copies queued on a stream and run by a wait) still
 * reads and writes device memory. A fault elsewhere (a NULL pointer) stays an ordinary
 * SIGSEGV (or a sanitizer's report). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

#define CK(call) T_CHECK((call) == cudaSuccess, "%s", #call)

static volatile unsigned char *volatile target;

static void child_read(void)
{
	printf("%d\n", target[5]);
}

static void child_write(void)
{
	target[100] = 1;
}

/* Run fn in a child; its wait status, and the first line it wrote to stderr in line. */
static int in_child(void (*fn)(void), char *line, size_t len)
{
	int fds[2], status;
	pid_t pid;
	ssize_t n;

	T_CHECK(pipe(fds) == 0, "pipe");
	pid = fork();
	T_CHECK(pid >= 0, "fork");
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		fn();
		_exit(0);
	}
	close(fds[1]);
	line[0] = 0;
	for (size_t got = 0;; got += (size_t)n) { /* to the end: the child writes a backtrace */
		char rest[4096];

		n = read(fds[0], got < len - 1 ? line + got : rest,
			 got < len - 1 ? len - 1 - got : sizeof(rest));
		if (n <= 0)
			break;
		if (got < len - 1)
			line[got + (size_t)n] = 0;
	}
	if (strchr(line, '\n'))
		*strchr(line, '\n') = 0;
	close(fds[0]);
	T_CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	return status;
}

int main(void)
{
	static unsigned char host[4096] __attribute__((aligned(4096)));
	static unsigned char pinned[4096] __attribute__((aligned(4096)));
	unsigned char *dev;
	char line[512], want[64];
	cudaStream_t s;
	int status;

	T_CHECK(getenv("ZINF_CUDASIM_STRICT_HOST") &&
			!strcmp(getenv("ZINF_CUDASIM_STRICT_HOST"), "1"),
		"run with ZINF_CUDASIM_STRICT_HOST=1 (ctest sets it)");
	CK(cudaMalloc((void **)&dev, 4096));
	CK(cudaHostRegister(pinned, sizeof(pinned), cudaHostRegisterDefault));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	/* the device's own work reaches its memory */
	for (int i = 0; i < 4096; i++)
		host[i] = (unsigned char)(i * 7);
	CK(cudaMemcpy(dev, host, 4096, cudaMemcpyHostToDevice));
	CK(cudaMemsetAsync(dev + 1024, 0x5a, 16, s));
	CK(cudaMemcpyAsync(pinned, dev, 4096, cudaMemcpyDeviceToHost, s));
	CK(cudaStreamSynchronize(s));
	for (int i = 0; i < 4096; i++)
		T_CHECK(pinned[i] == (i >= 1024 && i < 1040 ? 0x5a : (unsigned char)(i * 7)),
			"byte %d back through the device is %u", i, pinned[i]);
	memset(host, 0, sizeof(host));
	CK(cudaMemcpy(host, dev, 4096, cudaMemcpyDeviceToHost));
	T_CHECK(host[5] == 35 && host[1024] == 0x5a, "a pageable copy back: %u %u", host[5],
		host[1024]);

	/* the host's own reads and writes fault */
	target = dev;
	snprintf(want, sizeof(want), "%p", (void *)(dev + 5));
	status = in_child(child_read, line, sizeof(line));
	T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 99, "a host read: status %#x", status);
	T_CHECK(strstr(line, "touched device memory") && strstr(line, want),
		"the line names the address %s: %s", want, line);
	status = in_child(child_write, line, sizeof(line));
	T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 99, "a host write: status %#x", status);

	/* another fault goes to the handler before the simulator's: none (a SIGSEGV), or a
	 * sanitizer's, which reports it and exits non-zero */
	target = NULL;
	status = in_child(child_read, line, sizeof(line));
	T_CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) ||
			(WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
			 WEXITSTATUS(status) != 99 && !strstr(line, "touched device memory")),
		"a NULL read: status %#x, %s", status, line);

	CK(cudaStreamDestroy(s));
	CK(cudaHostUnregister(pinned));
	CK(cudaFree(dev));
	return T_EXIT_PASS;
}
