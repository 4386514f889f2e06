# worker: the comm runtime (rendezvous store, process groups, CPU backend) and
# the pod launcher areal-worker.
LIB_SRC    += $(wildcard worker/src/*.c)
INCLUDES   += -Iworker/include
EXTRA_LIBS += -lpthread
PROGRAMS   += areal-worker
areal-worker_SRC := $(wildcard worker/cmd/*.c)
TEST_SRC   += $(wildcard worker/tests/test_*.c)
FUZZ_SRC   += $(wildcard worker/fuzz/fuzz_*.c)
