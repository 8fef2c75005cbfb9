// The CUDA simulator's block scheduler: every thread of a block is a fiber on the
// calling host thread; __syncthreads parks the fiber, and when every live fiber of the
// block is parked or finished the barrier opens. Blocks run one after another, so a
// kernel's static __shared__ arrays (static locals in one section, see cudasim.h) are
// its block's, filled with 0xff before each block.
// Only one grid runs at a time: the runtime calls this with its device lock held.
// ZINF_CUDASIM_ORDER=reverse runs the blocks, and the threads between two barriers, in
// reverse order, so that a kernel that depends on the order (a missing __syncthreads, a
// block reading another block's output) gives other results.
//
// A switch between fibers is a few instructions on x86-64 (callee-saved registers and
// the stack pointer, below); elsewhere it is swapcontext, which is correct but makes a
// system call per switch.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <vector>

#include "cudasim.h"
#include "sim_internal.h"

struct cudasim_index cudasim_cur;

namespace
{
enum fiber_state { FIBER_RUNNABLE, FIBER_AT_BARRIER, FIBER_DONE };

const size_t STACK_BYTES = 256 << 10; // reserved, not committed: pages are used as touched
const size_t GUARD_BYTES = 4096;      // an inaccessible page below each stack
} // namespace

#if defined(__x86_64__)
// sim_switch(save, to): push the callee-saved registers, store the stack pointer in
// *save, load to, pop the registers saved there and return into that fiber.
extern "C" void sim_switch(void **save, void *to);
asm(".text\n"
    ".globl sim_switch\n"
    ".hidden sim_switch\n"
    ".type sim_switch,@function\n"
    "sim_switch:\n"
    "	pushq %rbp\n"
    "	pushq %rbx\n"
    "	pushq %r12\n"
    "	pushq %r13\n"
    "	pushq %r14\n"
    "	pushq %r15\n"
    "	movq %rsp, (%rdi)\n"
    "	movq %rsi, %rsp\n"
    "	popq %r15\n"
    "	popq %r14\n"
    "	popq %r13\n"
    "	popq %r12\n"
    "	popq %rbx\n"
    "	popq %rbp\n"
    "	ret\n"
    ".size sim_switch, .-sim_switch\n");

struct context {
	void *sp;
};

static void fiber_entry(void);

// Make ctx start fiber_entry on stack: six zero registers, then fiber_entry as the
// return address, with the stack 16-byte aligned at its entry as the ABI wants.
static void context_init(struct context *ctx, char *stack)
{
	uintptr_t top = ((uintptr_t)stack + STACK_BYTES) & ~(uintptr_t)15;
	void **sp = (void **)top;

	*--sp = NULL; // fiber_entry's own return address: it never returns
	*--sp = (void *)fiber_entry;
	for (int i = 0; i < 6; i++)
		*--sp = NULL;
	ctx->sp = sp;
}

static void context_switch(struct context *from, struct context *to)
{
	sim_switch(&from->sp, to->sp);
}
#else
#include <ucontext.h>

struct context {
	ucontext_t uc;
};

static void fiber_entry(void);

static void __attribute__((noinline)) context_init(struct context *ctx, char *stack)
{
	if (getcontext(&ctx->uc)) {
		perror("cudasim: getcontext");
		abort();
	}
	ctx->uc.uc_stack.ss_sp = stack;
	ctx->uc.uc_stack.ss_size = STACK_BYTES;
	ctx->uc.uc_link = NULL; // fiber_entry never returns
	makecontext(&ctx->uc, fiber_entry, 0);
}

static void context_switch(struct context *from, struct context *to)
{
	if (swapcontext(&from->uc, &to->uc)) {
		perror("cudasim: swapcontext");
		abort();
	}
}
#endif

namespace
{
struct fiber {
	struct context ctx;
	uint3 tid;
	enum fiber_state state;
	const char *file; // the __syncthreads it is parked at
	int line;
};

struct block_run {
	struct context sched;
	struct fiber *cur;
	const std::function<void()> *body;
};

struct block_run *running; // guarded by the runtime's device lock
bool reverse_order;	   // ZINF_CUDASIM_ORDER=reverse, read at each launch
std::vector<char *> stacks;
std::vector<struct fiber> fibers;
} // namespace

static void fiber_entry(void)
{
	struct fiber *f = running->cur;

	(*running->body)();
	f->state = FIBER_DONE;
	context_switch(&f->ctx, &running->sched); // not resumed again
	abort();
}

void cudasim_syncthreads(const char *file, int line)
{
	struct fiber *f;

	if (!running) {
		sim_complain("__syncthreads called outside a kernel");
		abort();
	}
	f = running->cur;
	f->state = FIBER_AT_BARRIER;
	f->file = file;
	f->line = line;
	context_switch(&f->ctx, &running->sched);
}

// Run the block's fibers until all have finished, opening the barrier each time every
// live one is parked at it (exited threads count as arrived, as on sm_70 and later).
// Threads parked at different __syncthreads calls (a barrier in divergent code, whose
// behaviour CUDA leaves undefined) fault the launch with cudaErrorLaunchFailure.
static void run_block(struct block_run *run, unsigned nthreads, const char *name)
{
	unsigned done = 0;

	for (;;) {
		const struct fiber *first = NULL;
		bool split = false;

		for (unsigned n = 0; n < nthreads; n++) {
			struct fiber *f = &fibers[reverse_order ? nthreads - 1 - n : n];

			if (f->state != FIBER_RUNNABLE)
				continue;
			run->cur = f;
			cudasim_cur.thread = f->tid;
			context_switch(&run->sched, &f->ctx);
			done += f->state == FIBER_DONE;
		}
		if (done == nthreads)
			return;
		for (unsigned i = 0; i < nthreads; i++) {
			if (fibers[i].state != FIBER_AT_BARRIER)
				continue;
			if (!first)
				first = &fibers[i];
			else if (fibers[i].line != first->line ||
				 strcmp(fibers[i].file, first->file))
				split = true;
			fibers[i].state = FIBER_RUNNABLE;
		}
		if (split) {
			sim_complain(
				"%s: threads of block (%u,%u,%u) wait at different __syncthreads, "
				"%s:%d among them (a barrier in divergent code)",
				name, cudasim_cur.block.x, cudasim_cur.block.y, cudasim_cur.block.z,
				first->file, first->line);
			sim_fault(cudaErrorLaunchFailure);
		}
	}
}

void sim_run_grid(dim3 grid, dim3 block, const std::function<void()> &body, char *shared_lo,
		  char *shared_hi, const char *name)
{
	unsigned nthreads = block.x * block.y * block.z;
	uint64_t nblocks = (uint64_t)grid.x * grid.y * grid.z;
	struct block_run run = {};
	struct cudasim_index saved = cudasim_cur;

	while (stacks.size() < nthreads) {
		char *s = (char *)mmap(NULL, GUARD_BYTES + STACK_BYTES, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

		if (s == MAP_FAILED || mprotect(s, GUARD_BYTES, PROT_NONE)) {
			sim_complain("out of host memory for %u thread stacks", nthreads);
			abort();
		}
		stacks.push_back(s + GUARD_BYTES);
	}
	if (fibers.size() < nthreads)
		fibers.resize(nthreads);
	run.body = &body;
	running = &run;
	reverse_order =
		getenv("ZINF_CUDASIM_ORDER") && !strcmp(getenv("ZINF_CUDASIM_ORDER"), "reverse");
	cudasim_cur.block_dim = block;
	cudasim_cur.grid_dim = grid;
	for (uint64_t b = 0; b < nblocks; b++) {
		uint64_t lin = reverse_order ? nblocks - 1 - b : b;
		unsigned i = 0;

		if (shared_lo && shared_hi > shared_lo)
			memset(shared_lo, 0xff, (size_t)(shared_hi - shared_lo));

		cudasim_cur.block =
			make_uint3((unsigned)(lin % grid.x), (unsigned)(lin / grid.x % grid.y),
				   (unsigned)(lin / grid.x / grid.y));
		for (unsigned tz = 0; tz < block.z; tz++)
			for (unsigned ty = 0; ty < block.y; ty++)
				for (unsigned tx = 0; tx < block.x; tx++, i++) {
					context_init(&fibers[i].ctx, stacks[i]);
					fibers[i].tid = make_uint3(tx, ty, tz);
					fibers[i].state = FIBER_RUNNABLE;
				}
		run_block(&run, nthreads, name);
	}
	running = NULL;
	cudasim_cur = saved;
}
