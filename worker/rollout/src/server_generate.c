/*
 * server_generate.c - POST /generate (SGLang) and POST /v1/completions,
 * /v1/chat/completions (OpenAI): parse, submit to the engine, and answer
 * from the engine's callbacks on its scheduler thread.
 *
 * A request's context (gen) lives from submit to on_done. on_token keeps
 * each sample's tokens, checks stop strings on the decoded text (returning 1
 * ends the sample, as engine.h provides for exactly this) and, for a stream,
 * writes one `data:` event per token. on_done builds the final JSON, answers
 * and frees the context. A client that goes away aborts its request through
 * the exchange's on-close hook (registered before submit, so it can never
 * race with on_done freeing the context: lib/http runs a hook only while the
 * exchange is unfinished).
 *
 * Response shapes follow SGLang's tokenizer manager: text, output_ids,
 * meta_info {id, finish_reason {type, matched | length | message},
 * prompt_tokens, completion_tokens, cached_tokens, weight_version,
 * e2e_latency, output_token_logprobs [[logprob, id, text|null]],
 * input_token_logprobs, and the top lists}. n > 1 answers a list, one entry
 * per sample. Streams repeat the whole object so far in each event (text and
 * output_ids cumulative, finish_reason null until the last) and end with
 * `data: [DONE]`.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server_internal.h"

typedef struct gsample {
    int32_t *ids;
    float *lps;
    int n, cap;
    int stop_hit;    /* index of the stop string that ended it, -1 */
    size_t text_cut; /* where that stop string starts in the text */
    size_t sent;     /* OpenAI streams: bytes of text already sent */
} gsample;

typedef struct gen {
    areal_rollout_server *s;
    areal_http_exchange *x;
    rollout_req req;
    char rid[AREAL_ENGINE_RID_MAX];
    gsample *smp;
    int n;
    long long created;
} gen;

static void gen_free(gen *g) {
    for (int i = 0; i < g->n; i++) {
        free(g->smp[i].ids);
        free(g->smp[i].lps);
    }
    free(g->smp);
    rollout_req_free(&g->req);
    free(g);
}

/* The decoded text of a sample, cut at its stop string. */
static char *sample_text(gen *g, const gsample *sm, const int32_t *ids, int n, bool partial) {
    char *t = srv_decode(g->s, ids, n, g->req.skip_special_tokens, partial);
    if (t && sm->stop_hit >= 0 && sm->text_cut <= strlen(t))
        t[sm->text_cut] = '\0';
    return t;
}

static json_t *lp_entry(gen *g, float lp, int32_t id) {
    json_t *text = json_null();
    if (g->req.return_text_in_logprobs) {
        char *t = srv_decode(g->s, &id, 1, false, false);
        text = json_string(t ? t : "");
        free(t);
    }
    return json_pack("[oio]", isnan(lp) ? json_null() : json_real(lp), (int)id, text);
}

static json_t *top_list(gen *g, const areal_engine_top *t, int k) {
    json_t *a = json_array();
    for (int i = 0; t && i < k; i++)
        json_array_append_new(a, lp_entry(g, t[i].logprob, t[i].id));
    return a;
}

static json_t *finish_json(const areal_engine_sample *es, const gsample *sm, gen *g) {
    if (es == NULL)
        return json_null();
    if (es->finish == AREAL_FINISH_STOP) {
        json_t *matched = sm->stop_hit >= 0        ? json_string(g->req.stop[sm->stop_hit])
                          : es->matched_token >= 0 ? json_integer(es->matched_token)
                                                   : json_null();
        return json_pack("{s:s,s:o}", "type", "stop", "matched", matched);
    }
    if (es->finish == AREAL_FINISH_LENGTH)
        return json_pack("{s:s,s:i}", "type", "length", "length", es->n_output);
    return json_pack("{s:s,s:s}", "type", "abort", "message",
                     "aborted (pause_generation, abort_request, a weight update or shutdown); "
                     "resubmit the prompt with the partial output");
}

/* One SGLang response object of sample i: es NULL while streaming (not finished). */
static json_t *generate_obj(gen *g, int i, const areal_engine_sample *es,
                            const areal_engine_result *res, const char *version) {
    const gsample *sm = &g->smp[i];
    const int32_t *ids = es ? es->output_ids : sm->ids;
    int n = es ? es->n_output : sm->n;
    char *text = sample_text(g, sm, ids, n, es == NULL);
    json_t *out_ids = json_array();
    for (int k = 0; k < n; k++)
        json_array_append_new(out_ids, json_integer(ids[k]));
    char id[AREAL_ENGINE_RID_MAX + 16];
    if (g->n > 1)
        snprintf(id, sizeof id, "%s_%d", g->rid, i);
    else
        snprintf(id, sizeof id, "%s", g->rid);
    json_t *meta =
        json_pack("{s:s,s:o,s:i,s:i,s:i,s:s}", "id", id, "finish_reason", finish_json(es, sm, g),
                  "prompt_tokens", g->req.n_ids, "completion_tokens", n, "cached_tokens",
                  es ? es->cached_tokens : 0, "weight_version", version);
    if (res != NULL) {
        json_object_set_new(meta, "e2e_latency", json_real(res->e2e_s));
        json_object_set_new(meta, "queue_time", json_real(res->queue_s));
    }
    if (g->req.p.return_logprob) {
        json_t *olp = json_array();
        const float *lps = es ? es->output_logprobs : sm->lps;
        for (int k = 0; lps && k < n; k++)
            json_array_append_new(olp, lp_entry(g, lps[k], ids[k]));
        json_object_set_new(meta, "output_token_logprobs", olp);
        int k_top = g->req.p.top_logprobs_num;
        if (k_top > 0 && es) {
            json_t *tops = json_array();
            for (int k = 0; k < n; k++)
                json_array_append_new(
                    tops,
                    top_list(g, es->output_top ? es->output_top + (size_t)k * k_top : NULL, k_top));
            json_object_set_new(meta, "output_top_logprobs", tops);
        }
        if (g->req.p.logprob_start_len >= 0) {
            json_t *ilp = json_array(), *itop = json_array();
            int start = g->req.p.logprob_start_len;
            for (int k = 0; res && k < res->n_input_logprobs; k++) {
                json_array_append_new(ilp,
                                      lp_entry(g, res->input_logprobs[k], g->req.ids[start + k]));
                if (k_top > 0)
                    json_array_append_new(
                        itop, res->input_top && start + k > 0
                                  ? top_list(g, res->input_top + (size_t)k * k_top, k_top)
                                  : json_null());
            }
            json_object_set_new(meta, "input_token_logprobs", ilp);
            if (k_top > 0)
                json_object_set_new(meta, "input_top_logprobs", itop);
            else
                json_decref(itop);
        }
    }
    json_t *o = json_pack("{s:s,s:o,s:o}", "text", text ? text : "", "output_ids", out_ids,
                          "meta_info", meta);
    free(text);
    return o;
}

/* ---- OpenAI shapes ----------------------------------------------------------- */

static const char *openai_finish(const areal_engine_sample *es) {
    return es == NULL                          ? NULL
           : es->finish == AREAL_FINISH_LENGTH ? "length"
           : es->finish == AREAL_FINISH_STOP   ? "stop"
                                               : "abort";
}

static json_t *openai_logprobs(gen *g, const areal_engine_sample *es) {
    if (!g->req.p.return_logprob || es == NULL ||
        (g->req.kind == RR_CHAT && !g->req.openai_chat_logprobs))
        return json_null();
    int k_top = g->req.p.top_logprobs_num;
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array();
    for (int k = 0; k < es->n_output; k++) {
        char *t = srv_decode(g->s, &es->output_ids[k], 1, false, false);
        json_t *entry = json_pack("{s:s,s:f,s:n}", "token", t ? t : "", "logprob",
                                  es->output_logprobs ? es->output_logprobs[k] : 0.0, "bytes");
        json_t *top = g->req.kind == RR_CHAT ? json_array() : json_object();
        for (int q = 0; es->output_top && q < k_top; q++) {
            const areal_engine_top *tp = &es->output_top[(size_t)k * k_top + q];
            char *tt = srv_decode(g->s, &tp->id, 1, false, false);
            if (g->req.kind == RR_CHAT)
                json_array_append_new(top, json_pack("{s:s,s:f,s:n}", "token", tt ? tt : "",
                                                     "logprob", tp->logprob, "bytes"));
            else
                json_object_set_new(top, tt ? tt : "", json_real(tp->logprob));
            free(tt);
        }
        if (g->req.kind == RR_CHAT) {
            json_object_set_new(entry, "top_logprobs", top);
            json_array_append_new(toks, entry);
        } else {
            json_decref(entry);
            json_array_append_new(toks, json_string(t ? t : ""));
            json_array_append_new(lps,
                                  json_real(es->output_logprobs ? es->output_logprobs[k] : 0.0));
            json_array_append_new(tops, top);
        }
        free(t);
    }
    if (g->req.kind == RR_CHAT) {
        json_decref(lps);
        json_decref(tops);
        return json_pack("{s:o}", "content", toks);
    }
    return json_pack("{s:o,s:o,s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops);
}

static json_t *openai_obj(gen *g, const areal_engine_result *res) {
    json_t *choices = json_array();
    int completion = 0;
    for (int i = 0; i < res->n; i++) {
        const areal_engine_sample *es = &res->samples[i];
        completion += es->n_output;
        char *text = sample_text(g, &g->smp[es->index], es->output_ids, es->n_output, false);
        json_t *c =
            g->req.kind == RR_CHAT
                ? json_pack("{s:i,s:{s:s,s:s},s:o,s:s}", "index", es->index, "message", "role",
                            "assistant", "content", text ? text : "", "logprobs",
                            openai_logprobs(g, es), "finish_reason", openai_finish(es))
                : json_pack("{s:i,s:s,s:o,s:s}", "index", es->index, "text", text ? text : "",
                            "logprobs", openai_logprobs(g, es), "finish_reason", openai_finish(es));
        free(text);
        json_array_append_new(choices, c);
    }
    return json_pack("{s:s,s:s,s:I,s:s,s:o,s:{s:i,s:i,s:i},s:s}", "id", g->rid, "object",
                     g->req.kind == RR_CHAT ? "chat.completion" : "text_completion", "created",
                     (json_int_t)g->created, "model", g->s->served_name, "choices", choices,
                     "usage", "prompt_tokens", res->prompt_tokens, "completion_tokens", completion,
                     "total_tokens", res->prompt_tokens + completion, "weight_version",
                     res->weight_version);
}

/* An OpenAI stream event: the new text of sample i, or its finish. */
static json_t *openai_chunk(gen *g, int i, const char *delta, const char *finish) {
    json_t *c =
        g->req.kind == RR_CHAT
            ? json_pack("{s:i,s:{s:s},s:o}", "index", i, "delta", "content", delta, "finish_reason",
                        finish ? json_string(finish) : json_null())
            : json_pack("{s:i,s:s,s:o,s:o}", "index", i, "text", delta, "logprobs", json_null(),
                        "finish_reason", finish ? json_string(finish) : json_null());
    return json_pack("{s:s,s:s,s:I,s:s,s:[o]}", "id", g->rid, "object",
                     g->req.kind == RR_CHAT ? "chat.completion.chunk" : "text_completion",
                     "created", (json_int_t)g->created, "model", g->s->served_name, "choices", c);
}

/* ---- engine callbacks ----------------------------------------------------------- */

static void send_event(gen *g, json_t *j) {
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (text == NULL)
        return;
    size_t n = strlen(text);
    char *line = malloc(n + 9);
    if (line) {
        memcpy(line, "data: ", 6);
        memcpy(line + 6, text, n);
        memcpy(line + 6 + n, "\n\n", 3);
        areal_http_stream_write(g->x, line, n + 8);
    }
    free(line);
    free(text);
}

static int on_token(void *user, const areal_engine_token *t) {
    gen *g = user;
    if (t->sample < 0 || t->sample >= g->n)
        return 0;
    gsample *sm = &g->smp[t->sample];
    if (sm->n == sm->cap) {
        int cap = sm->cap ? 2 * sm->cap : 64;
        int32_t *ids = realloc(sm->ids, (size_t)cap * sizeof *ids);
        if (ids)
            sm->ids = ids;
        float *lps = realloc(sm->lps, (size_t)cap * sizeof *lps);
        if (lps)
            sm->lps = lps;
        if (!ids || !lps)
            return 0;
        sm->cap = cap;
    }
    sm->ids[sm->n] = t->id;
    sm->lps[sm->n] = t->logprob;
    sm->n++;
    int end = 0;
    if (g->req.n_stop > 0) {
        char *text = srv_decode(g->s, sm->ids, sm->n, g->req.skip_special_tokens, false);
        for (int k = 0; text && k < g->req.n_stop && !end; k++) {
            char *hit = strstr(text, g->req.stop[k]);
            if (hit) {
                sm->stop_hit = k;
                sm->text_cut = (size_t)(hit - text);
                end = 1;
            }
        }
        free(text);
    }
    if (g->req.stream && !end) {
        if (g->req.kind == RR_GENERATE) {
            char version[AREAL_ENGINE_VERSION_MAX];
            areal_rollout_server_version(g->s, version, sizeof version);
            send_event(g, generate_obj(g, t->sample, NULL, NULL, version));
        } else {
            char *text = sample_text(g, sm, sm->ids, sm->n, true);
            if (text && strlen(text) > sm->sent) {
                send_event(g, openai_chunk(g, t->sample, text + sm->sent, NULL));
                sm->sent = strlen(text);
            }
            free(text);
        }
    }
    return end;
}

static void on_done(void *user, areal_engine_result *res) {
    gen *g = user;
    areal_rollout_server *s = g->s;
    if (res == NULL) { /* the engine could not allocate the result */
        if (g->req.stream) {
            send_event(
                g, json_pack("{s:{s:s,s:i}}", "error", "message", "out of memory", "code", 500));
            areal_http_stream_end(g->x);
        } else {
            areal_http_respond_error(g->x, 500, "out of memory for the result");
        }
        gen_free(g);
        atomic_fetch_sub(&s->open_gens, 1);
        return;
    }
    /* Observed before the answer goes out, so a client that reads /metrics
     * after its answer always finds its own request counted. */
    pthread_mutex_lock(&s->mmu);
    metrics_histogram_observe(s->m_e2e, NULL, res->e2e_s);
    pthread_mutex_unlock(&s->mmu);
    if (g->req.stream) {
        for (int i = 0; i < res->n; i++) {
            const areal_engine_sample *es = &res->samples[i];
            if (g->req.kind == RR_GENERATE) {
                send_event(g, generate_obj(g, es->index, es, res, res->weight_version));
            } else {
                gsample *sm = &g->smp[es->index];
                char *text = sample_text(g, sm, es->output_ids, es->n_output, false);
                const char *rest = text && strlen(text) > sm->sent ? text + sm->sent : "";
                send_event(g, openai_chunk(g, es->index, rest, openai_finish(es)));
                free(text);
            }
        }
        areal_http_stream_write(g->x, "data: [DONE]\n\n", 14);
        areal_http_stream_end(g->x);
    } else if (g->req.kind == RR_GENERATE) {
        json_t *out = NULL;
        if (res->n == 1) {
            out =
                generate_obj(g, res->samples[0].index, &res->samples[0], res, res->weight_version);
        } else {
            out = json_array();
            for (int i = 0; i < res->n; i++)
                json_array_append_new(out, generate_obj(g, res->samples[i].index, &res->samples[i],
                                                        res, res->weight_version));
        }
        srv_json(g->x, 200, out);
    } else {
        srv_json(g->x, 200, openai_obj(g, res));
    }
    areal_engine_result_free(res);
    gen_free(g);
    atomic_fetch_sub(&s->open_gens, 1);
}

static void on_client_gone(void *ud) {
    gen *g = ud;
    areal_engine_abort(g->s->eng, g->rid);
}

/* ---- intake ------------------------------------------------------------------ */

static void submit(areal_rollout_server *s, areal_http_exchange *x, const areal_http_request *r,
                   rr_kind kind) {
    if (atomic_load(&s->draining)) {
        areal_http_header h[] = {{"Retry-After", "5"}, {NULL, NULL}};
        areal_http_respond(x, 503, NULL, h,
                           "{\"error\":{\"message\":\"the server is draining for shutdown; send "
                           "the request to another server\",\"type\":"
                           "\"ServiceUnavailableError\",\"code\":503}}",
                           strlen("{\"error\":{\"message\":\"the server is draining for "
                                  "shutdown; send the request to another server\",\"type\":"
                                  "\"ServiceUnavailableError\",\"code\":503}}"));
        return;
    }
    gen *g = calloc(1, sizeof *g);
    if (g == NULL) {
        areal_http_respond_error(x, 500, "out of memory");
        return;
    }
    g->s = s;
    g->x = x;
    g->created = (long long)time(NULL);
    char msg[600];
    int rc = rollout_req_parse(kind, r->body, r->body_len, &s->lim, &g->req, msg, sizeof msg);
    if (rc != AREAL_OK) {
        free(g);
        areal_http_respond_error(x, rc == AREAL_ENOMEM ? 500 : 400, msg);
        return;
    }
    g->n = g->req.p.n > 0 ? g->req.p.n : 1;
    g->smp = calloc((size_t)g->n, sizeof *g->smp);
    if (g->smp == NULL) {
        gen_free(g);
        areal_http_respond_error(x, 500, "out of memory");
        return;
    }
    for (int i = 0; i < g->n; i++)
        g->smp[i].stop_hit = -1;
    if (g->req.rid[0])
        snprintf(g->rid, sizeof g->rid, "%s", g->req.rid);
    else
        snprintf(g->rid, sizeof g->rid, "%s%llx%04x",
                 kind == RR_GENERATE ? ""
                 : kind == RR_CHAT   ? "chatcmpl-"
                                     : "cmpl-",
                 (unsigned long long)atomic_fetch_add(&s->rid_seq, 1) + 1,
                 (unsigned)(s->created & 0xffff));
    if (g->req.stream &&
        areal_http_stream_start(x, 200, "text/event-stream; charset=utf-8") != AREAL_OK) {
        areal_http_stream_end(x);
        gen_free(g);
        return;
    }
    areal_http_on_close(x, on_client_gone, g);
    areal_engine_request er = {.input_ids = g->req.ids,
                               .n_input = g->req.n_ids,
                               .params = g->req.p,
                               .rid = g->rid,
                               .on_done = on_done,
                               .on_token = on_token,
                               .user = g};
    areal_error e;
    atomic_fetch_add(&s->open_gens, 1);
    rc = areal_engine_submit(s->eng, &er, &e);
    if (rc == AREAL_OK)
        return;
    atomic_fetch_sub(&s->open_gens, 1);
    int status = rc == AREAL_ENGINE_EFULL      ? 503
                 : rc == AREAL_ENGINE_ESTOPPED ? 503
                 : rc == AREAL_ENOMEM          ? 500
                                               : 400;
    const char *why = rc == AREAL_ENGINE_EFULL
                          ? "the request queue is full; retry after the Retry-After seconds"
                          : e.msg;
    if (g->req.stream) { /* the 200 is out already: the error goes as an event */
        json_t *ej = json_pack("{s:{s:s,s:i}}", "error", "message", why, "code", status);
        send_event(g, ej);
        areal_http_stream_write(x, "data: [DONE]\n\n", 14);
        areal_http_stream_end(x);
    } else if (status == 503) {
        json_t *ej = json_pack("{s:{s:s,s:s,s:i}}", "error", "message", why, "type",
                               "ServiceUnavailableError", "code", 503);
        char *text = json_dumps(ej, JSON_COMPACT);
        json_decref(ej);
        areal_http_header h[] = {{"Retry-After", "1"}, {NULL, NULL}};
        areal_http_respond(x, 503, NULL, h, text ? text : "{}", text ? strlen(text) : 2);
        free(text);
    } else {
        areal_http_respond_error(x, status, why);
    }
    gen_free(g);
}

static void h_generate(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    submit(ud, x, r, RR_GENERATE);
}
static void h_completions(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    submit(ud, x, r, RR_COMPLETIONS);
}
static void h_chat(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    submit(ud, x, r, RR_CHAT);
}

static void h_models(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    areal_rollout_server *s = ud;
    srv_json(x, 200,
             json_pack("{s:s,s:[{s:s,s:s,s:I,s:s,s:I,s:s}]}", "object", "list", "data", "id",
                       s->served_name, "object", "model", "created", (json_int_t)s->created,
                       "owned_by", "areal", "max_model_len",
                       (json_int_t)s->mcfg.max_position_embeddings, "root", s->model_dir));
}

int srv_routes_generate(areal_rollout_server *s, areal_error *err) {
    int rc = areal_http_route(s->http, "POST", "/generate", h_generate, s, err);
    if (rc == AREAL_OK)
        rc = areal_http_route(s->http, "POST", "/v1/completions", h_completions, s, err);
    if (rc == AREAL_OK)
        rc = areal_http_route(s->http, "POST", "/v1/chat/completions", h_chat, s, err);
    if (rc == AREAL_OK)
        rc = areal_http_route(s->http, "GET", "/v1/models", h_models, s, err);
    return rc;
}
