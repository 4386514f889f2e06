/*
 * train_loop.c - the trainer role's job loop (see train_loop.h).
 *
 * Data position. The checkpoint records how many prompts training has
 * consumed (step x B), not how many the dispatcher has admitted: with eta > 0
 * prompts in flight at a checkpoint are generated again after a resume, as
 * in AReaL, and with eta = 0 nothing is in flight at a step boundary, so the
 * resumed run sees exactly the prompts, seeds and versions of an
 * uninterrupted one. Sampling seeds come from (seed, prompt index, version
 * at submission, sample), never from a clock.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "areal/model/pool.h"
#include "areal/model/tokenizer.h"
#include "areal/train/backend.h"
#include "areal/train/ckpt.h"
#include "areal/train/discover.h"
#include "areal/train/dp.h"
#include "areal/train/hf_save.h"
#include "areal/train/rollout_ctl.h"
#include "areal/train/task.h"
#include "areal/train/tiny.h"
#include "areal/train/train_loop.h"
#include "areal/train/train_optim.h"
#include "areal/train/trainer.h"
#include "areal/train/warmup.h"
#include "areal/train/xccl.h"
#include "areal/train/train_ckpt.h"
#include "areal/train/trainer_par.h"
#include "areal/train/trainer_par_ckpt.h"
#include "areal/train/xccl_shard.h"
#include "loop_status.h"

typedef struct loop {
    const areal_train_job *job;
    areal_task task; /* prompts (train then held-out) and the reward */
    int32_t eos;
    int max_new_tokens; /* of a rollout (eval: at least 8) */
} loop;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void say(const areal_train_job *j, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(const areal_train_job *j, const char *fmt, ...) {
    if (j->log == NULL)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    j->log(j->ctx, line);
}

/* Groups finish in any order; training sees them in admission order, so a run is
 * reproducible (with eta = 0 the same set of groups forms every batch). */
static int by_admission(const void *a, const void *b) {
    const areal_group *x = a, *y = b;
    if (x->version_at_submit != y->version_at_submit)
        return x->version_at_submit < y->version_at_submit ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Prompt indices: training items are 0..n_train-1, held-out ones n_train + i. */
static const areal_task_item *item_at(const loop *l, long index) {
    return (size_t)index < l->task.n_train ? &l->task.train[index]
                                           : &l->task.test[(size_t)index - l->task.n_train];
}

static int next_prompt(void *ctx, areal_rollout_prompt *p) {
    loop *l = ctx;
    long k;
    const areal_task_item *it = areal_task_next(&l->task, &k);
    p->ids = it->prompt;
    p->n_ids = it->n_prompt;
    p->index = k;
    return 1;
}

static float reward(void *ctx, long index, const int32_t *resp, int n) {
    loop *l = ctx;
    return areal_task_reward(&l->task, item_at(l, index), resp, n);
}

static void ctl_log(void *ctx, const char *line) {
    loop *l = ctx;
    say(l->job, "rollout: %s", line);
}

static void task_log(void *ctx, const char *line) {
    const areal_train_job *j = ctx;
    say(j, "%s", line);
}

static int loop_init(loop *l, const areal_train_job *job, areal_tokenizer *tok, areal_error *err) {
    memset(l, 0, sizeof *l);
    l->job = job;
    l->eos = areal_tokenizer_token_id(tok, AREAL_TINY_EOS);
    if (l->eos < 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "%s/tokenizer.json has no %s token",
                               job->model_dir, AREAL_TINY_EOS);
    areal_task_cfg tc = {job->cfg, job->job_dir, job->model_dir, job->task,  job->reward,
                         tok,      l->eos,       task_log,       (void *)job};
    return areal_task_load(&l->task, &tc, err);
}

static void loop_free(loop *l) {
    areal_task_free(&l->task);
}

/* New tokens per rollout: gconfig.max_new_tokens within gconfig.max_tokens and the
 * model's context after the longest prompt (AReaL's min(max_tokens - prompt, max_new)). */
static int budget_tokens(loop *l, const areal_rl_config *cfg, const areal_trainer *t,
                         areal_error *err) {
    long longest = 0;
    for (size_t i = 0; i < l->task.n_train; i++)
        longest = l->task.train[i].n_prompt > longest ? l->task.train[i].n_prompt : longest;
    for (size_t i = 0; i < l->task.n_test; i++)
        longest = l->task.test[i].n_prompt > longest ? l->task.test[i].n_prompt : longest;
    long n = cfg->gconfig.max_new_tokens;
    if (cfg->gconfig.max_tokens > 0 && cfg->gconfig.max_tokens - longest < n)
        n = cfg->gconfig.max_tokens - longest;
    long ctx = (long)t->model.cfg.max_position_embeddings;
    if (ctx > 0 && ctx - longest < n)
        n = ctx - longest;
    if (n < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "the longest prompt (%ld tokens) leaves no room to generate in "
                               "gconfig.max_tokens %ld / the model's %ld positions; lower "
                               "train_dataset.max_length",
                               longest, cfg->gconfig.max_tokens, ctx);
    l->max_new_tokens = n > 1 << 20 ? 1 << 20 : (int)n;
    return AREAL_OK;
}

static int evaluate(loop *l, areal_rollout_ctl *ctl, double *acc, areal_error *err) {
    size_t n_test = l->task.n_test;
    size_t n =
        l->job->eval_n > 0 && (size_t)l->job->eval_n < n_test ? (size_t)l->job->eval_n : n_test;
    areal_rollout_prompt *p = calloc(n, sizeof *p);
    float *r = calloc(n, sizeof *r);
    int rc = p && r ? AREAL_OK : areal_error_set(err, AREAL_ENOMEM, -1, "no memory for eval");
    for (size_t i = 0; rc == AREAL_OK && i < n; i++) {
        const areal_task_item *e = &l->task.test[i];
        p[i].ids = e->prompt;
        p[i].n_ids = e->n_prompt;
        p[i].index = (long)(l->task.n_train + i);
    }
    areal_sgl_sampling s = {0};
    s.max_new_tokens = l->max_new_tokens > 8 ? l->max_new_tokens : 8;
    s.temperature = 0;
    s.top_p = 1;
    s.stop_token_ids = &l->eos;
    s.n_stop = 1;
    if (rc == AREAL_OK)
        rc = areal_rollout_ctl_eval(ctl, p, (int)n, &s, r, err);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += r[i];
    *acc = n ? sum / (double)n : 0;
    free(p);
    free(r);
    return rc;
}

/* disk weight update: save v, point every server at it, drop the one before last. */
static int sync_disk(const areal_train_job *job, areal_trainer *t, areal_rollout_ctl *ctl,
                     long version, double *seconds, areal_error *err) {
    double t0 = now_s();
    char rel[PATH_MAX], abs_dir[PATH_MAX], old[PATH_MAX + 32];
    snprintf(rel, sizeof rel, "%s/weight_update_v%ld", job->job_dir, version);
    /* a layout streams it, one gathered tensor at a time (no whole copy on rank 0) */
    int rc = areal_train_dp_hf_save(job->dp, t, job->model_dir, rel, err);
    if (rc != AREAL_OK)
        return rc;
    if (realpath(rel, abs_dir) == NULL)
        return areal_error_set(err, AREAL_EIO, -1, "%s: %s", rel, strerror(errno));
    /* weight_version named (AReaL leaves it to the server's count): a restarted server
     * then reports exactly the trainer's version (rollout_ctl.c checks it) */
    char vs[32];
    snprintf(vs, sizeof vs, "%ld", version);
    json_t *body = json_pack("{s:s,s:b,s:s}", "model_path", abs_dir, "abort_all_requests", 1,
                             "weight_version", vs);
    rc = areal_rollout_ctl_broadcast(ctl, "/update_weights_from_disk", body, err);
    json_decref(body);
    if (rc == AREAL_OK && version >= 2) {
        snprintf(old, sizeof old, "%s/weight_update_v%ld", job->job_dir, version - 2);
        char cmd[PATH_MAX + 64];
        snprintf(cmd, sizeof cmd, "%s/model.safetensors", old);
        remove(cmd);
        snprintf(cmd, sizeof cmd, "%s/config.json", old);
        remove(cmd);
        snprintf(cmd, sizeof cmd, "%s/tokenizer.json", old);
        remove(cmd);
        remove(old);
    }
    *seconds = now_s() - t0;
    return rc;
}

/* Sends the current policy (weight_update_v<version>, or the initial model at version 0)
 * to the servers that missed an update. */
static int resync(const areal_train_job *job, const areal_trainer *t, areal_rollout_ctl *ctl,
                  areal_error *err) {
    char rel[PATH_MAX], abs_dir[PATH_MAX];
    if (t->version > 0)
        snprintf(rel, sizeof rel, "%s/weight_update_v%ld", job->job_dir, t->version);
    else
        snprintf(rel, sizeof rel, "%s", job->model_dir);
    if (realpath(rel, abs_dir) == NULL)
        return AREAL_OK; /* not written yet: the step's own update will reach them */
    char vs[32];
    snprintf(vs, sizeof vs, "%ld", t->version);
    json_t *body = json_pack("{s:s,s:b,s:s}", "model_path", abs_dir, "abort_all_requests", 1,
                             "weight_version", vs);
    int rc = areal_rollout_ctl_sync_stale(ctl, "/update_weights_from_disk", body, err);
    json_decref(body);
    return rc;
}

static void ckpt_log(void *ctx, const char *line);

/* Servers behind the policy get it the gathered way (xccl_shard.h): the whole policy is
 * gathered to rank 0 first, only when one needs it. */
static int catch_up(const areal_train_job *job, areal_xccl *xc, areal_trainer *t,
                    areal_rollout_ctl *ctl, areal_error *err) {
    if (xc == NULL)
        return resync(job, t, ctl, err);
    if (t->whole_stale) {
        bool stale[AREAL_ROLLOUT_MAX_SERVERS];
        char all[AREAL_ROLLOUT_MAX_SERVERS][128];
        int n = areal_rollout_ctl_addrs(ctl, all, stale, AREAL_ROLLOUT_MAX_SERVERS), k = 0;
        for (int i = 0; i < n; i++)
            k += stale[i];
        if (k == 0)
            return AREAL_OK;
        int rc = areal_train_dp_whole(job->dp, t, err);
        if (rc != AREAL_OK)
            return rc;
    }
    return areal_xccl_catch_up(xc, ctl, &t->model, t->version, err);
}

/* With discovery: waits (phase waiting_for_servers, until a stop) for a registered server,
 * then catches up those behind the policy, so the first evaluation runs on servers that
 * serve the policy (a restarted trainer's servers come at their newer version). It waits
 * even when the spec names servers (--servers): a resumed trainer's first evaluation
 * blocks until a server answers at the current version, and only this thread catches a
 * server up, so a server that registered behind the policy during that evaluation was
 * never served (s_suspend hung there). Registration comes at a server's start, so the
 * wait costs a pod about a second; jobs without discovery (arealctl run) skip it. */
static int first_servers(const areal_train_job *job, areal_xccl *xc, areal_trainer *t,
                         areal_rollout_ctl *ctl, loop_status *ls, areal_error *err) {
    if (job->discover == NULL)
        return AREAL_OK;
    bool said = false;
    while (areal_discover_count(job->discover) == 0 && !(job->stop && *job->stop)) {
        if (!said) {
            loop_status_phase(ls, AREAL_PHASE_WAITING_FOR_SERVERS, t->step, t->version);
            say(job, "waiting for rollout servers to register in the job's store");
            said = true;
        }
        struct timespec ts = {0, 200000000L};
        nanosleep(&ts, NULL);
    }
    if (!areal_discover_take_pending(job->discover))
        return AREAL_OK;
    return catch_up(job, xc, t, ctl, err);
}

/* The weight-update mode's hook: xccl when the job opened a group, else disk. A layout's
 * shard-direct sender (xs) goes first; when it fails the policy is gathered to rank 0 and
 * sent the gathered way (its health checks and retry), one line saying so. */
static int sync_weights(const areal_train_job *job, areal_xccl *xc, areal_xccl_shard *xs,
                        areal_trainer *t, areal_rollout_ctl *ctl, areal_xccl_stats *ws,
                        bool *sharded, areal_error *err) {
    memset(ws, 0, sizeof *ws);
    *sharded = false;
    if (xc && xs) {
        double t0 = now_s();
        areal_error e;
        int rc = areal_xccl_shard_update(xs, job->dp, ctl, t->version, ws, &e);
        ws->seconds = now_s() - t0;
        if (rc == AREAL_OK) {
            *sharded = true;
            return AREAL_OK;
        }
        say(job,
            "shard-direct weight update to version %ld failed (%s); gathering to rank 0 "
            "and sending it the gathered way",
            t->version, e.msg);
        memset(ws, 0, sizeof *ws);
    }
    if (!xc) { /* disk: hf_save writes float32; a layout's is streamed, never whole */
        ws->bytes =
            (t->par != NULL ? areal_train_par_numel(t->par) : t->model.n_params) * sizeof(float);
        return sync_disk(job, t, ctl, t->version, &ws->seconds, err);
    }
    int rc = areal_train_dp_whole(job->dp, t, err);
    if (rc != AREAL_OK)
        return rc;
    return areal_xccl_update(xc, ctl, &t->model, t->version, true, ws, err);
}

static int open_xccl(const areal_train_job *job, areal_rollout_ctl *ctl, areal_xccl **xc,
                     areal_error *err) {
    *xc = NULL;
    if (strcmp(job->cfg->rollout.weight_update_mode, "xccl") != 0)
        return AREAL_OK;
    areal_xccl_cfg c = job->xccl;
    if (c.log == NULL) {
        c.log = ckpt_log;
        c.log_ctx = (void *)job;
    }
    return areal_xccl_open(&c, ctl, xc, err);
}

static int save_ckpt(const areal_train_job *job, areal_trainer *t, areal_rollout_ctl *ctl,
                     long step, areal_error *err) {
    char root[PATH_MAX];
    snprintf(root, sizeof root, "%s/recover", job->job_dir);
    areal_ckpt_state st;
    memset(&st, 0, sizeof st);
    st.step = step;
    st.version = t->version;
    st.data_index = step * job->cfg->rollout.consumer_batch_size;
    st.rng = (uint64_t)job->cfg->seed;
    st.counters = areal_rollout_ctl_counters(ctl);
    return areal_train_ckpt_save(job->dp, t, job->model_dir, root, &st, err);
}

static void ckpt_log(void *ctx, const char *line) {
    const areal_train_job *j = ctx;
    say(j, "%s", line);
}

static void emit(const areal_train_job *job, FILE *f, json_t *line) {
    char *s = json_dumps(line, JSON_COMPACT);
    if (s == NULL)
        return;
    if (f) {
        fprintf(f, "%s\n", s);
        fflush(f);
    }
    if (job->progress)
        job->progress(job->ctx, s);
    free(s);
}

int areal_train_run(const areal_train_job *job, areal_train_result *res, areal_error *err) {
    memset(res, 0, sizeof *res);
    double t_start = now_s();
    const areal_rl_config *cfg = job->cfg;
    long B = cfg->rollout.consumer_batch_size > 0 ? cfg->rollout.consumer_batch_size : 1;
    int G = cfg->gconfig.n_samples > 0 ? cfg->gconfig.n_samples : 1;
    if (mkdir(job->job_dir, 0755) != 0 && errno != EEXIST)
        return areal_error_set(err, AREAL_EIO, -1, "%s: cannot create (%s)", job->job_dir,
                               strerror(errno));
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/tokenizer.json", job->model_dir);
    areal_tokenizer *tok = NULL;
    int rc = areal_tokenizer_load(path, &tok, err);
    if (rc != AREAL_OK)
        return rc;
    loop l;
    rc = loop_init(&l, job, tok, err);
    /* AReaL: total_train_steps, else total_train_epochs over the dataset (drop_last) */
    long total_steps = job->total_steps;
    if (rc == AREAL_OK && total_steps <= 0)
        total_steps = (cfg->total_train_epochs > 0 ? cfg->total_train_epochs : 1) *
                      (long)areal_rl_loader_steps_per_epoch(&l.task.loader);
    loop_status ls; /* /status and /metrics (job->http; NULL: none) */
    loop_status_init(&ls, job->http, total_steps, B, cfg->rollout.max_head_offpolicyness,
                     job->n_servers);
    areal_pool *pool = NULL;
    if (rc == AREAL_OK && job->threads > 1)
        rc = areal_pool_create(job->threads, &pool, err);
    areal_trainer t;
    memset(&t, 0, sizeof t);
    bool have_trainer = false;
    if (rc == AREAL_OK) {
        rc = job->layout != NULL
                 ? areal_trainer_init_par(&t, job->model_dir, cfg, total_steps, pool, job->layout,
                                          err)
                 : areal_trainer_init(&t, job->model_dir, cfg, total_steps, pool, job->dp, err);
        have_trainer = rc == AREAL_OK;
    }
    if (rc == AREAL_OK && job->gpu) { /* refused: one line, and today's CPU step */
        areal_error ge;
        if (areal_trainer_use_gpu(&t, &ge) == AREAL_OK)
            say(job, "trainer: the step runs on the GPU model");
        else
            say(job, "trainer: the step stays on the CPU: %s", ge.msg);
    }
    if (rc == AREAL_OK)
        rc = budget_tokens(&l, cfg, &t, err);
    long step = 0;
    char used[PATH_MAX]; /* the resumed checkpoint (t.resume_dir points here) */
    if (rc == AREAL_OK && job->resume) {
        char root[PATH_MAX];
        snprintf(root, sizeof root, "%s/recover", job->job_dir);
        areal_ckpt_state st;
        areal_error e2;
        int lr =
            areal_train_ckpt_resume(&t, root, &st, used, sizeof used, ckpt_log, (void *)job, &e2);
        if (lr == AREAL_OK) {
            step = st.step;
            rc = areal_task_seek(&l.task, st.data_index, err);
            say(job, "resumed from %s (%s): step %ld, version %ld", used,
                t.resume_fmt == AREAL_CKPT_SHARDED ? "sharded" : "gathered", step, t.version);
        } else if (lr == AREAL_ERANGE) {
            say(job, "no checkpoint under %s: starting fresh", root);
        } else {
            rc = lr;
            if (err)
                *err = e2;
        }
    }
    bool multi = job->dp != NULL && areal_pg_size(job->dp) > 1;
    /* t.defer_gather (areal_trainer_init_par's): no per-step gather to rank 0 where nothing
     * reads a whole copy - disk updates (streamed, areal_train_dp_hf_save) and shard-direct
     * xccl updates (xccl_shard.h); rank 0's choice travels with the state (sync_state) */
    if (rc == AREAL_OK && (multi || t.par != NULL)) /* the ranks start from this (resumed) state */
        rc = areal_train_dp_sync_state(job->dp, &t, err);
    areal_rollout_ctl *ctl = NULL;
    if (rc == AREAL_OK) {
        areal_rollout_cfg rcfg;
        memset(&rcfg, 0, sizeof rcfg);
        rcfg.group_size = G;
        rcfg.n_workers = job->rollout_workers > 0 ? job->rollout_workers : 4;
        rcfg.sampling.max_new_tokens = l.max_new_tokens;
        rcfg.sampling.temperature = cfg->gconfig.greedy ? 0 : cfg->gconfig.temperature;
        rcfg.sampling.top_p = cfg->gconfig.top_p;
        rcfg.sampling.top_k = cfg->gconfig.top_k;
        rcfg.sampling.stop_token_ids = &l.eos;
        rcfg.sampling.n_stop = 1;
        rcfg.sampling.has_seed = true;
        rcfg.sampling.seed = (uint64_t)cfg->seed;
        rcfg.eta = cfg->rollout.max_head_offpolicyness;
        rcfg.max_concurrent = cfg->rollout.max_concurrent_rollouts;
        rcfg.batch_size = B;
        rcfg.request_timeout_s =
            cfg->rollout.request_timeout > 0 ? cfg->rollout.request_timeout : 3600;
        /* the controller starts admitting at once, so it starts at the resumed version */
        rcfg.start_version = t.version;
        rcfg.cancel = job->stop;
        areal_rollout_callbacks cb = {next_prompt, reward, NULL, ctl_log, &l};
        rc = areal_rollout_ctl_start(&rcfg, job->servers, job->n_servers, &cb, &ctl, err);
        /* from now on the registered servers are the controller's list (discover.h) */
        if (rc == AREAL_OK && job->discover != NULL)
            rc = areal_discover_attach(job->discover, ctl, err);
    }
    areal_xccl *xc = NULL;
    if (rc == AREAL_OK)
        rc = open_xccl(job, ctl, &xc, err);
    areal_xccl_shard *xs = NULL;
    if (rc == AREAL_OK && xc != NULL && t.defer_gather) {
        areal_error e;
        if (areal_xccl_shard_open(&job->xccl, &t, &xs, &e) == AREAL_OK)
            say(job,
                "xccl weight sync: shard-direct from %d trainer ranks (%zu bytes a version, each "
                "slice sent by its rank; no gather through rank 0)",
                areal_pg_size(job->dp), areal_xccl_shard_plan_bytes(xs));
        else
            say(job, "xccl weight sync: shard-direct unavailable (%s); gathering to rank 0", e.msg);
    }
    areal_xccl_stats ws = {0};
    bool ws_shard = false;
    double sync_s = 0;
    if (rc == AREAL_OK && t.version > 0) {
        /* the servers start from the initial model: give them the checkpoint's policy */
        rc = areal_rollout_ctl_pause(ctl, err);
        if (rc == AREAL_OK)
            rc = sync_weights(job, xc, xs, &t, ctl, &ws, &ws_shard, err);
        if (rc == AREAL_OK)
            rc = areal_rollout_ctl_resume(ctl, err);
    }
    snprintf(path, sizeof path, "%s/progress.jsonl", job->job_dir);
    FILE *pf = rc == AREAL_OK ? fopen(path, job->resume ? "a" : "w") : NULL;
    if (rc == AREAL_OK && pf == NULL)
        rc = areal_error_set(err, AREAL_EIO, -1, "%s: cannot write", path);
    double acc = 0;
    if (rc == AREAL_OK)
        rc = first_servers(job, xc, &t, ctl, &ls, err);
    if (rc == AREAL_OK) {
        double t0 = now_s();
        rc = evaluate(&l, ctl, &acc, err);
        if (rc == AREAL_ERANGE && job->stop && *job->stop) {
            rc = AREAL_OK;
            res->stopped = true;
        }
        res->acc_start = res->acc_end = acc;
        loop_status_eval(&ls, acc);
        loop_status_phase(&ls, AREAL_PHASE_TRAINING, step, t.version);
        json_t *line =
            json_pack("{s:I,s:I,s:f,s:f}", "step", (json_int_t)step, "version",
                      (json_int_t)t.version, "eval_accuracy", acc, "eval_s", now_s() - t0);
        emit(job, pf, line);
        json_decref(line);
    }
    long saved_step = step; /* a resumed run's checkpoint exists already */
    areal_group *groups = calloc((size_t)B, sizeof *groups);
    if (rc == AREAL_OK && groups == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a batch");
    while (rc == AREAL_OK && !res->stopped && step < total_steps) {
        if (job->stop && *job->stop) {
            /* stopped between steps: the last finished step's checkpoint, if not written */
            if (step > saved_step)
                rc = save_ckpt(job, &t, ctl, step, err);
            res->stopped = true;
            say(job, "stopped at step %ld with a checkpoint", step);
            break;
        }
        double t0 = now_s();
        /* servers that registered behind the policy get its weights before any request, from
         * this thread (the one that moves the version), so no update slips in between */
        if (areal_discover_take_pending(job->discover) &&
            (rc = catch_up(job, xc, &t, ctl, err)) != AREAL_OK)
            break;
        rc = areal_rollout_ctl_wait(ctl, groups, (int)B, 1.0, err);
        if (rc == AREAL_ERANGE) {
            /* keep checking the stop flag while rollouts run, and catch up servers that
             * missed a weight update (down, restarted) with the current policy */
            rc = catch_up(job, xc, &t, ctl, err);
            loop_status_waiting(&ls, ctl);
            continue;
        }
        if (rc != AREAL_OK)
            break;
        double t_wait = now_s() - t0, t1 = now_s();
        qsort(groups, (size_t)B, sizeof *groups, by_admission);
        long resubmits = 0; /* requests beyond the first per sample: aborts and retries */
        for (long i = 0; i < B; i++)
            for (int k = 0; k < groups[i].G; k++)
                resubmits += groups[i].s[k].n_requests > 1 ? groups[i].s[k].n_requests - 1 : 0;
        areal_step_stats st;
        rc = areal_train_dp_step(&t, job->dp, groups, (int)B, G, &st, err);
        double t_train = now_s() - t1;
        for (long i = 0; i < B; i++)
            areal_group_free(&groups[i]);
        if (rc != AREAL_OK)
            break;
        step++;
        /* AReaL's order: pause -> update weights -> set version -> resume */
        rc = areal_rollout_ctl_pause(ctl, err);
        if (rc == AREAL_OK)
            rc = sync_weights(job, xc, xs, &t, ctl, &ws, &ws_shard, err);
        sync_s = ws.seconds;
        if (rc == AREAL_OK) {
            areal_rollout_ctl_set_version(ctl, t.version);
            rc = areal_rollout_ctl_resume(ctl, err);
        }
        bool last = step == total_steps || (job->stop && *job->stop);
        bool saved = false;
        if (rc == AREAL_OK && (last || (job->ckpt_every > 0 && step % job->ckpt_every == 0))) {
            loop_status_phase(&ls, AREAL_PHASE_CHECKPOINTING, step, t.version);
            rc = save_ckpt(job, &t, ctl, step, err);
            saved = true;
            saved_step = step;
            if (rc == AREAL_OK)
                loop_status_checkpoint(&ls, step);
        }
        bool do_eval = last || (job->eval_every > 0 && step % job->eval_every == 0);
        double t_eval = 0;
        if (rc == AREAL_OK && do_eval) {
            double t2 = now_s();
            rc = evaluate(&l, ctl, &acc, err);
            t_eval = now_s() - t2;
            if (rc == AREAL_ERANGE && job->stop && *job->stop) {
                rc = AREAL_OK; /* a stop cut the evaluation short: checkpoint below */
                do_eval = false;
            } else {
                res->acc_end = acc;
                loop_status_eval(&ls, acc);
            }
        }
        if (rc != AREAL_OK)
            break;
        json_t *hist = json_array();
        for (int i = 0; i < AREAL_STALENESS_BUCKETS; i++)
            json_array_append_new(hist, json_integer(st.staleness[i]));
        json_t *line = json_pack(
            "{s:I,s:I,s:f,s:f,s:o,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "step",
            (json_int_t)step, "version", (json_int_t)t.version, "reward_mean", st.reward_mean,
            "response_length", st.resp_len_mean, "staleness_hist", hist, "max_staleness",
            (json_int_t)st.max_staleness, "clip_fraction", st.clip_frac, "importance_ratio_mean",
            st.ratio_mean, "behave_weight_mean", st.behave_w_mean, "behave_weight_max",
            st.behave_w_max, "grad_norm", st.grad_norm, "lr", st.lr, "loss", st.loss,
            "tokens_per_s", (double)st.n_tokens / (t_wait + t_train + 1e-9), "rollout_wait_s",
            t_wait, "train_s", t_train, "weight_sync_s", sync_s, "wall_s", now_s() - t_start);
        /* what scaling and faults must not change: every sample trained once (samples =
         * B x G, no group dropped), none from a server behind the policy */
        int known = 0, up = 0;
        areal_rollout_ctl_servers(ctl, &known, &up);
        areal_staleness sc = areal_rollout_ctl_counters(ctl);
        json_object_set_new(line, "samples", json_integer((json_int_t)st.n_seqs));
        json_object_set_new(line, "resubmits", json_integer((json_int_t)resubmits));
        json_object_set_new(line, "groups_rejected", json_integer((json_int_t)sc.rejected));
        json_object_set_new(line, "stale_answers",
                            json_integer((json_int_t)areal_rollout_ctl_stale_answers(ctl)));
        json_object_set_new(line, "servers", json_integer(up));
        json_object_set_new(line, "weight_sync_mode", json_string(xc ? "xccl" : "disk"));
        json_object_set_new(line, "weight_sync_bytes", json_integer((json_int_t)ws.bytes));
        if (xc) {
            json_object_set_new(line, "weight_sync_buckets", json_integer(ws.buckets));
            /* shard: each rank sent its slices (weight_sync_bytes is rank 0's part) */
            json_object_set_new(line, "weight_sync_path",
                                json_string(ws_shard ? "shard" : "gather"));
        }
        if (t.ref != NULL) { /* AReaL's kl_rewards statistic; only with a reference policy */
            json_object_set_new(line, "kl_mean", json_real(st.kl_mean));
            json_object_set_new(line, "kl_reward_sum", json_real(st.kl_reward_sum));
        }
        if (do_eval) {
            json_object_set_new(line, "eval_accuracy", json_real(acc));
            json_object_set_new(line, "eval_s", json_real(t_eval));
        }
        emit(job, pf, line);
        json_decref(line);
        loop_status_step(&ls, ctl, &st, step, t.version, t_wait, t_train, sync_s);
        if (job->stop && *job->stop) {
            /* the stop came while this step was finishing: its checkpoint is still owed */
            if (!saved && (rc = save_ckpt(job, &t, ctl, step, err)) != AREAL_OK)
                break;
            res->stopped = true;
            say(job, "stopped at step %ld with a checkpoint", step);
            break;
        }
    }
    res->steps_done = step;
    if (multi) {
        areal_error e2;
        areal_train_dp_stop(job->dp, &e2); /* best effort: a dead follower times out */
    }
    if (rc != AREAL_OK)
        loop_status_phase(&ls, AREAL_PHASE_FAILED, step, t.version);
    else if (step >= total_steps)
        loop_status_phase(&ls, AREAL_PHASE_DONE, step, t.version);
    if (job->termination_log != NULL && job->termination_log[0] != '\0') {
        /* the last words: a run shorter than the operator's poll period leaves its
         * final step here, or status.progress would keep an old one */
        areal_error we;
        if (areal_train_status_write(job->termination_log, &ls.st, &we) != AREAL_OK)
            say(job, "final status not written: %s", we.msg);
    }
    if (pf)
        fclose(pf);
    free(groups);
    areal_discover_detach(job->discover);
    areal_rollout_ctl_stop(ctl);
    areal_xccl_shard_close(xs);
    areal_xccl_close(xc);
    if (have_trainer)
        areal_trainer_free(&t);
    areal_pool_destroy(pool);
    loop_free(&l);
    areal_tokenizer_free(tok);
    res->wall_s = now_s() - t_start;
    return rc;
}
