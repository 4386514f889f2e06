/*
 * test_model_config.c - config.json of every supported architecture, the
 * tensor list each implies (checked against the fixture checkpoints written
 * by the Python generator from its own independent list) and every refusal.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "areal/model/config.h"
#include "areal/model/safetensors.h"
#include "model_test_util.h"

static void load(const char *dir, areal_model_config *c) {
    char p[256];
    snprintf(p, sizeof p, FIX "%s/config.json", dir);
    areal_error err;
    if (areal_model_config_load(p, c, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
}

static void architectures_parse(void **state) {
    (void)state;
    areal_model_config c;
    load("qwen2", &c);
    assert_int_equal(c.arch, AREAL_ARCH_QWEN2);
    assert_true(c.qkv_bias && !c.o_bias && !c.qk_norm && !c.tie_word_embeddings);
    assert_int_equal(c.head_dim, 4);
    assert_int_equal(c.num_kv_heads, 2);
    assert_int_equal(c.num_experts, 0);
    load("qwen3", &c);
    assert_int_equal(c.arch, AREAL_ARCH_QWEN3);
    assert_true(!c.qkv_bias && c.qk_norm && c.tie_word_embeddings);
    assert_int_equal(c.head_dim, 8); /* explicit head_dim wins over hidden/heads */
    assert_true(c.rope_theta == 1000000.0);
    load("qwen3-moe", &c);
    assert_int_equal(c.arch, AREAL_ARCH_QWEN3_MOE);
    assert_int_equal(c.num_experts, 4);
    assert_int_equal(c.num_experts_per_tok, 2);
    assert_int_equal(c.moe_intermediate_size, 8);
    assert_true(c.norm_topk_prob && c.moe_layer[0] && !c.moe_layer[1]); /* mlp_only_layers [1] */
    assert_int_equal(c.shared_expert_intermediate_size, 0);
    load("qwen2-moe-shared", &c);
    assert_int_equal(c.arch, AREAL_ARCH_QWEN2_MOE);
    assert_int_equal(c.shared_expert_intermediate_size, 12);
    assert_true(!c.norm_topk_prob && c.moe_layer[0] && c.moe_layer[1]);
    load("llama", &c);
    assert_int_equal(c.arch, AREAL_ARCH_LLAMA);
    assert_true(c.tie_word_embeddings && !c.qkv_bias);
    assert_int_equal(c.rope_scaling.type, AREAL_ROPE_LLAMA3);
    assert_true(c.rope_scaling.factor == 8.0 && c.rope_scaling.high_freq_factor == 4.0);
    assert_int_equal(c.rope_scaling.original_max_position_embeddings, 64);
    assert_string_equal(areal_arch_name(AREAL_ARCH_QWEN3_MOE), "qwen3_moe");
}

/* The expected list equals the tensor set of the fixture the generator wrote. */
static void expected_tensors_match_fixtures(void **state) {
    (void)state;
    const char *dirs[] = {"qwen2", "qwen3", "qwen3-moe", "qwen2-moe-shared", "llama"};
    for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
        areal_model_config c;
        load(dirs[d], &c);
        areal_tensor_spec *spec;
        size_t n;
        areal_error err;
        assert_int_equal(areal_model_expected_tensors(&c, &spec, &n, &err), AREAL_OK);
        char p[256];
        snprintf(p, sizeof p, FIX "%s/model.safetensors", dirs[d]);
        areal_st_file f;
        assert_int_equal(areal_st_open(p, &f, &err), AREAL_OK);
        if (n != f.hdr.n_tensors)
            fail_msg("%s: %zu expected tensors, the fixture has %zu", dirs[d], n, f.hdr.n_tensors);
        for (size_t i = 0; i < n; i++) {
            const areal_st_tensor *t = areal_st_header_find(&f.hdr, spec[i].name);
            if (t == NULL)
                fail_msg("%s: %s not in the fixture", dirs[d], spec[i].name);
            assert_int_equal(t->ndim, spec[i].ndim);
            for (int k = 0; k < t->ndim; k++)
                assert_int_equal(t->shape[k], spec[i].shape[k]);
        }
        areal_st_close(&f);
        free(spec);
    }
}

/* Parses the qwen2 fixture with one field changed; expects a refusal naming `needle`. */
static void expect_bad(const char *field, json_t *value, const char *needle) {
    json_t *doc = json_load_file(FIX "qwen2/config.json", 0, NULL);
    assert_non_null(doc);
    if (value == NULL)
        json_object_del(doc, field);
    else
        json_object_set_new(doc, field, value);
    char *text = json_dumps(doc, 0);
    json_decref(doc);
    areal_model_config c;
    areal_error err;
    int rc = areal_model_config_parse(text, strlen(text), "cfg/config.json", &c, &err);
    free(text);
    assert_int_equal(rc, AREAL_EINVAL);
    if (strstr(err.msg, needle) == NULL || strstr(err.msg, "cfg/config.json") == NULL)
        fail_msg("expected \"%s\" and the file in: %s", needle, err.msg);
}

static void bad_configs_are_refused(void **state) {
    (void)state;
    expect_bad("model_type", json_string("gpt_neox"), "unknown architecture");
    expect_bad("model_type", NULL, "model_type");
    expect_bad("architectures", json_pack("[s]", "LlamaForCausalLM"), "architectures");
    expect_bad("hidden_size", NULL, "hidden_size");
    expect_bad("hidden_size", json_string("16"), "hidden_size");
    expect_bad("num_hidden_layers", json_integer(0), "num_hidden_layers");
    expect_bad("num_key_value_heads", json_integer(3), "num_key_value_heads");
    expect_bad("hidden_act", json_string("gelu"), "hidden_act");
    expect_bad("use_sliding_window", json_true(), "use_sliding_window");
    expect_bad("rope_theta", json_integer(-1), "rope_theta");
    expect_bad("rope_scaling", json_pack("{s:s,s:f}", "rope_type", "longrope", "factor", 2.0),
               "rope_type");
    expect_bad("rope_scaling", json_pack("{s:s}", "rope_type", "linear"), "factor");
    expect_bad("rope_scaling", json_pack("{s:s,s:f}", "rope_type", "llama3", "factor", 8.0),
               "original_max_position_embeddings");
    expect_bad("tie_word_embeddings", json_integer(1), "tie_word_embeddings");
    expect_bad("head_dim", json_integer(5), "head_dim");
    areal_model_config c;
    areal_error err;
    const char *broken = "{\"model_type\": \"qwen2\",";
    assert_int_equal(areal_model_config_parse(broken, strlen(broken), "x/config.json", &c, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "x/config.json: malformed JSON"));
    assert_int_equal(areal_model_config_load(FIX "nope/config.json", &c, &err), AREAL_EIO);
}

static void moe_configs_need_their_fields(void **state) {
    (void)state;
    json_t *doc = json_load_file(FIX "qwen3-moe/config.json", 0, NULL);
    json_object_del(doc, "moe_intermediate_size");
    char *text = json_dumps(doc, 0);
    areal_model_config c;
    areal_error err;
    assert_int_equal(areal_model_config_parse(text, strlen(text), "moe.json", &c, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "moe_intermediate_size"));
    free(text);
    json_object_set_new(doc, "moe_intermediate_size", json_integer(8));
    json_object_set_new(doc, "mlp_only_layers", json_pack("[i]", 7));
    text = json_dumps(doc, 0);
    assert_int_equal(areal_model_config_parse(text, strlen(text), "moe.json", &c, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "mlp_only_layers"));
    free(text);
    json_object_set_new(doc, "mlp_only_layers", json_array());
    json_object_set_new(doc, "decoder_sparse_step", json_integer(2));
    text = json_dumps(doc, 0);
    assert_int_equal(areal_model_config_parse(text, strlen(text), "moe.json", &c, &err), AREAL_OK);
    assert_true(!c.moe_layer[0] && c.moe_layer[1]);
    free(text);
    json_decref(doc);
}

/* Parses `text` as cfg/config.json; returns the code, *c filled on success. */
static int parse_text(const char *text, areal_model_config *c, areal_error *err) {
    return areal_model_config_parse(text, strlen(text), "cfg/config.json", c, err);
}

/* The hf fixture config of fam with `key` set to `value` (NULL: removed). */
static char *hf_with(const char *fam, const char *key, json_t *value) {
    char p[256];
    snprintf(p, sizeof p, FIX "hf/%s/config.json", fam);
    json_t *doc = json_load_file(p, 0, NULL);
    assert_non_null(doc);
    if (value == NULL)
        json_object_del(doc, key);
    else
        json_object_set_new(doc, key, value);
    char *text = json_dumps(doc, 0);
    json_decref(doc);
    return text;
}

static void expect_hf_bad(const char *fam, const char *key, json_t *value, const char *needle) {
    char *text = hf_with(fam, key, value);
    areal_model_config c;
    areal_error err;
    if (parse_text(text, &c, &err) != AREAL_EINVAL)
        fail_msg("%s with %s was accepted", fam, key);
    if (strstr(err.msg, needle) == NULL)
        fail_msg("%s %s: expected \"%s\" in: %s", fam, key, needle, err.msg);
    free(text);
}

/* transformers 5 and 4.x spellings of the same settings read alike. */
static void both_spellings(void **state) {
    (void)state;
    areal_model_config a, b;
    load("hf/qwen2", &a);
    load("hf/qwen2-v4", &b);
    assert_true(a.rope_theta == 1e6 && b.rope_theta == 1e6);
    assert_int_equal(a.rope_scaling.type, AREAL_ROPE_LINEAR);
    assert_int_equal(b.rope_scaling.type, AREAL_ROPE_LINEAR); /* 4.x "type": "linear" */
    assert_true(a.rope_scaling.factor == 2.0 && b.rope_scaling.factor == 2.0);
    load("hf/qwen3-moe", &a);    /* num_local_experts */
    load("hf/qwen3-moe-v4", &b); /* num_experts */
    assert_int_equal(a.num_experts, 4);
    assert_int_equal(b.num_experts, 4);
    assert_true(a.rope_theta == 5e5 && a.norm_topk_prob);
    load("hf/llama", &a);
    load("hf/llama-v4", &b);
    assert_int_equal(a.rope_scaling.type, AREAL_ROPE_LLAMA3);
    assert_int_equal(b.rope_scaling.type, AREAL_ROPE_LLAMA3);
    assert_int_equal(a.rope_scaling.original_max_position_embeddings, 16);
    load("hf/qwen2-moe", &a);
    assert_true(a.qkv_bias);
    /* head_dim: Qwen3 defaults to 128 when absent (transformers' Qwen3Config), a null derives it */
    areal_error err;
    char *t = hf_with("qwen3", "head_dim", NULL);
    assert_int_equal(parse_text(t, &a, &err), AREAL_OK);
    assert_int_equal(a.head_dim, 128);
    free(t);
    t = hf_with("qwen3", "head_dim", json_null());
    assert_int_equal(parse_text(t, &a, &err), AREAL_OK);
    assert_int_equal(a.head_dim, 4);
    free(t);
    t = hf_with("llama", "head_dim", NULL);
    assert_int_equal(parse_text(t, &a, &err), AREAL_OK);
    assert_int_equal(a.head_dim, 4);
    free(t);
    t = hf_with("qwen2-moe", "qkv_bias", json_false());
    assert_int_equal(parse_text(t, &a, &err), AREAL_OK);
    assert_false(a.qkv_bias);
    free(t);
    /* rope_theta only at the top level next to rope_parameters without one */
    t = hf_with("qwen2", "rope_parameters", json_pack("{s:s}", "rope_type", "default"));
    json_t *d = json_loads(t, 0, NULL);
    free(t);
    json_object_set_new(d, "rope_theta", json_real(2.5e5));
    t = json_dumps(d, 0);
    json_decref(d);
    assert_int_equal(parse_text(t, &a, &err), AREAL_OK);
    assert_true(a.rope_theta == 2.5e5 && a.rope_scaling.type == AREAL_ROPE_DEFAULT);
    free(t);
}

/* What changes the math and is not understood is refused by name. */
static void math_keys_refused(void **state) {
    (void)state;
    expect_hf_bad("qwen2", "quantization_config", json_object(), "\"quantization_config\"");
    expect_hf_bad("qwen3", "final_logit_softcapping", json_real(30), "final_logit_softcapping");
    /* use_sliding_window true: refused with a window; with "sliding_window": null
     * transformers itself slides nowhere, so it loads */
    char *t = hf_with("qwen2", "use_sliding_window", json_true());
    areal_model_config c;
    areal_error err;
    assert_int_equal(parse_text(t, &c, &err), AREAL_OK);
    json_t *d = json_loads(t, 0, NULL);
    free(t);
    json_object_set_new(d, "sliding_window", json_integer(64));
    t = json_dumps(d, 0);
    json_decref(d);
    assert_int_equal(parse_text(t, &c, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "use_sliding_window"));
    free(t);
    expect_hf_bad("qwen2", "layer_types", json_pack("[s,s]", "full_attention", "sliding_attention"),
                  "layer_types[1]");
    expect_hf_bad("qwen2", "layer_types", json_pack("[s]", "full_attention"), "layer_types");
    expect_hf_bad("qwen2", "attention_dropout", json_real(0.1), "attention_dropout");
    expect_hf_bad("qwen2", "rope_parameters",
                  json_pack("{s:s,s:f,s:f}", "rope_type", "default", "rope_theta", 1e4,
                            "partial_rotary_factor", 0.5),
                  "partial_rotary_factor");
    expect_hf_bad("qwen2", "rope_parameters",
                  json_pack("{s:{s:s},s:{s:s}}", "full_attention", "rope_type", "default",
                            "sliding_attention", "rope_type", "default"),
                  "per-layer-type");
    expect_hf_bad("qwen2", "rope_theta", json_real(5.0), "rope_parameters.rope_theta");
    expect_hf_bad("qwen2", "rope_scaling", json_pack("{s:s,s:f}", "type", "linear", "factor", 4.0),
                  "rope_scaling");
    expect_hf_bad(
        "qwen2", "rope_parameters",
        json_pack("{s:s,s:s,s:f}", "rope_type", "linear", "type", "dynamic", "factor", 2.0),
        "rope_parameters.type");
    expect_hf_bad("qwen3-moe", "num_experts", json_integer(8), "num_local_experts");
    expect_hf_bad("qwen3-moe", "num_local_experts", NULL, "num_experts");
    expect_hf_bad("qwen2", "torch_dtype", json_string("float16"), "dtype");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(architectures_parse),
        cmocka_unit_test(expected_tensors_match_fixtures),
        cmocka_unit_test(bad_configs_are_refused),
        cmocka_unit_test(moe_configs_need_their_fields),
        cmocka_unit_test(both_spellings),
        cmocka_unit_test(math_keys_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
