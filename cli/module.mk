# cli/module.mk - arealctl (plan, run) and its CLI tests.
PROGRAMS += arealctl
arealctl_SRC  := $(wildcard cli/*.c)
# model: worker/model's config reader, for plan's memory table (plan_mem.c)
arealctl_DEPS := layout model
TEST_SRC += $(wildcard cli/tests/test_*.c)
test_arealctl_DEPS := layout clicheck
test_plan_memory_DEPS := layout clicheck
test_run_faults_DEPS := layout clicheck
test_run_layout_DEPS := layout clicheck
