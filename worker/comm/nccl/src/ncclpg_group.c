/*
 * ncclpg_group.c - creating and destroying NCCL groups: the unique id
 * exchange through the rendezvous store, the non-blocking communicator, its
 * stream, and the deadline-bounded wait every operation ends with.
 *
 * How: member 0 calls ncclGetUniqueId and stores the 128 bytes under
 * "nccl/<name>/<gen>/id"; the others get that key with the group's timeout.
 * The communicator is created with config.blocking = 0 and polled with
 * ncclCommGetAsyncError, so a member that never joins costs the timeout
 * and an ncclCommAbort, not a hang. Rejected: ncclCommSplit of one world
 * communicator (needs every rank of the world to take part in every split,
 * in one order, and a world communicator on every rank even when only a
 * few groups are used) and blocking ncclCommInitRank (no deadline).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ncclpg_internal.h"

static void nap_us(long us) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = us * 1000};
    nanosleep(&ts, NULL);
}

static int cuda_fail(areal_error *err, const char *group, const char *what, cudaError_t e) {
    return areal_error_set(err, AREAL_EIO, -1,
                           "nccl group %s: %s failed: %s (%s); check that a CUDA device is "
                           "visible (CUDA_VISIBLE_DEVICES, nvidia-smi) and the driver works",
                           group, what, cudaGetErrorName(e), cudaGetErrorString(e));
}

int areal_ncclpg_devices(areal_error *err) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        return areal_error_set(err, AREAL_EIO, -1,
                               "no CUDA device: cudaGetDeviceCount failed: %s (%s); the NCCL "
                               "backend needs a GPU and its driver",
                               cudaGetErrorName(e), cudaGetErrorString(e));
    if (n < 1)
        return areal_error_set(err, AREAL_EIO, -1,
                               "no CUDA device: the driver reports none (CUDA_VISIBLE_DEVICES?)");
    return n;
}

/* Marks g broken with the error just set in err (or a short one when err is
 * NULL) and aborts its communicator; returns AREAL_EIO. */
static int break_group(areal_ncclpg *g, const char *opname, areal_error *err) {
    if (err != NULL)
        g->broken = *err;
    else
        areal_error_set(&g->broken, AREAL_EIO, -1, "nccl group %s: %s failed", g->name, opname);
    ncclCommAbort(g->comm);
    g->comm = NULL;
    return AREAL_EIO;
}

int areal_ncclpg_check_call(areal_ncclpg *g, const char *opname, ncclResult_t r, areal_error *err) {
    if (r == ncclSuccess || r == ncclInProgress)
        return AREAL_OK;
    areal_error_set(err, AREAL_EIO, -1,
                    "nccl group %s: %s failed: %s (%s); the group is aborted, create it again",
                    g->name, opname, ncclGetErrorString(r), ncclGetLastError(g->comm));
    return break_group(g, opname, err);
}

/* Polls until comm's async state is no longer in progress; 0, 1 on timeout, -1 on error. */
static int poll_comm(ncclComm_t comm, int64_t deadline, ncclResult_t *st) {
    for (long spins = 0;; spins++) {
        if (ncclCommGetAsyncError(comm, st) != ncclSuccess)
            return -1;
        if (*st == ncclSuccess)
            return 0;
        if (*st != ncclInProgress)
            return -1;
        if (areal_ncclpg_now_ms() > deadline)
            return 1;
        if (spins > 1000)
            nap_us(spins > 100000 ? 1000 : 20);
    }
}

int areal_ncclpg_wait(areal_ncclpg *g, const char *opname, int64_t start_ms, areal_error *err) {
    int64_t deadline = start_ms + g->timeout_ms;
    ncclResult_t st = ncclSuccess;
    int rc = poll_comm(g->comm, deadline, &st);
    for (long spins = 0; rc == 0; spins++) {
        cudaError_t e = cudaStreamQuery(g->stream);
        if (e == cudaSuccess)
            return AREAL_OK;
        if (e != cudaErrorNotReady) {
            cuda_fail(err, g->name, opname, e);
            rc = -2;
            break;
        }
        if (ncclCommGetAsyncError(g->comm, &st) != ncclSuccess || st != ncclSuccess) {
            rc = -1;
            break;
        }
        if (areal_ncclpg_now_ms() > deadline) {
            rc = 1;
            break;
        }
        if (spins > 1000)
            nap_us(spins > 100000 ? 1000 : 20);
    }
    if (rc == 1)
        areal_error_set(err, AREAL_EIO, -1,
                        "nccl group %s: %s did not finish within the timeout of %d ms (a member "
                        "did not take part, or is stuck); the group is aborted, create it again",
                        g->name, opname, g->timeout_ms);
    else if (rc == -1)
        areal_error_set(err, AREAL_EIO, -1,
                        "nccl group %s: %s failed: %s (%s); the group is aborted, create it again",
                        g->name, opname, ncclGetErrorString(st), ncclGetLastError(g->comm));
    return break_group(g, opname, err);
}

/* Gets the group's unique id: member 0 makes and publishes it, the others read it. */
static int exchange_id(const areal_ncclpg_config *cfg, int me, ncclUniqueId *id, int64_t deadline,
                       areal_error *err) {
    char key[AREAL_COMM_GROUP_NAME_MAX + 48];
    if (areal_ncclpg_key(key, sizeof key, cfg->name, -1, "joins") != 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "nccl group %s: key too long", cfg->name);
    int64_t joins = 0;
    int rc = areal_store_add(cfg->store, key, 1, &joins, err);
    if (rc != AREAL_OK)
        return rc;
    long gen = (long)((joins - 1) / cfg->n);
    if (areal_ncclpg_key(key, sizeof key, cfg->name, gen, "id") != 0)
        return areal_error_set(err, AREAL_EINVAL, -1, "nccl group %s: key too long", cfg->name);
    if (me == 0) {
        ncclResult_t r = ncclGetUniqueId(id);
        if (r != ncclSuccess)
            return areal_error_set(err, AREAL_EIO, -1,
                                   "nccl group %s: ncclGetUniqueId failed: %s (%s)", cfg->name,
                                   ncclGetErrorString(r), ncclGetLastError(NULL));
        return areal_store_set(cfg->store, key, id, sizeof *id, err);
    }
    size_t n = 0;
    areal_error ge;
    int64_t left = deadline - areal_ncclpg_now_ms();
    rc = areal_store_get(cfg->store, key, left < 1 ? 1 : (int)left, id, sizeof *id, &n, &ge);
    if (rc != AREAL_OK)
        return areal_error_set(err, AREAL_EIO, -1,
                               "nccl group %s: the unique id of member 0 (global rank %d) did not "
                               "appear at %s within %d ms; start every member: %s",
                               cfg->name, cfg->ranks[0], key, cfg->timeout_ms, ge.msg);
    if (n != sizeof *id)
        return areal_error_set(err, AREAL_EIO, -1,
                               "nccl group %s: %s holds %zu bytes, not an NCCL unique id (%zu); "
                               "another job shares the store prefix?",
                               cfg->name, key, n, sizeof *id);
    return AREAL_OK;
}

/* Creates the communicator non-blocking and waits for it until the deadline. */
static int init_comm(areal_ncclpg *g, const ncclUniqueId *id, int64_t deadline, areal_error *err) {
    ncclConfig_t conf = NCCL_CONFIG_INITIALIZER;
    conf.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&g->comm, g->n, *id, g->me, &conf);
    if (r != ncclSuccess && r != ncclInProgress) {
        areal_error_set(err, AREAL_EIO, -1, "nccl group %s: ncclCommInitRankConfig failed: %s (%s)",
                        g->name, ncclGetErrorString(r), ncclGetLastError(NULL));
        if (g->comm != NULL)
            ncclCommAbort(g->comm);
        g->comm = NULL;
        return AREAL_EIO;
    }
    ncclResult_t st = ncclSuccess;
    int pc = poll_comm(g->comm, deadline, &st);
    if (pc == 0)
        return AREAL_OK;
    if (pc == 1) {
        char list[96] = "";
        size_t used = 0;
        for (int j = 0; j < g->n && used + 16 < sizeof list; j++) {
            int w = snprintf(list + used, sizeof list - used, "%s%d", j ? "," : "", g->ranks[j]);
            used += w > 0 ? (size_t)w : 0;
        }
        areal_error_set(err, AREAL_EIO, -1,
                        "nccl group %s: not every one of its %d members (global ranks %s%s) "
                        "joined within %d ms; start every member with the same group name",
                        g->name, g->n, list, used + 16 >= sizeof list ? ",..." : "", g->timeout_ms);
    } else
        areal_error_set(err, AREAL_EIO, -1,
                        "nccl group %s: creating the communicator failed: %s (%s)", g->name,
                        ncclGetErrorString(st), ncclGetLastError(g->comm));
    ncclCommAbort(g->comm);
    g->comm = NULL;
    return AREAL_EIO;
}

int areal_ncclpg_create(const areal_ncclpg_config *cfg, areal_ncclpg **out, areal_error *err) {
    int me = -1;
    if (out == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "nccl group: out is NULL");
    *out = NULL;
    int rc = areal_ncclpg_check_config(cfg, &me, err);
    if (rc != AREAL_OK)
        return rc;
    int64_t deadline = areal_ncclpg_now_ms() + cfg->timeout_ms;
    cudaError_t ce = cudaSetDevice(cfg->device);
    if (ce != cudaSuccess)
        return cuda_fail(err, cfg->name, "cudaSetDevice", ce);
    areal_ncclpg *g = calloc(1, sizeof *g);
    int *ranks = malloc(sizeof *ranks * (size_t)cfg->n);
    if (g == NULL || ranks == NULL) {
        free(g);
        free(ranks);
        return areal_error_set(err, AREAL_ENOMEM, -1, "nccl group %s: out of memory", cfg->name);
    }
    memcpy(ranks, cfg->ranks, sizeof *ranks * (size_t)cfg->n);
    pthread_mutex_init(&g->mu, NULL);
    snprintf(g->name, sizeof g->name, "%s", cfg->name);
    g->n = cfg->n;
    g->me = me;
    g->ranks = ranks;
    g->device = cfg->device;
    g->timeout_ms = cfg->timeout_ms;
    areal_error_clear(&g->broken);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    rc = exchange_id(cfg, me, &id, deadline, err);
    if (rc == AREAL_OK)
        rc = init_comm(g, &id, deadline, err);
    if (rc == AREAL_OK &&
        (ce = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking)) != cudaSuccess)
        rc = cuda_fail(err, g->name, "cudaStreamCreateWithFlags", ce);
    if (rc == AREAL_OK &&
        (ce = cudaMalloc((void **)&g->scratch, sizeof *g->scratch)) != cudaSuccess)
        rc = cuda_fail(err, g->name, "cudaMalloc of the barrier word", ce);
    if (rc != AREAL_OK) {
        areal_ncclpg_destroy(g);
        return rc;
    }
    *out = g;
    return AREAL_OK;
}

/* Finalizes the communicator within the timeout, else (or when broken) aborts it. */
static void close_comm(areal_ncclpg *g) {
    if (g->comm == NULL)
        return;
    if (g->broken.code == AREAL_OK) {
        ncclResult_t st = ncclSuccess, r = ncclCommFinalize(g->comm);
        if ((r == ncclSuccess || r == ncclInProgress) &&
            poll_comm(g->comm, areal_ncclpg_now_ms() + g->timeout_ms, &st) == 0) {
            ncclCommDestroy(g->comm);
            g->comm = NULL;
            return;
        }
    }
    ncclCommAbort(g->comm);
    g->comm = NULL;
}

void areal_ncclpg_destroy(areal_ncclpg *g) {
    if (g == NULL)
        return;
    cudaSetDevice(g->device);
    close_comm(g);
    if (g->stream != NULL)
        cudaStreamDestroy(g->stream);
    if (g->scratch != NULL)
        cudaFree(g->scratch);
    pthread_mutex_destroy(&g->mu);
    free(g->ranks);
    free(g);
}

const char *areal_ncclpg_name(const areal_ncclpg *g) {
    return g->name;
}
int areal_ncclpg_size(const areal_ncclpg *g) {
    return g->n;
}
int areal_ncclpg_rank(const areal_ncclpg *g) {
    return g->me;
}
int areal_ncclpg_device(const areal_ncclpg *g) {
    return g->device;
}
void *areal_ncclpg_stream(areal_ncclpg *g) {
    return (void *)g->stream;
}

int areal_ncclpg_global_rank(const areal_ncclpg *g, int j) {
    return j >= 0 && j < g->n ? g->ranks[j] : -1;
}

void areal_ncclpg_set_timeout(areal_ncclpg *g, int timeout_ms) {
    if (timeout_ms > 0) {
        pthread_mutex_lock(&g->mu);
        g->timeout_ms = timeout_ms;
        pthread_mutex_unlock(&g->mu);
    }
}
