/*
 * engine_seq.c - requests and their sequences: allocation from a submitted
 * request, the intrusive lists, and the hand-over of outputs into the
 * caller-owned result.
 *
 * Everything a sequence can ever need is allocated at submit (tokens up to
 * prompt + max_new_tokens, logprob arrays, a block table for that length),
 * so the scheduler never allocates per token and an out-of-memory shows up
 * as a refused submit instead of a request dying mid-generation.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

void seq_list_push_back(seq_list *l, eng_seq *s) {
    s->next = NULL;
    s->prev = l->tail;
    if (l->tail)
        l->tail->next = s;
    else
        l->head = s;
    l->tail = s;
    l->n++;
}

void seq_list_push_front(seq_list *l, eng_seq *s) {
    s->prev = NULL;
    s->next = l->head;
    if (l->head)
        l->head->prev = s;
    else
        l->tail = s;
    l->head = s;
    l->n++;
}

void seq_list_remove(seq_list *l, eng_seq *s) {
    if (s->prev)
        s->prev->next = s->next;
    else
        l->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        l->tail = s->prev;
    s->prev = s->next = NULL;
    l->n--;
}

void req_free(eng_req *q) {
    if (q == NULL)
        return;
    for (int i = 0; q->seqs && i < q->n; i++) {
        eng_seq *s = &q->seqs[i];
        free(s->tok);
        free(s->lp);
        free(s->top);
        free(s->table);
        free(s->chain);
    }
    free(q->seqs);
    free(q->input);
    free(q->stop_ids);
    free(q->in_lp);
    free(q->in_top);
    free(q);
}

eng_req *req_new(const areal_engine_request *r, int n, int bt, uint64_t seed, const char *rid) {
    eng_req *q = calloc(1, sizeof *q);
    if (q == NULL)
        return NULL;
    snprintf(q->rid, sizeof q->rid, "%s", rid);
    q->p = r->params;
    q->p.n = n;
    q->n = q->n_live = n;
    q->n_input = r->n_input;
    q->on_done = r->on_done;
    q->on_token = r->on_token;
    q->user = r->user;
    int max_new = q->p.max_new_tokens, top_n = q->p.return_logprob ? q->p.top_logprobs_num : 0;
    q->p.top_logprobs_num = top_n;
    int cap = r->n_input + max_new, n_blocks = cap / bt + 2;
    q->input = malloc(sizeof(int32_t) * (size_t)r->n_input);
    q->seqs = calloc((size_t)n, sizeof *q->seqs);
    bool oom = q->input == NULL || q->seqs == NULL;
    if (!oom && q->p.n_stop_token_ids > 0) {
        q->stop_ids = malloc(sizeof(int32_t) * (size_t)q->p.n_stop_token_ids);
        oom = q->stop_ids == NULL;
        if (!oom)
            memcpy(q->stop_ids, r->params.stop_token_ids,
                   sizeof(int32_t) * (size_t)q->p.n_stop_token_ids);
    }
    q->p.stop_token_ids = q->stop_ids;
    if (!oom)
        memcpy(q->input, r->input_ids, sizeof(int32_t) * (size_t)r->n_input);
    for (int i = 0; !oom && i < n; i++) {
        eng_seq *s = &q->seqs[i];
        s->req = q;
        s->index = i;
        s->cap = cap;
        s->tok = malloc(sizeof(int32_t) * (size_t)cap);
        s->lp = malloc(sizeof(float) * (size_t)(max_new > 0 ? max_new : 1));
        s->table = malloc(sizeof(int32_t) * (size_t)n_blocks);
        s->chain = malloc(sizeof(uint64_t) * (size_t)n_blocks);
        if (top_n > 0)
            s->top = malloc(sizeof(areal_engine_top) * (size_t)top_n *
                            (size_t)(max_new > 0 ? max_new : 1));
        oom = !s->tok || !s->lp || !s->table || !s->chain || (top_n > 0 && !s->top);
        if (!oom)
            memcpy(s->tok, r->input_ids, sizeof(int32_t) * (size_t)r->n_input);
        s->n_tok = r->n_input;
        s->matched = -1;
        s->state = SEQ_WAITING;
        areal_rng_seed(&s->rng, seed, (uint64_t)i);
    }
    q->score_from = q->score_next = q->n_input;
    int start = q->p.logprob_start_len;
    if (!oom && q->p.return_logprob && start >= 0 && start < r->n_input) {
        q->score_from = q->score_next = start;
        size_t m = (size_t)(r->n_input - start);
        q->in_lp = malloc(sizeof(float) * m);
        if (top_n > 0)
            q->in_top = malloc(sizeof(areal_engine_top) * m * (size_t)top_n);
        oom = q->in_lp == NULL || (top_n > 0 && q->in_top == NULL);
    }
    if (oom) {
        req_free(q);
        return NULL;
    }
    return q;
}

areal_engine_result *req_result(eng_req *q, const char *version) {
    areal_engine_result *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->samples = calloc((size_t)q->n, sizeof *r->samples);
    if (r->samples == NULL) {
        free(r);
        return NULL;
    }
    snprintf(r->rid, sizeof r->rid, "%s", q->rid);
    snprintf(r->weight_version, sizeof r->weight_version, "%s", version);
    r->n = q->n;
    r->prompt_tokens = q->n_input;
    r->top_logprobs_num = q->p.top_logprobs_num;
    for (int i = 0; i < q->n; i++) {
        eng_seq *s = &q->seqs[i];
        areal_engine_sample *o = &r->samples[i];
        o->index = i;
        o->n_output = s->n_out;
        o->finish = s->finish;
        o->matched_token = s->matched;
        o->cached_tokens = s->cached_tokens;
        /* the token array becomes the output: shift the output to its front */
        memmove(s->tok, s->tok + q->n_input, sizeof(int32_t) * (size_t)s->n_out);
        o->output_ids = s->tok;
        s->tok = NULL;
        if (q->p.return_logprob) {
            o->output_logprobs = s->lp;
            o->output_top = s->top;
            s->lp = NULL;
            s->top = NULL;
        }
    }
    if (q->in_lp != NULL) {
        r->input_logprobs = q->in_lp;
        r->input_top = q->in_top;
        r->n_input_logprobs = q->n_input - q->score_from;
        q->in_lp = NULL;
        q->in_top = NULL;
    }
    double now = eng_now();
    r->queue_s = (q->t_admit > 0 ? q->t_admit : now) - q->t_submit;
    r->e2e_s = now - q->t_submit;
    return r;
}

void areal_engine_result_free(areal_engine_result *r) {
    if (r == NULL)
        return;
    for (int i = 0; i < r->n; i++) {
        free(r->samples[i].output_ids);
        free(r->samples[i].output_logprobs);
        free(r->samples[i].output_top);
    }
    free(r->samples);
    free(r->input_logprobs);
    free(r->input_top);
    free(r);
}
