/*
 * loss_internal.h - helpers shared by the loss, rejection-sampling and
 * advantage sources of worker/rl (not part of the public API).
 */
#ifndef AREAL_RL_LOSS_INTERNAL_H
#define AREAL_RL_LOSS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "areal/error.h"
#include "areal/rl/loss.h"

/*
 * Checks a packed layout: T >= 0 and, when cu is given, cu[0] = 0,
 * cu[n_seqs] = T, non-decreasing. need: cu must be given.
 */
int areal_rl_check_layout(int T, const int64_t *cu, int n_seqs, bool need, areal_error *err);

/* The PPO loss options' checks (eps_clip, eps_clip_higher, c_clip, scale), shared by the
 * full loss and its per-token terms (ppo_terms.c). */
int areal_rl_check_loss_opts(const areal_ppo_loss_opts *o, areal_error *err);

#endif
