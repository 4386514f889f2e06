/*
 * rl_test_util.h - helpers shared by worker/rl's tests (header only): the
 * fixture folder, loading a JSON fixture, float arrays out of it, and a
 * relative-or-absolute closeness check.
 */
#ifndef AREAL_RL_TEST_UTIL_H
#define AREAL_RL_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define RL_FIX "worker/rl/tests/fixtures/"

static inline json_t *rl_load_fixture(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s%s", RL_FIX, name);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (j == NULL)
        fprintf(stderr, "cannot load %s: %s (line %d); run from the repository root\n", path,
                e.text, e.line);
    return j;
}

/* A JSON number, or the strings "inf", "-inf", "nan". */
static inline double rl_num(const json_t *v) {
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "-inf") == 0)
            return -INFINITY;
        if (strcmp(s, "inf") == 0)
            return INFINITY;
        return NAN;
    }
    return json_number_value(v);
}

/* Appends the numbers of JSON array `a` to dst (as floats); returns the count. */
static inline size_t rl_floats(const json_t *a, float *dst) {
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) dst[i] = (float)rl_num(v);
    return json_array_size(a);
}

/* |got - want| <= tol * max(1, |want|) */
static inline int rl_close(double got, double want, double tol) {
    double s = fabs(want) > 1.0 ? fabs(want) : 1.0;
    return fabs(got - want) <= tol * s;
}

#endif
