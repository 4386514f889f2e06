# lib/base/module.mk - the project's base: the error convention (areal/error.h),
# element types with bf16/fp16 conversions (areal/dtype.h), clocks, a bounded
# string buffer, a hash set, structured logs (areal/log.h), one-line escaped
# messages (areal/escape.h) and the programs' version (areal/version.h, from the
# VERSION file). No third-party library may enter here: every other component
# stands on it.
COMPONENTS += base
base_DIR  := lib/base
base_DEPS :=
base_PKGS :=
# test_log parses the log records back with jansson (yaml brings it); the
# library itself stays free of it.
test_log_DEPS := base yaml
