/*
 * zinf train: the steps of a run train.c has set up. Each step runs
 * gradient_accumulation_steps micro-batches (train_pass.c), zinf_step, a log-json line and
 * the caller's callback; evaluation before the first step and every eval_every steps;
 * --save-every snapshots under a .partial name renamed once complete; the final save
 * written aside and moved in (train_rotate.c).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "train_run.h"
#include "zinf/error.h"
#include "zinf/log.h"

/* save_dir/checkpoint-<step>, or with partial its name while it is being written. */
static void snapshot_path(const struct zinf_train_opts *o, uint64_t step, bool partial, char *buf,
			  size_t len)
{
	snprintf(buf, len, "%s/checkpoint-%llu%s", o->save_dir, (unsigned long long)step,
		 partial ? ".partial" : "");
}

double train_now_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the loop ------------------------------------------------------------------------------ */

/* Micro-batches [first, first + n) of d through the model, with backward into the
 * engine's gradients or without; their mean loss in *loss. */
static int run_batches(struct train_run *r, struct train_data *d, uint64_t first, uint64_t n,
		       bool backward, double *loss, char *err, size_t errlen)
{
	double sum = 0;
	float l;
	int rc;

	for (uint64_t i = first; i < first + n; i++) {
		rc = zinf_token_file_read_batch(d->tf, &d->win, i, r->vocab, r->inputs, r->targets);
		if (rc) {
			snprintf(err, errlen, "%s", zinf_token_file_last_error(d->tf));
			return rc;
		}
		rc = train_pass_run(&r->pass, r->inputs, r->targets, backward, &l, err, errlen);
		if (rc)
			return rc;
		sum += l;
	}
	*loss = sum / (double)n;
	return 0;
}

/* Mean loss over the eval batches, no update. */
static int evaluate(struct train_run *r, double *loss, char *err, size_t errlen)
{
	r->last_valid = false; /* its fetches are no step's */
	return run_batches(r, &r->eval, 0, r->o->eval_batches, false, loss, err, errlen);
}

static void fill_deltas(struct zinf_train_step *s, const struct zinf_stats *a,
			const struct zinf_stats *b)
{
	s->wait_seconds = b->wait_seconds - a->wait_seconds;
	s->nvme_read_bytes = b->nvme_to_pinned.bytes - a->nvme_to_pinned.bytes;
	s->nvme_write_bytes = b->pinned_to_nvme.bytes - a->pinned_to_nvme.bytes;
	s->h2d_bytes = b->pinned_to_device.bytes - a->pinned_to_device.bytes;
	s->d2h_bytes = b->device_to_pinned.bytes - a->device_to_pinned.bytes;
	s->peak_device_bytes = b->device_peak;
	s->peak_pinned_bytes = b->pinned_peak;
	s->device_limit_bytes = b->device_limit;
	s->pinned_limit_bytes = b->pinned_limit;
}

static int train_step(struct train_run *r, uint64_t step, struct zinf_train_step *s, char *err,
		      size_t errlen)
{
	struct zinf_stats a, b;
	struct zinf_step_result res;
	double t0 = train_now_seconds(), t1, loss;
	int rc;

	if (r->last_valid)
		a = r->last;
	else
		zinf_engine_get_stats(r->e, &a);
	rc = run_batches(r, &r->data, (step - 1) * r->gas, r->gas, true, &loss, err, errlen);
	if (rc)
		return rc;
	t1 = train_now_seconds();
	rc = zinf_step(r->e, &res);
	/* The updates run in the background (zinf.overlap_optimizer) and count in the next
	 * step's figures; before an evaluation and at the end they are waited for here, so
	 * that they count in this step's. */
	if (!rc && (step == r->o->steps ||
		    (r->o->eval_data_path && r->o->eval_every && step % r->o->eval_every == 0)))
		rc = zinf_engine_sync(r->e);
	if (rc) {
		snprintf(err, errlen, "step %llu: %s", (unsigned long long)step,
			 zinf_last_error(r->e));
		return rc;
	}
	zinf_engine_get_stats(r->e, &b);
	r->last = b;
	r->last_valid = true;
	memset(s, 0, sizeof(*s));
	s->step = step;
	s->resumed_from = r->first_step - 1;
	s->steps = r->o->steps;
	s->steps_per_print = r->print_every;
	s->loss = loss;
	s->lr = res.lr;
	s->grad_norm = res.grad_norm;
	s->skipped = res.skipped;
	s->tokens = r->gas * r->B * r->o->seq_len;
	s->fwd_bwd_seconds = t1 - t0;
	s->optimizer_seconds = train_now_seconds() - t1;
	s->step_seconds = train_now_seconds() - t0;
	s->tokens_per_second = s->step_seconds > 0 ? (double)s->tokens / s->step_seconds : 0;
	fill_deltas(s, &a, &b);
	return 0;
}

static int report(struct train_run *r, struct zinf_train_step *s, char *err, size_t errlen)
{
	int rc = r->log && s->step ? train_log_write(r->log, s) : 0;

	if (rc) {
		snprintf(err, errlen, "%s: --log-json: write failed: %s", r->o->log_json_path,
			 strerror(-rc));
		return rc;
	}
	if (r->o->on_step)
		r->o->on_step(s, r->o->on_step_user);
	return 0;
}

/* --save-dtype; else with stage3_gather_16bit_weights_on_model_save the 16-bit dtype
 * the run trains in (DeepSpeed's consolidated 16-bit save); else the source's. */
static enum zinf_dtype save_dtype_of(const struct train_run *r)
{
	if (r->o->save_dtype != ZINF_DTYPE_NONE)
		return r->o->save_dtype;
	if (r->save_16bit && r->tm.param_dtype != ZINF_DTYPE_F32)
		return r->tm.param_dtype;
	return r->tm.source_dtype;
}

/* The model after step into dir, and with save_state its training state, beside the
 * tokenizer and generation files of the --model or --resume directory. A state from an
 * earlier save into dir is removed first: only a complete save has one. */
static int save_to(struct train_run *r, const char *dir, uint64_t step, char *err, size_t errlen)
{
	struct train_file_sums sums = {0};
	char path[4200];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, TRAIN_STATE_FILE);
	if (unlink(path) && errno != ENOENT) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot remove the earlier state: %s", path,
			 strerror(errno));
		return rc;
	}
	/* first: the state file, written last, marks a complete save */
	rc = train_companions_write(&r->companions, dir, err, errlen);
	if (rc)
		return rc;
	if (r->o->save_state) {
		struct train_model_writer mw;

		r->now.step = step;
		rc = train_model_writer_begin(&r->tm, dir, save_dtype_of(r),
					      r->o->save_max_shard_bytes, &mw, err, errlen);
		if (!rc)
			rc = train_state_save(&r->tm, r->e, dir, &r->now, &mw,
					      r->o->save_max_shard_bytes, &sums, err, errlen);
	} else {
		rc = train_model_save(&r->tm, r->e, dir, save_dtype_of(r),
				      r->o->save_max_shard_bytes, &sums, err, errlen);
	}
	train_file_sums_free(&sums);
	return rc;
}

void train_drop_partial(const char *save_dir, const char *name)
{
	char why[400];

	if (train_snapshot_remove_partial(save_dir, name, why, sizeof(why)))
		zinf_logf(ZINF_LOG_WARN, "%s/%s: the failed save's files are left: %s", save_dir,
			  name, why);
}

/* The save directory, made and locked before step 1, made again if something removed
 * it meanwhile. */
static int save_dir_again(const char *save_dir, char *err, size_t errlen)
{
	int rc;

	if (mkdir(save_dir, 0755) == 0 || errno == EEXIST)
		return 0;
	rc = -errno;
	snprintf(err, errlen, "%s: --save: cannot create: %s", save_dir, strerror(-rc));
	return rc;
}

/* --save-every: the model after this step into save_dir/checkpoint-<step>, written under
 * a .partial name and renamed once complete; opts.stop stops it before its next piece
 * (-EINTR), the .partial removed. */
static int save_snapshot(struct train_run *r, uint64_t step, char *err, size_t errlen)
{
	const struct zinf_train_opts *o = r->o;
	char partial[4200], done[4200];
	int rc = zinf_engine_sync(r->e); /* the step's updates, done in the background */
	double t0 = train_now_seconds();

	if (rc) {
		snprintf(err, errlen, "step %llu: %s", (unsigned long long)step,
			 zinf_last_error(r->e));
		return rc;
	}
	r->last_valid = false; /* the save's reads are no step's */
	rc = save_dir_again(o->save_dir, err, errlen);
	if (rc)
		return rc;
	snapshot_path(o, step, true, partial, sizeof(partial));
	snapshot_path(o, step, false, done, sizeof(done));
	r->tm.save_stop = o->stop; /* a stop drops the snapshot: earlier ones stay */
	rc = save_to(r, partial, step, err, errlen);
	r->tm.save_stop = NULL;
	if (rc)
		train_drop_partial(o->save_dir, strrchr(partial, '/') + 1);
	if (!rc && rename(partial, done)) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot rename to %s: %s", partial, done,
			 strerror(errno));
	}
	if (!rc)
		zinf_logf(ZINF_LOG_INFO, "%s: saved, step %llu, in %.1f s", done,
			  (unsigned long long)step, train_now_seconds() - t0);
	if (!rc && o->save_total_limit)
		rc = train_snapshots_rotate(o, &r->src_dir, step, err, errlen);
	return rc;
}

/* opts.stop set: -EINTR, naming the step not run. */
static int stop_asked(const struct zinf_train_opts *o, uint64_t step, char *err, size_t errlen)
{
	if (!train_stop_up(o->stop))
		return 0;
	snprintf(err, errlen, "stopped before step %llu of %llu (asked to stop)",
		 (unsigned long long)step, (unsigned long long)o->steps);
	return -EINTR;
}

/* Whether rc is a pass's stop at a fetch because opts.stop was set (train_pass.c). */
static bool stopped_in_pass(const struct zinf_train_opts *o, int rc)
{
	return rc == -EINTR && train_stop_up(o->stop);
}

/* A failure in step (or its snapshot) because opts.stop made the engine cut an update
 * short (zinf_engine_set_stop): this step's, or the previous step's still running in the
 * background, which the step then waited for. The run stops (-EINTR) before the step's
 * report. */
static int stopped_in_update(const struct train_run *r, int rc, uint64_t step, char *err,
			     size_t errlen)
{
	if (!rc || !train_stop_up(r->o->stop) || !zinf_engine_stopped(r->e))
		return rc;
	snprintf(
		err, errlen,
		"stopped before step %llu of %llu, in an optimizer update (asked to stop; the update is cut short, nothing saved)",
		(unsigned long long)step, (unsigned long long)r->o->steps);
	return -EINTR;
}

/* Step step's figures into the run's result. */
static void account(const struct train_run *r, struct zinf_train_result *res,
		    const struct zinf_train_step *s, uint64_t step)
{
	if (step == r->first_step)
		res->first_loss = s->loss;
	res->last_loss = s->loss;
	res->steps = step - r->first_step + 1;
	res->tokens += s->tokens;
}

/* opts.stop cut short what follows step (where; note added to the line): the step is
 * done, so it is reported, then the run stops (-EINTR) naming it. */
static int stop_after_step(struct train_run *r, struct zinf_train_result *res,
			   struct zinf_train_step *s, uint64_t step, const char *where,
			   const char *note, char *err, size_t errlen)
{
	int rc;

	account(r, res, s, step);
	rc = report(r, s, err, errlen);
	if (rc)
		return rc;
	snprintf(err, errlen, "stopped after step %llu of %llu, in %s (asked to stop%s)",
		 (unsigned long long)step, (unsigned long long)r->o->steps, where, note);
	return -EINTR;
}

int train_run_loop(struct train_run *r, struct zinf_train_result *res, char *err, size_t errlen)
{
	const struct zinf_train_opts *o = r->o;
	struct zinf_train_step s;
	double t0 = train_now_seconds();
	int rc;

	rc = stop_asked(o, r->first_step, err, errlen);
	if (rc)
		return rc;
	if (o->eval_data_path) {
		memset(&s, 0, sizeof(s));
		s.steps = o->steps;
		s.resumed_from = r->first_step - 1;
		s.loss = NAN;
		s.has_eval = true;
		rc = evaluate(r, &s.eval_loss, err, errlen);
		if (stopped_in_pass(o, rc))
			snprintf(
				err, errlen,
				"stopped before step %llu of %llu, in the evaluation before it (asked to stop)",
				(unsigned long long)r->first_step, (unsigned long long)o->steps);
		if (rc)
			return rc;
		res->first_eval_loss = res->last_eval_loss = s.eval_loss;
		report(r, &s, err, errlen); /* (a printer's line; --log-json has it on step 1) */
	}
	for (uint64_t step = r->first_step; step <= o->steps; step++) {
		rc = stop_asked(o, step, err, errlen);
		if (!rc)
			rc = zinf_token_scan_check(r->scan, err, errlen);
		if (!rc) {
			rc = train_step(r, step, &s, err, errlen);
			/* in its forward or backward: nothing updated */
			if (stopped_in_pass(o, rc))
				snprintf(
					err, errlen,
					"stopped before step %llu of %llu, in its forward and backward (asked to stop; the step is dropped)",
					(unsigned long long)step, (unsigned long long)o->steps);
			else
				rc = stopped_in_update(r, rc, step, err, errlen);
		}
		if (rc)
			return rc;
		s.elapsed_seconds = train_now_seconds() - t0;
		if (o->eval_data_path && step == r->first_step) { /* the evaluation before it */
			s.has_eval_before = true;
			s.eval_loss_before = res->first_eval_loss;
		}
		if (o->eval_data_path &&
		    ((o->eval_every && step % o->eval_every == 0) || step == o->steps)) {
			s.has_eval = true;
			rc = evaluate(r, &s.eval_loss, err, errlen);
			if (stopped_in_pass(o, rc)) {
				s.has_eval = false;
				return stop_after_step(r, res, &s, step, "the evaluation after it",
						       "", err, errlen);
			}
			if (rc)
				return rc;
			res->last_eval_loss = s.eval_loss;
		}
		if (o->save_every && step % o->save_every == 0 && step < o->steps) {
			rc = save_snapshot(r, step, err, errlen);
			if (rc == -EINTR && train_stop_up(o->stop))
				return stop_after_step(
					r, res, &s, step, "its snapshot",
					"; the snapshot is dropped, earlier ones stay", err,
					errlen);
			rc = stopped_in_update(r, rc, step, err, errlen);
			if (rc)
				return rc;
			s.saved = true;
		}
		account(r, res, &s, step);
		rc = report(r, &s, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

/* The final save, timed, with what it read from NVMe (the stats after the steps'). */
int train_save_final(struct train_run *r, struct zinf_train_result *res, char *err, size_t errlen)
{
	double t0 = train_now_seconds();
	struct zinf_stats st;
	int rc = save_dir_again(r->o->save_dir, err, errlen);
	char staging[4200];

	/* written aside and moved in once complete: an earlier save there stays whole until
	 * then */
	snprintf(staging, sizeof(staging), "%s/%s", r->o->save_dir, TRAIN_FINAL_PARTIAL);
	if (!rc) {
		/* not committed: what it wrote is of no use (removed once the engine has let
		 * its files go: a save short of descriptors could not open it now) */
		rc = save_to(r, staging, r->o->steps, err, errlen);
		r->drop_final = rc != 0;
	}
	if (!rc) { /* a failure from the commit on leaves a save the next run moves in */
		rc = train_save_publish(r->o->save_dir, err, errlen);
		r->drop_final = rc && access(staging, F_OK) == 0; /* not committed (disk full) */
	}
	if (!rc)
		zinf_logf(ZINF_LOG_INFO, "%s: saved, step %llu, in %.1f s", r->o->save_dir,
			  (unsigned long long)r->o->steps, train_now_seconds() - t0);
	zinf_engine_get_stats(r->e, &st);
	res->save_nvme_read_bytes = st.nvme_to_pinned.bytes - res->nvme_read_bytes;
	res->save_seconds = train_now_seconds() - t0;
	return rc;
}
