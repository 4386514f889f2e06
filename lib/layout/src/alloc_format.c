/*
 * alloc_format.c - the canonical current-grammar spelling of a parsed
 * allocation (areal_alloc_format, see areal/alloc.h).
 *
 * Design: one pass over the components, appending through a small
 * snprintf-style writer that keeps counting once the buffer is full, so the
 * caller learns the length it needed. The canonical form has no whitespace,
 * writes `d` always and every other size only when it is not 1, in AReaL's
 * own order (training d p t c e, inference d t p), and writes a hybrid
 * component as megatron:(attn:d..p..t..c..|ffn:d..p..t..e..) with the ffn d
 * spelled out (it equals edp). A component scheduled as colocation is joined
 * to the one before it with '|', every other one with '+'. Parsing the
 * result gives back the same components (areal_alloc_equal).
 */
#include <stdarg.h>
#include <stdio.h>

#include "areal/alloc.h"

typedef struct fmt_out {
    char *buf;
    int cap;
    int len; /* bytes needed so far, possibly more than cap */
} fmt_out;

static void put(fmt_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(fmt_out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room > 0 ? o->buf + o->len : NULL, (size_t)room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += n;
}

/* `letter` and `size` when size is not 1. */
static void put_dim(fmt_out *o, char letter, int size) {
    if (size != 1)
        put(o, "%c%d", letter, size);
}

static void put_component(fmt_out *o, const areal_component *c) {
    const areal_strategy *s = &c->strategy;
    put(o, "%s", areal_backend_name(c->backend));
    if (c->name[0] != '\0')
        put(o, "[%.*s]", AREAL_ALLOC_NAME_MAX - 1, c->name);
    put(o, ":");
    if (areal_backend_is_inference(c->backend)) {
        put(o, "d%d", s->dp);
        put_dim(o, 't', s->tp);
        put_dim(o, 'p', s->pp);
        return;
    }
    if (c->hybrid) {
        put(o, "(attn:d%d", s->dp);
        put_dim(o, 'p', s->pp);
        put_dim(o, 't', s->tp);
        put_dim(o, 'c', s->cp);
        put(o, "|ffn:d%d", s->edp);
        put_dim(o, 'p', s->pp);
        put_dim(o, 't', s->etp);
        put_dim(o, 'e', s->ep);
        put(o, ")");
        return;
    }
    put(o, "d%d", s->dp);
    put_dim(o, 'p', s->pp);
    put_dim(o, 't', s->tp);
    put_dim(o, 'c', s->cp);
    put_dim(o, 'e', s->ep);
}

int areal_alloc_format(const areal_alloc *a, char *buf, int cap) {
    fmt_out o = {.buf = buf, .cap = buf != NULL && cap > 0 ? cap : 0, .len = 0};
    if (o.cap > 0)
        buf[0] = '\0';
    if (a == NULL)
        return 0;
    int n = a->n_components;
    if (n > AREAL_ALLOC_MAX_COMPONENTS)
        n = AREAL_ALLOC_MAX_COMPONENTS;
    for (int i = 0; i < n; i++) {
        if (i > 0)
            put(&o, "%c", a->comp[i].sched == AREAL_SCHED_COLOCATION ? '|' : '+');
        put_component(&o, &a->comp[i]);
    }
    return o.len;
}
