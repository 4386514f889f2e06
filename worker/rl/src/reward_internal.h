/*
 * reward_internal.h - shared between the math answer sources of worker/rl.
 */
#ifndef AREAL_RL_REWARD_INTERNAL_H
#define AREAL_RL_REWARD_INTERNAL_H

#include <stdbool.h>

#include "areal/rl/reward.h"

/* Equal values: exact fractions equal, else relative 1e-6. */
bool areal_math_number_equal(const areal_math_number *a, const areal_math_number *b);

#endif
