# lib/kube/module.mk - the Kubernetes client library (libcurl + jansson), its tests
# with a scripted loopback HTTP server, and the watch-framer fuzz target.
LIB_SRC     += $(wildcard lib/kube/src/*.c)
INCLUDES    += -Ilib/kube/include
PKGS        += libcurl
EXTRA_LIBS  += -lpthread
DEPS_GROUPS += kube
TEST_SRC    += $(wildcard lib/kube/tests/test_*.c)
FUZZ_SRC    += $(wildcard lib/kube/fuzz/fuzz_*.c)
TEST_UTIL   += $(wildcard lib/kube/tests/util/*.c)
BENCH_SRC   += $(wildcard lib/kube/bench/bench_*.c)
