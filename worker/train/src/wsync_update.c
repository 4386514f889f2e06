/*
 * wsync_update.c - see areal/train/wsync_shard.h: the trainer's one call for
 * a sharded update. Rank 0 drives the servers over HTTP (one client per
 * server for the whole update, each bucket's POSTs on short-lived threads so
 * every server can wait in the transfer at once) and roots its own buckets
 * on a thread of its own; the other ranks only root theirs.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/train/sgl_client.h"
#include "areal/train/wsync_shard.h"
#include "wsync_internal.h"

typedef struct post {
    areal_sgl_client *c;
    const char *path;
    json_t *body; /* borrowed */
    int rc;
    areal_error e;
    pthread_t t;
    bool started;
} post;

static void *post_main(void *arg) {
    post *p = arg;
    json_t *ans = NULL;
    p->rc = areal_sgl_post(p->c, p->path, p->body, &ans, &p->e);
    /* SGLang's weight calls may answer 200 {success: false} */
    if (p->rc == AREAL_OK && json_is_false(json_object_get(ans, "success"))) {
        const char *m = json_string_value(json_object_get(ans, "message"));
        p->rc = areal_error_set(&p->e, AREAL_EINVAL, -1, "%s", m ? m : "success: false");
    }
    json_decref(ans);
    return NULL;
}

static void post_start(post *p) {
    p->started = pthread_create(&p->t, NULL, post_main, p) == 0;
    if (!p->started)
        p->rc = areal_error_set(&p->e, AREAL_ENOMEM, -1, "cannot start a thread");
}

/* Waits for n posts; the first failure goes to err after `what` (the client's message
 * names the server). */
static int post_wait_all(post *ps, int n, const char *what, areal_error *err) {
    int rc = AREAL_OK;
    for (int i = 0; i < n; i++) {
        if (ps[i].started)
            pthread_join(ps[i].t, NULL);
        if (ps[i].rc != AREAL_OK && rc == AREAL_OK)
            rc = areal_error_set(err, ps[i].rc, -1, "%s: %s", what, ps[i].e.msg);
    }
    return rc;
}

static int clients(const areal_wsync_target *t, areal_sgl_client **c, areal_error *err) {
    double to = t->http_timeout_s > 0 ? t->http_timeout_s : 120;
    for (int i = 0; i < t->n; i++) {
        int rc = areal_sgl_client_create(t->addrs[i], to, &c[i], err);
        if (rc != AREAL_OK)
            return rc;
    }
    return AREAL_OK;
}

static void clients_free(areal_sgl_client **c, int n) {
    for (int i = 0; i < n; i++)
        areal_sgl_client_free(c[i]);
}

static const char *group_of(const areal_wsync_target *t) {
    return t->group ? t->group : "update_weight_group";
}

int areal_wsync_join_servers(areal_wsync *w, int n_senders, const areal_wsync_target *t,
                             int timeout_ms, areal_error *err) {
    if (t == NULL || t->n < 1 || n_senders < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "a sharded update needs n_senders >= 1 and at least one server");
    areal_sgl_client **c = calloc((size_t)t->n, sizeof *c);
    post *ps = calloc((size_t)t->n, sizeof *ps);
    int rc = c && ps ? clients(t, c, err) : areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    int world = n_senders + t->n;
    for (int i = 0; rc == AREAL_OK && i < t->n; i++) {
        ps[i] = (post){.c = c[i], .path = "/init_weights_update_group"};
        ps[i].body = json_pack("{s:s,s:i,s:i,s:i,s:s,s:s}", "master_address", w->host,
                               "master_port", w->port, "rank_offset", n_senders + i, "world_size",
                               world, "group_name", group_of(t), "backend", "nccl");
        post_start(&ps[i]);
    }
    if (rc == AREAL_OK) {
        int jrc = areal_wsync_join_rank(w, 0, world, group_of(t), timeout_ms, err);
        areal_error pe;
        int prc = post_wait_all(ps, t->n, "/init_weights_update_group", &pe);
        rc = prc != AREAL_OK ? prc : jrc;
        if (prc != AREAL_OK)
            *err = pe;
    }
    for (int i = 0; ps && i < t->n; i++)
        json_decref(ps[i].body);
    if (c)
        clients_free(c, t->n);
    free(c);
    free(ps);
    return rc;
}

typedef struct sender {
    areal_wsync *w;
    const areal_wsync_plan *p;
    const void *const *local;
    size_t sent;
    int rc;
    areal_error e;
} sender;

static void *sender_main(void *arg) {
    sender *s = arg;
    s->rc = areal_wsync_send_sharded(s->w, s->p, s->local, &s->sent, &s->e);
    return NULL;
}

int areal_wsync_update_sharded(areal_wsync *w, const areal_wsync_plan *p, const void *const *local,
                               const areal_wsync_target *t, size_t *sent_bytes, areal_error *err) {
    if (w->rank != 0)
        return areal_wsync_send_sharded(w, p, local, sent_bytes, err);
    if (t == NULL || t->n < 1 || t->n != w->world - p->n_senders)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "rank 0 needs the %d servers of the world (target.n = %d)",
                               w->world - p->n_senders, t ? t->n : 0);
    areal_sgl_client **c = calloc((size_t)t->n, sizeof *c);
    post *ps = calloc((size_t)t->n, sizeof *ps);
    int rc = c && ps ? clients(t, c, err) : areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    sender snd = {.w = w, .p = p, .local = local};
    pthread_t st;
    bool started = false;
    if (rc == AREAL_OK) {
        started = pthread_create(&st, NULL, sender_main, &snd) == 0;
        if (!started)
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "cannot start the sender thread");
    }
    for (size_t b = 0; rc == AREAL_OK && b < p->n_buckets; b++) {
        json_t *body = wsync_plan_bucket_obj(p, b, group_of(t), t->abort_all, t->version);
        if (body == NULL) {
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
            break;
        }
        for (int i = 0; i < t->n; i++) {
            ps[i] = (post){.c = c[i], .path = "/update_weights_from_distributed", .body = body};
            post_start(&ps[i]);
        }
        char what[96];
        snprintf(what, sizeof what, "bucket %zu of %zu (root %d)", b, p->n_buckets,
                 p->buckets[b].root);
        rc = post_wait_all(ps, t->n, what, err);
        json_decref(body);
    }
    if (started) {
        /* after a refused bucket the servers may keep the group: this thread's later
         * buckets then wait out the group timeout (the caller closes the world) */
        pthread_join(st, NULL);
        if (rc == AREAL_OK && snd.rc != AREAL_OK) {
            rc = snd.rc;
            *err = snd.e;
        }
    }
    if (sent_bytes)
        *sent_bytes = snd.sent;
    if (c)
        clients_free(c, t->n);
    free(c);
    free(ps);
    return rc;
}
