/*
 * pod_rank.h - which rank of its trainer group a trainer process of a job's
 * pod is, of how many, and where the group meets: read from the pod's
 * environment (the operator's contract, areal/podenv.h), so `areal-worker
 * train` in a pod needs no --rank/--world/--master.
 *
 * A pod holds ranks AREAL_POD_FIRST_RANK .. + AREAL_POD_RANKS - 1 of
 * WORLD_SIZE. With one rank the process is that rank; with several the pod
 * launcher (worker/cmd) starts one process per rank with RANK set, and a
 * process without RANK in such a pod is told to be that launcher. The group's
 * rendezvous is AREAL_TRAINER_ADDR (else MASTER_ADDR, the job's first trainer
 * pod) at AREAL_TRAINER_PORT (else MASTER_PORT + 1): rank 0 hosts it.
 * Pure: the caller hands in the variables (areal_train_pod_env_read reads
 * them), so a test states the pod's environment without setenv.
 */
#ifndef AREAL_TRAIN_POD_RANK_H
#define AREAL_TRAIN_POD_RANK_H

#include <stdbool.h>

#include "areal/error.h"

/* The variables, each NULL when unset (borrowed strings). */
typedef struct areal_train_pod_env {
    const char *rank;         /* RANK: set by the pod launcher for each of a pod's ranks */
    const char *world;        /* WORLD_SIZE: the role's ranks */
    const char *first_rank;   /* AREAL_POD_FIRST_RANK (default 0) */
    const char *pod_ranks;    /* AREAL_POD_RANKS (default 1) */
    const char *trainer_addr; /* AREAL_TRAINER_ADDR: the role's rank-0 pod */
    const char *trainer_port; /* AREAL_TRAINER_PORT */
    const char *master_addr;  /* MASTER_ADDR: the fallback address */
    const char *master_port;  /* MASTER_PORT: the fallback port is this + 1 */
} areal_train_pod_env;

/* The process's own variables (getenv; the strings stay the environment's). */
areal_train_pod_env areal_train_pod_env_read(void);

typedef struct areal_train_pod_rank {
    bool in_pod;      /* WORLD_SIZE was set: the rest is filled */
    bool launch;      /* the pod holds several ranks and RANK is unset: start them */
    int rank, world;  /* this process's rank and the group's size */
    int first, n;     /* the pod's ranks: first .. first + n - 1 */
    char master[256]; /* HOST:PORT of the group's rendezvous */
} areal_train_pod_rank;

/*
 * Fills *out from env for a trainer whose layout has `layout_world` ranks
 * (as the allocation's trainer component says). WORLD_SIZE unset: in_pod
 * false, AREAL_OK (not a job's pod: flags decide). Otherwise AREAL_OK, or
 * AREAL_EINVAL with a message naming the variable and what the operator
 * sets: a malformed number, WORLD_SIZE other than layout_world, the pod's
 * ranks outside the world, RANK outside the pod's ranks, no address for a
 * world above 1, a port outside 1..65535.
 */
int areal_train_pod_rank_parse(const areal_train_pod_env *env, int layout_world,
                               areal_train_pod_rank *out, areal_error *err);

#endif
