/*
 * fuzz_alloc.c - libFuzzer target for the allocation-string parser.
 *
 * Each input is copied and NUL-terminated, then parsed. A failure must be a
 * well-formed error (AREAL_EINVAL, a position inside the string, a one-line
 * message starting with "at "). A success must satisfy the invariants the
 * rest of the system relies on, checked here independently of the parser:
 * sizes positive and bounded, edp*etp*ep*pp == world, backend rules,
 * colocation structure, unique names, the GPU total, and the round trip
 * parse -> format -> parse giving the same components (and the legacy hint,
 * when present, parsing to the same components too). Any violation abort()s.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "areal/alloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

static void check_error(const areal_error *err, int rc, size_t len) {
    CHECK(rc == AREAL_EINVAL && err->code == AREAL_EINVAL);
    CHECK(err->pos >= 0 && (size_t)err->pos <= len);
    CHECK(strncmp(err->msg, "at ", 3) == 0);
    CHECK(strchr(err->msg, '\n') == NULL);
}

static void check_component(const areal_alloc *a, int i, size_t len) {
    const areal_component *c = &a->comp[i];
    const areal_strategy *s = &c->strategy;
    CHECK(s->dp >= 1 && s->tp >= 1 && s->pp >= 1 && s->cp >= 1);
    CHECK(s->ep >= 1 && s->etp >= 1 && s->edp >= 1);
    long world = areal_strategy_world(s);
    CHECK(world >= 1 && world <= AREAL_ALLOC_MAX_WORLD);
    CHECK((long long)s->edp * s->etp * s->ep * s->pp == world);
    CHECK(c->pos >= 0 && c->len >= 1 && (size_t)c->pos + (size_t)c->len <= len);
    CHECK(strlen(c->name) < AREAL_ALLOC_NAME_MAX);
    if (areal_backend_is_inference(c->backend))
        CHECK(s->cp == 1 && s->ep == 1 && s->etp == 1 && !c->hybrid);
    if (c->backend == AREAL_BACKEND_FSDP)
        CHECK(s->pp == 1 && s->ep == 1);
    if (c->backend == AREAL_BACKEND_ARCHON)
        CHECK(s->etp == 1 || s->etp == s->tp);
    if (!c->hybrid)
        CHECK(s->etp == 1);
    if (c->sched == AREAL_SCHED_COLOCATION) {
        CHECK(i > 0 && c->colocate_with >= 0 && c->colocate_with < i);
        const areal_component *anchor = &a->comp[c->colocate_with];
        CHECK(anchor->sched == AREAL_SCHED_SEPARATION);
        CHECK(areal_strategy_world(&anchor->strategy) == world);
        CHECK(c->name[0] != '\0');
    } else {
        CHECK(c->sched == AREAL_SCHED_SEPARATION && c->colocate_with == -1);
    }
    for (int j = 0; j < i; j++)
        CHECK(c->name[0] == '\0' || strcmp(c->name, a->comp[j].name) != 0);
}

/* Field-by-field comparison, independent of areal_alloc_equal. */
static void check_same(const areal_alloc *x, const areal_alloc *y) {
    CHECK(x->n_components == y->n_components);
    for (int i = 0; i < x->n_components; i++) {
        const areal_component *a = &x->comp[i], *b = &y->comp[i];
        CHECK(strcmp(a->name, b->name) == 0 && a->backend == b->backend);
        CHECK(a->hybrid == b->hybrid && a->sched == b->sched);
        CHECK(a->colocate_with == b->colocate_with);
        CHECK(memcmp(&a->strategy, &b->strategy, sizeof a->strategy) == 0);
    }
    CHECK(areal_alloc_equal(x, y));
}

static void check_round_trip(const areal_alloc *a) {
    static char text[8192];
    static areal_alloc again;
    areal_error err;
    int need = areal_alloc_format(a, text, sizeof text);
    CHECK(need > 0 && need < (int)sizeof text && (int)strlen(text) == need);
    CHECK(areal_alloc_format(a, NULL, 0) == need);
    char small[8];
    CHECK(areal_alloc_format(a, small, sizeof small) == need);
    CHECK(strlen(small) == (need < 7 ? (size_t)need : 7) && strncmp(small, text, 7) == 0);
    CHECK(areal_alloc_parse(text, &again, &err) == AREAL_OK);
    CHECK(!again.legacy);
    check_same(a, &again);
    if (a->legacy && a->legacy_hint[0] != '\0') {
        CHECK(strcmp(a->legacy_hint, text) == 0);
    }
    if (!a->legacy)
        CHECK(a->legacy_hint[0] == '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static areal_alloc parsed;
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    size_t len = strlen(text);

    areal_error err;
    int rc = areal_alloc_parse(text, &parsed, &err);
    if (rc != AREAL_OK) {
        check_error(&err, rc, len);
    } else {
        CHECK(err.code == AREAL_OK);
        CHECK(parsed.n_components >= 1 && parsed.n_components <= AREAL_ALLOC_MAX_COMPONENTS);
        long total = 0;
        for (int i = 0; i < parsed.n_components; i++) {
            check_component(&parsed, i, len);
            if (parsed.comp[i].sched != AREAL_SCHED_COLOCATION)
                total += areal_strategy_world(&parsed.comp[i].strategy);
        }
        CHECK(areal_alloc_total_gpus(&parsed) == total);
        check_round_trip(&parsed);
    }
    free(text);
    return 0;
}
