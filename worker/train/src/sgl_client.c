/*
 * sgl_client.c - SGLang HTTP calls over libcurl (see sgl_client.h).
 *
 * The answer is parsed strictly where the trainer depends on it (ids and
 * logprobs must be present, numbers, and as many of one as of the other) and
 * leniently elsewhere: extra fields SGLang adds over versions are ignored.
 * 5xx and transport failures are AREAL_EIO because the controller treats
 * them alike: the request goes to another server.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/train/sgl_client.h"

struct areal_sgl_client {
    char addr[128];
    double timeout_s;
    CURL *h;
    struct curl_slist *hdrs;
};

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

static size_t on_write(char *data, size_t size, size_t nmemb, void *ctx) {
    buf *b = ctx;
    size_t n = size * nmemb;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (p == NULL)
            return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = '\0';
    return n;
}

int areal_sgl_client_create(const char *addr, double timeout_s, areal_sgl_client **out,
                            areal_error *err) {
    static int once;
    if (!once) {
        /* curl_global_init is not thread-safe; the trainer creates clients before its threads. */
        curl_global_init(CURL_GLOBAL_DEFAULT);
        once = 1;
    }
    areal_sgl_client *c = calloc(1, sizeof *c);
    if (c == NULL || (c->h = curl_easy_init()) == NULL) {
        free(c);
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a client of %s", addr);
    }
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    c->timeout_s = timeout_s > 0 ? timeout_s : 3600;
    c->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    *out = c;
    return AREAL_OK;
}

void areal_sgl_client_free(areal_sgl_client *c) {
    if (c == NULL)
        return;
    curl_easy_cleanup(c->h);
    curl_slist_free_all(c->hdrs);
    free(c);
}

const char *areal_sgl_client_addr(const areal_sgl_client *c) {
    return c->addr;
}

/* One request; body NULL is a GET. */
static int request(areal_sgl_client *c, const char *path, const char *body, json_t **answer,
                   areal_error *err) {
    char url[256], errbuf[CURL_ERROR_SIZE] = "";
    snprintf(url, sizeof url, "http://%s%s", c->addr, path);
    buf b = {0};
    CURL *h = c->h;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    if (body != NULL) {
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, c->hdrs);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    }
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    int rc = AREAL_OK;
    if (cc != CURLE_OK)
        rc = areal_error_set(err, AREAL_EIO, -1, "rollout server %s: %s: %s", c->addr, path,
                             errbuf[0] ? errbuf : curl_easy_strerror(cc));
    else if (status >= 500)
        rc = areal_error_set(err, AREAL_EIO, -1, "rollout server %s: %s answered %ld: %.200s",
                             c->addr, path, status, b.p ? b.p : "");
    else if (status >= 300)
        rc = areal_error_set(err, AREAL_EINVAL, -1, "rollout server %s: %s answered %ld: %.200s",
                             c->addr, path, status, b.p ? b.p : "");
    if (rc == AREAL_OK && answer != NULL) {
        json_error_t je;
        *answer = b.n ? json_loadb(b.p, b.n, 0, &je) : json_object();
        if (*answer == NULL)
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "rollout server %s: %s answered with bad JSON: %s", c->addr, path,
                                 je.text);
    }
    free(b.p);
    return rc;
}

int areal_sgl_post(areal_sgl_client *c, const char *path, json_t *body, json_t **answer,
                   areal_error *err) {
    if (answer)
        *answer = NULL;
    char *text = body ? json_dumps(body, JSON_COMPACT) : strdup("{}");
    if (text == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a request to %s", c->addr);
    int rc = request(c, path, text, answer, err);
    free(text);
    return rc;
}

int areal_sgl_get(areal_sgl_client *c, const char *path, json_t **answer, areal_error *err) {
    *answer = NULL;
    return request(c, path, NULL, answer, err);
}

int areal_sgl_health(areal_sgl_client *c, areal_error *err) {
    return request(c, "/health", NULL, NULL, err);
}

void areal_sgl_output_free(areal_sgl_output *o) {
    free(o->ids);
    free(o->logprobs);
    memset(o, 0, sizeof *o);
}

static int bad(const areal_sgl_client *c, areal_error *err, const char *what) {
    return areal_error_set(err, AREAL_EINVAL, -1, "rollout server %s: /generate answer: %s",
                           c->addr, what);
}

static int parse_output(const areal_sgl_client *c, json_t *doc, areal_sgl_output *out,
                        areal_error *err) {
    json_t *meta = json_object_get(doc, "meta_info");
    if (!json_is_object(meta))
        return bad(c, err, "no meta_info object");
    json_t *fr = json_object_get(meta, "finish_reason");
    const char *type =
        json_is_object(fr) ? json_string_value(json_object_get(fr, "type")) : json_string_value(fr);
    if (type == NULL)
        return bad(c, err, "no meta_info.finish_reason.type");
    if (strcmp(type, "stop") == 0 || strcmp(type, "tool_calls") == 0)
        out->finish = AREAL_SGL_STOP;
    else if (strcmp(type, "length") == 0)
        out->finish = AREAL_SGL_LENGTH;
    else if (strcmp(type, "abort") == 0)
        out->finish = AREAL_SGL_ABORT;
    else
        return bad(c, err, "finish_reason.type is not stop, length or abort");
    json_t *lp = json_object_get(meta, "output_token_logprobs");
    if (!json_is_array(lp))
        return bad(c, err, "no meta_info.output_token_logprobs (was return_logprob ignored?)");
    size_t n = json_array_size(lp);
    out->ids = malloc((n ? n : 1) * sizeof *out->ids);
    out->logprobs = malloc((n ? n : 1) * sizeof *out->logprobs);
    if (out->ids == NULL || out->logprobs == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for %zu tokens", n);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(lp, i);
        json_t *l = json_array_get(e, 0), *id = json_array_get(e, 1);
        if (!json_is_number(l) || !json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) > INT32_MAX)
            return bad(c, err, "an output_token_logprobs entry is not [logprob, id]");
        out->ids[i] = (int32_t)json_integer_value(id);
        out->logprobs[i] = (float)json_number_value(l);
    }
    out->n = (int)n;
    const char *wv = json_string_value(json_object_get(meta, "weight_version"));
    snprintf(out->weight_version, sizeof out->weight_version, "%s", wv ? wv : "");
    return AREAL_OK;
}

int areal_sgl_generate(areal_sgl_client *c, const int32_t *in, int n_in,
                       const areal_sgl_sampling *s, areal_sgl_output *out, areal_error *err) {
    memset(out, 0, sizeof *out);
    json_t *ids = json_array(), *stop = json_array();
    for (int i = 0; i < n_in; i++)
        json_array_append_new(ids, json_integer(in[i]));
    for (int i = 0; i < s->n_stop; i++)
        json_array_append_new(stop, json_integer(s->stop_token_ids[i]));
    json_t *sp = json_pack("{s:i,s:f,s:f,s:I,s:o,s:b,s:b}", "max_new_tokens", s->max_new_tokens,
                           "temperature", s->temperature, "top_p", s->top_p, "top_k",
                           (json_int_t)(s->top_k > 0 ? s->top_k : -1), "stop_token_ids", stop,
                           "ignore_eos", s->ignore_eos, "skip_special_tokens", 0);
    if (sp && s->has_seed)
        /* SGLang (and areal-worker serve) take seeds in 0..2^62 */
        json_object_set_new(sp, "sampling_seed", json_integer((json_int_t)(s->seed >> 2)));
    json_t *body = json_pack("{s:o,s:o,s:b,s:b}", "input_ids", ids, "sampling_params", sp,
                             "return_logprob", 1, "stream", 0);
    if (body == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a /generate request");
    json_t *answer = NULL;
    int rc = areal_sgl_post(c, "/generate", body, &answer, err);
    json_decref(body);
    if (rc == AREAL_OK) {
        /* SGLang answers a single request with an object, a batch with a list. */
        json_t *doc = json_is_array(answer) ? json_array_get(answer, 0) : answer;
        rc = parse_output(c, doc, out, err);
        if (rc != AREAL_OK)
            areal_sgl_output_free(out);
    }
    json_decref(answer);
    return rc;
}
