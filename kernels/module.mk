# kernels/module.mk - the GPU side of the build: finds CUDA, NCCL and nvcc,
# owns the nvcc rule, builds the GPU parts that components declare, and the
# CUDA kernels of this folder (the `kernels` component, each kernel checked
# against its CPU twin by a GPU test).
#
# A component declares its GPU parts in its own module.mk, unconditionally:
#   NAME_GPU_SRC      C sources on the CUDA runtime / NCCL (join libareal_NAME.a where found)
#   NAME_GPU_REPLACES sources of NAME_SRC that the GPU sources replace where found
#   NAME_CUDA_SRC     .cu sources (compiled by nvcc where nvcc is found)
#   NAME_GPU_TEST_SRC CPU-side cmocka tests of the GPU parts (join `make test` where found)
#   NAME_GPU_TESTS    test programs that need a GPU (make test-gpu), NAME_GPU_BENCHES (make bench-gpu)
#   NAME_GPU_INC      extra include folders of its GPU sources and GPU tests
#   NAME_GPU_SKIP     sources left out of the bare GPU build (they need packages it lacks)
#   NAME_GPU_TEST_ARCHIVES extra archives its GPU tests and benches link (built by its own rules)
#   NAME_GPU_TEST_INC extra include folders of its GPU tests and benches only (a CPU twin's
#                     headers, with its archive in NAME_GPU_TEST_ARCHIVES; never its sources')
#   NAME_GPU_LINK_PKGS 1: its GPU programs link its closure's NAME_PKGS/NAME_LIBS too
#                     (from GPU_PKG_PREFIX on the GPU machine; see GPU_CFLAGS below)
#
# Where from: CUDA_HOME and NCCL_HOME when set (NCCL_HOME defaults to
# CUDA_HOME when that holds nccl.h), else the prefix that
# scripts/install-cuda.sh unpacked from PyPI's nvidia-* wheels into its cache
# (AREAL_CUDA_CACHE overrides the cache folder; a missing one means "not
# found"); nvcc is $(NVCC), else CUDA_PREFIX/bin/nvcc. Found: the GPU parts join
# their components' archives, their CPU-side tests join `make test`, the link of
# anything that names such a component adds -lcudart -lnccl with an rpath
# (as-needed), and `make` also builds the GPU test programs (CI compiles them).
# Not found: nothing here changes the build.
#
#   make test-gpu    GPU tests (one rank process per GPU; group size 1 on one GPU)
#   make bench-gpu   NCCL bus bandwidth and device-to-device copy bandwidth
#   make gpu-bins    build both's programs only
# Both use a bare build under $(BUILD)/gpu (archives libareal_NAME.a of the
# closure of what the GPU programs name, without NAME_GPU_SKIP: a GPU machine may
# lack jansson, yaml, curl); cmocka comes from pkg-config or CMOCKA_PREFIX (a
# dpkg -x of the debs, see scripts/gpu-check.sh). Rejected: building the GPU
# tests in ASan (CUDA maps the shadow gap) and -Werror there (an unknown host
# compiler on the GPU machine must not stop a device check).

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
NVCC ?= $(wildcard $(CUDA_PREFIX)/bin/nvcc)
AREAL_NVCC := $(and $(AREAL_NCCL),$(NVCC))
# cuBLASLt (the nvidia-cublas wheel, or CUBLAS_HOME, else CUDA's own): the GEMM
# kernel, its test and the bench need it. A pip wheel ships only
# libcublasLt.so.N: linked by file name then, as NCCL is.
CUBLAS_PREFIX := $(or $(CUBLAS_HOME),$(CUDA_PREFIX))
CUBLAS_LIBDIR := $(call gpu_libdir,$(CUBLAS_PREFIX),lib64 lib targets/x86_64-linux/lib,cublasLt)
CUBLAS_LIB := $(firstword $(wildcard $(CUBLAS_LIBDIR)/libcublasLt.so) $(wildcard $(CUBLAS_LIBDIR)/libcublasLt.so.*))
AREAL_CUBLASLT := $(and $(AREAL_NVCC),$(wildcard $(CUBLAS_PREFIX)/include/cublasLt.h),$(CUBLAS_LIB))

.PHONY: test-gpu bench-gpu gpu-bins gpu-info

ifneq ($(AREAL_NCCL),)
# CUDA 13 keeps CCCL (nv/target, needed by cuda_fp16.h) in include/cccl, which nvcc adds itself
GPU_INCLUDES := -isystem $(CUDA_PREFIX)/include $(if $(filter $(CUDA_PREFIX),$(NCCL_PREFIX)),,-isystem $(NCCL_PREFIX)/include) \
                $(if $(wildcard $(CUDA_PREFIX)/include/cccl/nv/target),-isystem $(CUDA_PREFIX)/include/cccl) \
                $(if $(and $(AREAL_CUBLASLT),$(filter-out $(CUDA_PREFIX),$(CUBLAS_PREFIX))),-isystem $(CUBLAS_PREFIX)/include)
# pip's NCCL ships only libnccl.so.2: link it by file name then
GPU_LIBDIRS := $(CUDA_LIBDIR) $(filter-out $(CUDA_LIBDIR),$(NCCL_LIBDIR)) \
               $(if $(AREAL_CUBLASLT),$(filter-out $(CUDA_LIBDIR) $(NCCL_LIBDIR),$(CUBLAS_LIBDIR)))
GPU_LINK := $(addprefix -L,$(GPU_LIBDIRS)) $(addprefix -Wl$(gpu_comma)-rpath$(gpu_comma),$(GPU_LIBDIRS)) \
            -Wl,--push-state,--as-needed -lcudart $(if $(AREAL_CUBLASLT),-l:$(notdir $(CUBLAS_LIB))) \
            $(if $(wildcard $(NCCL_LIBDIR)/libnccl.so),-lnccl,-l:libnccl.so.2) -Wl,--pop-state

# The kernels component: CUDA sources and their host-side headers; only where nvcc is.
ifneq ($(AREAL_NVCC),)
COMPONENTS     += kernels
kernels_DIR    := kernels
kernels_DEPS   := base
kernels_SRC    := $(wildcard kernels/src/*.c)
kernels_GPU_INC := worker/model/include
kernels_NEED_LT := kernels/src/k_gemm.cu kernels/src/k_moe_gemm.cu kernels/gpu/gpu_test_moe.c kernels/gpu/gpu_test_gemm.c kernels/gpu/gpu_bench_kernels.c
kernels_CUDA_SRC := $(filter-out $(if $(AREAL_CUBLASLT),,$(kernels_NEED_LT)),$(wildcard kernels/src/*.cu))
kernels_GPU_TESTS := $(filter-out $(if $(AREAL_CUBLASLT),,$(kernels_NEED_LT)),$(wildcard kernels/gpu/gpu_test_*.c))
kernels_GPU_BENCHES := $(filter-out $(if $(AREAL_CUBLASLT),,$(kernels_NEED_LT)),$(wildcard kernels/gpu/gpu_bench_*.c))
# The GPU tests check each kernel against the CPU model's own layer kernels
# (worker/model/src/k_*.c, internal to the model): those few files are built
# into a small archive of their own here, rather than the whole model
# component, whose closure (OpenBLAS, jansson, ...) a bare GPU machine lacks.
kernels_REF_SRC := $(addprefix worker/model/src/,k_rmsnorm.c k_rope.c k_swiglu.c pool.c)
kernels_REF_OBJS := $(patsubst %.c,$(BUILD)/gpu/kref/%.o,$(kernels_REF_SRC))
kernels_GPU_TEST_ARCHIVES := $(BUILD)/gpu/libareal_kref.a
$(kernels_REF_OBJS): $(BUILD)/gpu/kref/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(GPU_CFLAGS) -Iworker/model/include -Ilib/base/include -c $< -o $@
$(BUILD)/gpu/libareal_kref.a: $(kernels_REF_OBJS)
	@rm -f $@
	ar rcs $@ $^
endif

# sm_90 (H100/H200) code plus PTX for later chips; NVCC_ARCH overrides.
NVCC_ARCH  ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCC_FLAGS := -std=c++17 -O2 -g $(NVCC_ARCH) -Xcompiler -Wall,-Wextra
cuobjs = $(patsubst %.cu,$(BUILD)/$(1)/%.cu.o,$(2))

GPU_BUILD := $(BUILD)/gpu
CMOCKA_LIBDIR = $(abspath $(CMOCKA_PREFIX))/usr/lib/x86_64-linux-gnu
CMOCKA_CFLAGS = $(if $(CMOCKA_PREFIX),-isystem $(CMOCKA_PREFIX)/usr/include,$(shell pkg-config --cflags cmocka 2>/dev/null))
CMOCKA_LIBS   = $(if $(CMOCKA_PREFIX),-L$(CMOCKA_LIBDIR) -Wl$(gpu_comma)-rpath$(gpu_comma)$(CMOCKA_LIBDIR) -lcmocka,$(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka))
GPU_CFLAGS = -std=c11 -D_GNU_SOURCE $(filter-out -Werror,$(WARN)) -O2 -g -MMD -MP
# The pkg-config packages of a closure in the bare build (worker/gpu's model
# test links the CPU model: jansson, PCRE2, OpenBLAS, libunistring): from
# GPU_PKG_PREFIX (a dpkg -x of the .debs scripts/gpu-carry.sh gathers; by
# default the cmocka prefix, which holds them too), else pkg-config. Only a
# component that sets NAME_GPU_LINK_PKGS links them into its GPU programs (the
# others' bare builds skip the sources that need packages, NAME_GPU_SKIP).
GPU_PKG_PREFIX ?= $(CMOCKA_PREFIX)
gpu_pkg_libdirs = $(if $(GPU_PKG_PREFIX),$(wildcard $(abspath $(GPU_PKG_PREFIX))/usr/lib/x86_64-linux-gnu $(abspath $(GPU_PKG_PREFIX))/usr/lib/x86_64-linux-gnu/openblas-pthread))
gpu_pkgs_of = $(sort $(foreach d,$(call closure_of,$(1)),$($(d)_PKGS)))
gpu_pkg_cflags = $(if $(strip $(call gpu_pkgs_of,$(1))),$(if $(GPU_PKG_PREFIX),$(addprefix -isystem ,$(wildcard $(abspath $(GPU_PKG_PREFIX))/usr/include $(abspath $(GPU_PKG_PREFIX))/usr/include/x86_64-linux-gnu/openblas-pthread)),$(shell pkg-config --cflags $(call gpu_pkgs_of,$(1)) 2>/dev/null)))
# DT_RPATH (--disable-new-dtags), not RUNPATH: libopenblas finds libgfortran through it too
gpu_pkg_libs = $(if $($(1)_GPU_LINK_PKGS),$(if $(GPU_PKG_PREFIX),$(addprefix -L,$(gpu_pkg_libdirs)) -Wl$(gpu_comma)--disable-new-dtags $(addprefix -Wl$(gpu_comma)-rpath$(gpu_comma),$(gpu_pkg_libdirs)) $(addprefix -l,$(patsubst lib%,%,$(call gpu_pkgs_of,$(1)))),$(shell pkg-config --libs $(call gpu_pkgs_of,$(1)) 2>/dev/null)) \
    $(filter-out $(GPU_LINK) -lstdc++,$(filter -l%,$(foreach d,$(call closure_of,$(1)),$($(d)_LIBS)))))

# Run once every component is declared (MODULE_SETUP / MODULE_RULES, see the
# Makefile): the GPU parts join their components, then the rules of the CUDA
# objects and of the bare GPU build.
GPU_COMPONENTS = $(foreach c,$(COMPONENTS),$(if $(strip $($(c)_GPU_SRC)$($(c)_CUDA_SRC)$($(c)_GPU_TESTS)$($(c)_GPU_BENCHES)),$(c)))
define gpu_setup_one
$(1)_SRC      := $(filter-out $($(1)_GPU_REPLACES),$($(1)_SRC)) $($(1)_GPU_SRC)
$(1)_CFLAGS   += $(GPU_INCLUDES) $(addprefix -I,$($(1)_GPU_INC))
$(1)_LIBS     += $(GPU_LINK) $(if $($(1)_CUDA_SRC),-lstdc++)
$(1)_TEST_SRC += $($(1)_GPU_TEST_SRC)
$(1)_EXTRA_OBJS_rel := $(call cuobjs,rel,$(if $(AREAL_NVCC),$($(1)_CUDA_SRC)))
$(1)_EXTRA_OBJS_san := $(call cuobjs,san,$(if $(AREAL_NVCC),$($(1)_CUDA_SRC)))
endef
kernels_gpu_setup = $(foreach c,$(GPU_COMPONENTS),$(eval $(call gpu_setup_one,$(c))))\
  $(eval GPU_TESTS := $(foreach c,$(GPU_COMPONENTS),$(addprefix $(GPU_BUILD)/,$(notdir $(basename $($(c)_GPU_TESTS))))))\
  $(eval GPU_BENCHES := $(foreach c,$(GPU_COMPONENTS),$(addprefix $(GPU_BUILD)/,$(notdir $(basename $($(c)_GPU_BENCHES))))))\
  $(eval ALL_EXTRA += $(GPU_TESTS) $(GPU_BENCHES))
MODULE_SETUP += kernels_gpu_setup

# the -I folders of the closure of C, and its GPU includes: $(call gpu_inc_of,C)
gpu_inc_of = $(foreach d,$(call closure_of,$(1)),$(addprefix -I,$($(d)_INC) $($(d)_GPU_INC))) $(GPU_INCLUDES)
# nvcc: a .cu of component C in mode M -> $(BUILD)/M/....cu.o
define nvcc_rule
$(call cuobjs,$(2),$($(1)_CUDA_SRC)): $(BUILD)/$(2)/%.cu.o: %.cu
	@mkdir -p $$(dir $$@)
	$(NVCC) $(NVCC_FLAGS) $$(call gpu_inc_of,$(1)) -MMD -MP -c $$< -o $$@
endef
# the bare GPU build: component C's archive from its sources minus NAME_GPU_SKIP
define gpu_component_rule
$(1)_GPU_OBJS := $(call objs,gpu,$(filter-out $($(1)_GPU_SKIP),$($(1)_SRC)))
$$($(1)_GPU_OBJS): $(GPU_BUILD)/%.o: %.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(GPU_CFLAGS) $$(call gpu_inc_of,$(1)) $$(call gpu_pkg_cflags,$(1)) -c $$< -o $$@
$(GPU_BUILD)/libareal_$(1).a: $$($(1)_GPU_OBJS) $(call cuobjs,gpu,$($(1)_CUDA_SRC))
	@rm -f $$@
	ar rcs $$@ $$^
endef
# a GPU program of component C from SOURCE: $(call gpu_program_rule,C,SOURCE,EXTRA_LIBS)
define gpu_program_rule
$(call objs,gpu,$(2)): $(GPU_BUILD)/%.o: %.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(GPU_CFLAGS) $$(call gpu_inc_of,$(1)) $(addprefix -I,$($(1)_GPU_TEST_INC)) $$(call gpu_pkg_cflags,$(1)) $$(CMOCKA_CFLAGS) -c $$< -o $$@
$(GPU_BUILD)/$(notdir $(basename $(2))): $(call objs,gpu,$(2)) $($(1)_GPU_TEST_ARCHIVES) $(foreach d,$(call closure_of,$(1)),$(GPU_BUILD)/libareal_$(d).a)
	$$(CC) -O2 -g -o $$@ $$^ $(GPU_LINK) $(if $(strip $(foreach d,$(call closure_of,$(1)),$($(d)_CUDA_SRC))),-lstdc++) $(3) $$(call gpu_pkg_libs,$(1)) -lpthread -lm
endef
kernels_gpu_rules = $(if $(AREAL_NVCC),$(foreach c,$(GPU_COMPONENTS),$(foreach m,rel san gpu,$(eval $(call nvcc_rule,$(c),$(m))))))\
  $(foreach c,$(sort $(foreach g,$(GPU_COMPONENTS),$(call closure_of,$(g)))),$(eval $(call gpu_component_rule,$(c))))\
  $(foreach c,$(GPU_COMPONENTS),$(foreach t,$($(c)_GPU_TESTS),$(eval $(call gpu_program_rule,$(c),$(t),$$(CMOCKA_LIBS)))))\
  $(foreach c,$(GPU_COMPONENTS),$(foreach t,$($(c)_GPU_BENCHES),$(eval $(call gpu_program_rule,$(c),$(t),))))
MODULE_RULES += kernels_gpu_rules

gpu-info:
	@echo "CUDA: $(CUDA_PREFIX) (lib $(CUDA_LIBDIR))"; echo "NCCL: $(NCCL_PREFIX) (lib $(NCCL_LIBDIR))"; \
	echo "cuBLASLt: $(or $(CUBLAS_LIB),not found: the GEMM kernel, its test and bench-gpu's kernels are not built)"; \
	echo "nvcc: $(or $(NVCC),not found: the CUDA kernels are not built)"

# every GPU test and bench program (what scripts/gpu-check.sh builds)
gpu-bins: $$(GPU_TESTS) $$(GPU_BENCHES)

# Output is shown in full (device notes, skips, timings); the closing line counts cmocka's results.
test-gpu: $$(GPU_TESTS)
	@p=0; f=0; for b in $^; do \
	    echo "== $$b"; timeout --kill-after=5 $${TEST_TIMEOUT:-240} $$b > $$b.log 2>&1; rc=$$?; cat $$b.log; \
	    bp=$$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' $$b.log | tail -1); \
	    bf=$$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' $$b.log | tail -1); \
	    bf=$${bf:-0}; if [ $$rc -ne 0 ] && [ $$bf -eq 0 ]; then bf=1; echo "$$b: exit $$rc"; fi; \
	    p=$$((p + $${bp:-0})); f=$$((f + bf)); \
	done; echo "gpu: $$p passed, $$f failed"; [ $$f -eq 0 ]

bench-gpu: $$(GPU_BENCHES)
	@for b in $^; do echo "== $$b"; timeout 240 $$b || exit 1; done
else
test-gpu bench-gpu gpu-bins gpu-info:
	@echo "$@: CUDA and NCCL were not found (set CUDA_HOME and NCCL_HOME, or run scripts/install-cuda.sh); nothing GPU is built" >&2
	@exit 1
endif
