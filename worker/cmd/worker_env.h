/*
 * worker_env.h - what areal-worker reads from its environment, and the two
 * halves of the program: the pod launcher and one rank.
 *
 * Pod (RANK unset): WORLD_SIZE, MASTER_ADDR, MASTER_PORT, AREAL_POD_FIRST_RANK
 * (global rank of the pod's first slot, default 0) and AREAL_POD_RANKS (slots,
 * default LOCAL_WORLD_SIZE, else 1). The launcher starts one rank per slot with
 * RANK, LOCAL_RANK and LOCAL_WORLD_SIZE set (torchrun conventions).
 * Rank (RANK set): also AREAL_ALLOCATION and AREAL_ROLE (which component of
 * the allocation this job runs; default the first training component),
 * POD_IP (address to bind and publish; default every address and the host
 * name), AREAL_COMM_TIMEOUT_MS, AREAL_CONNECT_TIMEOUT_MS, and AREAL_POD_ID
 * (set by the launcher: ranks with the same id connect through Unix-domain
 * sockets and move data through shared memory; AREAL_COMM_SHM=0 keeps the
 * data on the sockets). Rank 0 of the store-host component hosts the store for every
 * role of the job; see worker_rank.c and worker/README.md.
 */
#ifndef AREAL_WORKER_ENV_H
#define AREAL_WORKER_ENV_H

#include "areal/error.h"
#include "areal/podenv.h"

/* The worker's own variables (the pod contract's are in areal/podenv.h). */
#define WORKER_ENV_GRACE_MS           "AREAL_GRACE_MS"
#define WORKER_ENV_POD_ID             "AREAL_POD_ID"
#define WORKER_ENV_COMM_TIMEOUT_MS    "AREAL_COMM_TIMEOUT_MS"
#define WORKER_ENV_CONNECT_TIMEOUT_MS "AREAL_CONNECT_TIMEOUT_MS"
#define WORKER_ENV_COMM_SHM           "AREAL_COMM_SHM"

typedef struct worker_opts {
    int selftest;      /* --selftest */
    int hold_ms;       /* --hold-ms N: stay up N ms after the work (for supervision) */
    const char *model; /* --model DIR: ranks of an inference role run the rollout server */
} worker_opts;

/* `areal-worker serve` (argv[0] = "serve"), or a rank of an inference role serving job_model. */
int worker_serve_main(int argc, char **argv, const char *job_model);

/* As worker_serve_main, as rank 0 of a tensor-parallel server of a job (job_tp: its world,
 * worker_serve_tp.h; NULL: t = 1 or --tp by hand). */
struct worker_tp_spec;
int worker_serve_job(int argc, char **argv, const char *job_model,
                     const struct worker_tp_spec *job_tp);

/* Reads an integer variable: the default when unset, AREAL_EINVAL naming it when malformed. */
int worker_env_int(const char *name, int def, int lo, int hi, int *out, areal_error *err);

/* The launcher: runs the pod's ranks and returns the process exit code. */
int worker_pod_main(char **argv);

/* One rank: returns the process exit code (0 ok, 1 failure). */
int worker_rank_main(const worker_opts *o);

#endif
