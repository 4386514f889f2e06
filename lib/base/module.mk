# lib/base/module.mk - the project's base: the error convention (areal/error.h)
# and element types with bf16/fp16 conversions (areal/dtype.h). No third-party
# library may enter here: every other component stands on it.
LIB_SRC  += $(wildcard lib/base/src/*.c)
INCLUDES += -Ilib/base/include
