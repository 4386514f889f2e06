# worker/comm/module.mk - the comm runtime (rendezvous store, process groups,
# CPU backend) and its NCCL backend in nccl/, a GPU part (kernels/module.mk
# builds it where CUDA and NCCL are found).
COMPONENTS += comm
comm_DIR   := worker/comm
comm_DEPS  := base layout
comm_LIBS  := -lpthread
# test_worker_cli runs areal-worker with tests/util's cli_check (named per
# binary: the fuzz targets compile the sources of what they name, and
# cli_check needs cmocka)
test_worker_cli_DEPS := comm clicheck
# GPU parts: C on the CUDA runtime and NCCL (joins libareal_comm.a where found;
# mem_cuda.c then replaces mem_host.c: the memory-kind check asks CUDA,
# areal/comm/coll.h), its CPU-side tests (make test), and the tests and benches
# that need a GPU (they share the CPU tests' bodies, worker/comm/tests/coll_body.h).
comm_GPU_SRC      := $(wildcard worker/comm/nccl/src/*.c)
comm_GPU_REPLACES := worker/comm/src/mem_host.c
comm_GPU_TEST_SRC := $(wildcard worker/comm/nccl/tests/test_*.c)
comm_GPU_TESTS    := $(wildcard worker/comm/nccl/gpu/gpu_test_*.c)
comm_GPU_BENCHES  := $(wildcard worker/comm/nccl/gpu/gpu_bench_*.c)
comm_GPU_INC      := worker/comm/nccl/src worker/comm/tests

# make bench compares with OpenMPI: its helper is built with mpicc (installed
# on demand, only for the bench) and must sit beside bench_comm.
$(BUILD)/rel/bench/bench_comm: | $(BUILD)/rel/bench/mpi_busbw
$(BUILD)/rel/bench/mpi_busbw: worker/comm/bench/mpi_busbw.c
	@scripts/install-deps.sh worker-bench
	@mkdir -p $(dir $@)
	mpicc -O2 -o $@ $<
