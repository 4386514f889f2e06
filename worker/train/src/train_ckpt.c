/*
 * train_ckpt.c - the trainer's recover checkpoint in the form its trainer
 * holds (see train_ckpt.h).
 */
#include "areal/train/train_ckpt.h"

#include <stdio.h>
#include <string.h>

#include "areal/train/dp.h"
#include "areal/train/train_optim.h"
#include "areal/train/trainer_par.h"

int areal_train_ckpt_save(areal_pg *dp, areal_trainer *t, const char *model_dir, const char *root,
                          const areal_ckpt_state *st, areal_error *err) {
    float *m, *v;
    long *adam_step;
    size_t n;
    areal_train_optim_state(t->opt, &m, &v, &adam_step, &n);
    areal_ckpt_state s = *st;
    if (t->par == NULL) {
        s.adam_step = *adam_step;
        areal_ckpt_tensors ts = {&t->model, model_dir, m, v, n};
        return areal_ckpt_save(root, &ts, &s, err);
    }
    s.adam_step = areal_par_step_adam(areal_train_par_step(t->par))->step;
    char tmp[4200], dir[4300];
    int rc = areal_ckpt_begin(root, s.step, tmp, sizeof tmp, err);
    if (rc != AREAL_OK)
        return rc;
    snprintf(dir, sizeof dir, "%s/%s", tmp, AREAL_CKPT_SHARDS);
    rc = areal_train_dp_save_shards(dp, t, dir, err);
    if (rc != AREAL_OK) {
        areal_ckpt_abort(tmp);
        return rc;
    }
    return areal_ckpt_commit(root, tmp, &s, err);
}

int areal_train_ckpt_resume(areal_trainer *t, const char *root, areal_ckpt_state *st, char *used,
                            size_t cap, areal_ckpt_log log, void *log_ctx, areal_error *err) {
    float *m, *v;
    long *adam_step;
    size_t n;
    areal_train_optim_state(t->opt, &m, &v, &adam_step, &n);
    areal_ckpt_tensors ts = {&t->model, NULL, m, v, n};
    int rc = t->par != NULL ? areal_ckpt_find(root, st, NULL, used, cap, log, log_ctx, err)
                            : areal_ckpt_load(root, &ts, st, used, cap, log, log_ctx, err);
    if (rc != AREAL_OK)
        return rc;
    t->version = st->version;
    t->step = st->adam_step;
    *adam_step = st->adam_step;
    t->resume_dir = t->par != NULL ? used : NULL;
    t->resume_fmt = st->format;
    return AREAL_OK;
}
