// The CUDA simulator's runtime: the subset of the CUDA runtime API zinf calls, with the
// device's memory in host memory and its work run on the host (ZINF_CUDA=SIM).
//
// It is strict where a real device is lenient or fails late, so that a test run here
// finds the mistakes a first run on a GPU would:
// - streams are lazy: queued work runs only when something waits for it (a stream or
//   event synchronize, a stream waiting on an event, a second query of a pending event,
//   cudaFree, cudaHostUnregister, cudaDeviceSynchronize), so a result read before its
//   wait, a buffer reused while a copy from it is queued, or a missing wait between two
//   streams shows up as wrong data (ZINF_CUDASIM_EAGER=1 runs everything at once);
//   destroying a stream or event waits for nothing, as on a GPU;
// - a copy's pointers must match its kind, device ranges must lie inside one allocation,
//   a launch's grid and block must be within the device's limits, and a kernel's pointer
//   arguments must be device (or registered host) memory;
// - new device memory (allocations up to 256 MiB) is filled with 0xff bytes, a NaN in
//   every float format, so an uninitialised read shows up in the results.
// A copy from pageable host memory is staged at the call (the buffer may be reused at
// once) and queued; one to pageable memory, or between host buffers, is done when the
// call returns, after the stream's queued work. The legacy default stream (NULL) runs
// its work at once after that of every blocking stream (a simplification: on a GPU it
// is queued too). Device memory defaults to 8 GiB (ZINF_CUDASIM_MEMORY_MIB), one device
// (ZINF_CUDASIM_DEVICES).
//
// ZINF_CUDASIM_STRICT_HOST=1 makes device memory inaccessible to the host (PROT_NONE)
// except while the simulated device runs work, so a host read or write through a device
// pointer, which a GPU turns into a crash or garbage, faults at once: the process prints
// the address and a backtrace and exits 99. CTest sets it for the tests of a simulator
// build (tests/CMakeLists.txt, zinf_test_strict_host).
//
// ZINF_CUDASIM_FAULT=KERNEL:N makes the Nth launch of KERNEL fault when it runs, as an
// illegal address does on a GPU: the error is sticky, the faulting kernel and all work
// queued after it never run, and every later call returns cudaErrorIllegalAddress, so
// the paths that report an asynchronous failure run here too. cudaMemcpyAsync:N does the
// same to the Nth cudaMemcpyAsync.
#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "cudasim.h"
#include "sim_internal.h"

// A destroyed stream is kept (in dead_streams, never freed): its queued work still runs
// when something waits for it, and no new stream can take its address, so a queued
// event wait naming it never reaches another stream.
struct CUstream_st {
	std::deque<std::function<void()>> queue;
	uint64_t enqueued = 0, completed = 0;
	unsigned flags = 0;
	bool running = false;
};

// A destroyed event is freed when the last of its queued records has run.
struct CUevent_st {
	cudaStream_t stream = NULL; // where last recorded; NULL: complete at record
	uint64_t target = 0;	    // complete when stream->completed reaches it
	bool recorded = false, timing = true, polled = false, destroyed = false;
	bool blocking = false; // made with cudaEventBlockingSync
	int pending = 0;       // queued records not yet run
	double ms = 0;	       // when the record ran
};

namespace
{
std::mutex dev_lock; // everything below, and the running of all device work
std::set<cudaStream_t> streams;
std::vector<cudaStream_t> dead_streams;
std::set<cudaEvent_t> events;
std::map<uintptr_t, size_t> device_allocs; // start -> bytes
std::map<uintptr_t, size_t> host_regs;	   // start -> bytes
uint64_t device_used;
thread_local cudaError_t last_error = cudaSuccess;
cudaError_t sticky = cudaSuccess; // a fault: every call fails from then on
uint64_t fault_seen;		  // launches of the ZINF_CUDASIM_FAULT kernel so far

const uint64_t POISON_MAX = 256ull << 20;

uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long x;

	if (!v || !*v)
		return def;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || *end) {
		sim_complain("%s=%s is not a number; using %llu", name, v, (unsigned long long)def);
		return def;
	}
	return x;
}

uint64_t device_total(void)
{
	return env_u64("ZINF_CUDASIM_MEMORY_MIB", 8192) << 20;
}

int device_count(void)
{
	return (int)env_u64("ZINF_CUDASIM_DEVICES", 1);
}

bool eager(void)
{
	return env_u64("ZINF_CUDASIM_EAGER", 0) != 0;
}

double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// The registered range in map m holding [p, p + n), or m.end().
std::map<uintptr_t, size_t>::const_iterator find_range(const std::map<uintptr_t, size_t> &m,
						       const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;
	auto it = m.upper_bound(a);

	if (it == m.begin())
		return m.end();
	--it;
	if (a - it->first > it->second || n > it->second - (a - it->first))
		return m.end();
	return it;
}

bool is_device_ptr(const void *p)
{
	return find_range(device_allocs, p, 1) != device_allocs.end();
}

bool is_pinned_range(const void *p, size_t n)
{
	return find_range(host_regs, p, n) != host_regs.end();
}

// ---- ZINF_CUDASIM_STRICT_HOST: device memory closed to the host -------------------------------

bool strict_host(void)
{
	static const bool on = env_u64("ZINF_CUDASIM_STRICT_HOST", 0) != 0;

	return on;
}

int open_depth; // device work running (nested through event waits); lock held

void protect_device(int prot)
{
	for (auto &a : device_allocs)
		if (mprotect((void *)a.first, a.second, prot)) {
			sim_complain("ZINF_CUDASIM_STRICT_HOST: mprotect: %s", strerror(errno));
			abort();
		}
}

// Device memory is open to the host for the scope's life: the device's own work runs.
struct device_open {
	device_open()
	{
		if (strict_host() && open_depth++ == 0)
			protect_device(PROT_READ | PROT_WRITE);
	}
	~device_open()
	{
		if (strict_host() && --open_depth == 0)
			protect_device(PROT_NONE);
	}
};

struct sigaction strict_before; // the SIGSEGV handler before ours: other faults go there

void strict_fault(int sig, siginfo_t *si, void *)
{
	char line[200];
	void *frames[48];
	int n;

	// device_allocs is read without the lock: the process ends here either way
	if (!is_device_ptr(si->si_addr)) {
		sigaction(sig, &strict_before, NULL); // another fault: the handler before ours
		return;
	}
	n = snprintf(line, sizeof(line),
		     "cudasim: the host touched device memory at %p (ZINF_CUDASIM_STRICT_HOST)\n",
		     si->si_addr);
	if (write(2, line, (size_t)n) < 0)
		_exit(99);
	n = backtrace(frames, 48);
	backtrace_symbols_fd(frames, n, 2);
	_exit(99);
}

__attribute__((constructor)) void strict_install(void)
{
	struct sigaction sa;

	if (!strict_host())
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = strict_fault;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, &strict_before);
}

// Run stream s's queued work until upto items have completed. Lock held.
void flush(cudaStream_t s, uint64_t upto)
{
	if (s->completed >= upto)
		return;
	if (upto > s->enqueued) {
		sim_complain("waiting for work a stream never had (%llu of %llu items)",
			     (unsigned long long)upto, (unsigned long long)s->enqueued);
		abort();
	}
	if (s->running) {
		sim_complain("a stream waits (through events) for its own later work: a deadlock");
		abort();
	}
	s->running = true;
	device_open open;
	while (s->completed < upto) {
		std::function<void()> op = std::move(s->queue.front());

		s->queue.pop_front();
		if (!sticky) // after a fault nothing runs any more
			op();
		s->completed++;
	}
	s->running = false;
}

void flush_all(bool blocking_only)
{
	for (cudaStream_t s : streams)
		if (!blocking_only || !(s->flags & cudaStreamNonBlocking))
			flush(s, s->enqueued);
	for (cudaStream_t s : dead_streams)
		flush(s, s->enqueued);
}

bool valid_stream(cudaStream_t s)
{
	return !s || s == cudaStreamLegacy || streams.count(s);
}

// Queue op on s, or run it now on the legacy stream or in eager mode. Lock held.
void enqueue_locked(cudaStream_t s, std::function<void()> op)
{
	if (!s || s == cudaStreamLegacy) {
		flush_all(true);
		device_open open;
		op();
		return;
	}
	s->queue.push_back(std::move(op));
	s->enqueued++;
	if (eager())
		flush(s, s->enqueued);
}

// Wait until everything queued on s so far has run (all streams for NULL). Lock held.
void sync_stream(cudaStream_t s)
{
	if (!s || s == cudaStreamLegacy)
		flush_all(true);
	else
		flush(s, s->enqueued);
}

// The kind of a copy of count bytes from src to dst (cudaMemcpyDefault inferred), or
// cudaMemcpyDefault when its pointers are not where the kind says. Lock held.
enum cudaMemcpyKind copy_kind(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);

const char *kind_name(enum cudaMemcpyKind k)
{
	switch (k) {
	case cudaMemcpyHostToHost:
		return "HostToHost";
	case cudaMemcpyHostToDevice:
		return "HostToDevice";
	case cudaMemcpyDeviceToHost:
		return "DeviceToHost";
	case cudaMemcpyDeviceToDevice:
		return "DeviceToDevice";
	case cudaMemcpyDefault:
		return "Default";
	}
	return "?";
}

enum cudaMemcpyKind copy_kind(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	bool ddst = find_range(device_allocs, dst, count) != device_allocs.end();
	bool dsrc = find_range(device_allocs, src, count) != device_allocs.end();
	bool dst_any = is_device_ptr(dst), src_any = is_device_ptr(src);

	if (kind == cudaMemcpyDefault)
		kind = dst_any ? (src_any ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
			       : (src_any ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
	if ((kind == cudaMemcpyHostToDevice && (!ddst || src_any)) ||
	    (kind == cudaMemcpyDeviceToHost && (!dsrc || dst_any)) ||
	    (kind == cudaMemcpyDeviceToDevice && (!ddst || !dsrc)) ||
	    (kind == cudaMemcpyHostToHost && (dst_any || src_any))) {
		sim_complain("cudaMemcpy(%p, %p, %zu, %s): a pointer is not where the kind says, "
			     "or a device range leaves its allocation",
			     dst, src, count, kind_name(kind));
		return cudaMemcpyDefault;
	}
	return kind;
}
} // namespace

// After a fault every call fails with it (the lock is held).
#define STICKY()                                                                                   \
	do {                                                                                       \
		if (sticky)                                                                        \
			return sim_error(sticky);                                                  \
	} while (0)

// Whether this launch of name (a kernel, or cudaMemcpyAsync) is the one
// ZINF_CUDASIM_FAULT=NAME:N names. Lock held.
static bool fault_due(const char *name)
{
	const char *f = getenv("ZINF_CUDASIM_FAULT"), *colon = f ? strrchr(f, ':') : NULL;

	if (!colon || strlen(name) != (size_t)(colon - f) || strncmp(f, name, colon - f))
		return false;
	return ++fault_seen == strtoull(colon + 1, NULL, 10);
}

void sim_complain(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("cudasim: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void sim_fault(cudaError_t err)
{
	if (!sticky)
		sticky = err;
}

cudaError_t sim_error(cudaError_t err)
{
	if (err != cudaSuccess)
		last_error = err;
	return err;
}

bool sim_is_device_range(const void *p, size_t n)
{
	std::lock_guard<std::mutex> g(dev_lock);

	return find_range(device_allocs, p, n) != device_allocs.end();
}

bool sim_is_kernel_pointer(const void *p)
{
	std::lock_guard<std::mutex> g(dev_lock);

	return !p || is_device_ptr(p) || is_pinned_range(p, 1); // registered: mapped (UVA)
}

cudaError_t sim_enqueue(cudaStream_t stream, std::function<void()> op)
{
	std::lock_guard<std::mutex> g(dev_lock);

	STICKY();
	if (!valid_stream(stream))
		return sim_error(cudaErrorInvalidResourceHandle);
	enqueue_locked(stream, std::move(op));
	return cudaSuccess;
}

void cudasim_launch(cudaStream_t stream, dim3 grid, dim3 block, const char *name,
		    std::function<void()> body, char *shared_lo, char *shared_hi)
{
	uint64_t threads = (uint64_t)block.x * block.y * block.z;

	if (!grid.x || !grid.y || !grid.z || grid.x > 0x7fffffffu || grid.y > 65535 ||
	    grid.z > 65535 || !threads || threads > 1024 || block.x > 1024 || block.y > 1024 ||
	    block.z > 64) {
		sim_complain(
			"launch of %s with grid (%u,%u,%u) block (%u,%u,%u): invalid configuration",
			name, grid.x, grid.y, grid.z, block.x, block.y, block.z);
		sim_error(cudaErrorInvalidConfiguration);
		return;
	}
	{
		std::lock_guard<std::mutex> g(dev_lock);

		if (fault_due(name)) {
			uint64_t n = fault_seen;

			enqueue_locked(stream, [name, n]() {
				sim_complain(
					"injected fault in launch %llu of %s (ZINF_CUDASIM_FAULT)",
					(unsigned long long)n, name);
				sticky = cudaErrorIllegalAddress;
			});
			return;
		}
	}
	sim_enqueue(stream, [grid, block, body, shared_lo, shared_hi, name]() {
		sim_run_grid(grid, block, body, shared_lo, shared_hi, name);
	});
}

void cudasim_refuse_launch(const char *name, int arg, const void *p)
{
	sim_complain("launch of %s: argument %d (%p) is neither device memory nor registered "
		     "host memory (an illegal address on a GPU)",
		     name, arg, p);
	sim_error(cudaErrorIllegalAddress);
}

extern "C" {

cudaError_t cudaGetLastError(void)
{
	cudaError_t err = last_error;

	if (sticky) // not cleared: the context is lost
		return sticky;
	last_error = cudaSuccess;
	return err;
}

cudaError_t cudaPeekAtLastError(void)
{
	return sticky ? sticky : last_error;
}

const char *cudaGetErrorName(cudaError_t err)
{
	switch (err) {
	case cudaSuccess:
		return "cudaSuccess";
	case cudaErrorInvalidValue:
		return "cudaErrorInvalidValue";
	case cudaErrorMemoryAllocation:
		return "cudaErrorMemoryAllocation";
	case cudaErrorInvalidConfiguration:
		return "cudaErrorInvalidConfiguration";
	case cudaErrorInvalidDevice:
		return "cudaErrorInvalidDevice";
	case cudaErrorInvalidResourceHandle:
		return "cudaErrorInvalidResourceHandle";
	case cudaErrorNotReady:
		return "cudaErrorNotReady";
	case cudaErrorHostMemoryAlreadyRegistered:
		return "cudaErrorHostMemoryAlreadyRegistered";
	case cudaErrorHostMemoryNotRegistered:
		return "cudaErrorHostMemoryNotRegistered";
	case cudaErrorNoDevice:
		return "cudaErrorNoDevice";
	case cudaErrorIllegalAddress:
		return "cudaErrorIllegalAddress";
	case cudaErrorInvalidMemcpyDirection:
		return "cudaErrorInvalidMemcpyDirection";
	case cudaErrorLaunchFailure:
		return "cudaErrorLaunchFailure";
	default:
		return "cudaErrorUnknown";
	}
}

const char *cudaGetErrorString(cudaError_t err)
{
	switch (err) {
	case cudaSuccess:
		return "no error";
	case cudaErrorInvalidValue:
		return "invalid argument";
	case cudaErrorMemoryAllocation:
		return "out of memory";
	case cudaErrorInvalidConfiguration:
		return "invalid configuration argument";
	case cudaErrorInvalidDevice:
		return "invalid device ordinal";
	case cudaErrorInvalidResourceHandle:
		return "invalid resource handle";
	case cudaErrorNotReady:
		return "device not ready";
	case cudaErrorHostMemoryAlreadyRegistered:
		return "part or all of the requested memory range is already mapped";
	case cudaErrorHostMemoryNotRegistered:
		return "pointer does not correspond to a registered memory region";
	case cudaErrorNoDevice:
		return "no CUDA-capable device is detected";
	case cudaErrorIllegalAddress:
		return "an illegal memory access was encountered";
	case cudaErrorInvalidMemcpyDirection:
		return "invalid copy direction for memcpy";
	case cudaErrorLaunchFailure:
		return "unspecified launch failure";
	default:
		return "unknown error";
	}
}

// The simulator's driver and runtime are the toolkit's version.
cudaError_t cudaDriverGetVersion(int *version)
{
	*version = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
	*version = CUDART_VERSION;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count)
{
	*count = device_count();
	return *count ? cudaSuccess : sim_error(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device)
{
	if (device < 0 || device >= device_count())
		return sim_error(cudaErrorInvalidDevice);
	return cudaSuccess;
}

static unsigned device_flags;		   /* cudaSetDeviceFlags' last value */
static unsigned long spinning_event_waits; /* cudasim_spinning_event_waits */

cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
	if (flags & ~(unsigned)(cudaDeviceScheduleMask | cudaDeviceMapHost |
				cudaDeviceLmemResizeToMax) ||
	    (flags & cudaDeviceScheduleMask) == 3 || (flags & cudaDeviceScheduleMask) > 4)
		return sim_error(cudaErrorInvalidValue);
	device_flags = flags;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceFlags(unsigned int *flags)
{
	*flags = device_flags | cudaDeviceMapHost;
	return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
	*device = 0;
	return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	if (device < 0 || device >= device_count())
		return sim_error(cudaErrorInvalidDevice);
	memset(prop, 0, sizeof(*prop));
	snprintf(prop->name, sizeof(prop->name), "zinf CUDA simulator");
	prop->totalGlobalMem = device_total();
	prop->major = 9;
	prop->minor = 0;
	prop->multiProcessorCount = 1;
	prop->warpSize = 32;
	prop->maxThreadsPerBlock = 1024;
	prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
	prop->maxThreadsDim[2] = 64;
	prop->maxGridSize[0] = 0x7fffffff;
	prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
	prop->sharedMemPerBlock = 48 << 10;
	prop->pciDeviceID = device;
	return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *bus_id, int len, int device)
{
	if (device < 0 || device >= device_count() || len <= 0)
		return sim_error(device < 0 || device >= device_count() ? cudaErrorInvalidDevice
									: cudaErrorInvalidValue);
	snprintf(bus_id, (size_t)len, "0000:%02x:00.0", device);
	return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
	std::lock_guard<std::mutex> g(dev_lock);

	STICKY();
	*total_bytes = device_total();
	*free_bytes = device_total() - device_used;
	return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t size)
{
	std::lock_guard<std::mutex> g(dev_lock);
	void *p;

	STICKY();
	*ptr = NULL;
	if (!size)
		return cudaSuccess;
	if (size > device_total() - device_used)
		return sim_error(cudaErrorMemoryAllocation);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		 -1, 0);
	if (p == MAP_FAILED)
		return sim_error(cudaErrorMemoryAllocation);
	if (size <= POISON_MAX)
		memset(p, 0xff, size);
	device_allocs[(uintptr_t)p] = size;
	device_used += size;
	if (strict_host() && !open_depth && mprotect(p, size, PROT_NONE))
		sim_complain("ZINF_CUDASIM_STRICT_HOST: mprotect: %s", strerror(errno));
	*ptr = p;
	return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
	std::lock_guard<std::mutex> g(dev_lock);
	auto it = device_allocs.find((uintptr_t)ptr);

	STICKY();
	if (!ptr)
		return cudaSuccess;
	if (it == device_allocs.end()) {
		sim_complain("cudaFree(%p): not the start of a device allocation", ptr);
		return sim_error(cudaErrorInvalidValue);
	}
	flush_all(false); // cudaFree waits for the device
	munmap(ptr, it->second);
	device_used -= it->second;
	device_allocs.erase(it);
	return sticky ? sim_error(sticky) : cudaSuccess; // a fault in what ran
}

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
	std::lock_guard<std::mutex> g(dev_lock);
	uintptr_t a = (uintptr_t)ptr;

	STICKY();
	(void)flags;
	if (!ptr || !size || a + size < a)
		return sim_error(cudaErrorInvalidValue);
	auto it = host_regs.lower_bound(a);
	if ((it != host_regs.end() && it->first < a + size) ||
	    (it != host_regs.begin() && std::prev(it)->first + std::prev(it)->second > a))
		return sim_error(cudaErrorHostMemoryAlreadyRegistered);
	host_regs[a] = size;
	return cudaSuccess;
}

cudaError_t cudaHostUnregister(void *ptr)
{
	std::lock_guard<std::mutex> g(dev_lock);
	auto it = host_regs.find((uintptr_t)ptr);

	STICKY();
	if (it == host_regs.end())
		return sim_error(cudaErrorHostMemoryNotRegistered);
	flush_all(false); // queued copies may still use it
	host_regs.erase(it);
	return sticky ? sim_error(sticky) : cudaSuccess; // a fault in what ran
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attr, const void *ptr)
{
	std::lock_guard<std::mutex> g(dev_lock);

	memset(attr, 0, sizeof(*attr));
	if (is_device_ptr(ptr)) {
		attr->type = cudaMemoryTypeDevice;
		attr->devicePointer = (void *)ptr;
	} else if (is_pinned_range(ptr, 1)) {
		attr->type = cudaMemoryTypeHost;
		attr->devicePointer = (void *)ptr;
		attr->hostPointer = (void *)ptr;
	} else {
		attr->type = cudaMemoryTypeUnregistered;
		attr->device = -2;
	}
	return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
			    cudaStream_t stream)
{
	std::lock_guard<std::mutex> g(dev_lock);

	STICKY();
	if (!count)
		return cudaSuccess;
	if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
		return sim_error(cudaErrorInvalidMemcpyDirection);
	if (!valid_stream(stream))
		return sim_error(cudaErrorInvalidResourceHandle);
	kind = copy_kind(dst, src, count, kind);
	if (kind == cudaMemcpyDefault)
		return sim_error(cudaErrorInvalidValue);
	if (fault_due("cudaMemcpyAsync")) { // faults when it runs, as a bad DMA address does
		uint64_t n = fault_seen;

		enqueue_locked(stream, [n]() {
			sim_complain("injected fault in cudaMemcpyAsync %llu (ZINF_CUDASIM_FAULT)",
				     (unsigned long long)n);
			sticky = cudaErrorIllegalAddress;
		});
		return cudaSuccess;
	}
	if (kind == cudaMemcpyHostToDevice && !is_pinned_range(src, count)) {
		// pageable source: staged at the call, so it may be reused at once
		auto staged = std::make_shared<std::vector<char>>((const char *)src,
								  (const char *)src + count);

		enqueue_locked(stream,
			       [dst, staged]() { memcpy(dst, staged->data(), staged->size()); });
		return cudaSuccess;
	}
	if ((kind == cudaMemcpyDeviceToHost && !is_pinned_range(dst, count)) ||
	    kind == cudaMemcpyHostToHost) {
		// to pageable memory, or between host buffers: done when the call returns
		sync_stream(stream);
		STICKY(); // a fault in what ran first
		device_open open;
		memcpy(dst, src, count);
		return cudaSuccess;
	}
	enqueue_locked(stream, [dst, src, count]() { memcpy(dst, src, count); });
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	std::lock_guard<std::mutex> g(dev_lock);

	STICKY();
	if (!count)
		return cudaSuccess;
	if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault)
		return sim_error(cudaErrorInvalidMemcpyDirection);
	if (copy_kind(dst, src, count, kind) == cudaMemcpyDefault)
		return sim_error(cudaErrorInvalidValue);
	sync_stream(NULL); // the legacy stream: after the blocking streams' work
	STICKY();
	device_open open;
	memcpy(dst, src, count);
	return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *ptr, int value, size_t count, cudaStream_t stream)
{
	std::lock_guard<std::mutex> g(dev_lock);

	STICKY();
	if (!count)
		return cudaSuccess;
	if (!valid_stream(stream))
		return sim_error(cudaErrorInvalidResourceHandle);
	if (find_range(device_allocs, ptr, count) == device_allocs.end()) {
		sim_complain("cudaMemsetAsync(%p, %d, %zu): not inside one device allocation", ptr,
			     value, count);
		return sim_error(cudaErrorInvalidValue);
	}
	enqueue_locked(stream, [ptr, value, count]() { memset(ptr, value, count); });
	return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
	std::lock_guard<std::mutex> g(dev_lock);
	cudaStream_t s;

	STICKY();
	s = new CUstream_st;
	s->flags = flags;
	streams.insert(s);
	*stream = s;
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
	return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	std::lock_guard<std::mutex> g(dev_lock);

	STICKY();
	if (!stream || !streams.count(stream))
		return sim_error(cudaErrorInvalidResourceHandle);
	// returns at once, as on a GPU; the queued work runs when something waits for it
	streams.erase(stream);
	dead_streams.push_back(stream);
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	std::lock_guard<std::mutex> g(dev_lock);

	STICKY();
	if (!valid_stream(stream))
		return sim_error(cudaErrorInvalidResourceHandle);
	sync_stream(stream);
	return sticky ? sim_error(sticky) : cudaSuccess; // a fault in what ran
}

cudaError_t cudaDeviceSynchronize(void)
{
	std::lock_guard<std::mutex> g(dev_lock);

	STICKY();
	flush_all(false);
	return sticky ? sim_error(sticky) : cudaSuccess; // a fault in what ran
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	std::lock_guard<std::mutex> g(dev_lock);
	cudaEvent_t e;

	STICKY();
	e = new CUevent_st;
	e->timing = !(flags & cudaEventDisableTiming);
	e->blocking = flags & cudaEventBlockingSync;
	events.insert(e);
	*event = e;
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	std::lock_guard<std::mutex> g(dev_lock);

	STICKY();
	if (!event || !events.count(event))
		return sim_error(cudaErrorInvalidResourceHandle);
	events.erase(event);
	if (event->pending) // queued records still write it: the last one frees it
		event->destroyed = true;
	else
		delete event;
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	std::lock_guard<std::mutex> g(dev_lock);

	STICKY();
	if (!event || !events.count(event) || !valid_stream(stream))
		return sim_error(cudaErrorInvalidResourceHandle);
	event->recorded = true;
	event->polled = false;
	if (!stream || stream == cudaStreamLegacy) {
		flush_all(true);
		event->stream = NULL;
		event->ms = now_ms();
		return cudaSuccess;
	}
	event->pending++;
	enqueue_locked(stream, [event]() {
		event->ms = now_ms();
		if (--event->pending == 0 && event->destroyed)
			delete event;
	});
	event->stream = stream;
	event->target = stream->enqueued;
	return cudaSuccess;
}

static bool event_done(cudaEvent_t e)
{
	return !e->stream || e->stream->completed >= e->target;
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
	std::lock_guard<std::mutex> g(dev_lock);

	STICKY();
	if (!event || !events.count(event))
		return sim_error(cudaErrorInvalidResourceHandle);
	if (event_done(event))
		return cudaSuccess;
	if (!event->polled) { // not yet, once: the device is still busy
		event->polled = true;
		return cudaErrorNotReady; // not an error: the last error is left alone
	}
	flush(event->stream, event->target);
	return sticky ? sim_error(sticky) : cudaSuccess; // a fault in what ran
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	std::lock_guard<std::mutex> g(dev_lock);

	STICKY();
	if (!event || !events.count(event))
		return sim_error(cudaErrorInvalidResourceHandle);
	// a real GPU spins here unless the event blocks, whatever the device's wait mode
	if ((device_flags & cudaDeviceScheduleMask) == cudaDeviceScheduleBlockingSync &&
	    !event->blocking)
		spinning_event_waits++;
	if (!event_done(event))
		flush(event->stream, event->target);
	return sticky ? sim_error(sticky) : cudaSuccess; // a fault in what ran
}

// Event waits that a GPU would spin through while the device's wait mode is blocking
// (cudaDeviceScheduleBlockingSync): the event was made without cudaEventBlockingSync.
// Tests find it with dlsym, so that the same test runs on a GPU without it.
unsigned long cudasim_spinning_event_waits(void)
{
	std::lock_guard<std::mutex> g(dev_lock);

	return spinning_event_waits;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	std::lock_guard<std::mutex> g(dev_lock);

	STICKY();
	if (!start || !end || !events.count(start) || !events.count(end) || !start->timing ||
	    !end->timing || !start->recorded || !end->recorded)
		return sim_error(cudaErrorInvalidResourceHandle);
	if (!event_done(start) || !event_done(end))
		return sim_error(cudaErrorNotReady);
	*ms = (float)(end->ms - start->ms);
	return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
	std::lock_guard<std::mutex> g(dev_lock);
	cudaStream_t es;
	uint64_t target;

	STICKY();
	(void)flags;
	if (!event || !events.count(event) || !valid_stream(stream))
		return sim_error(cudaErrorInvalidResourceHandle);
	if (!event->recorded || event_done(event))
		return cudaSuccess;
	es = event->stream;
	target = event->target;
	enqueue_locked(stream, [es, target]() { flush(es, target); }); // es is never freed
	return cudaSuccess;
}

} // extern "C"
