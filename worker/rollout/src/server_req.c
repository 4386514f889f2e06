/*
 * server_req.c - see server_req.h. One pass over the JSON object: every key
 * is looked up in the kind's table of known fields (unknown ones refused),
 * values are type- and range-checked with the field's JSON path in the
 * message, then the prompt is resolved (input_ids, a text prompt through the
 * tokenizer, or chat messages through the Qwen chat template).
 */
#include "server_req.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pctx {
    char *msg;
    size_t cap;
} pctx;

static int bad(pctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(pctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, c->cap, fmt, ap);
    va_end(ap);
    for (char *p = c->msg; *p; p++) /* a quoted key may hold control bytes: one line */
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return AREAL_EINVAL;
}

static bool in_list(const char *key, const char *const *list) {
    for (; *list; list++)
        if (strcmp(key, *list) == 0)
            return true;
    return false;
}

/* An integer field (JSON integer, or a real with an integral value). */
static int get_int(pctx *c, json_t *v, const char *path, long long lo, long long hi,
                   long long *out) {
    double d;
    if (json_is_integer(v))
        d = (double)json_integer_value(v);
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)))
        d = json_real_value(v);
    else
        return bad(c, "%s must be an integer", path);
    if (d < (double)lo || d > (double)hi)
        return bad(c, "%s = %.0f is outside %lld..%lld", path, d, lo, hi);
    *out = (long long)d;
    return AREAL_OK;
}

static int get_num(pctx *c, json_t *v, const char *path, double lo, double hi, double *out) {
    if (!json_is_number(v))
        return bad(c, "%s must be a number", path);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi))
        return bad(c, "%s = %g is outside [%g, %g]", path, d, lo, hi);
    *out = d;
    return AREAL_OK;
}

static int get_bool(pctx *c, json_t *v, const char *path, bool *out) {
    if (!json_is_boolean(v))
        return bad(c, "%s must be true or false", path);
    *out = json_is_true(v);
    return AREAL_OK;
}

/* A field this server accepts only at its neutral value (null, or the given number). */
static int neutral(pctx *c, json_t *v, const char *path, double want) {
    if (json_is_null(v) || (json_is_number(v) && json_number_value(v) == want) ||
        (json_is_false(v) && want == 0))
        return AREAL_OK;
    return bad(c, "%s is not supported by this server (send it as %g or leave it out)", path, want);
}

static int get_ids(pctx *c, json_t *v, const char *path, int vocab, int32_t **out, int *n,
                   bool allow_empty) {
    if (!json_is_array(v))
        return bad(c, "%s must be an array of token ids", path);
    size_t len = json_array_size(v);
    if (len == 0 && !allow_empty)
        return bad(c, "%s is empty: send at least one token id", path);
    if (len > (1u << 24))
        return bad(c, "%s has %zu ids, more than any context", path, len);
    int32_t *ids = malloc((len ? len : 1) * sizeof *ids);
    if (ids == NULL)
        return AREAL_ENOMEM;
    for (size_t i = 0; i < len; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_integer(e)) {
            free(ids);
            return bad(c, "%s[%zu] must be an integer token id", path, i);
        }
        json_int_t id = json_integer_value(e);
        if (id < 0 || id >= vocab) {
            free(ids);
            return bad(c, "%s[%zu] = %lld is outside the vocabulary (0..%d)", path, i,
                       (long long)id, vocab - 1);
        }
        ids[i] = (int32_t)id;
    }
    *out = ids;
    *n = (int)len;
    return AREAL_OK;
}

static int get_stop(pctx *c, json_t *v, const char *path, rollout_req *r) {
    if (json_is_null(v))
        return AREAL_OK;
    if (json_is_string(v)) {
        if (json_string_length(v) == 0)
            return bad(c, "%s must not be an empty string", path);
        if ((r->stop[0] = strdup(json_string_value(v))) == NULL)
            return AREAL_ENOMEM;
        r->n_stop = 1;
        return AREAL_OK;
    }
    if (!json_is_array(v))
        return bad(c, "%s must be a string or an array of strings", path);
    if (json_array_size(v) > RR_MAX_STOP)
        return bad(c, "%s has %zu strings; at most %d", path, json_array_size(v), RR_MAX_STOP);
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_string(e) || json_string_length(e) == 0)
            return bad(c, "%s[%zu] must be a non-empty string", path, i);
        if ((r->stop[r->n_stop] = strdup(json_string_value(e))) == NULL)
            return AREAL_ENOMEM;
        r->n_stop++;
    }
    return AREAL_OK;
}

/* SGLang's sampling_params object. */
static int parse_sampling(pctx *c, json_t *sp, const rr_limits *lim, rollout_req *r) {
    static const char *const known[] = {"max_new_tokens",
                                        "temperature",
                                        "top_p",
                                        "top_k",
                                        "min_p",
                                        "stop_token_ids",
                                        "stop",
                                        "ignore_eos",
                                        "skip_special_tokens",
                                        "n",
                                        "sampling_seed",
                                        "frequency_penalty",
                                        "presence_penalty",
                                        "repetition_penalty",
                                        "min_new_tokens",
                                        "no_stop_trim",
                                        "spaces_between_special_tokens",
                                        "json_schema",
                                        "regex",
                                        "ebnf",
                                        "logit_bias",
                                        "custom_params",
                                        "stream_interval",
                                        NULL};
    if (sp == NULL || json_is_null(sp))
        return AREAL_OK;
    if (!json_is_object(sp))
        return bad(c, "sampling_params must be an object");
    const char *key;
    json_t *v;
    json_object_foreach(sp, key, v) {
        char path[160];
        snprintf(path, sizeof path, "sampling_params.%.100s", key);
        if (!in_list(key, known))
            return bad(c,
                       "%s is not a known sampling parameter (see SGLang's SamplingParams: "
                       "max_new_tokens, temperature, top_p, top_k, min_p, stop, "
                       "stop_token_ids, ignore_eos, n, sampling_seed, ...)",
                       path);
        long long i = 0;
        double d = 0;
        int rc = AREAL_OK;
        if (strcmp(key, "max_new_tokens") == 0) {
            if (!json_is_null(v) && (rc = get_int(c, v, path, 0, lim->context, &i)) == AREAL_OK)
                r->p.max_new_tokens = (int)i;
        } else if (strcmp(key, "temperature") == 0) {
            if ((rc = get_num(c, v, path, 0, 100, &d)) == AREAL_OK)
                r->p.temperature = (float)d;
        } else if (strcmp(key, "top_p") == 0) {
            if ((rc = get_num(c, v, path, 1e-9, 1, &d)) == AREAL_OK)
                r->p.top_p = (float)d;
        } else if (strcmp(key, "top_k") == 0) {
            if ((rc = get_int(c, v, path, -1, 1 << 30, &i)) == AREAL_OK)
                r->p.top_k = i < 0 ? 0 : (int)i;
        } else if (strcmp(key, "min_p") == 0) {
            if ((rc = get_num(c, v, path, 0, 0.999999, &d)) == AREAL_OK)
                r->p.min_p = (float)d;
        } else if (strcmp(key, "stop_token_ids") == 0) {
            if (!json_is_null(v) && (rc = get_ids(c, v, path, lim->vocab, &r->stop_ids,
                                                  &r->p.n_stop_token_ids, true)) == AREAL_OK)
                r->p.stop_token_ids = r->stop_ids;
        } else if (strcmp(key, "stop") == 0) {
            rc = get_stop(c, v, path, r);
        } else if (strcmp(key, "ignore_eos") == 0) {
            rc = get_bool(c, v, path, &r->p.ignore_eos);
        } else if (strcmp(key, "skip_special_tokens") == 0) {
            rc = get_bool(c, v, path, &r->skip_special_tokens);
        } else if (strcmp(key, "no_stop_trim") == 0 ||
                   strcmp(key, "spaces_between_special_tokens") == 0) {
            bool b;
            rc = get_bool(c, v, path, &b);
        } else if (strcmp(key, "n") == 0) {
            if ((rc = get_int(c, v, path, 1, RR_MAX_N, &i)) == AREAL_OK)
                r->p.n = (int)i;
        } else if (strcmp(key, "sampling_seed") == 0) {
            if (!json_is_null(v) && (rc = get_int(c, v, path, 0, (long long)1 << 62, &i)) == 0) {
                r->p.has_seed = true;
                r->p.sampling_seed = (uint64_t)i;
            }
        } else if (strcmp(key, "repetition_penalty") == 0) {
            rc = neutral(c, v, path, 1);
        } else if (strcmp(key, "stream_interval") == 0) {
            if (!json_is_null(v))
                rc = get_int(c, v, path, 1, 1 << 20, &i);
        } else if (strcmp(key, "custom_params") == 0 || strcmp(key, "logit_bias") == 0) {
            if (!json_is_null(v) && !(json_is_object(v) && json_object_size(v) == 0))
                rc = bad(c, "%s is not supported by this server (leave it out)", path);
        } else { /* penalties, min_new_tokens, constrained decoding */
            rc = neutral(c, v, path, 0);
        }
        if (rc != AREAL_OK)
            return rc;
    }
    return AREAL_OK;
}

/* The prompt of /generate and /v1/completions: ids, or text through the tokenizer. */
static int prompt_from(pctx *c, json_t *v, const char *path, const rr_limits *lim, rollout_req *r) {
    if (json_is_array(v) && json_array_size(v) > 0 && json_is_array(json_array_get(v, 0)))
        return bad(c, "%s holds a batch; send one prompt per request", path);
    if (json_is_array(v))
        return get_ids(c, v, path, lim->vocab, &r->ids, &r->n_ids, false);
    if (!json_is_string(v))
        return bad(c, "%s must be a string or an array of token ids", path);
    if (lim->tok == NULL)
        return bad(c,
                   "%s is text, but this model directory has no tokenizer.json: send token "
                   "ids (input_ids) instead",
                   path);
    size_t n = 0;
    areal_error e;
    int rc = areal_tokenizer_encode(lim->tok, json_string_value(v), json_string_length(v), &r->ids,
                                    &n, &e);
    if (rc != AREAL_OK)
        return rc == AREAL_ENOMEM ? rc : bad(c, "%s cannot be tokenized: %s", path, e.msg);
    r->n_ids = (int)n;
    if (n == 0)
        return bad(c, "%s is empty: send at least one token", path);
    for (size_t k = 0; k < n; k++)
        if (r->ids[k] >= lim->vocab)
            return bad(c,
                       "%s encodes to token %d, outside the model's vocabulary (0..%d): the "
                       "tokenizer does not match the model",
                       path, r->ids[k], lim->vocab - 1);
    return AREAL_OK;
}

static int parse_generate(pctx *c, json_t *j, const rr_limits *lim, rollout_req *r) {
    static const char *const known[] = {"text",
                                        "input_ids",
                                        "sampling_params",
                                        "return_logprob",
                                        "logprob_start_len",
                                        "top_logprobs_num",
                                        "rid",
                                        "stream",
                                        "return_text_in_logprobs",
                                        "image_data",
                                        "audio_data",
                                        "video_data",
                                        "lora_path",
                                        "return_routed_experts",
                                        "token_ids_logprob",
                                        "custom_logit_processor",
                                        "return_hidden_states",
                                        "log_metrics",
                                        "modalities",
                                        "session_params",
                                        "input_embeds",
                                        "bootstrap_host",
                                        "bootstrap_port",
                                        "bootstrap_room",
                                        "data_parallel_rank",
                                        NULL};
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        if (!in_list(key, known))
            return bad(c,
                       "%.100s is not a field of /generate (text | input_ids, "
                       "sampling_params, return_logprob, logprob_start_len, "
                       "top_logprobs_num, rid, stream)",
                       key);
    }
    json_t *text = json_object_get(j, "text"), *ids = json_object_get(j, "input_ids");
    if ((text && !json_is_null(text)) && (ids && !json_is_null(ids)))
        return bad(c, "send either text or input_ids, not both");
    int rc = AREAL_OK;
    if (ids && !json_is_null(ids)) {
        if (!json_is_array(ids))
            return bad(c, "input_ids must be an array of token ids");
        rc = prompt_from(c, ids, "input_ids", lim, r);
    } else if (text && !json_is_null(text)) {
        if (!json_is_string(text))
            return bad(c, "text must be a string (one prompt per request)");
        rc = prompt_from(c, text, "text", lim, r);
    } else {
        return bad(c, "the request has no prompt: send input_ids (token ids) or text");
    }
    if (rc != AREAL_OK)
        return rc;
    if ((rc = parse_sampling(c, json_object_get(j, "sampling_params"), lim, r)) != AREAL_OK)
        return rc;
    long long i = 0;
    json_object_foreach(j, key, v) {
        char path[128];
        snprintf(path, sizeof path, "%.100s", key);
        if (strcmp(key, "return_logprob") == 0) {
            rc = json_is_null(v) ? 0 : get_bool(c, v, path, &r->p.return_logprob);
        } else if (strcmp(key, "logprob_start_len") == 0) {
            if (!json_is_null(v) && (rc = get_int(c, v, path, -1, r->n_ids, &i)) == AREAL_OK)
                r->p.logprob_start_len = (int)i;
            if (rc == AREAL_OK && i == r->n_ids && r->n_ids > 0)
                r->p.logprob_start_len = -1; /* nothing of the prompt to score */
        } else if (strcmp(key, "top_logprobs_num") == 0) {
            if (!json_is_null(v) && (rc = get_int(c, v, path, 0, 20, &i)) == AREAL_OK)
                r->p.top_logprobs_num = (int)i;
        } else if (strcmp(key, "rid") == 0) {
            if (json_is_null(v))
                continue;
            if (!json_is_string(v) || json_string_length(v) == 0 ||
                json_string_length(v) >= sizeof r->rid)
                return bad(c, "rid must be a string of 1..%zu bytes", sizeof r->rid - 1);
            snprintf(r->rid, sizeof r->rid, "%s", json_string_value(v));
        } else if (strcmp(key, "stream") == 0) {
            rc = json_is_null(v) ? 0 : get_bool(c, v, path, &r->stream);
        } else if (strcmp(key, "return_text_in_logprobs") == 0) {
            rc = json_is_null(v) ? 0 : get_bool(c, v, path, &r->return_text_in_logprobs);
        } else if (strcmp(key, "text") != 0 && strcmp(key, "input_ids") != 0 &&
                   strcmp(key, "sampling_params") != 0 && strcmp(key, "log_metrics") != 0) {
            rc = neutral(c, v, path, 0); /* multimodal, LoRA, routed experts, ... */
        }
        if (rc != AREAL_OK)
            return rc;
    }
    return AREAL_OK;
}

/* The OpenAI fields shared by completions and chat completions. */
static int openai_common(pctx *c, const char *key, json_t *v, const rr_limits *lim, rollout_req *r,
                         bool *handled) {
    long long i = 0;
    double d = 0;
    int rc = AREAL_OK;
    *handled = true;
    if (strcmp(key, "model") == 0) {
        if (!json_is_string(v))
            return bad(c, "model must be a string");
        if (lim->model_name && strcmp(json_string_value(v), lim->model_name) != 0 &&
            strcmp(json_string_value(v), "default") != 0)
            return bad(c, "model '%.100s' is not served here; GET /v1/models lists '%s'",
                       json_string_value(v), lim->model_name);
    } else if (strcmp(key, "max_tokens") == 0 || strcmp(key, "max_completion_tokens") == 0) {
        if (!json_is_null(v) && (rc = get_int(c, v, key, 0, lim->context, &i)) == AREAL_OK)
            r->p.max_new_tokens = (int)i;
    } else if (strcmp(key, "temperature") == 0) {
        if (!json_is_null(v) && (rc = get_num(c, v, key, 0, 2, &d)) == AREAL_OK)
            r->p.temperature = (float)d;
    } else if (strcmp(key, "top_p") == 0) {
        if (!json_is_null(v) && (rc = get_num(c, v, key, 1e-9, 1, &d)) == AREAL_OK)
            r->p.top_p = (float)d;
    } else if (strcmp(key, "top_k") == 0) {
        if (!json_is_null(v) && (rc = get_int(c, v, key, -1, 1 << 30, &i)) == AREAL_OK)
            r->p.top_k = i < 0 ? 0 : (int)i;
    } else if (strcmp(key, "min_p") == 0) {
        if (!json_is_null(v) && (rc = get_num(c, v, key, 0, 0.999999, &d)) == AREAL_OK)
            r->p.min_p = (float)d;
    } else if (strcmp(key, "n") == 0) {
        if (!json_is_null(v) && (rc = get_int(c, v, key, 1, RR_MAX_N, &i)) == AREAL_OK)
            r->p.n = (int)i;
    } else if (strcmp(key, "seed") == 0) {
        if (!json_is_null(v) && (rc = get_int(c, v, key, 0, (long long)1 << 62, &i)) == 0) {
            r->p.has_seed = true;
            r->p.sampling_seed = (uint64_t)i;
        }
    } else if (strcmp(key, "stop") == 0) {
        rc = get_stop(c, v, key, r);
    } else if (strcmp(key, "stream") == 0) {
        rc = json_is_null(v) ? 0 : get_bool(c, v, key, &r->stream);
    } else if (strcmp(key, "ignore_eos") == 0) {
        rc = get_bool(c, v, key, &r->p.ignore_eos);
    } else if (strcmp(key, "stop_token_ids") == 0) {
        if (!json_is_null(v) && (rc = get_ids(c, v, key, lim->vocab, &r->stop_ids,
                                              &r->p.n_stop_token_ids, true)) == AREAL_OK)
            r->p.stop_token_ids = r->stop_ids;
    } else if (strcmp(key, "user") == 0 || strcmp(key, "stream_options") == 0) {
        /* informational */
    } else if (strcmp(key, "frequency_penalty") == 0 || strcmp(key, "presence_penalty") == 0) {
        rc = neutral(c, v, key, 0);
    } else if (strcmp(key, "repetition_penalty") == 0) {
        rc = neutral(c, v, key, 1);
    } else if (strcmp(key, "logit_bias") == 0) {
        if (!json_is_null(v) && !(json_is_object(v) && json_object_size(v) == 0))
            rc = bad(c, "logit_bias is not supported by this server (leave it out)");
    } else {
        *handled = false;
    }
    return rc;
}

static int parse_completions(pctx *c, json_t *j, const rr_limits *lim, rollout_req *r) {
    r->p.max_new_tokens = 16; /* OpenAI's default max_tokens */
    json_t *prompt = json_object_get(j, "prompt");
    if (prompt == NULL || json_is_null(prompt))
        return bad(c, "prompt is required (a string or an array of token ids)");
    int rc = prompt_from(c, prompt, "prompt", lim, r);
    if (rc != AREAL_OK)
        return rc;
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        bool handled = false;
        if ((rc = openai_common(c, key, v, lim, r, &handled)) != AREAL_OK)
            return rc;
        if (handled || strcmp(key, "prompt") == 0)
            continue;
        long long i;
        if (strcmp(key, "logprobs") == 0) {
            if (json_is_null(v))
                continue;
            if ((rc = get_int(c, v, key, 0, 20, &i)) != AREAL_OK)
                return rc;
            r->openai_logprobs = (int)i;
            r->p.return_logprob = true;
            r->p.top_logprobs_num = (int)i;
        } else if (strcmp(key, "echo") == 0 || strcmp(key, "best_of") == 0 ||
                   strcmp(key, "suffix") == 0) {
            if ((rc = neutral(c, v, key, strcmp(key, "best_of") == 0 ? 1 : 0)) != AREAL_OK)
                return rc;
        } else {
            return bad(c, "%.100s is not a field of /v1/completions", key);
        }
    }
    return AREAL_OK;
}

static int parse_chat(pctx *c, json_t *j, const rr_limits *lim, rollout_req *r) {
    json_t *msgs = json_object_get(j, "messages");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return bad(c, "messages must be a non-empty array of {role, content}");
    if (lim->tok == NULL)
        return bad(c, "chat needs the model directory's tokenizer.json, which this server lacks");
    size_t n = json_array_size(msgs);
    if (n > 4096)
        return bad(c, "messages has %zu entries; at most 4096", n);
    areal_chat_msg *cm = calloc(n, sizeof *cm);
    if (cm == NULL)
        return AREAL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i), *role = json_object_get(m, "role"),
               *content = json_object_get(m, "content");
        if (!json_is_object(m) || !json_is_string(role) || !json_is_string(content)) {
            free(cm);
            return bad(c, "messages[%zu] must be an object with string role and content", i);
        }
        const char *k;
        json_t *vv;
        json_object_foreach(m, k, vv) {
            if (strcmp(k, "role") != 0 && strcmp(k, "content") != 0 && strcmp(k, "name") != 0 &&
                strcmp(k, "reasoning_content") != 0) {
                free(cm);
                return bad(c,
                           "messages[%zu].%.100s is not supported (role, content, name, "
                           "reasoning_content)",
                           i, k);
            }
        }
        json_t *rc_j = json_object_get(m, "reasoning_content");
        cm[i].role = json_string_value(role);
        cm[i].content = json_string_value(content);
        cm[i].reasoning_content = json_is_string(rc_j) ? json_string_value(rc_j) : NULL;
    }
    /* chat_template_kwargs {enable_thinking} as SGLang and vLLM take it */
    bool thinking = true;
    json_t *kw = json_object_get(j, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        json_t *et = json_object_get(kw, "enable_thinking");
        if (!json_is_object(kw) || json_object_size(kw) != (et ? 1u : 0u) ||
            (et && !json_is_boolean(et))) {
            free(cm);
            return bad(c, "chat_template_kwargs supports only enable_thinking (true or false)");
        }
        thinking = !json_is_false(et);
    }
    char *text = NULL;
    size_t tlen = 0;
    areal_error e;
    int rc = areal_chat_render(lim->chat ? lim->chat : &areal_chat_chatml, cm, n, true, thinking,
                               &text, &tlen, &e);
    free(cm);
    if (rc != AREAL_OK)
        return rc == AREAL_ENOMEM ? rc : bad(c, "messages: %s", e.msg);
    json_t *tj = json_stringn(text, tlen);
    free(text);
    if (tj == NULL)
        return bad(c, "messages must be valid UTF-8");
    rc = prompt_from(c, tj, "messages", lim, r);
    json_decref(tj);
    if (rc != AREAL_OK)
        return rc;
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        bool handled = false;
        if ((rc = openai_common(c, key, v, lim, r, &handled)) != AREAL_OK)
            return rc;
        if (handled || strcmp(key, "messages") == 0)
            continue;
        long long i;
        if (strcmp(key, "logprobs") == 0) {
            bool b = false;
            if (!json_is_null(v) && (rc = get_bool(c, v, key, &b)) != AREAL_OK)
                return rc;
            r->openai_chat_logprobs = b;
            r->p.return_logprob = r->p.return_logprob || b;
        } else if (strcmp(key, "top_logprobs") == 0) {
            if (json_is_null(v))
                continue;
            if ((rc = get_int(c, v, key, 0, 20, &i)) != AREAL_OK)
                return rc;
            r->p.top_logprobs_num = (int)i;
        } else if (strcmp(key, "chat_template_kwargs") == 0) {
            /* read above */
        } else if (strcmp(key, "tools") == 0 || strcmp(key, "tool_choice") == 0 ||
                   strcmp(key, "response_format") == 0) {
            if ((rc = neutral(c, v, key, 0)) != AREAL_OK)
                return rc;
        } else {
            return bad(c, "%.100s is not a field of /v1/chat/completions", key);
        }
    }
    return AREAL_OK;
}

int rollout_req_parse(rr_kind kind, const char *body, size_t len, const rr_limits *lim,
                      rollout_req *out, char *msg, size_t cap) {
    pctx c = {msg, cap};
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->openai_logprobs = -1;
    out->skip_special_tokens = true;
    areal_engine_params_default(&out->p);
    json_error_t je;
    json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (j == NULL)
        return bad(&c, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
                   je.column);
    int rc;
    if (!json_is_object(j))
        rc = bad(&c, "the body must be a JSON object");
    else if (kind == RR_GENERATE)
        rc = parse_generate(&c, j, lim, out);
    else if (kind == RR_COMPLETIONS)
        rc = parse_completions(&c, j, lim, out);
    else
        rc = parse_chat(&c, j, lim, out);
    json_decref(j);
    if (rc == AREAL_OK && (int64_t)out->n_ids + out->p.max_new_tokens > lim->context)
        rc = bad(&c,
                 "%s = %d with a prompt of %d tokens exceeds the model's context of %lld "
                 "tokens: lower it to at most %lld",
                 kind == RR_GENERATE ? "sampling_params.max_new_tokens" : "max_tokens",
                 out->p.max_new_tokens, out->n_ids, (long long)lim->context,
                 (long long)(lim->context - out->n_ids));
    if (rc == AREAL_OK && out->p.return_logprob == false) {
        out->p.logprob_start_len = -1;
        out->p.top_logprobs_num = 0;
    }
    if (rc != AREAL_OK) {
        if (rc == AREAL_ENOMEM)
            snprintf(msg, cap, "out of memory");
        rollout_req_free(out);
    }
    return rc;
}

void rollout_req_free(rollout_req *r) {
    free(r->ids);
    free(r->stop_ids);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    memset(r, 0, sizeof *r);
}
