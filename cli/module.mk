# cli/module.mk - arealctl (plan, run) and its CLI tests.
PROGRAMS += arealctl
arealctl_SRC := $(wildcard cli/*.c)
TEST_SRC += $(wildcard cli/tests/test_*.c)
