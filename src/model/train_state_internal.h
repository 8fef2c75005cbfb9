/*
 * The training state's internals shared by train_state.c (writing the manifest),
 * train_state_files.c (the files of a checkpoint and their checksums) and
 * train_state_read.c (reading, checking and loading a state for --resume).
 */
#ifndef ZINF_MODEL_TRAIN_STATE_INTERNAL_H
#define ZINF_MODEL_TRAIN_STATE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "train_internal.h"

#define STATE_FORMAT "zinf-train-state"
#define STATE_VERSION 1
#define STATE_MAX_FILES 4096
#define STATE_MAX_JSON_BYTES (64u << 20)

/* The manifest seals itself: its last member, written as MANIFEST_CRC_TAG + 8 hex digits
 * + "\"\n}\n", is the CRC32C of the file's own bytes before that member followed by
 * "\n}" (the object as printed without it). The bytes, not a reprint, so that no JSON
 * library's number formatting takes part, and any change at all shows. */
#define MANIFEST_CRC_TAG ",\n\t\"manifest_crc32c\":\t\""
uint32_t train_state_manifest_crc(const char *body, size_t len);

/* Size and CRC32C of a whole regular file (a FIFO or a device is refused, never waited
 * on). Returns 0 or a negative code with "PATH: why" in err. */
int train_state_file_crc(const char *path, uint64_t *size, uint32_t *crc, char *err, size_t errlen);
/* PREFIX.safetensors.index.json when dir has it, else PREFIX.safetensors. */
void train_state_entry_name(const char *dir, const char *prefix, char *buf, size_t len);
/* Every file of dir's checkpoint a resume reads: config.json, the model's and the
 * optimizer state's safetensors. A new array of names, or NULL with *code and err set. */
struct cJSON *train_state_checkpoint_files(const char *dir, int *code, char *err, size_t errlen);
/* "host" or "cuda": the kind of device the engine computes on. */
const char *train_state_device_name(enum zinf_engine_device kind);

#endif /* ZINF_MODEL_TRAIN_STATE_INTERNAL_H */
