/*
 * engine.c - the public side of the rollout engine (engine.h): create and
 * destroy, request validation and submission, abort / stop flags, the
 * blocking commands handed to the scheduler, model copies for staging, and
 * stats.
 *
 * Every check a request can fail happens here, before it is queued, so the
 * scheduler never meets a request it cannot finish: ids are in the
 * vocabulary, prompt + max_new_tokens fits the context and, alone, the KV
 * budget (so preemption can always make progress).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_internal.h"

void areal_engine_params_default(areal_engine_params *p) {
    memset(p, 0, sizeof *p);
    p->max_new_tokens = 128;
    p->temperature = 1.0f;
    p->top_p = 1.0f;
    p->n = 1;
    p->logprob_start_len = -1;
}

static int check_config(const areal_engine_config *c, areal_error *err) {
    if (c->tensor_parallel > 1 &&
        (c->tp_group == NULL || areal_coll_size(c->tp_group) != c->tensor_parallel ||
         areal_coll_rank(c->tp_group) != 0))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "tensor_parallel %d: the engine needs its tp group (tp_group) of "
                               "%d members with this process as member 0 (got %s of %d, member "
                               "%d); the other members run areal_engine_follow",
                               c->tensor_parallel, c->tensor_parallel,
                               c->tp_group ? "a group" : "none",
                               c->tp_group ? areal_coll_size(c->tp_group) : 0,
                               c->tp_group ? areal_coll_rank(c->tp_group) : -1);
    if (c->tp_ping_ms < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "engine config: tp_ping_ms %d < 0",
                               c->tp_ping_ms);
    if (c->tensor_parallel < 0 || c->block_tokens < 0 || c->block_tokens > 1024 ||
        c->max_running < 0 || c->max_queued < 0 || c->max_step_tokens < 0 || c->threads < 0 ||
        c->threads > 256 || c->n_eos_token_ids < 0 || c->vocab_limit < 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "engine config: block_tokens must be 0..1024 (got %d), "
                               "threads 0..256 (%d), and max_running (%d), max_queued (%d), "
                               "max_step_tokens (%d), tensor_parallel (%d), vocab_limit (%d) >= 0",
                               c->block_tokens, c->threads, c->max_running, c->max_queued,
                               c->max_step_tokens, c->tensor_parallel, c->vocab_limit);
    if (c->weight_version != NULL && strlen(c->weight_version) >= AREAL_ENGINE_VERSION_MAX)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "engine config: weight_version is longer than %d bytes",
                               AREAL_ENGINE_VERSION_MAX - 1);
    return AREAL_OK;
}

static void free_engine_parts(areal_engine *e) {
    if (e->be != NULL && e->be->release != NULL)
        e->be->release(e);
    areal_paged_kv_free(&e->kv);
    kvb_free(&e->blocks);
    areal_pool_destroy(e->pool);
    free((void *)e->cfg.eos_token_ids);
    free(e->batch);
    free(e->step_tok);
    free(e->cu);
    free(e->pseq);
    free(e->out_rows);
    free(e->logits);
    free(e->scratch);
    free(e->tp_buf);
}

int areal_engine_create(areal_model *model, const areal_engine_config *cfg, areal_engine **out,
                        areal_error *err) {
    *out = NULL;
    int rc = check_config(cfg, err);
    if (rc != AREAL_OK)
        return rc;
    areal_engine *e = calloc(1, sizeof *e);
    if (e == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "engine: no memory");
    e->cfg = *cfg;
    areal_engine_config *c = &e->cfg;
    c->block_tokens = c->block_tokens ? c->block_tokens : 16;
    c->max_running = c->max_running ? c->max_running : 64;
    c->max_queued = c->max_queued ? c->max_queued : 1024;
    c->max_step_tokens = c->max_step_tokens ? c->max_step_tokens : 2048;
    if (c->max_step_tokens < c->max_running)
        c->max_step_tokens = c->max_running; /* every running sequence decodes each step */
    c->threads = c->threads ? c->threads : 1;
    int tp = c->tensor_parallel > 1 ? c->tensor_parallel : 1;
    c->tensor_parallel = tp;
    c->tp_group = tp > 1 ? cfg->tp_group : NULL;
    c->tp_ping_ms = c->tp_ping_ms ? c->tp_ping_ms : 1000;
    e->tp = c->tp_group;
    c->weight_version = NULL;
    c->eos_token_ids = NULL;
    snprintf(e->version, sizeof e->version, "%s", cfg->weight_version ? cfg->weight_version : "0");
    /* this rank's blocks hold its local key/value heads only: the budget covers 1/tp of them */
    e->block_bytes = areal_paged_kv_block_bytes_local(model, c->block_tokens);
    size_t n_blocks = cfg->kv_bytes / e->block_bytes;
    if (n_blocks < 1 || n_blocks > (size_t)1 << 30) {
        size_t bb = e->block_bytes;
        int bt = c->block_tokens;
        free(e);
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "engine config: kv_bytes %zu holds %zu KV blocks of %zu bytes "
                               "(%d tokens x %d layers); give at least %zu bytes (--kv-memory)",
                               cfg->kv_bytes, n_blocks, bb, bt, model->cfg.num_layers, bb);
    }
    bool whole = areal_model_shard_is_whole(&model->cfg, &model->shard);
    if ((tp == 1 && !whole) ||
        (tp > 1 && (model->shard.tp != tp || model->shard.tp_rank != 0 ||
                    !areal_paged_shard_ok(&model->cfg, &model->shard, NULL)))) {
        free(e);
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "engine: the model is a shard (tp %d rank %d, pp %d, ep %d) but "
                               "tensor_parallel is %d; the engine serves the whole model at t = "
                               "1 and the tp-only shard of rank 0 (areal_model_load_shard) at "
                               "t > 1",
                               model->shard.tp, model->shard.tp_rank, model->shard.pp,
                               model->shard.ep, tp);
    }
    int V = model->cfg.vocab_size, R = c->max_running;
    if (cfg->n_eos_token_ids > 0) {
        int32_t *eos = malloc(sizeof(int32_t) * (size_t)cfg->n_eos_token_ids);
        if (eos != NULL)
            memcpy(eos, cfg->eos_token_ids, sizeof(int32_t) * (size_t)cfg->n_eos_token_ids);
        c->eos_token_ids = eos;
    }
    e->batch = malloc(sizeof *e->batch * (size_t)R);
    e->step_tok = malloc(sizeof(int32_t) * (size_t)c->max_step_tokens);
    e->cu = malloc(sizeof(int32_t) * ((size_t)R + 1));
    e->pseq = malloc(sizeof *e->pseq * (size_t)R);
    e->out_rows = malloc(sizeof(int32_t) * ((size_t)R + SCORE_ROWS));
    e->logits = malloc(sizeof(float) * ((size_t)R + SCORE_ROWS) * (size_t)V);
    e->scratch = malloc(sizeof(float) * 2 * (size_t)V);
    if (!e->batch || !e->step_tok || !e->cu || !e->pseq || !e->out_rows || !e->logits ||
        !e->scratch || (cfg->n_eos_token_ids > 0 && !c->eos_token_ids)) {
        free_engine_parts(e);
        free(e);
        return areal_error_set(err, AREAL_ENOMEM, -1, "engine: no memory for step buffers");
    }
    if ((c->threads > 1 && (rc = areal_pool_create(c->threads, &e->pool, err)) != AREAL_OK) ||
        (rc = areal_paged_kv_init_local(&e->kv, model, (int)n_blocks, c->block_tokens, err)) !=
            AREAL_OK ||
        (rc = kvb_init(&e->blocks, (int)n_blocks, c->block_tokens, err)) != AREAL_OK) {
        free_engine_parts(e);
        free(e);
        return rc;
    }
    e->model = malloc(sizeof *e->model);
    if (e->model == NULL) {
        free_engine_parts(e);
        free(e);
        return areal_error_set(err, AREAL_ENOMEM, -1, "engine: no memory");
    }
    /* The packed twin moves with the model: on a failure below the caller's
     * areal_model_free releases it. Without memory for it the engine serves
     * the row-major weights (the same numbers, slower). */
    areal_error pack_err;
    if (!c->no_prepack)
        (void)areal_model_infer_pack(model, &pack_err); /* stats.weights_packed tells */
    e->st.weights_packed = model->infer_pack != NULL;
    *e->model = *model;
    e->model->pool = e->pool;
    if (e->tp != NULL) /* the training forward's reduction points, over the server's group */
        areal_model_set_reduce(e->model, eng_tp_reduce, e->tp);
    e->mcfg = model->cfg;
    e->be = &eng_cpu_backend;
    if (c->gpu && (rc = eng_gpu_attach(e, err)) != AREAL_OK) {
        e->model->pool = model->pool;
        free(e->model);
        free_engine_parts(e);
        free(e);
        return rc;
    }
    if (e->tp != NULL && (rc = eng_tp_hello(e, err)) != AREAL_OK) {
        e->model->pool = model->pool;
        free(e->model);
        free_engine_parts(e);
        free(e);
        return rc;
    }
    e->v_draw = cfg->vocab_limit > 0 && cfg->vocab_limit < V ? cfg->vocab_limit : V;
    e->max_context = (int)(model->cfg.max_position_embeddings > 0 &&
                                   model->cfg.max_position_embeddings < (1 << 30)
                               ? model->cfg.max_position_embeddings
                               : 1 << 30);
    e->seed_state = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)e;
    e->win_t0 = eng_now();
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->cmd_mu, NULL);
    pthread_cond_init(&e->wake, NULL);
    pthread_cond_init(&e->cmd_cv, NULL);
    pthread_cond_init(&e->idle_cv, NULL);
    if (pthread_create(&e->thread, NULL, eng_scheduler, e) != 0) {
        e->model->pool = model->pool;
        free(e->model);
        pthread_mutex_destroy(&e->mu);
        pthread_mutex_destroy(&e->cmd_mu);
        pthread_cond_destroy(&e->wake);
        pthread_cond_destroy(&e->cmd_cv);
        pthread_cond_destroy(&e->idle_cv);
        free_engine_parts(e);
        free(e);
        return areal_error_set(err, AREAL_ENOMEM, -1, "engine: cannot start the scheduler");
    }
    memset(model, 0, sizeof *model);
    *out = e;
    return AREAL_OK;
}

void areal_engine_destroy(areal_engine *e) {
    if (e == NULL)
        return;
    pthread_mutex_lock(&e->mu);
    e->shutdown = true;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    while (e->lent != NULL) { /* holds the caller failed to release (a contract breach) */
        eng_lent *l = e->lent;
        e->lent = l->next;
        if (l->m != e->model) {
            areal_model_free(l->m);
            free(l->m);
        }
        free(l);
    }
    areal_model_free(e->model);
    free(e->model);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->cmd_mu);
    pthread_cond_destroy(&e->wake);
    pthread_cond_destroy(&e->cmd_cv);
    pthread_cond_destroy(&e->idle_cv);
    free_engine_parts(e);
    free(e);
}

static int check_request(const areal_engine *e, const areal_engine_request *r, int n,
                         areal_error *err) {
    const areal_engine_params *p = &r->params;
    int V = e->mcfg.vocab_size, bt = e->cfg.block_tokens;
    if (r->on_done == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "request: on_done is required");
    if (r->rid != NULL && strlen(r->rid) >= AREAL_ENGINE_RID_MAX)
        return areal_error_set(err, AREAL_EINVAL, -1, "rid: longer than %d bytes",
                               AREAL_ENGINE_RID_MAX - 1);
    if (r->n_input < 1 || r->input_ids == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "input_ids: empty; give at least one token");
    for (int i = 0; i < r->n_input; i++)
        if (r->input_ids[i] < 0 || r->input_ids[i] >= V)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "input_ids[%d]: id %d is outside the vocabulary [0, %d)", i,
                                   r->input_ids[i], V);
    if (p->max_new_tokens < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "max_new_tokens: %d is negative",
                               p->max_new_tokens);
    if ((long)r->n_input + p->max_new_tokens > e->max_context)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "max_new_tokens: %d new tokens after a %d-token prompt pass the "
                               "model's context of %d; lower max_new_tokens to at most %d",
                               p->max_new_tokens, r->n_input, e->max_context,
                               e->max_context - r->n_input);
    if (!(p->temperature >= 0) || !isfinite(p->temperature))
        return areal_error_set(err, AREAL_EINVAL, -1, "temperature: %g; must be >= 0 and finite",
                               p->temperature);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return areal_error_set(err, AREAL_EINVAL, -1, "top_p: %g; must be in (0, 1]", p->top_p);
    if (p->top_k < -1)
        return areal_error_set(err, AREAL_EINVAL, -1, "top_k: %d; must be >= 1, or 0 / -1 for all",
                               p->top_k);
    if (!(p->min_p >= 0 && p->min_p < 1))
        return areal_error_set(err, AREAL_EINVAL, -1, "min_p: %g; must be in [0, 1)", p->min_p);
    if (n < 1 || n > e->cfg.max_queued)
        return areal_error_set(err, AREAL_EINVAL, -1, "n: %d samples; must be 1..%d", n,
                               e->cfg.max_queued);
    if (p->n_stop_token_ids < 0 || (p->n_stop_token_ids > 0 && p->stop_token_ids == NULL))
        return areal_error_set(err, AREAL_EINVAL, -1, "stop_token_ids: bad count %d",
                               p->n_stop_token_ids);
    if (p->return_logprob && (p->top_logprobs_num < 0 || p->top_logprobs_num > V))
        return areal_error_set(err, AREAL_EINVAL, -1, "top_logprobs_num: %d; must be 0..%d",
                               p->top_logprobs_num, V);
    if (p->logprob_start_len < -1)
        return areal_error_set(err, AREAL_EINVAL, -1, "logprob_start_len: %d; must be >= -1",
                               p->logprob_start_len);
    long need = ((long)r->n_input + p->max_new_tokens + bt - 1) / bt;
    if (need > e->blocks.n)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "max_new_tokens: a %d-token prompt + %d new tokens needs %ld KV "
                               "blocks of %d tokens but the whole KV budget holds %d; lower "
                               "max_new_tokens or start the server with more --kv-memory",
                               r->n_input, p->max_new_tokens, need, bt, e->blocks.n);
    return AREAL_OK;
}

static eng_req *find_live(areal_engine *e, const char *rid) {
    for (eng_req *q = e->live_head; q != NULL; q = q->next)
        if (strcmp(q->rid, rid) == 0)
            return q;
    return NULL;
}

static uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int areal_engine_submit(areal_engine *e, const areal_engine_request *req, areal_error *err) {
    int n = req->params.n == 0 ? 1 : req->params.n;
    int rc = check_request(e, req, n, err);
    if (rc != AREAL_OK)
        return rc;
    pthread_mutex_lock(&e->mu);
    if (e->draining || e->shutdown) {
        pthread_mutex_unlock(&e->mu);
        return areal_error_set(err, AREAL_ENGINE_ESTOPPED, -1,
                               "engine: draining; no new requests are admitted");
    }
    if (e->waiting.n + n > e->cfg.max_queued) {
        int q = e->waiting.n;
        pthread_mutex_unlock(&e->mu);
        return areal_error_set(err, AREAL_ENGINE_EFULL, -1,
                               "engine: %d sequences queued (bound %d); retry later", q,
                               e->cfg.max_queued);
    }
    char rid[AREAL_ENGINE_RID_MAX];
    if (req->rid != NULL && req->rid[0] != '\0') {
        if (find_live(e, req->rid) != NULL) {
            pthread_mutex_unlock(&e->mu);
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "rid: \"%s\" is already a live request; use a new rid or "
                                   "abort the old one",
                                   req->rid);
        }
        snprintf(rid, sizeof rid, "%s", req->rid);
    } else {
        snprintf(rid, sizeof rid, "req-%llu", (unsigned long long)++e->next_rid);
    }
    uint64_t seed = req->params.has_seed ? req->params.sampling_seed : mix(&e->seed_state);
    eng_req *q = req_new(req, n, e->cfg.block_tokens, seed, rid);
    if (q == NULL) {
        pthread_mutex_unlock(&e->mu);
        return areal_error_set(err, AREAL_ENOMEM, -1, "engine: no memory for request %s", rid);
    }
    q->t_submit = eng_now();
    q->next = e->live_head;
    if (e->live_head)
        e->live_head->prev = q;
    e->live_head = q;
    e->n_live++;
    for (int i = 0; i < n; i++)
        seq_list_push_back(&e->waiting, &q->seqs[i]);
    e->st.requests_total++;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    return AREAL_OK;
}

static int flag(areal_engine *e, const char *rid, bool stop) {
    pthread_mutex_lock(&e->mu);
    eng_req *q = rid != NULL ? find_live(e, rid) : NULL;
    if (q != NULL) {
        if (stop)
            q->stop_flag = true;
        else
            q->abort_flag = true;
        e->any_flag = true;
        pthread_cond_signal(&e->wake);
    }
    pthread_mutex_unlock(&e->mu);
    return q != NULL ? AREAL_OK : AREAL_ENGINE_ENOENT;
}

int areal_engine_abort(areal_engine *e, const char *rid) {
    return flag(e, rid, false);
}

int areal_engine_stop(areal_engine *e, const char *rid) {
    return flag(e, rid, true);
}

int areal_engine_abort_all(areal_engine *e) {
    int n = 0;
    pthread_mutex_lock(&e->mu);
    for (eng_req *q = e->live_head; q != NULL; q = q->next, n++)
        q->abort_flag = true;
    e->any_flag = n > 0;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->mu);
    return n;
}

/* Hands a command to the scheduler and waits until it has been served. */
static int run_cmd(areal_engine *e, eng_cmd cmd) {
    pthread_mutex_lock(&e->mu);
    e->cmd = cmd;
    pthread_cond_signal(&e->wake);
    while (e->cmd != CMD_NONE)
        pthread_cond_wait(&e->cmd_cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    return AREAL_OK;
}

int areal_engine_pause(areal_engine *e, areal_engine_pause_mode mode) {
    pthread_mutex_lock(&e->cmd_mu);
    e->cmd_mode = mode;
    int rc = run_cmd(e, CMD_PAUSE);
    pthread_mutex_unlock(&e->cmd_mu);
    return rc;
}

int areal_engine_continue(areal_engine *e) {
    pthread_mutex_lock(&e->cmd_mu);
    int rc = run_cmd(e, CMD_CONTINUE);
    pthread_mutex_unlock(&e->cmd_mu);
    return rc;
}

int areal_engine_flush_cache(areal_engine *e) {
    pthread_mutex_lock(&e->cmd_mu);
    int rc = run_cmd(e, CMD_FLUSH);
    pthread_mutex_unlock(&e->cmd_mu);
    return rc;
}

static int same_arch(const areal_model *a, const areal_model *b, areal_error *err) {
    if (a->cfg.arch != b->cfg.arch || a->n_specs != b->n_specs || a->n_params != b->n_params)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "weights: the new model is a %s with %zu tensors (%zu parameters) "
                               "but the served one is a %s with %zu (%zu); load a checkpoint of "
                               "the same architecture",
                               areal_arch_name(b->cfg.arch), b->n_specs, b->n_params,
                               areal_arch_name(a->cfg.arch), a->n_specs, a->n_params);
    for (size_t i = 0; i < a->n_specs; i++) {
        const areal_tensor_spec *x = &a->specs[i], *y = &b->specs[i];
        if (strcmp(x->name, y->name) != 0 || x->ndim != y->ndim || x->shape[0] != y->shape[0] ||
            (x->ndim == 2 && x->shape[1] != y->shape[1]))
            return areal_error_set(
                err, AREAL_EINVAL, -1,
                "weights: tensor %zu is %s [%lld, %lld] in the new model but "
                "%s [%lld, %lld] in the served one",
                i, y->name, (long long)y->shape[0], (long long)(y->ndim == 2 ? y->shape[1] : 1),
                x->name, (long long)x->shape[0], (long long)(x->ndim == 2 ? x->shape[1] : 1));
    }
    const areal_model_config *x = &a->cfg, *y = &b->cfg;
    if (x->num_heads != y->num_heads || x->num_kv_heads != y->num_kv_heads ||
        x->head_dim != y->head_dim || x->rope_theta != y->rope_theta ||
        x->rms_norm_eps != y->rms_norm_eps ||
        x->max_position_embeddings != y->max_position_embeddings ||
        x->rope_scaling.type != y->rope_scaling.type)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "weights: the new config differs from the served one in heads, "
                               "head_dim, rope or norm settings, or max_position_embeddings");
    return AREAL_OK;
}

static int swap(areal_engine *e, areal_model *model, const char *dir, const char *version,
                bool abort_live, areal_error *err) {
    if (version != NULL && strlen(version) >= AREAL_ENGINE_VERSION_MAX)
        return areal_error_set(err, AREAL_EINVAL, -1, "weight_version: longer than %d bytes",
                               AREAL_ENGINE_VERSION_MAX - 1);
    if (e->tp != NULL && dir == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "weights: a tensor-parallel engine (t %d) swaps only weights its "
                               "followers can load too: use areal_engine_swap_model_dir",
                               e->cfg.tensor_parallel);
    /* packed here, on the caller's thread, while the old weights still serve */
    areal_error pack_err;
    if (!e->cfg.no_prepack)
        (void)areal_model_infer_pack(model, &pack_err); /* stats.weights_packed tells */
    pthread_mutex_lock(&e->cmd_mu);
    int rc = same_arch(e->model, model, err);
    areal_model *held = rc == AREAL_OK ? malloc(sizeof *held) : NULL;
    if (rc == AREAL_OK && held == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "weights: no memory");
    if (rc == AREAL_OK) {
        *held = *model;
        held->pool = e->pool;
        if (e->tp != NULL)
            areal_model_set_reduce(held, eng_tp_reduce, e->tp);
        e->cmd_model = held;
        e->cmd_version = version;
        e->cmd_abort = abort_live;
        e->cmd_dir = e->tp != NULL ? dir : NULL;
        e->cmd_rc = AREAL_OK;
        run_cmd(e, CMD_SWAP);
        rc = e->cmd_rc;
        if (rc == AREAL_OK) {
            memset(model, 0, sizeof *model);
        } else { /* the followers did not all load: the caller keeps its model */
            if (err != NULL)
                *err = e->cmd_err;
            free(held);
        }
        e->cmd_dir = NULL;
    }
    pthread_mutex_unlock(&e->cmd_mu);
    return rc;
}

int areal_engine_swap_model(areal_engine *e, areal_model *model, const char *version,
                            bool abort_live, areal_error *err) {
    return swap(e, model, NULL, version, abort_live, err);
}

int areal_engine_swap_model_dir(areal_engine *e, areal_model *model, const char *dir,
                                const char *version, bool abort_live, areal_error *err) {
    return swap(e, model, dir, version, abort_live, err);
}

int areal_engine_copy_model(areal_engine *e, areal_model *dst, areal_error *err) {
    if (e->tp != NULL) /* rank 0 holds its shard only: a copy would not be the served model */
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "weights: a tensor-parallel engine (t %d) holds 1/t of the model "
                               "on this rank; no whole copy exists here",
                               e->cfg.tensor_parallel);
    pthread_mutex_lock(&e->cmd_mu); /* no swap meanwhile: the served buffer stays */
    int rc = areal_model_init(dst, &e->model->cfg, NULL, err);
    if (rc == AREAL_OK)
        memcpy(dst->params, e->model->params, sizeof(float) * e->model->n_params);
    pthread_mutex_unlock(&e->cmd_mu);
    return rc;
}

bool eng_model_lent(const areal_engine *e, const areal_model *m) {
    for (const eng_lent *l = e->lent; l != NULL; l = l->next)
        if (l->m == m)
            return true;
    return false;
}

const areal_model *areal_engine_hold_model(areal_engine *e, char *version, size_t cap) {
    pthread_mutex_lock(&e->mu);
    eng_lent *l = e->lent;
    while (l != NULL && l->m != e->model)
        l = l->next;
    if (l == NULL && (l = calloc(1, sizeof *l)) != NULL) {
        l->m = e->model;
        l->next = e->lent;
        e->lent = l;
    }
    if (l == NULL) {
        pthread_mutex_unlock(&e->mu);
        return NULL;
    }
    l->refs++;
    if (version != NULL && cap > 0)
        snprintf(version, cap, "%s", e->version);
    const areal_model *m = l->m;
    pthread_mutex_unlock(&e->mu);
    return m;
}

void areal_engine_release_model(areal_engine *e, const areal_model *m) {
    areal_model *retired = NULL;
    pthread_mutex_lock(&e->mu);
    for (eng_lent **p = &e->lent; *p != NULL; p = &(*p)->next) {
        eng_lent *l = *p;
        if (l->m != m)
            continue;
        if (--l->refs == 0) {
            *p = l->next;
            if (l->m != e->model)
                retired = l->m; /* swapped out while lent */
            free(l);
        }
        break;
    }
    pthread_mutex_unlock(&e->mu);
    if (retired != NULL) {
        areal_model_free(retired);
        free(retired);
    }
}

const areal_model_config *areal_engine_model_config(const areal_engine *e) {
    return &e->mcfg;
}

const areal_engine_config *areal_engine_get_config(const areal_engine *e) {
    return &e->cfg;
}

int areal_engine_drain(areal_engine *e, bool abort_live) {
    pthread_mutex_lock(&e->mu);
    e->draining = true;
    e->paused = false; /* held requests must be able to finish */
    if (abort_live) {
        for (eng_req *q = e->live_head; q != NULL; q = q->next)
            q->abort_flag = true;
        e->any_flag = e->live_head != NULL;
    }
    pthread_cond_signal(&e->wake);
    while (e->n_live > 0)
        pthread_cond_wait(&e->idle_cv, &e->mu);
    pthread_mutex_unlock(&e->mu);
    return AREAL_OK;
}

void areal_engine_get_stats(areal_engine *e, areal_engine_stats *st) {
    pthread_mutex_lock(&e->mu);
    *st = e->st;
    st->queued = e->waiting.n;
    st->live_requests = e->n_live;
    st->paused = e->paused;
    st->block_tokens = e->cfg.block_tokens;
    st->blocks_total = e->blocks.n;
    st->kv_bytes_budget = e->cfg.kv_bytes;
    st->kv_bytes_allocated = (size_t)e->blocks.n * e->block_bytes;
    snprintf(st->weight_version, sizeof st->weight_version, "%s", e->version);
    pthread_mutex_unlock(&e->mu);
}
