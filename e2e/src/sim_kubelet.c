/*
 * sim_kubelet.c - the node simulator's loop (see areal/simkubelet.h).
 *
 * What: a reflector thread lists and watches every bound pod
 * (fieldSelector spec.nodeName!=) and queues the objects; the main thread
 * owns all state and every side effect: it applies the queue to its pod
 * table, starts pods on simulated nodes, reaps exits, drives deletions
 * (SIGTERM, SIGKILL at the deadline, final status, DELETE with grace 0),
 * rewrites hosts files when the set of pod IPs changes, and patches
 * pods/status when a pod's report changed. It wakes every tick_ms, or at
 * once on SIGCHLD, SIGTERM or SIGINT (sigtimedwait: no signal handler, no
 * global state).
 * How: a failed API call leaves the pod marked dirty and is tried again
 * RETRY_MS later (the client itself retries only once, so an API server that
 * is down - scenario (e) - never stalls reaping); a 4xx that retrying cannot
 * fix is logged once and dropped. Pods the simulator did not
 * start (already terminal when first seen) are only deleted on request.
 * Rejected: one thread per pod (process waits and API calls would need locks
 * on shared tables); restarting containers (the operator's pods use
 * restartPolicy Never; other policies are reported as for Never).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "areal/clock.h"
#include "areal/kube/watch.h"
#include "areal/log.h"
#include "areal/simkubelet.h"

#define HOSTS_MAX  (256 * 1024)
#define NODES_MAX  512
#define DIR_MAX    1024
#define REASON_MAX 64
#define MSG_MAX    512
#define RETRY_MS   500 /* pause after a failed status write or delete */

typedef enum pstate {
    P_NEW,     /* seen, not started (its node may not be known yet) */
    P_WAITING, /* could not start: image or config error, reported waiting */
    P_RUNNING, /* its process runs */
    P_EXITED,  /* its process ended; terminal status reported */
    P_LOST,    /* its node died: nothing more is done or reported */
    P_FOREIGN, /* already terminal when first seen: only deleted on request */
} pstate;

typedef struct pod {
    char ns[SIM_NAME_MAX], name[SIM_NAME_MAX], uid[64], node[SIM_NAME_MAX];
    char hostname[64], subdomain[64], container[64], image[256];
    char ip[SIM_IP_MAX], host_ip[SIM_IP_MAX];
    char dir[DIR_MAX];
    char reason[REASON_MAX], message[MSG_MAX];
    char term_path[DIR_MAX + 128];                  /* "": no termination-message file */
    char term_msg[SIM_TERMINATION_MESSAGE_MAX + 1]; /* its first bytes, read on exit */
    char start_time[32], started_at[32], finished_at[32], cid[48];
    json_t *obj;
    pstate st;
    pid_t pid;
    int exit_code, signal;
    bool has_ip, deleting, term_sent, killed, dirty, delete_sent, gone, seen;
    long grace_s;
    int64_t kill_at_ms;
    int64_t retry_at_ms; /* no API call for this pod before (after a failure) */
} pod;

enum { Q_UPSERT, Q_DELETE, Q_REPLACE };
typedef struct qitem {
    int kind;
    json_t *obj;
} qitem;

typedef struct names {
    char (*v)[SIM_NAME_MAX];
    size_t n;
} names;

typedef struct node_ip {
    char name[SIM_NAME_MAX], ip[SIM_IP_MAX];
} node_ip;

typedef struct sim {
    kube_client *c;
    const sim_kubelet_opts *o;
    sim_ipalloc ips;
    pod **pods;
    size_t n, cap;
    bool hosts_dirty;
    char pods_dir[DIR_MAX];
    names nodes, stopped;
    node_ip *host_ips;
    size_t n_host_ips;
    /* shared with the reflector thread, under mu */
    pthread_mutex_t mu;
    qitem *q;
    size_t qn, qcap;
    bool watch_done;
    int watch_rc;
    areal_error watch_err;
    kube_watch *w;
} sim;

static void now_text(char *buf, size_t cap) {
    sim_rfc3339((int64_t)time(NULL), buf, cap);
}

/* ---- the reflector thread -------------------------------------------------- */

static int enqueue(sim *s, int kind, json_t *obj) {
    pthread_mutex_lock(&s->mu);
    if (s->qn == s->qcap) {
        size_t cap = s->qcap ? s->qcap * 2 : 64;
        qitem *q = realloc(s->q, cap * sizeof *q);
        if (q == NULL) {
            pthread_mutex_unlock(&s->mu);
            return KUBE_ENOMEM;
        }
        s->q = q;
        s->qcap = cap;
    }
    s->q[s->qn++] = (qitem){kind, json_incref(obj)};
    pthread_mutex_unlock(&s->mu);
    return KUBE_OK;
}

static int on_replace(void *ud, json_t *list) {
    return enqueue(ud, Q_REPLACE, list);
}

static int on_event(void *ud, const kube_event *ev) {
    if (ev->type == KUBE_EVENT_ERROR)
        return KUBE_OK;
    return enqueue(ud, ev->type == KUBE_EVENT_DELETED ? Q_DELETE : Q_UPSERT, ev->object);
}

static void *watch_main(void *arg) {
    sim *s = arg;
    kube_resource res = {NULL, "v1", "pods", NULL};
    kube_watch_opts wo = {.field_selector = "spec.nodeName!=", .timeout_seconds = 60};
    kube_reflector_fns fns = {.replace = on_replace, .event = on_event, .ud = s};
    kube_error ke;
    kube_error_clear(&ke);
    int rc = kube_reflector_run(s->w, &res, &wo, &fns, &ke);
    pthread_mutex_lock(&s->mu);
    s->watch_done = true;
    s->watch_rc = rc;
    areal_error_set(&s->watch_err, AREAL_EIO, -1, "the pod watch ended: %s", ke.msg);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- node lists ---------------------------------------------------------------- */

static void load_names(const char *path, names *out) {
    out->n = 0;
    FILE *f = path ? fopen(path, "r") : NULL;
    if (f == NULL)
        return;
    if (out->v == NULL && (out->v = calloc(NODES_MAX, sizeof *out->v)) == NULL) {
        fclose(f);
        return;
    }
    char line[SIM_NAME_MAX + 2];
    while (out->n < NODES_MAX && fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] != '\0' && strlen(line) < SIM_NAME_MAX)
            memcpy(out->v[out->n++], line, strlen(line) + 1);
    }
    fclose(f);
}

static bool has_name(const names *l, const char *n) {
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], n) == 0)
            return true;
    return false;
}

/* The node's InternalIP (cached; "" when it cannot be read). */
static const char *host_ip_of(sim *s, const char *node) {
    for (size_t i = 0; i < s->n_host_ips; i++)
        if (strcmp(s->host_ips[i].name, node) == 0)
            return s->host_ips[i].ip;
    kube_resource res = {NULL, "v1", "nodes", NULL};
    json_t *n = NULL;
    kube_error ke;
    if (kube_get(s->c, &res, node, &n, &ke) != KUBE_OK)
        return "";
    node_ip *grown = realloc(s->host_ips, (s->n_host_ips + 1) * sizeof *grown);
    if (grown == NULL) {
        json_decref(n);
        return "";
    }
    s->host_ips = grown;
    node_ip *e = &s->host_ips[s->n_host_ips++];
    snprintf(e->name, sizeof e->name, "%s", node);
    e->ip[0] = '\0';
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(json_object_get(n, "status"), "addresses"), i, a) {
        const char *t = json_string_value(json_object_get(a, "type"));
        const char *v = json_string_value(json_object_get(a, "address"));
        if (t && v && strcmp(t, "InternalIP") == 0)
            snprintf(e->ip, sizeof e->ip, "%s", v);
    }
    json_decref(n);
    return e->ip;
}

/* A node's kubelet lives while the node is simulated here and not stopped. */
static bool node_alive(void *ud, const char *name) {
    sim *s = ud;
    return has_name(&s->nodes, name) && !has_name(&s->stopped, name);
}

/* ---- the pod table ---------------------------------------------------------------- */

static const char *meta_str(const json_t *o, const char *k) {
    return json_string_value(json_object_get(json_object_get(o, "metadata"), k));
}

static const char *spec_str(const json_t *o, const char *k) {
    return json_string_value(json_object_get(json_object_get(o, "spec"), k));
}

/* The live entry of ns/name (an entry forgotten this tick is skipped: a new
 * incarnation of the name may arrive in the same batch of events). */
static pod *find(sim *s, const char *ns, const char *name) {
    for (size_t i = 0; i < s->n; i++)
        if (!s->pods[i]->gone && strcmp(s->pods[i]->ns, ns) == 0 &&
            strcmp(s->pods[i]->name, name) == 0)
            return s->pods[i];
    return NULL;
}

static void release_ip(sim *s, pod *p) {
    if (!p->has_ip)
        return;
    sim_ipalloc_put(&s->ips, p->ip, NULL);
    p->has_ip = false;
    s->hosts_dirty = true;
}

/* Kills a running pod's process group at once and reaps it. */
static void kill_now(pod *p) {
    if (p->st != P_RUNNING)
        return;
    kill(-p->pid, SIGKILL);
    kill(p->pid, SIGKILL);
    int status;
    while (waitpid(p->pid, &status, 0) < 0 && errno == EINTR)
        ;
}

/* The pod object is gone from the API: stop its process, free its IP. */
static void forget(sim *s, pod *p) {
    if (p->st == P_RUNNING)
        areal_log(AREAL_LOG_INFO, "kubelet", NULL,
                  "pod %s/%s deleted while running: killing pid %d", p->ns, p->name, (int)p->pid);
    kill_now(p);
    release_ip(s, p);
    p->st = P_LOST;
    p->gone = true;
}

static void upsert(sim *s, json_t *obj) {
    const char *ns = meta_str(obj, "namespace"), *name = meta_str(obj, "name");
    const char *uid = meta_str(obj, "uid"), *node = spec_str(obj, "nodeName");
    if (ns == NULL || name == NULL || uid == NULL || node == NULL || node[0] == '\0')
        return;
    pod *p = find(s, ns, name);
    if (p != NULL && strcmp(p->uid, uid) != 0) {
        forget(s, p); /* an older incarnation of the name, missed deletion */
        p = NULL;
    }
    if (p == NULL) {
        if (s->n == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 64;
            pod **v = realloc(s->pods, cap * sizeof *v);
            if (v == NULL)
                return;
            s->pods = v;
            s->cap = cap;
        }
        if ((p = calloc(1, sizeof *p)) == NULL)
            return;
        s->pods[s->n++] = p;
        snprintf(p->ns, sizeof p->ns, "%s", ns);
        snprintf(p->name, sizeof p->name, "%s", name);
        snprintf(p->uid, sizeof p->uid, "%s", uid);
        snprintf(p->node, sizeof p->node, "%s", node);
        const char *h = spec_str(obj, "hostname"), *sd = spec_str(obj, "subdomain");
        snprintf(p->hostname, sizeof p->hostname, "%s", h && h[0] ? h : name);
        snprintf(p->subdomain, sizeof p->subdomain, "%s", sd ? sd : "");
        p->st = P_NEW;
    }
    p->seen = true;
    json_decref(p->obj);
    p->obj = json_incref(obj);
    if (meta_str(obj, "deletionTimestamp") != NULL && !p->deleting) {
        p->deleting = true;
        json_t *g = json_object_get(json_object_get(obj, "metadata"), "deletionGracePeriodSeconds");
        json_t *t = json_object_get(json_object_get(obj, "spec"), "terminationGracePeriodSeconds");
        p->grace_s = json_is_integer(g)   ? (long)json_integer_value(g)
                     : json_is_integer(t) ? (long)json_integer_value(t)
                                          : 30;
    }
}

static void apply_queue(sim *s) {
    pthread_mutex_lock(&s->mu);
    qitem *q = s->q;
    size_t n = s->qn;
    s->q = NULL;
    s->qn = s->qcap = 0;
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < n; i++) {
        json_t *o = q[i].obj;
        if (q[i].kind == Q_UPSERT) {
            upsert(s, o);
        } else if (q[i].kind == Q_DELETE) {
            const char *ns = meta_str(o, "namespace"), *name = meta_str(o, "name");
            const char *uid = meta_str(o, "uid");
            pod *p = ns && name ? find(s, ns, name) : NULL;
            if (p != NULL && uid != NULL && strcmp(p->uid, uid) == 0)
                forget(s, p);
        } else {
            for (size_t k = 0; k < s->n; k++)
                s->pods[k]->seen = false;
            size_t j;
            json_t *item;
            json_array_foreach(json_object_get(o, "items"), j, item) upsert(s, item);
            for (size_t k = 0; k < s->n; k++)
                if (!s->pods[k]->seen && !s->pods[k]->gone)
                    forget(s, s->pods[k]);
        }
        json_decref(o);
    }
    free(q);
}

/* ---- hosts files ------------------------------------------------------------------ */

/* Rewrites the file in place (a bind mount pins its inode): write, then cut. */
static int write_in_place(const char *path, const char *text, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    ssize_t w = pwrite(fd, text, len, 0);
    int rc = (w == (ssize_t)len && ftruncate(fd, (off_t)len) == 0) ? 0 : -1;
    close(fd);
    return rc;
}

static void write_hosts(sim *s) {
    sim_host_entry *e = calloc(s->n + 1, sizeof *e);
    char *buf = malloc(HOSTS_MAX);
    size_t n = 0;
    for (size_t i = 0; e != NULL && i < s->n; i++) {
        pod *p = s->pods[i];
        if (p->has_ip)
            e[n++] = (sim_host_entry){p->ip, p->hostname, p->subdomain, p->ns};
    }
    for (size_t i = 0; e != NULL && buf != NULL && i < s->n; i++) {
        pod *p = s->pods[i];
        if (!p->has_ip)
            continue;
        sim_host_entry self = {p->ip, p->hostname, p->subdomain, p->ns};
        size_t len = 0;
        areal_error err;
        char path[DIR_MAX + 16];
        snprintf(path, sizeof path, "%s/hosts", p->dir);
        if (sim_hosts_render(&self, e, n, s->o->cluster_domain, buf, HOSTS_MAX, &len, &err) != 0)
            areal_log(AREAL_LOG_WARN, "kubelet", NULL, "hosts file of %s/%s: %s", p->ns, p->name,
                      err.msg);
        else if (write_in_place(path, buf, len) != 0)
            areal_log(AREAL_LOG_WARN, "kubelet", NULL, "cannot write %s: %s", path,
                      strerror(errno));
    }
    free(buf);
    free(e);
    s->hosts_dirty = false;
}

/* ---- starting a pod ------------------------------------------------------------------ */

/* The container cannot be created: waiting with `reason`, phase Pending. */
static void wait_with(pod *p, const char *reason, const char *msg) {
    p->st = P_WAITING;
    if (!p->has_ip)
        p->ip[0] = '\0';
    snprintf(p->reason, sizeof p->reason, "%s", reason);
    snprintf(p->message, sizeof p->message, "%s", msg);
    p->dirty = true;
    areal_log(AREAL_LOG_INFO, "kubelet", NULL, "pod %s/%s waiting: %s: %s", p->ns, p->name, reason,
              msg);
}

/* The container was created but did not start: terminated 128, StartError. */
static void start_error(sim *s, pod *p, const char *msg) {
    release_ip(s, p);
    p->st = P_EXITED;
    p->exit_code = 128;
    snprintf(p->reason, sizeof p->reason, "StartError");
    snprintf(p->message, sizeof p->message, "%s", msg);
    now_text(p->started_at, sizeof p->started_at);
    now_text(p->finished_at, sizeof p->finished_at);
    p->dirty = true;
    areal_log(AREAL_LOG_WARN, "kubelet", NULL, "pod %s/%s failed to start: %s", p->ns, p->name,
              msg);
}

static void start(sim *s, pod *p) {
    areal_error err;
    const json_t *spec = json_object_get(p->obj, "spec");
    const json_t *cs = json_object_get(spec, "containers");
    const json_t *c = json_array_get(cs, 0);
    const char *cname = json_string_value(json_object_get(c, "name"));
    const char *image = json_string_value(json_object_get(c, "image"));
    snprintf(p->container, sizeof p->container, "%s", cname ? cname : "");
    snprintf(p->image, sizeof p->image, "%s", image ? image : "");
    now_text(p->start_time, sizeof p->start_time);
    snprintf(p->host_ip, sizeof p->host_ip, "%s", host_ip_of(s, p->node));
    if (json_array_size(cs) != 1 || json_array_size(json_object_get(spec, "initContainers")) > 0) {
        wait_with(p, "CreateContainerConfigError",
                  "the node simulator runs pods of exactly one container and no init containers");
        return;
    }
    const char *dir = sim_image_dir(&s->o->images, image);
    if (dir == NULL) {
        char msg[MSG_MAX];
        snprintf(msg, sizeof msg,
                 "image '%s' is not mapped to a local directory (areal-e2e-kubelet --image "
                 "REPOSITORY=DIR)",
                 image ? image : "");
        wait_with(p, "ErrImagePull", msg);
        return;
    }
    if (sim_ipalloc_get(&s->ips, p->ip, &err) != AREAL_OK) {
        wait_with(p, "FailedCreatePodSandBox", err.msg);
        return;
    }
    p->has_ip = true;
    s->hosts_dirty = true;
    int dl = snprintf(p->dir, sizeof p->dir, "%s/%s_%s_%s", s->pods_dir, p->ns, p->name, p->uid);
    if (dl < 0 || (size_t)dl >= sizeof p->dir || (mkdir(p->dir, 0755) != 0 && errno != EEXIST)) {
        char msg[MSG_MAX];
        int e = dl < 0 || (size_t)dl >= sizeof p->dir ? ENAMETOOLONG : errno;
        if (snprintf(msg, sizeof msg, "cannot create the pod directory %s: %s", p->dir,
                     strerror(e)) < 0)
            msg[0] = '\0';
        release_ip(s, p);
        wait_with(p, "FailedCreatePodSandBox", msg);
        return;
    }
    write_hosts(s);
    bool sa = false;
    if (sim_project_service_account(s->c, p->obj, p->dir, &sa, &err) != AREAL_OK) {
        /* as a kubelet retries a mount: the pod stays ContainerCreating */
        release_ip(s, p);
        p->retry_at_ms = areal_now_ms() + RETRY_MS * 2;
        areal_log(AREAL_LOG_INFO, "kubelet", NULL,
                  "pod %s/%s: service-account volume not ready (retry in %d ms): %s", p->ns,
                  p->name, RETRY_MS * 2, err.msg);
        return;
    }
    char secrets[DIR_MAX + 16];
    snprintf(secrets, sizeof secrets, "%s/secrets", p->dir);
    sim_mounts *mounts = calloc(1, sizeof *mounts);
    if (mounts == NULL) {
        release_ip(s, p);
        wait_with(p, "FailedCreatePodSandBox", "out of memory");
        return;
    }
    int vrc = sim_volumes_prepare(s->c, p->obj, c, p->dir, mounts, &err);
    if (vrc == AREAL_EIO) { /* a ConfigMap not there yet: retried, as a kubelet does */
        free(mounts);
        release_ip(s, p);
        p->retry_at_ms = areal_now_ms() + RETRY_MS * 2;
        areal_log(AREAL_LOG_INFO, "kubelet", NULL,
                  "pod %s/%s: volumes not ready (retry in %d ms): %s", p->ns, p->name, RETRY_MS * 2,
                  err.msg);
        return;
    }
    if (vrc != AREAL_OK) {
        free(mounts);
        release_ip(s, p);
        wait_with(p, "CreateContainerConfigError", err.msg);
        return;
    }
    const char *term_at = NULL;
    if (sim_termination_prepare(c, p->dir, p->term_path, sizeof p->term_path, &term_at, &err) !=
        AREAL_OK) {
        free(mounts);
        release_ip(s, p);
        wait_with(p, "CreateContainerConfigError", err.msg);
        return;
    }
    sim_strv argv = {0}, envp = {0};
    sim_env_ctx ctx = {.pod_ip = p->ip,
                       .host_ip = p->host_ip,
                       .image_dir = dir,
                       .entrypoint = sim_image_entrypoint(&s->o->images, image),
                       .service_env = s->o->service_env};
    if (sim_env_build(p->obj, c, &ctx, &argv, &envp, &err) != AREAL_OK) {
        free(mounts);
        release_ip(s, p);
        wait_with(p, "CreateContainerConfigError", err.msg);
        return;
    }
    char path[DIR_MAX + 256], log[DIR_MAX + 80], hosts[DIR_MAX + 16];
    const char *wd = json_string_value(json_object_get(c, "workingDir"));
    snprintf(log, sizeof log, "%s/%s.log", p->dir, p->container);
    snprintf(hosts, sizeof hosts, "%s/hosts", p->dir);
    if (sim_spawn_resolve(argv.v[0], dir, path, sizeof path, &err) != AREAL_OK) {
        start_error(s, p, err.msg);
    } else {
        sim_spawn sp = {.path = path,
                        .argv = argv.v,
                        .envp = envp.v,
                        .workdir = wd && wd[0] ? wd : p->dir,
                        .log_path = log,
                        .hosts_path = hosts,
                        .hostname = p->hostname,
                        .secrets_path = sa ? secrets : NULL,
                        .mount_src = mounts->srcp,
                        .mount_dst = mounts->dstp,
                        .n_mounts = mounts->n,
                        .termination_src = term_at ? p->term_path : NULL,
                        .termination_dst = term_at};
        if (sim_spawn_start(&sp, &p->pid, &err) != AREAL_OK) {
            start_error(s, p, err.msg);
        } else {
            p->st = P_RUNNING;
            now_text(p->started_at, sizeof p->started_at);
            snprintf(p->cid, sizeof p->cid, "sim://%d", (int)p->pid);
            p->dirty = true;
            char pidfile[DIR_MAX + 8], text[32];
            snprintf(pidfile, sizeof pidfile, "%s/pid", p->dir);
            int n = snprintf(text, sizeof text, "%d\n", (int)p->pid);
            if (write_in_place(pidfile, text, (size_t)n) != 0)
                areal_log(AREAL_LOG_WARN, "kubelet", NULL, "cannot write %s: %s", pidfile,
                          strerror(errno));
            areal_log(AREAL_LOG_INFO, "kubelet", NULL, "pod %s/%s started on %s: pid %d, ip %s, %s",
                      p->ns, p->name, p->node, (int)p->pid, p->ip, path);
        }
    }
    sim_strv_free(&argv);
    sim_strv_free(&envp);
    free(mounts);
}

/* ---- one pod, one tick -------------------------------------------------------------- */

static void reap(sim *s, pod *p) {
    int status;
    pid_t r = waitpid(p->pid, &status, WNOHANG);
    if (r != p->pid)
        return;
    /* ranks left behind in the group go with the container */
    kill(-p->pid, SIGKILL);
    p->st = P_EXITED;
    if (WIFSIGNALED(status)) {
        p->signal = WTERMSIG(status);
        p->exit_code = 128 + p->signal;
    } else {
        p->exit_code = WEXITSTATUS(status);
    }
    snprintf(p->reason, sizeof p->reason, "%s", p->exit_code == 0 ? "Completed" : "Error");
    p->message[0] = '\0';
    /* the container's last words, as a kubelet reads them on exit */
    sim_termination_read(p->term_path, p->term_msg, sizeof p->term_msg);
    now_text(p->finished_at, sizeof p->finished_at);
    release_ip(s, p);
    p->dirty = true;
    areal_log(AREAL_LOG_INFO, "kubelet", NULL, "pod %s/%s exited with code %d", p->ns, p->name,
              p->exit_code);
}

/* A 4xx other than conflict or throttling: asking again cannot help. */
static bool permanent(const kube_error *ke) {
    return ke->http_status >= 400 && ke->http_status < 500 && ke->http_status != 409 &&
           ke->http_status != 429;
}

static void report(sim *s, pod *p) {
    char now[32];
    now_text(now, sizeof now);
    bool term = p->st == P_EXITED;
    const char *phase = p->st == P_RUNNING ? "Running"
                        : term             ? (p->exit_code == 0 ? "Succeeded" : "Failed")
                                           : "Pending";
    sim_report r = {
        .phase = phase,
        .pod_ip = p->ip[0] ? p->ip : NULL,
        .host_ip = p->host_ip[0] ? p->host_ip : NULL,
        .start_time = p->start_time,
        .container = p->container,
        .image = p->image,
        .state = p->st == P_RUNNING ? SIM_CSTATE_RUNNING
                 : term             ? SIM_CSTATE_TERMINATED
                                    : SIM_CSTATE_WAITING,
        .reason = p->reason[0] ? p->reason : NULL,
        .message = p->message[0]            ? p->message
                   : term && p->term_msg[0] ? p->term_msg
                                            : NULL,
        .started_at = p->started_at[0] ? p->started_at : NULL,
        .finished_at = p->finished_at[0] ? p->finished_at : NULL,
        .exit_code = p->exit_code,
        .signal = p->signal,
        .container_id = p->cid[0] ? p->cid : NULL,
    };
    json_t *patch = sim_status_patch(&r, now);
    if (patch == NULL)
        return;
    kube_resource res = {NULL, "v1", "pods", p->ns};
    kube_error ke;
    int rc = kube_patch(s->c, &res, p->name, KUBE_PATCH_MERGE, patch, "status", NULL, &ke);
    json_decref(patch);
    if (rc == KUBE_OK || rc == KUBE_ENOTFOUND) {
        p->dirty = false; /* (not found: the DELETED event follows) */
    } else if (permanent(&ke)) {
        p->dirty = false;
        areal_log(AREAL_LOG_WARN, "kubelet", NULL, "status of %s/%s refused, not retried: %s",
                  p->ns, p->name, ke.msg);
    } else {
        p->retry_at_ms = areal_now_ms() + RETRY_MS;
        areal_log(AREAL_LOG_INFO, "kubelet", NULL,
                  "status of %s/%s not written (retry in %d ms): %s", p->ns, p->name, RETRY_MS,
                  ke.msg);
    }
}

static void delete_now(sim *s, pod *p) {
    kube_resource res = {NULL, "v1", "pods", p->ns};
    kube_delete_opts d = {.uid = p->uid, .grace_period_seconds = 0};
    kube_error ke;
    int rc = kube_delete(s->c, &res, p->name, &d, NULL, &ke);
    if (rc == KUBE_OK || rc == KUBE_ENOTFOUND || rc == KUBE_ECONFLICT || permanent(&ke)) {
        p->delete_sent = true;
        if (rc != KUBE_OK && rc != KUBE_ENOTFOUND && rc != KUBE_ECONFLICT)
            areal_log(AREAL_LOG_WARN, "kubelet", NULL, "delete of %s/%s refused, not retried: %s",
                      p->ns, p->name, ke.msg);
    } else {
        p->retry_at_ms = areal_now_ms() + RETRY_MS;
        areal_log(AREAL_LOG_WARN, "kubelet", NULL, "delete of %s/%s failed (retry in %d ms): %s",
                  p->ns, p->name, RETRY_MS, ke.msg);
    }
}

static void step(sim *s, pod *p, int64_t now) {
    if (p->gone || p->st == P_LOST)
        return;
    if (!has_name(&s->nodes, p->node))
        return;
    if (has_name(&s->stopped, p->node)) {
        if (p->st == P_RUNNING)
            areal_log(AREAL_LOG_WARN, "kubelet", NULL, "node %s died: killing pod %s/%s (pid %d)",
                      p->node, p->ns, p->name, (int)p->pid);
        kill_now(p);
        release_ip(s, p);
        p->st = P_LOST;
        return;
    }
    if (p->st == P_NEW && now >= p->retry_at_ms) {
        const char *phase =
            json_string_value(json_object_get(json_object_get(p->obj, "status"), "phase"));
        if (phase != NULL && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0))
            p->st = P_FOREIGN;
        else if (p->deleting)
            p->st = P_FOREIGN; /* deleted before it started: nothing to stop */
        else
            start(s, p);
    }
    if (p->st == P_RUNNING) {
        reap(s, p);
        if (p->st == P_RUNNING && p->deleting && !p->term_sent) {
            areal_log(AREAL_LOG_INFO, "kubelet", NULL,
                      "pod %s/%s deleted: SIGTERM to pid %d, grace %lds", p->ns, p->name,
                      (int)p->pid, p->grace_s);
            kill(-p->pid, SIGTERM);
            p->term_sent = true;
            p->kill_at_ms = now + p->grace_s * 1000;
        } else if (p->st == P_RUNNING && p->term_sent && !p->killed && now >= p->kill_at_ms) {
            areal_log(AREAL_LOG_WARN, "kubelet", NULL,
                      "pod %s/%s outlived its grace period: SIGKILL", p->ns, p->name);
            kill(-p->pid, SIGKILL);
            p->killed = true;
        }
    }
    if (now < p->retry_at_ms)
        return; /* the API server refused us a moment ago */
    if (p->dirty)
        report(s, p);
    if (p->deleting && !p->dirty && !p->delete_sent && p->st != P_RUNNING)
        delete_now(s, p);
}

static void free_pod(pod *p) {
    json_decref(p->obj);
    free(p);
}

static void sweep(sim *s) {
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->pods[i]->gone)
            free_pod(s->pods[i]);
        else
            s->pods[k++] = s->pods[i];
    }
    s->n = k;
}

/* ---- the loop ------------------------------------------------------------------------ */

static void shutdown_pods(sim *s) {
    for (size_t i = 0; i < s->n; i++)
        if (s->pods[i]->st == P_RUNNING)
            kill(-s->pods[i]->pid, SIGTERM);
    int64_t deadline = areal_now_ms() + 2000;
    for (;;) {
        bool left = false;
        for (size_t i = 0; i < s->n; i++) {
            pod *p = s->pods[i];
            if (p->st != P_RUNNING)
                continue;
            if (waitpid(p->pid, NULL, WNOHANG) == p->pid) {
                kill(-p->pid, SIGKILL);
                p->st = P_EXITED;
            } else {
                left = true;
            }
        }
        if (!left)
            break;
        if (areal_now_ms() >= deadline) {
            for (size_t i = 0; i < s->n; i++)
                kill_now(s->pods[i]);
            break;
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int sim_kubelet_run(kube_client *c, const sim_kubelet_opts *o, areal_error *err) {
    if (o->state_dir == NULL || o->nodes_file == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "the node simulator needs a state dir and a nodes file");
    sim *s = calloc(1, sizeof *s);
    if (s == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    s->c = c;
    s->o = o;
    int rc = sim_ipalloc_init(&s->ips, o->pod_cidr ? o->pod_cidr : "127.20.0.0/16", err);
    snprintf(s->pods_dir, sizeof s->pods_dir, "%s/pods", o->state_dir);
    if (rc == AREAL_OK && mkdir(s->pods_dir, 0755) != 0 && errno != EEXIST)
        rc = areal_error_set(err, AREAL_EIO, -1, "cannot create %s: %s", s->pods_dir,
                             strerror(errno));
    kube_error ke;
    if (rc == AREAL_OK && (s->w = kube_watch_new(c, &ke)) == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "%s", ke.msg);
    if (rc != AREAL_OK) {
        free(s);
        return rc;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, watch_main, s) != 0) {
        kube_watch_free(s->w);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return areal_error_set(err, AREAL_EIO, -1, "cannot start the watch thread");
    }
    areal_log(AREAL_LOG_INFO, "kubelet", NULL, "watching bound pods; pod IPs from %s, state in %s",
              o->pod_cidr ? o->pod_cidr : "127.20.0.0/16", o->state_dir);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGCHLD);
    long tick = o->tick_ms > 0 ? o->tick_ms : 50;
    unsigned long ticks = 0;
    int64_t revive_at = 0, sched_at = 0;
    size_t sched_rr = 0;
    for (;;) {
        apply_queue(s);
        if (ticks++ % 4 == 0) {
            load_names(o->nodes_file, &s->nodes);
            load_names(o->stopped_file, &s->stopped);
        }
        int64_t now = areal_now_ms();
        if (now >= revive_at) {
            int n = 0;
            areal_error nerr;
            if (sim_nodes_revive(c, node_alive, s, &n, &nerr) != AREAL_OK)
                areal_log(AREAL_LOG_WARN, "kubelet", NULL, "node status: %s", nerr.msg);
            else if (n > 0)
                areal_log(AREAL_LOG_INFO, "kubelet", NULL,
                          "posted Ready=True for %d node(s) marked Unknown", n);
            revive_at = now + 2000;
        }
        if (o->schedule_default && now >= sched_at) {
            const char *live[NODES_MAX];
            size_t n_live = 0;
            for (size_t i = 0; i < s->nodes.n; i++)
                if (!has_name(&s->stopped, s->nodes.v[i]))
                    live[n_live++] = s->nodes.v[i];
            int bound = 0;
            areal_error serr;
            if (sim_sched_bind_pending(c, live, n_live, &sched_rr, &bound, &serr) != AREAL_OK)
                areal_log(AREAL_LOG_WARN, "kubelet", NULL, "default-scheduler stand-in: %s",
                          serr.msg);
            else if (bound > 0)
                areal_log(AREAL_LOG_INFO, "kubelet", NULL,
                          "default-scheduler stand-in bound %d pod(s)", bound);
            sched_at = now + 1000;
        }
        for (size_t i = 0; i < s->n; i++)
            step(s, s->pods[i], now);
        if (s->hosts_dirty)
            write_hosts(s);
        sweep(s);
        pthread_mutex_lock(&s->mu);
        bool done = s->watch_done;
        pthread_mutex_unlock(&s->mu);
        if (done) {
            rc = s->watch_rc == KUBE_ESTOPPED ? AREAL_OK : AREAL_EIO;
            if (err != NULL && rc != AREAL_OK)
                *err = s->watch_err;
            break;
        }
        struct timespec ts = {tick / 1000, (tick % 1000) * 1000000L};
        int sig = sigtimedwait(&set, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            areal_log(AREAL_LOG_INFO, "kubelet", NULL, "signal %d: stopping every pod", sig);
            break;
        }
    }
    kube_watch_stop(s->w);
    pthread_join(th, NULL);
    shutdown_pods(s);
    apply_queue(s);
    for (size_t i = 0; i < s->n; i++)
        free_pod(s->pods[i]);
    free(s->pods);
    free(s->nodes.v);
    free(s->stopped.v);
    free(s->host_ips);
    kube_watch_free(s->w);
    pthread_mutex_destroy(&s->mu);
    free(s);
    return rc;
}
