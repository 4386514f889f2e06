/*
 * synth.c - enumerating, splitting and writing the synthetic arithmetic task
 * (see synth.h). The shuffle is Fisher-Yates on splitmix64, not rand(), so a
 * seed names the same split on every libc.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/train/synth.h"

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int areal_synth_make(const areal_synth_cfg *cfg, areal_synth_split *s, areal_error *err) {
    memset(s, 0, sizeof *s);
    if (cfg->max_operand < 1 || cfg->max_operand > 9999)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "synthetic task: max_operand %d must be 1..9999", cfg->max_operand);
    if (cfg->ops == NULL || cfg->ops[0] == '\0' || strspn(cfg->ops, "+-*") != strlen(cfg->ops))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "synthetic task: ops must be a non-empty mix of '+', '-', '*'");
    if (!(cfg->test_fraction > 0 && cfg->test_fraction < 1))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "synthetic task: test_fraction must be in (0, 1)");
    size_t side = (size_t)cfg->max_operand + 1, cap = side * side * strlen(cfg->ops), n = 0;
    areal_synth_item *all = malloc(cap * sizeof *all);
    if (all == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "synthetic task: no memory");
    for (const char *op = cfg->ops; *op; op++)
        for (long a = 0; a <= cfg->max_operand; a++)
            for (long b = 0; b <= cfg->max_operand; b++) {
                if (*op == '-' && a < b)
                    continue;
                areal_synth_item *it = &all[n++];
                snprintf(it->question, sizeof it->question, "%d%c%d=", (int)a, *op, (int)b);
                it->answer = *op == '+' ? a + b : *op == '-' ? a - b : a * b;
            }
    uint64_t x = cfg->seed;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(splitmix(&x) % i);
        areal_synth_item t = all[i - 1];
        all[i - 1] = all[j];
        all[j] = t;
    }
    size_t n_test = (size_t)((double)n * cfg->test_fraction + 0.5);
    if (n_test < 1 || n_test >= n) {
        free(all);
        return areal_error_set(
            err, AREAL_EINVAL, -1,
            "synthetic task: test_fraction leaves an empty split of %zu problems", n);
    }
    s->test = all;
    s->n_test = n_test;
    s->train = all + n_test;
    s->n_train = n - n_test;
    return AREAL_OK;
}

void areal_synth_free(areal_synth_split *s) {
    free(s->test); /* the allocation starts at the test items */
    memset(s, 0, sizeof *s);
}

int areal_synth_write_jsonl(const char *path, const areal_synth_item *items, size_t n,
                            areal_error *err) {
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return areal_error_set(err, AREAL_EIO, -1, "%s: cannot write", path);
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++)
        bad = fprintf(f, "{\"question\": \"%s\", \"answer\": \"#### %ld\"}\n", items[i].question,
                      items[i].answer) < 0;
    if (fclose(f) != 0)
        bad = 1;
    return bad ? areal_error_set(err, AREAL_EIO, -1, "%s: cannot write", path) : AREAL_OK;
}
