/*
 * Timeline: complete events ("X") on named tracks, written as Chrome trace-event JSON
 * (opens in Perfetto or chrome://tracing). One track per kind of work: NVMe reads and
 * writes, host-to-device and device-to-host copies, compute per module, waits for data,
 * the optimizer. Enabled by zinf.trace (a file path); recording takes a short lock and
 * appends to a preallocated array that doubles when full, so it costs little but is
 * meant for diagnosis, not to stay on in production.
 */
#ifndef ZINF_SRC_TIMELINE_H
#define ZINF_SRC_TIMELINE_H

#include <stdint.h>

enum zinf_track {
	ZINF_TRACK_NVME_READ = 0,
	ZINF_TRACK_NVME_WRITE,
	ZINF_TRACK_H2D,
	ZINF_TRACK_D2H,
	ZINF_TRACK_COMPUTE,
	ZINF_TRACK_WAIT,
	ZINF_TRACK_OPTIMIZER,
	ZINF_TRACKS,
};

struct zinf_timeline;

int zinf_timeline_create(struct zinf_timeline **out);
void zinf_timeline_destroy(struct zinf_timeline *t);
/* Record [t0_ns, t1_ns) (CLOCK_MONOTONIC) on track, named name (copied, truncated to 47
 * bytes). NULL t is a no-op, so callers need no check. Thread-safe. */
void zinf_timeline_add(struct zinf_timeline *t, enum zinf_track track, const char *name,
		       uint64_t t0_ns, uint64_t t1_ns);
/* Write every event as {"traceEvents": [...]} to path (through path.tmp and a rename).
 * Returns 0 or a negative errno. */
int zinf_timeline_write(struct zinf_timeline *t, const char *path);
/* Whether zinf_timeline_write could write path: its directory writable and path not a
 * directory. Checked before a run, so that a bad path is not found at its end. Returns
 * 0 or a negative errno with what is wrong in why ("the directory DIR: ..."). */
int zinf_timeline_check_path(const char *path, char *why, size_t why_len);
uint64_t zinf_timeline_count(struct zinf_timeline *t);
uint64_t zinf_timeline_now_ns(void);

#endif /* ZINF_SRC_TIMELINE_H */
