/*
 * zinf train --save-state: optimizer.safetensors, streamed. Every parameter's fp32 master
 * and Adam moments go out in pieces of at most train_state_piece_elems elements, so the
 * memory a save holds does not grow with the model (two sets of three piece buffers,
 * 96 MiB at most, where whole tensors would take 12 bytes a parameter of the largest
 * one: 12.6 GB for a 70B model's embedding). A writer thread writes one piece while the
 * next is read from the parameters' tier (NVMe or host memory), the two alternating
 * between the two buffer sets. The model, saved with the state, has its writer take the
 * masters from the same pieces, so the state is read once (12 bytes a parameter, not 4
 * more for a pass of its own).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_names.h"
#include "safetensors.h"
#include "train_internal.h"

uint64_t train_state_piece_elems = 4ull << 20; /* 16 MiB of each part */

/* One piece of tensor index (its three parts: 3 * index + k in the writer). */
struct piece {
	int index;
	uint64_t first, n;
	float *part[3]; /* (piece elems) fp32: master, exp_avg, exp_avg_sq */
	bool full;	/* read, not yet written */
};

struct state_pipe {
	struct zinf_st_writer *w;
	struct zinf_st_writer *model; /* the model's: masters, rounded to its dtype */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct piece slot[2]; /* pieces alternate between them, in order */
	bool done;	      /* the reader handed over its last piece */
	bool quit;	      /* the reader failed: stop */
	int rc;		      /* the writer's first error */
	char msg[1024];
};

static void *pipe_writer(void *arg)
{
	struct state_pipe *sp = arg;

	for (unsigned k = 0;; k++) {
		struct piece *s = &sp->slot[k % 2];
		int rc = 0;

		pthread_mutex_lock(&sp->lock);
		while (!s->full && !sp->done && !sp->quit)
			pthread_cond_wait(&sp->cv, &sp->lock);
		if (!s->full || sp->quit) {
			pthread_mutex_unlock(&sp->lock);
			return NULL;
		}
		pthread_mutex_unlock(&sp->lock);
		struct zinf_st_writer *failed = sp->w;

		for (int j = 0; j < 3 && !rc; j++)
			rc = zinf_st_writer_write(sp->w, 3 * s->index + j, s->first, s->n,
						  s->part[j], ZINF_ST_F32);
		if (!rc) {
			failed = sp->model;
			rc = zinf_st_writer_write(sp->model, s->index, s->first, s->n, s->part[0],
						  ZINF_ST_F32);
		}
		pthread_mutex_lock(&sp->lock);
		if (rc) {
			sp->rc = rc;
			snprintf(sp->msg, sizeof(sp->msg), "%s", zinf_st_writer_last_error(failed));
		}
		s->full = false;
		pthread_cond_broadcast(&sp->cv);
		pthread_mutex_unlock(&sp->lock);
		if (rc)
			return NULL;
	}
}

/* Wait until slot s is free; the writer's error if it failed meanwhile. */
static int slot_wait(struct state_pipe *sp, struct piece *s)
{
	int rc;

	pthread_mutex_lock(&sp->lock);
	while (s->full && !sp->rc)
		pthread_cond_wait(&sp->cv, &sp->lock);
	rc = sp->rc;
	pthread_mutex_unlock(&sp->lock);
	return rc;
}

static void slot_hand_over(struct state_pipe *sp, struct piece *s)
{
	pthread_mutex_lock(&sp->lock);
	s->full = true;
	pthread_cond_broadcast(&sp->cv);
	pthread_mutex_unlock(&sp->lock);
}

/* Read every tensor's state piece by piece into the slots, in order. */
static int pipe_read(struct state_pipe *sp, struct train_model *tm, struct zinf_engine *e,
		     const char *dir, char *err, size_t errlen)
{
	int n = zinf_llama_names_count(&tm->hf), rc = 0;
	struct zinf_llama_tensor_name tn;
	unsigned k = 0;

	for (int i = 0; i < n && !rc; i++) {
		uint32_t p;

		rc = train_model_tensor(tm, i, dir, &tn, &p, err, errlen);
		for (uint64_t first = 0; !rc && first < tn.n_elems;
		     first += train_state_piece_elems, k++) {
			struct piece *s = &sp->slot[k % 2];
			rc = slot_wait(sp, s);
			if (rc) {
				snprintf(err, errlen, "%s", sp->msg);
				break;
			}
			/* after the wait: a stop during it reads no further piece */
			rc = train_save_stop_asked(tm, dir, tn.name, err, errlen);
			if (rc)
				break;
			s->index = i;
			s->first = first;
			s->n = tn.n_elems - first < train_state_piece_elems
				       ? tn.n_elems - first
				       : train_state_piece_elems;
			rc = zinf_param_state_save(e, p, first, s->n, s->part[0], s->part[1],
						   s->part[2]);
			if (rc) {
				snprintf(err, errlen, "%s: tensor %s: %s", dir, tn.name,
					 zinf_last_error(e));
				break;
			}
			slot_hand_over(sp, s);
		}
	}
	return rc;
}

/* Declare the three parts of every tensor, in the model's order. */
static int declare(struct zinf_st_writer *w, struct train_model *tm, const char *dir, char *err,
		   size_t errlen)
{
	int n = zinf_llama_names_count(&tm->hf), rc;
	struct zinf_llama_tensor_name tn;
	char name[256];

	for (int i = 0; i < n; i++) {
		zinf_llama_names_get(&tm->hf, i, &tn);
		for (int k = 0; k < 3; k++) {
			snprintf(name, sizeof(name), "%s.%s", tn.name, train_state_part_name(k));
			rc = zinf_st_writer_add(w, name, ZINF_ST_F32, tn.ndim, tn.shape);
			if (rc < 0) {
				snprintf(err, errlen, "%s: tensor %s: %s", dir, name,
					 zinf_st_writer_last_error(w));
				return rc;
			}
		}
	}
	return 0;
}

uint64_t train_state_piece_of(const struct train_model *tm)
{
	return tm->largest_tensor_elems < train_state_piece_elems ? tm->largest_tensor_elems
								  : train_state_piece_elems;
}

int train_state_write_optimizer(struct train_model *tm, struct zinf_engine *e, const char *dir,
				uint64_t max_shard_bytes, struct train_model_writer *model,
				struct train_file_sums *sums, char *err, size_t errlen)
{
	uint64_t piece = train_state_piece_of(tm);
	struct state_pipe sp = {.model = model->w,
				.lock = PTHREAD_MUTEX_INITIALIZER,
				.cv = PTHREAD_COND_INITIALIZER};
	struct zinf_st_writer_opts wo;
	pthread_t thread;
	int rc;

	zinf_st_writer_opts_init(&wo);
	wo.prefix = "optimizer";
	if (max_shard_bytes)
		wo.max_shard_bytes = max_shard_bytes;
	for (int s = 0; s < 2; s++)
		for (int k = 0; k < 3; k++)
			sp.slot[s].part[k] = malloc((piece ? piece : 1) * sizeof(float));
	for (int s = 0; s < 2; s++)
		for (int k = 0; k < 3; k++)
			if (!sp.slot[s].part[k]) {
				snprintf(err, errlen,
					 "%s: out of memory for the optimizer state's pieces", dir);
				rc = -ENOMEM;
				goto out;
			}
	rc = zinf_st_writer_create(&sp.w, dir, &wo);
	if (rc) {
		snprintf(err, errlen, "%s: cannot start writing the optimizer state (%d)", dir, rc);
		goto out;
	}
	rc = declare(sp.w, tm, dir, err, errlen);
	if (rc)
		goto out;
	rc = -pthread_create(&thread, NULL, pipe_writer, &sp);
	if (rc) {
		snprintf(err, errlen, "%s: cannot start the optimizer state's writer: %s", dir,
			 strerror(-rc));
		goto out;
	}
	rc = pipe_read(&sp, tm, e, dir, err, errlen);
	pthread_mutex_lock(&sp.lock);
	sp.done = true;
	sp.quit = rc != 0;
	pthread_cond_broadcast(&sp.cv);
	pthread_mutex_unlock(&sp.lock);
	pthread_join(thread, NULL);
	if (!rc && sp.rc) {
		rc = sp.rc;
		snprintf(err, errlen, "%s", sp.msg);
	}
	/* the model into place first, as a save without the state leaves it */
	if (!rc)
		rc = train_model_writer_end(tm, model, dir, sums, err, errlen);
	if (!rc) {
		rc = zinf_st_writer_finish(sp.w);
		if (rc)
			snprintf(err, errlen, "%s", zinf_st_writer_last_error(sp.w));
	}
	if (!rc && sums && train_file_sums_add(sums, sp.w)) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory for the file list", dir);
	}
out:
	train_model_writer_drop(model); /* when not ended */
	zinf_st_writer_destroy(sp.w);
	for (int s = 0; s < 2; s++)
		for (int k = 0; k < 3; k++)
			free(sp.slot[s].part[k]);
	return rc;
}
