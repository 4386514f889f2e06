# worker/train: the trainer role - tiny model and synthetic task for the demo,
# HF export, (next) rollout controller, training step, weight sync, checkpoints.
LIB_SRC    += $(wildcard worker/train/src/*.c)
INCLUDES   += -Iworker/train/include
TEST_SRC   += $(wildcard worker/train/tests/test_*.c)
BENCH_SRC  += $(wildcard worker/train/bench/bench_*.c)
# The controller tests script SGLang servers with the kube client's test HTTP server.
TEST_INCLUDES += -Ilib/kube/tests/util
# A reference rollout server (SGLang's HTTP API over the model core) for the trainer's tests.
TEST_UTIL     += $(wildcard worker/train/tests/util/*.c)
TEST_INCLUDES += -Iworker/train/tests/util
