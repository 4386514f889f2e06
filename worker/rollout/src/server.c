/*
 * server.c - see areal/rollout/server.h: loading the model directory,
 * starting the engine and the HTTP routes, the control thread that runs
 * blocking operations in arrival order, draining on SIGTERM, and the small
 * helpers the endpoint files share (JSON replies, strict bodies, UTF-8-safe
 * decoding).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "areal/model/config.h"
#include "server_internal.h"

/* ---- helpers ---------------------------------------------------------------- */

void srv_json(areal_http_exchange *x, int status, json_t *j) {
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (text == NULL) {
        areal_http_respond_error(x, 500, "out of memory");
        return;
    }
    areal_http_respond(x, status, "application/json", NULL, text, strlen(text));
    free(text);
}

json_t *srv_body(areal_http_exchange *x, const areal_http_request *r) {
    if (r->body_len == 0)
        return json_object();
    json_error_t je;
    json_t *j = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &je);
    char msg[300];
    if (j == NULL) {
        snprintf(msg, sizeof msg, "the body is not valid JSON: %s (line %d, column %d)", je.text,
                 je.line, je.column);
        areal_http_respond_error(x, 400, msg);
        return NULL;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        areal_http_respond_error(x, 400, "the body must be a JSON object");
        return NULL;
    }
    return j;
}

bool srv_known(areal_http_exchange *x, json_t *j, const char *endpoint, const char *const *known) {
    const char *key;
    json_t *v;
    json_object_foreach(j, key, v) {
        const char *const *k = known;
        while (*k && strcmp(*k, key) != 0)
            k++;
        if (*k == NULL) {
            char msg[512];
            int n =
                snprintf(msg, sizeof msg, "%.100s is not a field of %s (fields:", key, endpoint);
            for (k = known; *k && n > 0 && (size_t)n < sizeof msg; k++)
                n += snprintf(msg + n, sizeof msg - (size_t)n, " %s", *k);
            if (n > 0 && (size_t)n < sizeof msg - 1)
                snprintf(msg + n, sizeof msg - (size_t)n, ")");
            areal_http_respond_error(x, 400, msg);
            return false;
        }
    }
    return true;
}

/* Length of the valid UTF-8 sequence at p (1..4), 0 when invalid, -1 when cut short. */
static int utf8_len(const unsigned char *p, size_t left) {
    int n = p[0] < 0x80             ? 1
            : (p[0] & 0xE0) == 0xC0 ? 2
            : (p[0] & 0xF0) == 0xE0 ? 3
            : (p[0] & 0xF8) == 0xF0 ? 4
                                    : 0;
    if (n == 0 || (n == 2 && p[0] < 0xC2) || (n == 4 && p[0] > 0xF4))
        return 0;
    for (int i = 1; i < n; i++) {
        if ((size_t)i >= left)
            return -1;
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    }
    if (n == 3 && ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0)))
        return 0;
    if (n == 4 && ((p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90)))
        return 0;
    return n;
}

char *srv_decode(areal_rollout_server *s, const int32_t *ids, int n, bool skip_special,
                 bool partial) {
    char *raw = NULL;
    size_t len = 0;
    if (s->tok == NULL || n == 0 ||
        areal_tokenizer_decode(s->tok, ids, (size_t)n, skip_special, &raw, &len, NULL) != 0) {
        free(raw);
        return strdup("");
    }
    char *out = malloc(len * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; out && i < len;) {
        int k = utf8_len((const unsigned char *)raw + i, len - i);
        if (k < 0 && partial)
            break; /* the rest of this character comes with the next token */
        if (k <= 0) {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
            continue;
        }
        memcpy(out + o, raw + i, (size_t)k);
        o += (size_t)k;
        i += (size_t)k;
    }
    if (out)
        out[o] = '\0';
    free(raw);
    return out;
}

/* ---- control thread ------------------------------------------------------------ */

void srv_ctl(areal_rollout_server *s, ctl_fn fn, areal_http_exchange *x,
             const areal_http_request *r) {
    ctl_job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        areal_http_respond_error(x, 500, "out of memory");
        return;
    }
    *j = (ctl_job){.fn = fn, .x = x, .r = r};
    pthread_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = j;
    else
        s->head = j;
    s->tail = j;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void *ctl_main(void *arg) {
    areal_rollout_server *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->head == NULL && !s->ctl_stop)
            pthread_cond_wait(&s->cv, &s->mu);
        ctl_job *j = s->head;
        if (j == NULL)
            break;
        s->head = j->next;
        if (s->head == NULL)
            s->tail = NULL;
        pthread_mutex_unlock(&s->mu);
        if (s->ctl_stop)
            areal_http_respond_error(j->x, 503, "the server is shutting down");
        else
            j->fn(s, j->x, j->r);
        free(j);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- lifecycle ---------------------------------------------------------------- */

static int load_engine(areal_rollout_server *s, areal_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", s->model_dir);
    if (access(path, R_OK) == 0 && areal_tokenizer_load(path, &s->tok, err) != AREAL_OK)
        return err ? err->code : AREAL_EINVAL;
    bool found = false;
    s->chat = areal_chat_chatml;
    int trc = areal_chat_template_load(s->model_dir, &s->chat, &found, err);
    if (trc != AREAL_OK)
        return trc; /* a template it cannot render: refuse at start, not at the first chat */
    if (!found)
        s->chat = areal_chat_chatml;
    areal_model m;
    int rc = srv_load_model(s->model_dir, s->cfg.tensor_parallel, 0, &m, err);
    if (rc != AREAL_OK)
        return rc;
    s->mcfg = m.cfg;
    /* end of sequence: config.json's eos_token_id (a number or a list), then the Qwen
     * tokenizer's <|im_end|> and <|endoftext|>, as the generate command does */
    int32_t eos[8];
    int n_eos = 0;
    snprintf(path, sizeof path, "%s/config.json", s->model_dir);
    json_t *cj = json_load_file(path, 0, NULL), *e = json_object_get(cj, "eos_token_id");
    for (size_t i = 0; i < (json_is_array(e) ? json_array_size(e) : 1) && n_eos < 4; i++) {
        json_t *v = json_is_array(e) ? json_array_get(e, i) : e;
        if (json_is_integer(v) && json_integer_value(v) >= 0 &&
            json_integer_value(v) < m.cfg.vocab_size)
            eos[n_eos++] = (int32_t)json_integer_value(v);
    }
    json_decref(cj);
    const char *names[] = {"<|im_end|>", "<|endoftext|>"};
    for (int i = 0; s->tok && i < 2; i++) {
        int32_t id = areal_tokenizer_token_id(s->tok, names[i]);
        bool dup = false;
        for (int k = 0; k < n_eos; k++)
            dup = dup || eos[k] == id;
        if (id >= 0 && id < m.cfg.vocab_size && !dup)
            eos[n_eos++] = id;
    }
    areal_engine_config ec = {.kv_bytes = s->cfg.kv_bytes ? s->cfg.kv_bytes : (64u << 20),
                              .max_running = s->cfg.max_running,
                              .max_queued = s->cfg.max_queued,
                              .threads = s->cfg.threads,
                              .tensor_parallel = s->cfg.tensor_parallel,
                              .tp_group = s->cfg.tp_group,
                              .eos_token_ids = eos,
                              .n_eos_token_ids = n_eos,
                              .weight_version = s->cfg.weight_version,
                              .disable_prefix_cache = s->cfg.disable_prefix_cache,
                              .no_prepack = s->cfg.no_prepack,
                              .gpu = s->cfg.gpu};
    rc = areal_engine_create(&m, &ec, &s->eng, err);
    if (rc != AREAL_OK && ec.gpu) { /* the GPU refused (or failed): today's CPU engine, and why */
        snprintf(s->backend_note, sizeof s->backend_note,
                 "rollout: the engine stays on the CPU: %s", err->msg);
        ec.gpu = false;
        rc = areal_engine_create(&m, &ec, &s->eng, err);
    } else if (rc == AREAL_OK && ec.gpu) {
        snprintf(s->backend_note, sizeof s->backend_note,
                 "rollout: the engine runs on the GPU model");
    }
    if (rc != AREAL_OK)
        areal_model_free(&m);
    return rc;
}

const char *areal_rollout_server_backend_note(const areal_rollout_server *s) {
    return s->backend_note;
}

int areal_rollout_server_start(const areal_rollout_server_config *cfg, areal_rollout_server **out,
                               areal_error *err) {
    *out = NULL;
    if (cfg == NULL || cfg->model_dir == NULL || cfg->model_dir[0] == '\0')
        return areal_error_set(err, AREAL_EINVAL, -1, "--model DIR is required");
    areal_rollout_server *s = calloc(1, sizeof *s);
    if (s == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    s->cfg = *cfg;
    snprintf(s->model_dir, sizeof s->model_dir, "%s", cfg->model_dir);
    snprintf(s->host, sizeof s->host, "%s", cfg->host ? cfg->host : "127.0.0.1");
    snprintf(s->advertise, sizeof s->advertise, "%s",
             cfg->advertise_host ? cfg->advertise_host : s->host);
    /* the served name: the directory's last component ("dir/" and "a/b" alike) */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", s->model_dir);
    size_t tl = strlen(tmp);
    while (tl > 1 && tmp[tl - 1] == '/')
        tmp[--tl] = '\0';
    const char *base = strrchr(tmp, '/');
    base = base ? base + 1 : tmp;
    if (cfg->served_name)
        base = cfg->served_name;
    snprintf(s->served_name, sizeof s->served_name, "%.255s", base);
    s->cfg.model_dir = s->model_dir;
    s->cfg.host = s->host;
    if (s->cfg.comm_timeout_ms <= 0)
        s->cfg.comm_timeout_ms = 60000;
    s->created = (long long)time(NULL);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->mmu, NULL);
    pthread_mutex_init(&s->smu, NULL);
    pthread_cond_init(&s->scv, NULL);
    int rc = load_engine(s, err);
    if (rc == AREAL_OK) {
        s->lim = (rr_limits){.vocab = s->mcfg.vocab_size,
                             .context = s->mcfg.max_position_embeddings,
                             .tok = s->tok,
                             .model_name = s->served_name,
                             .chat = &s->chat};
        areal_http_config hc = {.host = s->host,
                                .port = cfg->port,
                                .max_body = cfg->max_body ? cfg->max_body : (64u << 20)};
        s->http = areal_http_new(&hc);
        rc = s->http && srv_metrics_init(s) == 0 ? AREAL_OK
                                                 : areal_error_set(err, AREAL_ENOMEM, -1, "oom");
    }
    if (rc == AREAL_OK)
        rc = srv_routes_generate(s, err);
    if (rc == AREAL_OK)
        rc = srv_routes_control(s, err);
    if (rc == AREAL_OK)
        rc = srv_routes_weights(s, err);
    if (rc == AREAL_OK)
        rc = srv_routes_peer(s, err);
    if (rc == AREAL_OK && pthread_create(&s->ctl, NULL, ctl_main, s) != 0)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "cannot start the control thread");
    if (rc != AREAL_OK) {
        areal_http_stop(s->http);
        areal_engine_destroy(s->eng);
        areal_tokenizer_free(s->tok);
        metrics_registry_free(s->reg);
        free(s);
        return rc;
    }
    rc = areal_http_start(s->http, err);
    if (rc != AREAL_OK) {
        areal_rollout_server_stop(s);
        return rc;
    }
    *out = s;
    return AREAL_OK;
}

int areal_rollout_server_port(const areal_rollout_server *s) {
    return areal_http_port(s->http);
}

void areal_rollout_server_version(areal_rollout_server *s, char *buf, size_t cap) {
    areal_engine_stats st;
    areal_engine_get_stats(s->eng, &st);
    snprintf(buf, cap, "%s", st.weight_version);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void areal_rollout_server_drain(areal_rollout_server *s, int grace_ms) {
    atomic_store(&s->draining, true);
    for (int waited = 0; waited < grace_ms; waited += 20) {
        areal_engine_stats st;
        areal_engine_get_stats(s->eng, &st);
        if (st.live_requests == 0)
            break;
        sleep_ms(20);
    }
    areal_engine_drain(s->eng, true); /* what is still running ends with abort */
    for (int i = 0; i < 250 && atomic_load(&s->open_gens) > 0; i++)
        sleep_ms(20);
    sleep_ms(50); /* the service thread writes the last answers */
}

void areal_rollout_server_stop(areal_rollout_server *s) {
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->ctl_stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->ctl, NULL);
    srv_peer_stop(s); /* the streams hold lent models: before the engine goes */
    /* HTTP stops before the engine is freed, so no handler can submit to a freed
     * engine; the engine is drained first so a request arriving in between gets
     * ESTOPPED (503) and what is live ends with abort, answered while HTTP still
     * runs. Rejected: destroying the engine first (the old order), which left a
     * window where a new /generate reached freed memory. */
    areal_engine_drain(s->eng, true);
    for (int i = 0; i < 100 && atomic_load(&s->open_gens) > 0; i++)
        sleep_ms(20);
    areal_http_stop(s->http); /* answers still pending are dropped through the hub */
    areal_engine_destroy(s->eng);
    srv_weights_free(s);
    areal_tokenizer_free(s->tok);
    metrics_registry_free(s->reg);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mmu);
    pthread_mutex_destroy(&s->smu);
    pthread_cond_destroy(&s->scv);
    free(s);
}
