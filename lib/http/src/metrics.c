/*
 * metrics.c - see areal/http/metrics.h. Series are kept in a growable
 * array per family and found by comparing label values: families have few
 * series (jobs by phase, API verbs by code), so a linear scan beats hashing.
 * Rendering writes into a growable buffer under the registry lock, so a
 * scrape sees one consistent snapshot.
 */
#include "areal/http/metrics.h"

#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct series {
    char *values[METRICS_MAX_LABELS];
    double value; /* counter / gauge; histogram sum */
    unsigned long long count;
    unsigned long long buckets[METRICS_MAX_BUCKETS];
} series;

struct metrics_family {
    metrics_registry *reg;
    metric_type type;
    char *name, *help;
    int n_labels;
    char *labels[METRICS_MAX_LABELS];
    int n_buckets;
    double bounds[METRICS_MAX_BUCKETS];
    series *s;
    int n_series, cap_series;
};

struct metrics_registry {
    pthread_mutex_t mu;
    metrics_family **fam;
    int n_fam, cap_fam;
};

metrics_registry *metrics_registry_new(void) {
    metrics_registry *r = calloc(1, sizeof *r);
    if (r != NULL)
        pthread_mutex_init(&r->mu, NULL);
    return r;
}

static void family_clear(metrics_family *f) {
    for (int i = 0; i < f->n_series; i++)
        for (int j = 0; j < f->n_labels; j++)
            free(f->s[i].values[j]);
    f->n_series = 0;
}

void metrics_registry_free(metrics_registry *r) {
    if (r == NULL)
        return;
    for (int i = 0; i < r->n_fam; i++) {
        metrics_family *f = r->fam[i];
        family_clear(f);
        free(f->s);
        for (int j = 0; j < f->n_labels; j++)
            free(f->labels[j]);
        free(f->name);
        free(f->help);
        free(f);
    }
    free(r->fam);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static bool valid_name(const char *s, bool label) {
    if (s == NULL || *s == '\0' || isdigit((unsigned char)*s))
        return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_' || (*s == ':' && !label)))
            return false;
    return true;
}

metrics_family *metrics_register(metrics_registry *r, metric_type type, const char *name,
                                 const char *help, const char *const *labels, const double *buckets,
                                 int n_buckets) {
    if (!valid_name(name, false) || n_buckets < 0 || n_buckets > METRICS_MAX_BUCKETS ||
        (type == METRIC_HISTOGRAM && (buckets == NULL || n_buckets == 0)))
        return NULL;
    for (int i = 1; i < n_buckets; i++)
        if (!(buckets[i] > buckets[i - 1]))
            return NULL;
    metrics_family *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->type = type;
    f->name = strdup(name);
    f->help = strdup(help ? help : "");
    bool ok = f->name && f->help;
    for (int i = 0; ok && labels && labels[i]; i++) {
        ok = i < METRICS_MAX_LABELS && valid_name(labels[i], true) &&
             strcmp(labels[i], "le") != 0 && (f->labels[i] = strdup(labels[i])) != NULL;
        f->n_labels += ok;
    }
    f->n_buckets = n_buckets;
    for (int i = 0; i < n_buckets; i++)
        f->bounds[i] = buckets[i];
    pthread_mutex_lock(&r->mu);
    for (int i = 0; ok && i < r->n_fam; i++)
        ok = strcmp(r->fam[i]->name, name) != 0;
    if (ok && r->n_fam == r->cap_fam) {
        int cap = r->cap_fam ? 2 * r->cap_fam : 16;
        metrics_family **grown = realloc(r->fam, (size_t)cap * sizeof *grown);
        ok = grown != NULL;
        if (ok) {
            r->fam = grown;
            r->cap_fam = cap;
        }
    }
    if (ok) {
        f->reg = r;
        r->fam[r->n_fam++] = f;
    }
    pthread_mutex_unlock(&r->mu);
    if (!ok) {
        for (int j = 0; j < f->n_labels; j++)
            free(f->labels[j]);
        free(f->name);
        free(f->help);
        free(f);
        return NULL;
    }
    return f;
}

/* The series with these values, created if needed; lock held. */
static series *find_series(metrics_family *f, const char *const *values) {
    if (f->n_labels > 0 && values == NULL)
        return NULL;
    for (int j = 0; j < f->n_labels; j++)
        if (values[j] == NULL)
            return NULL;
    for (int i = 0; i < f->n_series; i++) {
        int j = 0;
        while (j < f->n_labels && strcmp(f->s[i].values[j], values[j]) == 0)
            j++;
        if (j == f->n_labels)
            return &f->s[i];
    }
    if (f->n_series == f->cap_series) {
        int cap = f->cap_series ? 2 * f->cap_series : 8;
        series *grown = realloc(f->s, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        f->s = grown;
        f->cap_series = cap;
    }
    series *s = &f->s[f->n_series];
    memset(s, 0, sizeof *s);
    for (int j = 0; j < f->n_labels; j++) {
        s->values[j] = strdup(values[j]);
        if (s->values[j] == NULL) {
            while (j-- > 0)
                free(s->values[j]);
            return NULL;
        }
    }
    f->n_series++;
    return s;
}

static int update(metrics_family *f, const char *const *values, double v, metric_type want,
                  int op) {
    if (f == NULL || f->type != want || isnan(v))
        return -1;
    if (want == METRIC_COUNTER && v < 0)
        return -1;
    pthread_mutex_lock(&f->reg->mu);
    series *s = find_series(f, values);
    if (s != NULL) {
        if (op == 0)
            s->value = v;
        else
            s->value += v;
        if (want == METRIC_HISTOGRAM) {
            s->count++;
            for (int i = 0; i < f->n_buckets; i++)
                if (v <= f->bounds[i])
                    s->buckets[i]++;
        }
    }
    pthread_mutex_unlock(&f->reg->mu);
    return s != NULL ? 0 : -1;
}

int metrics_counter_add(metrics_family *f, const char *const *values, double v) {
    return update(f, values, v, METRIC_COUNTER, 1);
}
int metrics_gauge_set(metrics_family *f, const char *const *values, double v) {
    return update(f, values, v, METRIC_GAUGE, 0);
}
int metrics_gauge_add(metrics_family *f, const char *const *values, double v) {
    return update(f, values, v, METRIC_GAUGE, 1);
}
int metrics_histogram_observe(metrics_family *f, const char *const *values, double v) {
    return update(f, values, v, METRIC_HISTOGRAM, 1);
}

void metrics_family_reset(metrics_family *f) {
    pthread_mutex_lock(&f->reg->mu);
    family_clear(f);
    pthread_mutex_unlock(&f->reg->mu);
}

/* ---- rendering ---------------------------------------------------------- */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap * 2 + (size_t)(n > 0 ? n : 0) + 256;
        char *grown = realloc(b->p, cap);
        if (grown == NULL) {
            b->oom = true;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
}

static void put_escaped(buf *b, const char *s, bool help) {
    for (; *s; s++) {
        if (*s == '\\')
            put(b, "\\\\");
        else if (*s == '\n')
            put(b, "\\n");
        else if (*s == '"' && !help)
            put(b, "\\\"");
        else
            put(b, "%c", *s);
    }
}

static void put_number(buf *b, double v) {
    if (isinf(v))
        put(b, v > 0 ? "+Inf" : "-Inf");
    else if (v == (double)(long long)v && fabs(v) < 1e15)
        put(b, "%lld", (long long)v);
    else {
        /* the shortest of %.15g..%.17g that reads back as the same double */
        char text[40];
        for (int prec = 15; prec <= 17; prec++) {
            snprintf(text, sizeof text, "%.*g", prec, v);
            if (strtod(text, NULL) == v)
                break;
        }
        put(b, "%s", text);
    }
}

static void put_labels(buf *b, const metrics_family *f, const series *s, const char *le) {
    if (f->n_labels == 0 && le == NULL)
        return;
    put(b, "{");
    for (int j = 0; j < f->n_labels; j++) {
        put(b, "%s%s=\"", j ? "," : "", f->labels[j]);
        put_escaped(b, s->values[j], false);
        put(b, "\"");
    }
    if (le != NULL)
        put(b, "%sle=\"%s\"", f->n_labels ? "," : "", le);
    put(b, "}");
}

char *metrics_render(metrics_registry *r, size_t *len) {
    buf b = {.p = malloc(4096), .cap = 4096};
    if (b.p == NULL)
        return NULL;
    b.p[0] = '\0';
    static const char *const type_name[] = {"counter", "gauge", "histogram"};
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->n_fam; i++) {
        const metrics_family *f = r->fam[i];
        put(&b, "# HELP %s ", f->name);
        put_escaped(&b, f->help, true);
        put(&b, "\n# TYPE %s %s\n", f->name, type_name[f->type]);
        for (int k = 0; k < f->n_series; k++) {
            const series *s = &f->s[k];
            if (f->type != METRIC_HISTOGRAM) {
                put(&b, "%s", f->name);
                put_labels(&b, f, s, NULL);
                put(&b, " ");
                put_number(&b, s->value);
                put(&b, "\n");
                continue;
            }
            for (int q = 0; q <= f->n_buckets; q++) {
                char le[40];
                if (q < f->n_buckets)
                    snprintf(le, sizeof le, "%g", f->bounds[q]);
                else
                    snprintf(le, sizeof le, "+Inf");
                put(&b, "%s_bucket", f->name);
                put_labels(&b, f, s, le);
                put(&b, " %llu\n", q < f->n_buckets ? s->buckets[q] : s->count);
            }
            put(&b, "%s_sum", f->name);
            put_labels(&b, f, s, NULL);
            put(&b, " ");
            put_number(&b, s->value);
            put(&b, "\n%s_count", f->name);
            put_labels(&b, f, s, NULL);
            put(&b, " %llu\n", s->count);
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len != NULL)
        *len = b.len;
    return b.p;
}
