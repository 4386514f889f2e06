/*
 * xccl_shard.c - see areal/train/xccl_shard.h: rank 0's shard-direct xccl
 * update and the followers' part in it.
 *
 * The message to a follower (CMD_WSYNC, dp.h) is five int64 {rejoin, port,
 * world, timeout_ms, 0} then the store's host, NUL-padded to 256 bytes.
 */
#include "areal/train/xccl_shard.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/train/dp.h"
#include "areal/train/sgl_client.h"
#include "areal/train/trainer_par.h"
#include "areal/train/wsync.h"
#include "areal/train/wsync_shard.h"

#define MAXS      AREAL_ROLLOUT_MAX_SERVERS
#define MSG_BYTES (5 * 8 + 256)

struct areal_xccl_shard {
    areal_xccl_cfg cfg;
    char host[256], group[80];
    areal_wsync_plan *plan;
    const void **local;
    areal_wsync *w; /* NULL: no world (never built, or closed after a failure) */
    char members[MAXS][128];
    int n_members;
};

int areal_xccl_shard_open(const areal_xccl_cfg *cfg, const areal_trainer *t, areal_xccl_shard **out,
                          areal_error *err) {
    *out = NULL;
    if (t->par == NULL || !areal_train_par_sharded(t->par))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "shard-direct xccl needs a megatron layout with t > 1 or p > 1");
    areal_xccl_shard *x = calloc(1, sizeof *x);
    if (x == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    x->cfg = *cfg;
    snprintf(x->host, sizeof x->host, "%s", cfg->host ? cfg->host : "127.0.0.1");
    snprintf(x->group, sizeof x->group, "%s_shard",
             cfg->group ? cfg->group : "update_weight_group");
    x->cfg.host = x->host;
    x->cfg.group = x->group;
    x->cfg.log = NULL; /* the caller's to log */
    if (x->cfg.bucket_bytes == 0)
        x->cfg.bucket_bytes = (size_t)1024 << 20;
    if (x->cfg.timeout_ms <= 0)
        x->cfg.timeout_ms = 30000;
    if (x->cfg.http_timeout_s <= 0)
        x->cfg.http_timeout_s = 120;
    int rc = areal_train_par_wsync_plan(t->par, x->cfg.bucket_bytes, &x->plan, &x->local, err);
    if (rc != AREAL_OK) {
        areal_xccl_shard_close(x);
        return rc;
    }
    *out = x;
    return AREAL_OK;
}

size_t areal_xccl_shard_plan_bytes(const areal_xccl_shard *x) {
    return x->plan->bytes;
}

static void world_drop(areal_xccl_shard *x) {
    areal_wsync_close(x->w);
    x->w = NULL;
    x->n_members = 0;
}

void areal_xccl_shard_close(areal_xccl_shard *x) {
    if (x == NULL)
        return;
    areal_wsync_close(x->w);
    areal_wsync_plan_free(x->plan);
    free(x->local);
    free(x);
}

static bool healthy(const char *addr) {
    areal_sgl_client *c = NULL;
    int rc = areal_sgl_client_create(addr, 5.0, &c, NULL);
    if (rc == AREAL_OK)
        rc = areal_sgl_health(c, NULL);
    areal_sgl_client_free(c);
    return rc == AREAL_OK;
}

static void put64(uint8_t *m, int k, int64_t v) {
    memcpy(m + 8 * k, &v, 8);
}

static int64_t get64(const uint8_t *m, int k) {
    int64_t v;
    memcpy(&v, m + 8 * k, 8);
    return v;
}

int areal_xccl_shard_update(areal_xccl_shard *x, areal_pg *dp, areal_rollout_ctl *ctl, long version,
                            areal_xccl_stats *st, areal_error *err) {
    areal_xccl_stats local;
    if (st == NULL)
        st = &local;
    memset(st, 0, sizeof *st);
    st->attempts = 1;
    char all[MAXS][128], live[MAXS][128];
    int n_all = areal_rollout_ctl_addrs(ctl, all, NULL, MAXS), n = 0;
    for (int i = 0; i < n_all; i++) {
        if (healthy(all[i]))
            memcpy(live[n++], all[i], sizeof all[i]);
        else
            areal_rollout_ctl_mark_synced(ctl, all[i], false, "no answer to GET /health");
    }
    if (n == 0)
        return AREAL_OK; /* nobody to send to: they are marked and catch up later */
    bool rejoin = x->w == NULL || n != x->n_members;
    for (int i = 0; !rejoin && i < n; i++)
        rejoin = strcmp(x->members[i], live[i]) != 0;
    int S = dp != NULL ? areal_pg_size(dp) : 1, rc = AREAL_OK;
    if (rejoin) {
        world_drop(x);
        rc = areal_wsync_listen(x->host, 0, &x->w, err);
    }
    uint8_t msg[MSG_BYTES];
    memset(msg, 0, sizeof msg);
    put64(msg, 0, rejoin);
    put64(msg, 1, x->w ? areal_wsync_port(x->w) : 0);
    put64(msg, 2, S + n);
    put64(msg, 3, x->cfg.timeout_ms);
    snprintf((char *)msg + 40, 256, "%s", x->host);
    if (rc == AREAL_OK)
        rc = areal_train_dp_wsync_post(dp, msg, sizeof msg, err);
    const char *addrs[MAXS];
    for (int i = 0; i < n; i++)
        addrs[i] = live[i];
    char vs[32];
    snprintf(vs, sizeof vs, "%ld", version);
    areal_wsync_target tg = {addrs, n, x->group, vs, true, x->cfg.http_timeout_s};
    if (rc == AREAL_OK && rejoin) {
        rc = areal_wsync_join_servers(x->w, S, &tg, x->cfg.timeout_ms, err);
        if (rc == AREAL_OK) {
            memcpy(x->members, live, sizeof *live * (size_t)n);
            x->n_members = n;
        }
    }
    size_t sent = 0;
    if (rc == AREAL_OK)
        rc = areal_wsync_update_sharded(x->w, x->plan, x->local, &tg, &sent, err);
    if (rc != AREAL_OK) {
        world_drop(x); /* the followers' waits end at the store, or at the group timeout */
        return rc;
    }
    for (int i = 0; i < n; i++)
        areal_rollout_ctl_mark_synced(ctl, live[i], true, NULL);
    st->bytes = sent;
    st->buckets = (int)x->plan->n_buckets;
    st->servers = n;
    return AREAL_OK;
}

int areal_xccl_shard_follow(areal_xccl_shard *x, int rank, const void *msg, size_t n,
                            areal_error *err) {
    if (n != MSG_BYTES)
        return areal_error_set(err, AREAL_EINVAL, -1, "rank %d: a malformed weight-sync message",
                               rank);
    const uint8_t *m = msg;
    char host[256];
    memcpy(host, m + 40, sizeof host);
    host[sizeof host - 1] = '\0';
    int64_t rejoin = get64(m, 0), port = get64(m, 1), world = get64(m, 2), to = get64(m, 3);
    int rc = AREAL_OK;
    if (rejoin) {
        world_drop(x);
        rc = areal_wsync_attach(host, (int)port, x->host, &x->w, err); /* reached at its own */
        if (rc == AREAL_OK)
            rc = areal_wsync_join_rank(x->w, rank, (int)world, x->group, (int)to, err);
    } else if (x->w == NULL) {
        rc = areal_error_set(err, AREAL_EIO, -1,
                             "rank %d: no weight-sync world (the last one failed)", rank);
    }
    if (rc == AREAL_OK)
        rc = areal_wsync_update_sharded(x->w, x->plan, x->local, NULL, NULL, err);
    if (rc != AREAL_OK)
        world_drop(x);
    return rc;
}
