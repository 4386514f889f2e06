/*
 * fuzz_rollout_request.c - libFuzzer target for the rollout server's request
 * parser (worker/rollout/src/server_req.c): the bytes are parsed as the body
 * of /generate, /v1/completions and /v1/chat/completions (first byte picks
 * one) with a 50-token vocabulary, a 64-token context and no tokenizer.
 *
 * Either the parse fails with a non-empty one-line message, or the request
 * is in bounds: at least one prompt id, every id and stop id in the
 * vocabulary, prompt + max_new_tokens within the context, n in 1..64, sane
 * sampling ranges. ASan/UBSan check the rest (leaks included).
 */
#include <stdlib.h>
#include <string.h>

#include "../src/server_req.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 1 << 16)
        return 0;
    rr_kind kind = (rr_kind)(data[0] % 3);
    rr_limits lim = {.vocab = 50, .context = 64, .tok = NULL, .model_name = "m"};
    rollout_req r;
    char msg[600];
    msg[0] = '\0';
    int rc = rollout_req_parse(kind, (const char *)data + 1, size - 1, &lim, &r, msg, sizeof msg);
    if (rc != 0) {
        if (msg[0] == '\0' || strchr(msg, '\n') != NULL)
            abort();
        return 0;
    }
    if (r.n_ids < 1 || r.n_ids + r.p.max_new_tokens > 64 || r.p.max_new_tokens < 0 || r.p.n < 1 ||
        r.p.n > RR_MAX_N || r.p.temperature < 0 || !(r.p.top_p > 0) || r.p.top_p > 1 ||
        r.p.top_k < 0 || r.p.min_p < 0 || r.p.min_p >= 1 || r.n_stop > RR_MAX_STOP)
        abort();
    for (int i = 0; i < r.n_ids; i++)
        if (r.ids[i] < 0 || r.ids[i] >= 50)
            abort();
    for (int i = 0; i < r.p.n_stop_token_ids; i++)
        if (r.p.stop_token_ids[i] < 0 || r.p.stop_token_ids[i] >= 50)
            abort();
    rollout_req_free(&r);
    return 0;
}
