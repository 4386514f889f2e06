/*
 * job_config.c - the trainer's job configuration (see job_config.h).
 *
 * The file is decoded to JSON here (lib/yaml, as areal_rl_config_load does)
 * so the project's own non-AReaL keys can be taken out before rl-core's
 * strict parse; the rest is areal_rl_config_from_json unchanged. Rejected:
 * teaching rl-core about model.warmupSteps - it is a key of `arealctl run`,
 * not of the RL configuration, and rl-core's key list is generated from
 * AReaL's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/train/job_config.h"
#include "areal/yaml_json.h"

/* Keys of the project's runtime that the trainer does not use (dotted paths). */
static const char *const project_keys[] = {"model.warmupSteps", NULL};

static int add_ignored(areal_rl_config *c, const char *path, areal_error *err) {
    char **n = realloc(c->ignored, (c->n_ignored + 1) * sizeof *n);
    if (n == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the config");
    c->ignored = n;
    if ((n[c->n_ignored] = strdup(path)) == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the config");
    c->n_ignored++;
    return AREAL_OK;
}

/* Removes the project keys from doc; their paths go to taken[0..*n). */
static void take_project_keys(json_t *doc, const char **taken, size_t *n) {
    *n = 0;
    for (const char *const *k = project_keys; *k; k++) {
        const char *dot = strchr(*k, '.');
        char sect[64];
        snprintf(sect, sizeof sect, "%.*s", (int)(dot - *k), *k);
        json_t *s = json_object_get(doc, sect);
        if (json_is_object(s) && json_object_get(s, dot + 1) != NULL) {
            json_object_del(s, dot + 1);
            taken[(*n)++] = *k;
            if (json_object_size(s) == 0)
                json_object_del(doc, sect);
        }
    }
}

int areal_train_config_load(const char *path, areal_rl_config *cfg, areal_error *err) {
    areal_rl_config_defaults(cfg);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return areal_error_set(err, AREAL_EIO, -1, "config %s: cannot read (%s)", path,
                               strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap)
            break;
        char *nb = cap < (64u << 20) ? realloc(buf, cap * 2) : NULL;
        if (nb == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    bool bad = ferror(f) != 0;
    fclose(f);
    if (buf == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "config %s: too large or no memory", path);
    if (bad) {
        free(buf);
        return areal_error_set(err, AREAL_EIO, -1, "config %s: read error", path);
    }
    json_t *doc = areal_yaml_to_json(buf, len, path, err);
    free(buf);
    if (doc == NULL)
        return err != NULL && err->code != AREAL_OK ? err->code : AREAL_EINVAL;
    if (json_is_null(doc)) { /* an empty file: every default */
        json_decref(doc);
        doc = json_object();
    }
    const char *taken[8];
    size_t n_taken = 0;
    if (json_is_object(doc))
        take_project_keys(doc, taken, &n_taken);
    int rc = areal_rl_config_from_json(doc, path, cfg, err);
    json_decref(doc);
    for (size_t i = 0; rc == AREAL_OK && i < n_taken; i++)
        rc = add_ignored(cfg, taken[i], err);
    return rc;
}

void areal_train_config_demo(areal_rl_config *c) {
    areal_rl_config_defaults(c);
    areal_actor_config *a = &c->actor;
    a->optimizer.lr = 3e-4;
    a->optimizer.weight_decay = 0;
    a->optimizer.warmup_steps_proportion = 0;
    a->ppo_n_minibatches = 1;
    a->kl_ctl = 0;
    a->reward_norm.enabled = true; /* group mean/std, AReaL's GRPO */
    a->reward_norm.mean_level = AREAL_NORM_GROUP;
    a->reward_norm.std_level = AREAL_NORM_GROUP;
    a->reward_norm.std_unbiased = true;
    a->reward_norm.eps = 1e-5;
    a->reward_norm.group_size = 8;
    a->recompute_logprob = true;
    a->use_decoupled_loss = true;
    a->group_size = 8;
    c->gconfig.n_samples = 8;
    c->gconfig.max_new_tokens = 6;
    c->rollout.max_head_offpolicyness = 1;
    c->rollout.consumer_batch_size = 32;
    c->rollout.max_concurrent_rollouts = 64;
    c->rollout.request_timeout = 120;
    snprintf(c->rollout.weight_update_mode, sizeof c->rollout.weight_update_mode, "disk");
    c->train_dataset.batch_size = 32;
    c->total_train_steps = 300;
    c->evaluator.freq_steps = 25;
    c->recover.freq_steps = 50;
}

static int settle_norm(areal_norm_config *n, int G, const char *key, areal_error *err) {
    bool grouped =
        n->enabled && (n->mean_level == AREAL_NORM_GROUP || n->std_level == AREAL_NORM_GROUP);
    if (!grouped || n->group_size == G)
        return AREAL_OK;
    if (n->group_size == 1) {
        n->group_size = G;
        return AREAL_OK;
    }
    return areal_error_set(err, AREAL_EINVAL, -1,
                           "%s.group_size %d disagrees with gconfig.n_samples %d: a group is "
                           "one prompt's samples (write ${gconfig.n_samples})",
                           key, n->group_size, G);
}

int areal_train_config_settle(areal_rl_config *c, areal_error *err) {
    int G = c->gconfig.n_samples;
    if (G < 1)
        return areal_error_set(err, AREAL_EINVAL, -1, "gconfig.n_samples must be >= 1, not %d", G);
    if (c->actor.group_size != G) {
        if (c->actor.group_size != 1)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "actor.group_size %d disagrees with gconfig.n_samples %d",
                                   c->actor.group_size, G);
        c->actor.group_size = G;
    }
    int rc = settle_norm(&c->actor.reward_norm, G, "actor.reward_norm", err);
    if (rc == AREAL_OK)
        rc = settle_norm(&c->actor.adv_norm, G, "actor.adv_norm", err);
    if (rc != AREAL_OK)
        return rc;
    if (c->rollout.consumer_batch_size < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "rollout.consumer_batch_size must be >= 1, not %ld",
                               c->rollout.consumer_batch_size);
    if (c->rollout.max_concurrent_rollouts <= 0)
        c->rollout.max_concurrent_rollouts = c->rollout.consumer_batch_size;
    return AREAL_OK;
}

static const char *kl_name(areal_kl_estimator e) {
    return e == AREAL_KL_K2 ? "k2" : e == AREAL_KL_K3 ? "k3" : "k1";
}

void areal_train_config_report(const areal_rl_config *c, void (*log)(void *ctx, const char *line),
                               void *ctx) {
    if (log == NULL)
        return;
    char line[2048];
    if (c->n_ignored > 0) {
        size_t used = (size_t)snprintf(
            line, sizeof line,
            "config: %zu key(s) this trainer does not use (AReaL's Python runtime, "
            "arealctl's), ignored:",
            c->n_ignored);
        for (size_t i = 0; i < c->n_ignored && used < sizeof line; i++)
            used += (size_t)snprintf(line + used, sizeof line - used, " %s", c->ignored[i]);
        log(ctx, line);
    }
    if (c->actor.kl_ctl > 0) {
        bool initial = c->ref_path == NULL ||
                       (c->actor.path != NULL && strcmp(c->ref_path, c->actor.path) == 0);
        snprintf(line, sizeof line,
                 "config: actor.kl_ctl %g: KL reward shaping (%s) against a frozen reference "
                 "policy, %s%s (one more model in memory; set actor.kl_ctl: 0 to turn it off)",
                 c->actor.kl_ctl, kl_name(c->actor.kl_estimator),
                 initial ? "the initial model" : "ref.path ", initial ? "" : c->ref_path);
        log(ctx, line);
    }
}
