/*
 * simpod.h - the pure parts of the e2e node simulator (areal-e2e-kubelet):
 * what a kubelet computes for a pod before and after it runs a container.
 *
 * What: a pod-IP allocator over a CIDR (sim_ipalloc), the pod's hosts file
 * (sim_hosts_render), the container's argv and environment with downward-API
 * fields resolved (sim_env_build), the image -> local directory map
 * (sim_image_*), and the pod status patch a kubelet writes (sim_status_patch).
 * None of them touches the process table, the file system or the network, so
 * each is unit-tested and fuzzed on its own; sim_runner.c and sim_kubelet.c
 * (areal/simkubelet.h) do the side effects.
 * How: plain C over jansson objects; bounded fixed buffers for names and IPs;
 * every fallible function returns AREAL_OK or a negative AREAL_E* code with
 * `err` filled (message naming the field and the fix).
 * Rejected: a JSON template engine for statuses (kwok's approach): the handful
 * of fields the operator reads are clearer written out in C.
 */
#ifndef AREAL_SIMPOD_H
#define AREAL_SIMPOD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "areal/error.h"

#define SIM_IP_MAX        16  /* "255.255.255.255" + NUL */
#define SIM_NAME_MAX      254 /* DNS subdomain names (pod, node, namespace) */
#define SIM_IMAGES_MAX    16
#define SIM_ENV_VALUE_MAX 32768

/* ---- pod IPs ------------------------------------------------------------- */

/* Hands out the addresses of one IPv4 CIDR (prefix /16 .. /30), skipping the
 * network and broadcast addresses, round robin (an address just freed is the
 * last to be reused, so a late packet never reaches a new pod). */
typedef struct sim_ipalloc {
    uint32_t base; /* network address, host order */
    uint32_t size; /* addresses in the CIDR */
    uint32_t next; /* offset to try first */
    uint32_t used_count;
    uint8_t used[8192]; /* one bit per offset (a /16 at most) */
} sim_ipalloc;

/* Parses `cidr` ("127.20.0.0/16"). AREAL_EINVAL (message names the CIDR and
 * the allowed prefixes) for a malformed one or a prefix outside 16..30. */
int sim_ipalloc_init(sim_ipalloc *a, const char *cidr, areal_error *err);

/* Writes a free address into `out`. AREAL_ENOFIT when every one is taken. */
int sim_ipalloc_get(sim_ipalloc *a, char out[SIM_IP_MAX], areal_error *err);

/* Frees `ip`. AREAL_EINVAL when it is not an allocated address of `a`. */
int sim_ipalloc_put(sim_ipalloc *a, const char *ip, areal_error *err);

/* ---- hosts file ---------------------------------------------------------- */

/* One pod's names. `subdomain` may be NULL or "" (then only `hostname`). */
typedef struct sim_host_entry {
    const char *ip;
    const char *hostname;
    const char *subdomain;
    const char *ns;
} sim_host_entry;

/*
 * The hosts file of pod `self`: the kubelet's header and localhost lines,
 * the pod's own line "<ip> <h>.<s>.<ns>.svc.<domain> <h>" (as the kubelet
 * writes it), then one line for the pod itself and each peer that has a
 * subdomain - the records a cluster DNS serves for a headless Service, with
 * the names the pod's
 * resolv.conf search path (<ns>.svc.<domain>, svc.<domain>, <domain>) would
 * complete: "<h>.<s>" only for peers of the pod's own namespace. `self` may be
 * among `peers` (skipped there). `domain` NULL means "cluster.local".
 * Writes a NUL-terminated text into buf; *len gets its length. AREAL_ERANGE
 * when it does not fit `cap`, AREAL_EINVAL for an entry without ip/hostname.
 */
int sim_hosts_render(const sim_host_entry *self, const sim_host_entry *peers, size_t n_peers,
                     const char *domain, char *buf, size_t cap, size_t *len, areal_error *err);

/* ---- images -------------------------------------------------------------- */

/* Which local directory stands in for an image's file system: the
 * container's PATH starts with it, and a bare command name is looked up there
 * first. */
typedef struct sim_image_map {
    int n;
    char repo[SIM_IMAGES_MAX][256]; /* image name without tag or digest */
    char dir[SIM_IMAGES_MAX][1024];
    char entry[SIM_IMAGES_MAX][256]; /* the image's ENTRYPOINT; "" none */
} sim_image_map;

/* Adds "REPO=DIR". AREAL_EINVAL for a spec without '=' or an empty side,
 * AREAL_ERANGE when full or too long. */
int sim_image_add(sim_image_map *m, const char *spec, areal_error *err);

/* The directory of `image` ("areal/worker:latest", "x@sha256:..."), or NULL
 * when no entry names its repository (the kubelet's ErrImagePull). */
const char *sim_image_dir(const sim_image_map *m, const char *image);

/* Sets the ENTRYPOINT of a mapped repository from "REPO=PROGRAM" (what a
 * container without `command` runs, its `args` appended, as with a real
 * image). AREAL_EINVAL for a malformed spec or a repository not mapped yet
 * (map it with sim_image_add first), AREAL_ERANGE when too long. */
int sim_image_set_entrypoint(sim_image_map *m, const char *spec, areal_error *err);

/* The ENTRYPOINT of `image`, or NULL when it has none (or is not mapped). */
const char *sim_image_entrypoint(const sim_image_map *m, const char *image);

/* ---- argv and environment ------------------------------------------------ */

/* A NULL-terminated vector of owned strings (argv or "NAME=value" envp). */
typedef struct sim_strv {
    char **v;
    size_t n, cap;
} sim_strv;

void sim_strv_free(sim_strv *s);

/* What the pod's environment is resolved against. */
typedef struct sim_env_ctx {
    const char *pod_ip;    /* status.podIP */
    const char *host_ip;   /* status.hostIP; NULL: "" */
    const char *image_dir; /* PATH head; NULL: none */
    /* the image's ENTRYPOINT, run when the container has no command; NULL: none */
    const char *entrypoint;
    /* "NAME=value" strings a kubelet adds for services (KUBERNETES_SERVICE_HOST,
     * ...), before the container's env, which may override them; NULL-terminated,
     * NULL: none */
    const char *const *service_env;
} sim_env_ctx;

/*
 * The environment of `container` of `pod` as a kubelet builds it: PATH (image
 * dir, then the system dirs), HOSTNAME (spec.hostname, else the pod name),
 * ctx->service_env, then the container's env in order, a later name replacing an earlier one;
 * `value` has $(NAME) references to earlier variables expanded ("$$(" stays
 * literal), `valueFrom.fieldRef` reads metadata.name|namespace|uid,
 * metadata.labels['k'], metadata.annotations['k'], spec.nodeName,
 * spec.serviceAccountName, status.podIP(s), status.hostIP(s).
 * Any other valueFrom (secretKeyRef, configMapKeyRef, resourceFieldRef) is
 * AREAL_EINVAL naming the variable (the kubelet's CreateContainerConfigError).
 * `argv` gets command + args with $(NAME) expanded from that environment
 * (ctx->entrypoint + args when the container has no command).
 * Both vectors are reset first; on failure both are freed.
 */
int sim_env_build(const json_t *pod, const json_t *container, const sim_env_ctx *ctx,
                  sim_strv *argv, sim_strv *envp, areal_error *err);

/* ---- status -------------------------------------------------------------- */

typedef enum sim_cstate {
    SIM_CSTATE_WAITING,
    SIM_CSTATE_RUNNING,
    SIM_CSTATE_TERMINATED,
} sim_cstate;

/* What the simulator knows of a pod with one container. Strings borrowed. */
typedef struct sim_report {
    const char *phase;       /* "Pending", "Running", "Succeeded", "Failed" */
    const char *pod_ip;      /* NULL: none yet */
    const char *host_ip;     /* NULL: none */
    const char *start_time;  /* RFC 3339: when the simulator accepted the pod */
    const char *container;   /* container name */
    const char *image;       /* container image */
    sim_cstate state;        /* the container's state */
    const char *reason;      /* waiting/terminated reason ("ErrImagePull", "Completed") */
    const char *message;     /* NULL: none */
    const char *started_at;  /* running/terminated */
    const char *finished_at; /* terminated */
    int exit_code;           /* terminated */
    int signal;              /* terminated by a signal (0: none) */
    const char *container_id;
} sim_report;

/*
 * The merge patch {"status": {...}} for pods/status: phase, podIP(s),
 * hostIP(s), startTime, the conditions PodScheduled, PodReadyToStartContainers,
 * Initialized, ContainersReady, Ready (True only while the container runs;
 * lastTransitionTime = `now`), and containerStatuses[0] with ready, started,
 * restartCount 0 and the state. New reference, NULL when out of memory.
 */
json_t *sim_status_patch(const sim_report *r, const char *now);

/* RFC 3339 UTC time of `t` ("2026-11-29T23:00:00Z") into buf (>= 21 bytes). */
void sim_rfc3339(int64_t t, char *buf, size_t cap);

#endif
