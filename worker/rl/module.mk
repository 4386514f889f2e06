# worker/rl/module.mk - the RL library: job config, datasets, math reward,
# GRPO advantages, decoupled PPO loss, packing, staleness counters.
# Uses jansson and libyaml (through lib/yaml's yaml_json) only.
LIB_SRC    += $(wildcard worker/rl/src/*.c)
INCLUDES   += -Iworker/rl/include
PKGS       += jansson
TEST_SRC   += $(wildcard worker/rl/tests/test_*.c)
FUZZ_SRC   += $(wildcard worker/rl/fuzz/fuzz_*.c)
