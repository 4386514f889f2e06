# worker/rollout/module.mk - the rollout engine (continuous batching over the
# CPU model with a paged KV cache and a prefix cache) under the SGLang-
# compatible HTTP server (lib/http), with weight sync over worker/comm.
COMPONENTS   += rollout
rollout_DIR  := worker/rollout
rollout_DEPS := model comm http
rollout_PKGS := jansson
rollout_LIBS := -lpthread
# The backend seam (areal/rollout/backend.h): where the GPU model is built (kernels/module.mk
# sets AREAL_CUBLASLT, worker/gpu/module.mk declares gpumodel) the engine's GPU step
# (gpu/src/engine_gpu.c) joins its archive and gpumodel its closure; elsewhere src/backend.c
# refuses the GPU with the reason the server logs.
ifneq ($(AREAL_CUBLASLT),)
rollout_DEPS    += gpumodel
rollout_CFLAGS  += -DAREAL_HAVE_GPUMODEL=1
rollout_GPU_SRC := $(wildcard worker/rollout/gpu/src/*.c)
rollout_GPU_INC := worker/rollout/src
endif
BENCH_SCRIPTS += worker/rollout/bench/bench_http.sh
# The receiver's test drives the trainer-side sender (areal/train/wsync.h,
# worker/train owns it: the trainer's half of the protocol) as a test
# dependency; the rollout library itself never uses train.
test_rollout_wsync_DEPS := rollout train
# The sharded form (areal/train/wsync_shard.h) against the receiver's slice assembly.
test_rollout_wsync_shard_DEPS := rollout train
