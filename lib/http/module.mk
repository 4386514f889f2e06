# lib/http/module.mk - the HTTP/1.1 server on libwebsockets (areal/http/server.h:
# routes, bounded bodies, keep-alive, chunked streaming answered from any
# thread, timeouts) and the Prometheus registry (areal/http/metrics.h), shared
# by the operator, the rollout server and the trainer. Its tests drive it over
# loopback with libcurl.
LIB_SRC     += $(wildcard lib/http/src/*.c)
INCLUDES    += -Ilib/http/include
PKGS        += libwebsockets libcurl jansson
EXTRA_LIBS  += -lpthread
DEPS_GROUPS += operator kube
TEST_SRC    += $(wildcard lib/http/tests/test_*.c)
FUZZ_SRC    += $(wildcard lib/http/fuzz/fuzz_*.c)
BENCH_SRC   += $(wildcard lib/http/bench/bench_*.c)
