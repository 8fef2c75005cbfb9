/* zinf train on bad input exits 2 with exactly one line on stderr naming what is wrong,
 * and writes nothing to --save's directory: missing or conflicting flags, bad flag
 * values, missing files, a checkpoint missing a tensor, --seq-len beyond
 * max_position_embeddings (or beyond what linear rope scaling stretches it to), tokens outside the vocabulary, a text file for a vocabulary
 * under 256, a config that does not load, --resume of no directory or of a checkpoint
 * without its training state, --save-total-limit 0, an NVMe path that is no directory
 * (one line naming the key that gave it, not the I/O layer's log besides), a zinf.trace path that cannot be written
 * (before the run, not after it), a launcher's world size above 1 or not a number, a
 * flag other than --set given twice (a switch may be), a --set typo (named as --set's, not the file's), a
 * device budget that holds a decoder layer but not with its gradients or is more than the
 * host's memory (the host device backend), a pinned budget more than the host's memory, parameters and optimizer state in host memory
 * far beyond the host's (its gradient accumulators too), NVMe state beyond the drive's
 * free space, and a --log-json
 * or zinf.trace path naming an input (--data, --config) or a file a save writes in the
 * --model directory (each left byte-identical) or a directory a save of the run makes in
 * the --save directory (or a file inside one; their neighbours and a path under a missing
 * top directory are judged at once and not refused wrongly), a FIFO as --config, --init, --data or
 * --log-json (refused at once, not waited on), --micro-batch-size against the config's
 * own value, an "auto" batch size no flag fills, --save-dtype, --save-shard-size or
 * --eval-batches without the flag they need. Good runs (text, an llm.c token file,
 * batch sizes from the flags) exit 0 and save. A value from a file with a newline in it
 * stays on the message's one line. */
#include <sys/wait.h>
#include <unistd.h>

#include "cli_util.h"
#include "safetensors.h"
#include "train_fixture.h"

static const char *zinf_bin;
static struct tf_dir d;

/* Run `zinf train ARGS --save SAVE`; return the exit status, check stderr's lines. */
static int run(const char *args, const char *expect, int lines)
{
	char cmd[4096], errpath[160], save[160], buf[2048] = "";
	int status, n = 0;
	FILE *f;

	snprintf(errpath, sizeof(errpath), "%s/stderr.txt", d.root);
	snprintf(save, sizeof(save), "%s/saved", d.root);
	snprintf(cmd, sizeof(cmd), "'%s' train %s --save '%s' -q >/dev/null 2>'%s'", zinf_bin, args,
		 save, errpath);
	status = system(cmd);
	T_CHECK(WIFEXITED(status), "%s: did not exit", args);
	f = fopen(errpath, "r");
	T_CHECK(f != NULL, "no stderr file");
	while (strlen(buf) < sizeof(buf) - 1 && /* a full buffer: fgets would read nothing */
	       fgets(buf + strlen(buf), (int)(sizeof(buf) - strlen(buf)), f))
		n++;
	fclose(f);
	if (WEXITSTATUS(status) != 0) {
		T_CHECK(n == lines, "%s: %d lines on stderr, expected %d:\n%s", args, n, lines,
			buf);
		T_CHECK(strstr(buf, expect) != NULL, "%s: stderr does not say '%s':\n%s", args,
			expect, buf);
		T_CHECK(access(save, F_OK) != 0, "%s: %s was written", args, save);
	}
	return WEXITSTATUS(status);
}

static void write_tokens(const char *path, uint16_t max_token)
{
	int32_t header[256] = {20240520, 1, 1000};
	uint16_t tok[1000];
	FILE *f = fopen(path, "wb");

	T_CHECK(f != NULL, "write %s", path);
	for (int i = 0; i < 1000; i++)
		tok[i] = (uint16_t)(i == 700 ? max_token : i % 200);
	fwrite(header, 4, 256, f);
	fwrite(tok, 2, 1000, f);
	fclose(f);
}

/* A checkpoint directory whose safetensors holds only the embedding. */
static void write_partial_checkpoint(const char *dir)
{
	struct zinf_st_writer *w;
	uint64_t shape[2] = {256, 32};
	static float zeros[256 * 32];
	char cmd[512];
	int idx;

	T_CHECK(mkdir(dir, 0755) == 0, "mkdir %s", dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s/config.json'", d.model, dir);
	T_CHECK(system(cmd) == 0, "%s", cmd);
	T_CHECK_RC(zinf_st_writer_create(&w, dir, NULL));
	idx = zinf_st_writer_add(w, "model.embed_tokens.weight", ZINF_ST_F32, 2, shape);
	T_CHECK(idx >= 0, "add");
	T_CHECK_RC(zinf_st_writer_write(w, idx, 0, 256 * 32, zeros, ZINF_ST_F32));
	T_CHECK_RC(zinf_st_writer_finish(w));
	zinf_st_writer_destroy(w);
}

/* A run of a model (config.json fields after model_type and vocab 256, written to path)
 * with extra flags is refused naming expect. */
static bool refused_model(const char *path, const char *fields, const char *extra,
			  const char *expect)
{
	char args[2048];
	FILE *f = fopen(path, "w");

	T_CHECK(f != NULL, "write %s", path);
	fprintf(f, "{\"model_type\": \"llama\", \"vocab_size\": 256, %s}\n", fields);
	fclose(f);
	snprintf(args, sizeof(args),
		 "--init '%s' --config '%s' --data-format text --seq-len 16 --data '%s' --steps 2 "
		 "%s",
		 path, d.ds, d.data, extra);
	return run(args, expect, 1) == 2;
}

int main(int argc, char **argv)
{
	char base[1024], a[2048], tokens[160], partial[160], small[160], save[160];
	FILE *f;

	T_CHECK(argc == 2, "usage: %s ZINF_BINARY", argv[0]);
	zinf_bin = argv[1];
	unsetenv("WORLD_SIZE"); /* (under a launcher of several ranks every run is refused) */
	unsetenv("OMPI_COMM_WORLD_SIZE");
	unsetenv("PMI_SIZE");
	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	snprintf(base, sizeof(base), "--init '%s' --config '%s' --data-format text --seq-len 16",
		 d.model, d.ds);
	snprintf(tokens, sizeof(tokens), "%s/tokens.bin", d.root);
	write_tokens(tokens, 300);
	snprintf(partial, sizeof(partial), "%s/partial", d.root);
	write_partial_checkpoint(partial);
	snprintf(small, sizeof(small), "%s/small.json", d.root);
	f = fopen(small, "w");
	fprintf(f,
		"{\"model_type\": \"llama\", \"vocab_size\": 200, \"hidden_size\": 32,"
		" \"intermediate_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4}\n");
	fclose(f);

	snprintf(a, sizeof(a), "%s --data '%s' --steps 2", base, d.data);
	/* under a launcher of several ranks: one process trains, not each alone */
	setenv("WORLD_SIZE", "2", 1);
	T_CHECK(run(a, "WORLD_SIZE=2: zinf train runs as one process", 1) == 2,
		"WORLD_SIZE=2 not refused");
	setenv("WORLD_SIZE", "two", 1);
	T_CHECK(run(a, "WORLD_SIZE: 'two' is not a whole number", 1) == 2,
		"WORLD_SIZE=two not refused");
	unsetenv("WORLD_SIZE");
	setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
	T_CHECK(run(a, "OMPI_COMM_WORLD_SIZE=4", 1) == 2, "OMPI_COMM_WORLD_SIZE=4 not refused");
	setenv("WORLD_SIZE", "1", 1); /* a stale export does not hide the launcher's 4 */
	T_CHECK(run(a,
		    "WORLD_SIZE=1 but OMPI_COMM_WORLD_SIZE=4: the launcher's world sizes disagree",
		    1) == 2,
		"OMPI_COMM_WORLD_SIZE=4 beside WORLD_SIZE=1 not refused");
	setenv("OMPI_COMM_WORLD_SIZE", "1", 1); /* mpirun -np 1 */
	T_CHECK(run(a, "", 0) == 0, "a good run under a launcher of one rank fails");
	unsetenv("WORLD_SIZE");
	unsetenv("OMPI_COMM_WORLD_SIZE");
	/* (a switch given again says the same: not refused as a value flag twice is) */
	snprintf(a, sizeof(a),
		 "%s --data '%s' --steps 2 --activation-checkpointing -q "
		 "--activation-checkpointing",
		 base, d.data);
	T_CHECK(run(a, "", 0) == 0, "a good run fails");
	snprintf(save, sizeof(save), "%s/saved/model.safetensors", d.root);
	T_CHECK(access(save, F_OK) == 0, "the good run saved nothing");
	snprintf(save, sizeof(save), "mv '%s/saved' '%s/good'", d.root, d.root);
	T_CHECK(system(save) == 0, "mv");

	/* an llm.c token file within the vocabulary trains */
	write_tokens(tokens, 199);
	snprintf(a, sizeof(a), "--init '%s' --config '%s' --seq-len 16 --data '%s' --steps 2",
		 d.model, d.ds, tokens);
	T_CHECK(run(a, "", 0) == 0, "a token-file run fails");
	snprintf(save, sizeof(save), "rm -rf '%s/saved'", d.root);
	T_CHECK(system(save) == 0, "rm");
	write_tokens(tokens, 300);

	snprintf(a, sizeof(a), "--init '%s' --data '%s' --seq-len 16 --steps 2", d.model, d.data);
	T_CHECK(run(a, "--config", 1) == 2, "missing --config");
	{ /* a flag that does nothing without its companion */
		static const char *const lone[][2] = {
			{"--save-dtype bf16", "--save-dtype: needs --save DIR"},
			{"--save-shard-size 1MB", "--save-shard-size: needs --save DIR"},
			{"--eval-batches 3", "--eval-batches: needs --eval-data FILE"},
			{"--eval-data README --eval-batches 0", "--eval-batches 0: expected 1 to"},
			/* numbers past 2^64 said to be too large, not "not a whole number" */
			{"--eval-data README --eval-batches 99999999999999999999",
			 "--eval-batches 99999999999999999999: expected 1 to 1000000000"},
			{"--seed 99999999999999999999", "--seed 99999999999999999999: too large"},
		};
		char out[2048];

		for (size_t i = 0; i < sizeof(lone) / sizeof(lone[0]); i++) {
			snprintf(a, sizeof(a),
				 "cd '%s' && '%s' train --init '%s' --config '%s' --data-format "
				 "text --seq-len 16 --data '%s' --steps 2 %s 2>&1 >/dev/null",
				 d.root, zinf_bin, d.model, d.ds, d.data, lone[i][0]);
			T_CHECK(t_run(a, out, sizeof(out)) == 2 && strstr(out, lone[i][1]) &&
					strchr(out, '\n') == out + strlen(out) - 1,
				"%s: want exit 2 and one line with '%s': %s", lone[i][0],
				lone[i][1], out);
		}
	}
	snprintf(a, sizeof(a), "%s --model '%s' --data '%s' --steps 2", base, partial, d.data);
	T_CHECK(run(a, "exactly one of --model", 1) == 2, "--init and --model");
	snprintf(a, sizeof(a), "%s --data '%s/nope.txt' --steps 2", base, d.root);
	T_CHECK(run(a, "nope.txt", 1) == 2, "missing data file");
	snprintf(a, sizeof(a), "%s --data '%s' --steps 18446744073709551615", base, d.data);
	T_CHECK(run(a, "--steps 18446744073709551615: at most 2^53", 1) == 2,
		"steps past the engine's step counts");
	snprintf(a, sizeof(a), "%s --data '%s' --steps two", base, d.data);
	T_CHECK(run(a, "--steps two", 1) == 2, "bad --steps");
	snprintf(a, sizeof(a), "%s --data '%s' --steps ' -1'", base, d.data);
	T_CHECK(run(a, "--steps  -1", 1) == 2, "--steps with a leading space (was 2^64 - 1)");
	snprintf(a, sizeof(a), "%s --data '%s'", base, d.data);
	T_CHECK(run(a, "--steps: required", 1) == 2, "no --steps");
	/* a flag given twice is refused, not the last one taken (--set may repeat) */
	snprintf(a, sizeof(a), "%s --data '%s' --steps 1 --data '%s'", base, d.data, tokens);
	T_CHECK(run(a, "--data: given twice (expected once)", 1) == 2, "--data twice");
	snprintf(a, sizeof(a), "%s --init '%s' --data '%s' --steps 1", base, d.model, d.data);
	T_CHECK(run(a, "--init: given twice", 1) == 2, "--init twice");
	snprintf(a, sizeof(a), "--init '%s' --config '%s' --data-format text --data '%s' --steps 2",
		 d.model, d.ds, d.data);
	T_CHECK(run(a, "--seq-len: required", 1) == 2, "no --seq-len");
	{ /* (run() gives its own --save) */
		char *said;
		size_t n;
		snprintf(a, sizeof(a),
			 "'%s' train %s --data '%s' --steps 2 --save '%s/no/such' -q 2>'%s/e.txt'",
			 zinf_bin, base, d.data, d.root, d.root);
		T_CHECK(WEXITSTATUS(system(a)) == 2, "--save under a missing directory");
		snprintf(a, sizeof(a), "%s/e.txt", d.root);
		tf_read_all(a, &said, &n);
		T_CHECK(strstr(said, "/no/such: --save: its parent ") &&
				strstr(said, "/no: does not exist") &&
				strchr(said, '\n') == said + n - 1,
			"--save under a missing directory: %s", said);
		free(said);
	}
	snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --shuffle random", base, d.data);
	T_CHECK(run(a, "--shuffle random", 1) == 2, "bad --shuffle");
	snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --save-dtype fp8", base, d.data);
	T_CHECK(run(a, "fp8", 1) == 2, "bad --save-dtype");
	snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --bogus", base, d.data);
	T_CHECK(run(a, "--bogus", 1) == 2, "unknown flag");
	snprintf(a, sizeof(a),
		 "--model '%s' --config '%s' --data-format text --seq-len 16 --data '%s' --steps 2",
		 partial, d.ds, d.data);
	T_CHECK(run(a, "model.layers.0", 1) == 2, "checkpoint missing a tensor");
	snprintf(a, sizeof(a),
		 "--init '%s' --config '%s' --data-format text --seq-len 65 --data '%s' --steps 2",
		 d.model, d.ds, d.data);
	T_CHECK(run(a, "max_position_embeddings 64", 1) == 2, "seq-len too long");
	snprintf(a, sizeof(a), "--init '%s' --config '%s' --seq-len 16 --data '%s' --steps 20",
		 d.model, d.ds, tokens);
	T_CHECK(run(a, "700", 1) == 2, "token out of the vocabulary");
	/* 2 steps read tokens 0..127 only: the whole file is checked before step 1 all the
	 * same (not when, in a long run, the batch holding it comes) */
	snprintf(a, sizeof(a), "--init '%s' --config '%s' --seq-len 16 --data '%s' --steps 2",
		 d.model, d.ds, tokens);
	T_CHECK(run(a, "token 300 at index 700 is >= vocab_size 256 (found by the scan", 1) == 2,
		"a token out of the vocabulary beyond the run's batches");
	{ /* the same in what an evaluation reads: refused before the load, and an earlier
	   * --log-json left as it was (it had been emptied when the run started) */
		char good[300], log[300], *text;
		size_t n;

		snprintf(good, sizeof(good), "%s/good_tokens.bin", d.root);
		write_tokens(good, 199);
		snprintf(log, sizeof(log), "%s/earlier.jsonl", d.root);
		f = fopen(log, "w");
		T_CHECK(f && fputs("earlier\n", f) >= 0 && fclose(f) == 0, "write %s", log);
		snprintf(a, sizeof(a),
			 "--init '%s' --config '%s' --seq-len 16 --data '%s' --steps 2 "
			 "--eval-data '%s' --eval-batches 40 --log-json '%s'",
			 d.model, d.ds, good, tokens, log);
		T_CHECK(run(a, "tokens.bin: token 300 at index 700 is >= vocab_size 256", 1) == 2,
			"an evaluation's token out of the vocabulary");
		tf_read_all(log, &text, &n);
		T_CHECK(strcmp(text, "earlier\n") == 0, "the earlier --log-json was changed: %s",
			text);
		free(text);
		unlink(log);
	}
	snprintf(a, sizeof(a),
		 "--init '%s' --config '%s' --data-format text --seq-len 16 --data '%s' --steps 2",
		 small, d.ds, d.data);
	T_CHECK(run(a, "at least 256", 1) == 2, "text data for a vocabulary of 200");
	snprintf(a, sizeof(a),
		 "--init '%s' --config '%s' --data-format text --seq-len 16 --data '%s' --steps 2",
		 d.model, d.data, d.data);
	T_CHECK(run(a, "text.txt", 1) == 2, "a config that is not JSON");
	snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --set zinf.chunk_size=12", base, d.data);
	T_CHECK(run(a, "chunk_size", 1) == 2, "a bad --set");
	snprintf(a, sizeof(a),
		 "--resume '%s/nope' --config '%s' --data-format text --seq-len 16 --data '%s' "
		 "--steps 2",
		 d.root, d.ds, d.data);
	T_CHECK(run(a, "--resume", 1) == 2, "--resume of no directory");
	snprintf(
		a, sizeof(a),
		"--resume '%s' --config '%s' --data-format text --seq-len 16 --data '%s' --steps 2",
		partial, d.ds, d.data);
	T_CHECK(run(a, "zinf_state.json", 1) == 2, "--resume of a checkpoint without its state");
	snprintf(a, sizeof(a), "%s --model '%s' --resume '%s' --data '%s' --steps 2", base, partial,
		 partial, d.data);
	T_CHECK(run(a, "exactly one of --model", 1) == 2, "--model and --resume");
	/* batch sizes as flags: only where the config leaves them "auto" or unset */
	snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --micro-batch-size 3", base, d.data);
	T_CHECK(run(a, "--micro-batch-size 3: the config sets train_micro_batch_size_per_gpu to 2",
		    1) == 2,
		"a --micro-batch-size the config contradicts");
	{ /* a flag the file's batch size contradicts is named, not a --set never given */
		char tb[200];
		snprintf(tb, sizeof(tb), "%s/tb.json", d.root);
		f = fopen(tb, "w");
		T_CHECK(f &&
				fputs("{\"train_batch_size\": 8, \"zinf\": {\"device\": \"host\"}}",
				      f) >= 0 &&
				fclose(f) == 0,
			"write %s", tb);
		snprintf(a, sizeof(a),
			 "--init '%s' --config '%s' --data-format text --seq-len 16 --data '%s' "
			 "--steps 2 --micro-batch-size 3",
			 d.model, tb, d.data);
		T_CHECK(run(a,
			    "zinf train: --micro-batch-size: train_batch_size: 8 is not divisible",
			    1) == 2,
			"a --micro-batch-size the file's train_batch_size does not divide");
	}
	snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --gradient-accumulation-steps 0", base,
		 d.data);
	T_CHECK(run(a, "--gradient-accumulation-steps 0: expected 1 to", 1) == 2,
		"--gradient-accumulation-steps 0");
	snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --set train_micro_batch_size_per_gpu=auto",
		 base, d.data);
	T_CHECK(run(a, "train_micro_batch_size_per_gpu: \"auto\" could not be resolved", 1) == 2,
		"an \"auto\" micro batch without --micro-batch-size");
	{ /* filled in: 1 x 16 tokens x 3 micro-batches a step; the config's own value agrees */
		char log[200], *text;
		size_t n;
		snprintf(log, sizeof(log), "%s/batch.jsonl", d.root);
		snprintf(a, sizeof(a),
			 "%s --data '%s' --steps 2 --set train_micro_batch_size_per_gpu=auto --set "
			 "gradient_accumulation_steps=auto --micro-batch-size 1 "
			 "--gradient-accumulation-steps 3 --log-json '%s'",
			 base, d.data, log);
		T_CHECK(run(a, "", 0) == 0, "batch sizes from the flags");
		tf_read_all(log, &text, &n);
		T_CHECK(strstr(text, "\"tokens\": 48,") != NULL, "a step of 48 tokens: %s", text);
		free(text);
		snprintf(a, sizeof(a), "rm -rf '%s/saved'", d.root);
		T_CHECK(system(a) == 0, "rm");
		snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --micro-batch-size 2", base,
			 d.data);
		T_CHECK(run(a, "", 0) == 0, "a --micro-batch-size the config agrees with");
		snprintf(a, sizeof(a), "rm -rf '%s/saved'", d.root);
		T_CHECK(system(a) == 0, "rm");
	}
	snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --save-every 1 --save-total-limit 0", base,
		 d.data);
	T_CHECK(run(a, "--save-total-limit 0", 1) == 2, "--save-total-limit 0");
	snprintf(a, sizeof(a),
		 "%s --data '%s' --steps 2 --set zero_optimization.offload_optimizer.device=nvme "
		 "--set zero_optimization.offload_optimizer.nvme_path='%s/nope'",
		 base, d.data, d.root);
	T_CHECK(run(a, "zero_optimization.offload_optimizer.nvme_path", 1) == 2 &&
			run(a, "nope: not a usable directory", 1) == 2,
		"an NVMe path that is not there, named by its key");
	snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --set zinf.trace='%s/nope/t.json'", base,
		 d.data, d.root);
	T_CHECK(run(a, "zinf.trace: cannot write", 1) == 2, "a trace path that cannot be written");
	snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --set zinf.trace='%s'", base, d.data,
		 d.root);
	T_CHECK(run(a, "Is a directory", 1) == 2, "a trace path that is a directory");
	snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --set zinf.chunk_sizee=1MiB", base,
		 d.data);
	T_CHECK(run(a, "--set: zinf.chunk_sizee: unknown key; did you mean chunk_size?", 1) == 2,
		"a --set typo");
	snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --set zinf.device_memory_limit=999999TiB",
		 base, d.data);
	T_CHECK(run(a, "device_memory_limit 976.56 PiB is more than the", 1) == 2,
		"a host device budget beyond the host's memory");
	snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --set zinf.pinned_memory_limit=20TB", base,
		 d.data);
	T_CHECK(run(a, "pinned_memory_limit 18.19 TiB is more than the", 1) == 2,
		"a pinned budget beyond the host's memory");
	/* linear rope scaling stretches 8 positions to 12, still short of --seq-len 16 */
	T_CHECK(refused_model(
			small,
			"\"hidden_size\": 32, \"intermediate_size\": 64,"
			" \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
			" \"max_position_embeddings\": 8,"
			" \"rope_scaling\": {\"type\": \"linear\", \"factor\": 1.5}",
			"",
			"--seq-len 16: expected 1 to the 12 positions the model's linear rope scaling reaches"),
		"seq-len beyond the scaled context");
	/* 500G parameters with parameters and optimizer state in host memory: 8 TB */
	T_CHECK(refused_model(small,
			      "\"hidden_size\": 8192, \"intermediate_size\": 32768,"
			      " \"num_hidden_layers\": 500, \"num_attention_heads\": 64",
			      "", "host memory: parameters homed there need"),
		"a model whose host-memory state is more than the host has");
	/* the same with the optimizer state on NVMe but its gradient accumulators in host
	 * memory: 67G parameters in layers of 34 MB, 268 GB of accumulators */
	snprintf(a, sizeof(a),
		 "--set bf16.enabled=true --set zero_optimization.offload_param.device=nvme "
		 "--set zinf.device_memory_limit=128MiB --set zinf.pinned_memory_limit=128MiB "
		 "--set zero_optimization.offload_param.nvme_path='%s' "
		 "--set zero_optimization.offload_optimizer.device=nvme "
		 "--set zero_optimization.offload_optimizer.nvme_path='%s' "
		 "--set zinf.offload_gradients=cpu",
		 d.root, d.root);
	T_CHECK(refused_model(small,
			      "\"hidden_size\": 1024, \"intermediate_size\": 4096,"
			      " \"num_hidden_layers\": 4000, \"num_attention_heads\": 8",
			      a, "and the fp32 gradient accumulators 250.03 GiB"),
		"gradient accumulators in host memory beyond the host's");
	/* parameters homed in host memory (1 TB of bf16), the optimizer state and its
	 * accumulators on NVMe: the parameters alone are too many */
	snprintf(a, sizeof(a),
		 "--set bf16.enabled=true --set zero_optimization.offload_optimizer.device=nvme "
		 "--set zero_optimization.offload_optimizer.nvme_path='%s' "
		 "--set zinf.offload_gradients=nvme",
		 d.root);
	T_CHECK(refused_model(small,
			      "\"hidden_size\": 8192, \"intermediate_size\": 32768,"
			      " \"num_hidden_layers\": 500, \"num_attention_heads\": 64",
			      a, "host memory: parameters homed there need 1000.02 GiB"),
		"host-homed parameters beyond the host's, with the optimizer on NVMe");
	/* 537G parameters, their optimizer state and gradients on NVMe: 9.0 TiB (sub-groups
	 * of 20000 elements: each 80000-byte part padded to 81920), refused before any file
	 * is made (the drive is not filled first) */
	snprintf(a, sizeof(a),
		 "--set bf16.enabled=true --set zero_optimization.offload_param.device=nvme "
		 "--set zero_optimization.offload_param.nvme_path='%s' "
		 "--set zero_optimization.offload_optimizer.device=nvme "
		 "--set zero_optimization.offload_optimizer.nvme_path='%s'",
		 d.root, d.root);
	T_CHECK(refused_model(small,
			      "\"hidden_size\": 8192, \"intermediate_size\": 32768,"
			      " \"num_hidden_layers\": 500, \"num_attention_heads\": 64",
			      a, "the run needs at least 8.98 TiB there"),
		"NVMe state beyond the drive's free space");
	snprintf(a, sizeof(a), "du -s '%s' | awk '{ exit $1 > 10000 }'", d.root);
	T_CHECK(system(a) == 0, "a refused run left files on the drive");
	/* a value with a newline in it (a JSON escape) stays on the message's one line */
	{
		char newline[200];
		snprintf(newline, sizeof(newline), "%s/newline.json", d.root);
		f = fopen(newline, "w");
		T_CHECK(f &&
				fprintf(f,
					"{\"model_type\": \"llama\\nqwen2\", \"vocab_size\": 256}\n") >
					0 &&
				fclose(f) == 0,
			"write %s", newline);
		snprintf(a, sizeof(a),
			 "--init '%s' --config '%s' --data-format text --seq-len 16 --data '%s' "
			 "--steps 2",
			 newline, d.ds, d.data);
		T_CHECK(run(a, "model_type: \"llama?qwen2\"", 1) == 2,
			"a newline in config.json's model_type");
	}
	/* a decoder layer of 3.75 MiB (fp32), and as much again for its gradients */
	T_CHECK(refused_model(small,
			      "\"hidden_size\": 256, \"intermediate_size\": 1024,"
			      " \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
			      " \"num_key_value_heads\": 2",
			      "--set zinf.device_memory_limit=6MiB",
			      "device budget: module model.layers.0 needs"),
		"a budget that holds a layer but not with its gradients");

	/* a FIFO given as an input or the log: refused at once, not waited on */
	{
		char fifo[200];
		snprintf(fifo, sizeof(fifo), "%s/fifo", d.root);
		T_CHECK(mkfifo(fifo, 0644) == 0, "mkfifo %s", fifo);
		snprintf(a, sizeof(a),
			 "--init '%s' --config '%s' --data-format text --seq-len 16 "
			 "--data '%s' --steps 2",
			 d.model, fifo, d.data);
		T_CHECK(run(a, "fifo: not a regular file", 1) == 2, "a FIFO as --config");
		snprintf(a, sizeof(a),
			 "--init '%s' --config '%s' --data-format text --seq-len 16 "
			 "--data '%s' --steps 2",
			 fifo, d.ds, d.data);
		T_CHECK(run(a, "fifo: not a regular file", 1) == 2, "a FIFO as --init");
		snprintf(a, sizeof(a), "%s --data '%s' --steps 2", base, fifo);
		T_CHECK(run(a, "fifo: not a regular file", 1) == 2, "a FIFO as --data");
		snprintf(a, sizeof(a), "%s --data '%s' --steps 2 --log-json '%s'", base, d.data,
			 fifo);
		T_CHECK(run(a, "fifo: --log-json: cannot create", 1) == 2, "a FIFO as --log-json");
		unlink(fifo);
	}

	/* outputs naming inputs: refused, the input unchanged */
	{
		char *before, *after, cfg[200], mcfg[200], mst[200];
		size_t n_before, n_after;
		snprintf(mcfg, sizeof(mcfg), "%s/good/config.json", d.root);
		snprintf(mst, sizeof(mst), "%s/good/model.safetensors", d.root);
		snprintf(cfg, sizeof(cfg), "%s", d.ds);
		struct {
			const char *flag, *path, *expect;
		} outs[] = {
			{"--log-json ", d.data, "--log-json is the --data file"},
			{"--set zinf.trace=", cfg, "zinf.trace is the --config file"},
			{"--log-json ", mcfg,
			 "--log-json names a file a save writes in the --model"},
			{"--log-json ", mst,
			 "--log-json names a file a save writes in the --model"},
		};
		for (size_t i = 0; i < sizeof(outs) / sizeof(outs[0]); i++) {
			tf_read_all(outs[i].path, &before, &n_before);
			snprintf(a, sizeof(a),
				 "--model '%s/good' --config '%s' --data-format text --seq-len 16 "
				 "--data '%s' --steps 2 %s'%s'",
				 d.root, d.ds, d.data, outs[i].flag, outs[i].path);
			T_CHECK(run(a, outs[i].expect, 1) == 2, "an output naming %s",
				outs[i].path);
			tf_read_all(outs[i].path, &after, &n_after);
			T_CHECK(n_before == n_after && memcmp(before, after, n_after) == 0,
				"%s was changed by a refused run", outs[i].path);
			free(before);
			free(after);
		}
		/* --model M with --save S: S's saved files count too (dirname was taken once
		 * per directory flag, so S's was compared with its parent) */
		snprintf(a, sizeof(a),
			 "cp -r '%s/good' '%s/good2' && '%s' train --model '%s/good' --config '%s' "
			 "--data-format text --seq-len 16 --data '%s' --steps 2 --save '%s/good2' "
			 "--log-json '%s/good2/config.json' -q 2>/dev/null",
			 d.root, d.root, zinf_bin, d.root, d.ds, d.data, d.root, d.root);
		tf_read_all(mcfg, &before, &n_before); /* good/config.json, copied to good2 */
		T_CHECK(WEXITSTATUS(system(a)) == 2,
			"--log-json naming --save's config.json beside --model");
		/* and through a link elsewhere */
		snprintf(
			a, sizeof(a),
			"ln -s '%s/good2/config.json' '%s/log-link' && '%s' train --model '%s/good' "
			"--config '%s' --data-format text --seq-len 16 --data '%s' --steps 2 "
			"--save '%s/good2' --log-json '%s/log-link' -q 2>/dev/null",
			d.root, d.root, zinf_bin, d.root, d.ds, d.data, d.root, d.root);
		T_CHECK(WEXITSTATUS(system(a)) == 2, "--log-json a link to --save's config.json");
		/* and through a link to a file not made yet (realpath cannot resolve it) */
		snprintf(a, sizeof(a),
			 "mkdir '%s/good3' && ln -s good3/config.json '%s/new-link' && '%s' train "
			 "--model '%s/good' --config '%s' --data-format text --seq-len 16 --data "
			 "'%s' --steps 2 --save '%s/good3' --log-json '%s/new-link' -q 2>/dev/null",
			 d.root, d.root, zinf_bin, d.root, d.ds, d.data, d.root, d.root);
		T_CHECK(WEXITSTATUS(system(a)) == 2,
			"--log-json a dangling link to --save's config.json");
		snprintf(a, sizeof(a), "%s/good3/config.json", d.root);
		T_CHECK(access(a, F_OK) != 0, "%s was made by a refused run", a);
		/* a --save directory not made yet (run's): its files count the same (it is made
		 * after the outputs are checked); and the two outputs may not be one file */
		const char *fresh[][2] = {
			{"--log-json '%s/saved/config.json'", "--log-json names a file a save"},
			{"--set zinf.trace='%s/saved/../saved/./model.safetensors'",
			 "zinf.trace names a file a save"},
			{"--log-json '%s/good3/l.json' --set zinf.trace='%s/good3/./l.json'",
			 "zinf.trace is the --log-json file"},
			{"--log-json '%s/good3/l.json.tmp' --set zinf.trace='%s/good3/l.json'",
			 "zinf.trace's temporary file is the --log-json file"},
			/* a directory a save of the run makes in --save: a snapshot's (its mkdir
			 * would fail), one inside it (renamed, removed), the final save's */
			{"--save-every 1 --log-json '%s/saved/checkpoint-1'",
			 "--log-json names checkpoint-1, a directory a save of this run makes in "
			 "the --save directory"},
			{"--save-every 1 --log-json '%s/saved/checkpoint-1.partial/l.json'",
			 "--log-json is inside checkpoint-1.partial, a directory a save of this run"},
			{"--set zinf.trace='%s/saved/final.partial'",
			 "zinf.trace names final.partial, a directory a save of this run makes"},
		};
		for (size_t i = 0; i < sizeof(fresh) / sizeof(fresh[0]); i++) {
			char out[400];
			snprintf(out, sizeof(out), fresh[i][0], d.root, d.root);
			snprintf(a, sizeof(a),
				 "--model '%s/good' --config '%s' --data-format text --seq-len 16 "
				 "--data '%s' --steps 2 %s",
				 d.root, d.ds, d.data, out);
			T_CHECK(run(a, fresh[i][1], 1) == 2, "%s", out); /* (saved/ not made) */
		}
		/* their neighbours are not refused: a name no save of the run makes, a
		 * directory an earlier run left; and a path under "/" is judged at once (the
		 * walk up its directories once never ended at "//") */
		snprintf(
			a, sizeof(a),
			"mkdir -p '%s/ok/checkpoint-7' && '%s' train --model '%s/good' --config '%s' "
			"--data-format text --seq-len 16 --data '%s' --steps 2 --save-every 1 --save "
			"'%s/ok' --log-json '%s/ok/checkpoint-1.jsonl' --set "
			"zinf.trace='%s/ok/checkpoint-7/t.json' -q 2>/dev/null",
			d.root, zinf_bin, d.root, d.ds, d.data, d.root, d.root, d.root);
		T_CHECK(WEXITSTATUS(system(a)) == 0,
			"a log beside the snapshots, a trace in an earlier run's one: refused");
		snprintf(
			a, sizeof(a),
			"timeout 120 '%s' train --model '%s/good' --config '%s' --data-format text "
			"--seq-len 16 --data '%s' --steps 2 --save '%s/ok' --log-json "
			"/nonexistent-zinf-dir/l.json -q 2>/dev/null",
			zinf_bin, d.root, d.ds, d.data, d.root);
		T_CHECK(WEXITSTATUS(system(a)) == 2, "a log under a missing top directory");
		snprintf(mcfg, sizeof(mcfg), "%s/good2/config.json", d.root);
		tf_read_all(mcfg, &after, &n_after);
		T_CHECK(n_before == n_after && memcmp(before, after, n_after) == 0,
			"%s was changed by a refused run", mcfg);
		free(before);
		free(after);
	}
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
