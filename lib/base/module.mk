# lib/base/module.mk - the project's base: the error convention (areal/error.h)
# and element types with bf16/fp16 conversions (areal/dtype.h), structured logs
# (areal/log.h), one-line escaped messages (areal/escape.h) and the programs'
# version (areal/version.h, from the VERSION file). No third-party library may
# enter here: every other component stands on it (its tests may use jansson to
# parse the log records back).
LIB_SRC  += $(wildcard lib/base/src/*.c)
INCLUDES += -Ilib/base/include
TEST_SRC += $(wildcard lib/base/tests/test_*.c)
