/*
 * What hf_config.c (loading) and hf_config_save.c (saving) share.
 */
#ifndef ZINF_MODEL_HF_CONFIG_INTERNAL_H
#define ZINF_MODEL_HF_CONFIG_INTERNAL_H

#include "hf_config.h"

/* Record "NAME: message" as cfg's last error (and log it at debug); returns code. */
__attribute__((format(printf, 4, 5))) int hf_fail(struct zinf_hf_config *cfg, int code,
						  const char *name, const char *fmt, ...);
/* transformers' class name of the model type ("LlamaForCausalLM"). */
const char *hf_architecture(enum zinf_hf_model_type type);

#endif /* ZINF_MODEL_HF_CONFIG_INTERNAL_H */
