# worker/comm/module.mk - the comm runtime (rendezvous store, process groups,
# CPU backend; the NCCL backend in nccl/, see gpu.mk).
LIB_SRC    += $(wildcard worker/comm/src/*.c)
INCLUDES   += -Iworker/comm/include
EXTRA_LIBS += -lpthread
TEST_SRC   += $(wildcard worker/comm/tests/test_*.c)
FUZZ_SRC   += $(wildcard worker/comm/fuzz/fuzz_*.c)
BENCH_SRC  += $(wildcard worker/comm/bench/bench_*.c)

# make bench compares with OpenMPI: its helper is built with mpicc (installed
# on demand, only for the bench) and must sit beside bench_comm.
$(BUILD)/rel/bench/bench_comm: | $(BUILD)/rel/bench/mpi_busbw
$(BUILD)/rel/bench/mpi_busbw: worker/comm/bench/mpi_busbw.c
	@scripts/install-deps.sh worker-bench
	@mkdir -p $(dir $@)
	mpicc -O2 -o $@ $<

# The NCCL backend, where CUDA and NCCL are present (make test-gpu, make bench-gpu).
include worker/comm/gpu.mk
