/*
 * hf_save.c - the policy as a HuggingFace directory (see hf_save.h).
 *
 * Weights are written fp32: the CPU model trains in fp32 and the rollout
 * servers load F32/F16/BF16 alike, so a down-cast would only lose the exact
 * equality between trainer and server weights that the tests rely on.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "areal/model/checkpoint.h"
#include "areal/train/hf_save.h"

int areal_hf_save_weights(const areal_model *m, const char *dst, areal_error *err) {
    areal_st_out *t = calloc(m->n_specs, sizeof *t);
    if (t == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory to save %s", dst);
    for (size_t i = 0; i < m->n_specs; i++) {
        t[i].name = m->specs[i].name;
        t[i].dtype = AREAL_DT_F32;
        t[i].ndim = m->specs[i].ndim;
        t[i].shape = m->specs[i].shape;
        t[i].data = m->params + m->offset[i];
    }
    int rc = areal_checkpoint_write(dst, t, m->n_specs, (int[]){0}, 1, err);
    free(t);
    return rc;
}

/* The small files a model directory carries besides its weights. */
static int is_small_file(const char *name) {
    static const char *const keep[] = {"config.json",
                                       "generation_config.json",
                                       "tokenizer.json",
                                       "tokenizer_config.json",
                                       "special_tokens_map.json",
                                       "vocab.json",
                                       "merges.txt"};
    for (size_t i = 0; i < sizeof keep / sizeof *keep; i++)
        if (strcmp(name, keep[i]) == 0)
            return 1;
    return 0;
}

static int copy_file(const char *from, const char *to, areal_error *err) {
    FILE *in = fopen(from, "rb");
    if (in == NULL)
        return areal_error_set(err, AREAL_EIO, -1, "%s: cannot read", from);
    FILE *out = fopen(to, "wb");
    if (out == NULL) {
        fclose(in);
        return areal_error_set(err, AREAL_EIO, -1, "%s: cannot write", to);
    }
    char buf[65536];
    size_t n;
    int bad = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            bad = 1;
    if (ferror(in))
        bad = 1;
    fclose(in);
    if (fclose(out) != 0)
        bad = 1;
    return bad ? areal_error_set(err, AREAL_EIO, -1, "%s: cannot copy to %s", from, to) : AREAL_OK;
}

/* Removes dir and the plain files in it (a model directory holds nothing else). */
static void remove_flat_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* What writes the weights into the directory: m whole, or a stream of tensors. */
typedef struct weights {
    const areal_model *m;
    const areal_tensor_spec *ts;
    size_t n;
    areal_st_fill_fn fill;
    void *ctx;
} weights;

static int write_weights(const weights *w, const char *dir, areal_error *err) {
    if (w->m != NULL)
        return areal_hf_save_weights(w->m, dir, err);
    areal_st_out *t = calloc(w->n ? w->n : 1, sizeof *t);
    char path[4200];
    if (t == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory to save %s", dir);
    for (size_t i = 0; i < w->n; i++)
        t[i] = (areal_st_out){w->ts[i].name, AREAL_DT_F32, w->ts[i].ndim, w->ts[i].shape, NULL};
    static const char *const pt_meta[] = {"format", "pt"}; /* areal_checkpoint_write's */
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = areal_st_write_stream(path, t, w->n, pt_meta, 1, w->fill, w->ctx, err);
    free(t);
    return rc;
}

static int save_dir(const weights *w, const char *src_dir, const char *dst, areal_error *err) {
    char tmp[4096], from[4352], to[4352];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", dst) >= (int)sizeof tmp)
        return areal_error_set(err, AREAL_EINVAL, -1, "%s: path too long", dst);
    remove_flat_dir(tmp);
    if (mkdir(tmp, 0755) != 0)
        return areal_error_set(err, AREAL_EIO, -1, "%s: cannot create (%s)", tmp, strerror(errno));
    int rc = AREAL_OK;
    DIR *d = opendir(src_dir);
    if (d == NULL)
        rc = areal_error_set(err, AREAL_EIO, -1, "%s: cannot list the model directory", src_dir);
    struct dirent *e;
    while (rc == AREAL_OK && (e = readdir(d)) != NULL) {
        if (!is_small_file(e->d_name))
            continue;
        snprintf(from, sizeof from, "%s/%s", src_dir, e->d_name);
        snprintf(to, sizeof to, "%s/%s", tmp, e->d_name);
        rc = copy_file(from, to, err);
    }
    if (d != NULL)
        closedir(d);
    if (rc == AREAL_OK)
        rc = write_weights(w, tmp, err);
    if (rc == AREAL_OK) {
        remove_flat_dir(dst);
        if (rename(tmp, dst) != 0)
            rc = areal_error_set(err, AREAL_EIO, -1, "%s: cannot rename to %s (%s)", tmp, dst,
                                 strerror(errno));
    }
    if (rc != AREAL_OK)
        remove_flat_dir(tmp);
    return rc;
}

int areal_hf_save(const areal_model *m, const char *src_dir, const char *dst, areal_error *err) {
    weights w = {m, NULL, 0, NULL, NULL};
    return save_dir(&w, src_dir, dst, err);
}

int areal_hf_save_stream(const areal_tensor_spec *ts, size_t n, areal_st_fill_fn fill, void *ctx,
                         const char *src_dir, const char *dst, areal_error *err) {
    weights w = {NULL, ts, n, fill, ctx};
    return save_dir(&w, src_dir, dst, err);
}
