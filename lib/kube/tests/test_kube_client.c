/* test_kube_client.c - verbs, errors, retries, limits and connection reuse against the
 * scripted loopback server (kube_test_server.h). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/kube/client.h"
#include "areal/kube/ratelimit.h"
#include "util/kube_test_server.h"

static const kube_resource PODS = {NULL, "v1", "pods", "default"};
static const kube_resource JOBS = {"areal.io", "v1alpha1", "arealjobs", "team-a"};

typedef struct fx {
    kts *srv;
    kube_config cfg;
    kube_client *c;
} fx;

static void cfg_for(kube_config *cfg, kts *srv) {
    kube_config_init(cfg);
    cfg->server = strdup(kts_url(srv));
    cfg->token = strdup("tok-0");
    cfg->allow_insecure = 1;
    cfg->qps = 0;
    cfg->backoff_base_ms = 5;
    cfg->backoff_max_ms = 40;
    cfg->timeout_ms = 5000;
}

static int setup(void **state) {
    fx *f = calloc(1, sizeof *f);
    f->srv = kts_start();
    assert_non_null(f->srv);
    cfg_for(&f->cfg, f->srv);
    kube_error e;
    f->c = kube_client_new(&f->cfg, &e);
    if (f->c == NULL)
        fail_msg("client: %s", e.msg);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fx *f = *state;
    kube_client_free(f->c);
    kube_config_free(&f->cfg);
    kts_stop(f->srv);
    free(f);
    return 0;
}

static kts_request req(fx *f, int i) {
    kts_request r;
    if (kts_get(f->srv, i, &r) != 0)
        fail_msg("no request %d (have %d)", i, kts_count(f->srv));
    return r;
}

static const char *str_at(json_t *o, const char *a, const char *b) {
    json_t *v = json_object_get(o, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

static const char STATUS_CONFLICT[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"Operation "
    "cannot be fulfilled on arealjobs.areal.io \\\"demo\\\": the object has been modified; "
    "please apply your changes to the latest version and try again\",\"reason\":\"Conflict\","
    "\"code\":409}";

static void get_builds_path_and_sends_token(void **state) {
    fx *f = *state;
    kts_push(f->srv, 200, NULL, "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p 1\"}}");
    json_t *o = NULL;
    kube_error e;
    assert_int_equal(kube_get(f->c, &PODS, "p 1", &o, &e), KUBE_OK);
    assert_string_equal(str_at(o, "metadata", "name"), "p 1");
    json_decref(o);
    kts_request r = req(f, 0);
    assert_string_equal(r.method, "GET");
    assert_string_equal(r.target, "/api/v1/namespaces/default/pods/p%201");
    assert_string_equal(r.auth, "Bearer tok-0");
}

static void not_found_keeps_status_reason_apart(void **state) {
    fx *f = *state;
    kts_push(f->srv, 404, NULL,
             "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"arealjobs.areal.io "
             "\\\"x\\\" not found\",\"reason\":\"NotFound\",\"code\":404}");
    json_t *o = (json_t *)1;
    kube_error e;
    assert_int_equal(kube_get(f->c, &JOBS, "x", &o, &e), KUBE_ENOTFOUND);
    assert_null(o);
    assert_int_equal(e.code, KUBE_ENOTFOUND);
    assert_int_equal(e.http_status, 404);
    assert_int_equal(e.curl_code, 0);
    assert_string_equal(e.reason, "NotFound");
    assert_non_null(strstr(e.msg, "not found"));
    assert_non_null(strstr(e.msg, "/apis/areal.io/v1alpha1/namespaces/team-a/arealjobs/x"));
}

static void create_posts_json(void **state) {
    fx *f = *state;
    kts_push(f->srv, 201, NULL, "{\"metadata\":{\"name\":\"demo\",\"uid\":\"u1\"}}");
    json_t *obj = json_pack("{s:s, s:{s:s}}", "kind", "AReaLJob", "metadata", "name", "demo");
    json_t *out = NULL;
    assert_int_equal(kube_create(f->c, &JOBS, obj, &out, NULL), KUBE_OK);
    assert_string_equal(str_at(out, "metadata", "uid"), "u1");
    kts_request r = req(f, 0);
    assert_string_equal(r.method, "POST");
    assert_string_equal(r.target, "/apis/areal.io/v1alpha1/namespaces/team-a/arealjobs");
    assert_string_equal(r.content_type, "application/json");
    json_t *sent = json_loads(r.body, 0, NULL);
    assert_true(json_equal(sent, obj));
    json_decref(sent);
    json_decref(obj);
    json_decref(out);
}

static void update_conflict_is_a_distinct_error(void **state) {
    fx *f = *state;
    kts_push(f->srv, 409, NULL, STATUS_CONFLICT);
    json_t *obj = json_pack("{s:{s:s, s:s}}", "metadata", "name", "demo", "resourceVersion", "7");
    json_t *out = NULL;
    kube_error e;
    assert_int_equal(kube_update(f->c, &JOBS, obj, &out, &e), KUBE_ECONFLICT);
    assert_null(out);
    assert_int_equal(e.http_status, 409);
    assert_string_equal(e.reason, "Conflict");
    assert_non_null(strstr(e.msg, "has been modified"));
    assert_int_equal(kts_count(f->srv), 1); /* a conflict is never retried blindly */
    kts_request r = req(f, 0);
    assert_string_equal(r.method, "PUT");
    assert_string_equal(r.target, "/apis/areal.io/v1alpha1/namespaces/team-a/arealjobs/demo");
    /* the status subresource */
    kts_push(f->srv, 200, NULL, "{}");
    assert_int_equal(kube_update_status(f->c, &JOBS, obj, NULL, &e), KUBE_OK);
    assert_string_equal(req(f, 1).target,
                        "/apis/areal.io/v1alpha1/namespaces/team-a/arealjobs/demo/status");
    json_decref(obj);
    json_t *noname = json_object();
    assert_int_equal(kube_update(f->c, &JOBS, noname, NULL, &e), KUBE_EINVAL);
    assert_non_null(strstr(e.msg, "metadata.name"));
    json_decref(noname);
}

static void patch_sets_content_type(void **state) {
    fx *f = *state;
    kts_push(f->srv, 200, NULL, "{}");
    kts_push(f->srv, 200, NULL, "{}");
    json_t *merge = json_pack("{s:{s:s}}", "status", "phase", "Running");
    json_t *ops =
        json_pack("[{s:s, s:s, s:i}]", "op", "replace", "path", "/spec/replicas", "value", 3);
    kube_error e;
    assert_int_equal(kube_patch(f->c, &JOBS, "demo", KUBE_PATCH_MERGE, merge, "status", NULL, &e),
                     KUBE_OK);
    assert_int_equal(kube_patch(f->c, &JOBS, "demo", KUBE_PATCH_JSON, ops, NULL, NULL, &e),
                     KUBE_OK);
    kts_request r0 = req(f, 0), r1 = req(f, 1);
    assert_string_equal(r0.method, "PATCH");
    assert_string_equal(r0.content_type, "application/merge-patch+json");
    assert_string_equal(r0.target,
                        "/apis/areal.io/v1alpha1/namespaces/team-a/arealjobs/demo/status");
    assert_string_equal(r1.content_type, "application/json-patch+json");
    json_t *sent = json_loads(r1.body, 0, NULL);
    assert_true(json_equal(sent, ops));
    json_decref(sent);
    /* shapes are checked before sending */
    assert_int_equal(kube_patch(f->c, &JOBS, "demo", KUBE_PATCH_JSON, merge, NULL, NULL, &e),
                     KUBE_EINVAL);
    assert_int_equal(kube_patch(f->c, &JOBS, "demo", KUBE_PATCH_MERGE, ops, NULL, NULL, &e),
                     KUBE_EINVAL);
    assert_int_equal(kts_count(f->srv), 2);
    json_decref(merge);
    json_decref(ops);
}

static void delete_sends_preconditions_and_policy(void **state) {
    fx *f = *state;
    kts_push(f->srv, 200, NULL, "{\"kind\":\"Status\",\"status\":\"Success\"}");
    kts_push(f->srv, 409, NULL,
             "{\"kind\":\"Status\",\"reason\":\"Conflict\",\"message\":\"Precondition failed: "
             "UID in precondition: u1, UID in object meta: u2\",\"code\":409}");
    kube_delete_opts o = {"u1", "9", "Foreground", -1};
    kube_error e;
    assert_int_equal(kube_delete(f->c, &PODS, "trainer-0", &o, NULL, &e), KUBE_OK);
    kts_request r = req(f, 0);
    assert_string_equal(r.method, "DELETE");
    assert_string_equal(r.target, "/api/v1/namespaces/default/pods/trainer-0");
    json_t *body = json_loads(r.body, 0, NULL);
    assert_string_equal(str_at(body, "propagationPolicy", NULL), "Foreground");
    assert_string_equal(str_at(body, "preconditions", "uid"), "u1");
    assert_string_equal(str_at(body, "preconditions", "resourceVersion"), "9");
    assert_null(json_object_get(body, "gracePeriodSeconds"));
    json_decref(body);
    assert_int_equal(kube_delete(f->c, &PODS, "trainer-0", &o, NULL, &e), KUBE_ECONFLICT);
    assert_non_null(strstr(e.msg, "Precondition failed"));
}

static void bind_posts_a_binding(void **state) {
    fx *f = *state;
    kts_push(f->srv, 201, NULL, "{\"kind\":\"Status\",\"status\":\"Success\"}");
    assert_int_equal(kube_bind_pod(f->c, "default", "trainer-1", "uid-9", "node-b", NULL), KUBE_OK);
    kts_request r = req(f, 0);
    assert_string_equal(r.method, "POST");
    assert_string_equal(r.target, "/api/v1/namespaces/default/pods/trainer-1/binding");
    json_t *b = json_loads(r.body, 0, NULL);
    assert_string_equal(str_at(b, "kind", NULL), "Binding");
    assert_string_equal(str_at(b, "target", "name"), "node-b");
    assert_string_equal(str_at(b, "target", "kind"), "Node");
    assert_string_equal(str_at(b, "metadata", "uid"), "uid-9");
    json_decref(b);
}

static void list_follows_continue_and_merges_pages(void **state) {
    fx *f = *state;
    kts_push(f->srv, 200, NULL,
             "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"500\",\"continue\":"
             "\"c/1+\",\"remainingItemCount\":3},\"items\":[{\"metadata\":{\"name\":\"a\"}},"
             "{\"metadata\":{\"name\":\"b\"}}]}");
    kts_push(f->srv, 200, NULL,
             "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"500\",\"continue\":"
             "\"c2\"},\"items\":[{\"metadata\":{\"name\":\"c\"}},{\"metadata\":{\"name\":\"d\"}}"
             "]}");
    kts_push(f->srv, 200, NULL,
             "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"500\"},\"items\":[{"
             "\"metadata\":{\"name\":\"e\"}}]}");
    kube_list_opts o = {"areal.io/job=demo,role in (trainer)", NULL, 2, 0};
    json_t *list = NULL;
    kube_error e;
    assert_int_equal(kube_list(f->c, &PODS, &o, &list, &e), KUBE_OK);
    json_t *items = json_object_get(list, "items");
    assert_int_equal(json_array_size(items), 5);
    const char *names = "abcde";
    for (size_t i = 0; i < 5; i++) {
        const char *n = str_at(json_array_get(items, i), "metadata", "name");
        assert_int_equal(n[0], names[i]);
    }
    assert_string_equal(str_at(list, "metadata", "resourceVersion"), "500");
    assert_null(json_object_get(json_object_get(list, "metadata"), "continue"));
    assert_null(json_object_get(json_object_get(list, "metadata"), "remainingItemCount"));
    json_decref(list);
    assert_int_equal(kts_count(f->srv), 3);
    assert_string_equal(req(f, 0).target,
                        "/api/v1/namespaces/default/pods?labelSelector=areal.io%2Fjob%3Ddemo%2C"
                        "role%20in%20%28trainer%29&limit=2");
    assert_non_null(strstr(req(f, 1).target, "&limit=2&continue=c%2F1%2B"));
    assert_non_null(strstr(req(f, 2).target, "&continue=c2"));
}

static void list_expired_continue_is_gone(void **state) {
    fx *f = *state;
    kts_push(f->srv, 200, NULL,
             "{\"metadata\":{\"resourceVersion\":\"5\",\"continue\":\"old\"},\"items\":[{}]}");
    kts_push(f->srv, 410, NULL,
             "{\"kind\":\"Status\",\"reason\":\"Expired\",\"message\":\"The provided continue "
             "parameter is too old\",\"code\":410}");
    kube_list_opts o = {NULL, NULL, 1, 0};
    json_t *list = (json_t *)1;
    kube_error e;
    assert_int_equal(kube_list(f->c, &PODS, &o, &list, &e), KUBE_EGONE);
    assert_null(list);
    assert_string_equal(e.reason, "Expired");
    /* the item bound */
    kts_push(f->srv, 200, NULL, "{\"metadata\":{},\"items\":[{},{},{}]}");
    kube_list_opts small = {NULL, NULL, 0, 2};
    assert_int_equal(kube_list(f->c, &PODS, &small, &list, &e), KUBE_ETOOBIG);
    assert_non_null(strstr(e.msg, "max_items"));
    /* not a list */
    kts_push(f->srv, 200, NULL, "{\"kind\":\"Pod\"}");
    assert_int_equal(kube_list(f->c, &PODS, NULL, &list, &e), KUBE_EDECODE);
    assert_non_null(strstr(e.msg, "not a list"));
}

static void retry_after_on_429_is_honoured(void **state) {
    fx *f = *state;
    kts_push(f->srv, 429, "Retry-After: 1\r\n",
             "{\"kind\":\"Status\",\"reason\":\"TooManyRequests\",\"code\":429}");
    kts_push(f->srv, 201, NULL, "{\"metadata\":{\"name\":\"n\"}}");
    json_t *obj = json_pack("{s:{s:s}}", "metadata", "name", "n");
    double t0 = kube_now();
    kube_error e;
    assert_int_equal(kube_create(f->c, &PODS, obj, NULL, &e), KUBE_OK); /* even a POST */
    double dt = kube_now() - t0;
    assert_true(dt >= 0.95);
    assert_true(dt < 5.0);
    assert_int_equal(kts_count(f->srv), 2);
    kube_client_stats st;
    kube_client_stats_get(f->c, &st);
    assert_int_equal(st.retries, 1);
    json_decref(obj);
}

static void server_errors_back_off_then_give_up(void **state) {
    fx *f = *state;
    kts_push(f->srv, 503, NULL, "{\"kind\":\"Status\",\"code\":503}");
    kts_push(f->srv, 502, NULL, "bad gateway");
    kts_push(f->srv, 200, NULL, "{\"ok\":true}");
    json_t *o = NULL;
    kube_error e;
    assert_int_equal(kube_get(f->c, &PODS, "p", &o, &e), KUBE_OK);
    assert_true(json_is_true(json_object_get(o, "ok")));
    json_decref(o);
    assert_int_equal(kts_count(f->srv), 3);
    /* more failures than max_retries: the last status is reported */
    for (int i = 0; i <= f->cfg.max_retries; i++)
        kts_push(f->srv, 503, NULL,
                 "{\"kind\":\"Status\",\"reason\":\"ServiceUnavailable\",\"message\":\"etcd "
                 "down\",\"code\":503}");
    assert_int_equal(kube_get(f->c, &PODS, "p", &o, &e), KUBE_EHTTP);
    assert_int_equal(e.http_status, 503);
    assert_string_equal(e.reason, "ServiceUnavailable");
    assert_int_equal(kts_count(f->srv), 3 + f->cfg.max_retries + 1);
    assert_int_equal(kts_pending(f->srv), 0);
    /* a POST that got a 500 without Retry-After is not repeated (it may have happened) */
    kts_push(f->srv, 500, NULL, "{\"kind\":\"Status\",\"code\":500}");
    json_t *obj = json_object();
    assert_int_equal(kube_create(f->c, &PODS, obj, NULL, &e), KUBE_EHTTP);
    assert_int_equal(e.http_status, 500);
    assert_int_equal(kts_count(f->srv), 3 + f->cfg.max_retries + 2);
    json_decref(obj);
}

static void malformed_json_is_a_clear_error(void **state) {
    fx *f = *state;
    kts_push(f->srv, 200, NULL, "{\"kind\":\"Pod\",\"metadata\":{\"name\":");
    json_t *o = (json_t *)1;
    kube_error e;
    assert_int_equal(kube_get(f->c, &PODS, "p", &o, &e), KUBE_EDECODE);
    assert_null(o);
    assert_non_null(strstr(e.msg, "not valid JSON"));
    assert_non_null(strstr(e.msg, "/api/v1/namespaces/default/pods/p"));
    /* an error body that is not a Status is quoted, not parsed as one */
    kts_push(f->srv, 403, NULL, "<html>forbidden</html>");
    assert_int_equal(kube_get(f->c, &PODS, "p", &o, &e), KUBE_EHTTP);
    assert_int_equal(e.http_status, 403);
    assert_string_equal(e.reason, "");
    assert_non_null(strstr(e.msg, "<html>forbidden"));
}

static void connections_are_reused(void **state) {
    fx *f = *state;
    for (int i = 0; i < 20; i++)
        kts_push(f->srv, 200, NULL, "{}");
    for (int i = 0; i < 20; i++)
        assert_int_equal(kube_get(f->c, &PODS, "p", NULL, NULL), KUBE_OK);
    assert_int_equal(kts_count(f->srv), 20);
    assert_int_equal(kts_accepts(f->srv), 1);
    assert_int_equal(req(f, 19).conn, 1);
    kube_client_stats st;
    kube_client_stats_get(f->c, &st);
    assert_int_equal(st.handles, 1);
    /* a server that closes the connection: the client reconnects, once */
    kts_push(f->srv, 200, "Connection: close\r\n", "{}");
    kts_push(f->srv, 200, NULL, "{}");
    kts_push(f->srv, 200, NULL, "{}");
    for (int i = 0; i < 3; i++)
        assert_int_equal(kube_get(f->c, &PODS, "p", NULL, NULL), KUBE_OK);
    assert_int_equal(kts_accepts(f->srv), 2);
}

static void body_over_the_bound_is_refused(void **state) {
    fx *f = *state;
    kube_config cfg;
    cfg_for(&cfg, f->srv);
    cfg.max_body = 100;
    kube_client *c = kube_client_new(&cfg, NULL);
    char big[300];
    memset(big, ' ', sizeof big);
    big[0] = '{';
    big[sizeof big - 2] = '}';
    big[sizeof big - 1] = '\0';
    kts_push(f->srv, 200, NULL, big);
    kube_error e;
    assert_int_equal(kube_get(c, &PODS, "p", NULL, &e), KUBE_ETOOBIG);
    assert_non_null(strstr(e.msg, "max_body (100 bytes)"));
    kube_client_free(c);
    kube_config_free(&cfg);
}

static void write_token(const char *path, const char *tok) {
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    FILE *fp = fopen(tmp, "w");
    assert_non_null(fp);
    fprintf(fp, "%s\n", tok);
    fclose(fp);
    assert_int_equal(rename(tmp, path), 0); /* atomic swap, as the kubelet does */
}

static void token_file_is_reread_when_it_rotates(void **state) {
    fx *f = *state;
    char dir[] = "/tmp/kube-token-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/token", dir);
    write_token(path, "first");
    kube_config cfg;
    cfg_for(&cfg, f->srv);
    free(cfg.token);
    cfg.token = NULL;
    cfg.token_file = strdup(path);
    kube_client *c = kube_client_new(&cfg, NULL);
    for (int i = 0; i < 3; i++)
        kts_push(f->srv, 200, NULL, "{}");
    assert_int_equal(kube_get(c, &PODS, "p", NULL, NULL), KUBE_OK);
    assert_int_equal(kube_get(c, &PODS, "p", NULL, NULL), KUBE_OK);
    write_token(path, "second");
    assert_int_equal(kube_get(c, &PODS, "p", NULL, NULL), KUBE_OK);
    assert_string_equal(req(f, 0).auth, "Bearer first");
    assert_string_equal(req(f, 1).auth, "Bearer first");
    assert_string_equal(req(f, 2).auth, "Bearer second");
    kube_client_stats st;
    kube_client_stats_get(c, &st);
    assert_int_equal(st.token_reloads, 2); /* not re-read while unchanged */
    /* a 401 forces a re-read and one more try */
    /* rewritten in place with the same size and mtime: stat() cannot see the change, but
     * the server's 401 makes the client re-read the file and try once more */
    struct stat before;
    assert_int_equal(stat(path, &before), 0);
    FILE *fp = fopen(path, "r+");
    assert_non_null(fp);
    fputs("SECOND\n", fp);
    fclose(fp);
    struct timespec times[2] = {before.st_atim, before.st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
    kts_push(f->srv, 401, NULL, "{\"kind\":\"Status\",\"reason\":\"Unauthorized\",\"code\":401}");
    kts_push(f->srv, 200, NULL, "{}");
    assert_int_equal(kube_get(c, &PODS, "p", NULL, NULL), KUBE_OK);
    assert_int_equal(kts_count(f->srv), 5);
    assert_string_equal(req(f, 3).auth, "Bearer second");
    assert_string_equal(req(f, 4).auth, "Bearer SECOND");
    kube_client_stats_get(c, &st);
    assert_int_equal(st.token_reloads, 3);
    /* a persistent 401 is reported */
    kts_push(f->srv, 401, NULL, "{\"kind\":\"Status\",\"reason\":\"Unauthorized\",\"code\":401}");
    kts_push(f->srv, 401, NULL, "{\"kind\":\"Status\",\"reason\":\"Unauthorized\",\"code\":401}");
    kube_error e;
    assert_int_equal(kube_get(c, &PODS, "p", NULL, &e), KUBE_EHTTP);
    assert_int_equal(e.http_status, 401);
    assert_string_equal(e.reason, "Unauthorized");
    kube_client_free(c);
    kube_config_free(&cfg);
    unlink(path);
    rmdir(dir);
}

static void qps_and_burst_pace_requests(void **state) {
    fx *f = *state;
    kube_config cfg;
    cfg_for(&cfg, f->srv);
    cfg.qps = 20;
    cfg.burst = 3;
    kube_client *c = kube_client_new(&cfg, NULL);
    for (int i = 0; i < 7; i++)
        kts_push(f->srv, 200, NULL, "{}");
    double t0 = kube_now();
    for (int i = 0; i < 7; i++)
        assert_int_equal(kube_get(c, &PODS, "p", NULL, NULL), KUBE_OK);
    double all = kube_now() - t0;
    assert_true(all >= 0.18); /* 3 at once, then 4 more at 20/s: ~0.2 s */
    assert_true(all < 3.0);
    kube_client_free(c);
    kube_config_free(&cfg);
    /* the bucket itself: a burst of 3 waits for nothing, the 4th for ~1/qps */
    kube_ratelimit rl;
    kube_ratelimit_init(&rl, 20, 3);
    for (int i = 0; i < 3; i++)
        assert_true(kube_ratelimit_take(&rl) == 0);
    double w = kube_ratelimit_take(&rl);
    assert_true(w > 0.01 && w <= 0.05);
    kube_ratelimit_destroy(&rl);
    kube_ratelimit_init(&rl, 0, 1);
    for (int i = 0; i < 100; i++)
        assert_true(kube_ratelimit_take(&rl) == 0); /* qps 0: unlimited */
    kube_ratelimit_destroy(&rl);
}

static void transport_errors_are_kept_apart(void **state) {
    fx *f = *state;
    /* a port with nothing listening: stop a server and reuse its address */
    kts *gone = kts_start();
    kube_config cfg;
    cfg_for(&cfg, gone);
    cfg.max_retries = 2;
    kts_stop(gone);
    kube_client *c = kube_client_new(&cfg, NULL);
    kube_error e;
    assert_int_equal(kube_get(c, &PODS, "p", NULL, &e), KUBE_ETRANSPORT);
    assert_int_equal(e.http_status, 0);
    assert_int_not_equal(e.curl_code, 0);
    assert_non_null(strstr(e.msg, "GET /api/v1/namespaces/default/pods/p"));
    kube_client_stats st;
    kube_client_stats_get(c, &st);
    assert_int_equal(st.requests, 3); /* refused connections are retried */
    kube_client_free(c);
    kube_config_free(&cfg);
    /* a dropped connection on a GET is retried; the retry succeeds */
    kts_push_drop(f->srv);
    kts_push(f->srv, 200, NULL, "{}");
    assert_int_equal(kube_get(f->c, &PODS, "p", NULL, &e), KUBE_OK);
    /* a request timeout */
    cfg_for(&cfg, f->srv);
    cfg.timeout_ms = 200;
    cfg.max_retries = 0;
    c = kube_client_new(&cfg, NULL);
    kts_push_stream(f->srv, "{\"slow\":", 0, 0, KTS_END_HOLD);
    double t0 = kube_now();
    assert_int_equal(kube_get(c, &PODS, "p", NULL, &e), KUBE_ETRANSPORT);
    assert_true(kube_now() - t0 < 2.0);
    assert_non_null(strstr(e.msg, "imeout")); /* "Timeout was reached" */
    kube_client_free(c);
    kube_config_free(&cfg);
}

static void bad_arguments_are_refused_before_sending(void **state) {
    fx *f = *state;
    kube_error e;
    kube_resource noversion = {NULL, NULL, "pods", NULL};
    assert_int_equal(kube_get(f->c, &noversion, "p", NULL, &e), KUBE_EINVAL);
    assert_int_equal(kube_get(f->c, &PODS, "..", NULL, &e), KUBE_EINVAL);
    assert_int_equal(kube_get(f->c, &PODS, NULL, NULL, &e), KUBE_EINVAL);
    assert_int_equal(kube_request(f->c, "GET", "no-slash", NULL, NULL, NULL, &e), KUBE_EINVAL);
    assert_int_equal(kube_bind_pod(f->c, "default", "p", NULL, "", &e), KUBE_EINVAL);
    assert_int_equal(kts_count(f->srv), 0);
    char *p = kube_resource_path(&(kube_resource){"", "v1", "nodes", NULL}, "n1", NULL, NULL);
    assert_string_equal(p, "/api/v1/nodes/n1");
    free(p);
}

typedef struct worker {
    kube_client *c;
    int ok;
} worker;

static void *hammer(void *arg) {
    worker *w = arg;
    for (int i = 0; i < 10; i++)
        w->ok += kube_get(w->c, &PODS, "p", NULL, NULL) == KUBE_OK;
    return NULL;
}

static void threads_share_one_client(void **state) {
    fx *f = *state;
    for (int i = 0; i < 40; i++)
        kts_push(f->srv, 200, NULL, "{}");
    pthread_t t[4];
    worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){f->c, 0};
        assert_int_equal(pthread_create(&t[i], NULL, hammer, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].ok, 10);
    }
    assert_int_equal(kts_count(f->srv), 40);
    /* at most one connection per concurrent caller, kept for reuse */
    assert_true(kts_accepts(f->srv) <= 4);
    kube_client_stats st;
    kube_client_stats_get(f->c, &st);
    assert_int_equal(st.requests, 40);
    assert_true(st.handles <= 4);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(get_builds_path_and_sends_token),
        T(not_found_keeps_status_reason_apart),
        T(create_posts_json),
        T(update_conflict_is_a_distinct_error),
        T(patch_sets_content_type),
        T(delete_sends_preconditions_and_policy),
        T(bind_posts_a_binding),
        T(list_follows_continue_and_merges_pages),
        T(list_expired_continue_is_gone),
        T(retry_after_on_429_is_honoured),
        T(server_errors_back_off_then_give_up),
        T(malformed_json_is_a_clear_error),
        T(connections_are_reused),
        T(body_over_the_bound_is_refused),
        T(token_file_is_reread_when_it_rotates),
        T(qps_and_burst_pace_requests),
        T(transport_errors_are_kept_apart),
        T(bad_arguments_are_refused_before_sending),
        T(threads_share_one_client),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
