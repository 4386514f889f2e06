# tests/module.mk - test helpers shared by every component's tests (tests/util:
# running a child process with a time limit). Tests link it by naming
# `testutil` in their dependencies.
COMPONENTS    += testutil
testutil_DIR  := tests/util
testutil_SRC  := tests/util/child.c
testutil_INC  := tests/util
testutil_DEPS :=

# tests/util/cli_check: the --help/--version/bad-flag checks of the programs'
# CLI tests. Its own component because it calls cmocka's assertions: the fuzz
# targets compile the sources of testutil (kube's, model's) and link no cmocka.
COMPONENTS    += clicheck
clicheck_DIR  := tests/util
clicheck_SRC  := tests/util/cli_check.c
clicheck_INC  := tests/util
clicheck_DEPS := testutil

# tests/oom: the allocation-failure torture harness (oom.h). Its binaries are
# made by the Makefile's test-oom rules (sanitized, malloc wrapped at link
# time); each names what it tortures in test_oom_NAME_DEPS.
COMPONENTS    += oomtest
oomtest_DIR   := tests/oom
oomtest_SRC   := tests/oom/oom.c
oomtest_INC   := tests/oom
oomtest_DEPS  :=
oomtest_PKGS  := jansson
test_oom_kube_DEPS     := kube kubetest
test_oom_layout_DEPS   := layout yaml
test_oom_operator_DEPS := operator
