# operator/: the areal-operator's controller pieces (see Makefile for the variables).
LIB_SRC    += $(wildcard operator/src/*.c)
INCLUDES   += -Ioperator/include
EXTRA_LIBS += -lpthread
TEST_SRC   += $(wildcard operator/tests/test_*.c)
DEPS_GROUPS += operator
PROGRAMS   += areal-operator
areal-operator_SRC := $(wildcard operator/cmd/*.c)
# The in-memory API server of the operator's tests (operator/tests/util/fake_api.h).
TEST_UTIL  += $(wildcard operator/tests/util/*.c)
# The cache memory bench serves its cluster from the same fake API server.
$(BUILD)/rel/bench/bench_operator_cache: $(BUILD)/rel/operator/tests/util/fake_api.o \
    $(BUILD)/rel/operator/tests/util/fake_api_gen.o $(BUILD)/rel/lib/kube/tests/util/kube_test_server.o
# The e2e bind bench starts areal-operator and the simulated nodes of the e2e cluster.
$(BUILD)/rel/bench/bench_e2e_bind: | $(BUILD)/rel/areal-operator $(BUILD)/rel/areal-e2e-nodes
FUZZ_SRC   += $(wildcard operator/fuzz/fuzz_*.c)
