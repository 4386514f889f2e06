/*
 * task.c - the job loop's prompts and reward (see task.h).
 *
 * The synthetic task goes through a file on purpose: the demo then runs
 * exactly the dataset path a GSM8K job runs (parse, template, bad-line
 * accounting, loader), and the JSONL it trained on stays in the job
 * directory for inspection. Rejected: a second, in-memory prompt source for
 * the synthetic task (two code paths to keep equal).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/chat.h"
#include "areal/rl/reward.h"
#include "areal/train/task.h"

static void say(const areal_task_cfg *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(const areal_task_cfg *c, const char *fmt, ...) {
    if (c->log == NULL)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    c->log(c->ctx, line);
}

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void item_free(areal_task_item *it) {
    free(it->prompt);
    free(it->gold);
    free(it->answer);
    memset(it, 0, sizeof *it);
}

void areal_task_free(areal_task *t) {
    for (size_t i = 0; t->train && i < t->n_train; i++)
        item_free(&t->train[i]);
    for (size_t i = 0; t->test && i < t->n_test; i++)
        item_free(&t->test[i]);
    free(t->train);
    free(t->test);
    free(t->batch);
    areal_rl_loader_free(&t->loader);
    memset(t, 0, sizeof *t);
}

typedef struct enc_ctx {
    const areal_task_cfg *c;
    bool chat;
    areal_chat_template tmpl;
    long max_length;
    size_t n_filtered;
} enc_ctx;

/* One dataset sample -> *it. 1 = kept, 0 = filtered (too long), < 0 = error. */
static int encode_item(enc_ctx *e, const areal_rl_sample *s, areal_task_item *it,
                       areal_error *err) {
    memset(it, 0, sizeof *it);
    char *text = NULL;
    size_t len = 0;
    int rc;
    if (e->chat) {
        areal_chat_msg m = {"user", s->prompt, NULL};
        rc = areal_chat_render(&e->tmpl, &m, 1, true, false, &text, &len, err);
        if (rc != AREAL_OK)
            return rc;
    }
    size_t n = 0;
    rc = areal_tokenizer_encode(e->c->tok, text ? text : s->prompt, text ? len : strlen(s->prompt),
                                &it->prompt, &n, err);
    free(text);
    if (rc != AREAL_OK)
        return rc;
    if (n == 0 || (e->max_length > 0 && (long)n > e->max_length) || n > 1u << 20) {
        item_free(it);
        e->n_filtered++;
        return 0;
    }
    it->n_prompt = (int)n;
    it->line = s->line;
    if ((it->gold = strdup(s->gold)) == NULL) {
        item_free(it);
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the task");
    }
    int32_t *ans = NULL;
    size_t na = 0;
    rc = areal_tokenizer_encode(e->c->tok, s->gold, strlen(s->gold), &ans, &na, err);
    if (rc != AREAL_OK) {
        item_free(it);
        return rc;
    }
    it->answer = realloc(ans, (na + 1) * sizeof *ans);
    if (it->answer == NULL) {
        free(ans);
        item_free(it);
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the task");
    }
    it->answer[na] = e->c->eos;
    it->n_answer = (int)na + 1;
    return 1;
}

/* Encodes samples idx[0..n) of d into *out (allocated; *n_out kept). */
static int encode_set(enc_ctx *e, const areal_rl_dataset *d, const size_t *idx, size_t n,
                      areal_task_item **out, size_t *n_out, areal_error *err) {
    *out = calloc(n ? n : 1, sizeof **out);
    *n_out = 0;
    if (*out == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the task");
    for (size_t i = 0; i < n; i++) {
        int r = encode_item(e, &d->items[idx ? idx[i] : i], &(*out)[*n_out], err);
        if (r < 0)
            return r;
        *n_out += (size_t)r;
    }
    return AREAL_OK;
}

static int load_file(const areal_task_cfg *c, const char *path, const char *tmpl,
                     areal_rl_dataset **d, areal_error *err) {
    int rc = areal_rl_dataset_load(path, tmpl, d, err);
    if (rc != AREAL_OK)
        return rc;
    if ((*d)->n_bad > 0) {
        char buf[1024];
        areal_rl_dataset_report(*d, path, buf, sizeof buf);
        say(c, "dataset: %s", buf);
    }
    return AREAL_OK;
}

/* The synthetic task's two JSONL files under the job directory. */
static int write_synth(const areal_task_cfg *c, char *train, char *test, size_t cap,
                       areal_error *err) {
    areal_synth_split sp;
    int rc = areal_synth_make(&c->synth, &sp, err);
    if (rc != AREAL_OK)
        return rc;
    snprintf(train, cap, "%s/synth_train.jsonl", c->job_dir);
    snprintf(test, cap, "%s/synth_test.jsonl", c->job_dir);
    rc = areal_synth_write_jsonl(train, sp.train, sp.n_train, err);
    if (rc == AREAL_OK)
        rc = areal_synth_write_jsonl(test, sp.test, sp.n_test, err);
    areal_synth_free(&sp);
    return rc;
}

static int load_sets(areal_task *t, const areal_task_cfg *c, enc_ctx *e, areal_error *err) {
    const areal_rl_config *cfg = c->cfg;
    char train_path[4096], test_path[4096];
    const char *tmpl = cfg->train_dataset.prompt_template;
    const char *vpath = cfg->valid_dataset.present ? cfg->valid_dataset.path : NULL;
    int rc;
    if (t->synthetic) {
        if ((rc = write_synth(c, train_path, test_path, sizeof train_path, err)) != AREAL_OK)
            return rc;
        tmpl = "{question}"; /* the bare question: the tiny model has no chat training */
        vpath = test_path;
    } else {
        snprintf(train_path, sizeof train_path, "%s", cfg->train_dataset.path);
    }
    areal_rl_dataset *dtr = NULL, *dte = NULL;
    rc = load_file(c, train_path, tmpl, &dtr, err);
    size_t *idx = NULL, n_tr = dtr ? dtr->n : 0, n_te = 0;
    if (rc == AREAL_OK && vpath != NULL) {
        const char *vt = t->synthetic || cfg->valid_dataset.prompt_template == NULL
                             ? tmpl
                             : cfg->valid_dataset.prompt_template;
        rc = load_file(c, vpath, vt, &dte, err);
        if (rc == AREAL_OK)
            rc = encode_set(e, dte, NULL, dte->n, &t->test, &t->n_test, err);
        if (rc == AREAL_OK)
            rc = encode_set(e, dtr, NULL, dtr->n, &t->train, &t->n_train, err);
    } else if (rc == AREAL_OK) {
        /* no valid_dataset: every 10th prompt of a seeded order is held out */
        if (dtr->n < 2) {
            rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "%s: %zu prompt(s) cannot be split into train and held-out "
                                 "sets; give valid_dataset.path",
                                 train_path, dtr->n);
        } else if ((idx = malloc(dtr->n * sizeof *idx)) == NULL) {
            rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the task");
        } else {
            uint64_t x = (uint64_t)cfg->seed ^ 0x5eedULL;
            for (size_t i = 0; i < dtr->n; i++)
                idx[i] = i;
            for (size_t i = dtr->n; i > 1; i--) {
                size_t j = (size_t)(splitmix(&x) % i), s = idx[i - 1];
                idx[i - 1] = idx[j];
                idx[j] = s;
            }
            n_te = (dtr->n + 9) / 10;
            n_tr = dtr->n - n_te;
            rc = encode_set(e, dtr, idx, n_te, &t->test, &t->n_test, err);
            if (rc == AREAL_OK)
                rc = encode_set(e, dtr, idx + n_te, n_tr, &t->train, &t->n_train, err);
        }
    }
    free(idx);
    areal_rl_dataset_free(dtr);
    areal_rl_dataset_free(dte);
    if (rc == AREAL_OK && e->n_filtered > 0)
        say(c, "dataset: %zu prompt(s) longer than train_dataset.max_length %ld tokens dropped",
            e->n_filtered, e->max_length);
    if (rc == AREAL_OK && (t->n_train == 0 || t->n_test == 0))
        rc = areal_error_set(err, AREAL_EINVAL, -1,
                             "%s: no %s prompt left after filtering (train_dataset.max_length)",
                             train_path, t->n_train == 0 ? "training" : "held-out");
    return rc;
}

int areal_task_load(areal_task *t, const areal_task_cfg *c, areal_error *err) {
    memset(t, 0, sizeof *t);
    const areal_rl_config *cfg = c->cfg;
    t->tok = c->tok;
    t->eos = c->eos;
    t->synthetic = cfg->train_dataset.path == NULL || cfg->train_dataset.path[0] == '\0';
    t->reward = c->reward != AREAL_TASK_REWARD_DEFAULT
                    ? c->reward
                    : (t->synthetic ? AREAL_TASK_REWARD_EXACT : AREAL_TASK_REWARD_MATH);
    enc_ctx e = {c, false, {0}, cfg->train_dataset.max_length, 0};
    int rc = AREAL_OK;
    if (!t->synthetic && c->model_dir != NULL)
        rc = areal_chat_template_load(c->model_dir, &e.tmpl, &e.chat, err);
    if (rc == AREAL_OK)
        rc = load_sets(t, c, &e, err);
    long B = cfg->rollout.consumer_batch_size > 0 ? cfg->rollout.consumer_batch_size : 1;
    if (rc == AREAL_OK && (size_t)B > t->n_train)
        rc = areal_error_set(err, AREAL_EINVAL, -1,
                             "train_dataset.batch_size %ld is larger than the %zu training "
                             "prompts",
                             B, t->n_train);
    if (rc == AREAL_OK)
        rc = areal_rl_loader_init(&t->loader, t->n_train, (size_t)B, (uint64_t)cfg->seed,
                                  cfg->train_dataset.shuffle, err);
    if (rc == AREAL_OK && (t->batch = calloc((size_t)B, sizeof *t->batch)) == NULL)
        rc = areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the task");
    t->batch_pos = (size_t)B;
    if (rc == AREAL_OK)
        say(c, "task: %s, %zu training and %zu held-out prompts, %s reward%s",
            t->synthetic ? "synthetic arithmetic" : cfg->train_dataset.path, t->n_train, t->n_test,
            t->reward == AREAL_TASK_REWARD_MATH ? "math" : "exact",
            e.chat ? ", the model's chat template" : "");
    if (rc != AREAL_OK)
        areal_task_free(t);
    return rc;
}

const areal_task_item *areal_task_next(areal_task *t, long *train_index) {
    if (t->batch_pos >= t->loader.batch_size) {
        areal_rl_loader_next(&t->loader, t->batch, NULL, NULL);
        t->batch_pos = 0;
    }
    size_t k = t->batch[t->batch_pos++];
    t->consumed++;
    if (train_index)
        *train_index = (long)k;
    return &t->train[k];
}

int areal_task_seek(areal_task *t, long consumed, areal_error *err) {
    long B = (long)t->loader.batch_size;
    if (consumed < 0 || consumed % B != 0)
        return areal_error_set(err, AREAL_ERANGE, -1,
                               "data position %ld is not a whole number of batches of %ld",
                               consumed, B);
    long spe = (long)areal_rl_loader_steps_per_epoch(&t->loader), b = consumed / B;
    int rc = areal_rl_loader_seek(&t->loader, b / spe, (size_t)(b % spe), err);
    if (rc == AREAL_OK) {
        t->batch_pos = (size_t)B;
        t->consumed = consumed;
    }
    return rc;
}

float areal_task_reward(const areal_task *t, const areal_task_item *it, const int32_t *resp,
                        int n) {
    if (t->reward == AREAL_TASK_REWARD_EXACT)
        return n == it->n_answer && memcmp(resp, it->answer, (size_t)n * sizeof *resp) == 0 ? 1.0f
                                                                                            : 0.0f;
    char *text = NULL;
    size_t len = 0;
    areal_error e;
    if (n < 0 || areal_tokenizer_decode(t->tok, resp, (size_t)n, true, &text, &len, &e) != 0)
        return 0.0f; /* junk scores 0, never fails the step */
    float r = (float)areal_math_reward(text, len, it->gold, strlen(it->gold));
    free(text);
    return r;
}

areal_task_reward_kind areal_task_reward_parse(const char *name) {
    if (name != NULL && strcmp(name, "math") == 0)
        return AREAL_TASK_REWARD_MATH;
    if (name != NULL && strcmp(name, "exact") == 0)
        return AREAL_TASK_REWARD_EXACT;
    return AREAL_TASK_REWARD_DEFAULT;
}
