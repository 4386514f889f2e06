/*
 * server_tp.c - the rollout server's tensor-parallel side (t > 1): loading
 * this rank's shard, the follower ranks' entry point, the failed-group
 * state that /health and the program read, and the answers of the weight
 * paths that do not run at t > 1 yet.
 *
 * The lock-step protocol itself is the engine's (engine.h "Tensor
 * parallelism", engine_tp.c); this file only knows directories and HTTP.
 * Kept apart from server_weights.c (the distributed receiver) so that the
 * two concerns change independently.
 */
#include <stdio.h>
#include <string.h>

#include "server_internal.h"

int srv_load_model(const char *dir, int tp, int tp_rank, areal_model *m, areal_error *err) {
    if (tp <= 1)
        return areal_model_load(m, dir, NULL, err);
    areal_model_config mc;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = areal_model_config_load(path, &mc, err);
    if (rc != AREAL_OK)
        return rc;
    /* Megatron's column/row split with whole heads; embedding and head replicated
     * (the paged forward's logits stay whole on rank 0, see areal/model/paged.h) */
    areal_model_shard sh = areal_model_shard_whole(&mc);
    sh.tp = tp;
    sh.tp_rank = tp_rank;
    return areal_model_load_shard(m, dir, &sh, NULL, err);
}

bool areal_rollout_server_failed(areal_rollout_server *s, char *why, size_t cap) {
    return areal_engine_failed(s->eng, why, cap);
}

bool srv_tp_unsupported(areal_rollout_server *s, areal_http_exchange *x, const char *endpoint) {
    if (s->cfg.tensor_parallel <= 1)
        return false;
    char msg[512];
    snprintf(msg, sizeof msg,
             "%s is not served by a tensor-parallel server (t %d) yet: each rank holds 1/t of "
             "the model and this path moves whole tensors through rank 0 only; use "
             "/update_weights_from_disk, or a t = 1 server",
             endpoint, s->cfg.tensor_parallel);
    areal_http_respond_error(x, 400, msg);
    return true;
}

int areal_rollout_follow(const char *model_dir, areal_coll *tp_group, int threads,
                         areal_error *err) {
    if (model_dir == NULL || tp_group == NULL || areal_coll_rank(tp_group) < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "rollout follower: needs --model and a tp group of which it is "
                               "member >= 1");
    areal_model m;
    int rc =
        srv_load_model(model_dir, areal_coll_size(tp_group), areal_coll_rank(tp_group), &m, err);
    if (rc != AREAL_OK)
        return rc;
    areal_engine_follow_config fc = {.tp_group = tp_group, .threads = threads};
    rc = areal_engine_follow(&m, &fc, err);
    areal_model_free(&m);
    return rc;
}
