/*
 * test_job_config.c - the trainer's job config (job_config.h): an AReaL
 * user's gsm8k_grpo.yaml as pasted under spec.config (fixtures/
 * gsm8k_grpo.yaml, with the CRD's short keys and the project's
 * model.warmupSteps) gives AReaL's values, the Python-runtime keys are
 * listed once as ignored, unknown keys and disagreeing group sizes are
 * errors naming the key path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/train/job_config.h"

#define FIX "worker/train/tests/fixtures/"

typedef struct logs {
    int n;
    char text[8192];
} logs;

static void logline(void *ctx, const char *line) {
    logs *l = ctx;
    l->n++;
    size_t used = strlen(l->text);
    snprintf(l->text + used, sizeof l->text - used, "%s\n", line);
}

static bool ignored(const areal_rl_config *c, const char *key) {
    for (size_t i = 0; i < c->n_ignored; i++)
        if (strcmp(c->ignored[i], key) == 0)
            return true;
    return false;
}

static void gsm8k_grpo_yaml_reads_as_areal(void **st) {
    (void)st;
    areal_rl_config c;
    areal_error err;
    if (areal_train_config_load(FIX "gsm8k_grpo.yaml", &c, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(areal_train_config_settle(&c, &err), AREAL_OK);
    /* the values of AReaL's example (areal.md 4.4), interpolations resolved */
    assert_true(c.actor.optimizer.lr == 1.70e-5);
    assert_true(c.actor.optimizer.weight_decay == 0.017);
    assert_true(c.actor.eps_clip == 0.4);
    assert_true(c.actor.reward_scaling == 10.0);
    assert_true(c.actor.reward_bias == -0.5);
    assert_true(c.actor.kl_ctl == 0.0);
    assert_int_equal(c.actor.ppo_n_minibatches, 1);
    assert_true(c.actor.recompute_logprob && c.actor.use_decoupled_loss);
    assert_true(c.actor.rejection_sampling.enabled);
    assert_true(c.actor.rejection_sampling.upper == 5.0);
    assert_true(c.actor.reward_norm.enabled);
    assert_int_equal(c.actor.reward_norm.mean_level, AREAL_NORM_GROUP);
    assert_int_equal(c.actor.reward_norm.group_size, 4);
    assert_int_equal(c.actor.adv_norm.mean_level, AREAL_NORM_BATCH);
    assert_int_equal(c.actor.group_size, 4);
    assert_int_equal(c.actor.max_tokens_per_mb, 10240);
    assert_int_equal(c.gconfig.n_samples, 4);
    assert_int_equal(c.gconfig.max_new_tokens, 1024);
    assert_int_equal(c.rollout.max_head_offpolicyness, 2);
    assert_int_equal(c.rollout.max_concurrent_rollouts, 256);
    assert_int_equal(c.rollout.consumer_batch_size, 256); /* ${train_dataset.batch_size} */
    assert_int_equal(c.total_train_steps, 5);             /* rl.totalSteps, the CRD's alias */
    assert_int_equal(c.total_train_epochs, 10);
    assert_string_equal(c.actor.path, "Qwen/Qwen2.5-1.5B-Instruct");
    assert_string_equal(c.train_dataset.path, "openai/gsm8k");
    assert_true(c.valid_dataset.present);
    assert_int_equal(c.recover.freq_secs, 3600);
    assert_string_equal(c.recover_mode, "disabled");
    /* Python-runtime keys and the project's key: accepted, listed */
    assert_true(ignored(&c, "sglang.mem_fraction_static"));
    assert_true(ignored(&c, "actor.gradient_checkpointing"));
    assert_true(ignored(&c, "model.warmupSteps"));
    assert_false(ignored(&c, "actor.eps_clip"));
    logs l = {0};
    areal_train_config_report(&c, logline, &l);
    assert_int_equal(l.n, 1); /* the ignored keys once (xccl runs as asked: no line) */
    assert_non_null(strstr(l.text, "ignored:"));
    assert_non_null(strstr(l.text, "sglang.mem_fraction_static"));
    assert_string_equal(c.rollout.weight_update_mode, "xccl");
    areal_rl_config_free(&c);
}

static int load_text(const char *text, areal_rl_config *c, areal_error *err) {
    char path[] = "/tmp/areal-jobcfg-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    int rc = areal_train_config_load(path, c, err);
    if (rc == AREAL_OK)
        rc = areal_train_config_settle(c, err);
    unlink(path);
    return rc;
}

static void bad_keys_and_values_are_named(void **st) {
    (void)st;
    areal_rl_config c;
    areal_error err;
    assert_int_equal(load_text("actor:\n  eps_clp: 0.3\n", &c, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "actor.eps_clp"));
    areal_rl_config_free(&c);
    assert_int_equal(load_text("trainer:\n  steps: 3\n", &c, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "trainer"));
    areal_rl_config_free(&c);
    assert_int_equal(load_text("rl:\n  groupSize: many\n", &c, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "rl.groupSize"));
    areal_rl_config_free(&c);
    /* a group that is not one prompt's samples */
    assert_int_equal(load_text("gconfig:\n  n_samples: 4\nactor:\n  group_size: 3\n", &c, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "actor.group_size"));
    areal_rl_config_free(&c);
    assert_int_equal(areal_train_config_load("/nonexistent/job.yaml", &c, &err), AREAL_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/job.yaml"));
    areal_rl_config_free(&c);
}

static void crd_short_keys_and_defaults(void **st) {
    (void)st;
    areal_rl_config c;
    areal_error err;
    const char *doc = "model:\n  path: tiny\n  warmupSteps: 300\nrl:\n  totalSteps: 7\n"
                      "  batchSize: 16\n  groupSize: 8\n  maxStaleness: 0\n"
                      "  learningRate: 0.001\nactor:\n  reward_norm:\n    mean_level: group\n"
                      "    std_level: group\n";
    if (load_text(doc, &c, &err) != AREAL_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(c.total_train_steps, 7);
    assert_int_equal(c.rollout.consumer_batch_size, 16);
    assert_int_equal(c.rollout.max_concurrent_rollouts, 16); /* AReaL None -> consumer bs */
    assert_int_equal(c.gconfig.n_samples, 8);
    assert_int_equal(c.actor.group_size, 8);             /* follows G (settle) */
    assert_int_equal(c.actor.reward_norm.group_size, 8); /* follows G */
    assert_int_equal(c.rollout.max_head_offpolicyness, 0);
    assert_true(c.actor.optimizer.lr == 1e-3);
    assert_string_equal(c.actor.path, "tiny");
    assert_int_equal(c.actor.ppo_n_minibatches, 4); /* AReaL's code default */
    assert_true(c.actor.kl_ctl == 0.1);
    logs l = {0};
    areal_train_config_report(&c, logline, &l);
    assert_non_null(strstr(l.text, "actor.kl_ctl 0.1"));
    areal_rl_config_free(&c);
    /* the demo's configuration needs no file */
    areal_train_config_demo(&c);
    assert_int_equal(areal_train_config_settle(&c, &err), AREAL_OK);
    assert_int_equal(c.gconfig.n_samples, 8);
    assert_int_equal(c.rollout.consumer_batch_size, 32);
    assert_true(c.actor.kl_ctl == 0);
    areal_rl_config_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gsm8k_grpo_yaml_reads_as_areal),
        cmocka_unit_test(bad_keys_and_values_are_named),
        cmocka_unit_test(crd_short_keys_and_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
