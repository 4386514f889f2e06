/*
 * test_checkpoint.c - HuggingFace model directories: every fixture
 * architecture opens; fp32, bf16, fp16 and sharded copies of one model load to
 * identical fp32 weights; and each inconsistency between config, index and
 * shards is refused with the file and field named.
 */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "areal/model/checkpoint.h"
#include "model_test_util.h"

static void open_ok(const char *dir, areal_checkpoint *ck) {
    areal_error err;
    if (areal_checkpoint_open(dir, ck, &err) != AREAL_OK)
        fail_msg("%s: %s", dir, err.msg);
}

static void every_architecture_opens(void **state) {
    (void)state;
    const char *dirs[] = {FIX "qwen2", FIX "qwen3",      FIX "qwen3-moe",  FIX "qwen2-moe-shared",
                          FIX "llama", FIX "qwen2-bf16", FIX "qwen2-fp16", FIX "qwen2-sharded"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        areal_checkpoint ck;
        open_ok(dirs[i], &ck);
        assert_true(ck.n_expected > 0);
        assert_int_equal(ck.n_files, strstr(dirs[i], "sharded") ? 2 : 1);
        areal_checkpoint_close(&ck);
    }
}

static void precisions_and_shards_load_identically(void **state) {
    (void)state;
    const char *dirs[] = {FIX "qwen2", FIX "qwen2-bf16", FIX "qwen2-fp16", FIX "qwen2-sharded"};
    areal_checkpoint ck[4];
    for (int i = 0; i < 4; i++)
        open_ok(dirs[i], &ck[i]);
    size_t checked = 0;
    for (size_t t = 0; t < ck[0].n_expected; t++) {
        const char *name = ck[0].expected[t].name;
        size_t n = (size_t)ck[0].entries[t].tensor->numel;
        float *ref = malloc(n * sizeof *ref), *got = malloc(n * sizeof *got);
        areal_error err;
        assert_int_equal(areal_checkpoint_load_f32(&ck[0], name, ref, n, &err), AREAL_OK);
        for (size_t k = 0; k < n; k++) /* the generator's values: k/128 in [-1, 1] */
            assert_true(fabsf(ref[k]) <= 1.0f && ref[k] * 128.0f == roundf(ref[k] * 128.0f));
        for (int i = 1; i < 4; i++) {
            memset(got, 0xff, n * sizeof *got);
            assert_int_equal(areal_checkpoint_load_f32(&ck[i], name, got, n, &err), AREAL_OK);
            if (memcmp(ref, got, n * sizeof *got) != 0)
                fail_msg("%s differs in %s", name, dirs[i]);
        }
        checked += n;
        free(ref);
        free(got);
    }
    assert_true(checked > 1000);
    float x;
    areal_error err;
    assert_int_equal(areal_checkpoint_load_f32(&ck[0], "model.nope", &x, 1, &err), AREAL_EINVAL);
    assert_int_equal(areal_checkpoint_load_f32(&ck[0], "model.norm.weight", &x, 1, &err),
                     AREAL_ERANGE);
    for (int i = 0; i < 4; i++)
        areal_checkpoint_close(&ck[i]);
}

/* Copies fixture dir `src` into a new scratch dir. */
static void copy_fixture(const char *src, char *dir, size_t cap) {
    assert_int_equal(mt_tmpdir(dir, cap), 0);
    const char *files[] = {"config.json", "model.safetensors", "model.safetensors.index.json",
                           "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char from[300], to[300];
        snprintf(from, sizeof from, FIX "%s/%s", src, files[i]);
        size_t len = 0;
        char *data = mt_read(from, &len);
        if (data == NULL)
            continue;
        assert_int_equal(mt_write(mt_path(to, sizeof to, dir, files[i]), data, len), 0);
        free(data);
    }
}

/* Sets one field of dir/config.json (or deletes it with value NULL). */
static void set_config(const char *dir, const char *field, json_t *value) {
    char p[300];
    mt_path(p, sizeof p, dir, "config.json");
    json_t *doc = json_load_file(p, 0, NULL);
    assert_non_null(doc);
    json_object_set_new(doc, field, value);
    assert_int_equal(json_dump_file(doc, p, 0), 0);
    json_decref(doc);
}

static void expect_refused(const char *dir, int code, const char *needle1, const char *needle2) {
    areal_checkpoint ck;
    areal_error err;
    int rc = areal_checkpoint_open(dir, &ck, &err);
    assert_int_equal(rc, code);
    assert_int_equal(ck.n_files, 0);
    if (strstr(err.msg, needle1) == NULL || (needle2 && strstr(err.msg, needle2) == NULL))
        fail_msg("expected \"%s\" / \"%s\" in: %s", needle1, needle2 ? needle2 : "", err.msg);
}

static void config_mismatches_are_refused(void **state) {
    (void)state;
    char dir[256];
    copy_fixture("qwen2", dir, sizeof dir);
    set_config(dir, "intermediate_size", json_integer(32));
    expect_refused(dir, AREAL_EINVAL, "model.layers.0.mlp.gate_proj.weight", "intermediate_size");
    set_config(dir, "intermediate_size", json_integer(24));
    set_config(dir, "num_hidden_layers", json_integer(1));
    expect_refused(dir, AREAL_EINVAL, "model.layers.1.", "not part of");
    set_config(dir, "num_hidden_layers", json_integer(3));
    expect_refused(dir, AREAL_EINVAL, "model.layers.2.", "missing");
    set_config(dir, "num_hidden_layers", json_integer(2));
    set_config(dir, "model_type", json_string("qwen3"));
    set_config(dir, "architectures", json_pack("[s]", "Qwen3ForCausalLM"));
    /* Qwen3Config defaults head_dim to 128, not hidden / heads */
    expect_refused(dir, AREAL_EINVAL, "q_proj.weight", "head_dim");
    set_config(dir, "head_dim", json_integer(4));
    expect_refused(dir, AREAL_EINVAL, "q_norm", "missing");
    set_config(dir, "model_type", json_string("mamba"));
    expect_refused(dir, AREAL_EINVAL, "config.json", "model_type");
    set_config(dir, "model_type", json_string("qwen2"));
    set_config(dir, "architectures", json_pack("[s]", "Qwen2ForCausalLM"));
    set_config(dir, "tie_word_embeddings", json_true()); /* an extra lm_head is tolerated */
    areal_checkpoint ck;
    open_ok(dir, &ck);
    assert_null(areal_checkpoint_find(&ck, "lm_head.weight"));
    areal_checkpoint_close(&ck);
    mt_rmdir(dir);
}

static void wrong_dtype_and_missing_files(void **state) {
    (void)state;
    char dir[256], p[300];
    copy_fixture("qwen2", dir, sizeof dir);
    /* rewrite the checkpoint with model.norm.weight stored as I32 */
    areal_st_file f;
    areal_error err;
    mt_path(p, sizeof p, dir, "model.safetensors");
    assert_int_equal(areal_st_open(p, &f, &err), AREAL_OK);
    areal_st_out *out = calloc(f.hdr.n_tensors, sizeof *out);
    for (size_t i = 0; i < f.hdr.n_tensors; i++) {
        const areal_st_tensor *t = &f.hdr.tensors[i];
        out[i] = (areal_st_out){t->name, t->dtype, t->ndim, t->shape, areal_st_data(&f, t)};
        if (strcmp(t->name, "model.norm.weight") == 0)
            out[i].dtype = AREAL_DT_I32;
    }
    char q[300];
    mt_path(q, sizeof q, dir, "new.safetensors");
    assert_int_equal(areal_st_write(q, out, f.hdr.n_tensors, NULL, 0, &err), AREAL_OK);
    free(out);
    areal_st_close(&f);
    assert_int_equal(rename(q, p), 0);
    expect_refused(dir, AREAL_EINVAL, "model.norm.weight", "I32");
    assert_int_equal(unlink(p), 0);
    expect_refused(dir, AREAL_EIO, "model.safetensors", NULL);
    mt_path(p, sizeof p, dir, "config.json");
    assert_int_equal(mt_write(p, "{\"model_type\": ", 15), 0);
    expect_refused(dir, AREAL_EINVAL, "config.json", "malformed JSON");
    mt_rmdir(dir);
}

static void index_mismatches_are_refused(void **state) {
    (void)state;
    char dir[256], p[300];
    copy_fixture("qwen2-sharded", dir, sizeof dir);
    mt_path(p, sizeof p, dir, "model.safetensors.index.json");
    json_t *idx = json_load_file(p, 0, NULL);
    json_t *wmap = json_object_get(idx, "weight_map");
    /* a tensor mapped to the wrong shard */
    json_object_set_new(wmap, "model.norm.weight", json_string("model-00002-of-00002.safetensors"));
    assert_int_equal(json_dump_file(idx, p, 0), 0);
    expect_refused(dir, AREAL_EINVAL, "model.norm.weight", "weight_map");
    /* a shard that does not exist */
    json_object_set_new(wmap, "model.norm.weight", json_string("model-00003-of-00002.safetensors"));
    assert_int_equal(json_dump_file(idx, p, 0), 0);
    expect_refused(dir, AREAL_EIO, "model-00003-of-00002.safetensors", NULL);
    /* a path outside the directory */
    json_object_set_new(wmap, "model.norm.weight", json_string("../x.safetensors"));
    assert_int_equal(json_dump_file(idx, p, 0), 0);
    expect_refused(dir, AREAL_EINVAL, "weight_map", "same directory");
    /* a name the shards do not hold */
    json_object_set_new(wmap, "model.norm.weight", json_string("model-00001-of-00002.safetensors"));
    json_object_set_new(wmap, "model.extra", json_string("model-00001-of-00002.safetensors"));
    assert_int_equal(json_dump_file(idx, p, 0), 0);
    expect_refused(dir, AREAL_EINVAL, "model.extra", "does not hold");
    json_object_clear(wmap);
    assert_int_equal(json_dump_file(idx, p, 0), 0);
    expect_refused(dir, AREAL_EINVAL, "weight_map", "non-empty");
    json_decref(idx);
    assert_int_equal(mt_write(p, "{]", 2), 0);
    expect_refused(dir, AREAL_EINVAL, "model.safetensors.index.json", "malformed");
    mt_rmdir(dir);
}

static void same_file(const char *a, const char *b) {
    size_t la = 0, lb = 0;
    char *x = mt_read(a, &la), *y = mt_read(b, &lb);
    if (x == NULL || y == NULL || la != lb || memcmp(x, y, la) != 0)
        fail_msg("%s and %s differ", a, b);
    free(x);
    free(y);
}

/* Writing the fixture's tensors with its split reproduces its files byte for byte. */
static void write_reproduces_python_checkpoints(void **state) {
    (void)state;
    areal_checkpoint ck;
    open_ok(FIX "qwen2-sharded", &ck);
    size_t n = ck.n_expected;
    areal_st_out *t = calloc(n, sizeof *t);
    int *shard = calloc(n, sizeof *shard);
    for (size_t i = 0; i < n; i++) {
        const areal_ckpt_entry *e = &ck.entries[i];
        t[i] = (areal_st_out){e->tensor->name, e->tensor->dtype, e->tensor->ndim, e->tensor->shape,
                              areal_st_data(e->file, e->tensor)};
        if (strstr(e->file->path, "00002-of") != NULL)
            shard[i] = 1;
        else
            shard[i] = 0;
    }
    char dir[256], a[300], b[300];
    areal_error err;
    assert_int_equal(mt_tmpdir(dir, sizeof dir), 0);
    assert_int_equal(areal_checkpoint_write(dir, t, n, shard, 2, &err), AREAL_OK);
    const char *files[] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                           "model.safetensors.index.json"};
    for (int k = 0; k < 3; k++) {
        snprintf(a, sizeof a, FIX "qwen2-sharded/%s", files[k]);
        same_file(a, mt_path(b, sizeof b, dir, files[k]));
    }
    assert_int_equal(areal_checkpoint_write(dir, t, n, shard, 1, &err), AREAL_OK);
    same_file(FIX "qwen2/model.safetensors", mt_path(b, sizeof b, dir, "model.safetensors"));
    shard[3] = 2;
    assert_int_equal(areal_checkpoint_write(dir, t, n, shard, 2, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "shard 2 of 2"));
    shard[3] = 0; /* now nothing goes to the third shard */
    assert_int_equal(areal_checkpoint_write(dir, t, n, shard, 3, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "empty"));
    assert_int_equal(areal_checkpoint_write(dir, t, n, shard, 0, &err), AREAL_EINVAL);
    free(t);
    free(shard);
    areal_checkpoint_close(&ck);
    mt_rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_architecture_opens),
        cmocka_unit_test(precisions_and_shards_load_identically),
        cmocka_unit_test(config_mismatches_are_refused),
        cmocka_unit_test(wrong_dtype_and_missing_files),
        cmocka_unit_test(index_mismatches_are_refused),
        cmocka_unit_test(write_reproduces_python_checkpoints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
