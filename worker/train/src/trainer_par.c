/*
 * trainer_par.c - the trainer's state under a layout (see trainer_par.h):
 * groups, the shard loaded from the HF checkpoint, the parallel step, and the
 * gather of whole HF tensors through world rank 0 (weight sync; checkpoints are per rank,
 * trainer_par_ckpt.c).
 */
#include "areal/train/trainer_par.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/comm/role_groups.h"
#include "areal/model/checkpoint.h"
#include "areal/parallel/ep.h"
#include "areal/parallel/groups.h"
#include "trainer_par_internal.h"

struct areal_train_par {
    areal_train_layout l;
    areal_coll *gs[AREAL_GROUP_KIND_COUNT];
    areal_coll *world;
    areal_par_groups g;
    areal_model_config cfg;
    areal_tensor_spec *hf; /* the whole model's tensors, in its buffer order */
    size_t n_hf;
    areal_model shard;    /* megatron: the rank's shard (vpp > 1: its chunk 0) */
    areal_model *more;    /* vpp > 1: chunks 1 .. vpp-1 (virtual stages c*p + r) */
    areal_model **chunks; /* vpp > 1: [vpp], chunks[0] = &shard */
    areal_par_fsdp *fsdp; /* fsdp: the rank's ranges */
    areal_par_step step;
    areal_adamw_cfg adamw;
    int *slice_of; /* [world] each rank's data slice */
    int n_slices;
    areal_model_shard mine;    /* megatron: the shard loaded */
    areal_model_shard *shards; /* megatron, world > 1: every world rank's (the wsync plan's) */
    char model_dir[4096];      /* the initial model (its config.json goes into checkpoints) */
};

static size_t numel(const areal_tensor_spec *t) {
    return (size_t)t->shape[0] * (t->ndim == 2 ? (size_t)t->shape[1] : 1);
}

int areal_train_layout_parse(const char *s, areal_train_layout *out, areal_error *err) {
    memset(out, 0, sizeof *out);
    areal_alloc a;
    areal_error pe;
    if (areal_alloc_parse(s, &a, &pe) != AREAL_OK)
        return areal_error_set(err, AREAL_EINVAL, -1, "layout '%s': %s", s, pe.msg);
    if (a.n_components != 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "layout '%s': give the trainer's component alone (e.g. "
                               "megatron:d1t2p2), not %d components",
                               s, a.n_components);
    const areal_component *c = &a.comp[0];
    if (c->backend != AREAL_BACKEND_FSDP && c->backend != AREAL_BACKEND_MEGATRON)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "layout '%s': backend %s is not a trainer's (fsdp or megatron)", s,
                               areal_backend_name(c->backend));
    const areal_strategy *st = &c->strategy;
    bool fsdp = c->backend == AREAL_BACKEND_FSDP;
    const char *missing = fsdp && st->tp > 1   ? "fsdp with t > 1 (use megatron)"
                          : fsdp && st->cp > 1 ? "fsdp with c > 1 (use megatron)"
                          : st->cp > 1 && st->ep > 1
                              ? "context parallelism (c > 1) together with expert parallelism "
                                "(e > 1)"
                              : NULL;
    if (missing != NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "layout '%s': the trainer does not build %s yet; use megatron's "
                               "d, t, p, c, or d, t, p, e (with etp from the (attn:|ffn:) form)",
                               s, missing);
    out->backend = c->backend;
    out->s = *st;
    return AREAL_OK;
}

int areal_train_layout_world(const areal_train_layout *l) {
    return l->s.dp * l->s.tp * l->s.pp * (l->s.cp > 0 ? l->s.cp : 1);
}

void areal_train_par_free(areal_train_par *p) {
    if (p == NULL)
        return;
    areal_par_step_free(&p->step);
    areal_par_fsdp_free(p->fsdp);
    for (int c = 1; p->more != NULL && c < p->l.vpp; c++)
        areal_model_free(&p->more[c - 1]);
    free(p->more);
    free(p->chunks);
    areal_model_free(&p->shard);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(p->gs[k]);
    areal_coll_destroy(p->world);
    free(p->hf);
    free(p->slice_of);
    free(p->shards);
    free(p);
}

/* FSDP: this rank's ranges of every tensor, read one tensor at a time. */
static int load_fsdp(areal_train_par *p, const char *dir, areal_error *err) {
    areal_checkpoint ck;
    int rc = areal_checkpoint_open(dir, &ck, err);
    if (rc != AREAL_OK)
        return rc;
    size_t most = 1;
    for (size_t i = 0; i < p->n_hf; i++)
        most = numel(&p->hf[i]) > most ? numel(&p->hf[i]) : most;
    float *buf = malloc(sizeof(float) * most);
    if (buf == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a tensor of %zu floats", most);
    for (size_t i = 0; rc == AREAL_OK && i < p->n_hf; i++) {
        rc = areal_checkpoint_load_f32(&ck, p->hf[i].name, buf, most, err);
        if (rc == AREAL_OK)
            rc = areal_par_fsdp_set_tensor(p->fsdp, p->hf[i].name, 0, buf, err);
    }
    free(buf);
    areal_checkpoint_close(&ck);
    return rc;
}

/* Megatron: the shard of the groups, vocab-parallel logits where the vocabulary divides. */
static int load_shard(areal_train_par *p, const char *dir, areal_pool *pool, areal_error *err) {
    areal_model_shard sh;
    /* under expert parallelism: the rank's experts (ep) and their etp slice, for dispatch */
    areal_par_ep_groups eg = areal_par_ep_groups_of(p->gs);
    int rc = p->l.s.ep > 1 ? areal_par_ep_shard_of(&p->cfg, &eg, &sh, err)
                           : areal_par_shard_of(&p->cfg, &p->g, &sh, err);
    if (rc != AREAL_OK)
        return rc;
    if (sh.tp > 1 && p->cfg.vocab_size % sh.tp == 0) {
        /* never the whole logits on one rank (vocab.h); keep it only where the model allows */
        areal_model_shard v = sh;
        v.vocab_parallel = true;
        areal_error e2;
        if (areal_model_shard_check(&p->cfg, &v, &e2) == AREAL_OK)
            sh = v;
    }
    p->mine = sh;
    return areal_model_load_shard(&p->shard, dir, &sh, pool, err);
}

/*
 * The interleaved pipeline: chunk c of pp rank r is virtual stage c*p + r of
 * p*vpp (vpp.h), each loaded from the HF checkpoint as a shard of its own.
 */
static int load_chunks(areal_train_par *p, const char *dir, areal_pool *pool, areal_error *err) {
    int vpp = p->l.vpp, np = areal_par_size(p->g.pp), r = areal_par_rank(p->g.pp);
    p->more = calloc((size_t)vpp - 1, sizeof *p->more);
    p->chunks = calloc((size_t)vpp, sizeof *p->chunks);
    if (p->more == NULL || p->chunks == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for %d model chunks", vpp);
    int rc = AREAL_OK;
    for (int c = 0; rc == AREAL_OK && c < vpp; c++) {
        areal_model_shard sh;
        areal_model *m = c == 0 ? &p->shard : &p->more[c - 1];
        rc = areal_model_shard_stage(&p->cfg, c * np + r, np * vpp, &sh, err);
        if (rc == AREAL_OK)
            rc = areal_model_load_shard(m, dir, &sh, pool, err);
        if (rc == AREAL_OK && c == 0)
            p->mine = sh;
        p->chunks[c] = m;
    }
    return rc;
}

/* Every world rank's data slice, all-gathered (rank 0 routes the batch by it). */
static int slice_map(areal_train_par *p, int world, areal_error *err) {
    p->n_slices = areal_par_size(p->g.dp);
    p->slice_of = calloc((size_t)world, sizeof *p->slice_of);
    if (p->slice_of == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the slice map");
    int32_t mine = areal_par_rank(p->g.dp);
    int32_t *all = calloc((size_t)world, sizeof *all);
    int rc = all == NULL ? areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the slice map")
             : world > 1 ? areal_coll_all_gather(p->world, &mine, all, 1, AREAL_DT_I32, err)
                         : AREAL_OK;
    for (int r = 0; rc == AREAL_OK && r < world; r++)
        p->slice_of[r] = world > 1 ? all[r] : 0;
    free(all);
    return rc;
}

/* Every world rank's shard, all-gathered as words (the struct is plain data; one build). */
static int shard_map(areal_train_par *p, int world, areal_error *err) {
    size_t w = (sizeof(areal_model_shard) + 3) / 4;
    int32_t *mine = calloc(w, 4), *all = calloc(w * (size_t)world, 4);
    p->shards = calloc((size_t)world, sizeof *p->shards);
    int rc = mine == NULL || all == NULL || p->shards == NULL
                 ? areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the shard map")
                 : AREAL_OK;
    if (rc == AREAL_OK) {
        memcpy(mine, &p->mine, sizeof p->mine);
        rc = areal_coll_all_gather(p->world, mine, all, w, AREAL_DT_I32, err);
    }
    for (int r = 0; rc == AREAL_OK && r < world; r++)
        memcpy(&p->shards[r], all + w * (size_t)r, sizeof *p->shards);
    free(mine);
    free(all);
    return rc;
}

int areal_train_par_create(const areal_train_layout *l, const char *model_dir,
                           const areal_adamw_cfg *adamw, areal_pool *pool, areal_train_par **out,
                           areal_error *err) {
    *out = NULL;
    if (l->vpp > 1 && (l->backend != AREAL_BACKEND_MEGATRON || l->s.pp < 2 || l->s.tp > 1 ||
                       l->s.cp > 1 || l->s.ep > 1))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "actor.megatron.virtual_pipeline_parallel_size is %d: the "
                               "interleaved pipeline needs a megatron layout with p > 1 and "
                               "(built so far) t1, c1, e1 (d allowed); set it to 1 or use such a "
                               "layout",
                               l->vpp);
    int W = areal_train_layout_world(l), world = areal_comm_world(l->comm);
    if (W != world)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "layout d%dt%dp%dc%d needs %d trainer ranks, the world has %d "
                               "(start one rank per GPU of the layout)",
                               l->s.dp, l->s.tp, l->s.pp, l->s.cp > 0 ? l->s.cp : 1, W, world);
    areal_train_par *p = calloc(1, sizeof *p);
    if (p == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the trainer's layout");
    p->l = *l;
    p->adamw = *adamw;
    snprintf(p->model_dir, sizeof p->model_dir, "%s", model_dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    int rc = areal_model_config_load(path, &p->cfg, err);
    if (rc == AREAL_OK)
        rc = areal_model_expected_tensors(&p->cfg, &p->hf, &p->n_hf, err);
    areal_role_plan role;
    areal_coll_factory f = areal_comm_coll_factory(l->comm);
    areal_strategy s = l->s;
    s.edp = 0; /* derived by the role's layout */
    if (rc == AREAL_OK)
        rc = areal_comm_role_of_strategy(&s, &role, err);
    if (rc == AREAL_OK)
        rc = areal_comm_role_groups(&role, &f, p->gs, err);
    int *ranks = rc == AREAL_OK ? malloc(sizeof(int) * (size_t)world) : NULL;
    if (rc == AREAL_OK && ranks == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the world group");
    for (int r = 0; rc == AREAL_OK && r < world; r++)
        ranks[r] = r;
    if (rc == AREAL_OK)
        rc = f.group(f.ctx, "trainer-world", ranks, world, &p->world, err);
    free(ranks);
    if (rc == AREAL_OK) {
        p->g = areal_par_groups_of(p->gs);
        rc = slice_map(p, world, err);
    }
    bool fsdp = l->backend == AREAL_BACKEND_FSDP;
    if (rc == AREAL_OK && fsdp) {
        rc = areal_par_fsdp_create(&p->cfg, p->g.dp, pool, &p->fsdp, err);
        if (rc == AREAL_OK)
            rc = load_fsdp(p, model_dir, err);
    } else if (rc == AREAL_OK && l->vpp > 1) {
        rc = load_chunks(p, model_dir, pool, err);
    } else if (rc == AREAL_OK) {
        rc = load_shard(p, model_dir, pool, err);
    }
    /* vpp: no shard map, so the weight sync takes the gathered path (the plan knows one
     * stage per rank) */
    if (rc == AREAL_OK && !fsdp && world > 1 && l->vpp <= 1)
        rc = shard_map(p, world, err);
    /*
     * The step's kind and data group: ZeRO-1 over dp-cp (Megatron's distributed optimizer;
     * the cp ranks hold parts of the same sequences, so the token count, the loss and the
     * gradients are summed over dp-cp); plain AdamW under expert dispatch (ZeRO-1's
     * reduce-scatter over dp would sum different experts' gradients), the data group then
     * the dp group holding the ep ranks (they hold different sequences).
     */
    bool cp = l->s.cp > 1, ep = l->s.ep > 1, vpp = l->vpp > 1;
    areal_coll *data = cp ? p->gs[AREAL_GROUP_DP_CP] : p->g.dp;
    /* vpp: plain AdamW per chunk (ZeRO-1's range is over one shard's buffer) */
    areal_par_optim kind = fsdp                                      ? AREAL_PAR_FSDP
                           : !ep && !vpp && areal_par_size(data) > 1 ? AREAL_PAR_ZERO1
                                                                     : AREAL_PAR_ADAMW;
    if (rc == AREAL_OK)
        rc = areal_par_step_init(&p->step, kind, &p->g, data, fsdp ? NULL : &p->shard, p->fsdp,
                                 pool, err);
    if (rc == AREAL_OK && cp)
        rc = areal_par_step_cp(&p->step, p->gs[AREAL_GROUP_CP], err);
    if (rc == AREAL_OK && vpp)
        rc = areal_par_step_vpp(&p->step, p->chunks, l->vpp, err);
    if (rc == AREAL_OK && ep) {
        areal_par_ep_groups eg = areal_par_ep_groups_of(p->gs);
        rc = areal_par_step_ep(&p->step, &eg, err);
    }
    p->step.bucket = l->dp_bucket;
    /* dp 1: nothing to overlap, no change; ep: experts are summed over edp, not the
     * data group, so the step refuses the overlap there */
    if (rc == AREAL_OK && !fsdp && !ep && !vpp && !l->no_overlap)
        rc = areal_par_step_overlap(&p->step, err);
    if (rc != AREAL_OK) {
        areal_train_par_free(p);
        return rc;
    }
    *out = p;
    return AREAL_OK;
}

areal_par_step *areal_train_par_step(areal_train_par *p) {
    return &p->step;
}

areal_pg *areal_train_par_data_pg(areal_train_par *p) {
    return areal_par_size(p->g.dp) > 1 ? areal_coll_impl(p->g.dp) : NULL;
}

const areal_adamw_cfg *areal_train_par_adamw(const areal_train_par *p) {
    return &p->adamw;
}

int areal_train_par_mb_multiple(const areal_train_par *p) {
    return p->l.vpp > 1 ? p->l.s.pp : 1;
}

int areal_train_par_slices(const areal_train_par *p) {
    return p->n_slices;
}

int areal_train_par_slice_of(const areal_train_par *p, int r) {
    return p->slice_of[r];
}

int areal_train_par_gather(areal_train_par *p, int which, float *dst, areal_error *err) {
    bool root = areal_coll_rank(p->world) == 0;
    size_t most = 1, off = 0;
    for (size_t i = 0; i < p->n_hf; i++)
        most = numel(&p->hf[i]) > most ? numel(&p->hf[i]) : most;
    float *buf = malloc(sizeof(float) * most);
    int rc =
        buf == NULL ? areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a tensor") : AREAL_OK;
    for (size_t i = 0; rc == AREAL_OK && i < p->n_hf; i++) {
        size_t n = numel(&p->hf[i]);
        rc = areal_par_step_get_tensor(&p->step, p->world, &p->hf[i], which, buf, err);
        if (rc == AREAL_OK && root && dst != NULL)
            memcpy(dst + off, buf, sizeof(float) * n);
        off += n;
    }
    free(buf);
    return rc;
}

bool areal_train_par_sharded(const areal_train_par *p) {
    /* the plan (wsync_shard.h) knows tp and pp slices only: cp replicas and ep's expert
     * ranges take the gathered path (weight_sync_path "gather") */
    return p != NULL && p->shards != NULL && p->l.backend == AREAL_BACKEND_MEGATRON &&
           (p->l.s.tp > 1 || p->l.s.pp > 1) && p->l.s.cp <= 1 && p->l.s.ep <= 1;
}

int areal_train_par_wsync_plan(const areal_train_par *p, size_t bucket_bytes,
                               areal_wsync_plan **plan, const void ***local, areal_error *err) {
    *plan = NULL;
    *local = NULL;
    if (!areal_train_par_sharded(p))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "shard-direct weight sync needs a megatron layout with t > 1 or "
                               "p > 1");
    int rc = areal_wsync_plan_build(&p->cfg, p->shards, areal_coll_size(p->world), AREAL_DT_F32,
                                    bucket_bytes, plan, err);
    if (rc != AREAL_OK)
        return rc;
    const void **l = calloc(p->shard.n_specs ? p->shard.n_specs : 1, sizeof *l);
    if (l == NULL) {
        areal_wsync_plan_free(*plan);
        *plan = NULL;
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the slices");
    }
    for (size_t i = 0; i < p->shard.n_specs; i++)
        l[i] = p->shard.params + p->shard.offset[i];
    *local = l;
    return AREAL_OK;
}

areal_train_par_parts areal_train_par_parts_of(areal_train_par *p) {
    areal_train_par_parts v = {
        &p->l, &p->step, p->fsdp,     &p->shard, p->world, p->g.dp, p->gs[AREAL_GROUP_EDP],
        p->hf, p->n_hf,  p->model_dir};
    return v;
}
