# worker/rl/module.mk - the RL library: job config, datasets, math reward,
# GRPO advantages, decoupled PPO loss, packing, staleness counters.
# Uses jansson and libyaml (through lib/yaml's yaml_json) only.
COMPONENTS += rl
rl_DIR     := worker/rl
rl_DEPS    := yaml
rl_PKGS    := jansson
