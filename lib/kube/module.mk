# lib/kube/module.mk - the Kubernetes client library (libcurl + jansson), its
# tests with a scripted loopback HTTP server (kubetest: lib/kube/tests/util,
# also used by the operator's fake API server), and the watch-framer fuzz target.
COMPONENTS  += kube
kube_DIR    := lib/kube
kube_DEPS   := base yaml
kube_PKGS   := libcurl jansson
kube_LIBS   := -lpthread
kube_TEST_DEPS := kubetest testutil
DEPS_GROUPS += kube

COMPONENTS    += kubetest
kubetest_DIR  := lib/kube/tests/util
kubetest_SRC  := $(wildcard lib/kube/tests/util/*.c)
kubetest_INC  :=
kubetest_DEPS :=
kubetest_LIBS := -lpthread
