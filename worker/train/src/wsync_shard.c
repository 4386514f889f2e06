/*
 * wsync_shard.c - see areal/train/wsync_shard.h: one sender rank's half of a
 * sharded weight update. The rank builds "<group>.src<rank>" = {rank,
 * servers...} at its first bucket (the servers build it when a control
 * message first names this root), then broadcasts each bucket it roots as
 * one packed buffer, in plan order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/train/wsync_shard.h"
#include "wsync_internal.h"

static int src_group(areal_wsync *w, const areal_wsync_plan *p, areal_error *err) {
    if (w->src != NULL)
        return AREAL_OK;
    int n = 1 + (w->world - p->n_senders);
    int *ranks = malloc(sizeof *ranks * (size_t)n);
    if (ranks == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    ranks[0] = w->rank;
    for (int i = 1; i < n; i++)
        ranks[i] = p->n_senders + i - 1;
    char name[AREAL_COMM_GROUP_NAME_MAX];
    /* the receiver spells it alike (server_wslice.c); a truncated prefix cannot clash with
     * another world's, since each world's keys live under its own full group name */
    snprintf(name, sizeof name, "%.50s.src%d", w->group, w->rank);
    int rc = areal_comm_group(w->comm, name, ranks, n, &w->src, err);
    free(ranks);
    return rc;
}

int areal_wsync_send_sharded(areal_wsync *w, const areal_wsync_plan *p, const void *const *local,
                             size_t *sent_bytes, areal_error *err) {
    if (sent_bytes)
        *sent_bytes = 0;
    if (w->pg == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "the group is not joined");
    if (p->n_senders >= w->world || w->rank >= p->n_senders)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "the plan has %d senders but this rank is %d of a %d-rank world "
                               "(join with world = senders + servers)",
                               p->n_senders, w->rank, w->world);
    size_t esz = areal_dtype_size(p->dtype);
    for (size_t b = 0; b < p->n_buckets; b++) {
        const areal_wsync_bucket *bk = &p->buckets[b];
        if (bk->root != w->rank)
            continue;
        int rc = src_group(w, p, err);
        if (rc != AREAL_OK)
            return rc;
        size_t words = (bk->bytes + 3) / 4;
        int32_t *buf = calloc(words ? words : 1, sizeof *buf);
        if (buf == NULL)
            return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for a %zu-byte bucket",
                                   bk->bytes);
        size_t off = 0;
        for (size_t i = bk->first; i < bk->first + bk->n; i++) {
            const areal_wsync_piece *t = &p->pieces[i];
            size_t bytes = (size_t)t->local[0] * (size_t)(t->ndim > 1 ? t->local[1] : 1) * esz;
            memcpy((char *)buf + off, local[t->local_index], bytes);
            off += bytes;
        }
        rc = areal_pg_broadcast(w->src, buf, words, AREAL_DT_I32, 0, err);
        free(buf);
        if (rc != AREAL_OK) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            return areal_error_set(err, rc, -1, "bucket %zu of %zu (root %d): %s", b, p->n_buckets,
                                   w->rank, why);
        }
        if (sent_bytes)
            *sent_bytes += bk->bytes;
    }
    return AREAL_OK;
}
