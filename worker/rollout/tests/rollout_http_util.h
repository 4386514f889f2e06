/*
 * rollout_http_util.h - helpers of the rollout server's tests (header only):
 * model directories made from the fixtures (the reference Qwen2 weights, or
 * those weights scaled, as "new weights" of the same architecture, with the
 * fixture tokenizer), an in-process server, a libcurl client with JSON
 * bodies (also posted from a thread, for the calls that block until a
 * trainer sends), the reference the server is checked against:
 * areal_generate (the `areal-worker generate` path) on the same prompt, and
 * the check the weight-update tests make after each update (greedy outputs
 * of one prompt equal the reference on the expected weights, and the
 * expected weight_version). rt_setup_dirs / rt_teardown_dirs: the fixture
 * pair most of these tests share (the reference weights and those x 1.5).
 */
#ifndef ROLLOUT_HTTP_UTIL_H
#define ROLLOUT_HTTP_UTIL_H

#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "areal/model/checkpoint.h"
#include "areal/model/generate.h"
#include "areal/model/model.h"
#include "areal/rollout/server.h"

static inline const char *rt_fixture(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "worker/model/tests/fixtures/%s", name);
    if (access(buf, R_OK) != 0)
        snprintf(buf, cap, "model/tests/fixtures/%s", name);
    return buf;
}

static inline void rt_copy(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
}

/* A model directory: ref-qwen2's config and tokenizer, its weights times `scale`. */
static inline void rt_model_dir(char *dir, size_t cap, float scale) {
    snprintf(dir, cap, "/tmp/areal-rt-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char src[512], dst[600];
    rt_copy(rt_fixture(src, sizeof src, "ref-qwen2/config.json"),
            (snprintf(dst, sizeof dst, "%s/config.json", dir), dst));
    rt_copy(rt_fixture(src, sizeof src, "tok/tokenizer.json"),
            (snprintf(dst, sizeof dst, "%s/tokenizer.json", dir), dst));
    areal_model m;
    areal_error e;
    if (areal_model_load(&m, rt_fixture(src, sizeof src, "ref-qwen2"), NULL, &e) != 0)
        fail_msg("%s", e.msg);
    for (size_t i = 0; i < m.n_params; i++)
        m.params[i] *= scale;
    areal_st_out *t = calloc(m.n_specs, sizeof *t);
    int *shard = calloc(m.n_specs, sizeof *shard);
    for (size_t i = 0; i < m.n_specs; i++)
        t[i] = (areal_st_out){.name = m.specs[i].name,
                              .dtype = AREAL_DT_F32,
                              .ndim = m.specs[i].ndim,
                              .shape = m.specs[i].shape,
                              .data = m.params + m.offset[i]};
    if (areal_checkpoint_write(dir, t, m.n_specs, shard, 1, &e) != 0)
        fail_msg("%s", e.msg);
    free(t);
    free(shard);
    areal_model_free(&m);
}

static inline void rt_rmdir(const char *dir) {
    const char *names[] = {"config.json", "tokenizer.json", "model.safetensors"};
    char p[600];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

static inline areal_rollout_server *rt_server(const char *dir, const char *version) {
    areal_rollout_server_config cfg = {
        .model_dir = dir, .kv_bytes = 8u << 20, .weight_version = version, .max_body = 1 << 20};
    areal_rollout_server *s = NULL;
    areal_error e;
    if (areal_rollout_server_start(&cfg, &s, &e) != 0)
        fail_msg("%s", e.msg);
    return s;
}

typedef struct rt_resp {
    long code;
    char *body;
    size_t len;
    json_t *json; /* parsed body, or NULL */
    char retry_after[16];
} rt_resp;

static inline size_t rt_on_data(char *p, size_t sz, size_t n, void *ud) {
    rt_resp *r = ud;
    char *grown = realloc(r->body, r->len + sz * n + 1);
    assert_non_null(grown);
    r->body = grown;
    memcpy(r->body + r->len, p, sz * n);
    r->len += sz * n;
    r->body[r->len] = '\0';
    return sz * n;
}

static inline size_t rt_on_header(char *p, size_t sz, size_t n, void *ud) {
    rt_resp *r = ud;
    if (strncasecmp(p, "Retry-After:", 12) == 0)
        sscanf(p + 12, " %15s", r->retry_after);
    return sz * n;
}

/* One request on handle c (NULL: a fresh one); body NULL is a GET. */
static inline rt_resp rt_req(CURL *c, int port, const char *path, const char *body) {
    rt_resp r = {0};
    bool own = c == NULL;
    if (own)
        c = curl_easy_init();
    char url[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    struct curl_slist *h = curl_slist_append(NULL, "Expect:");
    h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, rt_on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, rt_on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    }
    CURLcode rc = curl_easy_perform(c);
    r.code = -1;
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.code);
    curl_slist_free_all(h);
    if (own)
        curl_easy_cleanup(c);
    if (r.body == NULL)
        r.body = calloc(1, 1);
    r.json = json_loads(r.body, 0, NULL);
    return r;
}

static inline void rt_free(rt_resp *r) {
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* POST with a printf-formatted body. */
static inline rt_resp rt_post(int port, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline rt_resp rt_post(int port, const char *path, const char *fmt, ...) {
    char *body = NULL;
    va_list ap;
    va_start(ap, fmt);
    assert_true(vasprintf(&body, fmt, ap) >= 0);
    va_end(ap);
    rt_resp r = rt_req(NULL, port, path, body);
    free(body);
    return r;
}

/* "[1,2,3]" of ids. */
static inline char *rt_ids_json(const int32_t *ids, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    char *s = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    return s;
}

/* output_ids of a /generate answer into out (returns the count). */
static inline int rt_output_ids(json_t *j, int32_t *out, int cap) {
    json_t *ids = json_object_get(j, "output_ids");
    assert_true(json_is_array(ids));
    int n = (int)json_array_size(ids);
    assert_true(n <= cap);
    for (int i = 0; i < n; i++)
        out[i] = (int32_t)json_integer_value(json_array_get(ids, (size_t)i));
    return n;
}

static inline const char *rt_finish(json_t *j) {
    return json_string_value(
        json_object_get(json_object_get(json_object_get(j, "meta_info"), "finish_reason"), "type"));
}

/* The greedy reference: areal_generate on dir's model, ending on stop[0..n_stop);
 * returns the count, logprobs into lps when not NULL. */
static inline int rt_reference_stop(const char *dir, const int32_t *prompt, int n, int max_new,
                                    const int32_t *stop, int n_stop, int32_t *out, float *lps) {
    areal_model m;
    areal_error e;
    if (areal_model_load(&m, dir, NULL, &e) != 0)
        fail_msg("%s", e.msg);
    areal_sampling s = {
        .temperature = 0, .top_p = 1, .max_new_tokens = max_new, .stop = stop, .n_stop = n_stop};
    areal_gen_out g;
    const int32_t *prompts[1] = {prompt};
    if (areal_generate(&m, prompts, &n, 1, &s, &g, &e) != 0)
        fail_msg("%s", e.msg);
    memcpy(out, g.tokens, (size_t)g.n * sizeof *out);
    if (lps)
        memcpy(lps, g.logprobs, (size_t)g.n * sizeof *lps);
    int k = g.n;
    areal_gen_out_free(&g);
    areal_model_free(&m);
    return k;
}

static inline int rt_reference(const char *dir, const int32_t *prompt, int n, int max_new,
                               int32_t *out) {
    areal_model m;
    areal_error e;
    if (areal_model_load(&m, dir, NULL, &e) != 0)
        fail_msg("%s", e.msg);
    areal_sampling s = {.temperature = 0, .top_p = 1, .max_new_tokens = max_new};
    areal_gen_out g;
    const int32_t *prompts[1] = {prompt};
    if (areal_generate(&m, prompts, &n, 1, &s, &g, &e) != 0)
        fail_msg("%s", e.msg);
    memcpy(out, g.tokens, (size_t)g.n * sizeof *out);
    int k = g.n;
    areal_gen_out_free(&g);
    areal_model_free(&m);
    return k;
}

/* ---- a request posted from a thread (rt_async_start, then rt_async_wait) ---------- */

typedef struct rt_async {
    int port;
    const char *path;
    const char *body; /* borrowed: lives until rt_async_wait returns */
    rt_resp r;        /* the answer, after rt_async_wait (caller rt_frees it) */
    pthread_t t;
} rt_async;

static inline void *rt_async_main(void *arg) {
    rt_async *a = arg;
    a->r = rt_req(NULL, a->port, a->path, a->body);
    return NULL;
}

/* POSTs body to path on port from a new thread (body NULL: a GET). */
static inline void rt_async_start(rt_async *a, int port, const char *path, const char *body) {
    a->port = port;
    a->path = path;
    a->body = body;
    assert_int_equal(pthread_create(&a->t, NULL, rt_async_main, a), 0);
}

/* Joins the thread of rt_async_start; the answer is then in a->r. */
static inline void rt_async_wait(rt_async *a) {
    pthread_join(a->t, NULL);
}

/* ---- after a weight update ---------------------------------------------------------- */

/* the weight-update tests' prompt (6 ids) */
#define RT_WSYNC_PROMPT                                                                            \
    { 9, 4, 33, 71, 2, 58 }

/*
 * The ids of a greedy /generate of 16 new tokens (ignore_eos) of the
 * weight-update tests' prompt on port (at most cap); its meta_info
 * weight_version into version (vcap bytes) when version is not NULL.
 */
static inline int rt_greedy(int port, int32_t *got, int cap, char *version, size_t vcap) {
    static const int32_t prompt[] = RT_WSYNC_PROMPT;
    char *ids = rt_ids_json(prompt, 6);
    rt_resp r = rt_post(port, "/generate",
                        "{\"input_ids\":%s,\"sampling_params\":{\"max_new_tokens\":16,"
                        "\"temperature\":0,\"ignore_eos\":true}}",
                        ids);
    free(ids);
    assert_int_equal(r.code, 200);
    int n = rt_output_ids(r.json, got, cap);
    if (version != NULL) {
        const char *v = json_string_value(
            json_object_get(json_object_get(r.json, "meta_info"), "weight_version"));
        snprintf(version, vcap, "%s", v ? v : "");
    }
    rt_free(&r);
    return n;
}

/*
 * Fails the test unless rt_greedy on port equals the reference greedy
 * outputs of the weights in model_dir and the server says weight_version
 * is version.
 */
static inline void rt_outputs_are(int port, const char *model_dir, const char *version) {
    static const int32_t prompt[] = RT_WSYNC_PROMPT;
    int32_t want[64], got[512];
    int nw = rt_reference(model_dir, prompt, 6, 16, want);
    char v[128];
    assert_int_equal(rt_greedy(port, got, 512, v, sizeof v), nw);
    assert_memory_equal(got, want, (size_t)nw * 4);
    assert_string_equal(v, version);
}

/* ---- the fixture pair: curl's globals, the reference weights and those x 1.5 -------- */

static inline void rt_setup_dirs(char *dir, char *dir_new, size_t cap) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rt_model_dir(dir, cap, 1.0f);
    rt_model_dir(dir_new, cap, 1.5f);
}

static inline void rt_teardown_dirs(const char *dir, const char *dir_new) {
    rt_rmdir(dir);
    rt_rmdir(dir_new);
    curl_global_cleanup();
}

static inline double rt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
