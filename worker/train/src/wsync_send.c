/*
 * wsync_send.c - see areal/train/wsync.h: the source rank of a
 * weight-update group. It owns the group's store server (so master_port is
 * known before any server is told), joins the world as rank 0 with the
 * comm runtime, and broadcasts each bucket as one packed buffer, so a bucket
 * costs one collective whatever its tensor count (the lesson of
 * rl-systems-2026.md 2.2: one control message and one transfer per bucket).
 */
#include "areal/train/wsync.h"
#include "areal/train/wsync_shard.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wsync_internal.h"

int areal_wsync_listen(const char *host, int port, areal_wsync **out, areal_error *err) {
    *out = NULL;
    areal_wsync *w = calloc(1, sizeof *w);
    if (w == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    snprintf(w->host, sizeof w->host, "%s", host ? host : "127.0.0.1");
    snprintf(w->self, sizeof w->self, "%s", w->host);
    int rc = areal_store_server_start(w->host, port, &w->store, &w->port, err);
    if (rc != AREAL_OK) {
        free(w);
        return rc;
    }
    *out = w;
    return AREAL_OK;
}

int areal_wsync_join(areal_wsync *w, int world, const char *group, int timeout_ms,
                     areal_error *err) {
    return areal_wsync_join_rank(w, 0, world, group, timeout_ms, err);
}

int areal_wsync_join_rank(areal_wsync *w, int rank, int world, const char *group, int timeout_ms,
                          areal_error *err) {
    if (world < 2 || group == NULL || group[0] == '\0')
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "a weight-update group needs a name and world >= 2 (the trainer "
                               "and at least one server)");
    if (rank < 0 || rank >= world - 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "rank %d is not a trainer rank of a %d-rank world (0..%d: the "
                               "servers come after the trainer ranks)",
                               rank, world, world - 2);
    w->rank = rank;
    w->world = world;
    snprintf(w->group, sizeof w->group, "%s", group);
    areal_comm_config cc = {.rank = rank,
                            .world = world,
                            .store_host = w->host,
                            .store_port = w->port,
                            .host_store = 0,
                            .bind_host = w->self,
                            .advertise_host = w->self,
                            .timeout_ms = timeout_ms,
                            .connect_timeout_ms = timeout_ms,
                            .key_prefix = group};
    int rc = areal_comm_init(&cc, &w->comm, err);
    if (rc != AREAL_OK)
        return rc;
    int *all = malloc(sizeof *all * (size_t)world);
    if (all == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    for (int i = 0; i < world; i++)
        all[i] = i;
    rc = areal_comm_group(w->comm, group, all, world, &w->pg, err);
    free(all);
    return rc;
}

int areal_wsync_open(const char *host, int port, int world, const char *group, int timeout_ms,
                     areal_wsync **out, areal_error *err) {
    int rc = areal_wsync_listen(host, port, out, err);
    if (rc == AREAL_OK && (rc = areal_wsync_join(*out, world, group, timeout_ms, err)) != 0) {
        areal_wsync_close(*out);
        *out = NULL;
    }
    return rc;
}

int areal_wsync_attach(const char *host, int port, const char *self_host, areal_wsync **out,
                       areal_error *err) {
    *out = NULL;
    if (port < 1 || port > 65535)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "port %d: give the store port rank 0 listens on (1..65535)", port);
    areal_wsync *w = calloc(1, sizeof *w);
    if (w == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    snprintf(w->host, sizeof w->host, "%s", host ? host : "127.0.0.1");
    snprintf(w->self, sizeof w->self, "%s", self_host ? self_host : w->host);
    w->port = port;
    *out = w;
    return AREAL_OK;
}

int areal_wsync_port(const areal_wsync *w) {
    return w->port;
}

int areal_wsync_rank(const areal_wsync *w) {
    return w->rank;
}

static size_t numel(const areal_wsync_tensor *t) {
    size_t n = 1;
    for (int k = 0; k < t->ndim; k++)
        n *= (size_t)t->shape[k];
    return n;
}

static const char *torch_name(areal_dtype dt) {
    return dt == AREAL_DT_BF16 ? "bfloat16" : dt == AREAL_DT_F16 ? "float16" : "float32";
}

int areal_wsync_bucket_json(const areal_wsync_tensor *t, size_t n, const char *group,
                            bool abort_all, const char *version, char **json, areal_error *err) {
    json_t *names = json_array(), *dtypes = json_array(), *shapes = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *sh = json_array();
        for (int k = 0; k < t[i].ndim; k++)
            json_array_append_new(sh, json_integer(t[i].shape[k]));
        json_array_append_new(names, json_string(t[i].name));
        json_array_append_new(dtypes, json_string(torch_name(t[i].dtype)));
        json_array_append_new(shapes, sh);
    }
    json_t *j =
        json_pack("{s:o,s:o,s:o,s:s,s:b,s:b}", "names", names, "dtypes", dtypes, "shapes", shapes,
                  "group_name", group, "flush_cache", 1, "abort_all_requests", abort_all);
    if (j && version)
        json_object_set_new(j, "weight_version", json_string(version));
    *json = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return *json ? AREAL_OK : areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
}

int areal_wsync_send(areal_wsync *w, const areal_wsync_tensor *t, size_t n, areal_error *err) {
    if (w->pg == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "the group is not joined");
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += numel(&t[i]) * areal_dtype_size(t[i].dtype);
    size_t words = (total + 3) / 4;
    int32_t *buf = calloc(words ? words : 1, sizeof *buf);
    if (buf == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for a %zu-byte bucket", total);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t b = numel(&t[i]) * areal_dtype_size(t[i].dtype);
        memcpy((char *)buf + off, t[i].data, b);
        off += b;
    }
    int rc = areal_pg_broadcast(w->pg, buf, words, AREAL_DT_I32, 0, err);
    free(buf);
    return rc;
}

void areal_wsync_close(areal_wsync *w) {
    if (w == NULL)
        return;
    areal_pg_destroy(w->src);
    areal_pg_destroy(w->pg);
    areal_comm_destroy(w->comm);
    areal_store_server_stop(w->store);
    free(w);
}
