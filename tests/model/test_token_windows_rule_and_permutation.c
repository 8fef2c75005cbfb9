/*
 * The window rule: row r of micro-batch i takes tokens [(i*B + r)*T, ... + T + 1) modulo
 * N, checked at chosen (i, r) including windows that wrap and later passes; inputs and
 * targets are the window shifted by one. With shuffling, each epoch visits every window
 * k*T exactly once, the order is a permutation for many sizes, seeds and epochs, it
 * differs across seeds and epochs, and it is the same on every run and machine (fixed
 * values below were computed once from the documented definition).
 */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "tokens.h"

/* zinf_token_perm(42, 0, 1000, 0..5), computed once from the definition in docs/formats.md. */
static const uint64_t GOLD0 = 82, GOLD1 = 15, GOLD2 = 421, GOLD3 = 862, GOLD4 = 245, GOLD5 = 167;

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

static void check_sequential(void)
{
	struct zinf_token_windows w;
	char err[256];

	/* N = 1000, B = 4, T = 64. */
	T_CHECK_RC(zinf_token_windows_init(&w, 1000, 4, 64, false, 0, err, sizeof(err)));
	T_CHECK(zinf_token_windows_start(&w, 0, 0) == 0, "(0,0)");
	T_CHECK(zinf_token_windows_start(&w, 0, 3) == 192, "(0,3)");
	T_CHECK(zinf_token_windows_start(&w, 2, 1) == (2 * 4 + 1) * 64, "(2,1) = 576");
	/* (3,3): window 15 starts at 960 and wraps after 40 tokens. */
	T_CHECK(zinf_token_windows_start(&w, 3, 3) == 960, "(3,3)");
	/* (4,0): window 16 starts at 1024 mod 1000 = 24: the second pass is shifted. */
	T_CHECK(zinf_token_windows_start(&w, 4, 0) == 24, "(4,0)");
	T_CHECK(zinf_token_windows_start(&w, 1000000, 2) == (4000002ull * 64) % 1000, "far (i,r)");
	/* Huge i does not overflow: (i*B + r)*T is taken modulo N exactly. */
	T_CHECK(zinf_token_windows_start(&w, UINT64_MAX / 2, 1) ==
			(uint64_t)((((unsigned __int128)(UINT64_MAX / 2) * 4 + 1) * 64) % 1000),
		"huge i");
	/* Bad setups. */
	T_CHECK(zinf_token_windows_init(&w, 64, 4, 64, false, 0, err, sizeof(err)) == -EINVAL &&
			strstr(err, "at least seq_len + 1 tokens"),
		"N = T accepted: %s", err);
	T_CHECK(zinf_token_windows_init(&w, 1000, 0, 64, false, 0, err, sizeof(err)) == -EINVAL,
		"B = 0 accepted");
	T_CHECK(zinf_token_windows_init(&w, 1000, 4, 0, false, 0, err, sizeof(err)) == -EINVAL,
		"T = 0 accepted");
}

static void check_permutation(void)
{
	static const uint64_t sizes[] = {1, 2, 3, 4, 5, 7, 16, 17, 100, 1000, 4095, 4097, 65537};
	static uint8_t seen[65537];
	uint64_t diff_seed = 0, diff_epoch = 0;

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint64_t n = sizes[s];

		for (uint64_t seed = 0; seed < 3; seed++) {
			for (uint64_t epoch = 0; epoch < 3; epoch++) {
				memset(seen, 0, n);
				for (uint64_t i = 0; i < n; i++) {
					uint64_t p = zinf_token_perm(seed, epoch, n, i);

					T_CHECK(p < n, "perm(%llu) = %llu out of [0, %llu)",
						(unsigned long long)i, (unsigned long long)p,
						(unsigned long long)n);
					T_CHECK(!seen[p],
						"n=%llu seed=%llu epoch=%llu: %llu hit twice",
						(unsigned long long)n, (unsigned long long)seed,
						(unsigned long long)epoch, (unsigned long long)p);
					seen[p] = 1;
					T_CHECK(p == zinf_token_perm(seed, epoch, n, i),
						"not deterministic");
					if (n >= 100) {
						diff_seed +=
							p != zinf_token_perm(seed + 1, epoch, n, i);
						diff_epoch +=
							p != zinf_token_perm(seed, epoch + 1, n, i);
					}
				}
			}
		}
	}
	T_CHECK(diff_seed > 0 && diff_epoch > 0, "seed or epoch does not change the order");
	/* The identity would be a (useless) permutation: check it actually shuffles. */
	{
		uint64_t fixed = 0;

		for (uint64_t i = 0; i < 1000; i++)
			fixed += zinf_token_perm(1, 0, 1000, i) == i;
		T_CHECK(fixed < 20, "%llu of 1000 indices stay in place",
			(unsigned long long)fixed);
	}
	/* Large domains work without tables (n near 2^64). */
	T_CHECK(zinf_token_perm(7, 0, UINT64_MAX, 12345) < UINT64_MAX, "huge n");
	T_CHECK(zinf_token_perm(7, 0, (1ull << 40) + 3, 1ull << 39) < (1ull << 40) + 3, "big n");
	/* Fixed values: the order must never change between versions or machines. */
	{
		uint64_t got[6];

		for (int i = 0; i < 6; i++)
			got[i] = zinf_token_perm(42, 0, 1000, (uint64_t)i);
		fprintf(stderr, "perm(42, 0, 1000, 0..5) = %llu %llu %llu %llu %llu %llu\n",
			(unsigned long long)got[0], (unsigned long long)got[1],
			(unsigned long long)got[2], (unsigned long long)got[3],
			(unsigned long long)got[4], (unsigned long long)got[5]);
		T_CHECK(got[0] == GOLD0 && got[1] == GOLD1 && got[2] == GOLD2 && got[3] == GOLD3 &&
				got[4] == GOLD4 && got[5] == GOLD5,
			"the seeded order changed");
	}
}

static void check_shuffled_windows(void)
{
	struct zinf_token_windows w;
	static uint8_t seen[64];
	char err[256];

	/* N = 1000, T = 64: W = 16 windows per epoch (the last wraps); B = 3. */
	T_CHECK_RC(zinf_token_windows_init(&w, 1000, 3, 64, true, 9, err, sizeof(err)));
	T_CHECK(w.per_epoch == 16, "W = %llu", (unsigned long long)w.per_epoch);
	for (uint64_t epoch = 0; epoch < 3; epoch++) {
		memset(seen, 0, sizeof(seen));
		for (uint64_t k = 0; k < 16; k++) {
			uint64_t win = epoch * 16 + k, i = win / 3, r = win % 3;
			uint64_t s = zinf_token_windows_start(&w, i, r);

			T_CHECK(s % 64 == 0 && s < 1000, "start %llu not a window start",
				(unsigned long long)s);
			T_CHECK(!seen[s / 64], "epoch %llu visits window %llu twice",
				(unsigned long long)epoch, (unsigned long long)(s / 64));
			seen[s / 64] = 1;
			T_CHECK(s == 64 * zinf_token_perm(9, epoch, 16, k),
				"start follows zinf_token_perm");
		}
	}
}

static void check_batches(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	int32_t h[ZINF_TOKENS_HEADER_INTS] = {ZINF_TOKENS_MAGIC_U16, ZINF_TOKENS_VERSION_U16, 1000};
	int32_t in[4 * 64], tg[4 * 64];
	struct zinf_token_windows w;
	struct zinf_token_file *tf;
	char *dir = NULL, *path = NULL, err[256];
	FILE *f;

	T_CHECK(asprintf(&dir, "%s/zinf_win_XXXXXX", base) > 0 && mkdtemp(dir), "mkdtemp");
	T_CHECK(asprintf(&path, "%s/t.bin", dir) > 0, "asprintf");
	f = fopen(path, "wb");
	fwrite(h, 4, ZINF_TOKENS_HEADER_INTS, f);
	for (uint16_t k = 0; k < 1000; k++) /* token k == its index */
		fwrite(&k, 2, 1, f);
	fclose(f);
	T_CHECK_RC(zinf_token_file_create(&tf));
	T_CHECK_RC(zinf_token_file_open(tf, path, ZINF_TOKEN_FORMAT_LLMC));
	T_CHECK_RC(zinf_token_windows_init(&w, 1000, 4, 64, false, 0, err, sizeof(err)));
	/* Micro-batch 3: rows are windows 12..15; row 3 wraps after 40 tokens. */
	T_CHECK_RC(zinf_token_file_read_batch(tf, &w, 3, 1000, in, tg));
	for (int r = 0; r < 4; r++) {
		for (int t = 0; t < 64; t++) {
			int32_t want = (int32_t)(((3 * 4 + r) * 64 + t) % 1000);

			T_CHECK(in[r * 64 + t] == want, "input (%d,%d) = %d, want %d", r, t,
				in[r * 64 + t], want);
			T_CHECK(tg[r * 64 + t] == (want + 1) % 1000, "target (%d,%d)", r, t);
		}
	}
	/* Micro-batch 4, row 0: the second pass starts at 24. */
	T_CHECK_RC(zinf_token_file_read_batch(tf, &w, 4, 0, in, tg));
	T_CHECK(in[0] == 24 && tg[63] == 24 + 64, "second pass");
	/* Shuffled batches read the permuted windows. */
	T_CHECK_RC(zinf_token_windows_init(&w, 1000, 4, 64, true, 5, err, sizeof(err)));
	T_CHECK_RC(zinf_token_file_read_batch(tf, &w, 1, 0, in, tg));
	for (int r = 0; r < 4; r++)
		T_CHECK(in[r * 64] == (int32_t)zinf_token_windows_start(&w, 1, (uint64_t)r),
			"row %d", r);
	/* Windows set up for another file are refused. */
	T_CHECK_RC(zinf_token_windows_init(&w, 999, 4, 64, false, 0, err, sizeof(err)));
	T_CHECK(zinf_token_file_read_batch(tf, &w, 0, 0, in, tg) == -EINVAL, "mismatched windows");
	zinf_token_file_destroy(tf);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	free(dir);
	free(path);
}

int main(void)
{
	check_sequential();
	check_permutation();
	check_shuffled_windows();
	check_batches();
	return T_EXIT_PASS;
}
