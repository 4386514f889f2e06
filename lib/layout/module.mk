# lib/layout/module.mk - the topology library: allocation grammar, rank groups,
# inventory (YAML/JSON, Kubernetes quantities), placement and the pod
# environment. Shared by the operator, the worker and arealctl.
LIB_SRC  += $(wildcard lib/layout/src/*.c)
INCLUDES += -Ilib/layout/include
PKGS     += jansson
TEST_SRC += $(wildcard lib/layout/tests/test_*.c)
FUZZ_SRC += $(wildcard lib/layout/fuzz/fuzz_*.c)
