/*
 * metrics.h - a small Prometheus metrics registry: counters, gauges and
 * histograms with labels, rendered in the text exposition format (0.0.4).
 *
 * Families are registered once (name, help, label names) and return a handle;
 * each distinct combination of label values is a series created on first
 * use. Names follow Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*), and label
 * values are escaped on output (\\, \", \n), so any value is safe.
 * Thread-safe: one mutex per registry; updates are O(series of the family).
 * Ownership: the registry owns families and series; handles stay valid until
 * metrics_registry_free().
 */
#ifndef AREAL_HTTP_METRICS_H
#define AREAL_HTTP_METRICS_H

#include <stddef.h>

#define METRICS_MAX_LABELS  4
#define METRICS_MAX_BUCKETS 16

typedef struct metrics_registry metrics_registry;
typedef struct metrics_family metrics_family;

typedef enum { METRIC_COUNTER, METRIC_GAUGE, METRIC_HISTOGRAM } metric_type;

/* A new empty registry, or NULL when out of memory. */
metrics_registry *metrics_registry_new(void);
void metrics_registry_free(metrics_registry *r);

/*
 * Registers a family. `labels` is a NULL-terminated list of label names (may be
 * NULL for none, at most METRICS_MAX_LABELS). Histograms take `buckets` upper
 * bounds in increasing order (`n_buckets` <= METRICS_MAX_BUCKETS; +Inf is
 * implied). Returns NULL on a bad name, a duplicate name or out of memory.
 */
metrics_family *metrics_register(metrics_registry *r, metric_type type, const char *name,
                                 const char *help, const char *const *labels, const double *buckets,
                                 int n_buckets);

/*
 * Updates the series with the given label values (as many as the family has
 * label names; NULL when it has none). Counters only grow: a negative `v` is
 * refused. Each returns 0, or -1 (bad arguments or out of memory).
 */
int metrics_counter_add(metrics_family *f, const char *const *values, double v);
int metrics_gauge_set(metrics_family *f, const char *const *values, double v);
int metrics_gauge_add(metrics_family *f, const char *const *values, double v);
int metrics_histogram_observe(metrics_family *f, const char *const *values, double v);

/* Removes every series of a gauge family (before re-publishing a snapshot). */
void metrics_family_reset(metrics_family *f);

/*
 * Renders every family to a new NUL-terminated string (caller frees), or NULL
 * when out of memory. Families in registration order, series in creation order.
 */
char *metrics_render(metrics_registry *r, size_t *len);

#endif
