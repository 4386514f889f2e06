/*
 * engine_sched.c - the scheduler thread: continuous batching over the paged
 * KV cache.
 *
 * One iteration: serve flags (abort / stop) and a pending command, admit
 * waiting sequences (FIFO; a prefix-cache lookup first, then admission only
 * if the blocks for the rest of its tokens are available), plan the step
 * (every decoding sequence feeds its one pending token, then prefill chunks
 * fill max_step_tokens; blocks are allocated as positions are reached and,
 * when none is left, the youngest running sequence is preempted), run ONE
 * forward, then sample, call on_token, index newly full blocks and retire
 * finished sequences. Sequences are kept in admission order, so the oldest
 * always progresses: it fits the budget alone (checked at submit).
 *
 * The n samples of a request wait behind sample 0 until it has computed the
 * prompt once, then hit its full blocks in the prefix cache; only the last,
 * partial block and the pending token are recomputed per sample. Forking the
 * leader's table at sampling time would save those few tokens but needs a
 * copy-on-write path for the partial block; the lookup path is the one every
 * resubmitted prompt takes anyway.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_internal.h"

double eng_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- under mu -------------------------------------------------------------- */

static void release_blocks(areal_engine *e, eng_seq *s) {
    for (int i = 0; i < s->n_table; i++)
        kvb_unref(&e->blocks, s->table[i]);
    s->n_table = 0;
    s->n_computed = 0;
    s->n_chained = 0;
}

static void retire_req(areal_engine *e, eng_req *q, eng_req **done) {
    if (q->prev)
        q->prev->next = q->next;
    else
        e->live_head = q->next;
    if (q->next)
        q->next->prev = q->prev;
    q->prev = q->next = NULL;
    q->res = req_result(q, e->version);
    if (q->any_abort)
        e->st.requests_aborted++;
    else
        e->st.requests_finished++;
    q->done_next = *done;
    *done = q;
}

static void finish_seq(areal_engine *e, eng_seq *s, areal_engine_finish why, int32_t matched,
                       eng_req **done) {
    if (s->state == SEQ_DONE)
        return;
    if (s->state == SEQ_RUNNING) {
        release_blocks(e, s);
        seq_list_remove(&e->running, s);
    } else {
        seq_list_remove(&e->waiting, s);
    }
    s->state = SEQ_DONE;
    s->finish = why;
    s->matched = matched;
    s->chunk = 0;
    eng_req *q = s->req;
    q->any_abort |= why == AREAL_FINISH_ABORT;
    if (--q->n_live == 0)
        retire_req(e, q, done);
}

static void finish_req(areal_engine *e, eng_req *q, areal_engine_finish why, eng_req **done) {
    int n = q->n;
    for (int i = 0; i < n; i++)
        if (q->seqs[i].state != SEQ_DONE)
            finish_seq(e, &q->seqs[i], why, -1, done); /* the last one may retire q */
}

static void serve_flags(areal_engine *e, eng_req **done) {
    e->any_flag = false;
    eng_req *q = e->live_head;
    while (q != NULL) {
        eng_req *next = q->next;
        if (q->abort_flag)
            finish_req(e, q, AREAL_FINISH_ABORT, done);
        else if (q->stop_flag)
            finish_req(e, q, AREAL_FINISH_STOP, done);
        q = next;
    }
}

static void abort_all_live(areal_engine *e, eng_req **done) {
    for (eng_req *q = e->live_head; q != NULL; q = q->next)
        q->abort_flag = true;
    serve_flags(e, done);
}

static void serve_cmd(areal_engine *e, eng_req **done) {
    switch (e->cmd) {
    case CMD_PAUSE:
        e->paused = true;
        if (e->cmd_mode == AREAL_PAUSE_ABORT)
            abort_all_live(e, done);
        break;
    case CMD_CONTINUE:
        e->paused = false;
        break;
    case CMD_FLUSH:
        kvb_flush(&e->blocks);
        break;
    case CMD_SWAP: {
        if (e->cmd_abort)
            abort_all_live(e, done);
        areal_model *old = e->model;
        e->model = e->cmd_model;
        e->cmd_model = NULL;
        if (!eng_model_lent(e, old)) { /* else its last release frees it */
            areal_model_free(old);
            free(old);
        }
        e->epoch++;
        kvb_flush(&e->blocks);
        if (e->cmd_version != NULL)
            snprintf(e->version, sizeof e->version, "%s", e->cmd_version);
        e->st.weight_updates++;
        e->st.weights_packed = e->model->infer_pack != NULL;
        break;
    }
    case CMD_NONE:
        break;
    }
}

static bool held(const areal_engine *e, const eng_seq *s) {
    return s->index > 0 && !s->req->prompt_done && !e->cfg.disable_prefix_cache;
}

/* Positions of the prefix cache a sequence may reuse: never its last token
 * (its logits are needed) nor a prompt row still to be scored. */
static int hit_limit(const eng_seq *s) {
    int limit = s->n_tok - 1;
    const eng_req *q = s->req;
    if (s->index == 0 && q->score_next < q->n_input) {
        int need_row = q->score_next - 1 > 0 ? q->score_next - 1 : 0;
        limit = limit < need_row ? limit : need_row;
    }
    return limit;
}

static void admit(areal_engine *e) {
    kv_blocks *kb = &e->blocks;
    int bt = kb->bt, reserved = 0;
    eng_seq *s = e->waiting.head;
    while (s != NULL && e->running.n < e->cfg.max_running) {
        eng_seq *next = s->next;
        if (held(e, s)) {
            s = next;
            continue;
        }
        int full = e->cfg.disable_prefix_cache ? 0 : hit_limit(s) / bt, hits = 0, revived = 0;
        uint64_t parent = KVB_ROOT_HASH;
        while (hits < full) {
            int b = kvb_lookup(kb, parent, s->tok + (size_t)hits * bt);
            if (b < 0)
                break;
            revived += kb->ref[b] == 0;
            s->table[hits] = b;
            parent = s->chain[hits] = kvb_hash(parent, s->tok + (size_t)hits * bt, bt);
            hits++;
        }
        int need = (s->n_tok + bt - 1) / bt - hits + (e->running.n > 0);
        if (need > kvb_available(kb) - revived - reserved)
            break; /* FIFO: the head waits for room, nobody overtakes it */
        reserved += need;
        for (int i = 0; i < hits; i++)
            kvb_ref(kb, s->table[i]);
        s->n_table = s->n_chained = hits;
        s->n_computed = hits * bt;
        eng_req *q = s->req;
        if (!s->admitted_once) {
            s->admitted_once = true;
            s->cached_tokens = hits * bt;
            e->st.prompt_tokens_total += (uint64_t)q->n_input;
            e->st.cached_tokens_total += (uint64_t)hits * bt;
        }
        if (q->t_admit == 0)
            q->t_admit = eng_now();
        s->epoch = e->epoch;
        s->admit_order = ++e->admit_counter;
        s->state = SEQ_RUNNING;
        seq_list_remove(&e->waiting, s);
        seq_list_push_back(&e->running, s);
        s = next;
    }
}

static void preempt(areal_engine *e, eng_seq *v, int *budget) {
    *budget += v->chunk;
    v->chunk = 0;
    release_blocks(e, v);
    seq_list_remove(&e->running, v);
    v->state = SEQ_WAITING;
    seq_list_push_front(&e->waiting, v);
    e->st.preemptions++;
}

/* Gives s blocks up to position n_computed + chunk; false if s itself was preempted. */
static bool reserve(areal_engine *e, eng_seq *s, int chunk, int *budget) {
    int bt = e->blocks.bt;
    int need = (s->n_computed + chunk + bt - 1) / bt - s->n_table;
    while (need > 0) {
        int b = kvb_alloc(&e->blocks);
        if (b >= 0) {
            s->table[s->n_table++] = b;
            need--;
            continue;
        }
        eng_seq *v = e->running.tail;
        preempt(e, v, budget); /* the youngest; s itself when it is the youngest */
        if (v == s)
            return false;
    }
    return true;
}

/* Chunk of s allowed by the remaining score rows (prompt scoring only). */
static int score_cap(const eng_seq *s, int chunk, int *score_left) {
    const eng_req *q = s->req;
    if (s->index != 0 || q->score_next >= q->n_input)
        return chunk;
    int lo = q->score_next - 1 > 0 ? q->score_next - 1 : 0, hi = q->n_input - 1;
    int a = s->n_computed, from = a > lo ? a : lo, to = a + chunk < hi ? a + chunk : hi;
    int rows = to - from;
    if (rows > *score_left) {
        chunk = from + *score_left - a;
        rows = *score_left;
    }
    if (rows > 0)
        *score_left -= rows;
    return chunk;
}

/* Plans the step into e->batch; returns its size. */
static int plan(areal_engine *e) {
    int budget = e->cfg.max_step_tokens, score_left = SCORE_ROWS;
    for (eng_seq *s = e->running.head; s != NULL; s = s->next)
        s->chunk = 0;
    for (int pass = 0; pass < 2; pass++) {
        eng_seq *s = e->running.head;
        while (s != NULL) {
            int pending = s->n_tok - s->n_computed;
            int chunk = 0;
            if (pass == 0 && pending == 1)
                chunk = 1;
            else if (pass == 1 && pending > 1)
                chunk = score_cap(s, pending < budget ? pending : budget, &score_left);
            if (chunk > 0 && budget >= chunk) {
                if (!reserve(e, s, chunk, &budget))
                    break; /* s was the youngest: nothing after it */
                s->chunk = chunk;
                budget -= chunk;
            }
            s = s->next;
        }
    }
    int n = 0;
    bool prefill = false, decode = false;
    for (eng_seq *s = e->running.head; s != NULL; s = s->next)
        if (s->chunk > 0) {
            e->batch[n++] = s;
            prefill |= s->n_computed < s->req->n_input;
            decode |= s->n_out > 0 && s->n_computed == s->n_tok - 1;
        }
    e->st.mixed_steps += prefill && decode;
    return n;
}

static void publish(areal_engine *e) {
    kv_blocks *kb = &e->blocks;
    e->st.running = e->running.n;
    if (e->running.n > e->st.running_peak)
        e->st.running_peak = e->running.n;
    e->st.blocks_used = kb->n_used;
    e->st.blocks_shared = kb->n_shared;
    e->st.blocks_cached = kb->n_cached;
    e->st.blocks_used_peak = kb->peak_used;
    e->st.token_usage = (double)kb->n_used / (double)kb->n;
    double now = eng_now();
    if (now - e->win_t0 >= 1.0) {
        e->st.gen_throughput =
            (double)(e->st.generated_tokens_total - e->win_gen0) / (now - e->win_t0);
        e->win_t0 = now;
        e->win_gen0 = e->st.generated_tokens_total;
    }
}

/* ---- without mu -------------------------------------------------------------- */

static void deliver(areal_engine *e, eng_req *done) {
    while (done != NULL) {
        eng_req *q = done;
        done = q->done_next;
        areal_engine_done_fn fn = q->on_done;
        void *user = q->user;
        areal_engine_result *res = q->res;
        req_free(q);
        fn(user, res);
        pthread_mutex_lock(&e->mu);
        if (--e->n_live == 0)
            pthread_cond_broadcast(&e->idle_cv);
        pthread_mutex_unlock(&e->mu);
    }
}

static bool is_in(const int32_t *ids, int n, int32_t t) {
    for (int i = 0; i < n; i++)
        if (ids[i] == t)
            return true;
    return false;
}

/* Indexes the blocks of s that became full (only under the weights it started with). */
static void index_full(areal_engine *e, eng_seq *s) {
    int bt = e->blocks.bt;
    while ((s->n_chained + 1) * bt <= s->n_computed) {
        int i = s->n_chained;
        uint64_t parent = i > 0 ? s->chain[i - 1] : KVB_ROOT_HASH;
        const int32_t *toks = s->tok + (size_t)i * bt;
        s->chain[i] = kvb_hash(parent, toks, bt);
        if (s->epoch == e->epoch && !e->cfg.disable_prefix_cache)
            kvb_register(&e->blocks, s->table[i], parent, toks);
        s->n_chained++;
    }
}

/* Samples the next token of s from its logits row; returns the finish or 0. */
static int next_token(areal_engine *e, eng_seq *s, const float *row, int32_t *matched) {
    eng_req *q = s->req;
    const areal_engine_params *p = &q->p;
    int V = e->v_draw, top_n = p->top_logprobs_num;
    if (s->n_out >= p->max_new_tokens)
        return AREAL_FINISH_LENGTH;
    float lp;
    int32_t t = eng_sample(row, V, p, &s->rng, e->scratch, &lp);
    areal_engine_top *top = top_n > 0 ? s->top + (size_t)s->n_out * top_n : NULL;
    if (top != NULL)
        eng_logprob(row, V, p->temperature, t, top_n, top);
    s->tok[s->n_tok++] = t;
    s->lp[s->n_out++] = lp;
    int ret = 0;
    if (q->on_token != NULL) {
        areal_engine_token tk = {s->index, s->n_out - 1, t, lp, top, top != NULL ? top_n : 0};
        ret = q->on_token(q->user, &tk);
    }
    if (ret == 1)
        return AREAL_FINISH_STOP;
    if (is_in(p->stop_token_ids, p->n_stop_token_ids, t) ||
        (!p->ignore_eos && is_in(e->cfg.eos_token_ids, e->cfg.n_eos_token_ids, t))) {
        *matched = t;
        return AREAL_FINISH_STOP;
    }
    if (s->n_out >= p->max_new_tokens || s->n_tok >= e->max_context)
        return AREAL_FINISH_LENGTH;
    return 0;
}

/* Runs the planned step; fills fin[i] / matched[i] for batch entry i. */
static int run_step(areal_engine *e, int nb, int *fin, int32_t *matched, int *n_gen) {
    int V = e->model->cfg.vocab_size, n_out = 0;
    int32_t *cu = e->cu;
    cu[0] = 0;
    for (int i = 0; i < nb; i++) {
        eng_seq *s = e->batch[i];
        memcpy(e->step_tok + cu[i], s->tok + s->n_computed, sizeof(int32_t) * (size_t)s->chunk);
        cu[i + 1] = cu[i] + s->chunk;
        e->pseq[i] = (areal_paged_seq){s->table, s->n_table, s->n_computed};
        eng_req *q = s->req;
        if (s->index == 0 && q->score_next < q->n_input) {
            int lo = q->score_next - 1 > 0 ? q->score_next - 1 : 0, hi = q->n_input - 1;
            int from = s->n_computed > lo ? s->n_computed : lo;
            int to = s->n_computed + s->chunk < hi ? s->n_computed + s->chunk : hi;
            for (int pos = from; pos < to; pos++)
                e->out_rows[n_out++] = cu[i] + (pos - s->n_computed);
        }
        if (s->n_computed + s->chunk == s->n_tok)
            e->out_rows[n_out++] = cu[i + 1] - 1;
    }
    areal_error err;
    int rc = e->tp != NULL ? eng_tp_step(e, nb, &err) : AREAL_OK;
    if (rc == AREAL_OK)
        rc = e->be->step(e, nb, n_out, &err);
    if (rc != AREAL_OK && e->tp != NULL)
        eng_tp_fail(e, &err); /* a follower died or hung: its partner ranks cannot go on */
    if (rc != AREAL_OK) {     /* else only ENOMEM gets here: the plan is valid by construction */
        for (int i = 0; i < nb; i++) {
            fin[i] = AREAL_FINISH_ABORT;
            matched[i] = -1;
        }
        return rc;
    }
    int k = 0;
    for (int i = 0; i < nb; i++) {
        eng_seq *s = e->batch[i];
        eng_req *q = s->req;
        int top_n = q->p.top_logprobs_num;
        fin[i] = 0;
        matched[i] = -1;
        if (s->index == 0 && q->score_next < q->n_input) {
            if (q->score_next == 0) { /* position 0 has no logprob: SGLang's null */
                q->in_lp[0] = NAN;
                for (int j = 0; j < top_n; j++)
                    q->in_top[j] = (areal_engine_top){NAN, -1};
                q->score_next = 1;
            }
            int hi = q->n_input - 1,
                to = s->n_computed + s->chunk < hi ? s->n_computed + s->chunk : hi;
            for (int pos = q->score_next - 1; pos < to; pos++, k++) {
                int at = pos + 1 - q->score_from;
                q->in_lp[at] = eng_logprob(e->logits + (size_t)k * V, e->v_draw, q->p.temperature,
                                           q->input[pos + 1], top_n,
                                           top_n > 0 ? q->in_top + (size_t)at * top_n : NULL);
                q->score_next = pos + 2;
            }
        }
        s->n_computed += s->chunk;
        index_full(e, s);
        if (s->n_computed >= q->n_input)
            q->prompt_done = true;
        if (s->n_computed == s->n_tok) {
            int n0 = s->n_out;
            fin[i] = next_token(e, s, e->logits + (size_t)k * V, &matched[i]);
            *n_gen += s->n_out - n0;
            k++;
        }
    }
    return AREAL_OK;
}

void *eng_scheduler(void *arg) {
    areal_engine *e = arg;
    int R = e->cfg.max_running;
    int *fin = malloc(sizeof(int) * (size_t)R);
    int32_t *matched = malloc(sizeof(int32_t) * (size_t)R);
    pthread_mutex_lock(&e->mu);
    for (;;) {
        eng_req *done = NULL;
        if (e->shutdown || fin == NULL || matched == NULL) {
            e->draining = true;
            abort_all_live(e, &done);
            pthread_mutex_unlock(&e->mu);
            deliver(e, done);
            pthread_mutex_lock(&e->mu);
            if (e->shutdown) {
                if (e->tp != NULL && !e->tp_failed) { /* the followers return from their loop */
                    areal_error serr;
                    pthread_mutex_unlock(&e->mu);
                    eng_tp_stop(e, &serr);
                    pthread_mutex_lock(&e->mu);
                }
                break;
            }
            pthread_cond_wait(&e->wake, &e->mu); /* no memory: serve nothing until destroy */
            continue;
        }
        if (e->any_flag)
            serve_flags(e, &done);
        if (e->cmd == CMD_SWAP && e->tp != NULL) {
            /* every follower loads its shard first (outside mu: loads take a while) */
            const char *dir = e->cmd_dir;
            bool failed = e->tp_failed;
            pthread_mutex_unlock(&e->mu);
            areal_error lerr;
            int lrc = failed ? areal_error_set(&lerr, AREAL_EIO, -1, "%s", e->tp_why)
                             : eng_tp_load(e, dir, AREAL_OK, &lerr);
            if (lrc != AREAL_OK && lrc != AREAL_EINVAL && !failed)
                eng_tp_fail(e, &lerr); /* a collective failed, not a rank's load */
            pthread_mutex_lock(&e->mu);
            if (lrc != AREAL_OK) {
                e->cmd_rc = lrc;
                e->cmd_err = lerr;
                e->cmd_model = NULL; /* a shallow copy: the caller keeps the buffers */
                e->cmd = CMD_NONE;
                pthread_cond_broadcast(&e->cmd_cv);
                /* the flags served above retired requests: answer them before the next
                 * pass (going back to the top dropped them: no on_done, never freed) */
                if (done != NULL) {
                    pthread_mutex_unlock(&e->mu);
                    deliver(e, done);
                    pthread_mutex_lock(&e->mu);
                }
                continue;
            }
        }
        if (e->cmd != CMD_NONE) {
            serve_cmd(e, &done);
            publish(e);
            pthread_mutex_unlock(&e->mu);
            deliver(e, done);
            pthread_mutex_lock(&e->mu);
            e->cmd = CMD_NONE;
            pthread_cond_broadcast(&e->cmd_cv);
            continue;
        }
        if (!e->paused)
            admit(e);
        int nb = e->paused ? 0 : plan(e);
        if (nb == 0) {
            if (done != NULL) {
                pthread_mutex_unlock(&e->mu);
                deliver(e, done);
                pthread_mutex_lock(&e->mu);
                continue;
            }
            e->st.gen_throughput = 0;
            publish(e);
            if (e->tp == NULL || e->tp_failed) {
                pthread_cond_wait(&e->wake, &e->mu);
                continue;
            }
            /* idle at t > 1: a heartbeat when nothing woke us, so followers see we live */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            long long ns = until.tv_nsec + (long long)e->cfg.tp_ping_ms * 1000000LL;
            until.tv_sec += (time_t)(ns / 1000000000LL);
            until.tv_nsec = (long)(ns % 1000000000LL);
            if (pthread_cond_timedwait(&e->wake, &e->mu, &until) != 0) {
                pthread_mutex_unlock(&e->mu);
                areal_error perr;
                if (eng_tp_ping(e, &perr) != AREAL_OK)
                    eng_tp_fail(e, &perr);
                pthread_mutex_lock(&e->mu);
            }
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        deliver(e, done);
        done = NULL;
        int n_gen = 0;
        run_step(e, nb, fin, matched, &n_gen);
        pthread_mutex_lock(&e->mu);
        e->st.generated_tokens_total += (uint64_t)n_gen;
        e->st.steps++;
        for (int i = 0; i < nb; i++)
            if (fin[i] != 0)
                finish_seq(e, e->batch[i], (areal_engine_finish)fin[i], matched[i], &done);
        publish(e);
        if (done != NULL) {
            pthread_mutex_unlock(&e->mu);
            deliver(e, done);
            pthread_mutex_lock(&e->mu);
        }
    }
    pthread_mutex_unlock(&e->mu);
    free(fin);
    free(matched);
    return NULL;
}
