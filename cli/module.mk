# cli/module.mk - arealctl (plan, run) and its CLI tests.
PROGRAMS += arealctl
arealctl_SRC  := $(wildcard cli/*.c)
arealctl_DEPS := layout
TEST_SRC += $(wildcard cli/tests/test_*.c)
test_arealctl_DEPS := layout clicheck
test_run_faults_DEPS := layout clicheck
