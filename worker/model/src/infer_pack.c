/*
 * infer_pack.c - the inference twins of a model's linear weights
 * (areal_model_infer_pack, model.h): each W [n_out, n_in] copied once into
 * the layout k_linear_infer's kernels read, blocks of 8 output columns with
 * k running fastest inside a block (p[b][k][j] = W[8b + j][k]), the last
 * block padded with zero columns.
 *
 * Why: k_linear_infer either packs W into that layout for every call (large
 * T) or, at decode sizes, transposes 8 x 8 tiles of W in registers. Both cost
 * shuffles per weight that a decode step of one row cannot hide: the 1-row
 * product ran at ~13 GB/s of weights per CPU-second where reading a packed
 * copy runs at ~21-25 (the bench model's shapes on this project's machine).
 * A rollout engine multiplies the same weights for every token until the
 * next weight update, so packing once per update pays for itself on the
 * first token. The arithmetic is unchanged: every output element is the same
 * FMA chain over k in order (batch-invariance, k_linear_infer.c), so a
 * packed model's logits equal an unpacked one's bit for bit.
 *
 * The cost is a second copy of the dense linear weights (attention, MLP, LM
 * head; not the embedding, norms, biases or MoE experts, which take other
 * paths). Rejected: packing in place (the training kernels, checkpoints,
 * peer serving and the weight-update staging all read the HF row-major
 * tensors), and packing lazily on first use (a later write to params would
 * leave a stale twin with no one to notice).
 */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

struct areal_infer_pack {
    float *buf;             /* all twins, one allocation */
    areal_layer_pw *layers; /* [num_layers] by global layer */
    areal_twin lm_head;     /* p NULL when the model holds none */
};

static size_t packed_floats(int n_out, int n_in) {
    return ((size_t)n_out + 7) / 8 * 8 * (size_t)n_in;
}

static void pack_one(float *p, const float *w, int n_out, int n_in) {
    size_t bs = (size_t)n_in * 8;
    for (int o = 0; o < n_out; o += 8) {
        float *blk = p + (size_t)(o / 8) * bs;
        for (int j = 0; j < 8; j++) {
            if (o + j >= n_out) {
                for (int k = 0; k < n_in; k++)
                    blk[(size_t)k * 8 + j] = 0.0f;
                continue;
            }
            const float *r = w + (size_t)(o + j) * n_in;
            for (int k = 0; k < n_in; k++)
                blk[(size_t)k * 8 + j] = r[k];
        }
    }
}

/* The dense linear weights of layer l with their shapes: [n_out, n_in]. */
typedef struct lin_ref {
    const float *w;
    areal_twin *twin;
    int n_out, n_in;
} lin_ref;

static int layer_refs(const areal_model *m, int l, areal_layer_pw *pw, lin_ref *r) {
    const areal_layer_w *w = &m->w.layers[l];
    const areal_model_config *cf = &m->cfg;
    int H = cf->hidden_size, Q = m->nh * cf->head_dim, KV = m->nkv * cf->head_dim, I = m->inter;
    int n = 0;
    if (w->wq == NULL)
        return 0; /* outside the shard's layer range */
    r[n++] = (lin_ref){w->wq, &pw->wq, Q, H};
    r[n++] = (lin_ref){w->wk, &pw->wk, KV, H};
    r[n++] = (lin_ref){w->wv, &pw->wv, KV, H};
    r[n++] = (lin_ref){w->wo, &pw->wo, H, Q};
    if (w->gate != NULL && !(cf->num_experts > 0 && cf->moe_layer[l])) {
        r[n++] = (lin_ref){w->gate, &pw->gate, I, H};
        r[n++] = (lin_ref){w->up, &pw->up, I, H};
        r[n++] = (lin_ref){w->down, &pw->down, H, I};
    }
    return n;
}

void areal_model_infer_unpack(areal_model *m) {
    if (m->infer_pack == NULL)
        return;
    free(m->infer_pack->buf);
    free(m->infer_pack->layers);
    free(m->infer_pack);
    m->infer_pack = NULL;
}

int areal_model_infer_pack(areal_model *m, areal_error *err) {
    areal_model_infer_unpack(m);
    const areal_model_config *cf = &m->cfg;
    lin_ref r[8];
    size_t total = 0;
    for (int l = 0; l < cf->num_layers; l++) {
        areal_layer_pw scratch;
        int n = layer_refs(m, l, &scratch, r);
        for (int i = 0; i < n; i++)
            total += packed_floats(r[i].n_out, r[i].n_in);
    }
    if (m->w.lm_head != NULL)
        total += packed_floats(cf->vocab_size, cf->hidden_size);
    areal_infer_pack *p = calloc(1, sizeof *p);
    if (p != NULL) {
        p->layers = calloc((size_t)(cf->num_layers > 0 ? cf->num_layers : 1), sizeof *p->layers);
        /* 64-byte aligned: the kernels' panel loads then never split a cache line */
        p->buf = aligned_alloc(64, ((total ? total : 1) * sizeof(float) + 63) / 64 * 64);
    }
    if (p == NULL || p->layers == NULL || p->buf == NULL) {
        if (p != NULL) {
            free(p->layers);
            free(p->buf);
        }
        free(p);
        return areal_error_set(err, AREAL_ENOMEM, -1,
                               "no memory for the packed inference weights (%zu MiB)",
                               total * sizeof(float) >> 20);
    }
    float *at = p->buf;
    for (int l = 0; l < cf->num_layers; l++) {
        int n = layer_refs(m, l, &p->layers[l], r);
        for (int i = 0; i < n; i++) {
            pack_one(at, r[i].w, r[i].n_out, r[i].n_in);
            *r[i].twin = (areal_twin){at, r[i].n_out, r[i].n_in};
            at += packed_floats(r[i].n_out, r[i].n_in);
        }
    }
    if (m->w.lm_head != NULL) {
        pack_one(at, m->w.lm_head, cf->vocab_size, cf->hidden_size);
        p->lm_head = (areal_twin){at, cf->vocab_size, cf->hidden_size};
    }
    m->infer_pack = p;
    return AREAL_OK;
}

const areal_layer_pw *infer_pack_layer(const areal_model *m, int l) {
    static const areal_layer_pw none; /* read-only: no twin for any weight */
    return m->infer_pack != NULL ? &m->infer_pack->layers[l] : &none;
}

const areal_twin *infer_pack_lm_head(const areal_model *m) {
    static const areal_twin none;
    return m->infer_pack != NULL ? &m->infer_pack->lm_head : &none;
}

const float *infer_twin(const areal_twin *t, int n_out, int n_in) {
    return t->p != NULL && t->n_out == n_out && t->n_in == n_in ? t->p : NULL;
}
