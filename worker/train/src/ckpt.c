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

/* Files of a checkpoint relative to its directory (the manifest lists exactly these). */
static const char *const ckpt_files[] = {"model/config.json", "model/model.safetensors",
                                         "optim.safetensors", "state.json"};
#define N_FILES (sizeof ckpt_files / sizeof *ckpt_files)

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

int areal_ckpt_save(const char *root, const areal_ckpt_tensors *t, const areal_ckpt_state *st,
                    areal_error *err) {
    char dir[PATH_CAP], tmp[PATH_CAP + 8], path[PATH_CAP + 64];
    snprintf(dir, sizeof dir, "%s/step_%08ld", root, st->step);
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    if (mkdir_p(root) != 0)
        return areal_error_set(err, AREAL_EIO, -1, "%s: cannot create (%s)", root, strerror(errno));
    rm_rf(tmp);
    if (mkdir(tmp, 0755) != 0)
        return areal_error_set(err, AREAL_EIO, -1, "%s: cannot create (%s)", tmp, strerror(errno));
    snprintf(path, sizeof path, "%s/model", tmp);
    int rc = areal_hf_save(t->model, t->model_src, path, err);
    if (rc == AREAL_OK) {
        int64_t shape[1] = {(int64_t)t->n};
        areal_st_out o[2] = {{"exp_avg", AREAL_DT_F32, 1, shape, t->exp_avg},
                             {"exp_avg_sq", AREAL_DT_F32, 1, shape, t->exp_avg_sq}};
        snprintf(path, sizeof path, "%s/optim.safetensors", tmp);
        rc = areal_st_write(path, o, 2, NULL, 0, err);
    }
    if (rc == AREAL_OK) {
        json_t *doc = state_json(st);
        snprintf(path, sizeof path, "%s/state.json", tmp);
        rc = doc ? write_json(path, doc, err)
                 : areal_error_set(err, AREAL_ENOMEM, -1, "no memory for state.json");
        json_decref(doc);
    }
    json_t *man = json_object();
    for (size_t i = 0; rc == AREAL_OK && i < N_FILES; i++) {
        uint64_t h, size;
        snprintf(path, sizeof path, "%s/%s", tmp, ckpt_files[i]);
        if (hash_file(path, &h, &size) != 0)
            rc = areal_error_set(err, AREAL_EIO, -1, "%s: cannot read back", path);
        else
            json_object_set_new(man, ckpt_files[i],
                                json_pack("{s:o,s:o}", "size", u64s(size), "fnv1a64", u64s(h)));
    }
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
    /* keep the two newest */
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
    return AREAL_OK;
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

/* Verifies and loads one checkpoint directory; err names the file on refusal. */
static int load_one(const char *dir, const areal_ckpt_tensors *t, areal_ckpt_state *st,
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
    int rc = AREAL_OK;
    for (size_t i = 0; rc == AREAL_OK && i < N_FILES; i++) {
        json_t *ent = json_object_get(man, ckpt_files[i]);
        int ok = 1;
        uint64_t want_size = get_u64(ent, "size", &ok), want_h = get_u64(ent, "fnv1a64", &ok);
        uint64_t h = 0, size = 0;
        snprintf(path, sizeof path, "%s/%s", dir, ckpt_files[i]);
        if (!ok)
            rc = areal_error_set(err, AREAL_EINVAL, -1, "%s/MANIFEST.json: no entry for %s", dir,
                                 ckpt_files[i]);
        else if (hash_file(path, &h, &size) != 0)
            rc = areal_error_set(err, AREAL_EINVAL, -1, "%s: missing or unreadable", path);
        else if (size != want_size)
            rc =
                areal_error_set(err, AREAL_EINVAL, -1,
                                "%s: %" PRIu64 " bytes, the manifest says %" PRIu64 " (truncated?)",
                                path, size, want_size);
        else if (h != want_h)
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "%s: contents differ from the manifest's hash (corrupted)", path);
    }
    json_decref(man);
    if (rc != AREAL_OK)
        return rc;
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
    if (rc == AREAL_OK) {
        memcpy(t->model->params, m.params, m.n_params * sizeof *m.params);
        *st = x;
    }
    areal_model_free(&m);
    return rc;
}

int areal_ckpt_load(const char *root, const areal_ckpt_tensors *t, areal_ckpt_state *st, char *used,
                    size_t cap, areal_ckpt_log log, void *log_ctx, areal_error *err) {
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
        int rc = load_one(dir, t, st, &e1);
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
