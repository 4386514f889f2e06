/*
 * alloc_rules.c - the rule pass of the allocation-string parser: from the
 * raw dimension letters to complete strategies, and every semantic rule of
 * AReaL's grammar (see areal/alloc.h and alloc_spec.h).
 *
 * Design: rules run in a fixed order so that the first error reported is the
 * most basic one. First each component on its own, in string order: a backend
 * must be written (unless the string is legacy), the sizes must fit, the
 * hybrid sections must agree, the backend must support the sizes, and the
 * experts must divide the GPUs. Then the relations between components:
 * colocation groups, unique names, names in chains of three or more.
 * Every error is reported at the start of the offending component.
 *
 * Arithmetic: each size is at most AREAL_ALLOC_MAX_DIM (2^20), so products
 * are built with mul_capped(), which stops at AREAL_ALLOC_MAX_WORLD + 1 and
 * never overflows; p*etp*e (at most 2^60) fits a long long.
 *
 * edp: always world / (pp * etp * ep), the size Megatron's expert rank
 * generator uses, so that edp * etp * ep * pp == world holds for every
 * parsed component. (AReaL reports edp = dp when ep == 1; that differs only
 * for components without experts and tp*cp > 1, where edp is unused.)
 */
#include <stdio.h>
#include <string.h>

#include "alloc_scan.h"
#include "alloc_spec.h"

/* Room for one component written in canonical form inside a message. */
#define SPELL_MAX 160

/* a * b for 1 <= a, b, or AREAL_ALLOC_MAX_WORLD + 1 when that is exceeded. */
static long long mul_capped(long long a, long long b) {
    const long long cap = AREAL_ALLOC_MAX_WORLD;
    if (a > cap || b > cap || a * b > cap)
        return cap + 1;
    return a * b;
}

/* d*t*p*c of a dims list, capped as mul_capped() does. */
static long long dims_world(const alloc_dims *d) {
    long long w = mul_capped(d->size[ALLOC_D], d->size[ALLOC_T]);
    w = mul_capped(w, d->size[ALLOC_P]);
    return mul_capped(w, d->size[ALLOC_C]);
}

/* Writes a GPU count for a message: the number, or "more than MAX". */
static void say_count(long long n, char *buf, int cap) {
    if (n > AREAL_ALLOC_MAX_WORLD)
        snprintf(buf, (size_t)cap, "more than %d", AREAL_ALLOC_MAX_WORLD);
    else
        snprintf(buf, (size_t)cap, "%lld", n);
}

/* Writes component `c` alone in canonical form, with another backend and name. */
static void spell(const areal_component *c, areal_backend backend, const char *name, char *buf,
                  int cap) {
    areal_alloc one;
    memset(&one, 0, sizeof one);
    one.n_components = 1;
    one.comp[0] = *c;
    one.comp[0].backend = backend;
    one.comp[0].sched = AREAL_SCHED_SEPARATION;
    one.comp[0].colocate_with = -1;
    snprintf(one.comp[0].name, sizeof one.comp[0].name, "%s", name);
    areal_alloc_format(&one, buf, cap);
}

/* The given letters of a raw dims list in canonical order ("d4p1t1"). */
static void raw_dims_text(const alloc_dims *d, char *buf, int cap) {
    static const char letters[ALLOC_LETTER_COUNT] = {'d', 'p', 't', 'c', 'e'};
    int len = 0;
    buf[0] = '\0';
    for (int i = 0; i < ALLOC_LETTER_COUNT && len < cap; i++)
        if (d->given[i])
            len += snprintf(buf + len, (size_t)(cap - len), "%c%d", letters[i], d->size[i]);
}

/* A bare legacy part gets the backend AReaL chose: megatron for p > 1 or e > 1, else fsdp. */
static areal_backend auto_backend(const alloc_dims *d) {
    if (d->size[ALLOC_P] > 1 || d->size[ALLOC_E] > 1)
        return AREAL_BACKEND_MEGATRON;
    return AREAL_BACKEND_FSDP;
}

static int check_bare(areal_alloc *a, areal_component *c, const alloc_spec *sp, areal_error *err) {
    c->backend = auto_backend(&sp->dims);
    if (a->legacy)
        return AREAL_OK;
    char dims[SPELL_MAX];
    raw_dims_text(&sp->dims, dims, sizeof dims);
    return alloc_fail(err, c->pos,
                      "this part has no backend; add a backend, e.g. %s:%s (bare dimensions are "
                      "accepted only in legacy strings such as sglang.d4p1t1+d4p1t1)",
                      areal_backend_name(c->backend), dims);
}

static int world_too_large(const areal_component *c, areal_error *err) {
    return alloc_fail(err, c->pos,
                      "this component needs more than %d GPUs (world = d*t*p*c); that is the "
                      "limit per component",
                      AREAL_ALLOC_MAX_WORLD);
}

/* Plain dims: dp, tp, pp, cp, ep as written; etp 1. */
static int derive_plain(areal_component *c, const alloc_dims *d, areal_error *err) {
    if (dims_world(d) > AREAL_ALLOC_MAX_WORLD)
        return world_too_large(c, err);
    c->strategy.dp = d->size[ALLOC_D];
    c->strategy.tp = d->size[ALLOC_T];
    c->strategy.pp = d->size[ALLOC_P];
    c->strategy.cp = d->size[ALLOC_C];
    c->strategy.ep = d->size[ALLOC_E];
    c->strategy.etp = 1;
    return AREAL_OK;
}

/*
 * Hybrid: attn gives dp, tp, pp, cp; ffn e gives ep and ffn t gives etp. ffn p
 * must equal attn p (inherited when left out); ffn d, when left out, is
 * attn_world / (ep*etp*pp); then the ffn world must equal the attn world.
 */
static int derive_hybrid(areal_component *c, const alloc_spec *sp, areal_error *err) {
    const alloc_dims *attn = &sp->dims;
    const alloc_dims *ffn = &sp->ffn;
    long long world = dims_world(attn);
    if (world > AREAL_ALLOC_MAX_WORLD)
        return world_too_large(c, err);
    int pp = attn->size[ALLOC_P];
    int ffn_pp = ffn->given[ALLOC_P] ? ffn->size[ALLOC_P] : pp;
    if (ffn_pp != pp)
        return alloc_fail(err, c->pos,
                          "pipeline size mismatch between attn and ffn: attn p%d, ffn p%d; the "
                          "ffn p must equal the attn p (or be left out)",
                          pp, ffn_pp);
    long long ep = ffn->size[ALLOC_E];
    long long etp = ffn->size[ALLOC_T];
    long long non_dp = ep * etp * ffn_pp;
    long long ffn_dp = ffn->size[ALLOC_D];
    if (!ffn->given[ALLOC_D]) {
        if (world % non_dp != 0)
            return alloc_fail(err, c->pos,
                              "cannot derive the ffn d: the attn world %lld (d*t*p*c) is not a "
                              "multiple of the ffn e*t*p = %lld; give sizes whose product "
                              "divides it",
                              world, non_dp);
        ffn_dp = world / non_dp;
    }
    long long ffn_world = mul_capped(mul_capped(mul_capped(ffn_dp, ffn_pp), etp), ep);
    if (ffn_world != world) {
        char said[32];
        say_count(ffn_world, said, sizeof said);
        return alloc_fail(err, c->pos,
                          "world size mismatch between attn and ffn: attn d*t*p*c = %lld GPUs, "
                          "ffn d*t*p*e = %s GPUs; they must be equal",
                          world, said);
    }
    c->strategy.dp = attn->size[ALLOC_D];
    c->strategy.tp = attn->size[ALLOC_T];
    c->strategy.pp = pp;
    c->strategy.cp = attn->size[ALLOC_C];
    c->strategy.ep = (int)ep;
    c->strategy.etp = (int)etp;
    return AREAL_OK;
}

/* fsdp: no p > 1 or e > 1. archon: etp is 1 or tp. */
static int check_backend(const areal_component *c, areal_error *err) {
    const areal_strategy *s = &c->strategy;
    char fix[SPELL_MAX];
    if (c->backend == AREAL_BACKEND_FSDP && (s->pp > 1 || s->ep > 1)) {
        char got[32];
        if (s->pp > 1 && s->ep > 1)
            snprintf(got, sizeof got, "p%d and e%d", s->pp, s->ep);
        else
            snprintf(got, sizeof got, "%c%d", s->pp > 1 ? 'p' : 'e', s->pp > 1 ? s->pp : s->ep);
        spell(c, AREAL_BACKEND_MEGATRON, c->name, fix, sizeof fix);
        return alloc_fail(err, c->pos,
                          "FSDP backend only supports data/tensor/context parallelism (d, t, c), "
                          "got %s; use megatron or archon for pipeline or expert parallelism, "
                          "e.g. %s",
                          got, fix);
    }
    if (c->backend == AREAL_BACKEND_ARCHON && s->etp != 1 && s->etp != s->tp)
        return alloc_fail(err, c->pos,
                          "archon requires the expert tensor parallel size (ffn t) to be 1 or "
                          "the attn t (%d), got ffn t%d",
                          s->tp, s->etp);
    return AREAL_OK;
}

/* edp = world / (pp*etp*ep), which must divide exactly. */
static int derive_edp(areal_component *c, areal_error *err) {
    areal_strategy *s = &c->strategy;
    long world = areal_strategy_world(s);
    long long expert_mp = (long long)s->pp * s->etp * s->ep;
    if (world % expert_mp != 0)
        return alloc_fail(err, c->pos,
                          "experts do not divide the GPUs: the world %ld (d*t*p*c) is not a "
                          "multiple of p*etp*e = %lld; make d*t*c a multiple of e, e.g. "
                          "megatron:d2t2e4",
                          world, expert_mp);
    s->edp = (int)(world / expert_mp);
    return AREAL_OK;
}

static int check_component(areal_alloc *a, areal_component *c, const alloc_spec *sp,
                           areal_error *err) {
    int rc = sp->bare ? check_bare(a, c, sp, err) : AREAL_OK;
    if (rc == AREAL_OK)
        rc = c->hybrid ? derive_hybrid(c, sp, err) : derive_plain(c, &sp->dims, err);
    if (rc == AREAL_OK)
        rc = check_backend(c, err);
    if (rc == AREAL_OK)
        rc = derive_edp(c, err);
    return rc;
}

/* Later members of a colocation group: named, and as many GPUs as the anchor. */
static int check_colocation(const areal_alloc *a, areal_error *err) {
    char fix[SPELL_MAX];
    for (int i = 0; i < a->n_components; i++) {
        const areal_component *c = &a->comp[i];
        if (c->sched != AREAL_SCHED_COLOCATION)
            continue;
        const areal_component *anchor = &a->comp[c->colocate_with];
        if (c->name[0] == '\0') {
            spell(c, c->backend, "critic", fix, sizeof fix);
            return alloc_fail(err, c->pos,
                              "colocation members after the first must be named (they run on "
                              "the GPUs of the component at %d), e.g. %s",
                              anchor->pos, fix);
        }
        long world = areal_strategy_world(&c->strategy);
        long anchor_world = areal_strategy_world(&anchor->strategy);
        if (world != anchor_world)
            return alloc_fail(err, c->pos,
                              "colocated components must have matching world sizes: '%s' has "
                              "%ld GPUs but the component it colocates with (at %d) has %ld",
                              c->name, world, anchor->pos, anchor_world);
    }
    return AREAL_OK;
}

/* Names are unique; a chain ("+") of three or more components names every one. */
static int check_names(const areal_alloc *a, int n_groups, areal_error *err) {
    for (int i = 0; i < a->n_components; i++) {
        const areal_component *c = &a->comp[i];
        if (c->name[0] == '\0')
            continue;
        for (int j = 0; j < i; j++)
            if (strcmp(a->comp[j].name, c->name) == 0)
                return alloc_fail(err, c->pos,
                                  "duplicate name '%s' (also used at %d); names must be unique",
                                  c->name, a->comp[j].pos);
    }
    if (n_groups < 2 || a->n_components < 3)
        return AREAL_OK;
    char fix[SPELL_MAX];
    for (int i = 0; i < a->n_components; i++) {
        const areal_component *c = &a->comp[i];
        if (c->name[0] != '\0')
            continue;
        spell(c, c->backend, areal_backend_is_inference(c->backend) ? "rollout" : "actor", fix,
              sizeof fix);
        return alloc_fail(err, c->pos,
                          "with 3 or more components every component must be named; this one "
                          "has no name, e.g. %s",
                          fix);
    }
    return AREAL_OK;
}

int alloc_apply_rules(areal_alloc *a, const alloc_spec *spec, int n_groups, areal_error *err) {
    for (int i = 0; i < a->n_components; i++) {
        int rc = check_component(a, &a->comp[i], &spec[i], err);
        if (rc != AREAL_OK)
            return rc;
    }
    int rc = check_colocation(a, err);
    if (rc == AREAL_OK)
        rc = check_names(a, n_groups, err);
    return rc;
}
