/*
 * checkpoint.c - opening and validating a HuggingFace model directory.
 *
 * Single file or sharded: with model.safetensors.index.json present the
 * shards are the distinct files of its weight_map (opened once each);
 * otherwise model.safetensors. Tensors are then matched against the expected
 * list by binary search in each shard's sorted index. Shapes are compared
 * with the config field that implies them named in the message, so "shape
 * [64, 16], config implies [96, 16]" points at vocab_size/hidden_size.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/checkpoint.h"
#include "file_util.h"

static int cmp_spec(const void *a, const void *b) {
    return strcmp((*(const areal_tensor_spec *const *)a)->name,
                  (*(const areal_tensor_spec *const *)b)->name);
}

static int open_shards(const char *dir, areal_checkpoint *ck, json_t **wmap_out, areal_error *err) {
    char *index = areal_path_join(dir, "model.safetensors.index.json");
    if (index == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory");
    FILE *probe = fopen(index, "rb");
    if (probe == NULL) { /* single file */
        free(index);
        ck->files = calloc(1, sizeof *ck->files);
        char *p = areal_path_join(dir, "model.safetensors");
        int rc = ck->files && p ? areal_st_open(p, &ck->files[0], err)
                                : areal_error_set(err, AREAL_ENOMEM, -1, "no memory");
        free(p);
        if (rc == AREAL_OK)
            ck->n_files = 1;
        return rc;
    }
    fclose(probe);
    json_t *doc = areal_json_load(index, err);
    if (doc == NULL) {
        free(index);
        return err ? err->code : AREAL_EINVAL;
    }
    json_t *wmap = json_object_get(doc, "weight_map");
    int rc = AREAL_OK;
    if (!json_is_object(wmap) || json_object_size(wmap) == 0) {
        rc = areal_error_set(err, AREAL_EINVAL, -1,
                             "%s: field \"weight_map\" must be a non-empty object of tensor name "
                             "-> shard file",
                             index);
        goto out;
    }
    size_t cap = json_object_size(wmap);
    ck->files = calloc(cap, sizeof *ck->files);
    if (ck->files == NULL) {
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory");
        goto out;
    }
    const char *name;
    json_t *v;
    json_object_foreach(wmap, name, v) {
        const char *shard = json_string_value(v);
        if (shard == NULL || shard[0] == '\0' || strchr(shard, '/') != NULL) {
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "%s: weight_map[\"%s\"] must be a file name in the same "
                                 "directory",
                                 index, name);
            goto out;
        }
        char *p = areal_path_join(dir, shard);
        if (p == NULL) {
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory");
            goto out;
        }
        size_t k = 0;
        while (k < ck->n_files && strcmp(ck->files[k].path, p) != 0)
            k++;
        if (k == ck->n_files) {
            rc = areal_st_open(p, &ck->files[k], err);
            if (rc == AREAL_OK)
                ck->n_files++;
        }
        free(p);
        if (rc != AREAL_OK)
            goto out;
    }
    json_incref(wmap);
    *wmap_out = wmap;
out:
    json_decref(doc);
    free(index);
    return rc;
}

/* Every name in the index must be in its shard, and no name in two shards. */
static int check_index(const char *dir, const areal_checkpoint *ck, json_t *wmap,
                       areal_error *err) {
    for (size_t i = 0; i < ck->n_files; i++) {
        const areal_st_header *h = &ck->files[i].hdr;
        for (size_t t = 0; t < h->n_tensors; t++) {
            const char *name = h->tensors[t].name;
            for (size_t j = i + 1; j < ck->n_files; j++) {
                if (areal_st_header_find(&ck->files[j].hdr, name) != NULL)
                    return areal_error_set(err, AREAL_EINVAL, -1,
                                           "tensor \"%s\" is in both %s and %s", name,
                                           ck->files[i].path, ck->files[j].path);
            }
            json_t *shard = json_object_get(wmap, name);
            const char *base = strrchr(ck->files[i].path, '/');
            base = base ? base + 1 : ck->files[i].path;
            if (!json_is_string(shard) || strcmp(json_string_value(shard), base) != 0)
                return areal_error_set(err, AREAL_EINVAL, -1,
                                       "%s/model.safetensors.index.json: weight_map does not map "
                                       "tensor \"%s\" to %s, which holds it",
                                       dir, name, base);
        }
    }
    const char *name;
    json_t *v;
    json_object_foreach(wmap, name, v) {
        size_t k = 0;
        while (k < ck->n_files && areal_st_header_find(&ck->files[k].hdr, name) == NULL)
            k++;
        if (k == ck->n_files)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "%s/model.safetensors.index.json: weight_map names tensor "
                                   "\"%s\" but shard %s does not hold it",
                                   dir, name, json_string_value(v));
    }
    return AREAL_OK;
}

static const char *shape_source(const areal_tensor_spec *s) {
    if (strstr(s->name, "embed_tokens") || strstr(s->name, "lm_head"))
        return "vocab_size x hidden_size";
    if (strstr(s->name, "experts.") || strstr(s->name, "mlp.gate.weight"))
        return "num_experts / moe_intermediate_size / hidden_size";
    if (strstr(s->name, "shared_expert"))
        return "shared_expert_intermediate_size / hidden_size";
    if (strstr(s->name, "mlp."))
        return "intermediate_size / hidden_size";
    if (strstr(s->name, "_norm.weight") && strstr(s->name, "self_attn"))
        return "head_dim";
    if (strstr(s->name, "self_attn"))
        return "num_attention_heads / num_key_value_heads x head_dim, hidden_size";
    return "hidden_size";
}

static int match_tensors(const char *dir, areal_checkpoint *ck, areal_error *err) {
    size_t matched = 0;
    for (size_t i = 0; i < ck->n_expected; i++) {
        const areal_tensor_spec *s = &ck->expected[i];
        areal_ckpt_entry *e = &ck->entries[i];
        for (size_t k = 0; k < ck->n_files && e->tensor == NULL; k++) {
            e->tensor = areal_st_header_find(&ck->files[k].hdr, s->name);
            e->file = &ck->files[k];
        }
        if (e->tensor == NULL)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "%s: tensor \"%s\" is missing from the safetensors files, but "
                                   "config.json (model_type %s) needs it",
                                   dir, s->name, ck->cfg.model_type);
        const areal_st_tensor *t = e->tensor;
        bool same = t->ndim == s->ndim;
        for (int d = 0; same && d < s->ndim; d++)
            same = t->shape[d] == s->shape[d];
        if (!same)
            return areal_error_set(
                err, AREAL_EINVAL, -1,
                "%s: tensor \"%s\" has shape [%lld%s%lld] (%d dims) but "
                "config.json (%s) implies [%lld%s%lld]",
                e->file->path, s->name, (long long)t->shape[0], t->ndim > 1 ? ", " : " ",
                t->ndim > 1 ? (long long)t->shape[1] : 0LL, t->ndim, shape_source(s),
                (long long)s->shape[0], s->ndim > 1 ? ", " : " ",
                s->ndim > 1 ? (long long)s->shape[1] : 0LL);
        if (!areal_dtype_is_float(t->dtype))
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "%s: tensor \"%s\" has dtype %s; weights must be F32, F16 or "
                                   "BF16",
                                   e->file->path, s->name, areal_dtype_name(t->dtype));
        matched++;
    }
    /* Counting first keeps the name search (linear per name) off the common path. */
    size_t total = 0;
    for (size_t k = 0; k < ck->n_files; k++)
        total += ck->files[k].hdr.n_tensors;
    for (size_t k = 0; k < ck->n_files && total > matched; k++) {
        const areal_st_header *h = &ck->files[k].hdr;
        for (size_t t = 0; t < h->n_tensors; t++) {
            const char *name = h->tensors[t].name;
            if (areal_checkpoint_find(ck, name) != NULL)
                continue;
            if (ck->cfg.tie_word_embeddings && strcmp(name, "lm_head.weight") == 0)
                continue;
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "%s: tensor \"%s\" is not part of a %s model with this "
                                   "config.json (wrong config or a different architecture?)",
                                   ck->files[k].path, name, ck->cfg.model_type);
        }
    }
    return AREAL_OK;
}

int areal_checkpoint_open(const char *dir, areal_checkpoint *ck, areal_error *err) {
    memset(ck, 0, sizeof *ck);
    char *cfg_path = areal_path_join(dir, "config.json");
    if (cfg_path == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory");
    int rc = areal_model_config_load(cfg_path, &ck->cfg, err);
    free(cfg_path);
    if (rc != AREAL_OK)
        return rc;
    json_t *wmap = NULL;
    rc = open_shards(dir, ck, &wmap, err);
    if (rc == AREAL_OK && wmap != NULL)
        rc = check_index(dir, ck, wmap, err);
    json_decref(wmap);
    if (rc == AREAL_OK)
        rc = areal_model_expected_tensors(&ck->cfg, &ck->expected, &ck->n_expected, err);
    if (rc == AREAL_OK) {
        ck->entries = calloc(ck->n_expected + 1, sizeof *ck->entries);
        ck->by_name = calloc(ck->n_expected + 1, sizeof *ck->by_name);
        rc = ck->entries && ck->by_name ? AREAL_OK
                                        : areal_error_set(err, AREAL_ENOMEM, -1, "no memory");
    }
    if (rc == AREAL_OK) {
        for (size_t i = 0; i < ck->n_expected; i++)
            ck->by_name[i] = &ck->expected[i];
        qsort(ck->by_name, ck->n_expected, sizeof *ck->by_name, cmp_spec);
        rc = match_tensors(dir, ck, err);
    }
    if (rc != AREAL_OK)
        areal_checkpoint_close(ck);
    return rc;
}

void areal_checkpoint_close(areal_checkpoint *ck) {
    if (ck == NULL)
        return;
    for (size_t i = 0; i < ck->n_files; i++)
        areal_st_close(&ck->files[i]);
    free(ck->files);
    free(ck->expected);
    free(ck->entries);
    free(ck->by_name);
    memset(ck, 0, sizeof *ck);
}

const areal_ckpt_entry *areal_checkpoint_find(const areal_checkpoint *ck, const char *name) {
    size_t lo = 0, hi = ck->n_expected;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        size_t i = (size_t)(ck->by_name[mid] - ck->expected);
        int c = strcmp(name, ck->expected[i].name);
        if (c == 0)
            return ck->entries[i].tensor ? &ck->entries[i] : NULL;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

int areal_checkpoint_load_f32(const areal_checkpoint *ck, const char *name, float *dst, size_t cap,
                              areal_error *err) {
    const areal_ckpt_entry *e = areal_checkpoint_find(ck, name);
    if (e == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1, "no tensor \"%s\" in this %s checkpoint",
                               name, ck->cfg.model_type);
    return areal_st_read_f32(e->file, e->tensor, dst, cap, err);
}
