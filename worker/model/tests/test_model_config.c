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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(architectures_parse),
        cmocka_unit_test(expected_tensors_match_fixtures),
        cmocka_unit_test(bad_configs_are_refused),
        cmocka_unit_test(moe_configs_need_their_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
