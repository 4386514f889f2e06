/*
 * test_metrics.c - the Prometheus registry: exact exposition text, histogram
 * buckets, escaping, refusals of bad input, and exact totals under threads.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "areal/http/metrics.h"

static void renders_counters_and_gauges_exactly(void **state) {
    (void)state;
    metrics_registry *r = metrics_registry_new();
    const char *verb_code[] = {"verb", "code", NULL};
    metrics_family *req = metrics_register(r, METRIC_COUNTER, "areal_api_requests_total",
                                           "API requests by verb and code.", verb_code, NULL, 0);
    metrics_family *depth =
        metrics_register(r, METRIC_GAUGE, "areal_workqueue_depth", "Keys waiting.", NULL, NULL, 0);
    assert_non_null(req);
    assert_non_null(depth);
    const char *get200[] = {"GET", "200"}, *post409[] = {"POST", "409"};
    assert_int_equal(metrics_counter_add(req, get200, 1), 0);
    assert_int_equal(metrics_counter_add(req, get200, 2), 0);
    assert_int_equal(metrics_counter_add(req, post409, 1), 0);
    assert_int_equal(metrics_gauge_set(depth, NULL, 7), 0);
    assert_int_equal(metrics_gauge_add(depth, NULL, -2.5), 0);
    char *text = metrics_render(r, NULL);
    assert_string_equal(text, "# HELP areal_api_requests_total API requests by verb and code.\n"
                              "# TYPE areal_api_requests_total counter\n"
                              "areal_api_requests_total{verb=\"GET\",code=\"200\"} 3\n"
                              "areal_api_requests_total{verb=\"POST\",code=\"409\"} 1\n"
                              "# HELP areal_workqueue_depth Keys waiting.\n"
                              "# TYPE areal_workqueue_depth gauge\n"
                              "areal_workqueue_depth 4.5\n");
    free(text);
    metrics_registry_free(r);
}

static void histogram_buckets_are_cumulative(void **state) {
    (void)state;
    metrics_registry *r = metrics_registry_new();
    const double b[] = {0.01, 0.1, 1};
    metrics_family *h = metrics_register(r, METRIC_HISTOGRAM, "areal_reconcile_seconds",
                                         "Reconcile latency.", NULL, b, 3);
    assert_non_null(h);
    const double obs[] = {0.0078125, 0.0625, 0.0625, 0.5, 4}; /* exact in binary */
    for (int i = 0; i < 5; i++)
        assert_int_equal(metrics_histogram_observe(h, NULL, obs[i]), 0);
    char *text = metrics_render(r, NULL);
    assert_non_null(strstr(text, "areal_reconcile_seconds_bucket{le=\"0.01\"} 1\n"
                                 "areal_reconcile_seconds_bucket{le=\"0.1\"} 3\n"
                                 "areal_reconcile_seconds_bucket{le=\"1\"} 4\n"
                                 "areal_reconcile_seconds_bucket{le=\"+Inf\"} 5\n"
                                 "areal_reconcile_seconds_sum 4.6328125\n"
                                 "areal_reconcile_seconds_count 5\n"));
    free(text);
    metrics_registry_free(r);
}

static void escapes_label_values_and_help(void **state) {
    (void)state;
    metrics_registry *r = metrics_registry_new();
    const char *labels[] = {"job", NULL};
    metrics_family *f =
        metrics_register(r, METRIC_GAUGE, "areal_x", "line1\nline2 \\ \"q\"", labels, NULL, 0);
    const char *v[] = {"a\"b\\c\nd"};
    assert_int_equal(metrics_gauge_set(f, v, 1), 0);
    char *text = metrics_render(r, NULL);
    assert_non_null(strstr(text, "# HELP areal_x line1\\nline2 \\\\ \"q\"\n"));
    assert_non_null(strstr(text, "areal_x{job=\"a\\\"b\\\\c\\nd\"} 1\n"));
    free(text);
    metrics_family_reset(f);
    text = metrics_render(r, NULL);
    assert_null(strstr(text, "areal_x{"));
    free(text);
    metrics_registry_free(r);
}

static void refuses_bad_input(void **state) {
    (void)state;
    metrics_registry *r = metrics_registry_new();
    const char *labels[] = {"phase", NULL}, *le[] = {"le", NULL}, *bad_label[] = {"a:b", NULL};
    const double down[] = {1, 0.5};
    assert_null(metrics_register(r, METRIC_COUNTER, "9bad", "", NULL, NULL, 0));
    assert_null(metrics_register(r, METRIC_COUNTER, "has space", "", NULL, NULL, 0));
    assert_null(metrics_register(r, METRIC_COUNTER, "ok", "", le, NULL, 0));
    assert_null(metrics_register(r, METRIC_COUNTER, "ok", "", bad_label, NULL, 0));
    assert_null(metrics_register(r, METRIC_HISTOGRAM, "h", "", NULL, NULL, 0));
    assert_null(metrics_register(r, METRIC_HISTOGRAM, "h", "", NULL, down, 2));
    metrics_family *c = metrics_register(r, METRIC_COUNTER, "c", "", labels, NULL, 0);
    assert_non_null(c);
    assert_null(metrics_register(r, METRIC_GAUGE, "c", "", NULL, NULL, 0)); /* duplicate */
    const char *v[] = {"Running"};
    assert_int_equal(metrics_counter_add(c, v, -1), -1);
    assert_int_equal(metrics_counter_add(c, NULL, 1), -1); /* missing label values */
    assert_int_equal(metrics_gauge_set(c, v, 1), -1);      /* wrong type */
    assert_int_equal(metrics_counter_add(c, v, 0.0 / 0.0), -1);
    metrics_registry_free(r);
}

typedef struct {
    metrics_family *f;
} thread_arg;

static void *bump(void *arg) {
    thread_arg *a = arg;
    const char *v[] = {"GET"};
    for (int i = 0; i < 20000; i++)
        metrics_counter_add(a->f, v, 1);
    return NULL;
}

static void concurrent_updates_are_exact(void **state) {
    (void)state;
    metrics_registry *r = metrics_registry_new();
    const char *labels[] = {"verb", NULL};
    thread_arg a = {metrics_register(r, METRIC_COUNTER, "n", "", labels, NULL, 0)};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, bump, &a);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    char *text = metrics_render(r, NULL);
    assert_non_null(strstr(text, "n{verb=\"GET\"} 80000\n"));
    free(text);
    metrics_registry_free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(renders_counters_and_gauges_exactly),
        cmocka_unit_test(histogram_buckets_are_cumulative),
        cmocka_unit_test(escapes_label_values_and_help),
        cmocka_unit_test(refuses_bad_input),
        cmocka_unit_test(concurrent_updates_are_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
