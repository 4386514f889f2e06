/*
 * podenv.h - the environment contract between the operator (or the local
 * launcher), which writes it into every pod, and areal-worker, which reads it.
 * One definition, so the two sides can never disagree on a name.
 *
 * A pod holds ranks FIRST_RANK .. FIRST_RANK + POD_RANKS - 1 of its role (a
 * slice of consecutive ranks, areal/placement.h). The worker starts one rank
 * process per slot and gives each the torchrun-style RANK, LOCAL_RANK,
 * WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
 */
#ifndef AREAL_PODENV_H
#define AREAL_PODENV_H

#define AREAL_ENV_JOB        "AREAL_JOB"        /* the AReaLJob's name */
#define AREAL_ENV_NAMESPACE  "AREAL_NAMESPACE"  /* its namespace */
#define AREAL_ENV_ROLE       "AREAL_ROLE"       /* the role (component) name */
#define AREAL_ENV_ALLOCATION "AREAL_ALLOCATION" /* the canonical allocation string */
#define AREAL_ENV_POD_INDEX  "AREAL_POD_INDEX"  /* the pod's index inside its role */
/* Set on the pods of a rollout server placed on its own (one data-parallel
 * replica; the operator's rollout replica set): the server's index. Its ranks
 * form a world of their own, so their store keys carry it. */
#define AREAL_ENV_SERVER_INDEX "AREAL_SERVER_INDEX"
#define AREAL_ENV_FIRST_RANK   "AREAL_POD_FIRST_RANK"
#define AREAL_ENV_POD_RANKS    "AREAL_POD_RANKS" /* ranks (GPUs, CPU slots) of the pod */
#define AREAL_ENV_CONFIG       "AREAL_CONFIG"    /* path of the worker configuration file */
#define AREAL_ENV_POD_NAME     "POD_NAME"        /* downward API: metadata.name */
#define AREAL_ENV_POD_IP       "POD_IP"          /* downward API: status.podIP */

/* torchrun conventions, per rank process (the pod sets WORLD_SIZE, MASTER_*) */
#define AREAL_ENV_RANK             "RANK"
#define AREAL_ENV_LOCAL_RANK       "LOCAL_RANK"
#define AREAL_ENV_WORLD_SIZE       "WORLD_SIZE"
#define AREAL_ENV_LOCAL_WORLD_SIZE "LOCAL_WORLD_SIZE"
#define AREAL_ENV_MASTER_ADDR      "MASTER_ADDR" /* host name of the trainer's rank-0 pod */
#define AREAL_ENV_MASTER_PORT      "MASTER_PORT" /* the rendezvous store's port */

/*
 * Training pods only: the rendezvous of the role's own trainer group (the
 * ranks that split or replicate the model), apart from the job's store on
 * MASTER_PORT (where rollout servers register): TRAINER_ADDR is the host name
 * of the role's rank-0 pod (for the job's first trainer role, MASTER_ADDR),
 * TRAINER_PORT the port its rank 0 hosts the group's store on, at its POD_IP.
 * A trainer pod holds ranks AREAL_POD_FIRST_RANK .. + AREAL_POD_RANKS - 1 of
 * WORLD_SIZE: one rank per pod is that rank; a pod of several ranks starts one
 * process per rank (the pod launcher, RANK set for each). Rank 0 alone
 * serves /status, hosts the job's store, writes the termination log and talks
 * to the rollout servers. Rejected: one store on MASTER_PORT for both - the
 * job's store lives as long as the trainer's rank 0 wants servers to find it,
 * the group's is the comm runtime's own (areal/comm/comm.h hosts it), and
 * keeping them apart needs no change to either.
 */
#define AREAL_ENV_TRAINER_ADDR "AREAL_TRAINER_ADDR"
#define AREAL_ENV_TRAINER_PORT "AREAL_TRAINER_PORT"

/* Trainer containers: where the trainer's rank 0 writes its final /status when it
 * stops, the container's terminationMessagePath (policy File), so the operator
 * reads the last step of a job shorter than its poll period from the pod status. */
#define AREAL_ENV_TERMINATION_LOG  "AREAL_TERMINATION_LOG"
#define AREAL_TERMINATION_LOG_PATH "/var/run/areal/termination-log"

#define AREAL_DEFAULT_MASTER_PORT 29500
/* The trainer group's port when none is given: the job store's + 1. */
#define AREAL_DEFAULT_TRAINER_PORT (AREAL_DEFAULT_MASTER_PORT + 1)

#endif
