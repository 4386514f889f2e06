# operator/module.mk - the areal-operator's controller pieces (informers,
# caches, reconcile, lease, metrics, HTTP endpoints) and the program. The HTTP
# server is lib/http's (libwebsockets comes with it).
COMPONENTS    += operator
operator_DIR  := operator
operator_DEPS := kube layout http
operator_PKGS := jansson
operator_LIBS := -lpthread
operator_TEST_DEPS := optest
# the CLI test checks the program with tests/util's cli_check
test_operator_cli_DEPS := operator optest clicheck
DEPS_GROUPS   += operator
PROGRAMS      += areal-operator
areal-operator_SRC  := $(wildcard operator/cmd/*.c)
areal-operator_DEPS := operator

# the in-memory API server of the operator's tests (operator/tests/util/fake_api.h)
COMPONENTS  += optest
optest_DIR  := operator/tests/util
optest_SRC  := $(wildcard operator/tests/util/*.c)
optest_INC  :=
optest_DEPS := kubetest
optest_PKGS := jansson
optest_LIBS := -lpthread
