/* fake_api.c - see fake_api.h. */
#include "fake_api.h"

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../../lib/kube/tests/util/kube_test_server.h"
#include "fake_api_gen.h"

enum { R_PODS, R_NODES, R_JOBS, R_SERVICES, R_CONFIGMAPS, R_EVENTS, R_COUNT };
static const char *const RES_NAME[R_COUNT] = {"pods",     "nodes",      "arealjobs",
                                              "services", "configmaps", "events"};
static const char *const RES_KIND[R_COUNT] = {"Pod",     "Node",      "AReaLJob",
                                              "Service", "ConfigMap", "Event"};

typedef struct logline {
    long rv;
    char *line;
} logline;

typedef struct evlog {
    logline *v;
    size_t n, cap;
} evlog;

static const char *const COUNTERS[] = {
    "list", "watch",        "create",        "bind",   "patch",        "delete",  "gone", "event",
    "get",  "bind-missing", "bind-conflict", "failed", "force-delete", "invalid", NULL};
#define N_COUNTERS 14

/* An injected failure: the next `times` requests of `what` on resource r (-1: all). */
typedef struct fault {
    char what[16]; /* "list", "create", "bind", "patch", "delete" */
    int r;
    int code;
    char reason[64];
    char msg[256];
    int times;
} fault;
#define MAX_FAULTS  16
#define TRACE_LINES 128

struct fake_api {
    kts *srv;
    pthread_mutex_t mu;
    pthread_cond_t changed;
    long rv;
    json_t *store[R_COUNT]; /* key -> object */
    evlog log[R_COUNT];
    bool gone[R_COUNT];
    bool drop[R_COUNT]; /* the next watch is cut off without its chunked end */
    bool validate;      /* pods and services are validated on create (fake_api_validate) */
    int gen_pods, gen_nodes;
    long counts[N_COUNTERS];
    fault faults[MAX_FAULTS];
    int n_faults;
    bool graceful_pods;
    char *trace[TRACE_LINES]; /* the last writes answered (fake_api_trace) */
    long n_trace;
};

/* ---- store and events (lock held) --------------------------------------------- */

static void count(fake_api *f, const char *what) {
    for (int i = 0; COUNTERS[i]; i++)
        if (strcmp(COUNTERS[i], what) == 0)
            f->counts[i]++;
}

static void log_event(fake_api *f, int r, const char *type, const json_t *obj) {
    json_t *ev = json_pack("{s:s,s:O}", "type", type, "object", obj);
    char *line = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    evlog *l = &f->log[r];
    if (line == NULL)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        logline *g = realloc(l->v, cap * sizeof *g);
        if (g == NULL) {
            free(line);
            return;
        }
        l->v = g;
        l->cap = cap;
    }
    l->v[l->n++] = (logline){f->rv, line};
    pthread_cond_broadcast(&f->changed);
}

static void key_of(const json_t *obj, char *key, size_t cap) {
    const json_t *m = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(m, "namespace"));
    const char *name = json_string_value(json_object_get(m, "name"));
    if (ns)
        snprintf(key, cap, "%s/%s", ns, name ? name : "");
    else
        snprintf(key, cap, "%s", name ? name : "");
}

/* Stamps and stores a copy of obj; returns the stored object (borrowed). */
static json_t *store_put(fake_api *f, int r, const json_t *obj, const char *type) {
    json_t *o = json_deep_copy(obj);
    if (o == NULL)
        return NULL;
    json_t *m = json_object_get(o, "metadata");
    if (!json_is_object(m)) {
        m = json_object();
        json_object_set_new(o, "metadata", m);
    }
    f->rv++;
    char rv[32];
    snprintf(rv, sizeof rv, "%ld", f->rv);
    json_object_set_new(m, "resourceVersion", json_string(rv));
    if (json_object_get(m, "uid") == NULL) {
        char uid[48];
        snprintf(uid, sizeof uid, "uid-%ld", f->rv);
        json_object_set_new(m, "uid", json_string(uid));
    }
    if (json_object_get(m, "creationTimestamp") == NULL) { /* set once, as the API server does */
        char ts[32];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
        json_object_set_new(m, "creationTimestamp", json_string(ts));
    }
    char key[512];
    key_of(o, key, sizeof key);
    if (type == NULL)
        type = json_object_get(f->store[r], key) ? "MODIFIED" : "ADDED";
    json_object_set_new(f->store[r], key, o);
    log_event(f, r, type, o);
    return o;
}

static void store_del(fake_api *f, int r, const char *key) {
    json_t *o = json_object_get(f->store[r], key);
    if (o == NULL)
        return;
    json_incref(o);
    json_object_del(f->store[r], key);
    f->rv++;
    char rv[32];
    snprintf(rv, sizeof rv, "%ld", f->rv);
    json_object_set_new(json_object_get(o, "metadata"), "resourceVersion", json_string(rv));
    log_event(f, r, "DELETED", o);
    json_decref(o);
}

static bool has_finalizers(const json_t *o) {
    return json_array_size(json_object_get(json_object_get(o, "metadata"), "finalizers")) > 0;
}

/* RFC 7386 merge patch of `patch` into `target` (an object). */
static void merge(json_t *target, const json_t *patch) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)patch, k, v) {
        json_t *cur = json_object_get(target, k);
        if (json_is_null(v))
            json_object_del(target, k);
        else if (json_is_object(v) && json_is_object(cur))
            merge(cur, v);
        else if (json_is_object(v)) {
            json_t *fresh = json_object();
            merge(fresh, v);
            json_object_set_new(target, k, fresh);
        } else
            json_object_set_new(target, k, json_deep_copy(v));
    }
}

/* ---- requests ----------------------------------------------------------------------- */

typedef struct route {
    int r;                   /* resource, -1 when unknown */
    char ns[128], name[256]; /* "" when absent */
    char sub[32];            /* "status", "binding" or "" */
    bool watch;
    long rv;    /* resourceVersion= (-1 absent) */
    long limit; /* limit= (0 absent) */
    long cont;  /* continue= offset */
} route;

static void query_value(const char *q, const char *key, char *out, size_t cap) {
    out[0] = '\0';
    size_t kl = strlen(key);
    for (const char *p = q; p && *p;) {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            size_t n = strcspn(p + kl + 1, "&");
            if (n >= cap)
                n = cap - 1;
            memcpy(out, p + kl + 1, n);
            out[n] = '\0';
            return;
        }
        p = strchr(p, '&');
        if (p)
            p++;
    }
}

static void parse_route(const char *target, route *rt) {
    memset(rt, 0, sizeof *rt);
    rt->r = -1;
    rt->rv = -1;
    char path[4096];
    snprintf(path, sizeof path, "%s", target);
    char *q = strchr(path, '?');
    if (q)
        *q++ = '\0';
    char *seg[16];
    int n = 0;
    for (char *save = NULL, *s = strtok_r(path, "/", &save); s && n < 16;
         s = strtok_r(NULL, "/", &save))
        seg[n++] = s;
    int i = 0;
    if (n > 0 && strcmp(seg[0], "api") == 0)
        i = 2; /* api, v1 */
    else if (n > 0 && strcmp(seg[0], "apis") == 0)
        i = 3; /* apis, group, version */
    if (i + 1 < n && strcmp(seg[i], "namespaces") == 0) {
        snprintf(rt->ns, sizeof rt->ns, "%s", seg[i + 1]);
        i += 2;
    }
    if (i < n)
        for (int r = 0; r < R_COUNT; r++)
            if (strcmp(seg[i], RES_NAME[r]) == 0)
                rt->r = r;
    if (i + 1 < n)
        snprintf(rt->name, sizeof rt->name, "%s", seg[i + 1]);
    if (i + 2 < n)
        snprintf(rt->sub, sizeof rt->sub, "%s", seg[i + 2]);
    char v[64];
    query_value(q, "watch", v, sizeof v);
    rt->watch = v[0] == '1' || strcmp(v, "true") == 0;
    query_value(q, "resourceVersion", v, sizeof v);
    rt->rv = v[0] ? strtol(v, NULL, 10) : -1;
    query_value(q, "limit", v, sizeof v);
    rt->limit = strtol(v, NULL, 10);
    query_value(q, "continue", v, sizeof v);
    rt->cont = strtol(v, NULL, 10);
}

static int answer_json(kts_answer *a, int status, const json_t *body) {
    a->status = status;
    a->body = json_dumps(body, JSON_COMPACT);
    a->len = a->body ? strlen(a->body) : 0;
    return 1;
}

static int answer_status(kts_answer *a, int code, const char *reason, const char *msg) {
    json_t *st = json_pack("{s:s,s:s,s:s,s:s,s:i}", "kind", "Status", "status", "Failure", "reason",
                           reason, "message", msg, "code", code);
    answer_json(a, code, st);
    json_decref(st);
    return 1;
}

/* A list page: stored objects first, then generated ones (lock held). */
static int do_list(fake_api *f, const route *rt, kts_answer *a) {
    count(f, "list");
    fake_text t = {0};
    fake_putf(&t, "{\"kind\":\"%sList\",\"apiVersion\":\"v1\",\"items\":[", RES_KIND[rt->r]);
    long stored = (long)json_object_size(f->store[rt->r]);
    long gen = rt->r == R_PODS ? f->gen_pods : rt->r == R_NODES ? f->gen_nodes : 0;
    long total = stored + gen, from = rt->cont, to = rt->limit > 0 ? from + rt->limit : total;
    if (to > total)
        to = total;
    long at = 0;
    const char *k;
    json_t *o;
    int first = 1;
    json_object_foreach(f->store[rt->r], k, o) {
        if (at >= from && at < to &&
            (rt->ns[0] == '\0' || strncmp(k, rt->ns, strlen(rt->ns)) == 0)) {
            char *s = json_dumps(o, JSON_COMPACT);
            if (s) {
                fake_putf(&t, "%s", first ? "" : ",");
                fake_put(&t, s, strlen(s));
                first = 0;
            }
            free(s);
        }
        at++;
    }
    for (long g = from > stored ? from - stored : 0; stored + g < to; g++) {
        fake_put(&t, first ? "" : ",", first ? 0 : 1);
        first = 0;
        if (rt->r == R_PODS)
            fake_gen_pod(&t, (int)g, f->gen_nodes);
        else
            fake_gen_node(&t, (int)g);
    }
    fake_putf(&t, "],\"metadata\":{\"resourceVersion\":\"%ld\"", f->rv);
    if (to < total)
        fake_putf(&t, ",\"continue\":\"%ld\"", to);
    fake_put(&t, "}}", 2);
    if (t.oom) {
        free(t.p);
        return answer_status(a, 500, "InternalError", "fake_api: out of memory");
    }
    a->status = 200;
    a->body = t.p;
    a->len = t.n;
    return 1;
}

/* A watch from rt->rv: what is newer, or a bookmark after 100 ms (lock held). */
static int do_watch(fake_api *f, const route *rt, kts_answer *a) {
    count(f, "watch");
    a->stream = 1;
    a->end = KTS_END_CLEAN;
    if (f->gone[rt->r]) {
        f->gone[rt->r] = false;
        count(f, "gone");
        const char *g = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"status\":"
                        "\"Failure\",\"message\":\"too old resource version\",\"reason\":"
                        "\"Expired\",\"code\":410}}\n";
        a->body = strdup(g);
        a->len = a->body ? strlen(g) : 0;
        return 1;
    }
    long from = rt->rv >= 0 ? rt->rv : f->rv;
    evlog *l = &f->log[rt->r];
    if (l->n == 0 || l->v[l->n - 1].rv <= from) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while ((l->n == 0 || l->v[l->n - 1].rv <= from) && !f->gone[rt->r])
            if (pthread_cond_timedwait(&f->changed, &f->mu, &until) == ETIMEDOUT)
                break;
    }
    fake_text t = {0};
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].rv > from) {
            fake_put(&t, l->v[i].line, strlen(l->v[i].line));
            fake_put(&t, "\n", 1);
        }
    if (t.n == 0)
        fake_putf(&t,
                  "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"metadata\":{"
                  "\"resourceVersion\":\"%ld\"}}}\n",
                  RES_KIND[rt->r], f->rv > from ? f->rv : from);
    a->body = t.p;
    a->len = t.n;
    if (f->drop[rt->r]) { /* the connection breaks after what was sent */
        f->drop[rt->r] = false;
        a->end = KTS_END_DROP;
    }
    return 1;
}

/* ---- validation of children, as the real API server's (a few rules) ------------ */

static bool dns_label(const char *s, bool first_digit_ok) {
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && !(c == '-' && i > 0 && i + 1 < n))
            return false;
    }
    return first_digit_ok || !(s[0] >= '0' && s[0] <= '9');
}

/* As Kubernetes 1.36 (RelaxedEnvironmentVariableValidation, on by default):
 * any printable ASCII but '=', not empty. */
static bool env_name(const char *s) {
    if (s == NULL || s[0] == '\0')
        return false;
    for (const char *c = s; *c; c++)
        if (*c < 32 || *c > 126 || *c == '=')
            return false;
    return true;
}

/* The first field of a pod or Service the real server refuses, as its 422 message
 * ("Pod \"x\" is invalid: spec.containers[0].env[3].name: Invalid value: ..."), or false. */
static bool invalid_child(int r, const json_t *obj, char *msg, size_t cap) {
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (r == R_SERVICES) {
        if (!dns_label(name, false)) {
            snprintf(msg, cap,
                     "Service \"%s\" is invalid: metadata.name: Invalid value: \"%s\": a DNS-1035 "
                     "label must consist of lower case alphanumeric characters or '-', start with "
                     "an alphabetic character, and end with an alphanumeric character (at most 63)",
                     name ? name : "", name ? name : "");
            return true;
        }
        return false;
    }
    if (r != R_PODS)
        return false;
    const json_t *spec = json_object_get(obj, "spec");
    const json_t *sub = json_object_get(spec, "subdomain");
    const char *host = json_string_value(json_object_get(spec, "hostname"));
    if ((sub != NULL || host != NULL) && !dns_label(host ? host : name, true)) {
        snprintf(msg, cap,
                 "Pod \"%s\" is invalid: %s: Invalid value: \"%s\": must be no more than 63 "
                 "characters and a DNS-1123 label",
                 name ? name : "", host ? "spec.hostname" : "metadata.name", host ? host : name);
        return true;
    }
    if (json_is_string(sub) && !dns_label(json_string_value(sub), true)) {
        snprintf(msg, cap, "Pod \"%s\" is invalid: spec.subdomain: Invalid value: \"%s\"",
                 name ? name : "", json_string_value(sub));
        return true;
    }
    size_t i, j;
    json_t *v, *c, *e;
    json_array_foreach(json_object_get(spec, "volumes"), i, v) {
        const char *vn = json_string_value(json_object_get(v, "name"));
        if (!dns_label(vn, true)) {
            snprintf(msg, cap,
                     "Pod \"%s\" is invalid: spec.volumes[%zu].name: Invalid value: \"%s\": a "
                     "lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                     "or '-'",
                     name ? name : "", i, vn ? vn : "");
            return true;
        }
    }
    json_array_foreach(json_object_get(spec, "containers"), i, c) {
        json_array_foreach(json_object_get(c, "env"), j, e) {
            const char *en = json_string_value(json_object_get(e, "name"));
            if (!env_name(en)) {
                snprintf(msg, cap,
                         "Pod \"%s\" is invalid: spec.containers[%zu].env[%zu].name: Invalid "
                         "value: \"%s\": a valid environment variable name must consist only of "
                         "printable ASCII characters other than '='",
                         name ? name : "", i, j, en ? en : "");
                return true;
            }
        }
        json_array_foreach(json_object_get(c, "volumeMounts"), j, e) {
            const char *mn = json_string_value(json_object_get(e, "name"));
            bool found = false;
            size_t k;
            json_t *vol;
            json_array_foreach(json_object_get(spec, "volumes"), k, vol) {
                const char *vn = json_string_value(json_object_get(vol, "name"));
                found = found || (vn && mn && strcmp(vn, mn) == 0);
            }
            if (!found) {
                snprintf(msg, cap,
                         "Pod \"%s\" is invalid: spec.containers[%zu].volumeMounts[%zu].name: "
                         "Not found: \"%s\"",
                         name ? name : "", i, j, mn ? mn : "");
                return true;
            }
        }
    }
    return false;
}

static int do_create(fake_api *f, const route *rt, const kts_request *rq, kts_answer *a) {
    json_t *body = json_loads(rq->body, 0, NULL);
    if (!json_is_object(body)) {
        json_decref(body);
        return answer_status(a, 400, "BadRequest", "fake_api: the body is not a JSON object");
    }
    int rc;
    if (rt->r == R_PODS && strcmp(rt->sub, "binding") == 0) {
        count(f, "bind");
        char key[512];
        snprintf(key, sizeof key, "%s/%s", rt->ns, rt->name);
        json_t *pod = json_deep_copy(json_object_get(f->store[R_PODS], key));
        const char *node =
            json_string_value(json_object_get(json_object_get(body, "target"), "name"));
        const char *bound =
            json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
        if (pod == NULL || node == NULL) {
            count(f, "bind-missing");
            rc = answer_status(a, 404, "NotFound", "fake_api: no such pod");
        } else if (bound != NULL) { /* as the real server: a pod is bound once */
            count(f, "bind-conflict");
            rc = answer_status(a, 409, "Conflict", "fake_api: the pod is already assigned");
        } else {
            json_t *spec = json_object_get(pod, "spec");
            if (!json_is_object(spec))
                json_object_set_new(pod, "spec", spec = json_object());
            json_object_set_new(spec, "nodeName", json_string(node));
            /* when it was bound, for tests that explain a failure */
            json_t *meta = json_object_get(pod, "metadata");
            json_t *ann = json_object_get(meta, "annotations");
            if (json_is_object(meta) && !json_is_object(ann))
                json_object_set_new(meta, "annotations", ann = json_object());
            char brv[32];
            snprintf(brv, sizeof brv, "%ld", f->rv + 1);
            json_object_set_new(ann, "fake.areal.io/bound-rv", json_string(brv));
            store_put(f, R_PODS, pod, "MODIFIED");
            json_t *ok = json_pack("{s:s,s:s}", "kind", "Status", "status", "Success");
            rc = answer_json(a, 201, ok);
            json_decref(ok);
        }
        json_decref(pod);
    } else if (rt->r == R_EVENTS) {
        count(f, "event");
        rc = answer_json(a, 201, body);
    } else {
        count(f, "create");
        json_t *m = json_object_get(body, "metadata");
        if (rt->ns[0] && json_is_object(m))
            json_object_set_new(m, "namespace", json_string(rt->ns));
        char key[512];
        key_of(body, key, sizeof key);
        char why[1024];
        if (f->validate && invalid_child(rt->r, body, why, sizeof why)) {
            count(f, "invalid");
            rc = answer_status(a, 422, "Invalid", why);
        } else if (json_object_get(f->store[rt->r], key) != NULL) {
            rc = answer_status(a, 409, "AlreadyExists", "fake_api: it exists");
        } else {
            json_t *stored = store_put(f, rt->r, body, "ADDED");
            rc = answer_json(a, 201, stored ? stored : body);
        }
    }
    json_decref(body);
    return rc;
}

static int do_patch(fake_api *f, const route *rt, const kts_request *rq, kts_answer *a) {
    count(f, "patch");
    char key[512];
    snprintf(key, sizeof key, "%s/%s", rt->ns, rt->name);
    json_t *cur = json_object_get(f->store[rt->r], key);
    json_t *patch = json_loads(rq->body, 0, NULL);
    if (cur == NULL || !json_is_object(patch)) {
        json_decref(patch);
        return answer_status(a, 404, "NotFound", "fake_api: no such object");
    }
    /* optimistic concurrency, as the real server: a patch naming a
     * resourceVersion applies only to that version */
    const char *want =
        json_string_value(json_object_get(json_object_get(patch, "metadata"), "resourceVersion"));
    const char *have =
        json_string_value(json_object_get(json_object_get(cur, "metadata"), "resourceVersion"));
    if (want != NULL && (have == NULL || strcmp(want, have) != 0)) {
        json_decref(patch);
        return answer_status(a, 409, "Conflict",
                             "fake_api: the object has been modified; apply your changes to the "
                             "latest version and try again");
    }
    json_t *next = json_deep_copy(cur);
    if (strcmp(rt->sub, "status") == 0) {
        json_t *st = json_object_get(patch, "status");
        json_t *dst = json_object_get(next, "status");
        if (!json_is_object(dst))
            json_object_set_new(next, "status", dst = json_object());
        if (json_is_object(st))
            merge(dst, st);
    } else {
        merge(next, patch);
    }
    json_decref(patch);
    int rc;
    if (json_object_get(json_object_get(next, "metadata"), "deletionTimestamp") &&
        !has_finalizers(next)) {
        store_del(f, rt->r, key);
        rc = answer_json(a, 200, next);
    } else {
        json_t *stored = store_put(f, rt->r, next, "MODIFIED");
        rc = answer_json(a, 200, stored ? stored : next);
    }
    json_decref(next);
    return rc;
}

static void mark_deleting(fake_api *f, int r, const char *key) {
    json_t *o = json_deep_copy(json_object_get(f->store[r], key));
    json_object_set_new(json_object_get(o, "metadata"), "deletionTimestamp",
                        json_string("2026-11-29T21:00:00Z"));
    store_put(f, r, o, "MODIFIED");
    json_decref(o);
}

static int do_delete(fake_api *f, const route *rt, const kts_request *rq, kts_answer *a) {
    count(f, "delete");
    json_t *opts = rq->body && rq->body_len ? json_loads(rq->body, 0, NULL) : NULL;
    const json_t *grace = json_object_get(opts, "gracePeriodSeconds");
    bool force = json_is_integer(grace) && json_integer_value(grace) == 0;
    json_decref(opts);
    if (force)
        count(f, "force-delete");
    char key[512];
    if (rt->ns[0])
        snprintf(key, sizeof key, "%s/%s", rt->ns, rt->name);
    else
        snprintf(key, sizeof key, "%s", rt->name);
    json_t *o = json_object_get(f->store[rt->r], key);
    if (o == NULL)
        return answer_status(a, 404, "NotFound", "fake_api: no such object");
    bool kubelet_confirms =
        rt->r == R_PODS && f->graceful_pods && !force &&
        json_string_value(json_object_get(json_object_get(o, "spec"), "nodeName"));
    if (has_finalizers(o) || kubelet_confirms)
        mark_deleting(f, rt->r, key);
    else
        store_del(f, rt->r, key);
    json_t *ok = json_pack("{s:s,s:s}", "kind", "Status", "status", "Success");
    answer_json(a, 200, ok);
    json_decref(ok);
    return 1;
}

/* The injected failure that answers this request, or NULL (lock held). */
static fault *injected(fake_api *f, const route *rt, const char *method) {
    const char *what = NULL;
    if (strcmp(method, "GET") == 0 && !rt->watch && rt->name[0] == '\0')
        what = "list";
    else if (strcmp(method, "POST") == 0)
        what = rt->r == R_PODS && strcmp(rt->sub, "binding") == 0 ? "bind" : "create";
    else if (strcmp(method, "PATCH") == 0)
        what = "patch";
    else if (strcmp(method, "DELETE") == 0)
        what = "delete";
    for (int i = 0; what && i < f->n_faults; i++) {
        fault *ft = &f->faults[i];
        if (ft->times != 0 && ft->r == rt->r && strcmp(ft->what, what) == 0) {
            if (ft->times > 0)
                ft->times--;
            return ft;
        }
    }
    return NULL;
}

static int handle(void *ud, const kts_request *rq, kts_answer *a) {
    fake_api *f = ud;
    route rt;
    parse_route(rq->target, &rt);
    if (rt.r < 0)
        return answer_status(a, 404, "NotFound", "fake_api: unknown resource");
    pthread_mutex_lock(&f->mu);
    int rc;
    fault *ft = injected(f, &rt, rq->method);
    if (ft != NULL) {
        count(f, "failed");
        rc = answer_status(a, ft->code, ft->reason, ft->msg);
    } else if (strcmp(rq->method, "GET") == 0 && rt.watch) {
        rc = do_watch(f, &rt, a);
    } else if (strcmp(rq->method, "GET") == 0 && rt.name[0] == '\0') {
        rc = do_list(f, &rt, a);
    } else if (strcmp(rq->method, "GET") == 0) {
        count(f, "get");
        char key[512];
        snprintf(key, sizeof key, "%s%s%s", rt.ns, rt.ns[0] ? "/" : "", rt.name);
        json_t *o = json_object_get(f->store[rt.r], key);
        rc = o ? answer_json(a, 200, o) : answer_status(a, 404, "NotFound", "fake_api: no such");
    } else if (strcmp(rq->method, "POST") == 0) {
        rc = do_create(f, &rt, rq, a);
    } else if (strcmp(rq->method, "PATCH") == 0) {
        rc = do_patch(f, &rt, rq, a);
    } else if (strcmp(rq->method, "DELETE") == 0) {
        rc = do_delete(f, &rt, rq, a);
    } else {
        rc = answer_status(a, 405, "MethodNotAllowed", "fake_api: method not served");
    }
    if (strcmp(rq->method, "GET") != 0) { /* the write and its answer, for fake_api_trace */
        char line[2400];
        snprintf(line, sizeof line, "rv %ld: %s %.120s %.2000s -> %d %.120s", f->rv, rq->method,
                 rq->target, rq->body ? rq->body : "", a->status,
                 a->status >= 300 && a->body ? a->body : "");
        long at = f->n_trace++ % TRACE_LINES;
        free(f->trace[at]);
        f->trace[at] = strdup(line);
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* ---- public ---------------------------------------------------------------------------- */

fake_api *fake_api_start(void) {
    fake_api *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->changed, NULL);
    f->rv = 100;
    for (int r = 0; r < R_COUNT; r++)
        f->store[r] = json_object();
    f->srv = kts_start();
    if (f->srv == NULL) {
        fake_api_stop(f);
        return NULL;
    }
    kts_set_handler(f->srv, handle, f);
    return f;
}

void fake_api_stop(fake_api *f) {
    if (f == NULL)
        return;
    kts_stop(f->srv);
    for (int r = 0; r < R_COUNT; r++) {
        json_decref(f->store[r]);
        for (size_t i = 0; i < f->log[r].n; i++)
            free(f->log[r].v[i].line);
        free(f->log[r].v);
    }
    for (int i = 0; i < TRACE_LINES; i++)
        free(f->trace[i]);
    pthread_cond_destroy(&f->changed);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

char *fake_api_trace(fake_api *f, const char *grep) {
    pthread_mutex_lock(&f->mu);
    fake_text t = {0};
    long from = f->n_trace > TRACE_LINES ? f->n_trace - TRACE_LINES : 0;
    for (long i = from; i < f->n_trace; i++) {
        const char *l = f->trace[i % TRACE_LINES];
        if (l && (grep == NULL || strstr(l, grep)))
            fake_putf(&t, "%s\n", l);
    }
    pthread_mutex_unlock(&f->mu);
    if (t.p == NULL)
        t.p = strdup("");
    return t.p;
}

const char *fake_api_url(fake_api *f) {
    return kts_url(f->srv);
}

static int resource(const char *name) {
    for (int r = 0; r < R_COUNT; r++)
        if (strcmp(name, RES_NAME[r]) == 0)
            return r;
    return R_PODS;
}

void fake_api_generate(fake_api *f, int n_pods, int n_nodes) {
    pthread_mutex_lock(&f->mu);
    f->gen_pods = n_pods;
    f->gen_nodes = n_nodes;
    pthread_mutex_unlock(&f->mu);
}

long fake_api_put(fake_api *f, const char *res, const json_t *obj) {
    pthread_mutex_lock(&f->mu);
    store_put(f, resource(res), obj, NULL);
    long rv = f->rv;
    pthread_mutex_unlock(&f->mu);
    return rv;
}

void fake_api_delete(fake_api *f, const char *res, const char *key) {
    pthread_mutex_lock(&f->mu);
    int r = resource(res);
    json_t *o = json_object_get(f->store[r], key);
    if (o != NULL && has_finalizers(o))
        mark_deleting(f, r, key);
    else
        store_del(f, r, key);
    pthread_mutex_unlock(&f->mu);
}

json_t *fake_api_get(fake_api *f, const char *res, const char *key) {
    pthread_mutex_lock(&f->mu);
    json_t *o = json_deep_copy(json_object_get(f->store[resource(res)], key));
    pthread_mutex_unlock(&f->mu);
    return o;
}

void fake_api_expire(fake_api *f, const char *res) {
    pthread_mutex_lock(&f->mu);
    f->gone[resource(res)] = true;
    pthread_cond_broadcast(&f->changed);
    pthread_mutex_unlock(&f->mu);
}

long fake_api_count(fake_api *f, const char *what) {
    pthread_mutex_lock(&f->mu);
    long n = 0;
    for (int i = 0; COUNTERS[i]; i++)
        if (strcmp(COUNTERS[i], what) == 0)
            n = f->counts[i];
    pthread_mutex_unlock(&f->mu);
    return n;
}

json_t *fake_api_list(fake_api *f, const char *res) {
    pthread_mutex_lock(&f->mu);
    json_t *o = json_deep_copy(f->store[resource(res)]);
    pthread_mutex_unlock(&f->mu);
    return o;
}

void fake_api_fail(fake_api *f, const char *what, const char *res, int code, const char *reason,
                   const char *msg, int times) {
    pthread_mutex_lock(&f->mu);
    fault *ft = NULL;
    for (int i = 0; i < f->n_faults && ft == NULL; i++)
        if (f->faults[i].r == resource(res) && strcmp(f->faults[i].what, what) == 0)
            ft = &f->faults[i];
    if (ft == NULL && f->n_faults < MAX_FAULTS)
        ft = &f->faults[f->n_faults++];
    if (ft != NULL) {
        snprintf(ft->what, sizeof ft->what, "%s", what);
        ft->r = resource(res);
        ft->code = code;
        snprintf(ft->reason, sizeof ft->reason, "%s", reason);
        snprintf(ft->msg, sizeof ft->msg, "%s", msg);
        ft->times = times;
    }
    pthread_mutex_unlock(&f->mu);
}

void fake_api_drop_watch(fake_api *f, const char *res) {
    pthread_mutex_lock(&f->mu);
    f->drop[resource(res)] = true;
    pthread_mutex_unlock(&f->mu);
}

void fake_api_validate(fake_api *f, bool on) {
    pthread_mutex_lock(&f->mu);
    f->validate = on;
    pthread_mutex_unlock(&f->mu);
}

int fake_api_modify(fake_api *f, const char *res, const char *key, int (*fn)(json_t *obj, void *ud),
                    void *ud) {
    pthread_mutex_lock(&f->mu);
    int r = resource(res), rc = -1;
    json_t *cur = json_object_get(f->store[r], key);
    json_t *o = cur ? json_deep_copy(cur) : NULL;
    if (o != NULL) {
        rc = fn(o, ud);
        if (rc == 1)
            store_del(f, r, key);
        else if (rc == 0)
            store_put(f, r, o, "MODIFIED");
    }
    json_decref(o);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int fake_api_connections(fake_api *f) {
    return kts_accepts(f->srv);
}

long fake_api_rv(fake_api *f) {
    pthread_mutex_lock(&f->mu);
    long rv = f->rv;
    pthread_mutex_unlock(&f->mu);
    return rv;
}

void fake_api_graceful_pods(fake_api *f, bool on) {
    pthread_mutex_lock(&f->mu);
    f->graceful_pods = on;
    pthread_mutex_unlock(&f->mu);
}

int fake_api_len(fake_api *f, const char *res) {
    pthread_mutex_lock(&f->mu);
    int n = (int)json_object_size(f->store[resource(res)]);
    pthread_mutex_unlock(&f->mu);
    return n;
}

int fake_api_fork(int n_pods, int n_nodes, char *url, size_t cap, pid_t *pid) {
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t child = fork();
    if (child < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (child == 0) {
        close(fds[0]);
        fake_api *f = fake_api_start();
        if (f == NULL)
            _exit(1);
        fake_api_generate(f, n_pods, n_nodes);
        const char *u = fake_api_url(f);
        if (write(fds[1], u, strlen(u) + 1) < 0)
            _exit(1);
        close(fds[1]);
        for (;;)
            pause(); /* until SIGTERM */
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = read(fds[0], url + got, cap - 1 - got)) > 0)
        got += (size_t)r;
    close(fds[0]);
    url[got < cap ? got : cap - 1] = '\0';
    *pid = child;
    if (got == 0 || strncmp(url, "http://", 7) != 0) {
        kill(child, SIGTERM);
        return -1;
    }
    return 0;
}
