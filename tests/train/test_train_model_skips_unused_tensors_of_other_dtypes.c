/* A checkpoint holding a tensor of a dtype zinf does not read (an I64 model.position_ids,
 * as some carry) that the model does not use loads and trains, as transformers drops it;
 * a tensor the model uses in such a dtype (model.norm.weight as I32) is refused before
 * step 1 on one line naming the file, the tensor and the dtype. */
#include <cjson/cJSON.h>
#include <stdint.h>

#include "train_fixture.h"
#include "zinf/error.h"

/* dir/model.safetensors: src's, its header edited by edit (adding extra bytes of data). */
static void write_edited(const char *src, const char *dir, void (*edit)(cJSON *, uint64_t),
			 size_t extra)
{
	char *file, *text, path[256];
	size_t n, hlen, pad;
	uint64_t len, old_len, end = 0;
	cJSON *h, *t;
	FILE *f;

	tf_read_all(src, &file, &n);
	memcpy(&old_len, file, 8);
	h = cJSON_ParseWithLength(file + 8, old_len);
	T_CHECK(h, "parse the header of %s", src);
	cJSON_ArrayForEach(t, h)
	{
		cJSON *o = cJSON_GetObjectItem(t, "data_offsets");
		if (o && (uint64_t)cJSON_GetArrayItem(o, 1)->valuedouble > end)
			end = (uint64_t)cJSON_GetArrayItem(o, 1)->valuedouble;
	}
	edit(h, end);
	text = cJSON_PrintUnformatted(h);
	hlen = strlen(text);
	pad = (8 - hlen % 8) % 8;
	len = hlen + pad;
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/model.safetensors", dir);
	f = fopen(path, "wb");
	T_CHECK(f && fwrite(&len, 8, 1, f) == 1 && fwrite(text, 1, hlen, f) == hlen, "write %s",
		path);
	for (size_t i = 0; i < pad; i++)
		fputc(' ', f);
	T_CHECK(fwrite(file + 8 + old_len, 1, n - 8 - old_len, f) == n - 8 - old_len, "write %s",
		path);
	for (size_t i = 0; i < extra; i++)
		fputc(i % 8 ? 0 : (int)(i / 8), f);
	T_CHECK(fclose(f) == 0, "close %s", path);
	free(text);
	free(file);
	cJSON_Delete(h);
}

static void add_position_ids(cJSON *h, uint64_t end)
{
	cJSON *t = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *offs = cJSON_CreateArray();

	cJSON_AddStringToObject(t, "dtype", "I64");
	cJSON_AddItemToArray(shape, cJSON_CreateNumber(1));
	cJSON_AddItemToArray(shape, cJSON_CreateNumber(4));
	cJSON_AddItemToObject(t, "shape", shape);
	cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)end));
	cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(end + 32)));
	cJSON_AddItemToObject(t, "data_offsets", offs);
	cJSON_AddItemToObject(h, "model.position_ids", t);
}

static void norm_as_i32(cJSON *h, uint64_t end)
{
	cJSON *t = cJSON_GetObjectItem(h, "model.norm.weight");

	(void)end;
	T_CHECK(t, "no model.norm.weight");
	cJSON_ReplaceItemInObject(t, "dtype", cJSON_CreateString("I32"));
}

int main(void)
{
	struct tf_dir d;
	struct zinf_train_opts o;
	struct zinf_train_result res;
	struct tf_losses l;
	char base[160], src[200], extra[160], bad[160], cfg[200], err[1024];
	char *text;
	size_t n;

	tf_setup(&d, NULL);
	tf_write_ds(&d, "cpu", "cpu", false);
	snprintf(base, sizeof(base), "%s/base", d.root);
	tf_opts(&d, &o, 1, &l);
	o.save_dir = base;
	o.save_dtype = ZINF_DTYPE_F32;
	tf_run(&o, &res);
	snprintf(src, sizeof(src), "%s/model.safetensors", base);
	snprintf(cfg, sizeof(cfg), "%s/config.json", base);
	tf_read_all(cfg, &text, &n);

	snprintf(extra, sizeof(extra), "%s/extra", d.root);
	write_edited(src, extra, add_position_ids, 32);
	snprintf(cfg, sizeof(cfg), "%s/config.json", extra);
	tf_write_all(cfg, text, n);
	tf_opts(&d, &o, 2, &l);
	o.init_config = NULL;
	o.model_dir = extra;
	tf_run(&o, &res);
	T_CHECK(l.n == 2, "%d steps from a checkpoint with an unused I64 tensor", l.n);

	snprintf(bad, sizeof(bad), "%s/bad", d.root);
	write_edited(src, bad, norm_as_i32, 0);
	snprintf(cfg, sizeof(cfg), "%s/config.json", bad);
	tf_write_all(cfg, text, n);
	tf_opts(&d, &o, 2, &l);
	o.init_config = NULL;
	o.model_dir = bad;
	T_CHECK(zinf_train_run(&o, &res, err, sizeof(err)) == ZINF_EFORMAT && res.bad_input,
		"a used I32 tensor not refused: %s", err);
	T_CHECK(strstr(err, "bad/model.safetensors: tensor model.norm.weight: dtype \"I32\" is "
			    "not supported") &&
			!strchr(err, '\n') && l.n == 0,
		"not one line naming the file, tensor and dtype: %s", err);
	free(text);
	tf_cleanup(&d);
	return T_EXIT_PASS;
}
