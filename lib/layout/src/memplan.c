/*
 * memplan.c - a trainer rank's bytes by the worker's own arithmetic (see
 * memplan.h): the shard's parameter count tensor by tensor as
 * config_tensors.c lists and shard.c splits them, the activation record of
 * model_fwd.c's layer_floats and acts_alloc.
 */
#include "areal/memplan.h"

#include <string.h>

/* Layer l routes to experts (the config reader's rule: decoder_sparse_step, mlp_only_layers). */
static bool is_moe(const areal_mem_model *m, long l) {
    if (m->experts == 0 || m->moe_step < 1 || (l + 1) % m->moe_step != 0)
        return false;
    return l >= 64 || !(m->dense_mask >> l & 1);
}

static int check(const areal_mem_model *m, const areal_strategy *s, const areal_mem_opts *o,
                 areal_error *err) {
    long tp = s->tp, ep = s->ep;
    if (s->pp < 1 || s->pp > m->layers)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "memory plan: pp %d for %ld layers: pp must be in 1..layers", s->pp,
                               m->layers);
    if (m->heads % tp != 0 || m->kv_heads % tp != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "memory plan: tp %ld must divide num_attention_heads %ld and "
                               "num_key_value_heads %ld",
                               tp, m->heads, m->kv_heads);
    bool dense = false;
    for (long l = 0; l < m->layers; l++)
        dense = dense || !is_moe(m, l);
    if (dense && m->inter % tp != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "memory plan: tp %ld must divide intermediate_size %ld", tp,
                               m->inter);
    if (ep > 1 && (m->experts == 0 || m->experts % ep != 0))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "memory plan: ep %ld must divide num_experts %ld", ep, m->experts);
    if (o->vocab_parallel && m->vocab % tp != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "memory plan: tp %ld must divide vocab_size %ld (vocab parallel)",
                               tp, m->vocab);
    if (o->fsdp && s->pp != 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "memory plan: fsdp shards over dp and runs no pipeline stages "
                               "(pp %d): use megatron: for pp > 1",
                               s->pp);
    if (o->mb_tokens < 1 || o->seq_len < 1 || o->n_mb < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "memory plan: mb_tokens, seq_len and n_mb must be >= 1 (got %ld, "
                               "%ld, %ld)",
                               o->mb_tokens, o->seq_len, o->n_mb);
    return AREAL_OK;
}

/* Parameters of layer l on a rank (shard.c's splits). */
static int64_t layer_params(const areal_mem_model *m, const areal_strategy *s, long l) {
    int64_t h = m->hidden, hd = m->head_dim, tp = s->tp;
    int64_t q = m->heads * hd / tp, kv = m->kv_heads * hd / tp;
    int64_t n = 2 * h + q * h + 2 * kv * h + h * q; /* norms, q k v, o */
    if (m->qkv_bias)
        n += q + 2 * kv;
    if (m->o_bias)
        n += h; /* row-parallel bias: whole */
    if (m->qk_norm)
        n += 2 * hd;
    if (is_moe(m, l)) {
        int64_t per = m->experts / (s->ep > 0 ? s->ep : 1);
        n += m->experts * h + per * 3 * h * m->moe_inter; /* router, this rank's experts */
        if (m->shared_inter > 0)
            n += 3 * h * m->shared_inter + h;
    } else {
        int64_t i = m->inter / tp;
        n += 3 * h * i;
        if (m->mlp_bias)
            n += 2 * i + h; /* gate/up biases split, down's whole */
    }
    return n;
}

/* Rows of the residual stream a layer's record keeps (model_fwd.c's rows_kept, tp rank 0). */
static int64_t sp_rows(const areal_strategy *s, const areal_mem_opts *o) {
    int64_t T = o->mb_tokens, tp = s->tp;
    if (!o->sequence_parallel || tp < 2)
        return T;
    int64_t B = (T + tp - 1) / tp;
    return B < T ? B : T;
}

/* Floats of one layer's activation record for T tokens (model_fwd.c's layer_floats + probs). */
static int64_t layer_acts(const areal_mem_model *m, const areal_strategy *s,
                          const areal_mem_opts *o, long l) {
    int64_t T = o->mb_tokens, H = m->hidden, hd = m->head_dim, tp = s->tp;
    int64_t nh = m->heads / tp, nkv = m->kv_heads / tp, Q = nh * hd, KV = nkv * hd;
    int64_t R = sp_rows(s, o); /* the residuals' rows: all T, or tp rank 0's block */
    int64_t n = R * H * 2 + T * H * 2 + R * 2 + T * Q * 3 + T * KV * 4 + T * (nh + nkv);
    int64_t seqs = (T + o->seq_len - 1) / o->seq_len, L = T < o->seq_len ? T : o->seq_len;
    n += seqs * nh * L * L; /* attention probabilities, every sequence taken full length */
    if (is_moe(m, l)) {
        int64_t E = m->experts, K = m->experts_per_tok, I = m->moe_inter, Is = m->shared_inter;
        n += T * E + 4 * T * K + E + 1 + T * K * (2 * H + 3 * I) + T * (3 * Is + H + 1);
    } else {
        n += 3 * T * (m->inter / tp);
    }
    return n;
}

/* x rounded up to a multiple of k. */
static int64_t pad_to(int64_t x, int64_t k) {
    return (x + k - 1) / k * k;
}

/* The fully sharded rank (memplan.h): ranges of every unit, the step's gathered peak. */
static void fsdp_rank(const areal_mem_model *m, const areal_strategy *s, const areal_mem_opts *o,
                      areal_mem_rank *out) {
    int64_t k = (int64_t)s->dp * (s->cp > 0 ? s->cp : 1), V = m->vocab, H = m->hidden;
    int64_t T = o->mb_tokens, L = m->layers;
    int64_t root = V * H * (m->tied ? 1 : 2) + H, ranges = pad_to(root, k) / k, worst = 0;
    int64_t n = root, acts = 0;
    for (long l = 0; l < L; l++) {
        int64_t u = layer_params(m, s, l), stage = u;
        if (l == 0)
            stage += V * H; /* the embedding */
        if (l == L - 1)
            stage += H + (m->tied && l == 0 ? 0 : V * H); /* final norm; lm_head or tied copy */
        if (2 * pad_to(u, k) + 2 * stage > worst)
            worst = 2 * pad_to(u, k) + 2 * stage;
        ranges += pad_to(u, k) / k;
        n += u;
        acts += layer_acts(m, s, o, l) + T * H; /* each layer's own output buffer */
    }
    acts += T * H + T + T * V; /* the last layer's: final norm, logits */
    *out = (areal_mem_rank){.stage = 0,
                            .layers = L,
                            .n_params = n,
                            .params = 4 * ranges,
                            .grads = 4 * ranges,
                            .optim = 8 * ranges,
                            .acts = 4 * acts,
                            .gathered = 4 * (2 * pad_to(root, k) + worst)};
    out->total = out->params + out->grads + out->optim + out->acts + out->gathered;
}

int areal_mem_stage(const areal_mem_model *m, const areal_strategy *s, const areal_mem_opts *o,
                    int stage, areal_mem_rank *out, areal_error *err) {
    memset(out, 0, sizeof *out);
    int rc = check(m, s, o, err);
    if (rc != AREAL_OK)
        return rc;
    if (stage < 0 || stage >= s->pp)
        return areal_error_set(err, AREAL_EINVAL, -1, "memory plan: stage %d of pp %d", stage,
                               s->pp);
    if (o->fsdp) {
        fsdp_rank(m, s, o, out);
        return AREAL_OK;
    }
    long base = m->layers / s->pp, extra = m->layers % s->pp;
    long first = stage * base + (stage < extra ? stage : extra);
    long nl = base + (stage < extra);
    bool is_first = stage == 0, is_last = stage == s->pp - 1;
    int64_t V = o->vocab_parallel ? m->vocab / s->tp : m->vocab, H = m->hidden;
    int64_t n = 0, acts = 0, T = o->mb_tokens;
    for (long l = first; l < first + nl; l++) {
        n += layer_params(m, s, l);
        acts += layer_acts(m, s, o, l);
    }
    if (is_first || (is_last && m->tied))
        n += V * H; /* the embedding (the last stage's tied copy) */
    if (is_last)
        n += H + (m->tied ? 0 : V * H);                /* final norm, lm_head */
    acts += T * H + (is_last ? T * H + T + T * V : 0); /* stage output; final norm, logits */
    if (o->sequence_parallel && s->tp > 1)
        acts += T * H; /* the row-parallel products' scratch */
    long alive = s->pp - stage < o->n_mb ? s->pp - stage : o->n_mb;
    int64_t shard = o->zero1 ? (int64_t)s->dp * (s->cp > 0 ? s->cp : 1) : 1;
    *out = (areal_mem_rank){.stage = stage,
                            .layers = nl,
                            .n_params = n,
                            .params = 4 * n,
                            .grads = 4 * n,
                            .optim = 8 * ((n + shard - 1) / shard),
                            .acts = 4 * acts * alive};
    out->total = out->params + out->grads + out->optim + out->acts;
    return AREAL_OK;
}

int areal_mem_worst(const areal_mem_model *m, const areal_strategy *s, const areal_mem_opts *o,
                    areal_mem_rank *out, areal_error *err) {
    int rc = AREAL_OK;
    memset(out, 0, sizeof *out);
    for (int st = 0; rc == AREAL_OK && st < (s->pp > 0 ? s->pp : 1); st++) {
        areal_mem_rank r;
        rc = areal_mem_stage(m, s, o, st, &r, err);
        if (rc == AREAL_OK && (st == 0 || r.total > out->total))
            *out = r;
    }
    return rc;
}

int areal_mem_fit(const areal_mem_rank *r, const areal_strategy *s, const areal_mem_opts *o,
                  int64_t gpu_bytes, areal_error *err) {
    if (r->total <= gpu_bytes)
        return AREAL_OK;
    int64_t weights = r->params + r->grads;
    const char *part, *grow;
    if (r->optim >= weights && r->optim >= r->acts) {
        part = "optimizer state";
        grow = o->zero1 ? "grow dp (the distributed optimizer shards it over dp)"
                        : "use the distributed optimizer (megatron:) and grow dp, or grow tp or pp";
    } else if (weights >= r->acts) {
        part = "parameters and gradients";
        grow = o->fsdp         ? "grow dp (fsdp shards them over dp)"
               : r->layers > 1 ? "grow pp (fewer layers a stage) or tp"
                               : "grow tp";
    } else {
        part = "activations";
        grow = "grow tp or pp, or put fewer tokens in a micro-batch";
    }
    (void)s;
    return areal_error_set(err, AREAL_EINVAL, -1,
                           "memory: stage %d needs %lld bytes a GPU (parameters %lld, gradients "
                           "%lld, optimizer %lld, activations %lld) but a GPU has %lld; the "
                           "largest part is the %s: %s",
                           r->stage, (long long)r->total, (long long)r->params, (long long)r->grads,
                           (long long)r->optim, (long long)r->acts, (long long)gpu_bytes, part,
                           grow);
}
