# worker/comm/gpu.mk - the NCCL backend (worker/comm/nccl/): found, built and tested
# only where CUDA and NCCL are present. Included from worker/comm/module.mk.
#
# Where from: CUDA_HOME and NCCL_HOME when set (NCCL_HOME defaults to
# CUDA_HOME when that holds nccl.h), else the prefix that
# scripts/install-cuda.sh unpacked from PyPI's nvidia-* wheels into its cache
# (AREAL_CUDA_CACHE overrides the cache folder; a missing one means "not
# found"). Found: the backend joins libareal.a, its CPU-side test joins
# `make test`, and the link adds -lcudart -lnccl with an rpath (as-needed,
# so programs that do not use the backend do not load them). Not found:
# nothing here changes the build.
#
#   make test-gpu    GPU tests (one rank process per GPU; group size 1 on one GPU)
#   make bench-gpu   NCCL bus bandwidth and device-to-device copy bandwidth
# Both build their own small archive under $(BUILD)/gpu from the layout and
# worker sources only (no jansson, yaml, curl: a GPU machine may lack them);
# cmocka comes from pkg-config or CMOCKA_PREFIX (a dpkg -x of the debs, see
# scripts/gpu-check.sh). Rejected: nvcc (the backend is plain C on the CUDA
# runtime API) and building the GPU tests in ASan (CUDA maps the shadow gap).

gpu_comma := ,
ifdef AREAL_CUDA_CACHE
export AREAL_CUDA_CACHE
endif
AREAL_CUDA_WHEELS := $(shell scripts/install-cuda.sh --prefix-only 2>/dev/null)
CUDA_PREFIX := $(or $(CUDA_HOME),$(AREAL_CUDA_WHEELS))
NCCL_PREFIX := $(or $(NCCL_HOME),$(if $(wildcard $(CUDA_PREFIX)/include/nccl.h),$(CUDA_PREFIX)),$(AREAL_CUDA_WHEELS))
# the first folder of $(2) (lib64, lib, ...) under prefix $(1) holding lib$(3).so*
gpu_libdir = $(patsubst %/,%,$(dir $(firstword $(foreach d,$(2),$(wildcard $(1)/$(d)/lib$(3).so*)))))
CUDA_LIBDIR := $(call gpu_libdir,$(CUDA_PREFIX),lib64 lib targets/x86_64-linux/lib,cudart)
NCCL_LIBDIR := $(call gpu_libdir,$(NCCL_PREFIX),lib lib64,nccl)
AREAL_NCCL := $(and $(CUDA_PREFIX),$(NCCL_PREFIX),$(CUDA_LIBDIR),$(NCCL_LIBDIR),$(wildcard $(CUDA_PREFIX)/include/cuda_runtime_api.h),$(wildcard $(NCCL_PREFIX)/include/nccl.h))

.PHONY: test-gpu bench-gpu gpu-info

ifneq ($(AREAL_NCCL),)
# CUDA 13 keeps CCCL (nv/target, needed by cuda_fp16.h) in include/cccl, which nvcc adds itself
GPU_INCLUDES := -isystem $(CUDA_PREFIX)/include $(if $(filter $(CUDA_PREFIX),$(NCCL_PREFIX)),,-isystem $(NCCL_PREFIX)/include) \
                $(if $(wildcard $(CUDA_PREFIX)/include/cccl/nv/target),-isystem $(CUDA_PREFIX)/include/cccl)
# pip's NCCL ships only libnccl.so.2: link it by file name then
GPU_LIBDIRS := $(CUDA_LIBDIR) $(filter-out $(CUDA_LIBDIR),$(NCCL_LIBDIR))
GPU_LINK := $(addprefix -L,$(GPU_LIBDIRS)) $(addprefix -Wl$(gpu_comma)-rpath$(gpu_comma),$(GPU_LIBDIRS)) \
            -Wl,--push-state,--as-needed -lcudart \
            $(if $(wildcard $(NCCL_LIBDIR)/libnccl.so),-lnccl,-l:libnccl.so.2) -Wl,--pop-state
# mem_cuda.c replaces mem_host.c: the memory-kind check asks CUDA (areal/comm/coll.h)
LIB_SRC    := $(filter-out worker/comm/src/mem_host.c,$(LIB_SRC)) $(wildcard worker/comm/nccl/src/*.c)
INCLUDES   += $(GPU_INCLUDES)
EXTRA_LIBS += $(GPU_LINK)
TEST_SRC   += $(wildcard worker/comm/nccl/tests/test_*.c)

GPU_BUILD   := $(BUILD)/gpu
GPU_LIB_SRC := $(wildcard lib/base/src/*.c) $(filter-out lib/layout/src/cluster_parse.c,$(wildcard lib/layout/src/*.c)) \
               $(filter-out worker/comm/src/mem_host.c,$(wildcard worker/comm/src/*.c)) $(wildcard worker/comm/nccl/src/*.c)
GPU_TESTS   := $(patsubst worker/comm/nccl/gpu/%.c,$(GPU_BUILD)/%,$(wildcard worker/comm/nccl/gpu/gpu_test_*.c))
GPU_BENCHES := $(patsubst worker/comm/nccl/gpu/%.c,$(GPU_BUILD)/%,$(wildcard worker/comm/nccl/gpu/gpu_bench_*.c))
CMOCKA_LIBDIR = $(abspath $(CMOCKA_PREFIX))/usr/lib/x86_64-linux-gnu
CMOCKA_CFLAGS = $(if $(CMOCKA_PREFIX),-isystem $(CMOCKA_PREFIX)/usr/include,$(shell pkg-config --cflags cmocka 2>/dev/null))
CMOCKA_LIBS   = $(if $(CMOCKA_PREFIX),-L$(CMOCKA_LIBDIR) -Wl$(gpu_comma)-rpath$(gpu_comma)$(CMOCKA_LIBDIR) -lcmocka,$(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka))
GPU_CFLAGS = -std=c11 -D_GNU_SOURCE -Ilib/base/include -Ilib/layout/include -Iworker/comm/include -Iworker/comm/nccl/src -Iworker/comm/tests $(GPU_INCLUDES) \
             $(filter-out -Werror,$(WARN)) -O2 -g -MMD -MP

$(GPU_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(GPU_CFLAGS) $(CMOCKA_CFLAGS) -c $< -o $@

$(GPU_BUILD)/libareal_gpu.a: $(patsubst %.c,$(GPU_BUILD)/%.o,$(GPU_LIB_SRC))
	@rm -f $@
	ar rcs $@ $^

$(GPU_BUILD)/gpu_test_%: $(GPU_BUILD)/worker/comm/nccl/gpu/gpu_test_%.o $(GPU_BUILD)/libareal_gpu.a
	$(CC) -O2 -g -o $@ $^ $(GPU_LINK) $(CMOCKA_LIBS) -lpthread -lm

$(GPU_BUILD)/gpu_bench_%: $(GPU_BUILD)/worker/comm/nccl/gpu/gpu_bench_%.o $(GPU_BUILD)/libareal_gpu.a
	$(CC) -O2 -g -o $@ $^ $(GPU_LINK) -lpthread -lm

gpu-info:
	@echo "CUDA: $(CUDA_PREFIX) (lib $(CUDA_LIBDIR))"; echo "NCCL: $(NCCL_PREFIX) (lib $(NCCL_LIBDIR))"

# Output is shown in full (device notes, skips, timings); the closing line counts cmocka's results.
test-gpu: $(GPU_TESTS)
	@p=0; f=0; for b in $^; do \
	    echo "== $$b"; timeout --kill-after=5 $${TEST_TIMEOUT:-240} $$b > $$b.log 2>&1; rc=$$?; cat $$b.log; \
	    bp=$$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' $$b.log | tail -1); \
	    bf=$$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' $$b.log | tail -1); \
	    bf=$${bf:-0}; if [ $$rc -ne 0 ] && [ $$bf -eq 0 ]; then bf=1; echo "$$b: exit $$rc"; fi; \
	    p=$$((p + $${bp:-0})); f=$$((f + bf)); \
	done; echo "gpu: $$p passed, $$f failed"; [ $$f -eq 0 ]

bench-gpu: $(GPU_BENCHES)
	@for b in $^; do echo "== $$b"; timeout 240 $$b || exit 1; done
else
test-gpu bench-gpu gpu-info:
	@echo "$@: CUDA and NCCL were not found (set CUDA_HOME and NCCL_HOME, or run scripts/install-cuda.sh); nothing GPU is built" >&2
	@exit 1
endif
