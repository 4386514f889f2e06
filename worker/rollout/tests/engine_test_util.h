/*
 * engine_test_util.h - helpers shared by the rollout engine's tests (header
 * only, each test is one C file): fixture paths, a collector that waits for on_done calls, request
 * builders, and the references the engine is checked against (areal_generate
 * on the same prompts, and a training forward's logprobs).
 */
#ifndef ENGINE_TEST_UTIL_H
#define ENGINE_TEST_UTIL_H

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/model/generate.h"
#include "areal/model/heads.h"
#include "areal/model/paged.h"
#include "areal/rollout/engine.h"

static inline const char *et_fixture(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "worker/model/tests/fixtures/%s", name);
    return buf;
}

static inline void et_load(areal_model *m, const char *name) {
    char dir[256];
    areal_error err;
    if (areal_model_load(m, et_fixture(dir, sizeof dir, name), NULL, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
}

/* A started engine on fixture `name`. */
static inline areal_engine *et_engine(const char *name, const areal_engine_config *cfg) {
    areal_model m;
    et_load(&m, name);
    areal_engine *e = NULL;
    areal_error err;
    if (areal_engine_create(&m, cfg, &e, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    return e;
}

static inline void et_sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

typedef struct et_coll et_coll;

typedef struct et_slot {
    et_coll *c;
    int id;
    areal_engine_result *res;
    int done_calls, tokens;
    int abort_at;  /* on_token: abort own rid when this many tokens are out (-1 never) */
    int stop_at;   /* on_token: return 1 at this position (-1 never) */
    int signal_at; /* on_token: raise `signalled` at this many tokens, wait until the test
                    * thread has seen it (et_wait_signal), then sleep hold_ms, so that the
                    * test thread's pause / swap / stop lands mid-request */
    int hold_ms;
    bool signalled, seen;
    areal_engine *e;
    char rid[64];
    int32_t *ids; /* the request's tokens (owned by the test) */
    int n_ids, max_new;
} et_slot;

struct et_coll {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n_done;
    et_slot *slots;
    int n;
};

static inline void et_coll_init(et_coll *c, int n, areal_engine *e) {
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->n_done = 0;
    c->n = n;
    c->slots = calloc((size_t)n, sizeof *c->slots);
    assert_non_null(c->slots);
    for (int i = 0; i < n; i++) {
        c->slots[i] = (et_slot){.c = c,
                                .id = i,
                                .abort_at = -1,
                                .stop_at = -1,
                                .signal_at = -1,
                                .hold_ms = 100,
                                .e = e};
        snprintf(c->slots[i].rid, sizeof c->slots[i].rid, "r%d", i);
    }
}

static inline void et_coll_free(et_coll *c) {
    for (int i = 0; i < c->n; i++) {
        areal_engine_result_free(c->slots[i].res);
        free(c->slots[i].ids);
    }
    free(c->slots);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static inline void et_on_done(void *user, areal_engine_result *res) {
    et_slot *s = user;
    pthread_mutex_lock(&s->c->mu);
    areal_engine_result_free(s->res); /* a resubmission's earlier result */
    s->res = res;
    s->done_calls++;
    s->c->n_done++;
    pthread_cond_broadcast(&s->c->cv);
    pthread_mutex_unlock(&s->c->mu);
}

static inline int et_on_token(void *user, const areal_engine_token *t) {
    et_slot *s = user;
    int out = t->position + 1;
    pthread_mutex_lock(&s->c->mu);
    s->tokens++;
    bool hold = false;
    if (s->signal_at >= 0 && out >= s->signal_at && !s->signalled) {
        s->signalled = hold = true;
        pthread_cond_broadcast(&s->c->cv);
        /* The hold starts once the test thread is awake, not at the signal: under
         * heavy load (ASan, load 26) waking it took longer than a fixed hold and
         * the request finished before the pause it was meant to meet; the failed
         * assertion then jumped over et_coll_free and LSan reported the results'
         * buffers (allocated in req_new) as leaked. Bounded: a test that never
         * waits for the signal is held 10 s, not forever. */
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += 10;
        while (!s->seen && pthread_cond_timedwait(&s->c->cv, &s->c->mu, &dl) == 0) {
        }
    }
    pthread_mutex_unlock(&s->c->mu);
    if (hold)
        et_sleep_ms(s->hold_ms);
    if (s->abort_at >= 0 && out == s->abort_at)
        areal_engine_abort(s->e, s->rid);
    return s->stop_at >= 0 && t->position == s->stop_at;
}

/* Waits until n on_done calls in all (fails after 60 s). */
static inline void et_wait_done(et_coll *c, int n) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 60;
    pthread_mutex_lock(&c->mu);
    while (c->n_done < n)
        if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) != 0) {
            int got = c->n_done;
            pthread_mutex_unlock(&c->mu);
            fail_msg("timed out: %d of %d requests done", got, n);
        }
    pthread_mutex_unlock(&c->mu);
}

static inline void et_wait_signal(et_slot *s) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 60;
    pthread_mutex_lock(&s->c->mu);
    while (!s->signalled)
        if (pthread_cond_timedwait(&s->c->cv, &s->c->mu, &dl) != 0) {
            pthread_mutex_unlock(&s->c->mu);
            fail_msg("timed out waiting for request %d's tokens", s->id);
        }
    s->seen = true; /* on_token's hold_ms starts now: act at once */
    pthread_cond_broadcast(&s->c->cv);
    pthread_mutex_unlock(&s->c->mu);
}

static inline areal_engine_params et_greedy(int max_new) {
    areal_engine_params p;
    areal_engine_params_default(&p);
    p.max_new_tokens = max_new;
    p.temperature = 0;
    p.return_logprob = true;
    return p;
}

/* Submits slot s's ids with params p; returns the engine's code. */
static inline int et_submit(areal_engine *e, et_slot *s, const areal_engine_params *p,
                            areal_error *err) {
    areal_engine_request r = {.input_ids = s->ids,
                              .n_input = s->n_ids,
                              .params = *p,
                              .rid = s->rid,
                              .on_done = et_on_done,
                              .on_token = et_on_token,
                              .user = s};
    return areal_engine_submit(e, &r, err);
}

static inline void et_submit_ok(areal_engine *e, et_slot *s, const areal_engine_params *p) {
    areal_error err;
    if (et_submit(e, s, p, &err) != AREAL_OK)
        fail_msg("submit %s: %s", s->rid, err.msg);
}

/* Random prompt of n ids in [0, V) from a small LCG. */
static inline int32_t *et_prompt(uint64_t *st, int n, int V) {
    int32_t *p = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    assert_non_null(p);
    for (int i = 0; i < n; i++) {
        *st = *st * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (int32_t)((*st >> 33) % (uint64_t)V);
    }
    return p;
}

static inline uint32_t et_rand(uint64_t *st, uint32_t n) {
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((*st >> 33) % n);
}

/* areal_generate of one prompt under sp; o owned by the caller. */
static inline void et_generate(areal_model *m, const int32_t *ids, int n, const areal_sampling *sp,
                               areal_gen_out *o) {
    areal_error err;
    const int32_t *p[1] = {ids};
    if (areal_generate(m, p, &n, 1, sp, o, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
}

/* Training-forward logprobs at temperature T (> 0) of seq[1..n) given their prefixes:
 * lp[t] = log p(seq[t + 1] | seq[0..t]); caller frees. */
static inline float *et_forward_logprobs(areal_model *m, const int32_t *seq, int n, float T) {
    int32_t *tgt = malloc(sizeof(int32_t) * (size_t)n);
    float *lp = malloc(sizeof(float) * (size_t)n);
    assert_non_null(tgt);
    assert_non_null(lp);
    for (int t = 0; t < n; t++)
        tgt[t] = t + 1 < n ? seq[t + 1] : -1;
    int32_t cu[2] = {0, n};
    areal_batch b = {seq, cu, n, 1};
    areal_acts a;
    areal_error err;
    if (areal_model_forward(m, &b, &a, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    areal_token_logprobs(NULL, a.logits, n, m->cfg.vocab_size, tgt, T, lp, NULL);
    areal_acts_free(&a);
    free(tgt);
    return lp;
}

#endif
