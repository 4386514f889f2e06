/*
 * alloc.h - AReaL allocation strings (`sglang:d4t2+megatron:d2p2t2`).
 *
 * The current grammar (AReaL HEAD, areal/api/alloc_mode.py):
 *
 *   start     := component ("+" component)*          disaggregation: separate GPUs
 *   component := single ("|" single)*                colocation: shared GPUs, binds tighter
 *   single    := INF ["[" NAME "]"] ":" infdim+      INF   = sglang | vllm
 *              | TRAIN ["[" NAME "]"] ":" dim+       TRAIN = fsdp | megatron | archon
 *              | TRAIN ":" hybrid
 *   hybrid    := ["("] "attn" ":" attndim+ "|" "ffn" ":" ffndim+ [")"]
 *   dim       := (d|t|p|c|e) NUMBER    attndim: d t p c    ffndim: d t p e    infdim: d t p
 *   NAME      := [A-Za-z_][A-Za-z0-9_]*      NUMBER := [1-9][0-9]*     whitespace ignored
 *
 * Semantics: unspecified dims are 1, a repeated letter overwrites the earlier
 * one, world = d*t*p*c (e adds no GPUs), etp = 1 unless the hybrid ffn part
 * gives `t`, edp = world / (pp*etp*ep). Inference `d` counts servers of t*p GPUs.
 * In a colocation group the first member is the anchor; later members must be
 * named, share the anchor's GPUs and have its world size. Chains of three or
 * more components must name every component; names are unique. fsdp rejects
 * p > 1 and e > 1; archon requires etp in {1, tp}.
 *
 * Legacy forms are accepted as a migration aid and flagged in `legacy`:
 * the dot form `sglang.d4p1t1+d4p1t1` (v0.3-lite..v0.4) and realhf's `m` letter
 * for tensor parallelism (`sglang.d64p1m1+d32p2m1`). In a legacy string a bare
 * training part gets the backend AReaL chose for it: megatron if p>1 or e>1,
 * else fsdp. Outside legacy strings, a part with no backend is an error.
 */
#ifndef AREAL_ALLOC_H
#define AREAL_ALLOC_H

#include <stdbool.h>

#include "areal/error.h"
#include "areal/strategy.h"

#define AREAL_ALLOC_MAX_COMPONENTS 16
#define AREAL_ALLOC_NAME_MAX       64      /* including the terminating NUL */
#define AREAL_ALLOC_MAX_DIM        1048576 /* largest accepted value of one letter */
#define AREAL_ALLOC_MAX_WORLD      1048576
#define AREAL_ALLOC_MAX_LEN        65536 /* longest accepted string, in bytes */

typedef enum areal_backend {
    AREAL_BACKEND_SGLANG,
    AREAL_BACKEND_VLLM,
    AREAL_BACKEND_FSDP,
    AREAL_BACKEND_MEGATRON,
    AREAL_BACKEND_ARCHON,
} areal_backend;

typedef enum areal_sched {
    AREAL_SCHED_SEPARATION, /* owns its GPUs */
    AREAL_SCHED_COLOCATION, /* runs on the GPUs of its colocation anchor */
} areal_sched;

typedef struct areal_component {
    char name[AREAL_ALLOC_NAME_MAX]; /* as written; "" when unnamed */
    areal_backend backend;
    areal_strategy strategy; /* complete: etp and edp derived */
    bool hybrid;             /* written in the (attn:..|ffn:..) form */
    areal_sched sched;
    int colocate_with; /* index of the anchor component, or -1 */
    int pos;           /* byte offset of the component in the string */
    int len;           /* its length in bytes */
} areal_component;

typedef struct areal_alloc {
    int n_components;
    areal_component comp[AREAL_ALLOC_MAX_COMPONENTS];
    bool legacy;           /* dot form or realhf `m`: accepted, but should be migrated */
    char legacy_hint[256]; /* when legacy: the current spelling of the string
                              ("" in the rare case that it does not fit) */
} areal_alloc;

/*
 * Parses `s` into `out`. On failure returns AREAL_EINVAL (syntax or a rule
 * broken) and fills `err` with the byte position and a message that says what
 * was expected and how to fix it; `out` is then unspecified.
 *
 * Positions are 0-based byte offsets: a syntax error points at the byte that
 * was not expected, a broken rule at the start of the offending component.
 * Messages are one line and start with "at POS: ". edp is always
 * world / (pp*etp*ep) (Megatron's expert generator), also when ep == 1.
 * Never allocates; on success `err` (if not NULL) is cleared.
 */
int areal_alloc_parse(const char *s, areal_alloc *out, areal_error *err);

/* GPUs the whole string needs: the sum of the world sizes of non-colocated components. */
long areal_alloc_total_gpus(const areal_alloc *a);

/* "sglang", "vllm", "fsdp", "megatron", "archon". */
const char *areal_backend_name(areal_backend b);

/* True for sglang and vllm. */
bool areal_backend_is_inference(areal_backend b);

/*
 * How a training backend shards its data-parallel replicas' state: fsdp and
 * archon (FSDP2) shard parameters, gradients and optimizer state over dp
 * (AREAL_DP_FULLY_SHARDED, worker/parallel's fsdp.h), megatron shards the
 * optimizer state (its distributed optimizer, ZeRO-1: AREAL_DP_OPTIMIZER),
 * an inference backend keeps whole replicas (AREAL_DP_REPLICATED).
 */
typedef enum areal_dp_sharding {
    AREAL_DP_REPLICATED,
    AREAL_DP_OPTIMIZER,
    AREAL_DP_FULLY_SHARDED,
} areal_dp_sharding;
areal_dp_sharding areal_backend_dp_sharding(areal_backend b);

/*
 * True when `a` and `b` hold the same components in the same order: names,
 * backends, strategies, hybrid form and scheduling. Positions and the legacy
 * flag are not compared, so a string and its areal_alloc_format() spelling
 * compare equal.
 */
bool areal_alloc_equal(const areal_alloc *a, const areal_alloc *b);

/*
 * Writes the canonical current-grammar spelling of `a` to `buf` (always NUL
 * terminated when cap > 0; `buf` may be NULL when cap is 0); returns the
 * length it needed, like snprintf. No whitespace; `d` always written, other
 * sizes only when not 1; hybrid as megatron:(attn:d4p2t2|ffn:d2p2t2e2).
 */
int areal_alloc_format(const areal_alloc *a, char *buf, int cap);

#endif
