# worker: the comm runtime (rendezvous store, process groups, CPU backend) and
# the pod launcher areal-worker.
LIB_SRC    += $(wildcard worker/src/*.c)
INCLUDES   += -Iworker/include
EXTRA_LIBS += -lpthread
PROGRAMS   += areal-worker
areal-worker_SRC := $(wildcard worker/cmd/*.c)
TEST_SRC   += $(wildcard worker/tests/test_*.c)
FUZZ_SRC   += $(wildcard worker/fuzz/fuzz_*.c)
BENCH_SRC  += $(wildcard worker/bench/bench_*.c)

# make bench compares with OpenMPI: its helper is built with mpicc (installed
# on demand, only for the bench) and must sit beside bench_comm.
$(BUILD)/rel/bench/bench_comm: | $(BUILD)/rel/bench/mpi_busbw
$(BUILD)/rel/bench/mpi_busbw: worker/bench/mpi_busbw.c
	@scripts/install-deps.sh worker-bench
	@mkdir -p $(dir $@)
	mpicc -O2 -o $@ $<

# The NCCL backend, where CUDA and NCCL are present (make test-gpu, make bench-gpu).
include worker/gpu.mk
