/*
 * gen_config.h - generation_config.json of a HuggingFace model directory:
 * the stop tokens (eos_token_id, an id or a list) and the sampling defaults
 * (do_sample, temperature, top_p, top_k) a request falls back to when it
 * gives none, as transformers' generate and the serving engines apply them.
 */
#ifndef AREAL_MODEL_GEN_CONFIG_H
#define AREAL_MODEL_GEN_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "areal/error.h"

#define AREAL_GEN_MAX_EOS 16

typedef struct areal_gen_config {
    bool present; /* the file exists */
    int32_t eos[AREAL_GEN_MAX_EOS];
    int n_eos;
    bool do_sample;           /* false: greedy (transformers' default) */
    float temperature;        /* 1 when absent */
    float top_p;              /* 1 when absent */
    int top_k;                /* 0 (all) when absent */
    float repetition_penalty; /* 1 when absent; not applied by the sampler */
} areal_gen_config;

/*
 * Reads DIR/generation_config.json into *g. An absent file gives
 * present = false and the defaults above with AREAL_OK. Returns 0, AREAL_EIO
 * or AREAL_EINVAL (malformed JSON or a field of the wrong type, named).
 */
int areal_gen_config_load(const char *dir, areal_gen_config *g, areal_error *err);

#endif
