/*
 * server_control.c - the control endpoints: /pause_generation,
 * /continue_generation, /abort_request, /flush_cache (the blocking ones run
 * on the control thread, in arrival order), /health, /health_generate,
 * /get_model_info, /get_server_info and /metrics.
 *
 * /metrics publishes SGLang's names (sglang:num_running_reqs,
 * sglang:num_queue_reqs, sglang:token_usage, sglang:gen_throughput,
 * sglang:prompt_tokens_total, sglang:generation_tokens_total,
 * sglang:cache_hit_rate, ...) so existing dashboards work, plus the areal_
 * ones (areal_rollout_weight_version, KV block sharing, weight updates).
 * Counters are advanced by the difference to the last scrape's engine
 * totals, so they stay monotonic whatever the scrape rate.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server_internal.h"

static json_t *ok_json(const char *message) {
    return json_pack("{s:b,s:s}", "success", 1, "message", message);
}

/* ---- pause / continue / abort / flush ------------------------------------------ */

static void do_pause(areal_rollout_server *s, areal_http_exchange *x, const areal_http_request *r) {
    json_t *j = srv_body(x, r);
    static const char *const known[] = {"mode", NULL};
    if (j == NULL)
        return;
    if (!srv_known(x, j, "/pause_generation", known)) {
        json_decref(j);
        return;
    }
    json_t *m = json_object_get(j, "mode");
    const char *mode = json_is_string(m) ? json_string_value(m) : "abort";
    if ((m && !json_is_null(m) && !json_is_string(m)) ||
        (strcmp(mode, "abort") != 0 && strcmp(mode, "in_place") != 0 &&
         strcmp(mode, "retract") != 0)) {
        json_decref(j);
        areal_http_respond_error(x, 400,
                                 "mode must be \"abort\" (the default), \"in_place\" or "
                                 "\"retract\"");
        return;
    }
    /* retract: SGLang puts running requests back in the queue and recomputes them; holding
     * them in place with their KV gives the same tokens, so it maps to in_place */
    areal_engine_pause_mode pm =
        strcmp(mode, "abort") == 0 ? AREAL_PAUSE_ABORT : AREAL_PAUSE_IN_PLACE;
    json_decref(j);
    areal_engine_pause(s->eng, pm);
    srv_json(x, 200,
             ok_json(pm == AREAL_PAUSE_ABORT ? "Generation paused; running requests "
                                               "were aborted with their partial output."
                                             : "Generation paused in place."));
}

static void do_continue(areal_rollout_server *s, areal_http_exchange *x,
                        const areal_http_request *r) {
    json_t *j = srv_body(x, r);
    static const char *const known[] = {NULL};
    if (j == NULL)
        return;
    bool ok = srv_known(x, j, "/continue_generation", known);
    json_decref(j);
    if (!ok)
        return;
    areal_engine_continue(s->eng);
    srv_json(x, 200, ok_json("Generation continued."));
}

static void do_flush(areal_rollout_server *s, areal_http_exchange *x, const areal_http_request *r) {
    (void)r;
    areal_engine_flush_cache(s->eng);
    srv_json(x, 200, ok_json("Cache flushed."));
}

static void h_pause(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    srv_ctl(ud, do_pause, x, r);
}
static void h_continue(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    srv_ctl(ud, do_continue, x, r);
}
static void h_flush(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    srv_ctl(ud, do_flush, x, r);
}

static void h_abort(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    areal_rollout_server *s = ud;
    json_t *j = srv_body(x, r);
    static const char *const known[] = {"rid", "abort_all", "abort_message", NULL};
    if (j == NULL)
        return;
    if (!srv_known(x, j, "/abort_request", known)) {
        json_decref(j);
        return;
    }
    json_t *rid = json_object_get(j, "rid"), *all = json_object_get(j, "abort_all");
    if ((rid && !json_is_null(rid) && !json_is_string(rid)) || (all && !json_is_boolean(all))) {
        json_decref(j);
        areal_http_respond_error(x, 400, "rid must be a string and abort_all true or false");
        return;
    }
    int n = 0;
    if (json_is_true(all))
        n = areal_engine_abort_all(s->eng);
    else if (json_is_string(rid))
        n = areal_engine_abort(s->eng, json_string_value(rid)) == AREAL_OK;
    else {
        json_decref(j);
        areal_http_respond_error(x, 400, "send rid (the request to abort) or abort_all: true");
        return;
    }
    json_decref(j);
    /* SGLang answers 200 whether or not the rid was live (it may just have finished) */
    srv_json(x, 200, json_pack("{s:b,s:i}", "success", 1, "aborted", n));
}

/* ---- health and info -------------------------------------------------------------- */

static void h_health(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    areal_rollout_server *s = ud;
    char why[700];
    if (atomic_load(&s->draining))
        areal_http_respond_error(x, 503, "the server is draining for shutdown");
    else if (areal_rollout_server_failed(s, why, sizeof why))
        areal_http_respond_error(x, 503, why);
    else
        areal_http_respond(x, 200, "text/plain", NULL, "", 0);
}

/* /health_generate: one token through the engine, answered when it is out. */
static void hg_done(void *user, areal_engine_result *res) {
    areal_http_exchange *x = user;
    bool ok = res && res->n == 1 && res->samples[0].finish != AREAL_FINISH_ABORT;
    areal_engine_result_free(res);
    if (ok)
        areal_http_respond(x, 200, "text/plain", NULL, "", 0);
    else
        areal_http_respond_error(x, 503,
                                 "the health generation was aborted (paused or "
                                 "draining)");
}

static void h_health_generate(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    areal_rollout_server *s = ud;
    int32_t prompt = 0;
    areal_engine_request er = {.input_ids = &prompt, .n_input = 1, .on_done = hg_done, .user = x};
    areal_engine_params_default(&er.params);
    er.params.max_new_tokens = 1;
    er.params.temperature = 0;
    areal_error e;
    if (atomic_load(&s->draining) || areal_engine_submit(s->eng, &er, &e) != AREAL_OK)
        areal_http_respond_error(x, 503, "the engine does not accept requests now");
}

static void h_model_info(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    areal_rollout_server *s = ud;
    char version[AREAL_ENGINE_VERSION_MAX];
    areal_rollout_server_version(s, version, sizeof version);
    srv_json(x, 200,
             json_pack("{s:s,s:s,s:b,s:n,s:s,s:s,s:s,s:I,s:i}", "model_path", s->model_dir,
                       "tokenizer_path", s->tok ? s->model_dir : "", "is_generation", 1,
                       "preferred_sampling_params", "weight_version", version, "model_type",
                       s->mcfg.model_type, "served_model_name", s->served_name,
                       "max_context_length", (json_int_t)s->mcfg.max_position_embeddings,
                       "vocab_size", s->mcfg.vocab_size));
}

static void h_server_info(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    areal_rollout_server *s = ud;
    areal_engine_stats st;
    areal_engine_get_stats(s->eng, &st);
    const areal_engine_config *ec = areal_engine_get_config(s->eng);
    json_t *state = json_pack(
        "{s:i,s:i,s:i,s:b,s:i,s:i,s:i,s:i,s:f,s:I,s:I,s:I,s:f}", "num_running_reqs", st.running,
        "num_queue_reqs", st.queued, "live_requests", st.live_requests, "paused", st.paused,
        "kv_blocks_total", st.blocks_total, "kv_blocks_used", st.blocks_used, "kv_blocks_shared",
        st.blocks_shared, "kv_blocks_cached", st.blocks_cached, "token_usage", st.token_usage,
        "generated_tokens_total", (json_int_t)st.generated_tokens_total, "cached_tokens_total",
        (json_int_t)st.cached_tokens_total, "preemptions", (json_int_t)st.preemptions,
        "gen_throughput", st.gen_throughput);
    srv_json(x, 200,
             json_pack("{s:s,s:s,s:s,s:s,s:i,s:I,s:I,s:i,s:i,s:i,s:i,s:I,s:s,s:[o],s:b}", "version",
                       "areal-c", "model_path", s->model_dir, "served_model_name", s->served_name,
                       "host", s->host, "port", areal_http_port(s->http), "kv_bytes",
                       (json_int_t)st.kv_bytes_budget, "max_total_num_tokens",
                       (json_int_t)st.blocks_total * st.block_tokens, "page_size", st.block_tokens,
                       "max_running_requests", ec->max_running, "max_queued_requests",
                       ec->max_queued, "tp_size", ec->tensor_parallel, "context_length",
                       (json_int_t)s->mcfg.max_position_embeddings, "weight_version",
                       st.weight_version, "internal_states", state, "draining",
                       atomic_load(&s->draining)));
}

/* ---- metrics ------------------------------------------------------------------------ */

int srv_metrics_init(areal_rollout_server *s) {
    metrics_registry *r = s->reg = metrics_registry_new();
    if (r == NULL)
        return -1;
#define G(name, help) metrics_register(r, METRIC_GAUGE, name, help, NULL, NULL, 0)
#define C(name, help) metrics_register(r, METRIC_COUNTER, name, help, NULL, NULL, 0)
    s->m_running = G("sglang:num_running_reqs", "Sequences in the running batch.");
    s->m_queued = G("sglang:num_queue_reqs", "Sequences waiting for admission.");
    s->m_usage = G("sglang:token_usage", "Fraction of KV blocks in use.");
    s->m_tput = G("sglang:gen_throughput", "Generated tokens per second (recent).");
    s->m_cache_hit = G("sglang:cache_hit_rate", "Prompt tokens served from the prefix cache.");
    s->m_prompt = C("sglang:prompt_tokens_total", "Prompt tokens of admitted sequences.");
    s->m_gen = C("sglang:generation_tokens_total", "Generated tokens.");
    s->m_reqs = C("sglang:num_requests_total", "Accepted generation requests.");
    s->m_aborted = C("sglang:num_aborted_requests_total", "Requests ended by abort.");
    s->m_version = G("areal_rollout_weight_version",
                     "The weight version serving (its number; -1 when not numeric).");
    s->m_updates = C("areal_rollout_weight_updates_total", "Successful weight swaps.");
    s->m_packed = G("areal_rollout_weights_packed",
                    "1 when the served weights have their packed decode copy (--no-prepack: 0).");
    s->m_blocks_used = G("areal_rollout_kv_blocks_used", "KV blocks referenced by sequences.");
    s->m_blocks_shared =
        G("areal_rollout_kv_blocks_shared", "KV blocks referenced by two or more sequences.");
    s->m_preempt = C("areal_rollout_preemptions_total", "Sequences preempted for KV space.");
#undef G
#undef C
    static const double b[] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
    s->m_e2e = metrics_register(r, METRIC_HISTOGRAM, "sglang:e2e_request_latency_seconds",
                                "Request latency from submit to the last token.", NULL, b, 12);
    return s->m_e2e && s->m_preempt ? 0 : -1;
}

static void bump(metrics_family *f, uint64_t now, uint64_t *last) {
    if (now > *last)
        metrics_counter_add(f, NULL, (double)(now - *last));
    *last = now;
}

static void h_metrics(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    areal_rollout_server *s = ud;
    areal_engine_stats st;
    areal_engine_get_stats(s->eng, &st);
    pthread_mutex_lock(&s->mmu);
    metrics_gauge_set(s->m_running, NULL, st.running);
    metrics_gauge_set(s->m_queued, NULL, st.queued);
    metrics_gauge_set(s->m_usage, NULL, st.token_usage);
    metrics_gauge_set(s->m_tput, NULL, st.gen_throughput);
    metrics_gauge_set(s->m_cache_hit, NULL,
                      st.prompt_tokens_total
                          ? (double)st.cached_tokens_total / (double)st.prompt_tokens_total
                          : 0.0);
    metrics_gauge_set(s->m_blocks_used, NULL, st.blocks_used);
    metrics_gauge_set(s->m_blocks_shared, NULL, st.blocks_shared);
    metrics_gauge_set(s->m_packed, NULL, st.weights_packed ? 1 : 0);
    char *end = NULL;
    double v = strtod(st.weight_version, &end);
    metrics_gauge_set(s->m_version, NULL, end && *end == '\0' && end != st.weight_version ? v : -1);
    bump(s->m_prompt, st.prompt_tokens_total, &s->last.prompt_tokens_total);
    bump(s->m_gen, st.generated_tokens_total, &s->last.generated_tokens_total);
    bump(s->m_reqs, st.requests_total, &s->last.requests_total);
    bump(s->m_aborted, st.requests_aborted, &s->last.requests_aborted);
    bump(s->m_updates, st.weight_updates, &s->last.weight_updates);
    bump(s->m_preempt, st.preemptions, &s->last.preemptions);
    size_t len = 0;
    char *body = metrics_render(s->reg, &len);
    pthread_mutex_unlock(&s->mmu);
    if (body == NULL) {
        areal_http_respond_error(x, 500, "out of memory");
        return;
    }
    areal_http_respond(x, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, body, len);
    free(body);
}

int srv_routes_control(areal_rollout_server *s, areal_error *err) {
    static const struct {
        const char *method, *path;
        areal_http_handler fn;
    } routes[] = {
        {"POST", "/pause_generation", h_pause},
        {"POST", "/continue_generation", h_continue},
        {"POST", "/abort_request", h_abort},
        {"POST", "/flush_cache", h_flush},
        {"GET", "/flush_cache", h_flush},
        {"GET", "/health", h_health},
        {"GET", "/health_generate", h_health_generate},
        {"GET", "/get_model_info", h_model_info},
        {"GET", "/get_server_info", h_server_info},
        {"GET", "/metrics", h_metrics},
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        int rc = areal_http_route(s->http, routes[i].method, routes[i].path, routes[i].fn, s, err);
        if (rc != AREAL_OK)
            return rc;
    }
    return AREAL_OK;
}
