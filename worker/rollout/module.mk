# worker/rollout/module.mk - the rollout engine (continuous batching over the
# CPU model with a paged KV cache and a prefix cache) under the SGLang-
# compatible HTTP server. The engine needs only the model core and pthreads.
LIB_SRC    += $(wildcard worker/rollout/src/*.c)
INCLUDES   += -Iworker/rollout/include
EXTRA_LIBS += -lpthread
TEST_SRC   += $(wildcard worker/rollout/tests/test_*.c)
FUZZ_SRC   += $(wildcard worker/rollout/fuzz/fuzz_*.c)
BENCH_SRC  += $(wildcard worker/rollout/bench/bench_*.c)
BENCH_SCRIPTS += worker/rollout/bench/bench_http.sh
