# worker/train/module.mk - the trainer role: the tiny model and synthetic task
# of the demo, HF export, the rollout controller (an SGLang HTTP client over
# libcurl), the training step on worker/rl's loss, weight sync (disk, and xccl
# over a comm-runtime group: xccl.c and the sender wsync_send.c),
# checkpoints and progress (`areal-worker tiny|train`).
COMPONENTS   += train
train_DIR    := worker/train
train_DEPS   := model rl comm http parallel
train_PKGS   := libcurl jansson
train_LIBS   := -lpthread
# The backend seam (areal/train/backend.h): where the GPU model is built (kernels/module.mk sets
# AREAL_CUBLASLT, worker/gpu/module.mk declares gpumodel) the trainer's GPU step (gpu/src:
# backend_gpu.c, the NCCL DP adapter gpu_dp.c) joins its archive and gpumodel its closure;
# elsewhere neither exists and src/backend.c says why the step stays on the CPU.
ifneq ($(AREAL_CUBLASLT),)
train_DEPS    += gpumodel
train_CFLAGS  += -DAREAL_HAVE_GPUMODEL=1
train_GPU_SRC := $(wildcard worker/train/gpu/src/*.c)
train_GPU_INC := worker/train/gpu/include
endif
train_TEST_DEPS := trainref testutil

# trainref: a reference SGLang-API server over the model core, on the kube
# client's scripted loopback server, so the trainer's tests do not depend on
# the rollout component (the trainer still talks to it only over HTTP).
COMPONENTS    += trainref
trainref_DIR  := worker/train/tests/util
trainref_SRC  := $(wildcard worker/train/tests/util/*.c)
trainref_INC  := worker/train/tests/util lib/kube/tests/util
trainref_DEPS := model kubetest
trainref_PKGS := jansson
trainref_LIBS := -lpthread
# make bench (never make test): async vs sync GRPO with its curves, then TRL's
# GRPOTrainer on the same model and task (bench_wsync.c and bench_wsync_shard.c, the
# sharded update against gather-through-rank-0, are bench binaries).
BENCH_SCRIPTS += worker/train/bench/bench_async.sh worker/train/bench/bench_trl.sh
