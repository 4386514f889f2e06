/*
 * dp_loop.c - data-parallel trainer ranks (see dp.h).
 *
 * A share travels as one message per step: a header {command, bytes} of two
 * int64, then the bytes padded to int32 words (the groups, field by field,
 * native byte order: the ranks of one job run one build). Rejected: every rank running its own
 * rollout controller on its share of the servers (AReaL's SPMD mode) - one
 * controller keeps the staleness counters and the version pinning in one
 * place, as AReaL's single-controller mode does.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/pool.h"
#include "areal/rl/pack.h"
#include "areal/train/ckpt.h"
#include "areal/train/dp.h"
#include "areal/train/hf_save.h"
#include "areal/train/train_optim.h"
#include "areal/train/trainer_par.h"
#include "areal/train/trainer_par_ckpt.h"
#include "areal/train/xccl_shard.h"

/* CMD_GATHER_OPTIM: every rank joins the gather of the parameters and moments to rank 0 (a
 * test's or a diagnostic's look at the whole state); CMD_GATHER_PARAMS: the parameters' (a
 * deferred gather, trainer.h); CMD_WSYNC: a shard-direct weight update (xccl_shard.h), its
 * message following; CMD_CKPT: a layout's checkpoint, every rank writing its shard into
 * the directory the message names (trainer_par_ckpt.h); CMD_HF_SAVE: a layout's HF export
 * to the directory the message names, every rank joining the streamed gather */
enum {
    CMD_STOP = 0,
    CMD_STEP = 1,
    CMD_GATHER_OPTIM = 2,
    CMD_GATHER_PARAMS = 3,
    CMD_WSYNC = 4,
    CMD_CKPT = 5,
    CMD_HF_SAVE = 6
};

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} wbuf;

static void put(wbuf *b, const void *x, size_t k) {
    if (b->oom)
        return;
    if (b->n + k > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + k)
            cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (q == NULL) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, x, k);
    b->n += k;
}

static void put_i64(wbuf *b, int64_t v) {
    put(b, &v, sizeof v);
}

static void put_group(wbuf *b, const areal_group *g) {
    put_i64(b, g->G);
    put_i64(b, g->index);
    put_i64(b, g->version_at_submit);
    for (int i = 0; i < g->G; i++) {
        const areal_traj *t = &g->s[i];
        put_i64(b, t->n);
        put_i64(b, t->n_prompt);
        put_i64(b, t->no_eos);
        put_i64(b, t->n_requests);
        put(b, &t->reward, sizeof t->reward);
        put(b, t->tokens, (size_t)t->n * sizeof *t->tokens);
        put(b, t->logprobs, (size_t)t->n * sizeof *t->logprobs);
        put(b, t->versions, (size_t)t->n * sizeof *t->versions);
    }
}

typedef struct rbuf {
    const uint8_t *p;
    size_t n, at;
    bool bad;
} rbuf;

static void get(rbuf *b, void *x, size_t k) {
    if (b->bad || b->at + k > b->n) {
        b->bad = true;
        memset(x, 0, k);
        return;
    }
    memcpy(x, b->p + b->at, k);
    b->at += k;
}

static int64_t get_i64(rbuf *b) {
    int64_t v;
    get(b, &v, sizeof v);
    return v;
}

static bool get_group(rbuf *b, areal_group *g) {
    memset(g, 0, sizeof *g);
    int64_t G = get_i64(b);
    if (b->bad || G < 1 || G > 1 << 20)
        return false;
    g->index = (long)get_i64(b);
    g->version_at_submit = (long)get_i64(b);
    if ((g->s = calloc((size_t)G, sizeof *g->s)) == NULL)
        return false;
    g->G = (int)G;
    for (int i = 0; i < g->G; i++) {
        areal_traj *t = &g->s[i];
        int64_t n = get_i64(b);
        t->n_prompt = (int)get_i64(b);
        t->no_eos = get_i64(b) != 0;
        t->n_requests = (int)get_i64(b);
        get(b, &t->reward, sizeof t->reward);
        if (b->bad || n < 1 || (size_t)n > b->n) /* bounded by the message */
            return false;
        t->n = (int)n;
        t->tokens = malloc((size_t)n * sizeof *t->tokens);
        t->logprobs = malloc((size_t)n * sizeof *t->logprobs);
        t->versions = malloc((size_t)n * sizeof *t->versions);
        if (!t->tokens || !t->logprobs || !t->versions)
            return false;
        get(b, t->tokens, (size_t)n * sizeof *t->tokens);
        get(b, t->logprobs, (size_t)n * sizeof *t->logprobs);
        get(b, t->versions, (size_t)n * sizeof *t->versions);
    }
    return !b->bad;
}

/* The bytes travel as int32 words (the group moves fp32/bf16/fp16/int32/int64 only). */
static size_t words(size_t bytes) {
    return (bytes + 3) / 4;
}

static int send_msg(areal_pg *dp, int peer, int64_t cmd, wbuf *b, areal_error *err) {
    int64_t h[2] = {cmd, b ? (int64_t)b->n : 0};
    size_t n = b ? b->n : 0;
    if (b) {
        static const uint8_t zero[4] = {0};
        put(b, zero, words(n) * 4 - n); /* pad to whole words; the header keeps the size */
        if (b->oom)
            return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a DP share");
    }
    int rc = areal_pg_send(dp, h, 2, AREAL_DT_I64, peer, err);
    if (rc == AREAL_OK && n > 0)
        rc = areal_pg_send(dp, b->p, words(n), AREAL_DT_I32, peer, err);
    return rc;
}

/* Rank r's data slice: a layout's (every rank of one slice trains the same share), else r. */
static int slice_of(const areal_trainer *t, int r) {
    return t != NULL && t->par != NULL ? areal_train_par_slice_of(t->par, r) : r;
}

/* areal_train_dp_scatter over D slices, world rank r getting slice slice_of(t, r)'s share. */
static int scatter_slices(areal_pg *dp, const areal_trainer *t, int D, areal_group *g, int n, int G,
                          int *n_mine, areal_error *err) {
    int R = areal_pg_size(dp), n_seqs = n * G, rc = AREAL_OK;
    int64_t *lens = malloc((size_t)n_seqs * sizeof *lens);
    int *rank_of = malloc((size_t)n_seqs * sizeof *rank_of);
    if (lens == NULL || rank_of == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the DP split");
    for (int i = 0; rc == AREAL_OK && i < n; i++)
        for (int j = 0; j < G; j++)
            lens[i * G + j] = g[i].s[j].n;
    if (rc == AREAL_OK)
        rc = areal_split_groups_dp(lens, n_seqs, G, D, rank_of, err);
    for (int r = 1; rc == AREAL_OK && r < R; r++) {
        wbuf b = {0};
        int64_t k = 0, sl = slice_of(t, r);
        for (int i = 0; i < n; i++)
            k += rank_of[i * G] == sl;
        put_i64(&b, k);
        for (int i = 0; i < n; i++)
            if (rank_of[i * G] == sl)
                put_group(&b, &g[i]);
        rc = b.oom ? areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a DP share")
                   : send_msg(dp, r, CMD_STEP, &b, err);
        free(b.p);
    }
    int m = 0; /* keep this rank's share, in admission order */
    for (int i = 0; i < n; i++) {
        if (rc == AREAL_OK && rank_of[i * G] == 0) {
            if (m != i) {
                g[m] = g[i];
                memset(&g[i], 0, sizeof g[i]); /* one owner per group */
            }
            m++;
        } else {
            areal_group_free(&g[i]);
        }
    }
    *n_mine = m;
    free(lens);
    free(rank_of);
    return rc;
}

int areal_train_dp_scatter(areal_pg *dp, areal_group *g, int n, int G, int *n_mine,
                           areal_error *err) {
    return scatter_slices(dp, NULL, areal_pg_size(dp), g, n, G, n_mine, err);
}

int areal_train_dp_stop(areal_pg *dp, areal_error *err) {
    int rc = AREAL_OK;
    for (int r = 1; r < areal_pg_size(dp); r++) {
        areal_error e;
        int r2 = send_msg(dp, r, CMD_STOP, NULL, &e);
        if (r2 != AREAL_OK && rc == AREAL_OK) {
            rc = r2;
            if (err)
                *err = e;
        }
    }
    return rc;
}

/* Every rank: rc agreed over dp (a rank that failed fails them all; the others name it). */
static int agree(areal_pg *dp, int rc, const char *what, areal_error *err) {
    int32_t bad = rc != AREAL_OK;
    if (dp == NULL || areal_pg_size(dp) < 2)
        return rc;
    areal_error e2;
    int r = areal_pg_all_reduce(dp, &bad, 1, AREAL_DT_I32, AREAL_SUM, rc == AREAL_OK ? err : &e2);
    if (rc != AREAL_OK)
        return rc;
    if (r != AREAL_OK)
        return r;
    return bad > 0
               ? areal_error_set(err, AREAL_EIO, -1, "%s: %d other rank(s) failed", what, (int)bad)
               : AREAL_OK;
}

/* A layout's state: version and step from rank 0; after a resume (t->resume_dir on rank 0)
 * every rank loads its own part of that checkpoint, then the parameters are gathered to
 * rank 0's whole copy (or marked stale where the gather is deferred). */
static int sync_par(areal_pg *dp, areal_trainer *t, areal_error *err) {
    float *m, *v;
    long *adam_step;
    size_t n;
    areal_train_optim_state(t->opt, &m, &v, &adam_step, &n);
    char dir[4096] = {0};
    int64_t s[5] = {*adam_step, t->version, t->step, t->defer_gather, 0};
    if (t->resume_dir != NULL) {
        snprintf(dir, sizeof dir, "%s", t->resume_dir);
        s[4] = 1 + (int64_t)t->resume_fmt;
    }
    bool multi = dp != NULL && areal_pg_size(dp) > 1;
    int rc = multi ? areal_pg_broadcast(dp, s, 5, AREAL_DT_I64, 0, err) : AREAL_OK;
    if (rc == AREAL_OK && multi && s[4] != 0)
        rc = areal_pg_broadcast(dp, dir, sizeof dir / 4, AREAL_DT_I32, 0, err);
    if (rc != AREAL_OK)
        return rc;
    t->version = (long)s[1];
    t->step = (long)s[2];
    t->defer_gather = s[3] != 0; /* rank 0's choice: every rank skips the gather, or none */
    *adam_step = (long)s[0];
    if (s[4] == 0) /* a fresh start: every rank loaded its shard of the initial model */
        return AREAL_OK;
    dir[sizeof dir - 1] = '\0';
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/%s", dir, AREAL_CKPT_SHARDS);
    rc = s[4] - 1 == AREAL_CKPT_SHARDED
             ? areal_train_par_load(t->par, sub, err)
             : areal_train_par_load_gathered(t->par, dir, (long)s[0], err);
    rc = agree(dp, rc, "resume", err);
    if (rc == AREAL_OK && t->defer_gather)
        t->whole_stale = true;
    else if (rc == AREAL_OK) /* rank 0's whole copy: what weight sync reads */
        rc = areal_train_par_gather(t->par, AREAL_PAR_PARAMS,
                                    t->model.n_params > 0 ? t->model.params : NULL, err);
    return rc;
}

int areal_train_dp_sync_state(areal_pg *dp, areal_trainer *t, areal_error *err) {
    if (t->par != NULL)
        return sync_par(dp, t, err);
    float *m, *v;
    long *adam_step;
    size_t n;
    areal_train_optim_state(t->opt, &m, &v, &adam_step, &n);
    int rc = areal_pg_broadcast(dp, t->model.params, t->model.n_params, AREAL_DT_F32, 0, err);
    if (rc == AREAL_OK)
        rc = areal_pg_broadcast(dp, m, n, AREAL_DT_F32, 0, err);
    if (rc == AREAL_OK)
        rc = areal_pg_broadcast(dp, v, n, AREAL_DT_F32, 0, err);
    int64_t s[3] = {*adam_step, t->version, t->step};
    if (rc == AREAL_OK)
        rc = areal_pg_broadcast(dp, s, 3, AREAL_DT_I64, 0, err);
    if (rc == AREAL_OK) {
        *adam_step = (long)s[0];
        t->version = (long)s[1];
        t->step = (long)s[2];
    }
    return rc;
}

/* A follower's part in a shard-direct update: rank 0's message, then the transfer. Its
 * failure is logged and not fatal: rank 0 sees the update fail and falls back to the
 * gather (CMD_GATHER_PARAMS follows). */
static int follow_wsync(const areal_train_job *job, areal_pg *dp, areal_trainer *t,
                        areal_xccl_shard **xs, int64_t bytes, areal_error *err) {
    if (bytes < 1 || bytes > 4096)
        return areal_error_set(err, AREAL_EINVAL, -1, "DP rank %d: a malformed weight-sync header",
                               areal_pg_rank(dp));
    int32_t msg[1024];
    int rc = areal_pg_recv(dp, msg, words((size_t)bytes), AREAL_DT_I32, 0, err);
    if (rc != AREAL_OK)
        return rc;
    areal_error e;
    int r2 = *xs != NULL ? AREAL_OK : areal_xccl_shard_open(&job->xccl, t, xs, &e);
    if (r2 == AREAL_OK)
        r2 = areal_xccl_shard_follow(*xs, areal_pg_rank(dp), msg, (size_t)bytes, &e);
    if (r2 != AREAL_OK && job->log != NULL) {
        char line[sizeof e.msg + 64];
        snprintf(line, sizeof line, "rank %d: shard-direct weight update failed: %s",
                 areal_pg_rank(dp), e.msg);
        job->log(job->ctx, line);
    }
    return AREAL_OK;
}

/* One follower step: the share's message into groups, the step. 1 = stop. */
static int follow_one(const areal_train_job *job, areal_pg *dp, areal_trainer *t,
                      areal_xccl_shard **xs, areal_error *err) {
    int64_t h[2];
    int rc = areal_pg_recv(dp, h, 2, AREAL_DT_I64, 0, err);
    if (rc != AREAL_OK)
        return rc;
    if (h[0] == CMD_STOP)
        return 1;
    if (h[0] == CMD_WSYNC && t->par != NULL)
        return follow_wsync(job, dp, t, xs, h[1], err);
    if (h[0] == CMD_GATHER_PARAMS && t->par != NULL)
        return areal_train_par_gather(t->par, AREAL_PAR_PARAMS, NULL, err);
    if (h[0] == CMD_GATHER_OPTIM && t->par != NULL) {
        rc = areal_train_par_gather(t->par, AREAL_PAR_PARAMS, NULL, err);
        if (rc == AREAL_OK)
            rc = areal_train_par_gather(t->par, AREAL_PAR_EXP_AVG, NULL, err);
        return rc == AREAL_OK ? areal_train_par_gather(t->par, AREAL_PAR_EXP_AVG_SQ, NULL, err)
                              : rc;
    }
    if ((h[0] == CMD_CKPT || h[0] == CMD_HF_SAVE) && t->par != NULL) {
        char dir[4100] = {0};
        if (h[1] < 1 || h[1] > 4096)
            return areal_error_set(err, AREAL_EINVAL, -1, "DP rank %d: a malformed %s header",
                                   areal_pg_rank(dp), h[0] == CMD_CKPT ? "checkpoint" : "HF save");
        rc = areal_pg_recv(dp, dir, words((size_t)h[1]), AREAL_DT_I32, 0, err);
        if (rc != AREAL_OK)
            return rc;
        return h[0] == CMD_CKPT ? areal_train_par_save(t->par, dir, err)
                                : areal_train_par_hf_save(t->par, dir, err);
    }
    if (h[0] != CMD_STEP || h[1] < 8 || h[1] > (int64_t)1 << 40)
        return areal_error_set(err, AREAL_EINVAL, -1, "DP rank %d: a malformed share header",
                               areal_pg_rank(dp));
    uint8_t *p = malloc(words((size_t)h[1]) * 4);
    if (p == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for a DP share");
    rc = areal_pg_recv(dp, p, words((size_t)h[1]), AREAL_DT_I32, 0, err);
    rbuf b = {p, (size_t)h[1], 0, false};
    int64_t k = rc == AREAL_OK ? get_i64(&b) : 0;
    areal_group *g = rc == AREAL_OK && k > 0 && k < 1 << 20 ? calloc((size_t)k, sizeof *g) : NULL;
    if (rc == AREAL_OK && g == NULL)
        rc = areal_error_set(err, AREAL_EINVAL, -1, "DP rank %d: a malformed share",
                             areal_pg_rank(dp));
    int got = 0;
    while (rc == AREAL_OK && got < k) {
        if (!get_group(&b, &g[got])) {
            areal_group_free(&g[got]);
            rc = areal_error_set(err, AREAL_EINVAL, -1, "DP rank %d: a malformed share",
                                 areal_pg_rank(dp));
            break;
        }
        got++;
    }
    free(p);
    if (rc == AREAL_OK)
        rc = areal_trainer_step(t, g, got, NULL, err);
    if (rc == AREAL_OK)
        rc = 2; /* a step (the gather above is not one) */
    for (int i = 0; i < got; i++)
        areal_group_free(&g[i]);
    free(g);
    return rc;
}

int areal_train_follow(const areal_train_job *job, long total_steps, areal_pg *dp, long *steps_done,
                       areal_error *err) {
    if (total_steps <= 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "a data-parallel rank needs the step count (total_train_steps) "
                               "for the learning-rate schedule");
    areal_pool *pool = NULL;
    int rc = job->threads > 1 ? areal_pool_create(job->threads, &pool, err) : AREAL_OK;
    areal_trainer t;
    memset(&t, 0, sizeof t);
    bool have = false;
    if (rc == AREAL_OK) {
        rc = job->layout != NULL
                 ? areal_trainer_init_par(&t, job->model_dir, job->cfg, total_steps, pool,
                                          job->layout, err)
                 : areal_trainer_init(&t, job->model_dir, job->cfg, total_steps, pool, dp, err);
        have = rc == AREAL_OK;
    }
    if (rc == AREAL_OK)
        rc = areal_train_dp_sync_state(dp, &t, err);
    long steps = 0;
    areal_xccl_shard *xs = NULL; /* opened at the first shard-direct update */
    while (rc == AREAL_OK) {
        int r = follow_one(job, dp, &t, &xs, err);
        if (r == 1)
            break;
        steps += r == 2;
        rc = r == 2 ? AREAL_OK : r;
    }
    if (steps_done)
        *steps_done = steps;
    areal_xccl_shard_close(xs);
    if (have)
        areal_trainer_free(&t);
    areal_pool_destroy(pool);
    return rc;
}

void areal_train_batch_stats(const areal_group *g, int n, long version, areal_step_stats *st) {
    double rsum = 0;
    long seqs = 0, tokens = 0, resp = 0;
    memset(st->staleness, 0, sizeof st->staleness);
    st->max_staleness = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < g[i].G; j++) {
            const areal_traj *t = &g[i].s[j];
            rsum += t->reward;
            seqs++;
            tokens += t->n;
            for (int k = t->n_prompt; k < t->n; k++) {
                resp++;
                long lag = version - t->versions[k];
                lag = lag < 0 ? 0 : lag;
                st->staleness[lag < AREAL_STALENESS_BUCKETS - 1 ? lag
                                                                : AREAL_STALENESS_BUCKETS - 1]++;
                if (lag > st->max_staleness)
                    st->max_staleness = lag;
            }
        }
    st->n_seqs = seqs;
    st->n_tokens = tokens;
    st->reward_mean = seqs ? rsum / (double)seqs : 0;
    st->resp_len_mean = seqs ? (double)resp / (double)seqs : 0;
}

int areal_train_dp_step(areal_trainer *t, areal_pg *dp, areal_group *g, int n, int G,
                        areal_step_stats *st, areal_error *err) {
    if (dp == NULL || areal_pg_size(dp) < 2)
        return areal_trainer_step(t, g, n, st, err);
    areal_step_stats full;
    areal_train_batch_stats(g, n, t->version, &full);
    int mine = 0;
    int D = t->par != NULL ? areal_train_par_slices(t->par) : areal_pg_size(dp);
    int rc = scatter_slices(dp, t, D, g, n, G, &mine, err);
    if (rc == AREAL_OK)
        rc = areal_trainer_step(t, g, mine, st, err);
    if (rc == AREAL_OK && st) { /* the batch's numbers, not rank 0's share's */
        st->reward_mean = full.reward_mean;
        st->resp_len_mean = full.resp_len_mean;
        memcpy(st->staleness, full.staleness, sizeof st->staleness);
        st->max_staleness = full.max_staleness;
        st->n_seqs = full.n_seqs;
        st->n_tokens = full.n_tokens;
    }
    return rc;
}

int areal_train_dp_join(int rank, int size, const char *host, int port, const char *bind_host,
                        const char *advertise, int timeout_ms, areal_comm **comm, areal_pg **dp,
                        areal_error *err) {
    *comm = NULL;
    *dp = NULL;
    if (size < 1 || size > 4096 || rank < 0 || rank >= size)
        return areal_error_set(err, AREAL_EINVAL, -1, "DP rank %d of %d: out of range", rank, size);
    areal_comm_config cc = {.rank = rank,
                            .world = size,
                            .store_host = host,
                            .store_port = port,
                            .host_store = rank == 0,
                            .bind_host = bind_host,
                            .advertise_host = advertise,
                            .timeout_ms = timeout_ms,
                            .connect_timeout_ms = timeout_ms,
                            .key_prefix = "trainer-dp"};
    int rc = areal_comm_init(&cc, comm, err);
    int *ranks = rc == AREAL_OK ? malloc((size_t)size * sizeof *ranks) : NULL;
    if (rc == AREAL_OK && ranks == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the DP group");
    for (int i = 0; rc == AREAL_OK && i < size; i++)
        ranks[i] = i;
    if (rc == AREAL_OK)
        rc = areal_comm_group(*comm, "dp", ranks, size, dp, err);
    free(ranks);
    if (rc != AREAL_OK) {
        areal_comm_destroy(*comm);
        *comm = NULL;
    }
    return rc;
}

int areal_train_dp_gather_state(areal_pg *dp, areal_trainer *t, float *params, float *m, float *v,
                                long *adam_step, areal_error *err) {
    if (t->par == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "gather: the trainer has no layout (its state is whole already)");
    int rc = AREAL_OK;
    for (int r = 1; dp != NULL && rc == AREAL_OK && r < areal_pg_size(dp); r++)
        rc = send_msg(dp, r, CMD_GATHER_OPTIM, NULL, err);
    if (rc == AREAL_OK)
        rc = areal_train_par_gather(t->par, AREAL_PAR_PARAMS, params, err);
    if (rc == AREAL_OK)
        rc = areal_train_par_gather(t->par, AREAL_PAR_EXP_AVG, m, err);
    if (rc == AREAL_OK)
        rc = areal_train_par_gather(t->par, AREAL_PAR_EXP_AVG_SQ, v, err);
    if (rc == AREAL_OK && adam_step != NULL)
        *adam_step = areal_par_step_adam(areal_train_par_step(t->par))->step;
    return rc;
}

/* Rank 0: command cmd with path dir to every follower. */
static int post_path(areal_pg *dp, int64_t cmd, const char *dir, areal_error *err) {
    size_t n = strlen(dir) + 1;
    if (n > 4096)
        return areal_error_set(err, AREAL_EINVAL, -1, "%s: a path of %zu bytes (at most 4095)", dir,
                               n - 1);
    int rc = AREAL_OK;
    for (int r = 1; dp != NULL && rc == AREAL_OK && r < areal_pg_size(dp); r++) {
        wbuf b = {0};
        put(&b, dir, n);
        rc = send_msg(dp, r, cmd, &b, err);
        free(b.p);
    }
    return rc;
}

int areal_train_dp_save_shards(areal_pg *dp, areal_trainer *t, const char *dir, areal_error *err) {
    if (t->par == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "sharded checkpoint: the trainer has no layout (use ckpt.h's "
                               "gathered form)");
    int rc = post_path(dp, CMD_CKPT, dir, err);
    return rc == AREAL_OK ? areal_train_par_save(t->par, dir, err) : rc;
}

int areal_train_dp_hf_save(areal_pg *dp, areal_trainer *t, const char *model_dir, const char *dst,
                           areal_error *err) {
    if (t->par == NULL)
        return areal_hf_save(&t->model, model_dir, dst, err);
    int rc = post_path(dp, CMD_HF_SAVE, dst, err);
    return rc == AREAL_OK ? areal_train_par_hf_save(t->par, dst, err) : rc;
}

int areal_train_dp_whole(areal_pg *dp, areal_trainer *t, areal_error *err) {
    if (t->par == NULL || !t->whole_stale)
        return AREAL_OK;
    int rc = AREAL_OK;
    for (int r = 1; dp != NULL && rc == AREAL_OK && r < areal_pg_size(dp); r++)
        rc = send_msg(dp, r, CMD_GATHER_PARAMS, NULL, err);
    if (rc == AREAL_OK)
        rc = areal_train_par_gather(t->par, AREAL_PAR_PARAMS,
                                    t->model.n_params > 0 ? t->model.params : NULL, err);
    if (rc == AREAL_OK)
        t->whole_stale = false;
    return rc;
}

int areal_train_dp_wsync_post(areal_pg *dp, const void *msg, size_t n, areal_error *err) {
    int rc = AREAL_OK;
    for (int r = 1; dp != NULL && rc == AREAL_OK && r < areal_pg_size(dp); r++) {
        wbuf b = {0};
        put(&b, msg, n);
        rc = send_msg(dp, r, CMD_WSYNC, &b, err);
        free(b.p);
    }
    return rc;
}
