/*
 * simkubelet.h - the e2e suite's node simulator: a kubelet for the simulated
 * GPU nodes that runs pods as local processes (program areal-e2e-kubelet).
 *
 * What: for every pod bound to one of its nodes it assigns a pod IP, writes
 * the pod's hosts file, starts the container's command in a private mount and
 * UTS namespace (hosts file bind-mounted over /etc/hosts, host name = the
 * pod's) with the pod's environment, working directory and log file under the
 * state dir, reports phase, conditions and container state, and when the pod
 * is deleted stops it like a kubelet (SIGTERM to the process group, SIGKILL
 * after the grace period, final status, then DELETE with grace 0). A node
 * listed in the stopped-nodes file has died: its pods' processes are killed
 * and nothing more is reported for them (its heartbeat stops elsewhere).
 *
 * Layout under state_dir/pods/<ns>_<name>_<uid>/: hosts, pid (the
 * container's process id, for `e2e/cluster kill-pod`), <container>.log.
 * Rejected: a real kubelet (it needs a container runtime and images) and
 * kwok (a Go program that only pretends: it runs no process, so no worker
 * could join its groups).
 */
#ifndef AREAL_SIMKUBELET_H
#define AREAL_SIMKUBELET_H

#include <stdbool.h>
#include <sys/types.h>

#include "areal/error.h"
#include "areal/kube/client.h"
#include "areal/simpod.h"

/* ---- process runner (sim_runner.c) --------------------------------------- */

typedef struct sim_spawn {
    const char *path;       /* program to exec (absolute or relative to cwd) */
    char *const *argv;      /* NULL-terminated */
    char *const *envp;      /* NULL-terminated */
    const char *workdir;    /* chdir target */
    const char *log_path;   /* stdout and stderr, appended */
    const char *hosts_path; /* bind-mounted over /etc/hosts; NULL: no namespaces */
    const char *hostname;   /* set in a new UTS namespace; NULL: keep */
    /* bind-mounted over /var/run/secrets (made when missing; needs hosts_path's
     * mount namespace); NULL: none */
    const char *secrets_path;
    /* more bind mounts: src[i] over dst[i] (dst made when missing, as for
     * secrets_path; needs hosts_path's mount namespace) */
    const char *const *mount_src, *const *mount_dst;
    size_t n_mounts;
    /* the termination-message file: termination_src (a host file) bind-mounted
     * over termination_dst, a file path in the container (its directory and an
     * empty file made on the host when missing, the mount point, as for
     * secrets_path; needs hosts_path's mount namespace); NULL: none */
    const char *termination_src, *termination_dst;
} sim_spawn;

/*
 * Forks and execs `s` in a new session (its process group id = its pid), with
 * every signal unblocked and the default dispositions, SIGKILL when the
 * simulator dies (PR_SET_PDEATHSIG), and - when hosts_path is set - in its own
 * mount namespace (propagation private) with the hosts file bind-mounted, and
 * its own UTS namespace with `hostname`, `secrets_path` (when set)
 * bind-mounted over /var/run/secrets, the volume mounts, and the termination
 * file (when set). Returns AREAL_OK with *pid set once
 * the exec succeeded, or AREAL_EIO naming the step that failed (open the log,
 * unshare, mount, chdir, exec) and errno; the child is reaped then.
 * Call from the thread that will outlive the child (PDEATHSIG is per thread).
 */
int sim_spawn_start(const sim_spawn *s, pid_t *pid, areal_error *err);

/* Finds `name` in `dir` (when it has no '/') and checks it is executable.
 * Writes the path into out. AREAL_EINVAL when not found. */
int sim_spawn_resolve(const char *name, const char *dir, char *out, size_t cap, areal_error *err);

/* ---- node status (sim_nodes.c) ------------------------------------------- */

/* True when the kubelet of node `name` is alive (not stopped on purpose). */
typedef bool (*sim_node_filter)(void *ud, const char *name);

/*
 * Sets Ready=True (reason KubeletReady) on every simulated node (label
 * areal.io/simulated=true) whose Ready condition is Unknown - the
 * node-lifecycle controller's mark of missed heartbeats - and for which
 * `alive` says yes. *revived counts them. AREAL_EIO (message names the node
 * or the list) when the API server cannot be reached; the caller tries again
 * later.
 */
int sim_nodes_revive(kube_client *c, sim_node_filter alive, void *ud, int *revived,
                     areal_error *err);

/* ---- service accounts (sim_secrets.c) ------------------------------------ */

/*
 * What a kubelet projects for `pod`'s service account: unless
 * spec.automountServiceAccountToken is false, a token from the TokenRequest
 * API bound to the pod (serviceAccountName, default "default"), the CA from
 * the namespace's kube-root-ca.crt ConfigMap and the namespace, as files
 * token, ca.crt, namespace in pod_dir/secrets/kubernetes.io/serviceaccount
 * (the runner mounts pod_dir/secrets over /var/run/secrets). *projected says
 * whether anything was written. AREAL_EIO naming the call that failed (the
 * caller tries again later, as a kubelet retries a mount).
 */
int sim_project_service_account(kube_client *c, const json_t *pod, const char *pod_dir,
                                bool *projected, areal_error *err);

/* ---- termination messages (sim_termination.c) ----------------------------- */

#define SIM_TERMINATION_MESSAGE_MAX  4096 /* what a kubelet keeps of the file */
#define SIM_TERMINATION_DEFAULT_PATH "/dev/termination-log"

/*
 * The container's terminationMessagePath, as a kubelet takes it: makes the
 * empty host file <pod_dir>/containers/<name>/termination-log, writes its path
 * into host_path and points *at to the path in the container (the runner
 * bind-mounts one over the other). *at NULL and host_path "" when the field is
 * unset or the kubelet default /dev/termination-log (skipped: its mount point
 * would be a file in this host's /dev; the message stays empty).
 * AREAL_EINVAL naming the field for a path that is not absolute; AREAL_EIO
 * naming the file when it cannot be made.
 */
int sim_termination_prepare(const json_t *container, const char *pod_dir, char *host_path,
                            size_t cap, const char **at, areal_error *err);

/*
 * The first SIM_TERMINATION_MESSAGE_MAX bytes of host_path (fewer when cap is
 * smaller; a UTF-8 sequence the bound cuts is dropped) into out,
 * NUL-terminated; returns their length, 0 (out "") when the file is missing,
 * empty or host_path is "".
 */
size_t sim_termination_read(const char *host_path, char *out, size_t cap);

/* ---- volumes (sim_volumes.c) --------------------------------------------- */

#define SIM_MOUNTS_MAX 16
#define SIM_PATH_MAX   1024

/* The bind mounts of one container (sim_volumes_prepare fills it). */
typedef struct sim_mounts {
    size_t n;
    char src[SIM_MOUNTS_MAX][SIM_PATH_MAX], dst[SIM_MOUNTS_MAX][SIM_PATH_MAX];
    const char *srcp[SIM_MOUNTS_MAX], *dstp[SIM_MOUNTS_MAX]; /* into src, dst */
} sim_mounts;

/*
 * The container's volumeMounts as host directories to bind over their
 * mountPaths: configMap volumes get their keys written as files under
 * pod_dir/volumes/<name>, hostPath volumes are the host path
 * (DirectoryOrCreate makes it), emptyDir volumes pod_dir/volumes/<name> (one
 * at /dev/shm is skipped: the host's stands in). AREAL_EINVAL naming the
 * volume for what is not simulated (subPath, other kinds, a mount naming no
 * volume): the kubelet's CreateContainerConfigError; AREAL_EIO when the
 * ConfigMap cannot be read or a hostPath is missing (the caller retries).
 */
int sim_volumes_prepare(kube_client *c, const json_t *pod, const json_t *container,
                        const char *pod_dir, sim_mounts *m, areal_error *err);

/* ---- default-scheduler stand-in (sim_sched.c) ---------------------------- */

/*
 * Binds every unbound, undeleted pod whose spec.schedulerName is
 * "default-scheduler" to nodes[*rr % n_nodes], advancing *rr per bind (round
 * robin). *bound counts binds. A pod bound or deleted meanwhile is skipped;
 * AREAL_EIO names the first other failure (the next pass tries again).
 */
int sim_sched_bind_pending(kube_client *c, const char *const *nodes, size_t n_nodes, size_t *rr,
                           int *bound, areal_error *err);

/* ---- the simulator (sim_kubelet.c) --------------------------------------- */

typedef struct sim_kubelet_opts {
    const char *state_dir;      /* pods/ is made under it */
    const char *nodes_file;     /* names of the simulated nodes, one a line */
    const char *stopped_file;   /* nodes whose kubelet died, one a line (may not exist) */
    const char *pod_cidr;       /* e.g. "127.20.0.0/16" */
    const char *cluster_domain; /* NULL: cluster.local */
    sim_image_map images;
    /* "NAME=value" service variables of every pod (KUBERNETES_SERVICE_HOST/PORT:
     * the API server's loopback address stands in for the kubernetes Service);
     * NULL-terminated, NULL: none */
    const char *const *service_env;
    bool schedule_default; /* bind pods naming default-scheduler (sim_sched.c) */
    int tick_ms;           /* main loop period (0: 50) */
} sim_kubelet_opts;

/*
 * Runs the simulator on client `c` until SIGTERM or SIGINT arrives (the
 * caller must have blocked SIGTERM, SIGINT and SIGCHLD in every thread before
 * calling; this function waits for them with sigtimedwait). On return every
 * pod process it started has been killed and reaped. Returns AREAL_OK after a
 * signal, or an error (bad options, the pod watch failing permanently).
 */
int sim_kubelet_run(kube_client *c, const sim_kubelet_opts *o, areal_error *err);

#endif
