/* Engine counters: zinf_engine_get_stats and the JSON form (include/zinf/engine.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "engine_internal.h"
#include "number_text.h"
#include "prefetch.h"

static void link_from(struct zinf_link_stats *dst, const struct zinf_store_link_stats *src)
{
	dst->bytes = src->bytes;
	dst->seconds = (double)src->ns * 1e-9;
	dst->count = src->count;
}

void zinf_engine_get_stats(struct zinf_engine *e, struct zinf_stats *out)
{
	struct zinf_store_stats st;

	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	zinf_store_get_stats(e->store, &st);
	out->device_now = st.device_now;
	out->device_peak = st.device_peak;
	out->device_limit = st.device_limit;
	out->pinned_now = st.pinned_now;
	out->pinned_peak = st.pinned_peak;
	out->pinned_limit = st.pinned_limit;
	/* with NVMe optimizer state: plus the gradient sub-groups being accumulated and the
	 * new copies being assembled (bounded by a few sub-groups and modules) */
	out->host_now = st.host_now + e->state_bytes +
			__atomic_load_n(&e->grad_host_bytes, __ATOMIC_RELAXED) +
			__atomic_load_n(&e->out_bytes, __ATOMIC_RELAXED);
	out->host_peak = st.host_peak + e->state_bytes +
			 __atomic_load_n(&e->grad_host_peak, __ATOMIC_RELAXED) +
			 __atomic_load_n(&e->out_peak, __ATOMIC_RELAXED);
	out->host_pinned = st.host_pinned;
	out->nvme_now = st.nvme_now + e->nvme_state_bytes;
	out->nvme_peak = st.nvme_peak + e->nvme_state_bytes;
	link_from(&out->nvme_to_pinned, &st.link[ZINF_LINK_NVME_TO_PINNED]);
	link_from(&out->pinned_to_device, &st.link[ZINF_LINK_PINNED_TO_DEVICE]);
	link_from(&out->device_to_pinned, &st.link[ZINF_LINK_DEVICE_TO_PINNED]);
	link_from(&out->pinned_to_nvme, &st.link[ZINF_LINK_PINNED_TO_NVME]);
	/* The optimizer's own NVMe traffic (state read and written by each step, and the
	 * gradients on NVMe). */
	pthread_mutex_lock(&e->stats_lock);
	out->nvme_to_pinned.bytes += e->nvme_opt_read.bytes;
	out->nvme_to_pinned.seconds += e->nvme_opt_read.seconds;
	out->nvme_to_pinned.count += e->nvme_opt_read.count;
	out->pinned_to_nvme.bytes += e->nvme_opt_write.bytes;
	out->pinned_to_nvme.seconds += e->nvme_opt_write.seconds;
	out->pinned_to_nvme.count += e->nvme_opt_write.count;
	pthread_mutex_unlock(&e->stats_lock);
	out->wait_seconds = (double)st.wait_ns * 1e-9;
	out->fetches = st.fetches;
	out->hits = st.hits;
	out->evictions = st.evictions;
	if (e->prefetch) {
		struct zinf_prefetch_stats ps;
		zinf_prefetch_get_stats(e->prefetch, &ps);
		out->prefetches = ps.issued;
		out->prefetch_hits = ps.hits;
		out->trace_divergences = ps.divergences;
		out->reuse_evictions = ps.reuse_evictions;
	}
	out->steps = e->steps;
	out->skipped_steps = e->skipped;
	if (e->opt.started)
		pthread_mutex_lock(&e->opt.lock);
	out->optimizer_seconds = e->optimizer_seconds;
	out->optimizer_wait_seconds = (double)e->opt.wait_ns * 1e-9;
	out->wait_seconds += out->optimizer_wait_seconds;
	if (e->opt.started)
		pthread_mutex_unlock(&e->opt.lock);
	/* a full gradient queue held the model up */
	if (e->gq.started)
		pthread_mutex_lock(&e->gq.lock);
	out->wait_seconds += (double)e->gq.wait_ns * 1e-9;
	if (e->gq.started)
		pthread_mutex_unlock(&e->gq.lock);
	for (uint32_t i = 0; i < e->n_params; i++)
		out->param_elems += e->params[i].elems;
}

/* A number JSON can hold: a finite one as %.6f, else null (a caller-filled struct). */
static const char *json_seconds(double v, char *buf, size_t len)
{
	if (isfinite(v)) {
		locale_t was = zinf_c_numbers_begin(); /* a '.', as JSON wants */
		snprintf(buf, len, "%.6f", v);
		zinf_c_numbers_end(was);
	} else
		snprintf(buf, len, "null");
	return buf;
}

static void json_link(FILE *f, const char *name, const struct zinf_link_stats *l, bool last)
{
	char s[48];

	fprintf(f, "\"%s\": {\"bytes\": %" PRIu64 ", \"seconds\": %s, \"count\": %" PRIu64 "}%s",
		name, l->bytes, json_seconds(l->seconds, s, sizeof(s)), l->count, last ? "" : ", ");
}

int zinf_stats_json(const struct zinf_stats *st, FILE *f)
{
	char w[48], o[48], ow[48];

	if (!st || !f)
		return -EINVAL;
	fprintf(f,
		"{\"device\": {\"now\": %" PRIu64 ", \"peak\": %" PRIu64 ", \"limit\": %" PRIu64
		"}, "
		"\"pinned\": {\"now\": %" PRIu64 ", \"peak\": %" PRIu64 ", \"limit\": %" PRIu64
		"}, "
		"\"host\": {\"now\": %" PRIu64 ", \"peak\": %" PRIu64 ", \"pinned\": %" PRIu64
		"}, \"nvme\": {\"now\": %" PRIu64 ", \"peak\": %" PRIu64 "}, \"links\": {",
		st->device_now, st->device_peak, st->device_limit, st->pinned_now, st->pinned_peak,
		st->pinned_limit, st->host_now, st->host_peak, st->host_pinned, st->nvme_now,
		st->nvme_peak);
	json_link(f, "nvme_to_pinned", &st->nvme_to_pinned, false);
	json_link(f, "pinned_to_device", &st->pinned_to_device, false);
	json_link(f, "device_to_pinned", &st->device_to_pinned, false);
	json_link(f, "pinned_to_nvme", &st->pinned_to_nvme, true);
	fprintf(f,
		"}, \"wait_seconds\": %s, \"fetches\": %" PRIu64 ", \"hits\": %" PRIu64
		", \"prefetches\": %" PRIu64 ", \"prefetch_hits\": %" PRIu64
		", \"trace_divergences\": %" PRIu64 ", \"evictions\": %" PRIu64
		", \"reuse_evictions\": %" PRIu64 ", \"steps\": %" PRIu64
		", \"skipped_steps\": %" PRIu64
		", \"optimizer_seconds\": %s, \"optimizer_wait_seconds\": %s"
		", \"param_elems\": %" PRIu64 "}",
		json_seconds(st->wait_seconds, w, sizeof(w)), st->fetches, st->hits, st->prefetches,
		st->prefetch_hits, st->trace_divergences, st->evictions, st->reuse_evictions,
		st->steps, st->skipped_steps, json_seconds(st->optimizer_seconds, o, sizeof(o)),
		json_seconds(st->optimizer_wait_seconds, ow, sizeof(ow)), st->param_elems);
	/* flushed: a buffered write that fails (a full disk) shows only then */
	return fflush(f) != 0 || ferror(f) ? -EIO : 0;
}
