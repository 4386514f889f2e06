# lib/base/module.mk - the project's base: the error convention (areal/error.h),
# element types with bf16/fp16 conversions (areal/dtype.h), clocks, a bounded
# string buffer and a hash set. No third-party library may enter here: every
# other component stands on it.
COMPONENTS += base
base_DIR  := lib/base
base_DEPS :=
base_PKGS :=
