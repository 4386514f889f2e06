/*
 * sgl_client.h - the trainer's client of one rollout server, over SGLang's
 * HTTP API (what AReaL's RemoteSGLangEngine sends, areal.md §5.3):
 *
 *   POST /generate {input_ids, sampling_params{max_new_tokens, temperature,
 *        top_p, top_k, stop_token_ids, ignore_eos, skip_special_tokens},
 *        return_logprob: true, stream: false}
 *     -> meta_info.output_token_logprobs [[logprob, id, ...], ...] and
 *        meta_info.finish_reason.type (stop | length | abort)
 *   POST /pause_generation, /continue_generation
 *   POST /update_weights_from_disk {model_path, abort_all_requests: true}
 *   POST /init_weights_update_group, /update_weights_from_distributed
 *   GET  /health
 *
 * One client is one libcurl easy handle (keep-alive to its server) and is
 * used by one thread at a time. Every call has a deadline. Errors say which
 * server and endpoint failed and whether the server could not be reached
 * (AREAL_EIO: try another server) or answered badly (AREAL_EINVAL).
 */
#ifndef AREAL_TRAIN_SGL_CLIENT_H
#define AREAL_TRAIN_SGL_CLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "areal/error.h"

typedef struct areal_sgl_client areal_sgl_client;

/* A client of http://addr (addr "host:port"). Returns 0 or AREAL_ENOMEM. */
int areal_sgl_client_create(const char *addr, double timeout_s, areal_sgl_client **out,
                            areal_error *err);
void areal_sgl_client_free(areal_sgl_client *c);
const char *areal_sgl_client_addr(const areal_sgl_client *c);

typedef struct areal_sgl_sampling {
    int max_new_tokens;
    double temperature; /* 0: greedy */
    double top_p;
    long top_k; /* <= 0: all */
    const int32_t *stop_token_ids;
    int n_stop;
    bool ignore_eos;
    bool has_seed;
    uint64_t seed; /* sampling_seed */
} areal_sgl_sampling;

typedef enum areal_sgl_finish {
    AREAL_SGL_STOP = 1,
    AREAL_SGL_LENGTH = 2,
    AREAL_SGL_ABORT = 3,
} areal_sgl_finish;

typedef struct areal_sgl_output {
    int32_t *ids; /* generated tokens (owned) */
    float *logprobs;
    int n;
    areal_sgl_finish finish;
    char weight_version[32]; /* meta_info.weight_version ("" when absent) */
} areal_sgl_output;

/*
 * One /generate of n_in input ids. On success *out holds the new tokens
 * (free with areal_sgl_output_free). Returns 0, AREAL_EIO (no answer: the
 * server is down, timed out, or answered 5xx), AREAL_EINVAL (an answer that
 * is not SGLang's shape, or 4xx) or AREAL_ENOMEM.
 */
int areal_sgl_generate(areal_sgl_client *c, const int32_t *in, int n_in,
                       const areal_sgl_sampling *s, areal_sgl_output *out, areal_error *err);
void areal_sgl_output_free(areal_sgl_output *o);

/*
 * POSTs body (a JSON object, borrowed; NULL sends {}) to path and returns
 * the parsed answer in *answer (nullable; caller decrefs). Codes as above.
 */
int areal_sgl_post(areal_sgl_client *c, const char *path, json_t *body, json_t **answer,
                   areal_error *err);

/* GETs path and returns the parsed answer in *answer (caller decrefs). Codes as above. */
int areal_sgl_get(areal_sgl_client *c, const char *path, json_t **answer, areal_error *err);

/* GET /health: 0 when the server answers 200. */
int areal_sgl_health(areal_sgl_client *c, areal_error *err);

#endif
