/* The cuda model runtime's attention score buffers stay within attn_scores_bytes: the
 * query rows go in blocks of as many as fit, so its buffers shrink by exactly the
 * (B, T - rows, T) floats of each of the two score buffers (to their 256-byte carving)
 * against a bound that holds all T rows (the default bound for these sizes), and a block
 * is all T rows when they fit.
 * The runtime's first device allocation (its buffers) is recorded and refused, so nothing
 * runs. Skips (77) without a GPU. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gpu_test.h"
#include "llama_backend.h"
#include "test.h"
#include "zinf/log.h"

static uint64_t asked;

static int record(void *ctx, uint64_t bytes, void **out)
{
	(void)ctx;
	asked = bytes;
	*out = NULL;
	return -ENOMEM;
}

static int unused_free(void *ctx, void *ptr)
{
	(void)ctx;
	(void)ptr;
	return 0;
}

/* Bytes of the runtime's buffers for B x T tokens with score buffers of at most bound. */
static uint64_t buffers(int B, int T, uint64_t bound)
{
	struct zinf_llama_config c;
	struct llama_rt_opts opts;
	struct llama_rt *rt = NULL;
	char err[512];

	zinf_llama_config_init(&c);
	c.vocab_size = 64;
	c.hidden_size = 32;
	c.intermediate_size = 48;
	c.num_hidden_layers = 1;
	c.num_attention_heads = 4;
	c.num_key_value_heads = 2;
	c.head_dim = 8;
	llama_rt_opts_init(&opts);
	opts.mem.alloc = record;
	opts.mem.free = unused_free;
	opts.attn_scores_bytes = bound;
	asked = 0;
	T_CHECK(llama_rt_cuda_ops.create(&c, &opts, B, T, &rt, err, sizeof(err)) != 0,
		"the runtime was created with no device memory");
	T_CHECK(asked > 0 && strstr(err, "runtime buffers"), "B %d T %d: %s", B, T, err);
	return asked;
}

/* What two score buffers of rows query rows take less than two of all T rows (each
 * buffer carved at a 256-byte multiple). */
static uint64_t saved(int T, uint64_t rows, uint64_t row)
{
	return 2 * (((T * row + 255) & ~255ull) - ((rows * row + 255) & ~255ull));
}

int main(void)
{
	const int B = 2, T = 1000;
	const uint64_t row = (uint64_t)B * T * sizeof(float); /* one query row of scores */
	uint64_t whole, blocked, rows;

	zinf_log_set_level(ZINF_LOG_ERROR);
	t_require_gpu();
	whole = buffers(B, T, 0);
	T_CHECK(buffers(B, T, (uint64_t)T * row) == whole, "a bound that fits all rows changes it");
	T_CHECK(buffers(B, T, 100 * (uint64_t)T * row) == whole, "a larger bound changes it");
	/* 200 rows fit: blocks of 192 (a multiple of 64) */
	blocked = buffers(B, T, 200 * row);
	rows = 192;
	fprintf(stderr, "B %d T %d: buffers %llu bytes with all rows, %llu in blocks of %llu\n", B,
		T, (unsigned long long)whole, (unsigned long long)blocked,
		(unsigned long long)rows);
	T_CHECK(whole - blocked == saved(T, rows, row), "%llu bytes saved, expected %llu",
		(unsigned long long)(whole - blocked), (unsigned long long)saved(T, rows, row));
	/* under 64 rows: as many as fit */
	blocked = buffers(B, T, 10 * row + row / 2);
	T_CHECK(whole - blocked == saved(T, 10, row), "%llu bytes saved with 10 rows",
		(unsigned long long)(whole - blocked));
	/* a bound below one row still gets one */
	blocked = buffers(B, T, 1);
	T_CHECK(whole - blocked == saved(T, 1, row), "%llu bytes saved with 1 row",
		(unsigned long long)(whole - blocked));
	return T_EXIT_PASS;
}
