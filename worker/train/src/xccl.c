/*
 * xccl.c - see areal/train/xccl.h: the xccl weight-update mode over the
 * sender of wsync.h and the controller's servers.
 *
 * The HTTP side uses its own clients, not the controller's: a bucket's POSTs
 * must all be out at once (each answers only when its server holds the
 * bucket, which needs the broadcast, which needs every receiver), so each
 * runs on a thread of its own, and the controller's clients belong to its
 * trainer-thread calls. Road not taken: pipelining bucket k+1's POSTs with
 * bucket k's broadcast (AReaL keeps one bucket pending): on CPU the copy into
 * the staging model, not the wire, is the cost, and one bucket in flight
 * keeps a failure's blame on one bucket.
 */
#include "areal/train/xccl.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/train/sgl_client.h"
#include "areal/train/wsync.h"

#define MAXS AREAL_ROLLOUT_MAX_SERVERS

struct areal_xccl {
    char host[256], group[64];
    areal_xccl_cfg cfg; /* host and group point at the copies above */
    areal_wsync *w;     /* NULL: no group (never built, or broken) */
    char members[MAXS][128];
    int n_members;
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void say(const areal_xccl *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const areal_xccl *x, const char *fmt, ...) {
    if (x->cfg.log == NULL)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    x->cfg.log(x->cfg.log_ctx, line);
}

/* ---- one POST per server, concurrently ------------------------------------------- */

typedef struct post {
    const char *addr, *path;
    json_t *body; /* borrowed */
    double timeout_s;
    int rc;
    areal_error e;
    pthread_t t;
    bool started;
} post;

static void *post_main(void *arg) {
    post *p = arg;
    areal_sgl_client *c = NULL;
    json_t *ans = NULL;
    p->rc = areal_sgl_client_create(p->addr, p->timeout_s, &c, &p->e);
    if (p->rc == AREAL_OK)
        p->rc = areal_sgl_post(c, p->path, p->body, &ans, &p->e);
    /* SGLang's weight calls may answer 200 {success: false} */
    if (p->rc == AREAL_OK && json_is_false(json_object_get(ans, "success"))) {
        const char *m = json_string_value(json_object_get(ans, "message"));
        p->rc = areal_error_set(&p->e, AREAL_EINVAL, -1, "rollout server %s: %s: %s", p->addr,
                                p->path, m ? m : "success: false");
    }
    json_decref(ans);
    areal_sgl_client_free(c);
    return NULL;
}

static void posts_start(post *p, char (*addrs)[128], int n, const char *path, json_t **bodies,
                        double timeout_s) {
    for (int i = 0; i < n; i++) {
        p[i] = (post){.addr = addrs[i], .path = path, .body = bodies[i], .timeout_s = timeout_s};
        p[i].started = pthread_create(&p[i].t, NULL, post_main, &p[i]) == 0;
        if (!p[i].started)
            p[i].rc = areal_error_set(&p[i].e, AREAL_ENOMEM, -1, "cannot start a thread");
    }
}

/* Joins the threads; returns the index of the first failure, or -1. */
static int posts_wait(post *p, int n) {
    int bad = -1;
    for (int i = 0; i < n; i++) {
        if (p[i].started)
            pthread_join(p[i].t, NULL);
        if (p[i].rc != AREAL_OK && bad < 0)
            bad = i;
    }
    return bad;
}

/* ---- the group ------------------------------------------------------------------- */

static void group_drop(areal_xccl *x) {
    areal_wsync_close(x->w);
    x->w = NULL;
    x->n_members = 0;
}

/* Builds the group over addrs[0..n): listen, init on every server while joining as rank 0. */
static int group_build(areal_xccl *x, char (*addrs)[128], int n, areal_error *err) {
    group_drop(x);
    int rc = areal_wsync_listen(x->host, 0, &x->w, err);
    if (rc != AREAL_OK)
        return rc;
    json_t *bodies[MAXS];
    for (int i = 0; i < n; i++)
        bodies[i] = json_pack("{s:s,s:i,s:i,s:i,s:s,s:s}", "master_address", x->host, "master_port",
                              areal_wsync_port(x->w), "rank_offset", 1 + i, "world_size", n + 1,
                              "group_name", x->group, "backend", "nccl");
    post p[MAXS];
    posts_start(p, addrs, n, "/init_weights_update_group", bodies, x->cfg.http_timeout_s);
    rc = areal_wsync_join(x->w, n + 1, x->group, x->cfg.timeout_ms, err);
    if (rc != AREAL_OK)
        group_drop(x); /* servers still joining see the store go and fail */
    int bad = posts_wait(p, n);
    for (int i = 0; i < n; i++)
        json_decref(bodies[i]);
    if (rc == AREAL_OK && bad >= 0) {
        group_drop(x);
        rc = areal_error_set(err, p[bad].rc == AREAL_ENOMEM ? AREAL_ENOMEM : AREAL_EIO, -1, "%s",
                             p[bad].e.msg);
    } else if (rc != AREAL_OK && bad >= 0 && err) {
        /* the server's own reason is the better one than the join's timeout */
        areal_error_set(err, AREAL_EIO, -1, "%s", p[bad].e.msg);
    }
    if (rc == AREAL_OK) {
        memcpy(x->members, addrs, sizeof *addrs * (size_t)n);
        x->n_members = n;
    }
    return rc;
}

static bool same_members(const areal_xccl *x, char (*addrs)[128], int n) {
    if (x->w == NULL || n != x->n_members)
        return false;
    for (int i = 0; i < n; i++)
        if (strcmp(x->members[i], addrs[i]) != 0)
            return false;
    return true;
}

static bool healthy(const char *addr) {
    areal_sgl_client *c = NULL;
    int rc = areal_sgl_client_create(addr, 5.0, &c, NULL);
    if (rc == AREAL_OK)
        rc = areal_sgl_health(c, NULL);
    areal_sgl_client_free(c);
    return rc == AREAL_OK;
}

/* The controller's servers (only_stale: those needing a sync) that answer /health. */
static int live_servers(areal_rollout_ctl *ctl, bool only_stale, char (*out)[128]) {
    char all[MAXS][128];
    bool stale[MAXS];
    int n = areal_rollout_ctl_addrs(ctl, all, stale, MAXS), k = 0;
    for (int i = 0; i < n; i++) {
        if (only_stale && !stale[i])
            continue;
        if (healthy(all[i]))
            memcpy(out[k++], all[i], sizeof all[i]);
        else if (!only_stale)
            areal_rollout_ctl_mark_synced(ctl, all[i], false, "no answer to GET /health");
    }
    return k;
}

/* ---- buckets --------------------------------------------------------------------- */

static size_t tensor_bytes(const areal_tensor_spec *s) {
    size_t n = 1;
    for (int k = 0; k < s->ndim; k++)
        n *= (size_t)s->shape[k];
    return n * sizeof(float);
}

/*
 * Sends every tensor of m over the current group. On a failure returns it with
 * the failing server's address in who[128] ("": the broadcast itself) and the
 * bucket index in *at.
 */
static int send_all(areal_xccl *x, const areal_model *m, long version, bool abort_all,
                    areal_xccl_stats *st, char *who, int *at, areal_error *err) {
    who[0] = '\0';
    *at = -1;
    size_t limit = x->cfg.bucket_bytes;
    areal_wsync_tensor *t = calloc(m->n_specs ? m->n_specs : 1, sizeof *t);
    if (t == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    for (size_t i = 0; i < m->n_specs; i++)
        t[i] = (areal_wsync_tensor){.name = m->specs[i].name,
                                    .dtype = AREAL_DT_F32,
                                    .ndim = m->specs[i].ndim,
                                    .shape = m->specs[i].shape,
                                    .data = m->params + m->offset[i]};
    char vs[32];
    snprintf(vs, sizeof vs, "%ld", version);
    int rc = AREAL_OK, b = 0;
    for (size_t first = 0; rc == AREAL_OK && first < m->n_specs; b++) {
        size_t end = first + 1, bytes = tensor_bytes(&m->specs[first]);
        while (end < m->n_specs && bytes + tensor_bytes(&m->specs[end]) <= limit)
            bytes += tensor_bytes(&m->specs[end++]);
        char *js = NULL;
        rc = areal_wsync_bucket_json(t + first, end - first, x->group, abort_all, vs, &js, err);
        json_t *body = rc == AREAL_OK ? json_loads(js, 0, NULL) : NULL;
        free(js);
        if (rc == AREAL_OK && body == NULL)
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
        if (rc != AREAL_OK)
            break;
        json_t *bodies[MAXS];
        for (int i = 0; i < x->n_members; i++)
            bodies[i] = body;
        post p[MAXS];
        posts_start(p, x->members, x->n_members, "/update_weights_from_distributed", bodies,
                    x->cfg.http_timeout_s);
        if (x->cfg.on_bucket)
            x->cfg.on_bucket(x->cfg.hook_ctx, b);
        rc = areal_wsync_send(x->w, t + first, end - first, err);
        if (rc != AREAL_OK) {
            /* close before waiting: receivers blocked on this group fail now, not at the
             * comm timeout */
            areal_wsync_close(x->w);
            x->w = NULL;
        }
        int bad = posts_wait(p, x->n_members);
        json_decref(body);
        *at = b;
        if (bad >= 0) {
            snprintf(who, 128, "%s", x->members[bad]);
            /* a dead server's missing answer says more than the broadcast's error */
            if (rc == AREAL_OK || p[bad].rc == AREAL_EIO) {
                rc = p[bad].rc == AREAL_ENOMEM ? AREAL_ENOMEM : AREAL_EIO;
                if (err)
                    areal_error_set(err, rc, -1, "%s", p[bad].e.msg);
            }
        }
        if (rc == AREAL_OK) {
            st->bytes += bytes;
            st->buckets++;
        }
        first = end;
    }
    free(t);
    return rc;
}

/* One update to the live servers of ctl (only_stale: the catch-up set). */
static int push(areal_xccl *x, areal_rollout_ctl *ctl, bool only_stale, const areal_model *m,
                long version, bool abort_all, areal_xccl_stats *st, areal_error *err) {
    double t0 = now_s();
    areal_xccl_stats local;
    if (st == NULL)
        st = &local;
    memset(st, 0, sizeof *st);
    int rc = AREAL_OK;
    for (int attempt = 1; attempt <= 2; attempt++) {
        st->attempts = attempt;
        st->bytes = 0;
        st->buckets = 0;
        char live[MAXS][128];
        int n = live_servers(ctl, only_stale, live);
        if (n == 0) {
            rc = AREAL_OK; /* nobody to send to: they are marked and catch up later */
            st->servers = 0;
            break;
        }
        char who[128] = "";
        int at = -1;
        rc = same_members(x, live, n) ? AREAL_OK : group_build(x, live, n, err);
        if (rc == AREAL_OK)
            rc = send_all(x, m, version, abort_all, st, who, &at, err);
        if (rc == AREAL_OK) {
            for (int i = 0; i < n; i++)
                areal_rollout_ctl_mark_synced(ctl, live[i], true, NULL);
            st->servers = n;
            break;
        }
        group_drop(x);
        if (rc == AREAL_ENOMEM)
            break;
        if (attempt == 1) {
            char where[200];
            if (at >= 0)
                snprintf(where, sizeof where, "at bucket %d%s%s%s", at, who[0] ? " (server " : "",
                         who, who[0] ? ")" : "");
            else
                snprintf(where, sizeof where, "joining the group");
            say(x,
                "xccl weight update to version %ld failed %s: %s; rebuilding group %s over "
                "the servers that answer and resending",
                version, where, err ? err->msg : "", x->group);
        }
    }
    st->seconds = now_s() - t0;
    if (rc != AREAL_OK && rc != AREAL_ENOMEM && err) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        areal_error_set(err, AREAL_EIO, -1,
                        "xccl weight update to version %ld failed twice (group %s): %s", version,
                        x->group, msg);
        rc = AREAL_EIO;
    }
    return rc;
}

/* ---- public ---------------------------------------------------------------------- */

static int make(const areal_xccl_cfg *cfg, const char *suffix, areal_xccl **out, areal_error *err) {
    areal_xccl *x = calloc(1, sizeof *x);
    if (x == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    x->cfg = *cfg;
    snprintf(x->host, sizeof x->host, "%s", cfg->host ? cfg->host : "127.0.0.1");
    snprintf(x->group, sizeof x->group, "%s%s", cfg->group ? cfg->group : "update_weight_group",
             suffix);
    x->cfg.host = x->host;
    x->cfg.group = x->group;
    if (x->cfg.bucket_bytes == 0)
        x->cfg.bucket_bytes = (size_t)1024 << 20;
    if (x->cfg.timeout_ms <= 0)
        x->cfg.timeout_ms = 30000;
    if (x->cfg.http_timeout_s <= 0)
        x->cfg.http_timeout_s = 120;
    *out = x;
    return AREAL_OK;
}

int areal_xccl_open(const areal_xccl_cfg *cfg, areal_rollout_ctl *ctl, areal_xccl **out,
                    areal_error *err) {
    *out = NULL;
    areal_xccl *x = NULL;
    int rc = make(cfg, "", &x, err);
    if (rc != AREAL_OK)
        return rc;
    char live[MAXS][128];
    char all[MAXS][128];
    int n_all = areal_rollout_ctl_addrs(ctl, all, NULL, MAXS), n = 0;
    for (int i = 0; i < n_all; i++)
        if (healthy(all[i]))
            memcpy(live[n++], all[i], sizeof all[i]);
    if (n > 0 && (rc = group_build(x, live, n, err)) != AREAL_OK) {
        areal_xccl_close(x);
        return rc;
    }
    say(x, "xccl weight sync: group %s with %d of %d servers, buckets of %zu bytes", x->group, n,
        n_all, x->cfg.bucket_bytes);
    *out = x;
    return AREAL_OK;
}

int areal_xccl_update(areal_xccl *x, areal_rollout_ctl *ctl, const areal_model *m, long version,
                      bool abort_all, areal_xccl_stats *st, areal_error *err) {
    return push(x, ctl, false, m, version, abort_all, st, err);
}

int areal_xccl_catch_up(areal_xccl *x, areal_rollout_ctl *ctl, const areal_model *m, long version,
                        areal_error *err) {
    bool stale[MAXS];
    char all[MAXS][128];
    int n = areal_rollout_ctl_addrs(ctl, all, stale, MAXS), k = 0;
    for (int i = 0; i < n; i++)
        k += stale[i];
    if (k == 0)
        return AREAL_OK;
    areal_xccl *once = NULL;
    int rc = make(&x->cfg, "_catchup", &once, err);
    if (rc == AREAL_OK) {
        areal_xccl_stats st;
        rc = push(once, ctl, true, m, version, false, &st, err);
        if (rc == AREAL_OK && st.servers > 0)
            say(x, "xccl: %d server(s) caught up to version %ld in %.3f s", st.servers, version,
                st.seconds);
    }
    areal_xccl_close(once);
    return rc;
}

void areal_xccl_close(areal_xccl *x) {
    if (x == NULL)
        return;
    areal_wsync_close(x->w);
    free(x);
}
