/*
 * config.h - the RL job configuration: AReaL's experiment YAML
 * (examples/math/gsm8k_grpo.yaml: actor.*, gconfig.*, rollout.*,
 * train_dataset.*, saver/recover/evaluator, ...) read into one typed struct
 * with AReaL's own defaults (areal/api/cli_args.py, areal 1.0.4), plus the
 * AReaLJob CRD's short keys (model.path, rl.totalSteps, rl.groupSize, ...) as
 * aliases, so an AReaL user can paste a config under spec.config.
 *
 * Keys fall in three classes:
 *   - understood: parsed, type- and range-checked, stored below;
 *   - AReaL's but meaningful only to its Python runtime (engine backends,
 *     sglang/vllm server flags, wandb, scheduler, ...): accepted and listed
 *     once in `ignored` so the caller can log them;
 *   - anything else: an error naming the key path (e.g. "actor.eps_clp").
 * A bad value is an error naming the key path, the value and what is allowed.
 * Keys whose AReaL meaning this trainer does not implement (use_sapo_loss,
 * m2_threshold, use_lora, prox_logp_method other than recompute) are refused
 * when set. OmegaConf ${dotted.key} interpolations are resolved against the
 * document; one naming an absent key leaves its key at the default.
 */
#ifndef AREAL_RL_CONFIG_H
#define AREAL_RL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "areal/error.h"

/* NormConfig.mean_level / std_level: "batch", "group" or null. */
typedef enum {
    AREAL_NORM_NONE = 0,
    AREAL_NORM_BATCH = 1,
    AREAL_NORM_GROUP = 2,
} areal_norm_level;

/* AReaL's NormConfig (reward_norm, adv_norm). enabled=false is YAML null. */
typedef struct areal_norm_config {
    bool enabled;
    areal_norm_level mean_level; /* default batch */
    bool mean_leave1out;         /* default false (RLOO when true) */
    areal_norm_level std_level;  /* default batch */
    bool std_unbiased;           /* default true (since AReaL v0.3.4) */
    double eps;                  /* default 1e-5 */
    int group_size;              /* default 1; must be >= 1 for group levels */
} areal_norm_config;

/* KL estimators of AReaL's KLEstimator (Schulman's k1, k2, k3). */
typedef enum {
    AREAL_KL_K1 = 0, /* d = logp - logp_base */
    AREAL_KL_K2 = 1, /* d^2 / 2 */
    AREAL_KL_K3 = 2, /* exp(-d) - 1 + d */
} areal_kl_estimator;

typedef enum { AREAL_RS_TOKEN = 0, AREAL_RS_SEQUENCE = 1 } areal_rs_level;
typedef enum { AREAL_RS_MASK = 0, AREAL_RS_CLAMP = 1 } areal_rs_action;
typedef enum {
    AREAL_RS_RATIO = 0,
    AREAL_RS_KL_K1 = 1,
    AREAL_RS_KL_K2 = 2,
    AREAL_RS_KL_K3 = 3,
} areal_rs_metric;
typedef enum { AREAL_RS_AGG_MEAN = 0, AREAL_RS_AGG_SUM = 1, AREAL_RS_AGG_MAX = 2 } areal_rs_agg;

/*
 * AReaL's RejectionSamplingConfig (actor.rejection_sampling); enabled=false
 * is YAML null (AReaL's default: the behaviour weight is then not applied).
 * The removed keys behave_imp_weight_cap / behave_imp_weight_mode (AReaL
 * rejects them) are mapped here by AReaL's own migration table.
 */
typedef struct areal_rejection_config {
    bool enabled;
    areal_rs_level level;   /* default token */
    areal_rs_action action; /* default mask */
    areal_rs_metric metric; /* default ratio */
    areal_rs_agg agg;       /* default mean (sequence level only) */
    double upper;           /* default 5.0 */
    bool has_lower;         /* default false (no lower bound) */
    double lower;
} areal_rejection_config;

/* Named apart from areal/model/optim.h's areal_lr_schedule (the schedule
 * itself), so the two headers meet in one translation unit. */
typedef enum {
    AREAL_SCHED_CONSTANT = 0,
    AREAL_SCHED_LINEAR = 1,
    AREAL_SCHED_COSINE = 2,
} areal_lr_sched_kind;

/* AReaL's OptimizerConfig (actor.optimizer). */
typedef struct areal_optimizer_config {
    char type[16];                    /* "adam" (default), "adam_bf16", "sgd" */
    double lr;                        /* default 1e-3 */
    double weight_decay;              /* default 0.01 */
    double beta1, beta2;              /* default 0.9, 0.999 */
    double eps;                       /* default 1e-8 */
    double min_lr_ratio;              /* default 0.0 */
    areal_lr_sched_kind lr_scheduler; /* default constant */
    double warmup_steps_proportion;   /* default 0.001 */
    double gradient_clipping;         /* default 1.0 */
} areal_optimizer_config;

/* The parts of AReaL's PPOActorConfig that the C trainer uses. */
typedef struct areal_actor_config {
    char *path;     /* model directory (actor.path / model.path); NULL when unset */
    char dtype[16]; /* "bfloat16" (AReaL default), "float16", "float32" */
    areal_optimizer_config optimizer;
    int group_size;           /* default 1 (AReaL's actor.group_size) */
    int ppo_n_minibatches;    /* default 4 */
    double eps_clip;          /* default 0.2 */
    bool has_eps_clip_higher; /* default false: eps_high = eps_clip */
    double eps_clip_higher;
    bool has_c_clip; /* dual clip, > 1; default off */
    double c_clip;
    double reward_scaling;        /* default 1.0 */
    double reward_bias;           /* default 0.0 */
    double reward_clip;           /* default 20.0 */
    bool overlong_reward_penalty; /* default false (DAPO) */
    long overlong_tokens;         /* 0 = unset */
    double overlong_penalty_factor;
    bool mask_no_eos_with_zero;                /* default false */
    double discount;                           /* default 1.0 */
    double gae_lambda;                         /* default 1.0 */
    areal_norm_config reward_norm;             /* default null */
    areal_norm_config adv_norm;                /* default null */
    double kl_ctl;                             /* default 0.1 */
    areal_kl_estimator kl_estimator;           /* default k1 */
    bool recompute_logprob;                    /* default false */
    bool use_decoupled_loss;                   /* default false */
    areal_rejection_config rejection_sampling; /* default null */
    bool sequence_level_is; /* importance_sampling_level: "token" (false, default) / "sequence"
                               (GSPO) */
    double temperature;     /* logprob temperature, default 1.0 */
    long max_tokens_per_mb; /* mb_spec.max_tokens_per_mb; 0 = unbounded (AReaL None) */
    int n_mbs;              /* mb_spec.n_mbs, minimum micro-batches, default 1 */
    long vpp; /* megatron.virtual_pipeline_parallel_size, default 1; the trainer refuses > 1
                 (the interleaved schedule is worker/parallel's, not the trainer's yet) */
    long max_new_tokens;   /* actor.max_new_tokens, default 1024 (overlong penalty) */
    bool dynamic_sampling; /* drop groups whose rewards are all equal (DAPO); default false */
} areal_actor_config;

/* AReaL's GenerationHyperparameters (gconfig). */
typedef struct areal_gconfig {
    int n_samples;            /* G, default 1 */
    long max_new_tokens;      /* default 16384 */
    long min_new_tokens;      /* default 0 */
    long max_tokens;          /* prompt + generation cap, default 32768 */
    bool greedy;              /* default false */
    double top_p;             /* default 1.0 */
    long top_k;               /* default 100000000 */
    double temperature;       /* default 1.0 */
    double frequency_penalty; /* default 0.0 */
    bool ignore_eos;          /* default false */
    bool skip_special_tokens; /* default true */
    int *stop_token_ids;      /* owned; default none */
    size_t n_stop_token_ids;
    bool has_seed; /* gconfig.seed; default unset */
    long seed;
} areal_gconfig;

/* The parts of AReaL's InferenceEngineConfig (rollout) that drive the controller. */
typedef struct areal_rollout_config {
    long max_head_offpolicyness;  /* eta, default 0 (synchronous) */
    long max_concurrent_rollouts; /* 0 = AReaL None: consumer_batch_size */
    long consumer_batch_size;     /* B; unset: train_dataset.batch_size (AReaL's code default
                                     is 1, its examples write ${train_dataset.batch_size}) */
    long queue_size;              /* 0 = AReaL None */
    double request_timeout;       /* seconds, default 3600 */
    int request_retries;          /* default 3 */
    char weight_update_mode[16];  /* "xccl" (default) or "disk" */
    bool enable_rollout_tracing;  /* default false */
} areal_rollout_config;

/* AReaL's _DatasetConfig (train_dataset, valid_dataset). */
typedef struct areal_dataset_config {
    bool present;          /* the section was given (valid_dataset is optional) */
    char *path;            /* owned, NULL when unset */
    char type[16];         /* "rl" default */
    long batch_size;       /* prompts per step, default 1 */
    bool shuffle;          /* default true */
    bool drop_last;        /* default true */
    long max_length;       /* prompt tokens; 0 = no filter (AReaL None) */
    char *prompt_template; /* owned, NULL = the GSM8K template (dataset.h) */
} areal_dataset_config;

/* AReaL's _Timer (saver, recover, evaluator, checkpointer): 0 = never. */
typedef struct areal_timer_config {
    long freq_epochs;
    long freq_steps;
    long freq_secs;
} areal_timer_config;

typedef struct areal_rl_config {
    char *experiment_name; /* owned; NULL when unset */
    char *trial_name;
    char *fileroot; /* cluster.fileroot */
    char *tokenizer_path;
    char algorithm[16];      /* rl.algorithm: "grpo" (default), "ppo", "dapo", "reinforce" */
    long seed;               /* default 1 */
    long total_train_epochs; /* default 1 */
    long total_train_steps;  /* 0 = unset (epochs bound); rl.totalSteps */
    areal_actor_config actor;
    char *ref_path; /* ref.path: the reference policy for kl_ctl > 0; NULL = the initial model */
    areal_gconfig gconfig;
    areal_rollout_config rollout;
    areal_dataset_config train_dataset;
    areal_dataset_config valid_dataset;
    areal_timer_config saver;
    areal_timer_config evaluator;
    areal_timer_config recover;
    char recover_mode[16]; /* "disabled" (default), "on", "off", "auto" */
    /* Keys accepted but not used (AReaL Python-runtime keys), as dotted paths. */
    char **ignored;
    size_t n_ignored;
} areal_rl_config;

/* Fills `c` with AReaL's code defaults (cli_args.py). Owns nothing yet. */
void areal_rl_config_defaults(areal_rl_config *c);

/*
 * Reads the configuration object `doc` (the job's spec.config: a JSON object)
 * over AReaL's defaults into `out` (which the call initialises; free it with
 * areal_rl_config_free even on error). `source` names the input in messages.
 * Returns AREAL_OK, AREAL_EINVAL (unknown key, wrong type, bad value: the
 * message names the dotted key path), or AREAL_ENOMEM.
 */
int areal_rl_config_from_json(const json_t *doc, const char *source, areal_rl_config *out,
                              areal_error *err);

/* As areal_rl_config_from_json on YAML (or JSON) text. */
int areal_rl_config_parse(const char *text, size_t len, const char *source, areal_rl_config *out,
                          areal_error *err);

/* As areal_rl_config_parse on a file; AREAL_EIO when it cannot be read. */
int areal_rl_config_load(const char *path, areal_rl_config *out, areal_error *err);

/* Frees what `c` owns and leaves it as areal_rl_config_defaults left it. */
void areal_rl_config_free(areal_rl_config *c);

/*
 * The effective configuration as a JSON object with AReaL's key names (for
 * logs and the checkpoint); NULL when out of memory. Caller owns the ref.
 */
json_t *areal_rl_config_to_json(const areal_rl_config *c);

#endif
