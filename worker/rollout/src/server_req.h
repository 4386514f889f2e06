/*
 * server_req.h - the rollout server's request parser: the JSON bodies of
 * POST /generate (SGLang's GenerateReqInput), /v1/completions and
 * /v1/chat/completions (OpenAI's) into one engine request, with every check
 * the engine would otherwise make later, so a bad request is a 400 whose
 * message names the field and the fix. Pure (no server state), so the fuzz
 * target drives it directly.
 *
 * Strict like SGLang's pydantic models in one way and lenient in another:
 * unknown fields are refused (a typo must not silently change sampling), but
 * fields AReaL's and OpenAI's clients send at their neutral values
 * (frequency_penalty 0, presence_penalty 0, repetition_penalty 1, image_data
 * null, lora_path null, ...) are accepted; a non-neutral value of a feature
 * this server lacks is refused by name.
 */
#ifndef AREAL_ROLLOUT_SERVER_REQ_H
#define AREAL_ROLLOUT_SERVER_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "areal/model/chat.h"
#include "areal/model/tokenizer.h"
#include "areal/rollout/engine.h"

typedef enum rr_kind { RR_GENERATE, RR_COMPLETIONS, RR_CHAT } rr_kind;

#define RR_MAX_STOP 16
#define RR_MAX_N    64

typedef struct rr_limits {
    int vocab;                  /* ids must be in [0, vocab) */
    int64_t context;            /* prompt + max_new_tokens at most */
    const areal_tokenizer *tok; /* for text prompts; NULL: ids only */
    const char *model_name;     /* what /v1/models lists (a "model" field must match or be any) */
    const areal_chat_template *chat; /* the model directory's template; NULL: ChatML */
} rr_limits;

typedef struct rollout_req {
    rr_kind kind;
    int32_t *ids; /* the prompt (owned) */
    int n_ids;
    areal_engine_params p; /* p.stop_token_ids points into stop_ids */
    int32_t *stop_ids;
    char *stop[RR_MAX_STOP]; /* stop strings (owned) */
    int n_stop;
    char rid[AREAL_ENGINE_RID_MAX]; /* "" when the client gave none */
    bool stream;
    bool skip_special_tokens;
    bool return_text_in_logprobs;
    int openai_logprobs; /* /v1/completions "logprobs" (top count), -1 when absent */
    bool openai_chat_logprobs;
} rollout_req;

/*
 * Parses body[0..len) as a request of `kind`. Returns AREAL_OK with *out
 * filled (free with rollout_req_free), or AREAL_EINVAL with msg holding one
 * sentence that names the field (then *out needs no free), or AREAL_ENOMEM.
 */
int rollout_req_parse(rr_kind kind, const char *body, size_t len, const rr_limits *lim,
                      rollout_req *out, char *msg, size_t cap);

void rollout_req_free(rollout_req *r);

#endif
