# kube/module.mk - the Kubernetes client library (libcurl + jansson), its tests
# with a scripted loopback HTTP server, and the watch-framer fuzz target.
LIB_SRC     += $(wildcard kube/src/*.c)
INCLUDES    += -Ikube/include
PKGS        += libcurl
EXTRA_LIBS  += -lpthread
DEPS_GROUPS += kube
TEST_SRC    += $(wildcard kube/tests/test_*.c)
FUZZ_SRC    += $(wildcard kube/fuzz/fuzz_*.c)
TEST_UTIL   += $(wildcard kube/tests/util/*.c)
BENCH_SRC   += $(wildcard kube/bench/bench_*.c)
