/*
 * ckpt.c - recover checkpoints (see ckpt.h).
 *
 * The manifest is the commit record: it is written after every other file
 * is closed, and only then is the directory renamed from .tmp. Hashes are
 * FNV-1a 64 (not cryptographic: the threat is a torn write or bit rot, and
 * it needs no library). state.json carries the 64-bit values as strings so
 * JSON's doubles never round them.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "areal/model/safetensors.h"
#include "areal/train/ckpt.h"
#include "areal/train/hf_save.h"
#include "areal/parallel/ckpt_shard.h"

#define PATH_CAP 4096

static int mkdir_p(const char *path) {
    char buf[PATH_CAP];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

static void rm_rf(const char *path) {
    DIR *d = opendir(path);
    if (d == NULL) {
        unlink(path);
        return;
    }
    struct dirent *e;
    char sub[PATH_CAP + 256];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        struct stat s;
        if (lstat(sub, &s) == 0 && S_ISDIR(s.st_mode))
            rm_rf(sub);
        else
            unlink(sub);
    }
    closedir(d);
    rmdir(path);
}

/* FNV-1a 64 and size of a file; -1 when unreadable. */
static int hash_file(const char *path, uint64_t *h, uint64_t *size) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    uint64_t x = 1469598103934665603ull, n = 0;
    unsigned char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < k; i++)
            x = (x ^ buf[i]) * 1099511628211ull;
        n += k;
    }
    int bad = ferror(f);
    fclose(f);
    *h = x;
    *size = n;
    return bad ? -1 : 0;
}

/* Files each form must have (the manifest lists these and every other file it holds). */
static const char *const gathered_files[] = {"model/config.json", "model/model.safetensors",
                                             "optim.safetensors", "state.json"};
static const char *const sharded_files[] = {AREAL_CKPT_SHARDS "/index.json",
                                            AREAL_CKPT_SHARDS "/config.json", "state.json"};
#define N_OF(a) (sizeof a / sizeof *a)

static json_t *u64s(uint64_t v);

/* Adds to man every regular file under dir/rel (rel "" at the top), hashed; -1 on a failure. */
static int manifest_walk(const char *dir, const char *rel, json_t *man, char *bad, size_t cap) {
    char path[PATH_CAP + 1024];
    snprintf(path, sizeof path, "%s%s%s", dir, rel[0] ? "/" : "", rel);
    DIR *d = opendir(path);
    if (d == NULL) {
        snprintf(bad, cap, "%s", path);
        return -1;
    }
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char sub[512], full[PATH_CAP + 1024];
        snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
        snprintf(full, sizeof full, "%s/%s", dir, sub);
        struct stat st;
        uint64_t h, size;
        if (lstat(full, &st) != 0) {
            snprintf(bad, cap, "%s", full);
            rc = -1;
        } else if (S_ISDIR(st.st_mode)) {
            rc = manifest_walk(dir, sub, man, bad, cap);
        } else if (strcmp(sub, "MANIFEST.json") == 0) {
            continue;
        } else if (hash_file(full, &h, &size) != 0) {
            snprintf(bad, cap, "%s", full);
            rc = -1;
        } else {
            json_object_set_new(man, sub,
                                json_pack("{s:o,s:o}", "size", u64s(size), "fnv1a64", u64s(h)));
        }
    }
    closedir(d);
    return rc;
}

static int write_json(const char *path, json_t *doc, areal_error *err) {
    if (json_dump_file(doc, path, JSON_INDENT(2) | JSON_SORT_KEYS) != 0)
        return areal_error_set(err, AREAL_EIO, -1, "%s: cannot write", path);
    return AREAL_OK;
}

static json_t *u64s(uint64_t v) {
    char s[32];
    snprintf(s, sizeof s, "%" PRIu64, v);
    return json_string(s);
}

static json_t *state_json(const areal_ckpt_state *st) {
    const areal_staleness *c = &st->counters;
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:o,s:{s:I,s:I,s:I,s:I,s:I,s:I,s:I}}", "step",
                     (json_int_t)st->step, "version", (json_int_t)st->version, "adam_step",
                     (json_int_t)st->adam_step, "data_epoch", (json_int_t)st->data_epoch,
                     "data_index", (json_int_t)st->data_index, "rng", u64s(st->rng), "staleness",
                     "max_concurrent", (json_int_t)c->max_concurrent, "batch_size",
                     (json_int_t)c->batch_size, "eta", (json_int_t)c->eta, "enqueued",
                     (json_int_t)c->enqueued, "running", (json_int_t)c->running, "accepted",
                     (json_int_t)c->accepted, "rejected", (json_int_t)c->rejected);
}

int areal_ckpt_begin(const char *root, long step, char *tmp, size_t cap, areal_error *err) {
    char sub[PATH_CAP + 64];
    snprintf(tmp, cap, "%s/step_%08ld.tmp", root, step);
    if (mkdir_p(root) != 0)
        return areal_error_set(err, AREAL_EIO, -1, "%s: cannot create (%s)", root, strerror(errno));
    rm_rf(tmp);
    snprintf(sub, sizeof sub, "%s/" AREAL_CKPT_SHARDS, tmp);
    if (mkdir(tmp, 0755) != 0 || mkdir(sub, 0755) != 0)
        return areal_error_set(err, AREAL_EIO, -1, "%s: cannot create (%s)", tmp, strerror(errno));
    return AREAL_OK;
}

void areal_ckpt_abort(const char *tmp) {
    rm_rf(tmp);
}

/* All but the two newest step_N directories under root removed. */
static void prune(const char *root) {
    char path[PATH_CAP + 64];
    DIR *d = opendir(root);
    long steps[256];
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && n < 256) {
        long s;
        char extra;
        if (sscanf(e->d_name, "step_%ld%c", &s, &extra) == 1)
            steps[n++] = s;
    }
    if (d)
        closedir(d);
    for (int i = 0; i < n; i++) {
        int newer = 0;
        for (int j = 0; j < n; j++)
            newer += steps[j] > steps[i];
        if (newer >= 2) {
            snprintf(path, sizeof path, "%s/step_%08ld", root, steps[i]);
            rm_rf(path);
        }
    }
}

int areal_ckpt_commit(const char *root, const char *tmp, const areal_ckpt_state *st,
                      areal_error *err) {
    char dir[PATH_CAP], path[PATH_CAP + 64], bad[PATH_CAP + 1024];
    snprintf(dir, sizeof dir, "%s/step_%08ld", root, st->step);
    snprintf(path, sizeof path, "%s/" AREAL_CKPT_SHARDS, tmp);
    rmdir(path); /* the gathered form leaves it empty */
    json_t *doc = state_json(st);
    snprintf(path, sizeof path, "%s/state.json", tmp);
    int rc = doc ? write_json(path, doc, err)
                 : areal_error_set(err, AREAL_ENOMEM, -1, "no memory for state.json");
    json_decref(doc);
    json_t *man = json_object();
    if (rc == AREAL_OK && man == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the manifest");
    if (rc == AREAL_OK && manifest_walk(tmp, "", man, bad, sizeof bad) != 0)
        rc = areal_error_set(err, AREAL_EIO, -1, "%s: cannot read back", bad);
    if (rc == AREAL_OK) {
        snprintf(path, sizeof path, "%s/MANIFEST.json", tmp);
        rc = write_json(path, man, err);
    }
    json_decref(man);
    if (rc == AREAL_OK) {
        rm_rf(dir);
        if (rename(tmp, dir) != 0)
            rc =
                areal_error_set(err, AREAL_EIO, -1, "%s: cannot rename (%s)", tmp, strerror(errno));
    }
    if (rc != AREAL_OK) {
        rm_rf(tmp);
        return rc;
    }
    prune(root);
    return AREAL_OK;
}

int areal_ckpt_save(const char *root, const areal_ckpt_tensors *t, const areal_ckpt_state *st,
                    areal_error *err) {
    char tmp[PATH_CAP + 16], path[PATH_CAP + 64];
    int rc = areal_ckpt_begin(root, st->step, tmp, sizeof tmp, err);
    if (rc != AREAL_OK)
        return rc;
    snprintf(path, sizeof path, "%s/model", tmp);
    rc = areal_hf_save(t->model, t->model_src, path, err);
    if (rc == AREAL_OK) {
        int64_t shape[1] = {(int64_t)t->n};
        areal_st_out o[2] = {{"exp_avg", AREAL_DT_F32, 1, shape, t->exp_avg},
                             {"exp_avg_sq", AREAL_DT_F32, 1, shape, t->exp_avg_sq}};
        snprintf(path, sizeof path, "%s/optim.safetensors", tmp);
        rc = areal_st_write(path, o, 2, NULL, 0, err);
    }
    if (rc != AREAL_OK) {
        rm_rf(tmp);
        return rc;
    }
    return areal_ckpt_commit(root, tmp, st, err);
}

static uint64_t get_u64(json_t *o, const char *k, int *ok) {
    json_t *v = json_object_get(o, k);
    if (json_is_string(v))
        return strtoull(json_string_value(v), NULL, 10);
    if (json_is_integer(v))
        return (uint64_t)json_integer_value(v);
    *ok = 0;
    return 0;
}

static long get_l(json_t *o, const char *k, int *ok) {
    json_t *v = json_object_get(o, k);
    if (!json_is_integer(v))
        *ok = 0;
    return (long)json_integer_value(v);
}

/* Every file the manifest lists: present, of its size and hash; err names the first that is not. */
static int verify_files(const char *dir, json_t *man, areal_error *err) {
    const char *k;
    json_t *ent;
    char path[PATH_CAP + 600];
    json_object_foreach(man, k, ent) {
        int ok = 1;
        uint64_t want_size = get_u64(ent, "size", &ok), want_h = get_u64(ent, "fnv1a64", &ok);
        uint64_t h = 0, size = 0;
        snprintf(path, sizeof path, "%s/%s", dir, k);
        if (!ok)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "%s/MANIFEST.json: the entry for %s has no size or hash", dir,
                                   k);
        if (hash_file(path, &h, &size) != 0)
            return areal_error_set(err, AREAL_EINVAL, -1, "%s: missing or unreadable", path);
        if (size != want_size)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "%s: %" PRIu64 " bytes, the manifest says %" PRIu64
                                   " (truncated?)",
                                   path, size, want_size);
        if (h != want_h)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "%s: contents differ from the manifest's hash (corrupted)",
                                   path);
    }
    return AREAL_OK;
}

static int read_state(const char *dir, areal_ckpt_state *out, areal_error *err) {
    char path[PATH_CAP + 64];
    json_error_t je;
    snprintf(path, sizeof path, "%s/state.json", dir);
    json_t *s = json_load_file(path, 0, &je);
    int ok = s != NULL;
    areal_ckpt_state x;
    memset(&x, 0, sizeof x);
    if (ok) {
        x.step = get_l(s, "step", &ok);
        x.version = get_l(s, "version", &ok);
        x.adam_step = get_l(s, "adam_step", &ok);
        x.data_epoch = get_l(s, "data_epoch", &ok);
        x.data_index = get_l(s, "data_index", &ok);
        x.rng = get_u64(s, "rng", &ok);
        json_t *c = json_object_get(s, "staleness");
        x.counters.max_concurrent = get_l(c, "max_concurrent", &ok);
        x.counters.batch_size = get_l(c, "batch_size", &ok);
        x.counters.eta = get_l(c, "eta", &ok);
        x.counters.enqueued = get_l(c, "enqueued", &ok);
        x.counters.running = get_l(c, "running", &ok);
        x.counters.accepted = get_l(c, "accepted", &ok);
        x.counters.rejected = get_l(c, "rejected", &ok);
    }
    json_decref(s);
    if (!ok)
        return areal_error_set(err, AREAL_EINVAL, -1, "%s: a field is missing or not an integer",
                               path);
    *out = x;
    return AREAL_OK;
}

int areal_ckpt_verify(const char *dir, areal_ckpt_state *st, areal_ckpt_format *fmt,
                      areal_error *err) {
    char path[PATH_CAP + 64];
    snprintf(path, sizeof path, "%s/MANIFEST.json", dir);
    json_error_t je;
    json_t *man = json_load_file(path, 0, &je);
    if (!json_is_object(man)) {
        json_decref(man);
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: missing or not JSON (an unfinished save?)", path);
    }
    /* the form: a sharded checkpoint lists shards/ files (a shard's index among them) */
    bool sharded = false;
    const char *k;
    json_t *ent;
    json_object_foreach(man, k, ent) sharded =
        sharded || strncmp(k, AREAL_CKPT_SHARDS "/", sizeof AREAL_CKPT_SHARDS) == 0;
    const char *const *need = sharded ? sharded_files : gathered_files;
    size_t n_need = sharded ? N_OF(sharded_files) : N_OF(gathered_files);
    int rc = AREAL_OK;
    for (size_t i = 0; rc == AREAL_OK && i < n_need; i++)
        if (json_object_get(man, need[i]) == NULL)
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "%s/%s: missing (the manifest does not list it: a truncated %s "
                                 "checkpoint)",
                                 dir, need[i], sharded ? "sharded" : "gathered");
    if (rc == AREAL_OK)
        rc = verify_files(dir, man, err);
    json_decref(man);
    if (rc == AREAL_OK)
        rc = read_state(dir, st, err);
    st->format = sharded ? AREAL_CKPT_SHARDED : AREAL_CKPT_GATHERED;
    if (rc == AREAL_OK && fmt != NULL)
        *fmt = (areal_ckpt_format)st->format;
    return rc;
}

/* The gathered form's tensors into t. */
static int load_gathered(const char *dir, const areal_ckpt_tensors *t, areal_error *err) {
    char path[PATH_CAP + 64];
    int rc;
    /* weights: through the model core's loader, which validates shapes against the config */
    snprintf(path, sizeof path, "%s/model", dir);
    areal_model m;
    if ((rc = areal_model_load(&m, path, NULL, err)) != AREAL_OK)
        return rc;
    if (m.n_params != t->model->n_params) {
        areal_model_free(&m);
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: %zu parameters, the trainer's model has %zu", path, m.n_params,
                               t->model->n_params);
    }
    areal_st_file f;
    snprintf(path, sizeof path, "%s/optim.safetensors", dir);
    if ((rc = areal_st_open(path, &f, err)) != AREAL_OK) {
        areal_model_free(&m);
        return rc;
    }
    const areal_st_tensor *a = areal_st_header_find(&f.hdr, "exp_avg");
    const areal_st_tensor *b = areal_st_header_find(&f.hdr, "exp_avg_sq");
    if (a == NULL || b == NULL || a->numel != t->n || b->numel != t->n)
        rc = areal_error_set(err, AREAL_EINVAL, -1,
                             "%s: needs exp_avg and exp_avg_sq of %zu floats", path, t->n);
    if (rc == AREAL_OK)
        rc = areal_st_read_f32(&f, a, t->exp_avg, t->n, err);
    if (rc == AREAL_OK)
        rc = areal_st_read_f32(&f, b, t->exp_avg_sq, t->n, err);
    areal_st_close(&f);
    if (rc == AREAL_OK)
        memcpy(t->model->params, m.params, m.n_params * sizeof *m.params);
    areal_model_free(&m);
    return rc;
}

/* A layout's sharded form into the one-process trainer's whole model and moments. */
static int load_sharded(const char *dir, const areal_ckpt_tensors *t, areal_error *err) {
    char path[PATH_CAP + 64];
    snprintf(path, sizeof path, "%s/" AREAL_CKPT_SHARDS, dir);
    areal_model m; /* a scratch whole model: a failed load leaves the trainer's untouched */
    int rc = areal_model_init_shard(&m, &t->model->cfg, &t->model->shard, NULL, err);
    if (rc != AREAL_OK)
        return rc;
    areal_adamw a;
    rc = areal_par_ckpt_load_shards(path, &m, &a, err);
    if (rc == AREAL_OK && (m.n_params != t->model->n_params || a.n != t->n))
        rc = areal_error_set(err, AREAL_EINVAL, -1,
                             "%s: %zu parameters, the trainer's model has %zu", path, m.n_params,
                             t->model->n_params);
    if (rc == AREAL_OK) {
        memcpy(t->model->params, m.params, sizeof(float) * m.n_params);
        memcpy(t->exp_avg, a.m, sizeof(float) * t->n);
        memcpy(t->exp_avg_sq, a.v, sizeof(float) * t->n);
    }
    areal_adamw_free(&a);
    areal_model_free(&m);
    return rc;
}

/* Verifies and loads one checkpoint directory; err names the file on refusal. */
static int load_one(const char *dir, const areal_ckpt_tensors *t, areal_ckpt_state *st,
                    areal_error *err) {
    areal_ckpt_state x;
    areal_ckpt_format fmt;
    int rc = areal_ckpt_verify(dir, &x, &fmt, err);
    if (rc == AREAL_OK)
        rc = fmt == AREAL_CKPT_SHARDED ? load_sharded(dir, t, err) : load_gathered(dir, t, err);
    if (rc == AREAL_OK)
        *st = x;
    return rc;
}

/* Tries each checkpoint under root, newest first, until try succeeds (see areal_ckpt_load). */
typedef int (*try_fn)(void *ctx, const char *dir, areal_error *err);

static int newest(const char *root, try_fn try, void *ctx, char *used, size_t cap,
                  areal_ckpt_log log, void *log_ctx, areal_error *err) {
    DIR *d = opendir(root);
    if (d == NULL)
        return areal_error_set(err, AREAL_ERANGE, -1, "%s: no checkpoints", root);
    long steps[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 256) {
        long s;
        char extra;
        if (sscanf(e->d_name, "step_%ld%c", &s, &extra) == 1)
            steps[n++] = s;
    }
    closedir(d);
    /* newest first */
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (steps[j] > steps[i]) {
                long x = steps[i];
                steps[i] = steps[j];
                steps[j] = x;
            }
    for (int i = 0; i < n; i++) {
        char dir[PATH_CAP];
        snprintf(dir, sizeof dir, "%s/step_%08ld", root, steps[i]);
        areal_error e1;
        int rc = try(ctx, dir, &e1);
        if (rc == AREAL_OK) {
            if (used)
                snprintf(used, cap, "%s", dir);
            return AREAL_OK;
        }
        if (rc == AREAL_ENOMEM) {
            if (err)
                *err = e1;
            return rc;
        }
        if (log) {
            char line[AREAL_ERROR_MSG_MAX + PATH_CAP + 64];
            snprintf(line, sizeof line, "checkpoint %s refused: %s; trying the previous one", dir,
                     e1.msg);
            log(log_ctx, line);
        }
    }
    return areal_error_set(err, AREAL_ERANGE, -1, "%s: no valid checkpoint", root);
}

typedef struct load_ctx {
    const areal_ckpt_tensors *t;
    areal_ckpt_state *st;
    areal_ckpt_format *fmt;
} load_ctx;

static int try_load(void *ctx, const char *dir, areal_error *err) {
    load_ctx *c = ctx;
    return load_one(dir, c->t, c->st, err);
}

static int try_verify(void *ctx, const char *dir, areal_error *err) {
    load_ctx *c = ctx;
    return areal_ckpt_verify(dir, c->st, c->fmt, err);
}

int areal_ckpt_load(const char *root, const areal_ckpt_tensors *t, areal_ckpt_state *st, char *used,
                    size_t cap, areal_ckpt_log log, void *log_ctx, areal_error *err) {
    load_ctx c = {t, st, NULL};
    return newest(root, try_load, &c, used, cap, log, log_ctx, err);
}

int areal_ckpt_find(const char *root, areal_ckpt_state *st, areal_ckpt_format *fmt, char *used,
                    size_t cap, areal_ckpt_log log, void *log_ctx, areal_error *err) {
    load_ctx c = {NULL, st, fmt};
    return newest(root, try_verify, &c, used, cap, log, log_ctx, err);
}
