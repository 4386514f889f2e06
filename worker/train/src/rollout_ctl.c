/*
 * rollout_ctl.c - the rollout controller (see rollout_ctl.h for the AReaL
 * behaviour it follows).
 *
 * One mutex guards the queues, counters, server table, version and pause
 * flag; no HTTP call or callback runs with it held. Jobs are single samples
 * (train) or single eval prompts; a train task (one prompt) completes when
 * its G jobs have, and the worker that finishes the last one scores nothing
 * more (each worker scored its own sample) but runs the accept filter and
 * queues the group. The dispatcher is the only thread that raises `running`,
 * so the capacity it checked cannot shrink under it while it asks the source
 * for a prompt outside the lock.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/train/rollout_ctl.h"

typedef struct eval_batch {
    int remaining;
    float *rewards;
    const areal_rollout_prompt *prompts;
    areal_sgl_sampling sampling;
} eval_batch;

typedef struct task {
    areal_group g;
    int32_t *prompt;
    int n_prompt;
    int remaining;
} task;

typedef struct job {
    struct job *next;
    task *t; /* train sample t->g.s[sample], or NULL for eval */
    int sample;
    eval_batch *eb;
} job;

typedef struct server {
    char addr[128];
    bool present;
    double down_until;
    bool reported_down;
    bool needs_sync; /* missed a server-wide call: gets no request until weights reach it */
    bool probe;      /* a request found it unreachable: it may come back restarted, with other
                        weights, so its weight version is checked before the next request */
} server;

struct areal_rollout_ctl {
    areal_rollout_cfg cfg;
    areal_rollout_callbacks cb;
    int32_t stop_ids[64];
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done, cv_dispatch, cv_resume;
    job *q_head, *q_tail;
    areal_group *done;
    int n_done, cap_done;
    server servers[AREAL_ROLLOUT_MAX_SERVERS];
    int n_servers, rr;
    areal_sgl_client *ctl_clients[AREAL_ROLLOUT_MAX_SERVERS]; /* trainer thread only */
    long version;
    bool paused, stopping, exhausted;
    bool none_logged, stale_eval_logged;
    bool fatal;         /* requests that no server accepts: the run cannot go on */
    long stale_answers; /* answers from a server behind the policy (dropped, off_version) */
    areal_error fatal_err;
    areal_staleness st;
    pthread_t dispatcher;
    pthread_t *workers;
    int n_started;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void timed_wait(pthread_cond_t *cv, pthread_mutex_t *mu, double seconds) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + seconds;
    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(cv, mu, &ts);
}

static void logf_(areal_rollout_ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(areal_rollout_ctl *c, const char *fmt, ...) {
    if (c->cb.log == NULL)
        return;
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->cb.log(c->cb.ctx, line);
}

void areal_group_free(areal_group *g) {
    for (int i = 0; g->s && i < g->G; i++) {
        free(g->s[i].tokens);
        free(g->s[i].logprobs);
        free(g->s[i].versions);
    }
    free(g->s);
    memset(g, 0, sizeof *g);
}

static void push_job(areal_rollout_ctl *c, job *j) {
    j->next = NULL;
    if (c->q_tail)
        c->q_tail->next = j;
    else
        c->q_head = j;
    c->q_tail = j;
    pthread_cond_signal(&c->cv_work);
}

static bool cancelled(const areal_rollout_ctl *c) {
    return c->cfg.cancel != NULL && *c->cfg.cancel != 0;
}

/* A sample's growing buffers. */
typedef struct sample_buf {
    int32_t *tok;
    float *lp;
    int32_t *ver;
    int n, cap;
} sample_buf;

static int buf_reserve(sample_buf *b, int need) {
    if (need <= b->cap)
        return 0;
    int cap = need * 2;
    int32_t *t = realloc(b->tok, (size_t)cap * sizeof *t);
    if (t)
        b->tok = t;
    float *l = realloc(b->lp, (size_t)cap * sizeof *l);
    if (l)
        b->lp = l;
    int32_t *v = realloc(b->ver, (size_t)cap * sizeof *v);
    if (v)
        b->ver = v;
    if (!t || !l || !v)
        return -1;
    b->cap = cap;
    return 0;
}

/* Picks the next usable server round robin; -1 when none is. Called locked. An
 * evaluation may fall back to a server that missed a weight update (said once) rather
 * than wait for one: only the trainer's loop can catch servers up, and it is the one
 * waiting for the evaluation. */
static int pick_server(areal_rollout_ctl *c, bool eval) {
    double t = now_s();
    for (int pass = 0; pass < (eval ? 2 : 1); pass++)
        for (int k = 0; k < c->n_servers; k++) {
            int i = (c->rr + k) % c->n_servers;
            server *s = &c->servers[i];
            if (s->present && (!s->needs_sync || pass == 1) && s->down_until <= t) {
                if (pass == 1 && !c->stale_eval_logged) {
                    c->stale_eval_logged = true;
                    logf_(c, "evaluating on %s, which missed a weight update (no current server)",
                          s->addr);
                }
                c->rr = (i + 1) % c->n_servers;
                return i;
            }
        }
    return -1;
}

/*
 * A server that was unreachable answers again: GET /get_model_info and compare its
 * weight_version with the policy's. A different one (it restarted from older weights)
 * marks it as needing a sync rather than have its tokens labelled with the current
 * version. A server without the endpoint, or a version that is not a number, passes.
 * Returns false when it is still unreachable.
 */
static bool probe_server(areal_rollout_ctl *c, areal_sgl_client *cl, int si, long version) {
    json_t *info = NULL;
    areal_error err;
    int rc = areal_sgl_get(cl, "/get_model_info", &info, &err);
    const char *v = json_string_value(json_object_get(info, "weight_version"));
    char want[32], *end = NULL;
    snprintf(want, sizeof want, "%ld", version);
    bool numeric = v != NULL && v[0] != '\0' && (strtol(v, &end, 10), *end == '\0');
    bool stale = rc == AREAL_OK && numeric && strcmp(v, want) != 0;
    char got[32];
    snprintf(got, sizeof got, "%s", v ? v : "");
    json_decref(info);
    pthread_mutex_lock(&c->mu);
    server *s = &c->servers[si];
    if (rc == AREAL_EIO) {
        s->down_until = now_s() + (c->cfg.server_backoff_s > 0 ? c->cfg.server_backoff_s : 1);
    } else {
        s->probe = false;
        if (stale && !s->needs_sync) {
            s->needs_sync = true;
            logf_(c,
                  "rollout server %s answers again at weight version %s, the policy is at "
                  "%s; it gets no requests until a weight update reaches it",
                  s->addr, got, want);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return rc != AREAL_EIO;
}

/* splitmix64 of a few words: the per-request sampling seed. */
static uint64_t mix(uint64_t a, uint64_t b, uint64_t c3) {
    uint64_t z = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull ^
                 (c3 + 0x1234567ull) * 0x94d049bb133111ebull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Whether v is a weight version other than the policy's (a non-numeric one passes). */
static bool other_version(const char *v, long version) {
    char *end = NULL;
    if (v == NULL || v[0] == '\0')
        return false;
    long x = strtol(v, &end, 10);
    return *end == '\0' && x != version;
}

/*
 * An answer made with weights other than those its request was pinned to. Either the
 * request reached the server just before a pause and ran after the update (the server is
 * current: nothing to fix), or the server is behind the policy (it restarted, or joined
 * between an update and its listing): it is kept out until weights reach it, said once.
 * Either way the answer is dropped and the request sent again under the current version,
 * so no token is ever labelled with a version that did not make it. Returns whether the
 * server was behind.
 */
static bool off_version(areal_rollout_ctl *c, int si, const char *got, long pinned) {
    pthread_mutex_lock(&c->mu);
    server *s = &c->servers[si];
    bool behind = other_version(got, c->version);
    bool first = behind && !s->needs_sync;
    if (behind) {
        s->needs_sync = true;
        c->stale_answers++;
    }
    long now = c->version;
    pthread_mutex_unlock(&c->mu);
    if (first)
        logf_(c,
              "rollout server %s answered with weight version %s, the policy is at %ld (the "
              "request was pinned to %ld); the answer is dropped and the server gets no requests "
              "until a weight update reaches it",
              s->addr, got, now, pinned);
    return behind;
}

/*
 * Generates one sample to completion: waits while paused, pins the version
 * per request, resubmits after abort, retries elsewhere after a failure.
 * Returns false only when the controller is stopping (or out of memory).
 */
static bool run_sample(areal_rollout_ctl *c, areal_sgl_client **clients, const int32_t *prompt,
                       int n_prompt, const areal_sgl_sampling *base, uint64_t seed, sample_buf *b,
                       bool *no_eos, int *n_requests, bool eval) {
    b->n = 0;
    if (buf_reserve(b, n_prompt + base->max_new_tokens + 1) != 0)
        return false;
    memcpy(b->tok, prompt, (size_t)n_prompt * sizeof *prompt);
    for (int i = 0; i < n_prompt; i++) {
        b->lp[i] = 0;
        b->ver[i] = -1;
    }
    b->n = n_prompt;
    int bad_answers = 0, answered = 0;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        while (c->paused && !c->stopping && !c->fatal && !cancelled(c))
            timed_wait(&c->cv_resume, &c->mu, 0.2);
        if (c->stopping || c->fatal || cancelled(c)) {
            pthread_mutex_unlock(&c->mu);
            return false;
        }
        int si = pick_server(c, eval);
        if (si < 0) {
            if (!c->none_logged) {
                c->none_logged = true;
                logf_(c,
                      "no rollout server is reachable (%d known); waiting for one to answer "
                      "or register",
                      c->n_servers);
            }
            timed_wait(&c->cv_resume, &c->mu, 0.2);
            pthread_mutex_unlock(&c->mu);
            continue;
        }
        long version = c->version; /* pinned for every token this request returns */
        char addr[128];
        memcpy(addr, c->servers[si].addr, sizeof addr);
        bool probe = c->servers[si].probe;
        pthread_mutex_unlock(&c->mu);

        areal_error err;
        if (clients[si] == NULL &&
            areal_sgl_client_create(addr, c->cfg.request_timeout_s, &clients[si], &err) != 0)
            return false;
        if (probe) {
            probe_server(c, clients[si], si, version);
            continue; /* pick again: the probe may have ruled it out */
        }
        areal_sgl_sampling s = *base;
        int generated = b->n - n_prompt;
        s.max_new_tokens = base->max_new_tokens - generated;
        /* a retry after a failure reuses the seed, so where a request lands never changes
         * what it samples; a resubmission after an abort continues with the next one */
        s.seed = seed + (uint64_t)answered;
        areal_sgl_output out;
        (*n_requests)++;
        int rc = areal_sgl_generate(clients[si], b->tok, b->n, &s, &out, &err);
        if (rc != AREAL_OK) {
            bool transport = rc == AREAL_EIO;
            pthread_mutex_lock(&c->mu);
            server *sv = &c->servers[si];
            sv->down_until = now_s() + (c->cfg.server_backoff_s > 0 ? c->cfg.server_backoff_s : 1);
            sv->probe = sv->probe || transport;
            bool first = !sv->reported_down;
            sv->reported_down = true;
            pthread_mutex_unlock(&c->mu);
            if (first || !transport)
                logf_(c, "%s; retrying the request on another server", err.msg);
            if (transport) {
                /* the next request to it on a new connection: a reused one the server had
                 * closed answers nothing ("Empty reply from server"), and e2e w_rl_world's
                 * restarted trainer, with one server, once never trained again after one */
                areal_sgl_client_free(clients[si]);
                clients[si] = NULL;
            }
            if (!transport && ++bad_answers >= 3) {
                /* refused three times (4xx, or an answer not in SGLang's shape): this is
                 * not a server being down, retrying forever would hide it */
                pthread_mutex_lock(&c->mu);
                if (!c->fatal) {
                    c->fatal = true;
                    c->fatal_err = err;
                }
                pthread_cond_broadcast(&c->cv_done);
                pthread_mutex_unlock(&c->mu);
                return false;
            }
            continue;
        }
        if (other_version(out.weight_version, version)) {
            off_version(c, si, out.weight_version, version);
            areal_sgl_output_free(&out);
            continue; /* sent again (another server, or this one at the current version) */
        }
        answered++;
        pthread_mutex_lock(&c->mu);
        if (c->servers[si].reported_down)
            logf_(c, "rollout server %s answers again", addr);
        c->servers[si].reported_down = false;
        c->none_logged = false;
        pthread_mutex_unlock(&c->mu);
        int take = out.n < s.max_new_tokens ? out.n : s.max_new_tokens;
        for (int i = 0; i < take; i++) {
            b->tok[b->n] = out.ids[i];
            b->lp[b->n] = out.logprobs[i];
            b->ver[b->n] = (int32_t)version;
            b->n++;
        }
        areal_sgl_finish fin = out.finish;
        areal_sgl_output_free(&out);
        generated = b->n - n_prompt;
        if (fin == AREAL_SGL_ABORT && generated < base->max_new_tokens)
            continue; /* interrupted: resubmit prompt + partial output */
        *no_eos = fin != AREAL_SGL_STOP;
        return true;
    }
}

static void finish_task(areal_rollout_ctl *c, task *t) {
    t->g.t_done = now_s();
    bool complete = true; /* a sample cut off by a stop or a refused request has no tokens */
    for (int i = 0; i < t->g.G; i++)
        complete = complete && t->g.s[i].n > t->g.s[i].n_prompt;
    bool keep = complete && (c->cb.accept ? c->cb.accept(c->cb.ctx, &t->g) : true);
    pthread_mutex_lock(&c->mu);
    if (keep) {
        if (c->n_done == c->cap_done) {
            int cap = c->cap_done ? c->cap_done * 2 : 16;
            areal_group *d = realloc(c->done, (size_t)cap * sizeof *d);
            if (d) {
                c->done = d;
                c->cap_done = cap;
            }
        }
        if (c->n_done < c->cap_done) {
            c->done[c->n_done++] = t->g;
            t->g.s = NULL;
        } else {
            keep = false;
        }
    }
    if (keep)
        areal_staleness_on_accepted(&c->st);
    else
        areal_staleness_on_rejected(&c->st);
    pthread_cond_broadcast(&c->cv_done);
    pthread_cond_signal(&c->cv_dispatch);
    pthread_mutex_unlock(&c->mu);
    areal_group_free(&t->g);
    free(t->prompt);
    free(t);
}

static void *worker_main(void *arg) {
    areal_rollout_ctl *c = arg;
    areal_sgl_client *clients[AREAL_ROLLOUT_MAX_SERVERS] = {0};
    sample_buf b = {0};
    for (;;) {
        pthread_mutex_lock(&c->mu);
        while (!c->stopping && c->q_head == NULL)
            pthread_cond_wait(&c->cv_work, &c->mu);
        if (c->stopping) {
            pthread_mutex_unlock(&c->mu);
            break;
        }
        job *j = c->q_head;
        c->q_head = j->next;
        if (c->q_head == NULL)
            c->q_tail = NULL;
        pthread_mutex_unlock(&c->mu);

        bool no_eos = false;
        int n_req = 0;
        if (j->t != NULL) {
            task *t = j->t;
            uint64_t seed = mix(c->cfg.sampling.seed, (uint64_t)t->g.index,
                                (uint64_t)t->g.version_at_submit * 1024 + (uint64_t)j->sample);
            bool ok = run_sample(c, clients, t->prompt, t->n_prompt, &c->cfg.sampling, seed * 64,
                                 &b, &no_eos, &n_req, false);
            areal_traj *s = &t->g.s[j->sample];
            if (ok) {
                s->tokens = malloc((size_t)b.n * sizeof *s->tokens);
                s->logprobs = malloc((size_t)b.n * sizeof *s->logprobs);
                s->versions = malloc((size_t)b.n * sizeof *s->versions);
                if (s->tokens && s->logprobs && s->versions) {
                    memcpy(s->tokens, b.tok, (size_t)b.n * sizeof *b.tok);
                    memcpy(s->logprobs, b.lp, (size_t)b.n * sizeof *b.lp);
                    memcpy(s->versions, b.ver, (size_t)b.n * sizeof *b.ver);
                    s->n = b.n;
                }
                s->n_prompt = t->n_prompt;
                s->no_eos = no_eos;
                s->n_requests = n_req;
                s->reward = c->cb.reward ? c->cb.reward(c->cb.ctx, t->g.index, b.tok + t->n_prompt,
                                                        b.n - t->n_prompt)
                                         : 0.0f;
            }
            pthread_mutex_lock(&c->mu);
            bool last = --t->remaining == 0;
            pthread_mutex_unlock(&c->mu);
            if (last)
                finish_task(c, t);
        } else {
            eval_batch *eb = j->eb;
            const areal_rollout_prompt *p = &eb->prompts[j->sample];
            bool ok = run_sample(c, clients, p->ids, p->n_ids, &eb->sampling,
                                 mix(eb->sampling.seed, (uint64_t)p->index, 7), &b, &no_eos, &n_req,
                                 true);
            float r = ok && c->cb.reward
                          ? c->cb.reward(c->cb.ctx, p->index, b.tok + p->n_ids, b.n - p->n_ids)
                          : 0.0f;
            pthread_mutex_lock(&c->mu);
            eb->rewards[j->sample] = r;
            eb->remaining--;
            pthread_cond_broadcast(&c->cv_done);
            pthread_mutex_unlock(&c->mu);
        }
        free(j);
    }
    for (int i = 0; i < AREAL_ROLLOUT_MAX_SERVERS; i++)
        areal_sgl_client_free(clients[i]);
    free(b.tok);
    free(b.lp);
    free(b.ver);
    return NULL;
}

/* Admits one prompt as a task of G jobs. Called locked; unlocks around the source call. */
static void admit_one(areal_rollout_ctl *c) {
    areal_rollout_prompt p = {0};
    pthread_mutex_unlock(&c->mu);
    int rc = c->cb.next_prompt(c->cb.ctx, &p);
    task *t = NULL;
    if (rc > 0 || (rc == 0 && p.ids != NULL && p.n_ids > 0)) {
        t = calloc(1, sizeof *t);
        if (t) {
            t->prompt = malloc((size_t)p.n_ids * sizeof *t->prompt);
            t->g.s = calloc((size_t)c->cfg.group_size, sizeof *t->g.s);
        }
        if (t == NULL || t->prompt == NULL || t->g.s == NULL) {
            if (t) {
                free(t->prompt);
                free(t->g.s);
                free(t);
            }
            t = NULL;
        } else {
            memcpy(t->prompt, p.ids, (size_t)p.n_ids * sizeof *p.ids);
            t->n_prompt = p.n_ids;
            t->g.G = c->cfg.group_size;
            t->g.index = p.index;
            t->remaining = c->cfg.group_size;
            t->g.t_submit = now_s();
        }
    }
    pthread_mutex_lock(&c->mu);
    if (rc < 0) {
        c->exhausted = true;
        pthread_cond_broadcast(&c->cv_done);
        return;
    }
    if (t == NULL) {
        timed_wait(&c->cv_dispatch, &c->mu, 0.05);
        return;
    }
    t->g.version_at_submit = c->version;
    areal_staleness_on_enqueued(&c->st);
    areal_staleness_on_submitted(&c->st);
    for (int k = 0; k < c->cfg.group_size; k++) {
        job *j = calloc(1, sizeof *j);
        if (j == NULL)
            continue; /* out of memory: the task never completes; rare enough to accept */
        j->t = t;
        j->sample = k;
        push_job(c, j);
    }
    pthread_cond_broadcast(&c->cv_work);
}

static void *dispatcher_main(void *arg) {
    areal_rollout_ctl *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->stopping) {
        if (!c->exhausted && areal_staleness_can_submit(&c->st, c->version))
            admit_one(c);
        else
            timed_wait(&c->cv_dispatch, &c->mu, 0.1);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Makes addrs[0..n) the present servers. A server new to the list (or back in it) has its
 * weight version checked before its first request when probe_new (not at the start: the
 * caller's list is taken as serving the start version) and, when versions[k] names one
 * other than the policy's, needs a sync first. Returns how many need one, or minus an error code.
 */
static int set_servers_locked(areal_rollout_ctl *c, const char *const *addrs,
                              const char *const *versions, int n, bool probe_new,
                              areal_error *err) {
    bool was[AREAL_ROLLOUT_MAX_SERVERS];
    for (int i = 0; i < c->n_servers; i++) {
        was[i] = c->servers[i].present;
        c->servers[i].present = false;
    }
    int stale = 0;
    for (int k = 0; k < n; k++) {
        int found = -1;
        for (int i = 0; i < c->n_servers; i++)
            if (strcmp(c->servers[i].addr, addrs[k]) == 0)
                found = i;
        if (found < 0) {
            if (c->n_servers == AREAL_ROLLOUT_MAX_SERVERS) {
                return -areal_error_set(err, AREAL_ERANGE, -1, "more than %d rollout servers",
                                        AREAL_ROLLOUT_MAX_SERVERS);
            }
            if (strlen(addrs[k]) >= sizeof c->servers[0].addr) {
                return -areal_error_set(err, AREAL_EINVAL, -1, "rollout server address too long");
            }
            found = c->n_servers++;
            memset(&c->servers[found], 0, sizeof c->servers[found]);
            snprintf(c->servers[found].addr, sizeof c->servers[found].addr, "%s", addrs[k]);
            was[found] = false;
        }
        server *s = &c->servers[found];
        if (!was[found] && !s->present) {
            /* it may have restarted since it was last in the list: check before use */
            s->probe = probe_new;
            s->down_until = 0;
            s->reported_down = false;
            if (versions != NULL && other_version(versions[k], c->version)) {
                s->needs_sync = true;
                stale++;
            }
        }
        s->present = true;
    }
    pthread_cond_broadcast(&c->cv_resume);
    return stale;
}

int areal_rollout_ctl_set_servers(areal_rollout_ctl *c, const char *const *addrs, int n,
                                  areal_error *err) {
    pthread_mutex_lock(&c->mu);
    int rc = set_servers_locked(c, addrs, NULL, n, true, err);
    pthread_mutex_unlock(&c->mu);
    return rc < 0 ? -rc : AREAL_OK;
}

int areal_rollout_ctl_set_registered(areal_rollout_ctl *c, const char *const *addrs,
                                     const char *const *versions, int n, int *n_stale,
                                     areal_error *err) {
    pthread_mutex_lock(&c->mu);
    int rc = set_servers_locked(c, addrs, versions, n, true, err);
    pthread_mutex_unlock(&c->mu);
    if (n_stale)
        *n_stale = rc > 0 ? rc : 0;
    return rc < 0 ? -rc : AREAL_OK;
}

int areal_rollout_ctl_start(const areal_rollout_cfg *cfg, const char *const *addrs, int n,
                            const areal_rollout_callbacks *cb, areal_rollout_ctl **out,
                            areal_error *err) {
    *out = NULL;
    if (cfg->group_size < 1)
        return areal_error_set(err, AREAL_EINVAL, -1, "gconfig.n_samples must be >= 1");
    if (cfg->n_workers < 1 || cfg->n_workers > 1024)
        return areal_error_set(err, AREAL_EINVAL, -1, "rollout workers must be 1..1024");
    if (cfg->eta < 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "rollout.max_head_offpolicyness must be >= 0");
    if (cfg->batch_size < 1)
        return areal_error_set(err, AREAL_EINVAL, -1, "rollout.consumer_batch_size must be >= 1");
    if (cfg->sampling.max_new_tokens < 1)
        return areal_error_set(err, AREAL_EINVAL, -1, "gconfig.max_new_tokens must be >= 1");
    if (cfg->sampling.n_stop > 64)
        return areal_error_set(err, AREAL_EINVAL, -1, "at most 64 stop_token_ids");
    if (cb == NULL || cb->next_prompt == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "the rollout controller needs a source");
    areal_rollout_ctl *c = calloc(1, sizeof *c);
    if (c == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the rollout controller");
    c->cfg = *cfg;
    c->cb = *cb;
    if (cfg->sampling.n_stop > 0)
        memcpy(c->stop_ids, cfg->sampling.stop_token_ids,
               (size_t)cfg->sampling.n_stop * sizeof *c->stop_ids);
    c->cfg.sampling.stop_token_ids = c->stop_ids;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv_work, NULL);
    pthread_cond_init(&c->cv_done, NULL);
    pthread_cond_init(&c->cv_dispatch, NULL);
    pthread_cond_init(&c->cv_resume, NULL);
    areal_staleness_init(&c->st, cfg->max_concurrent, cfg->batch_size, cfg->eta);
    if (cfg->start_version > 0) {
        c->version = cfg->start_version;
        areal_staleness_on_version_recovered(&c->st, cfg->start_version);
    }
    int rc = set_servers_locked(c, addrs, NULL, n, false, err);
    rc = rc < 0 ? -rc : AREAL_OK;
    c->workers = calloc((size_t)cfg->n_workers, sizeof *c->workers);
    if (rc == AREAL_OK && c->workers == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for rollout workers");
    for (int i = 0; rc == AREAL_OK && i < cfg->n_workers; i++) {
        if (pthread_create(&c->workers[i], NULL, worker_main, c) != 0)
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "cannot start a rollout worker thread");
        else
            c->n_started++;
    }
    if (rc == AREAL_OK && pthread_create(&c->dispatcher, NULL, dispatcher_main, c) != 0)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "cannot start the rollout dispatcher");
    if (rc != AREAL_OK) {
        pthread_mutex_lock(&c->mu);
        c->stopping = true;
        pthread_cond_broadcast(&c->cv_work);
        pthread_cond_broadcast(&c->cv_resume);
        pthread_mutex_unlock(&c->mu);
        for (int i = 0; i < c->n_started; i++)
            pthread_join(c->workers[i], NULL);
        free(c->workers);
        free(c);
        return rc;
    }
    *out = c;
    return AREAL_OK;
}

void areal_rollout_ctl_stop(areal_rollout_ctl *c) {
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    pthread_cond_broadcast(&c->cv_work);
    pthread_cond_broadcast(&c->cv_resume);
    pthread_cond_broadcast(&c->cv_dispatch);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->dispatcher, NULL);
    for (int i = 0; i < c->n_started; i++)
        pthread_join(c->workers[i], NULL);
    /* Jobs left in the queue: free them and their tasks (each task once: by its last job). */
    for (job *j = c->q_head; j;) {
        job *next = j->next;
        if (j->t && --j->t->remaining == 0) {
            areal_group_free(&j->t->g);
            free(j->t->prompt);
            free(j->t);
        }
        free(j);
        j = next;
    }
    for (int i = 0; i < c->n_done; i++)
        areal_group_free(&c->done[i]);
    free(c->done);
    for (int i = 0; i < AREAL_ROLLOUT_MAX_SERVERS; i++)
        areal_sgl_client_free(c->ctl_clients[i]);
    free(c->workers);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv_work);
    pthread_cond_destroy(&c->cv_done);
    pthread_cond_destroy(&c->cv_dispatch);
    pthread_cond_destroy(&c->cv_resume);
    free(c);
}

int areal_rollout_ctl_wait(areal_rollout_ctl *c, areal_group *out, int n, double timeout_s,
                           areal_error *err) {
    double deadline = now_s() + timeout_s;
    pthread_mutex_lock(&c->mu);
    while (c->n_done < n) {
        if (c->fatal) {
            areal_error e = c->fatal_err;
            pthread_mutex_unlock(&c->mu);
            return areal_error_set(err, AREAL_EINVAL, -1, "rollout requests are refused: %s",
                                   e.msg);
        }
        if (c->exhausted && c->st.running == 0) {
            int have = c->n_done;
            pthread_mutex_unlock(&c->mu);
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "the prompt source is exhausted: %d of %d groups", have, n);
        }
        double left = deadline - now_s();
        if (left <= 0) {
            int have = c->n_done;
            pthread_mutex_unlock(&c->mu);
            return areal_error_set(err, AREAL_ERANGE, -1,
                                   "timed out after %.0f s with %d of %d groups", timeout_s, have,
                                   n);
        }
        timed_wait(&c->cv_done, &c->mu, left < 0.5 ? left : 0.5);
    }
    memcpy(out, c->done, (size_t)n * sizeof *out);
    memmove(c->done, c->done + n, (size_t)(c->n_done - n) * sizeof *c->done);
    c->n_done -= n;
    pthread_mutex_unlock(&c->mu);
    return AREAL_OK;
}

/* POSTs path to the present servers (only_stale: those that need a sync). A server that
 * cannot be reached is marked needs_sync and skipped (it is down; a later sync catches it
 * up); an answer refusing the call is an error. A successful weight update clears it. */
/*
 * A server caught up outside this trainer's pause may still be paused: a trainer killed
 * between its /pause_generation and /continue_generation leaves it so, and its queued
 * requests never run (e2e w_rl_world: the restarted gang's first /generate timed out after
 * 120 s on its only server). Inside a pause the resume broadcast that follows unpauses it.
 * Called unlocked, from the loop's thread (the one that owns ctl_clients).
 */
static void resume_caught_up(areal_rollout_ctl *c, int i, const char *addr) {
    areal_error e;
    int rc = c->ctl_clients[i]
                 ? AREAL_OK
                 : areal_sgl_client_create(addr, c->cfg.request_timeout_s, &c->ctl_clients[i], &e);
    if (rc == AREAL_OK)
        rc = areal_sgl_post(c->ctl_clients[i], "/continue_generation", NULL, NULL, &e);
    if (rc != AREAL_OK)
        logf_(c, "rollout server %s: %s", addr, e.msg);
}

static int post_all(areal_rollout_ctl *c, const char *path, json_t *body, bool only_stale,
                    areal_error *err) {
    char addrs[AREAL_ROLLOUT_MAX_SERVERS][128];
    bool want[AREAL_ROLLOUT_MAX_SERVERS];
    bool is_update = strncmp(path, "/update_weights", 15) == 0;
    pthread_mutex_lock(&c->mu);
    int n = c->n_servers;
    for (int i = 0; i < n; i++) {
        memcpy(addrs[i], c->servers[i].addr, sizeof addrs[i]);
        want[i] = c->servers[i].present && (!only_stale || c->servers[i].needs_sync);
    }
    pthread_mutex_unlock(&c->mu);
    int first = AREAL_OK;
    for (int i = 0; i < n; i++) {
        if (!want[i])
            continue;
        areal_error e;
        int rc = c->ctl_clients[i] ? AREAL_OK
                                   : areal_sgl_client_create(addrs[i], c->cfg.request_timeout_s,
                                                             &c->ctl_clients[i], &e);
        if (rc == AREAL_OK)
            rc = areal_sgl_post(c->ctl_clients[i], path, body, NULL, &e);
        pthread_mutex_lock(&c->mu);
        bool was_stale = c->servers[i].needs_sync, paused = c->paused;
        if (rc == AREAL_EIO)
            c->servers[i].needs_sync = true;
        else if (rc == AREAL_OK && is_update)
            c->servers[i].needs_sync = c->servers[i].probe = false;
        pthread_cond_broadcast(&c->cv_resume);
        pthread_mutex_unlock(&c->mu);
        if (rc == AREAL_EIO && !was_stale)
            logf_(c, "%s; it gets no requests until a weight update reaches it", e.msg);
        else if (rc == AREAL_OK && is_update && was_stale)
            logf_(c, "rollout server %s has the current weights again", addrs[i]);
        if (rc == AREAL_OK && is_update && was_stale && !paused)
            resume_caught_up(c, i, addrs[i]);
        if (rc != AREAL_OK && rc != AREAL_EIO && first == AREAL_OK) {
            first = rc;
            if (err)
                *err = e;
        }
    }
    return first;
}

int areal_rollout_ctl_broadcast(areal_rollout_ctl *c, const char *path, json_t *body,
                                areal_error *err) {
    return post_all(c, path, body, false, err);
}

int areal_rollout_ctl_sync_stale(areal_rollout_ctl *c, const char *path, json_t *body,
                                 areal_error *err) {
    return post_all(c, path, body, true, err);
}

int areal_rollout_ctl_pause(areal_rollout_ctl *c, areal_error *err) {
    pthread_mutex_lock(&c->mu);
    c->paused = true;
    pthread_mutex_unlock(&c->mu);
    return areal_rollout_ctl_broadcast(c, "/pause_generation", NULL, err);
}

int areal_rollout_ctl_resume(areal_rollout_ctl *c, areal_error *err) {
    int rc = areal_rollout_ctl_broadcast(c, "/continue_generation", NULL, err);
    pthread_mutex_lock(&c->mu);
    c->paused = false;
    pthread_cond_broadcast(&c->cv_resume);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void areal_rollout_ctl_set_version(areal_rollout_ctl *c, long version) {
    pthread_mutex_lock(&c->mu);
    c->version = version;
    pthread_cond_signal(&c->cv_dispatch);
    pthread_mutex_unlock(&c->mu);
}

long areal_rollout_ctl_version(areal_rollout_ctl *c) {
    pthread_mutex_lock(&c->mu);
    long v = c->version;
    pthread_mutex_unlock(&c->mu);
    return v;
}

areal_staleness areal_rollout_ctl_counters(areal_rollout_ctl *c) {
    pthread_mutex_lock(&c->mu);
    areal_staleness s = c->st;
    pthread_mutex_unlock(&c->mu);
    return s;
}

void areal_rollout_ctl_recover(areal_rollout_ctl *c, long version) {
    pthread_mutex_lock(&c->mu);
    c->version = version;
    areal_staleness_on_version_recovered(&c->st, version);
    pthread_cond_signal(&c->cv_dispatch);
    pthread_mutex_unlock(&c->mu);
}

long areal_rollout_ctl_stale_answers(areal_rollout_ctl *c) {
    pthread_mutex_lock(&c->mu);
    long n = c->stale_answers;
    pthread_mutex_unlock(&c->mu);
    return n;
}

void areal_rollout_ctl_servers(areal_rollout_ctl *c, int *known, int *up) {
    pthread_mutex_lock(&c->mu);
    double t = now_s();
    int k = 0, u = 0;
    for (int i = 0; i < c->n_servers; i++)
        if (c->servers[i].present) {
            k++;
            u += c->servers[i].down_until <= t;
        }
    pthread_mutex_unlock(&c->mu);
    *known = k;
    *up = u;
}

int areal_rollout_ctl_eval(areal_rollout_ctl *c, const areal_rollout_prompt *prompts, int n,
                           const areal_sgl_sampling *s, float *rewards, areal_error *err) {
    if (n <= 0)
        return AREAL_OK;
    eval_batch eb = {n, rewards, prompts, *s};
    pthread_mutex_lock(&c->mu);
    int queued = 0;
    for (int i = 0; i < n; i++) {
        job *j = calloc(1, sizeof *j);
        if (j == NULL)
            break;
        j->eb = &eb;
        j->sample = i;
        push_job(c, j);
        queued++;
    }
    eb.remaining -= n - queued;
    pthread_cond_broadcast(&c->cv_work);
    /* every job of eb must be done before eb (on this stack) goes: failed ones count too */
    while (eb.remaining > 0 && !c->stopping)
        timed_wait(&c->cv_done, &c->mu, 0.5);
    bool fatal = c->fatal, cancel = cancelled(c);
    areal_error fe = c->fatal_err;
    pthread_mutex_unlock(&c->mu);
    if (fatal)
        return areal_error_set(err, AREAL_EINVAL, -1, "rollout requests are refused: %s", fe.msg);
    if (cancel)
        return areal_error_set(err, AREAL_ERANGE, -1, "evaluation cancelled by a stop");
    if (queued < n)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for evaluation requests");
    return AREAL_OK;
}

int areal_rollout_ctl_addrs(areal_rollout_ctl *c, char (*addrs)[128], bool *stale, int cap) {
    pthread_mutex_lock(&c->mu);
    int k = 0;
    for (int i = 0; i < c->n_servers && k < cap; i++)
        if (c->servers[i].present) {
            memcpy(addrs[k], c->servers[i].addr, sizeof addrs[k]);
            if (stale)
                stale[k] = c->servers[i].needs_sync;
            k++;
        }
    pthread_mutex_unlock(&c->mu);
    return k;
}

void areal_rollout_ctl_mark_synced(areal_rollout_ctl *c, const char *addr, bool synced,
                                   const char *why) {
    pthread_mutex_lock(&c->mu);
    bool changed = false, paused = c->paused;
    int at = -1;
    for (int i = 0; i < c->n_servers; i++)
        if (strcmp(c->servers[i].addr, addr) == 0) {
            changed |= c->servers[i].needs_sync == synced;
            c->servers[i].needs_sync = !synced;
            if (synced) /* it holds the current weights: no version check needed */
                c->servers[i].probe = false;
            at = i;
        }
    pthread_cond_broadcast(&c->cv_resume);
    pthread_mutex_unlock(&c->mu);
    if (changed && synced && !paused && at >= 0)
        resume_caught_up(c, at, addr);
    if (changed && synced)
        logf_(c, "rollout server %s has the current weights again", addr);
    else if (changed)
        logf_(c,
              "rollout server %s missed a weight update (%s); it gets no requests until one "
              "reaches it",
              addr, why ? why : "no answer");
}
