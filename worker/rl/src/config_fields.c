/*
 * config_fields.c - the table of configuration keys the C trainer
 * understands: dotted AReaL path, value kind, where it lives in
 * areal_rl_config, its allowed range or spellings. The reader
 * (config.c) and the JSON writer (config_json.c) both walk it, so a key is
 * declared once. Defaults live in areal_rl_config_defaults (config.c).
 */
#include <stddef.h>
#include <string.h>

#include "config_internal.h"

#define O(m) offsetof(areal_rl_config, m)

static const char *const DTYPES[] = {"bfloat16", "float16", "float32", NULL};
static const char *const OPTIMIZERS[] = {"adam", "adam_bf16", "sgd", NULL};
static const char *const SCHEDULES[] = {"constant", "linear", "cosine", NULL};
static const char *const KL[] = {"k1", "k2", "k3", NULL};
static const char *const RS_LEVEL[] = {"token", "sequence", NULL};
static const char *const RS_ACTION[] = {"mask", "clamp", NULL};
static const char *const RS_METRIC[] = {"ratio", "kl_k1", "kl_k2", "kl_k3", NULL};
static const char *const RS_AGG[] = {"mean", "sum", "max", NULL};
static const char *const IS_LEVEL[] = {"token", "sequence", NULL};
static const char *const UPDATE_MODES[] = {"xccl", "disk", NULL};
static const char *const RECOVER_MODES[] = {"disabled", "on", "off", "auto", NULL};
static const char *const ALGORITHMS[] = {"grpo", "ppo", "dapo", "reinforce", NULL};
static const char *const DATASET_TYPES[] = {"rl", "sft", "rw", NULL};

#define BIG  1e300
#define LBIG 4000000000000000000L

/* clang-format off */
const cfg_field cfg_fields[] = {
    /* experiment */
    {"experiment_name", K_STR, O(experiment_name), 0, 0, 0, NULL},
    {"trial_name", K_STR, O(trial_name), 0, 0, 0, NULL},
    {"cluster.fileroot", K_STR, O(fileroot), 0, 0, 0, NULL},
    {"tokenizer_path", K_STR, O(tokenizer_path), 0, 0, 0, NULL},
    {"seed", K_LONG, O(seed), 0, 0, LBIG, NULL},
    {"total_train_epochs", K_LONG, O(total_train_epochs), 0, 1, LBIG, NULL},
    {"total_train_steps", K_LONG_NULL0, O(total_train_steps), 0, 1, LBIG, NULL},
    {"algorithm", K_BUF, O(algorithm), 0, 0, 0, ALGORITHMS},
    /* actor */
    {"actor.path", K_STR, O(actor.path), 0, 0, 0, NULL},
    {"ref.path", K_STR, O(ref_path), 0, 0, 0, NULL},
    {"actor.dtype", K_BUF, O(actor.dtype), 0, 0, 0, DTYPES},
    {"actor.temperature", K_DOUBLE, O(actor.temperature), 0, 1e-6, BIG, NULL},
    {"actor.group_size", K_INT, O(actor.group_size), 0, 1, 1 << 20, NULL},
    {"actor.mb_spec.max_tokens_per_mb", K_LONG_NULL0, O(actor.max_tokens_per_mb), 0, 1, LBIG, NULL},
    {"actor.mb_spec.n_mbs", K_INT, O(actor.n_mbs), 0, 1, 1 << 20, NULL},
    {"actor.megatron.virtual_pipeline_parallel_size", K_LONG, O(actor.vpp), 0, 1, LBIG, NULL},
    {"actor.optimizer", K_SECTION, 0, 0, 0, 0, NULL},
    {"actor.optimizer.type", K_BUF, O(actor.optimizer.type), 0, 0, 0, OPTIMIZERS},
    {"actor.optimizer.lr", K_DOUBLE, O(actor.optimizer.lr), 0, 0, 10, NULL},
    {"actor.optimizer.weight_decay", K_DOUBLE, O(actor.optimizer.weight_decay), 0, 0, 10, NULL},
    {"actor.optimizer.beta1", K_DOUBLE, O(actor.optimizer.beta1), 0, 0, 0.999999999, NULL},
    {"actor.optimizer.beta2", K_DOUBLE, O(actor.optimizer.beta2), 0, 0, 0.999999999, NULL},
    {"actor.optimizer.eps", K_DOUBLE, O(actor.optimizer.eps), 0, 0, 1, NULL},
    {"actor.optimizer.min_lr_ratio", K_DOUBLE, O(actor.optimizer.min_lr_ratio), 0, 0, 1, NULL},
    {"actor.optimizer.lr_scheduler_type", K_ENUM, O(actor.optimizer.lr_scheduler), 0, 0, 0, SCHEDULES},
    {"actor.optimizer.warmup_steps_proportion", K_DOUBLE, O(actor.optimizer.warmup_steps_proportion), 0, 0, 1, NULL},
    {"actor.optimizer.gradient_clipping", K_DOUBLE, O(actor.optimizer.gradient_clipping), 0, 0, BIG, NULL},
    {"actor.ppo_n_minibatches", K_INT, O(actor.ppo_n_minibatches), 0, 1, 1 << 20, NULL},
    {"actor.eps_clip", K_DOUBLE, O(actor.eps_clip), 0, 0, 0.999999, NULL},
    {"actor.eps_clip_higher", K_OPT_DOUBLE, O(actor.eps_clip_higher), O(actor.has_eps_clip_higher), 0, BIG, NULL},
    {"actor.c_clip", K_OPT_DOUBLE, O(actor.c_clip), O(actor.has_c_clip), 1.000001, BIG, NULL},
    {"actor.reward_scaling", K_DOUBLE, O(actor.reward_scaling), 0, -BIG, BIG, NULL},
    {"actor.reward_bias", K_DOUBLE, O(actor.reward_bias), 0, -BIG, BIG, NULL},
    {"actor.reward_clip", K_DOUBLE, O(actor.reward_clip), 0, 0, BIG, NULL},
    {"actor.overlong_reward_penalty", K_BOOL, O(actor.overlong_reward_penalty), 0, 0, 0, NULL},
    {"actor.overlong_tokens", K_LONG_NULL0, O(actor.overlong_tokens), 0, 1, LBIG, NULL},
    {"actor.overlong_penalty_factor", K_DOUBLE_NULL0, O(actor.overlong_penalty_factor), 0, 0, BIG, NULL},
    {"actor.mask_no_eos_with_zero", K_BOOL, O(actor.mask_no_eos_with_zero), 0, 0, 0, NULL},
    {"actor.discount", K_DOUBLE, O(actor.discount), 0, 0, 1, NULL},
    {"actor.gae_lambda", K_DOUBLE, O(actor.gae_lambda), 0, 0, 1, NULL},
    {"actor.kl_ctl", K_DOUBLE, O(actor.kl_ctl), 0, 0, BIG, NULL},
    {"actor.kl_estimator", K_ENUM, O(actor.kl_estimator), 0, 0, 0, KL},
    {"actor.recompute_logprob", K_BOOL, O(actor.recompute_logprob), 0, 0, 0, NULL},
    {"actor.use_decoupled_loss", K_BOOL, O(actor.use_decoupled_loss), 0, 0, 0, NULL},
    {"actor.importance_sampling_level", K_ENUM, O(actor.sequence_level_is), 0, 0, 0, IS_LEVEL},
    {"actor.max_new_tokens", K_LONG, O(actor.max_new_tokens), 0, 1, LBIG, NULL},
    {"actor.dynamic_sampling", K_BOOL, O(actor.dynamic_sampling), 0, 0, 0, NULL},
    {"actor.weight_update_mode", K_BUF, O(rollout.weight_update_mode), 0, 0, 0, UPDATE_MODES},
    /* NormConfig sections (null disables) */
    {"actor.reward_norm", K_NORM, O(actor.reward_norm), 0, 0, 0, NULL},
    {"actor.adv_norm", K_NORM, O(actor.adv_norm), 0, 0, 0, NULL},
    /* RejectionSamplingConfig (null disables) */
    {"actor.rejection_sampling", K_RS, O(actor.rejection_sampling), 0, 0, 0, NULL},
    {"actor.rejection_sampling.level", K_ENUM, O(actor.rejection_sampling.level), 0, 0, 0, RS_LEVEL},
    {"actor.rejection_sampling.action", K_ENUM, O(actor.rejection_sampling.action), 0, 0, 0, RS_ACTION},
    {"actor.rejection_sampling.metric", K_ENUM, O(actor.rejection_sampling.metric), 0, 0, 0, RS_METRIC},
    {"actor.rejection_sampling.agg", K_ENUM, O(actor.rejection_sampling.agg), 0, 0, 0, RS_AGG},
    {"actor.rejection_sampling.upper", K_DOUBLE, O(actor.rejection_sampling.upper), 0, -BIG, BIG, NULL},
    {"actor.rejection_sampling.lower", K_OPT_DOUBLE, O(actor.rejection_sampling.lower), O(actor.rejection_sampling.has_lower), -BIG, BIG, NULL},
    /* gconfig */
    {"gconfig.n_samples", K_INT, O(gconfig.n_samples), 0, 1, 1 << 20, NULL},
    {"gconfig.max_new_tokens", K_LONG, O(gconfig.max_new_tokens), 0, 1, LBIG, NULL},
    {"gconfig.min_new_tokens", K_LONG, O(gconfig.min_new_tokens), 0, 0, LBIG, NULL},
    {"gconfig.max_tokens", K_LONG, O(gconfig.max_tokens), 0, 1, LBIG, NULL},
    {"gconfig.greedy", K_BOOL, O(gconfig.greedy), 0, 0, 0, NULL},
    {"gconfig.top_p", K_DOUBLE, O(gconfig.top_p), 0, 1e-9, 1, NULL},
    {"gconfig.top_k", K_LONG, O(gconfig.top_k), 0, -1, LBIG, NULL},
    {"gconfig.temperature", K_DOUBLE, O(gconfig.temperature), 0, 0, BIG, NULL},
    {"gconfig.frequency_penalty", K_DOUBLE, O(gconfig.frequency_penalty), 0, -BIG, BIG, NULL},
    {"gconfig.ignore_eos", K_BOOL, O(gconfig.ignore_eos), 0, 0, 0, NULL},
    {"gconfig.skip_special_tokens", K_BOOL, O(gconfig.skip_special_tokens), 0, 0, 0, NULL},
    {"gconfig.stop_token_ids", K_INTLIST, O(gconfig.stop_token_ids), O(gconfig.n_stop_token_ids), 0, 0, NULL},
    {"gconfig.seed", K_OPT_LONG, O(gconfig.seed), O(gconfig.has_seed), 0, LBIG, NULL},
    /* rollout */
    {"rollout.max_head_offpolicyness", K_LONG, O(rollout.max_head_offpolicyness), 0, 0, LBIG, NULL},
    {"rollout.max_concurrent_rollouts", K_LONG_NULL0, O(rollout.max_concurrent_rollouts), 0, 1, LBIG, NULL},
    {"rollout.consumer_batch_size", K_LONG, O(rollout.consumer_batch_size), 0, 1, LBIG, NULL},
    {"rollout.queue_size", K_LONG_NULL0, O(rollout.queue_size), 0, 1, LBIG, NULL},
    {"rollout.request_timeout", K_DOUBLE, O(rollout.request_timeout), 0, 1e-3, BIG, NULL},
    {"rollout.request_retries", K_INT, O(rollout.request_retries), 0, 0, 1000, NULL},
    {"rollout.enable_rollout_tracing", K_BOOL, O(rollout.enable_rollout_tracing), 0, 0, 0, NULL},
    /* datasets */
    {"train_dataset.path", K_STR, O(train_dataset.path), 0, 0, 0, NULL},
    {"train_dataset.type", K_BUF, O(train_dataset.type), 0, 0, 0, DATASET_TYPES},
    {"train_dataset.batch_size", K_LONG, O(train_dataset.batch_size), 0, 1, LBIG, NULL},
    {"train_dataset.shuffle", K_BOOL, O(train_dataset.shuffle), 0, 0, 0, NULL},
    {"train_dataset.drop_last", K_BOOL, O(train_dataset.drop_last), 0, 0, 0, NULL},
    {"train_dataset.max_length", K_LONG_NULL0, O(train_dataset.max_length), 0, 1, LBIG, NULL},
    {"train_dataset.prompt_template", K_STR, O(train_dataset.prompt_template), 0, 0, 0, NULL},
    {"valid_dataset", K_DATASET, O(valid_dataset), 0, 0, 0, NULL},
    {"valid_dataset.path", K_STR, O(valid_dataset.path), 0, 0, 0, NULL},
    {"valid_dataset.type", K_BUF, O(valid_dataset.type), 0, 0, 0, DATASET_TYPES},
    {"valid_dataset.batch_size", K_LONG_NULL0, O(valid_dataset.batch_size), 0, 1, LBIG, NULL},
    {"valid_dataset.shuffle", K_BOOL, O(valid_dataset.shuffle), 0, 0, 0, NULL},
    {"valid_dataset.drop_last", K_BOOL, O(valid_dataset.drop_last), 0, 0, 0, NULL},
    {"valid_dataset.max_length", K_LONG_NULL0, O(valid_dataset.max_length), 0, 1, LBIG, NULL},
    {"valid_dataset.prompt_template", K_STR, O(valid_dataset.prompt_template), 0, 0, 0, NULL},
    /* timers */
    {"saver.freq_epochs", K_LONG_NULL0, O(saver.freq_epochs), 0, 1, LBIG, NULL},
    {"saver.freq_steps", K_LONG_NULL0, O(saver.freq_steps), 0, 1, LBIG, NULL},
    {"saver.freq_secs", K_LONG_NULL0, O(saver.freq_secs), 0, 1, LBIG, NULL},
    {"evaluator.freq_epochs", K_LONG_NULL0, O(evaluator.freq_epochs), 0, 1, LBIG, NULL},
    {"evaluator.freq_steps", K_LONG_NULL0, O(evaluator.freq_steps), 0, 1, LBIG, NULL},
    {"evaluator.freq_secs", K_LONG_NULL0, O(evaluator.freq_secs), 0, 1, LBIG, NULL},
    {"recover.freq_epochs", K_LONG_NULL0, O(recover.freq_epochs), 0, 1, LBIG, NULL},
    {"recover.freq_steps", K_LONG_NULL0, O(recover.freq_steps), 0, 1, LBIG, NULL},
    {"recover.freq_secs", K_LONG_NULL0, O(recover.freq_secs), 0, 1, LBIG, NULL},
    {"recover.mode", K_BUF, O(recover_mode), 0, 0, 0, RECOVER_MODES},
    {NULL, 0, 0, 0, 0, 0, NULL},
};

/* The CRD's short keys (crds/areal.io_arealjobs.yaml spec.config) and AReaL's older names. */
const cfg_alias cfg_aliases[] = {
    {"model.path", "actor.path"},
    {"model.dtype", "actor.dtype"},
    {"rl.algorithm", "algorithm"},
    {"rl.totalSteps", "total_train_steps"},
    {"rl.batchSize", "train_dataset.batch_size"},
    {"rl.groupSize", "gconfig.n_samples"},
    {"rl.maxStaleness", "rollout.max_head_offpolicyness"},
    {"rl.learningRate", "actor.optimizer.lr"},
    {"rl.dynamicSampling", "actor.dynamic_sampling"},
    {NULL, NULL},
};

/* Norm sub-fields, relative to an areal_norm_config. */
static const char *const NORM_LEVELS[] = {"none", "batch", "group", NULL};
const cfg_field cfg_norm_fields[] = {
    {"mean_level", K_NORM_LEVEL, offsetof(areal_norm_config, mean_level), 0, 0, 0, NORM_LEVELS},
    {"mean_leave1out", K_BOOL, offsetof(areal_norm_config, mean_leave1out), 0, 0, 0, NULL},
    {"std_level", K_NORM_LEVEL, offsetof(areal_norm_config, std_level), 0, 0, 0, NORM_LEVELS},
    {"std_unbiased", K_BOOL, offsetof(areal_norm_config, std_unbiased), 0, 0, 0, NULL},
    {"eps", K_DOUBLE, offsetof(areal_norm_config, eps), 0, 0, 1, NULL},
    {"group_size", K_INT, offsetof(areal_norm_config, group_size), 0, 1, 1 << 20, NULL},
    {NULL, 0, 0, 0, 0, 0, NULL},
};
/* clang-format on */

const cfg_field *cfg_find_field(const char *path) {
    for (const cfg_field *f = cfg_fields; f->path != NULL; f++)
        if (strcmp(f->path, path) == 0)
            return f;
    return NULL;
}
