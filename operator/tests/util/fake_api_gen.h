/*
 * fake_api_gen.h - a growable text buffer and the generated pods and nodes
 * of the fake API server (operator/tests/util/fake_api.h). Test code only.
 */
#ifndef AREAL_FAKE_API_GEN_H
#define AREAL_FAKE_API_GEN_H

#include <stdbool.h>
#include <stddef.h>

typedef struct fake_text {
    char *p; /* malloc'd, NUL-terminated */
    size_t n, cap;
    bool oom; /* an append failed; the text is incomplete */
} fake_text;

/* Appends n bytes of s. */
void fake_put(fake_text *t, const char *s, size_t n);
/* Appends formatted text (at most 8 KiB per call). */
void fake_putf(fake_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends pod i (job-J-trainer-K in namespace team, bound round robin to
 * node-NNNN of n_nodes) as JSON. */
void fake_gen_pod(fake_text *t, int i, int n_nodes);
/* Appends node i (node-NNNN, 8 GPUs) as JSON. */
void fake_gen_node(fake_text *t, int i);

#endif
