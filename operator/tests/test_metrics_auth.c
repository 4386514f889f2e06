/*
 * test_metrics_auth.c - the secure-metrics filter (areal/operator/metrics_auth.h)
 * against TokenReview and SubjectAccessReview answers in the shape the API
 * server gives them (operator/tests/data/metrics_auth/): an allowed account
 * (200, then cached: no more API calls), one not allowed (403 naming it), a
 * bad token (401 and no SubjectAccessReview), no or a non-bearer header (401,
 * no API call), the API failing or answering nonsense (500, never cached),
 * the TTLs on a fake clock (allowed longer than refused), and the bounded
 * cache. The requests sent are checked too: the token, and the user, groups,
 * uid, extra and nonResourceAttributes of the SubjectAccessReview.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/operator/metrics_auth.h"

#ifndef TEST_DATA_DIR
#define TEST_DATA_DIR "operator/tests/data"
#endif

static json_t *fixture(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/metrics_auth/%s", TEST_DATA_DIR, name);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (j == NULL)
        fail_msg("%s: %s", path, je.text);
    return j;
}

/* The fake API server: answers by the token (TokenReview) and a switch (SAR). */
typedef struct fake {
    const char *tr_file; /* for the good tokens ("good*") */
    const char *sar_file;
    int fail_tr, fail_sar; /* 1: transport error; 2: an answer without status */
    int n_tr, n_sar;
    json_t *last_tr, *last_sar; /* the bodies sent */
} fake;

static int review(void *ud, const char *resource, const json_t *body, json_t **out,
                  areal_error *err) {
    fake *f = ud;
    const char *tok = json_string_value(json_object_get(json_object_get(body, "spec"), "token"));
    if (strcmp(resource, "tokenreviews") == 0) {
        f->n_tr++;
        json_decref(f->last_tr);
        f->last_tr = json_deep_copy(body);
        if (f->fail_tr == 1)
            return areal_error_set(err, AREAL_EIO, -1, "connection refused");
        if (f->fail_tr == 2) {
            *out = json_pack("{s:s}", "kind", "TokenReview");
            return AREAL_OK;
        }
        *out = fixture(tok && strncmp(tok, "good", 4) == 0 ? f->tr_file : "tokenreview_bad.json");
        return AREAL_OK;
    }
    assert_string_equal(resource, "subjectaccessreviews");
    f->n_sar++;
    json_decref(f->last_sar);
    f->last_sar = json_deep_copy(body);
    if (f->fail_sar == 1)
        return areal_error_set(err, AREAL_EIO, -1, "HTTP 503");
    if (f->fail_sar == 2) {
        *out = json_pack("{s:{s:s}}", "status", "allowed", "yes");
        return AREAL_OK;
    }
    *out = fixture(f->sar_file);
    return AREAL_OK;
}

static int64_t clock_ms;
static int64_t fake_now(void) {
    return clock_ms;
}

static metrics_auth *new_auth(fake *f, int max_entries) {
    metrics_auth_config cfg = {.review = review,
                               .review_ud = f,
                               .allow_ttl_ms = 60000,
                               .deny_ttl_ms = 10000,
                               .max_entries = max_entries,
                               .now_ms = fake_now};
    metrics_auth *a = metrics_auth_new(&cfg);
    assert_non_null(a);
    return a;
}

static void fake_free(fake *f) {
    json_decref(f->last_tr);
    json_decref(f->last_sar);
}

static int check(metrics_auth *a, const char *auth, metrics_auth_decision *d) {
    metrics_auth_check(a, auth, "/metrics", "get", d);
    return d->status;
}

static void allowed_then_cached(void **state) {
    (void)state;
    fake f = {.tr_file = "tokenreview_ok.json", .sar_file = "sar_allowed.json"};
    metrics_auth *a = new_auth(&f, 0);
    metrics_auth_decision d;
    assert_false(metrics_auth_cached(a, "Bearer good-1", "/metrics", "get", &d));
    assert_int_equal(check(a, "Bearer good-1", &d), 200);
    assert_int_equal(f.n_tr, 1);
    assert_int_equal(f.n_sar, 1);
    /* what was asked: the token, then the user of the TokenReview for get /metrics */
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(f.last_tr, "spec"), "token")), "good-1");
    assert_string_equal(json_string_value(json_object_get(f.last_tr, "apiVersion")),
                        "authentication.k8s.io/v1");
    assert_string_equal(json_string_value(json_object_get(f.last_sar, "apiVersion")),
                        "authorization.k8s.io/v1");
    assert_string_equal(json_string_value(json_object_get(f.last_sar, "kind")),
                        "SubjectAccessReview");
    json_t *tr = fixture("tokenreview_ok.json");
    json_t *user = json_object_get(json_object_get(tr, "status"), "user");
    const json_t *spec = json_object_get(f.last_sar, "spec");
    assert_string_equal(json_string_value(json_object_get(spec, "user")),
                        json_string_value(json_object_get(user, "username")));
    assert_string_equal(json_string_value(json_object_get(spec, "uid")),
                        json_string_value(json_object_get(user, "uid")));
    assert_true(json_equal(json_object_get(spec, "groups"), json_object_get(user, "groups")));
    assert_true(json_equal(json_object_get(spec, "extra"), json_object_get(user, "extra")));
    json_decref(tr);
    const json_t *nra = json_object_get(spec, "nonResourceAttributes");
    assert_string_equal(json_string_value(json_object_get(nra, "path")), "/metrics");
    assert_string_equal(json_string_value(json_object_get(nra, "verb")), "get");
    assert_null(json_object_get(spec, "resourceAttributes"));
    /* the next scrapes cost nothing */
    for (int i = 0; i < 5; i++) {
        assert_true(metrics_auth_cached(a, "Bearer good-1", "/metrics", "get", &d));
        assert_int_equal(d.status, 200);
        assert_int_equal(check(a, "bearer  good-1 ", &d), 200); /* scheme case, spaces */
    }
    assert_int_equal(f.n_tr + f.n_sar, 2);
    long reviews, hits;
    metrics_auth_counts(a, &reviews, &hits);
    assert_int_equal(reviews, 2);
    assert_int_equal(hits, 10);
    /* another path or verb is another question */
    metrics_auth_check(a, "Bearer good-1", "/debug", "get", &d);
    assert_int_equal(f.n_sar, 2);
    metrics_auth_free(a);
    fake_free(&f);
}

static void denied_names_the_account(void **state) {
    (void)state;
    fake f = {.tr_file = "tokenreview_ok.json", .sar_file = "sar_denied.json"};
    metrics_auth *a = new_auth(&f, 0);
    metrics_auth_decision d;
    assert_int_equal(check(a, "Bearer good-2", &d), 403);
    assert_non_null(strstr(d.message, "system:serviceaccount:monitoring:prometheus"));
    assert_non_null(strstr(d.message, "get /metrics"));
    assert_null(strstr(d.message, "good-2"));             /* never the token */
    assert_int_equal(check(a, "Bearer good-2", &d), 403); /* cached */
    assert_int_equal(f.n_tr + f.n_sar, 2);
    metrics_auth_free(a);
    fake_free(&f);
}

static void bad_token_and_headers(void **state) {
    (void)state;
    fake f = {.tr_file = "tokenreview_ok.json", .sar_file = "sar_allowed.json"};
    metrics_auth *a = new_auth(&f, 0);
    metrics_auth_decision d;
    assert_int_equal(check(a, "Bearer forged", &d), 401);
    assert_non_null(strstr(d.message, "invalid bearer token"));
    assert_int_equal(f.n_tr, 1);
    assert_int_equal(f.n_sar, 0); /* no authorization for no one */
    assert_int_equal(check(a, "Bearer forged", &d), 401);
    assert_int_equal(f.n_tr, 1); /* refusals are cached too (briefly) */
    /* refused without asking */
    const char *headers[] = {"",        "Basic dXNlcjpwYXNz", "Bearer",
                             "Bearer ", "Bearer a b",         "Token good-1"};
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        assert_true(metrics_auth_cached(a, headers[i], "/metrics", "get", &d));
        assert_int_equal(d.status, 401);
        assert_int_equal(check(a, headers[i], &d), 401);
    }
    assert_true(metrics_auth_cached(a, NULL, "/metrics", "get", &d));
    assert_int_equal(d.status, 401);
    assert_int_equal(f.n_tr + f.n_sar, 1);
    metrics_auth_free(a);
    fake_free(&f);
}

static void api_errors_are_500_and_not_cached(void **state) {
    (void)state;
    fake f = {.tr_file = "tokenreview_ok.json", .sar_file = "sar_allowed.json", .fail_tr = 1};
    metrics_auth *a = new_auth(&f, 0);
    metrics_auth_decision d;
    assert_int_equal(check(a, "Bearer good-3", &d), 500);
    assert_non_null(strstr(d.message, "connection refused"));
    assert_false(metrics_auth_cached(a, "Bearer good-3", "/metrics", "get", &d));
    f.fail_tr = 2; /* an answer without status */
    assert_int_equal(check(a, "Bearer good-3", &d), 500);
    assert_int_equal(f.n_tr, 2);
    f.fail_tr = 0;
    f.fail_sar = 1; /* the SubjectAccessReview fails */
    assert_int_equal(check(a, "Bearer good-3", &d), 500);
    assert_non_null(strstr(d.message, "SubjectAccessReview"));
    f.fail_sar = 2; /* allowed is not a boolean: no allow */
    assert_int_equal(check(a, "Bearer good-3", &d), 500);
    assert_int_equal(f.n_tr, 4);
    assert_int_equal(f.n_sar, 2);
    /* the API server back: the same token is reviewed and allowed */
    f.fail_sar = 0;
    assert_int_equal(check(a, "Bearer good-3", &d), 200);
    assert_int_equal(f.n_tr, 5);
    metrics_auth_free(a);
    fake_free(&f);
}

static void ttls_expire(void **state) {
    (void)state;
    fake f = {.tr_file = "tokenreview_ok.json", .sar_file = "sar_allowed.json"};
    metrics_auth *a = new_auth(&f, 0);
    metrics_auth_decision d;
    clock_ms = 1000000;
    assert_int_equal(check(a, "Bearer good-4", &d), 200);
    assert_int_equal(check(a, "Bearer forged", &d), 401);
    assert_int_equal(f.n_tr, 2);
    clock_ms += 9999; /* both fresh */
    assert_int_equal(check(a, "Bearer good-4", &d), 200);
    assert_int_equal(check(a, "Bearer forged", &d), 401);
    assert_int_equal(f.n_tr, 2);
    clock_ms += 2; /* the refusal (10 s) expired, the allow (60 s) not */
    assert_int_equal(check(a, "Bearer forged", &d), 401);
    assert_int_equal(check(a, "Bearer good-4", &d), 200);
    assert_int_equal(f.n_tr, 3);
    /* the binding is removed: within the allow TTL the old answer stands, after it not */
    f.sar_file = "sar_denied.json";
    clock_ms = 1000000 + 59999;
    assert_int_equal(check(a, "Bearer good-4", &d), 200);
    clock_ms = 1000000 + 60000;
    assert_int_equal(check(a, "Bearer good-4", &d), 403);
    assert_int_equal(f.n_tr, 4);
    assert_int_equal(f.n_sar, 2);
    metrics_auth_free(a);
    fake_free(&f);
}

static void cache_is_bounded(void **state) {
    (void)state;
    fake f = {.tr_file = "tokenreview_ok.json", .sar_file = "sar_allowed.json"};
    metrics_auth *a = new_auth(&f, 2);
    metrics_auth_decision d;
    clock_ms = 5000;
    assert_int_equal(check(a, "Bearer good-a", &d), 200);
    clock_ms += 10;
    assert_int_equal(check(a, "Bearer good-b", &d), 200);
    clock_ms += 10;
    assert_int_equal(check(a, "Bearer good-c", &d), 200); /* evicts good-a (expires first) */
    assert_int_equal(f.n_tr, 3);
    assert_true(metrics_auth_cached(a, "Bearer good-b", "/metrics", "get", &d));
    assert_true(metrics_auth_cached(a, "Bearer good-c", "/metrics", "get", &d));
    assert_false(metrics_auth_cached(a, "Bearer good-a", "/metrics", "get", &d));
    /* many distinct tokens: still two entries, still right */
    for (int i = 0; i < 50; i++) {
        char h[32];
        snprintf(h, sizeof h, "Bearer good-%d", i);
        assert_int_equal(check(a, h, &d), 200);
    }
    assert_int_equal(check(a, "Bearer forged", &d), 401);
    metrics_auth_free(a);
    fake_free(&f);
    metrics_auth_config bad = {.review = NULL};
    assert_null(metrics_auth_new(&bad));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allowed_then_cached),
        cmocka_unit_test(denied_names_the_account),
        cmocka_unit_test(bad_token_and_headers),
        cmocka_unit_test(api_errors_are_500_and_not_cached),
        cmocka_unit_test(ttls_expire),
        cmocka_unit_test(cache_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
