/*
 * test_oom_kube.c - `make test-oom` over the Kubernetes client against
 * recorded answers of the scripted loopback server (kube_test_server.h, its
 * handler answering every request on the server's threads, which are never
 * failed): a client is made, GETs a pod, LISTs pods in two pages, creates,
 * merge-patches and deletes; and the watch-line decoder. Each fails every
 * allocation of the calling thread once (oom.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "areal/kube/client.h"
#include "areal/kube/config.h"
#include "areal/kube/watch.h"
#include "oom.h"
#include "../../lib/kube/tests/util/kube_test_server.h"

static const kube_resource PODS = {NULL, "v1", "pods", "default"};

static const char *POD =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
    "\"namespace\":\"default\",\"resourceVersion\":\"7\",\"labels\":{\"a\":"
    "\"b\"}},\"spec\":{\"nodeName\":\"n1\"},\"status\":{\"phase\":\"Running\"}}";
static const char *PAGE1 = "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"9\","
                           "\"continue\":\"next\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},"
                           "{\"metadata\":{\"name\":\"b\"}}]}";
static const char *PAGE2 = "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"9\"},"
                           "\"items\":[{\"metadata\":{\"name\":\"c\"}}]}";

/* The recorded answers, by request: a list page by its continue token, else the pod. */
static int answer(void *ud, const kts_request *rq, kts_answer *ans) {
    (void)ud;
    const char *body = POD;
    size_t n = strcspn(rq->target, "?");
    if (strcmp(rq->method, "GET") == 0 && n >= 5 && strncmp(rq->target + n - 5, "/pods", 5) == 0)
        body = strstr(rq->target, "continue=next") ? PAGE2 : PAGE1;
    *ans = (kts_answer){.status = strcmp(rq->method, "POST") == 0 ? 201 : 200,
                        .body = strdup(body),
                        .len = strlen(body)};
    return 1;
}

typedef struct fx {
    kts *srv;
    json_t *pod, *patch;
} fx;

static int client_calls(void *ud) {
    fx *f = ud;
    /* a server per run, outside the count: one holds 128 connections and 512 requests */
    oom_pause();
    f->srv = kts_start();
    if (f->srv != NULL)
        kts_set_handler(f->srv, answer, NULL);
    oom_resume();
    if (f->srv == NULL)
        return KUBE_EIO;
    kube_config cfg;
    kube_config_init(&cfg);
    kube_error err;
    int rc = KUBE_OK;
    cfg.server = strdup(kts_url(f->srv));
    cfg.token = strdup("tok");
    if (cfg.server == NULL || cfg.token == NULL)
        rc = KUBE_ENOMEM;
    cfg.allow_insecure = 1;
    cfg.qps = 0;
    cfg.max_retries = 0;
    cfg.timeout_ms = 5000;
    kube_client *c = rc == KUBE_OK ? kube_client_new(&cfg, &err) : NULL;
    if (rc == KUBE_OK && c == NULL)
        rc = err.code;
    json_t *out = NULL;
    if (rc == KUBE_OK && (rc = kube_get(c, &PODS, "p", &out, &err)) == KUBE_OK) {
        json_decref(out);
        kube_list_opts lo = {.label_selector = "a=b", .limit = 2};
        rc = kube_list(c, &PODS, &lo, &out, &err);
        if (rc == KUBE_OK && json_array_size(json_object_get(out, "items")) != 3)
            rc = KUBE_EDECODE;
        json_decref(out);
    }
    if (rc == KUBE_OK && (rc = kube_create(c, &PODS, f->pod, &out, &err)) == KUBE_OK)
        json_decref(out);
    if (rc == KUBE_OK &&
        (rc = kube_patch(c, &PODS, "p", KUBE_PATCH_MERGE, f->patch, NULL, &out, &err)) == KUBE_OK)
        json_decref(out);
    if (rc == KUBE_OK && (rc = kube_delete(c, &PODS, "p", NULL, &out, &err)) == KUBE_OK)
        json_decref(out);
    if (getenv("OOM_DEBUG") && rc != KUBE_OK)
        fprintf(stderr, "rc %d: %s\n", rc, err.msg);
    kube_client_free(c);
    kube_config_free(&cfg);
    oom_pause();
    kts_stop(f->srv);
    oom_resume();
    return rc;
}

static int watch_lines(void *ud) {
    (void)ud;
    static const char *const lines[] = {
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"3\"}}}",
        "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"4\"}}}",
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"message\":"
        "\"too old resource version\"}}"};
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
        kube_event ev;
        kube_error err;
        int rc = kube_event_decode(lines[i], strlen(lines[i]), &ev, &err);
        if (rc != KUBE_OK)
            return rc;
        kube_event_clear(&ev);
    }
    return 0;
}

static void client(void **state) {
    (void)state;
    fx f = {0};
    f.pod = json_loads(POD, 0, NULL);
    f.patch = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "c", "d");
    assert_true(f.pod && f.patch);
    oom_torture("kube client calls", client_calls, &f, KUBE_ENOMEM);
    json_decref(f.pod);
    json_decref(f.patch);
}

static void watch_decode(void **state) {
    (void)state;
    oom_torture("kube watch events", watch_lines, NULL, KUBE_ENOMEM);
}

int main(void) {
    oom_setup();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(client),
        cmocka_unit_test(watch_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
