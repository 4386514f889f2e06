/*
 * test_rl_config.c - the RL job configuration (config.h): every default
 * against AReaL's own dataclass defaults (fixtures/areal-defaults.json,
 * walked from areal.api.cli_args.GRPOConfig by make_rl_fixtures.py), an
 * AReaL gsm8k_grpo-style YAML with ${} interpolations, the CRD's short keys,
 * the legacy behaviour-weight cap, keys reported as ignored, and bad input:
 * unknown keys (with the nearest spelling), wrong types, out-of-range
 * values, conflicting aliases, AReaL's cross-field rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "areal/rl/config.h"
#include "rl_test_util.h"

static int parse(const char *yaml, areal_rl_config *c, areal_error *err) {
    return areal_rl_config_parse(yaml, strlen(yaml), "job.yaml", c, err);
}

/* Our deliberate differences from AReaL's code defaults (documented in config.h). */
static int deliberate(const char *path) {
    static const char *const keys[] = {
        "rollout.consumer_batch_size", /* = train_dataset.batch_size, as AReaL's examples */
        "train_dataset.path",          /* AReaL: MISSING */
        "train_dataset.type",          /* AReaL: MISSING; "rl" here */
        "experiment_name",             /* required in AReaL; the fixture passed "x" */
        "trial_name",
        "cluster.fileroot", /* AReaL: the system temp dir + areal/; here the job dir */
        NULL,
    };
    for (int i = 0; keys[i]; i++)
        if (strcmp(path, keys[i]) == 0)
            return 1;
    return strncmp(path, "valid_dataset", 13) == 0;
}

static int compared;

static void compare_tree(const json_t *ours, const char *prefix, const json_t *areal) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)ours, k, v) {
        char path[512];
        snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", k);
        json_t *a = json_object_get(areal, path);
        if (json_is_object(v) &&
            (a == NULL || strcmp(json_string_value(json_object_get(a, "kind")), "section") == 0)) {
            if (a != NULL || strcmp(path, "actor.mb_spec") == 0 || strncmp(path, "actor", 5) == 0)
                compare_tree(v, path, areal);
            continue;
        }
        if (a == NULL || deliberate(path))
            continue;
        json_t *d = json_object_get(a, "default");
        if (json_is_string(d) && strcmp(json_string_value(d), "???") == 0)
            continue; /* OmegaConf MISSING: no default */
        if (strcmp(json_string_value(json_object_get(a, "kind")), "section") == 0) {
            /* a nullable section (reward_norm, adv_norm, rejection_sampling) */
            if (!json_is_true(json_object_get(a, "null")) || !json_is_null(v))
                fail_msg("%s: ours %s, AReaL's section default %s", path,
                         json_is_null(v) ? "null" : "set",
                         json_is_true(json_object_get(a, "null")) ? "null" : "set");
            compared++;
            continue;
        }
        int same;
        if (json_is_number(v) && json_is_number(d))
            same = rl_close(json_number_value(v), json_number_value(d), 1e-12);
        else if (json_is_string(d) && strcmp(json_string_value(d), "") == 0 && json_is_null(v))
            same = 1; /* AReaL "" for an unset path: NULL here */
        else if (json_is_array(v) && json_is_array(d))
            same = json_array_size(v) == json_array_size(d);
        else
            same = json_equal(v, d);
        if (!same) {
            char *o = json_dumps(v, JSON_ENCODE_ANY), *w = json_dumps(d, JSON_ENCODE_ANY);
            fail_msg("default of %s: ours %s, AReaL %s", path, o, w);
        }
        compared++;
    }
}

static void defaults_match_areal(void **st) {
    (void)st;
    json_t *areal = rl_load_fixture("areal-defaults.json");
    assert_non_null(areal);
    areal_rl_config c;
    assert_int_equal(areal_rl_config_from_json(NULL, "empty", &c, NULL), AREAL_OK);
    json_t *ours = areal_rl_config_to_json(&c);
    assert_non_null(ours);
    compared = 0;
    compare_tree(ours, "", areal);
    if (compared < 70)
        fail_msg("only %d defaults compared", compared);
    json_decref(ours);
    json_decref(areal);
    areal_rl_config_free(&c);
}

/* An AReaL experiment YAML in the shape of examples/math/gsm8k_grpo.yaml. */
static const char *GSM8K =
    "experiment_name: gsm8k-grpo\n"
    "trial_name: trial0\n"
    "seed: 1\n"
    "enable_offload: false\n"
    "total_train_epochs: 10\n"
    "tokenizer_path: ${actor.path}\n"
    "cluster:\n  n_nodes: 1\n  n_gpus_per_node: 8\n  fileroot: /tmp/areal/experiments\n"
    "  name_resolve: {type: nfs, nfs_record_root: /tmp/areal/name_resolve}\n"
    "allocation_mode: sglang:d4p1t1+d4p1t1\n"
    "rollout:\n"
    "  experiment_name: ${experiment_name}\n"
    "  max_concurrent_rollouts: 256\n"
    "  queue_size: null\n"
    "  consumer_batch_size: ${train_dataset.batch_size}\n"
    "  max_head_offpolicyness: 2\n"
    "  fileroot: ${cluster.fileroot}\n"
    "gconfig:\n  n_samples: 4\n  min_new_tokens: 0\n  max_new_tokens: 1024\n  greedy: false\n"
    "  temperature: 1.0\n"
    "actor:\n"
    "  experiment_name: ${experiment_name}\n"
    "  path: Qwen/Qwen2.5-1.5B-Instruct\n"
    "  disable_dropout: true\n"
    "  gradient_checkpointing: true\n"
    "  dtype: bfloat16\n"
    "  mb_spec:\n    max_tokens_per_mb: 10240\n"
    "  optimizer:\n    type: adam\n    lr: 1.70e-5\n    weight_decay: 0.017\n    beta1: 0.9\n"
    "    beta2: 0.999\n    eps: 1e-8\n    lr_scheduler_type: constant\n"
    "    gradient_clipping: 1.0\n    warmup_steps_proportion: 0.001\n"
    "  eps_clip: 0.4\n  reward_scaling: 10.0\n  reward_bias: -0.5\n  kl_ctl: 0.0\n"
    "  ppo_n_minibatches: 1\n  recompute_logprob: true\n  use_decoupled_loss: true\n"
    "  behav_imp_weight_cap: 5.0\n"
    "  reward_norm:\n    mean_level: group\n    std_level: group\n"
    "    group_size: ${gconfig.n_samples}\n"
    "  adv_norm:\n    mean_level: batch\n    std_level: batch\n"
    "  weight_update_mode: xccl\n"
    "  max_new_tokens: ${gconfig.max_new_tokens}\n"
    "  scheduling_spec:\n    - {task_type: worker, port_count: 2, gpu: 1}\n"
    "ref:\n  path: ${actor.path}\n  dtype: ${actor.dtype}\n  optimizer: null\n"
    "  scheduling_strategy: {type: colocation, target: actor}\n"
    "sglang:\n  model_path: ${actor.path}\n  random_seed: ${seed}\n  context_length: 32768\n"
    "  mem_fraction_static: 0.8\n"
    "train_dataset:\n  batch_size: 256\n  shuffle: true\n  pin_memory: true\n  num_workers: 4\n"
    "  path: openai/gsm8k\n  type: rl\n  max_length: 1024\n"
    "valid_dataset:\n  batch_size: 256\n  path: openai/gsm8k\n  type: rl\n"
    "saver:\n  experiment_name: ${experiment_name}\n  fileroot: ${cluster.fileroot}\n"
    "  freq_epochs: 1\n  freq_steps: null\n  freq_secs: null\n"
    "recover:\n  mode: disabled\n  freq_epochs: 1\n  freq_secs: 3600\n"
    "evaluator:\n  freq_epochs: 1\n"
    "stats_logger:\n  wandb:\n    mode: disabled\n";

static int ignored(const areal_rl_config *c, const char *path) {
    for (size_t i = 0; i < c->n_ignored; i++)
        if (strcmp(c->ignored[i], path) == 0)
            return 1;
    return 0;
}

static void reads_an_areal_gsm8k_config(void **st) {
    (void)st;
    areal_rl_config c;
    areal_error err;
    if (parse(GSM8K, &c, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_string_equal(c.experiment_name, "gsm8k-grpo");
    assert_string_equal(c.tokenizer_path, "Qwen/Qwen2.5-1.5B-Instruct");
    assert_string_equal(c.fileroot, "/tmp/areal/experiments");
    assert_int_equal(c.total_train_epochs, 10);
    assert_int_equal(c.rollout.max_head_offpolicyness, 2);
    assert_int_equal(c.rollout.max_concurrent_rollouts, 256);
    assert_int_equal(c.rollout.consumer_batch_size, 256);
    assert_int_equal(c.gconfig.n_samples, 4);
    assert_int_equal(c.actor.group_size, 4);
    assert_int_equal(c.actor.max_new_tokens, 1024);
    assert_int_equal(c.actor.max_tokens_per_mb, 10240);
    assert_true(c.actor.optimizer.lr == 1.70e-5);
    assert_true(c.actor.optimizer.weight_decay == 0.017);
    assert_true(c.actor.eps_clip == 0.4);
    assert_true(c.actor.reward_scaling == 10.0 && c.actor.reward_bias == -0.5);
    assert_true(c.actor.kl_ctl == 0.0);
    assert_int_equal(c.actor.ppo_n_minibatches, 1);
    assert_true(c.actor.use_decoupled_loss && c.actor.recompute_logprob);
    /* behav_imp_weight_cap: 5 -> rejection_sampling {token, mask, ratio, upper 5} */
    assert_true(c.actor.rejection_sampling.enabled);
    assert_int_equal(c.actor.rejection_sampling.level, AREAL_RS_TOKEN);
    assert_int_equal(c.actor.rejection_sampling.action, AREAL_RS_MASK);
    assert_true(c.actor.rejection_sampling.upper == 5.0);
    assert_true(c.actor.reward_norm.enabled);
    assert_int_equal(c.actor.reward_norm.mean_level, AREAL_NORM_GROUP);
    assert_int_equal(c.actor.reward_norm.group_size, 4);
    assert_true(c.actor.reward_norm.std_unbiased && c.actor.reward_norm.eps == 1e-5);
    assert_int_equal(c.actor.adv_norm.mean_level, AREAL_NORM_BATCH);
    assert_int_equal(c.train_dataset.batch_size, 256);
    assert_int_equal(c.train_dataset.max_length, 1024);
    assert_true(c.valid_dataset.present);
    assert_int_equal(c.saver.freq_epochs, 1);
    assert_int_equal(c.recover.freq_secs, 3600);
    assert_string_equal(c.rollout.weight_update_mode, "xccl");
    /* Python-runtime keys are reported, once each */
    assert_true(ignored(&c, "sglang.mem_fraction_static"));
    assert_true(ignored(&c, "cluster.n_nodes"));
    assert_true(ignored(&c, "actor.gradient_checkpointing"));
    assert_true(ignored(&c, "actor.scheduling_spec"));
    assert_true(ignored(&c, "allocation_mode"));
    assert_false(ignored(&c, "ref.path")); /* read: the trainer's reference policy (kl_ctl) */
    assert_string_equal(c.ref_path, c.actor.path); /* ${actor.path} */
    assert_true(ignored(&c, "ref.dtype"));
    assert_true(ignored(&c, "stats_logger.wandb.mode"));
    assert_false(ignored(&c, "actor.eps_clip"));
    for (size_t i = 0; i < c.n_ignored; i++)
        for (size_t j = i + 1; j < c.n_ignored; j++)
            assert_true(strcmp(c.ignored[i], c.ignored[j]) != 0);
    /* the effective config round-trips through JSON */
    json_t *j = areal_rl_config_to_json(&c);
    areal_rl_config d;
    if (areal_rl_config_from_json(j, "roundtrip", &d, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_true(d.actor.optimizer.lr == c.actor.optimizer.lr);
    assert_true(d.actor.rejection_sampling.enabled && d.actor.rejection_sampling.upper == 5.0);
    assert_int_equal(d.actor.reward_norm.group_size, 4);
    assert_int_equal(d.rollout.consumer_batch_size, 256);
    json_decref(j);
    areal_rl_config_free(&d);
    areal_rl_config_free(&c);
}

static void crd_short_keys(void **st) {
    (void)st;
    const char *y = "model:\n  path: Qwen/Qwen2.5-0.5B-Instruct\n  dtype: bfloat16\n"
                    "rl:\n  algorithm: grpo\n  totalSteps: 20\n  batchSize: 32\n  groupSize: 8\n"
                    "  maxStaleness: 2\n  learningRate: 1.0e-6\n";
    areal_rl_config c;
    areal_error err;
    if (parse(y, &c, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_string_equal(c.actor.path, "Qwen/Qwen2.5-0.5B-Instruct");
    assert_int_equal(c.total_train_steps, 20);
    assert_int_equal(c.train_dataset.batch_size, 32);
    assert_int_equal(c.rollout.consumer_batch_size, 32);
    assert_int_equal(c.gconfig.n_samples, 8);
    assert_int_equal(c.actor.group_size, 8);
    assert_int_equal(c.rollout.max_head_offpolicyness, 2);
    assert_true(c.actor.optimizer.lr == 1.0e-6);
    assert_int_equal(c.n_ignored, 0);
    areal_rl_config_free(&c);
    /* the same value twice is fine, two values are a conflict */
    assert_int_equal(parse("rl: {groupSize: 4}\ngconfig: {n_samples: 4}\n", &c, &err), AREAL_OK);
    areal_rl_config_free(&c);
    assert_int_equal(parse("rl: {groupSize: 8}\ngconfig: {n_samples: 4}\n", &c, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "rl.groupSize"));
    assert_non_null(strstr(err.msg, "gconfig.n_samples"));
    areal_rl_config_free(&c);
}

static void expect_error(const char *yaml, const char *needle) {
    areal_rl_config c;
    areal_error err;
    int rc = parse(yaml, &c, &err);
    if (rc == AREAL_OK)
        fail_msg("accepted: %s", yaml);
    if (strstr(err.msg, needle) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", err.msg, needle);
    areal_rl_config_free(&c);
}

static void bad_keys_and_values_are_named(void **st) {
    (void)st;
    expect_error("actor:\n  eps_clp: 0.2\n",
                 "actor.eps_clp: unknown key (did you mean actor.eps_clip?)");
    expect_error("rl:\n  groupsize: 4\n", "rl.groupsize: unknown key (did you mean rl.groupSize?)");
    expect_error("nonsense_top: 1\n", "nonsense_top: unknown key");
    expect_error("actor:\n  reward_norm:\n    mean_lvl: group\n", "actor.reward_norm.mean_lvl");
    expect_error("actor:\n  eps_clip: high\n", "actor.eps_clip: expected a number, got a string");
    expect_error("actor:\n  eps_clip: 1.5\n", "actor.eps_clip: 1.5 is out of range");
    expect_error("gconfig:\n  n_samples: 0\n", "gconfig.n_samples: 0 is out of range");
    expect_error("gconfig:\n  n_samples: 2.5\n", "gconfig.n_samples: expected an integer");
    expect_error("gconfig:\n  top_p: 0\n", "gconfig.top_p");
    expect_error("actor:\n  kl_estimator: k4\n",
                 "actor.kl_estimator: \"k4\" is not one of k1, k2, k3");
    expect_error("actor:\n  optimizer:\n    lr_scheduler_type: step\n",
                 "actor.optimizer.lr_scheduler_type");
    expect_error("actor:\n  recompute_logprob: yes please\n", "expected true or false");
    expect_error("actor:\n  rejection_sampling:\n    upper: 0.9\n", "upper must be > 1.0");
    expect_error("actor:\n  rejection_sampling: {metric: kl_k2, action: clamp, upper: 1}\n",
                 "clamp only supports metric ratio");
    expect_error("actor:\n  rejection_sampling: {lower: 3, upper: 2}\n", "lower (3) cannot");
    expect_error("actor:\n  c_clip: 0.5\n", "actor.c_clip");
    expect_error("actor:\n  use_sapo_loss: true\n", "SAPO is not implemented");
    expect_error("actor:\n  prox_logp_method: loglinear\n", "only \"recompute\"");
    expect_error("actor:\n  overlong_reward_penalty: true\n", "actor.overlong_tokens");
    expect_error("actor:\n  behav_imp_weight_cap: 5\n  rejection_sampling: null\n",
                 "keep rejection_sampling");
    expect_error("tokenizer_path: ${oc.env:HOME}\n", "no resolvers");
    expect_error("tokenizer_path: pre-${nowhere}-post\n", "cannot resolve ${nowhere}");
    expect_error("a: ${b}\nb: ${a}\n", "cycle");
    /* found by fuzz_rl_config: a section interpolated into itself grew until
     * the fuzzer's 2 GiB limit */
    expect_error("a:\n a:\n  x: ${a}\n\n x: ${a}\n\n",
                 "a.a.x: ${a} refers to a section that holds");
    {
        /* 2^24 values from 24 lines, each section copying the one before twice */
        char doc[4096] = "s0: {x: 1, y: 2}\n";
        for (int i = 1; i <= 24; i++)
            snprintf(doc + strlen(doc), sizeof doc - strlen(doc),
                     "s%d: {x: \"${s%d}\", y: \"${s%d}\"}\n", i, i - 1, i - 1);
        expect_error(doc, "past 100000");
    }
    expect_error("- 1\n- 2\n", "must be a mapping");
    expect_error("actor: {path: [1, 2]}\n", "actor.path: expected a string, got a list");
    expect_error("gconfig: {stop_token_ids: [1, -2]}\n", "item 1 must be a token id");
    expect_error("actor: {optimizer: 3}\n", "actor.optimizer: expected a mapping");
    expect_error("actor:\n  eps_clip: [\n", "job.yaml");
    areal_rl_config c;
    areal_error err;
    assert_int_equal(areal_rl_config_load("/nonexistent/job.yaml", &c, &err), AREAL_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/job.yaml"));
    areal_rl_config_free(&c);
}

static void nulls_and_sections(void **st) {
    (void)st;
    areal_rl_config c;
    areal_error err;
    const char *y =
        "actor:\n  rejection_sampling: {level: sequence, action: clamp, upper: 2.0}\n"
        "  megatron: {virtual_pipeline_parallel_size: 2}\n"
        "  reward_norm: {mean_level: group, std_level: null, group_size: 8}\n"
        "  adv_norm: null\n  eps_clip_higher: 0.28\n  importance_sampling_level: sequence\n"
        "valid_dataset: null\n"
        "gconfig: {stop_token_ids: [151643, 151645], seed: 7}\n"
        "total_train_steps: null\n";
    if (parse(y, &c, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(c.actor.vpp, 2); /* read (the trainer refuses it by name) */
    assert_true(c.actor.rejection_sampling.enabled);
    assert_int_equal(c.actor.rejection_sampling.level, AREAL_RS_SEQUENCE);
    /* AReaL: clamp without a lower bound clamps at 0 */
    assert_true(c.actor.rejection_sampling.has_lower && c.actor.rejection_sampling.lower == 0.0);
    assert_int_equal(c.actor.reward_norm.std_level, AREAL_NORM_NONE);
    assert_int_equal(c.actor.reward_norm.group_size, 8);
    assert_false(c.actor.adv_norm.enabled);
    assert_true(c.actor.has_eps_clip_higher && c.actor.eps_clip_higher == 0.28);
    assert_true(c.actor.sequence_level_is);
    assert_false(c.valid_dataset.present);
    assert_int_equal(c.gconfig.n_stop_token_ids, 2);
    assert_int_equal(c.gconfig.stop_token_ids[1], 151645);
    assert_true(c.gconfig.has_seed && c.gconfig.seed == 7);
    assert_int_equal(c.total_train_steps, 0);
    areal_rl_config_free(&c);
    /* dotted keys at the top level, as Hydra overrides write them */
    assert_int_equal(parse("actor.eps_clip: 0.3\ngconfig.n_samples: 2\n", &c, &err), AREAL_OK);
    assert_true(c.actor.eps_clip == 0.3);
    assert_int_equal(c.gconfig.n_samples, 2);
    areal_rl_config_free(&c);
    /* references to keys left at their defaults leave the referring keys unset, also
     * when the reference is a sibling resolved first (a fuzz finding) */
    assert_int_equal(parse("tokenizer_path: ${actor.path}\nactor:\n  dtype: ${actor.path}\n"
                           "  path: ${nowhere}\n  eps_clip: 0.3\n",
                           &c, &err),
                     AREAL_OK);
    assert_null(c.tokenizer_path);
    assert_null(c.actor.path);
    assert_string_equal(c.actor.dtype, "bfloat16");
    assert_true(c.actor.eps_clip == 0.3);
    areal_rl_config_free(&c);
    /* an interpolation inside a string, and a chain of them */
    assert_int_equal(parse("cluster: {fileroot: /data}\n"
                           "train_dataset: {path: '${cluster.fileroot}/gsm8k.jsonl'}\n"
                           "tokenizer_path: ${actor.path}\n"
                           "actor:\n  path: ${train_dataset.path}\n",
                           &c, &err),
                     AREAL_OK);
    assert_string_equal(c.train_dataset.path, "/data/gsm8k.jsonl");
    assert_string_equal(c.tokenizer_path, "/data/gsm8k.jsonl");
    areal_rl_config_free(&c);
    /* the legacy truncate mode maps to clamp */
    assert_int_equal(
        parse("actor: {behave_imp_weight_cap: 3, behave_imp_weight_mode: token_truncate}\n", &c,
              &err),
        AREAL_OK);
    assert_int_equal(c.actor.rejection_sampling.action, AREAL_RS_CLAMP);
    assert_true(c.actor.rejection_sampling.upper == 3.0);
    areal_rl_config_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_match_areal), cmocka_unit_test(reads_an_areal_gsm8k_config),
        cmocka_unit_test(crd_short_keys),       cmocka_unit_test(bad_keys_and_values_are_named),
        cmocka_unit_test(nulls_and_sections),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
