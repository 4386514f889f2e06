# tests/module.mk - test helpers shared by every component's tests (tests/util:
# running a child process with a time limit). Tests link it by naming
# `testutil` in their dependencies.
COMPONENTS    += testutil
testutil_DIR  := tests/util
testutil_SRC  := $(wildcard tests/util/*.c)
testutil_INC  := tests/util
testutil_DEPS :=
