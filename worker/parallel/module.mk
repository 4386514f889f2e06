# worker/parallel/module.mk - binds the model core's shards (worker/model) to
# real process groups (worker/comm): tensor-parallel reductions, data-parallel
# gradient reduction and ZeRO-1, the 1F1B pipeline. Uses both comm and model
# (ARCHITECTURE.md: only the layers above them may).
LIB_SRC   += $(wildcard worker/parallel/src/*.c)
INCLUDES  += -Iworker/parallel/include
TEST_SRC  += $(wildcard worker/parallel/tests/test_*.c)
# the parallel tests fork ranks with the comm tests' helper, included by its
# relative path (tests/par_test_util.h), so no include flag reaches other tests
