# worker/gpu/module.mk - the GPU model: the CPU model's training step
# (forward, backward, AdamW) and a paged-cache decode step on the device in
# bf16 with fp32 master weights, on kernels/ (cuBLASLt GEMMs, attention, the
# layer, vocabulary, MoE and optimizer kernels), with the weights of the same
# HF safetensors the CPU model loads (worker/model).
#
# Declared only where kernels/module.mk found nvcc and cuBLASLt (it is read
# first: */module.mk before */*/module.mk), so the CPU build and a CI without
# the toolkit are unchanged; where they are found, `make` builds its archive,
# its CPU test of the host-side plans (test_gpu_plan, in make test) and its
# GPU test and bench (build/gpu/, make test-gpu / bench-gpu). Those link the
# CPU model, hence its packages on the GPU machine (NAME_GPU_LINK_PKGS,
# scripts/gpu-carry.sh).
ifneq ($(AREAL_CUBLASLT),)
COMPONENTS += gpumodel
gpumodel_DIR  := worker/gpu
gpumodel_DEPS := model kernels
gpumodel_GPU_TESTS   := $(wildcard worker/gpu/gpu/gpu_test_*.c)
gpumodel_GPU_BENCHES := $(wildcard worker/gpu/gpu/gpu_bench_*.c)
gpumodel_GPU_LINK_PKGS := 1
# gpu_test_ppo checks the fused PPO loss against the CPU loss of worker/rl:
# those few files (the loss, rejection sampling, its KL metrics, the per-token
# terms) are built into a small archive of their own, as kernels/module.mk
# does for the CPU model's layer kernels, so the GPU model itself never sees
# rl (ARCHITECTURE.md rule 2) and the bare GPU build needs no libyaml.
gpumodel_GPU_TEST_INC := worker/rl/include
gpumodel_RLREF_SRC := $(addprefix worker/rl/src/,loss.c rejection.c normalize.c ppo_terms.c)
gpumodel_RLREF_OBJS := $(patsubst %.c,$(BUILD)/gpu/rlref/%.o,$(gpumodel_RLREF_SRC))
gpumodel_GPU_TEST_ARCHIVES := $(BUILD)/gpu/libareal_rlref.a
$(gpumodel_RLREF_OBJS): $(BUILD)/gpu/rlref/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(GPU_CFLAGS) -Iworker/rl/include -Ilib/base/include $(call gpu_pkg_cflags,gpumodel) -c $< -o $@
$(BUILD)/gpu/libareal_rlref.a: $(gpumodel_RLREF_OBJS)
	@rm -f $@
	ar rcs $@ $^
endif
