/*
 * config_keys.h - the generated list of AReaL's config key paths
 * (config_areal_keys.c, from worker/rl/fixtures/make_rl_fixtures.py).
 */
#ifndef AREAL_RL_CONFIG_KEYS_H
#define AREAL_RL_CONFIG_KEYS_H

/* Sorted dotted paths; "x.*" marks a mapping with free sub-keys. */
extern const char *const areal_config_keys[];
extern const unsigned areal_config_keys_n;

#endif
