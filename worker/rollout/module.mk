# worker/rollout/module.mk - the rollout engine (continuous batching over the
# CPU model with a paged KV cache and a prefix cache) under the SGLang-
# compatible HTTP server (lib/http), with weight sync over worker/comm.
COMPONENTS   += rollout
rollout_DIR  := worker/rollout
rollout_DEPS := model comm http
rollout_PKGS := jansson
rollout_LIBS := -lpthread
# the backend seam (src/backend.c) names what a GPU build lacks (kernels/module.mk sets AREAL_CUBLASLT)
rollout_CFLAGS += $(if $(AREAL_CUBLASLT),-DAREAL_HAVE_GPUMODEL=1)
BENCH_SCRIPTS += worker/rollout/bench/bench_http.sh
# The receiver's test drives the trainer-side sender (areal/train/wsync.h,
# worker/train owns it: the trainer's half of the protocol) as a test
# dependency; the rollout library itself never uses train.
test_rollout_wsync_DEPS := rollout train
# The sharded form (areal/train/wsync_shard.h) against the receiver's slice assembly.
test_rollout_wsync_shard_DEPS := rollout train
