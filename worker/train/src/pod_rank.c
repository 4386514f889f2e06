/*
 * pod_rank.c - a trainer process's rank, world and rendezvous from its
 * pod's environment (see areal/train/pod_rank.h).
 */
#include "areal/train/pod_rank.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/podenv.h"

areal_train_pod_env areal_train_pod_env_read(void) {
    return (areal_train_pod_env){
        .rank = getenv(AREAL_ENV_RANK),
        .world = getenv(AREAL_ENV_WORLD_SIZE),
        .first_rank = getenv(AREAL_ENV_FIRST_RANK),
        .pod_ranks = getenv(AREAL_ENV_POD_RANKS),
        .trainer_addr = getenv(AREAL_ENV_TRAINER_ADDR),
        .trainer_port = getenv(AREAL_ENV_TRAINER_PORT),
        .master_addr = getenv(AREAL_ENV_MASTER_ADDR),
        .master_port = getenv(AREAL_ENV_MASTER_PORT),
    };
}

static bool set(const char *v) {
    return v != NULL && v[0] != '\0';
}

/* Variable `name` = text v as a whole number in [lo, hi] (def when unset). */
static int whole(const char *name, const char *v, long def, long lo, long hi, int *out,
                 areal_error *err) {
    if (!set(v)) {
        *out = (int)def;
        return AREAL_OK;
    }
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (end == v || *end != '\0' || x < lo || x > hi)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "env %s='%s': expected a whole number from %ld to %ld (the "
                               "operator sets it on every trainer pod)",
                               name, v, lo, hi);
    *out = (int)x;
    return AREAL_OK;
}

int areal_train_pod_rank_parse(const areal_train_pod_env *env, int layout_world,
                               areal_train_pod_rank *out, areal_error *err) {
    memset(out, 0, sizeof *out);
    if (!set(env->world))
        return AREAL_OK;
    int rc = whole(AREAL_ENV_WORLD_SIZE, env->world, 1, 1, 4096, &out->world, err);
    if (rc != AREAL_OK)
        return rc;
    if (out->world != layout_world)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "env %s is %d but the trainer's layout has %d ranks (d*t*p*c of "
                               "its component of AREAL_ALLOCATION); the pod was made for another "
                               "allocation",
                               AREAL_ENV_WORLD_SIZE, out->world, layout_world);
    if ((rc = whole(AREAL_ENV_FIRST_RANK, env->first_rank, 0, 0, out->world - 1, &out->first,
                    err)) != AREAL_OK ||
        (rc = whole(AREAL_ENV_POD_RANKS, env->pod_ranks, 1, 1, out->world, &out->n, err)) !=
            AREAL_OK)
        return rc;
    if (out->first + out->n > out->world)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "the pod's ranks %d..%d (env %s, %s) do not fit %s %d", out->first,
                               out->first + out->n - 1, AREAL_ENV_FIRST_RANK, AREAL_ENV_POD_RANKS,
                               AREAL_ENV_WORLD_SIZE, out->world);
    if (set(env->rank)) {
        if ((rc = whole(AREAL_ENV_RANK, env->rank, 0, 0, out->world - 1, &out->rank, err)) !=
            AREAL_OK)
            return rc;
        if (out->rank < out->first || out->rank >= out->first + out->n)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "env %s %d is not one of the pod's ranks %d..%d (%s, %s)",
                                   AREAL_ENV_RANK, out->rank, out->first, out->first + out->n - 1,
                                   AREAL_ENV_FIRST_RANK, AREAL_ENV_POD_RANKS);
    } else if (out->n == 1) {
        out->rank = out->first;
    } else {
        out->launch = true; /* the launcher gives each of the pod's ranks its RANK */
        out->rank = out->first;
    }
    out->in_pod = true;
    if (out->world == 1)
        return AREAL_OK; /* no group: nothing to meet at */
    const char *addr = set(env->trainer_addr) ? env->trainer_addr : env->master_addr;
    if (!set(addr))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "a trainer of %d ranks needs env %s (or %s): the host name of its "
                               "rank-0 pod, where the ranks meet",
                               out->world, AREAL_ENV_TRAINER_ADDR, AREAL_ENV_MASTER_ADDR);
    int mport = 0, port = 0;
    if ((rc = whole(AREAL_ENV_MASTER_PORT, env->master_port, AREAL_DEFAULT_MASTER_PORT, 1, 65534,
                    &mport, err)) != AREAL_OK ||
        (rc = whole(AREAL_ENV_TRAINER_PORT, env->trainer_port, mport + 1, 1, 65535, &port, err)) !=
            AREAL_OK)
        return rc;
    if (port == mport)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "env %s and %s are both %d: the trainer group's store and the "
                               "job's need ports of their own",
                               AREAL_ENV_TRAINER_PORT, AREAL_ENV_MASTER_PORT, port);
    if (strlen(addr) + 8 > sizeof out->master)
        return areal_error_set(
            err, AREAL_EINVAL, -1, "env %s: a host name of %zu bytes is too long",
            set(env->trainer_addr) ? AREAL_ENV_TRAINER_ADDR : AREAL_ENV_MASTER_ADDR, strlen(addr));
    /* no brackets for an IPv6 address: the reader splits at the last ':' */
    snprintf(out->master, sizeof out->master, "%s:%d", addr, port);
    return AREAL_OK;
}
