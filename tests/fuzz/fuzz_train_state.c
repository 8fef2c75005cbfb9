/* libFuzzer harness: the training state a checkpoint holds for --resume
 * (train_state_read: zinf_state.json, its seal, the files it lists). A checkpoint
 * directory (fuzz_util.h) holds a fixed config.json, model.safetensors and
 * optimizer.safetensors (their sizes and CRC32C are printed at start, for seeds).
 * Input: the manifest's body up to (not including) its seal member; the harness appends
 * the seal as zinf writes it, so the parser is reached. An input starting with 'R' is
 * written raw (the rest), to fuzz the seal check itself. */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "train_state_internal.h"
#include "zinf/crc32c.h"
#include "zinf/log.h"

static void put(const char *name, const void *p, size_t n)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", fuzz_dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n))
		abort();
	close(fd);
}

static size_t st_file(uint8_t *out, const char *hdr, const void *data, size_t dn)
{
	uint64_t n = strlen(hdr);
	memcpy(out, &n, 8);
	memcpy(out + 8, hdr, n);
	memcpy(out + 8 + n, data, dn);
	return 8 + n + dn;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char cfg[] = "{\"model_type\": \"llama\"}\n";
	float f[6] = {1, 2, 3, 4, 5, 6};
	uint8_t buf[512];
	size_t n;

	zinf_log_set_level(ZINF_LOG_ERROR);
	fuzz_scratch();
	put("config.json", cfg, sizeof(cfg) - 1);
	n = st_file(buf, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", f, 8);
	put("model.safetensors", buf, n);
	n = st_file(buf,
		    "{\"w.master\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		    "\"w.exp_avg\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
		    "\"w.exp_avg_sq\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]}}",
		    f, 24);
	put("optimizer.safetensors", buf, n);
	if (getenv("FUZZ_TS_PRINT")) {
		const char *names[] = {"config.json", "model.safetensors", "optimizer.safetensors"};
		for (int i = 0; i < 3; i++) {
			char path[256], err[256];
			uint64_t size;
			uint32_t crc;
			snprintf(path, sizeof(path), "%s/%s", fuzz_dir, names[i]);
			train_state_file_crc(path, &size, &crc, err, sizeof(err));
			printf("%s %llu %08x\n", names[i], (unsigned long long)size, crc);
		}
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct train_state st, copy;
	char err[1024];
	size_t n = size;
	char *text;

	if (size && data[0] == 'R') {
		text = malloc(size);
		memcpy(text, data + 1, size - 1);
		n = size - 1;
	} else {
		static const char tail[] = MANIFEST_CRC_TAG "00000000\"\n}\n";
		text = malloc(size + sizeof(tail));
		memcpy(text, data, size);
		memcpy(text + size, tail, sizeof(tail));
		char hex[9];
		snprintf(hex, sizeof(hex), "%08x", train_state_manifest_crc(text, size));
		memcpy(text + size + strlen(MANIFEST_CRC_TAG), hex, 8);
		n = size + sizeof(tail) - 1;
	}
	put(TRAIN_STATE_FILE, text, n);
	err[0] = 0;
	int rc = train_state_read(fuzz_dir, &st, err, sizeof(err));
	if (getenv("FUZZ_TS_PRINT"))
		fprintf(stderr, "train_state_read: %d %s\n", rc, err);
	if (rc == 0 && !fuzz_one_json_object(text, n)) {
		fprintf(stderr, "a manifest that is not one JSON object read\n");
		abort();
	}
	free(text);
	if (rc == 0) {
		/* a state agrees with itself and with a copy of itself */
		if (train_state_check(&st, &st, fuzz_dir, err, sizeof(err)) != 0) {
			fprintf(stderr, "state differs from itself: %s\n", err);
			abort();
		}
		copy = st;
		copy.numerics = cJSON_Duplicate(st.numerics, 1);
		if (train_state_check(&st, &copy, fuzz_dir, err, sizeof(err)) != 0) {
			fprintf(stderr, "state differs from its copy: %s\n", err);
			abort();
		}
		cJSON_Delete(copy.numerics);
		train_state_free(&st);
	} else if (!err[0]) {
		fprintf(stderr, "error %d without a message\n", rc);
		abort();
	}
	return 0;
}
