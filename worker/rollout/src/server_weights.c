/*
 * server_weights.c - weight updates, all on the control thread:
 *
 *   POST /update_weights_from_disk {model_path, abort_all_requests, weight_version?}
 *     loads the HF directory into a new model and swaps it in; a directory
 *     that does not load, or holds another architecture, leaves the old
 *     weights serving and answers 400 {success: false, message}.
 *   POST /init_weights_update_group {master_address, master_port, rank_offset,
 *     world_size, group_name, backend}
 *     joins a world of the worker comm runtime (areal/comm/comm.h) whose store
 *     the trainer's source rank hosts at master_address:master_port (rank 0),
 *     as rank rank_offset, and builds the group of all world_size ranks.
 *   POST /update_weights_from_distributed {names, dtypes, shapes, group_name,
 *     flush_cache, abort_all_requests, weight_version?}
 *     one bucket: the tensors' bytes, concatenated in `names` order, each in
 *     its dtype, zero-padded to a multiple of 4 bytes, arrive in ONE broadcast
 *     from group rank 0 (as int32 elements: the comm runtime carries typed
 *     elements). They land in a staging copy of the served model; when every
 *     tensor of the model has arrived, the copy is swapped in atomically
 *     under the new version. A bad bucket (unknown name, wrong shape,
 *     unsupported dtype) fails the whole update; a failed broadcast (sender
 *     gone) also breaks the group (init again); either way the old weights
 *     keep serving.
 *   The sharded form (areal/train/wsync_shard.h) adds src_rank, n_senders,
 *     slice_dims, slice_offsets and full_shapes: `shapes` are then slices of
 *     the HF tensors, broadcast by trainer rank src_rank over its own group,
 *     and assembled in the staging copy (server_wslice.c); the swap waits
 *     for every row of every tensor. Without them: the form above.
 * (From a peer, whatever way the peer got its weights: server_peer.c.)
 *
 * Versions: weight_version when given; else, when the serving version is an
 * integer, that integer + 1 (AReaL never sends weight_version, and its
 * version is the number of updates); else unchanged.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server_internal.h"
#include "server_wslice.h"

static void fail(areal_http_exchange *x, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(areal_http_exchange *x, int status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++) /* messages may quote peer bytes: keep the JSON valid */
        if ((unsigned char)*p >= 0x80 || (unsigned char)*p < 0x20)
            *p = '?';
    if (getenv("RT_DEBUG"))
        fprintf(stderr, "fail: %s\n", msg);
    srv_json(x, status, json_pack("{s:b,s:s}", "success", 0, "message", msg));
}

/* The version after an update: the given one, else the serving integer + 1, else NULL. */
static const char *next_version(areal_rollout_server *s, json_t *given, char *buf, size_t cap) {
    if (json_is_string(given))
        return json_string_value(given);
    char cur[AREAL_ENGINE_VERSION_MAX];
    areal_rollout_server_version(s, cur, sizeof cur);
    char *end = NULL;
    long long v = strtoll(cur, &end, 10);
    if (end == cur || *end != '\0')
        return NULL;
    snprintf(buf, cap, "%lld", v + 1);
    return buf;
}

static void swapped(areal_rollout_server *s, areal_http_exchange *x, const char *what) {
    char version[AREAL_ENGINE_VERSION_MAX];
    areal_rollout_server_version(s, version, sizeof version);
    atomic_fetch_add(&s->version_seq, 1);
    srv_json(x, 200,
             json_pack("{s:b,s:s,s:s,s:i}", "success", 1, "message", what, "weight_version",
                       version, "num_paused_requests", 0));
}

/* Loads dir and swaps it in under version (NULL: next_version). */
static void load_and_swap(areal_rollout_server *s, areal_http_exchange *x, const char *dir,
                          const char *version, bool abort_live) {
    areal_model m;
    areal_error e;
    char cur[AREAL_ENGINE_VERSION_MAX];
    areal_rollout_server_version(s, cur, sizeof cur);
    if (srv_load_model(dir, s->cfg.tensor_parallel, 0, &m, &e) != AREAL_OK) {
        fail(x, 400, "cannot load %s: %s; version %s keeps serving", dir, e.msg, cur);
        return;
    }
    /* at t > 1 the followers load their shards of dir with it (all switch or none) */
    if (areal_engine_swap_model_dir(s->eng, &m, dir, version, abort_live, &e) != AREAL_OK) {
        areal_model_free(&m);
        fail(x, 400, "%s does not match the served model: %s; version %s keeps serving", dir, e.msg,
             cur);
        return;
    }
    swapped(s, x, "Succeeded to update model weights.");
}

static void do_disk(areal_rollout_server *s, areal_http_exchange *x, const areal_http_request *r) {
    static const char *const known[] = {"model_path",  "abort_all_requests", "weight_version",
                                        "load_format", "flush_cache",        "is_async",
                                        "keep_pause",  "token_step",         NULL};
    json_t *j = srv_body(x, r);
    if (j == NULL)
        return;
    if (!srv_known(x, j, "/update_weights_from_disk", known)) {
        json_decref(j);
        return;
    }
    json_t *path = json_object_get(j, "model_path"), *ab = json_object_get(j, "abort_all_requests"),
           *ver = json_object_get(j, "weight_version");
    if (!json_is_string(path) || (ab && !json_is_boolean(ab)) ||
        (ver && !json_is_null(ver) && !json_is_string(ver))) {
        json_decref(j);
        fail(x, 400,
             "model_path must be a string (an HF directory), abort_all_requests true or "
             "false, weight_version a string");
        return;
    }
    char buf[64];
    load_and_swap(s, x, json_string_value(path), next_version(s, ver, buf, sizeof buf),
                  json_is_true(ab));
    json_decref(j);
}

/* ---- groups --------------------------------------------------------------------- */

static wgroup *find_group(areal_rollout_server *s, const char *name) {
    for (int i = 0; i < WG_MAX; i++)
        if (s->groups[i].comm && strcmp(s->groups[i].name, name) == 0)
            return &s->groups[i];
    return NULL;
}

static void group_free(wgroup *g) {
    wslice_group_free(g);
    areal_pg_destroy(g->pg);
    areal_comm_destroy(g->comm);
    memset(g, 0, sizeof *g);
}

static void staging_drop(areal_rollout_server *s) {
    if (s->staging_on)
        areal_model_free(&s->staging);
    s->staging_on = false;
    free(s->staging_seen);
    s->staging_seen = NULL;
    wslice_drop(s);
}

void srv_weights_free(areal_rollout_server *s) {
    staging_drop(s);
    for (int i = 0; i < WG_MAX; i++)
        if (s->groups[i].comm)
            group_free(&s->groups[i]);
}

static void do_init_group(areal_rollout_server *s, areal_http_exchange *x,
                          const areal_http_request *r) {
    if (srv_tp_unsupported(s, x, "/init_weights_update_group"))
        return;
    static const char *const known[] = {"master_address", "master_port", "rank_offset",
                                        "world_size",     "group_name",  "backend",
                                        "pp_rank",        NULL};
    json_t *j = srv_body(x, r);
    if (j == NULL)
        return;
    if (!srv_known(x, j, "/init_weights_update_group", known)) {
        json_decref(j);
        return;
    }
    json_t *addr = json_object_get(j, "master_address"), *port = json_object_get(j, "master_port"),
           *off = json_object_get(j, "rank_offset"), *ws = json_object_get(j, "world_size"),
           *gn = json_object_get(j, "group_name"), *be = json_object_get(j, "backend");
    const char *name = json_is_string(gn) ? json_string_value(gn) : "weight_update_group";
    if (!json_is_string(addr) || !json_is_integer(port) || json_integer_value(port) < 1 ||
        json_integer_value(port) > 65535 || !json_is_integer(off) || !json_is_integer(ws) ||
        json_integer_value(ws) < 2 || json_integer_value(ws) > AREAL_COMM_MAX_WORLD ||
        json_integer_value(off) < 1 || json_integer_value(off) >= json_integer_value(ws) ||
        (gn && !json_is_string(gn)) || strlen(name) == 0 ||
        strlen(name) >= AREAL_COMM_GROUP_NAME_MAX || (be && !json_is_string(be))) {
        json_decref(j);
        fail(x, 400,
             "init_weights_update_group needs master_address (string), master_port "
             "(1..65535), world_size (>= 2), rank_offset (1..world_size-1: the trainer "
             "is rank 0), group_name (1..63 bytes)");
        return;
    }
    wgroup *g = find_group(s, name);
    if (g != NULL) /* a rebuilt group (membership changed): the old one goes */
        group_free(g);
    for (int i = 0; g == NULL && i < WG_MAX; i++)
        if (s->groups[i].comm == NULL)
            g = &s->groups[i];
    if (g == NULL) {
        json_decref(j);
        fail(x, 400, "this server already holds %d weight-update groups", WG_MAX);
        return;
    }
    int world = (int)json_integer_value(ws), rank = (int)json_integer_value(off);
    areal_comm_config cc = {.rank = rank,
                            .world = world,
                            .store_host = json_string_value(addr),
                            .store_port = (int)json_integer_value(port),
                            .host_store = 0,
                            .bind_host = s->host,
                            .advertise_host = s->advertise,
                            .timeout_ms = s->cfg.comm_timeout_ms,
                            .connect_timeout_ms = s->cfg.comm_timeout_ms,
                            .key_prefix = name};
    areal_error e;
    int *all = malloc(sizeof *all * (size_t)world);
    int rc = all ? areal_comm_init(&cc, &g->comm, &e) : AREAL_ENOMEM;
    for (int i = 0; all && i < world; i++)
        all[i] = i;
    if (rc == AREAL_OK)
        rc = areal_comm_group(g->comm, name, all, world, &g->pg, &e);
    free(all);
    if (rc != AREAL_OK) {
        areal_comm_destroy(g->comm);
        memset(g, 0, sizeof *g);
        fail(x, 400, "cannot join weight-update group %s at %s:%d as rank %d of %d: %s", name,
             cc.store_host, cc.store_port, rank, world,
             rc == AREAL_ENOMEM ? "out of memory" : e.msg);
        json_decref(j); /* after the message: name and the store's host are j's strings */
        return;
    }
    snprintf(g->name, sizeof g->name, "%s", name);
    json_decref(j);
    srv_json(x, 200,
             json_pack("{s:b,s:s}", "success", 1, "message",
                       "Joined the weight-update group (CPU comm runtime; the backend field "
                       "is accepted and the transport is TCP/shared memory)."));
}

/* torch's and safetensors' spellings of the float types */
static int parse_dtype(const char *s, areal_dtype *dt) {
    if (strncmp(s, "torch.", 6) == 0)
        s += 6;
    if (strcmp(s, "float32") == 0 || strcmp(s, "float") == 0)
        s = "F32";
    else if (strcmp(s, "bfloat16") == 0)
        s = "BF16";
    else if (strcmp(s, "float16") == 0 || strcmp(s, "half") == 0)
        s = "F16";
    return areal_dtype_parse(s, dt) == 0 && areal_dtype_is_float(*dt) ? 0 : -1;
}

typedef struct tdesc {
    const char *name;
    areal_dtype dt;
    int ndim;
    int64_t shape[8];
    size_t numel, bytes, off;
} tdesc;

/* Checks a bucket's metadata (the wire layout must be known before any byte arrives). */
static int bucket_meta(json_t *names, json_t *dtypes, json_t *shapes, tdesc *t, size_t n,
                       size_t *total, char *msg, size_t cap) {
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *nm = json_array_get(names, i), *dt = json_array_get(dtypes, i),
               *sh = json_array_get(shapes, i);
        if (!json_is_string(nm) || !json_is_string(dt) || !json_is_array(sh) ||
            json_array_size(sh) > 8) {
            snprintf(msg, cap,
                     "tensor %zu: names[i] and dtypes[i] must be strings and "
                     "shapes[i] an array of at most 8 sizes",
                     i);
            return -1;
        }
        t[i].name = json_string_value(nm);
        if (parse_dtype(json_string_value(dt), &t[i].dt) != 0) {
            snprintf(msg, cap,
                     "dtypes[%zu] = '%.40s' (tensor %.100s) is not float32, bfloat16 "
                     "or float16",
                     i, json_string_value(dt), t[i].name);
            return -1;
        }
        t[i].ndim = (int)json_array_size(sh);
        t[i].numel = 1;
        for (int k = 0; k < t[i].ndim; k++) {
            json_t *d = json_array_get(sh, (size_t)k);
            if (!json_is_integer(d) || json_integer_value(d) < 0 ||
                json_integer_value(d) > ((json_int_t)1 << 40)) {
                snprintf(msg, cap, "shapes[%zu] (tensor %.100s) must hold sizes >= 0", i,
                         t[i].name);
                return -1;
            }
            t[i].shape[k] = json_integer_value(d);
            t[i].numel *= (size_t)t[i].shape[k];
        }
        t[i].bytes = t[i].numel * areal_dtype_size(t[i].dt);
        t[i].off = *total;
        *total += t[i].bytes;
    }
    return 0;
}

static void do_distributed(areal_rollout_server *s, areal_http_exchange *x,
                           const areal_http_request *r) {
    if (srv_tp_unsupported(s, x, "/update_weights_from_distributed"))
        return;
    static const char *const known[] = {"names",          "dtypes",      "shapes",
                                        "group_name",     "flush_cache", "abort_all_requests",
                                        "weight_version", "load_format", "torch_empty_cache",
                                        "src_rank",       "n_senders",   "slice_dims",
                                        "slice_offsets",  "full_shapes", NULL};
    json_t *j = srv_body(x, r);
    if (j == NULL)
        return;
    if (!srv_known(x, j, "/update_weights_from_distributed", known)) {
        json_decref(j);
        return;
    }
    json_t *names = json_object_get(j, "names"), *dtypes = json_object_get(j, "dtypes"),
           *shapes = json_object_get(j, "shapes"), *gn = json_object_get(j, "group_name"),
           *ab = json_object_get(j, "abort_all_requests"),
           *ver = json_object_get(j, "weight_version");
    char name[AREAL_COMM_GROUP_NAME_MAX]; /* copied: j is freed before some answers */
    snprintf(name, sizeof name, "%s",
             json_is_string(gn) ? json_string_value(gn) : "weight_update_group");
    wgroup *g = find_group(s, name);
    char cur[AREAL_ENGINE_VERSION_MAX];
    areal_rollout_server_version(s, cur, sizeof cur);
    if (g == NULL) {
        json_decref(j);
        fail(x, 400, "no weight-update group %s: POST /init_weights_update_group first", name);
        return;
    }
    size_t n = json_array_size(names);
    char msg[600] = "";
    tdesc *t = NULL;
    size_t total = 0;
    wslice_req q = {0};
    areal_pg *pg = NULL;
    if (!json_is_array(names) || !json_is_array(dtypes) || !json_is_array(shapes) || n == 0 ||
        json_array_size(dtypes) != n || json_array_size(shapes) != n)
        snprintf(msg, sizeof msg,
                 "names, dtypes and shapes must be arrays of one equal, "
                 "non-zero length");
    else if ((t = calloc(n, sizeof *t)) == NULL)
        snprintf(msg, sizeof msg, "out of memory");
    else if (bucket_meta(names, dtypes, shapes, t, n, &total, msg, sizeof msg) == 0 &&
             total > ((size_t)1 << 36))
        snprintf(msg, sizeof msg, "the bucket of %zu bytes is larger than 64 GiB", total);
    if (msg[0] == '\0' && wslice_parse(j, n, &q, msg, sizeof msg) == 0)
        pg = wslice_group(s, g, &q, msg, sizeof msg);
    if (msg[0] != '\0') {
        /* the wire layout is unknown: the sender's broadcast cannot be matched, so the
         * group is broken on purpose (the sender fails at once instead of timing out) */
        group_free(g);
        staging_drop(s);
        free(t);
        wslice_req_free(&q);
        json_decref(j);
        fail(x, 400,
             "%s; the weight-update group %s is closed (init it again); version %s "
             "keeps serving",
             msg, name, cur);
        return;
    }
    size_t words = (total + 3) / 4;
    int32_t *buf = calloc(words ? words : 1, sizeof *buf);
    areal_error e;
    int rc = buf ? areal_pg_broadcast(pg, buf, words, AREAL_DT_I32, 0, &e) : AREAL_ENOMEM;
    if (rc != AREAL_OK) {
        group_free(g);
        staging_drop(s);
        free(buf);
        free(t);
        wslice_req_free(&q);
        json_decref(j);
        fail(x, 400,
             "receiving the bucket failed: %s; group %s is closed (init it again); "
             "version %s keeps serving",
             rc == AREAL_ENOMEM ? "out of memory" : e.msg, name, cur);
        return;
    }
    if (!s->staging_on) {
        if (areal_engine_copy_model(s->eng, &s->staging, &e) != AREAL_OK ||
            (s->staging_seen = calloc(s->staging.n_specs, 1)) == NULL) {
            if (s->staging_seen == NULL && s->staging.params)
                areal_model_free(&s->staging);
            free(buf);
            free(t);
            wslice_req_free(&q);
            json_decref(j);
            fail(x, 500, "out of memory for the staging copy; version %s keeps serving", cur);
            return;
        }
        s->staging_on = true;
    }
    msg[0] = '\0';
    for (size_t i = 0; i < n && msg[0] == '\0'; i++) {
        int k = areal_model_find(&s->staging, t[i].name);
        const areal_tensor_spec *sp = k >= 0 ? &s->staging.specs[k] : NULL;
        bool shape_ok = sp && sp->ndim == t[i].ndim;
        for (int d = 0; shape_ok && d < sp->ndim; d++)
            shape_ok = sp->shape[d] == t[i].shape[d];
        if (sp == NULL)
            snprintf(msg, sizeof msg, "tensor %.100s is not a parameter of the served model",
                     t[i].name);
        else if (q.sharded) /* a slice of it (server_wslice.c) */
            wslice_land(s, k, &q, i, t[i].dt, t[i].shape, t[i].ndim, (const char *)buf + t[i].off,
                        msg, sizeof msg);
        else if (!shape_ok)
            snprintf(msg, sizeof msg,
                     "tensor %.100s has shape [%lld, %lld] in the model but the bucket says "
                     "%d dims [%lld, ...]",
                     t[i].name, (long long)sp->shape[0],
                     (long long)(sp->ndim > 1 ? sp->shape[1] : 0), t[i].ndim,
                     (long long)(t[i].ndim ? t[i].shape[0] : 0));
        else {
            areal_dtype_to_f32(t[i].dt, (const char *)buf + t[i].off,
                               s->staging.params + s->staging.offset[k], t[i].numel);
            s->staging_seen[k] = 1;
        }
    }
    free(buf);
    free(t);
    wslice_req_free(&q);
    if (msg[0] != '\0') {
        staging_drop(s);
        json_decref(j);
        fail(x, 400, "%s; the update is dropped and version %s keeps serving", msg, cur);
        return;
    }
    size_t seen = 0;
    for (size_t k = 0; k < s->staging.n_specs; k++)
        seen += s->staging_seen[k];
    if (seen < s->staging.n_specs) {
        json_decref(j);
        char m[300];
        snprintf(m, sizeof m,
                 "bucket staged: %zu of %zu tensors received; version %s serves "
                 "until the last one lands",
                 seen, s->staging.n_specs, cur);
        srv_json(x, 200,
                 json_pack("{s:b,s:s,s:s}", "success", 1, "message", m, "weight_version", cur));
        return;
    }
    char vbuf[64];
    const char *version = next_version(s, ver, vbuf, sizeof vbuf);
    rc = areal_engine_swap_model(s->eng, &s->staging, version, json_is_true(ab), &e);
    json_decref(j);
    if (rc != AREAL_OK) {
        staging_drop(s);
        fail(x, 400, "the staged weights were refused: %s; version %s keeps serving", e.msg, cur);
        return;
    }
    s->staging_on = false; /* the engine owns it now */
    staging_drop(s);
    swapped(s, x, "Succeeded to update model weights from the distributed group.");
}

static void h_disk(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    srv_ctl(ud, do_disk, x, r);
}
static void h_init(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    srv_ctl(ud, do_init_group, x, r);
}
static void h_dist(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    srv_ctl(ud, do_distributed, x, r);
}

int srv_routes_weights(areal_rollout_server *s, areal_error *err) {
    int rc = areal_http_route(s->http, "POST", "/update_weights_from_disk", h_disk, s, err);
    if (rc == AREAL_OK)
        rc = areal_http_route(s->http, "POST", "/init_weights_update_group", h_init, s, err);
    if (rc == AREAL_OK)
        rc = areal_http_route(s->http, "POST", "/update_weights_from_distributed", h_dist, s, err);
    return rc;
}
