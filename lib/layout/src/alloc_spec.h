/*
 * alloc_spec.h - what the allocation-string parser hands to the rule checker
 * (internal to the layout library; see areal/alloc.h for the grammar).
 *
 * Parsing is split in two passes. The syntax pass (alloc.c) fills, for every
 * component, the areal_component fields that are written in the string (name,
 * backend, position, colocation structure) and an alloc_spec with the raw
 * dimension letters exactly as given. The rule pass (alloc_rules.c) then turns
 * the letters into a complete areal_strategy and enforces every semantic rule.
 * Rules run only after the whole string parsed, so that a bare-dims component
 * can be judged by whether the string as a whole is legacy.
 */
#ifndef AREAL_ALLOC_SPEC_H
#define AREAL_ALLOC_SPEC_H

#include <stdbool.h>

#include "areal/alloc.h"
#include "areal/error.h"

/* The dimension letters, in the order the canonical form writes them. */
typedef enum alloc_letter {
    ALLOC_D, /* data */
    ALLOC_P, /* pipeline */
    ALLOC_T, /* tensor (also realhf's legacy `m`) */
    ALLOC_C, /* context */
    ALLOC_E, /* expert */
    ALLOC_LETTER_COUNT
} alloc_letter;

/* One list of dimension letters: the last value given for each, and whether it was given. */
typedef struct alloc_dims {
    int size[ALLOC_LETTER_COUNT];
    bool given[ALLOC_LETTER_COUNT];
} alloc_dims;

/* The raw form of one component. */
typedef struct alloc_spec {
    bool bare;       /* no backend written: only legal in a legacy string */
    alloc_dims dims; /* the plain dims, or the attn section of a hybrid */
    alloc_dims ffn;  /* the ffn section of a hybrid */
} alloc_spec;

/*
 * The rule pass. `a` holds the components of the syntax pass (names,
 * backends of non-bare components, hybrid flags, sched, colocate_with,
 * positions, legacy) and `spec` their raw dims; `n_groups` is the number of
 * "+"-separated parts. Fills every strategy (and the backend of bare legacy
 * components) and checks every rule; AREAL_EINVAL at the start of the
 * offending component otherwise.
 */
int alloc_apply_rules(areal_alloc *a, const alloc_spec *spec, int n_groups, areal_error *err);

#endif
