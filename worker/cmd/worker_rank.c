/*
 * worker_rank.c - one rank of areal-worker: joins the job (store, address),
 * builds every process group of its component's layout, then runs the
 * selftest or a barrier, and stays up --hold-ms if asked.
 *
 * The component is chosen from AREAL_ALLOCATION by AREAL_ROLE: the role
 * name the plan gives it (areal_role_names: its own name, else "trainer",
 * "rollout", "trainer2", ...), or a backend name ("megatron"), or
 * "trainer"/"rollout" for the first training/inference component; unset
 * means "trainer". Its world must equal WORLD_SIZE. Its groups are the
 * plan's (areal_comm_role_groups, areal/comm/role_groups.h). Rank 0 hosts the rendezvous store on
 * MASTER_PORT.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "areal/alloc.h"
#include "areal/comm/comm.h"
#include "areal/comm/net.h"
#include "areal/comm/role_groups.h"
#include "areal/log.h"
#include "worker_env.h"
#include "worker_selftest.h"
#include "worker_serve_tp.h"

static int pick_component(const areal_alloc *a, const char *role, areal_error *err) {
    const char *r = role && role[0] ? role : "trainer";
    char names[AREAL_ALLOC_MAX_COMPONENTS][AREAL_ALLOC_NAME_MAX];
    areal_role_names(a, names);
    for (int i = 0; i < a->n_components; i++)
        if (strcmp(names[i], r) == 0)
            return i;
    for (int i = 0; i < a->n_components; i++) {
        const areal_component *c = &a->comp[i];
        int inf = areal_backend_is_inference(c->backend);
        if (strcmp(c->name, r) == 0 || strcmp(areal_backend_name(c->backend), r) == 0 ||
            (strcmp(r, "trainer") == 0 && !inf) || (strcmp(r, "rollout") == 0 && inf))
            return i;
    }
    return areal_error_set(err, AREAL_EINVAL, -1,
                           "AREAL_ROLE '%s' names no component of AREAL_ALLOCATION (use a role "
                           "name as the plan gives it, such as 'trainer2', a backend, 'trainer' "
                           "or 'rollout')",
                           r);
}

static int fail(int rank, const areal_error *e) {
    areal_log(AREAL_LOG_ERROR, "worker", NULL, "rank %d: %s", rank, e->msg);
    return 1;
}

/*
 * The component whose rank 0 hosts the store: the first training component
 * that owns its GPUs (the trainer), else the first component. Every role of
 * the job computes the same answer from AREAL_ALLOCATION.
 */
static int store_host_component(const areal_alloc *a) {
    for (int i = 0; i < a->n_components; i++)
        if (!areal_backend_is_inference(a->comp[i].backend) &&
            a->comp[i].sched == AREAL_SCHED_SEPARATION)
            return i;
    return 0;
}

/*
 * Rank 0 of every role reports "areal/c<i>/done" when its world is finished;
 * the store host then waits (up to the connect timeout) for the other roles
 * that have pods of their own (colocated roles run in their anchor's), so
 * the store outlives every user. A role that never reports only delays the
 * host's exit: it is named on stderr, not counted as a failure here.
 */
static int leave_store(areal_comm *c, const areal_alloc *a, int ci, int host_ci, int wait_ms) {
    areal_store *st = areal_comm_store(c);
    areal_error e;
    char key[64];
    snprintf(key, sizeof key, "areal/c%d/done", ci);
    if (areal_store_set(st, key, "1", 1, &e) != AREAL_OK) {
        if (a != NULL && ci != host_ci) {
            /* Every server of a component reports the same key and the host
             * leaves at the first: a later server (placed a pass after the
             * first) found the store gone here and exited 1 with its work
             * done, which restartScope Gang counts as a failure of the job
             * (e2e f_kill_worker ended BackoffLimitExceeded on "crash-rollout-1
             * failed (exit code 1)"). Its world's barrier has passed, so none
             * of its ranks needs the store any more. Rejected: a per-server
             * key the host waits for (servers come and go with
             * spec.rollout.replicas: a removed one would hold the host's exit
             * for the whole connect timeout). */
            areal_log(AREAL_LOG_WARN, "worker", NULL,
                      "rank 0: the store host has left (%s); nothing is left to report", e.msg);
            return 0;
        }
        return fail(0, &e);
    }
    if (a == NULL || ci != host_ci)
        return 0;
    int64_t end = areal_now_ms() + wait_ms;
    for (int i = 0; i < a->n_components; i++) {
        if (i == ci || a->comp[i].sched != AREAL_SCHED_SEPARATION)
            continue;
        snprintf(key, sizeof key, "areal/c%d/done", i);
        int64_t left = end - areal_now_ms();
        if (areal_store_wait(st, key, left > 0 ? (int)left : 0, &e) != AREAL_OK)
            areal_log(AREAL_LOG_WARN, "worker", NULL,
                      "rank 0: component %d never reported done: %s", i, e.msg);
    }
    return 0;
}

/* Every group member holds a connection: raise the descriptor limit to what the pod allows. */
static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int worker_rank_main(const worker_opts *o) {
    areal_error e;
    areal_error_clear(&e);
    raise_fd_limit();
    int rank = 0, world = 0, port = 0, timeout = 0, ctimeout = 0, shm = 1;
    if (worker_env_int(AREAL_ENV_WORLD_SIZE, -1, 1, AREAL_COMM_MAX_WORLD, &world, &e) != AREAL_OK ||
        worker_env_int(AREAL_ENV_RANK, -1, 0, world - 1, &rank, &e) != AREAL_OK ||
        worker_env_int(AREAL_ENV_MASTER_PORT, AREAL_DEFAULT_MASTER_PORT, 1, 65535, &port, &e) !=
            AREAL_OK ||
        worker_env_int(WORKER_ENV_COMM_TIMEOUT_MS, 60000, 1, 86400000, &timeout, &e) != AREAL_OK ||
        worker_env_int(WORKER_ENV_CONNECT_TIMEOUT_MS, 120000, 1, 86400000, &ctimeout, &e) !=
            AREAL_OK ||
        worker_env_int(WORKER_ENV_COMM_SHM, 1, 0, 1, &shm, &e) != AREAL_OK)
        return fail(rank, &e);
    const char *alloc_s = getenv(AREAL_ENV_ALLOCATION);
    areal_alloc *alloc = calloc(1, sizeof *alloc);
    areal_role_plan role;
    int have_role = 0, ci = 0, host_ci = 0;
    if (alloc == NULL)
        return 1;
    if (alloc_s != NULL && alloc_s[0] != '\0') {
        if (areal_alloc_parse(alloc_s, alloc, &e) != AREAL_OK ||
            (ci = pick_component(alloc, getenv(AREAL_ENV_ROLE), &e)) < 0 ||
            areal_comm_role_of(alloc, ci, &role, &e) != AREAL_OK) {
            free(alloc);
            return fail(rank, &e);
        }
        if (role.world != world) {
            areal_error_set(&e, AREAL_EINVAL, -1,
                            "component %d (role %s) of AREAL_ALLOCATION has %d ranks but "
                            "WORLD_SIZE is %d; they must describe the same job",
                            ci, role.name, role.world, world);
            free(alloc);
            return fail(rank, &e);
        }
        have_role = 1;
        host_ci = store_host_component(alloc);
        if (o->model != NULL && areal_backend_is_inference(alloc->comp[ci].backend)) {
            /* a rollout server: it meets the trainer through the store (registration),
             * not through the role's process groups */
            int t = alloc->comp[ci].strategy.tp;
            char *argv0[] = {"serve", NULL};
            if (t <= 1) {
                free(alloc);
                return worker_serve_main(1, argv0, o->model);
            }
            /* t > 1: ranks [k t, (k + 1) t) are server k, one world of their own; its rank
             * 0 serves and registers, the others follow (worker_serve_tp.c) */
            const char *srv = getenv(AREAL_ENV_SERVER_INDEX);
            char tprefix[48];
            snprintf(tprefix, sizeof tprefix, "c%d-srv%d-tp", ci,
                     srv && srv[0] && strlen(srv) < 12 ? atoi(srv) : rank / t);
            worker_tp_spec sp = {.rank = rank % t,
                                 .t = t,
                                 .store_host = getenv(AREAL_ENV_MASTER_ADDR),
                                 .store_port = port,
                                 .host_store = rank == 0 && ci == host_ci,
                                 .prefix = tprefix,
                                 .bind_host = getenv(AREAL_ENV_POD_IP),
                                 .timeout_ms = timeout,
                                 .connect_timeout_ms = ctimeout};
            free(alloc);
            if (t > WORKER_TP_MAX) {
                areal_error_set(&e, AREAL_EINVAL, -1, "t %d: a server has at most %d ranks", t,
                                WORKER_TP_MAX);
                return fail(rank, &e);
            }
            return sp.rank == 0 ? worker_serve_job(1, argv0, o->model, &sp)
                                : worker_tp_follower_main(&sp, o->model, 0);
        }
    }
    char prefix[32];
    /* A rollout server placed alone is a world of its own beside the other
     * servers of its component: its keys in the shared store must not meet theirs. */
    const char *server = getenv(AREAL_ENV_SERVER_INDEX);
    if (server != NULL && server[0] != '\0' && strlen(server) < 12)
        snprintf(prefix, sizeof prefix, "c%d-s%s", ci, server);
    else
        snprintf(prefix, sizeof prefix, "c%d", ci);
    const char *pod_ip = getenv(AREAL_ENV_POD_IP);
    areal_comm_config cfg = {
        .rank = rank,
        .world = world,
        .store_host = getenv(AREAL_ENV_MASTER_ADDR),
        .store_port = port,
        .host_store = rank == 0 && ci == host_ci,
        .bind_host = pod_ip,
        .advertise_host = pod_ip,
        .timeout_ms = timeout,
        .connect_timeout_ms = ctimeout,
        .local_id = getenv(WORKER_ENV_POD_ID),
        .key_prefix = prefix,
        .shm_off = !shm,
    };
    areal_comm *c = NULL;
    if (areal_comm_init(&cfg, &c, &e) != AREAL_OK) {
        free(alloc);
        return fail(rank, &e);
    }
    areal_coll *groups[AREAL_GROUP_KIND_COUNT] = {0}, *wg = NULL;
    areal_coll_factory cpu = areal_comm_coll_factory(c);
    int *all = malloc(sizeof *all * (size_t)world), rc = 0;
    for (int r = 0; all != NULL && r < world; r++)
        all[r] = r;
    if (all == NULL || cpu.group(cpu.ctx, "world", all, world, &wg, &e) != AREAL_OK ||
        (have_role && areal_comm_role_groups(&role, &cpu, groups, &e) != AREAL_OK)) {
        rc = fail(rank, &e);
    } else if (o->selftest) {
        rc = worker_selftest(c, have_role ? &role : NULL, groups, wg);
    } else if (areal_coll_barrier(wg, &e) != AREAL_OK) {
        rc = fail(rank, &e);
    } else if (rank == 0) {
        printf("areal-worker: %d rank(s) joined\n", world);
        fflush(stdout);
    }
    free(all);
    if (rc == 0 && o->hold_ms > 0) {
        struct timespec ts = {.tv_sec = o->hold_ms / 1000,
                              .tv_nsec = (long)(o->hold_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    /* the store host leaves last: others may still be reading addresses */
    if (rc == 0 && wg != NULL && areal_coll_barrier(wg, &e) != AREAL_OK)
        rc = fail(rank, &e);
    if (rc == 0 && rank == 0)
        rc = leave_store(c, have_role ? alloc : NULL, ci, host_ci, ctimeout);
    free(alloc);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(groups[k]);
    areal_coll_destroy(wg);
    areal_comm_destroy(c);
    return rc;
}
