# AReaL on Kubernetes - top-level build.
#
#   make            build everything that needs no GPU (release, build/rel/)
#   make run        the README's first command: plan an example job, then run one locally
#   make test       unit, property and CLI tests, built plain and with ASan+UBSan, then
#                   the e2e suite when its control plane is built (see e2e/README.md)
#   make bench      benchmarks (release build)
#   make fuzz       libFuzzer targets, FUZZ_SECONDS each (default 60)
#   make fmt        clang-format in place;   make lint   check formatting
#
# Missing libraries or tools are installed by scripts/install-deps.sh (Debian
# packages) the first time they are needed.

CC      ?= cc
FUZZ_CC ?= clang
BUILD   ?= build
FUZZ_SECONDS ?= 60

# ---- what to build -----------------------------------------------------------
# The folders are described in ARCHITECTURE.md: shared libraries under lib/,
# the worker's parts under worker/, then operator/, cli/, e2e/, kernels/.
# The product is one library (libareal.a: the */src/*.c of every component
# that adds itself to LIB_SRC), programs with a main each, and tests. A
# component adds itself in its own COMPONENT/module.mk (COMPONENT is a
# top-level folder or one level below: lib/kube, worker/comm), so components
# never edit each other's build lines:
#   LIB_SRC  += $(wildcard COMPONENT/src/*.c)      library sources
#   INCLUDES += -ICOMPONENT/include                public headers
#   PKGS     += libcurl                            pkg-config packages it links
#   EXTRA_LIBS += -lpthread                        other link flags
#   DEPS_GROUPS += name                            a group of scripts/install-deps.sh
#   PROGRAMS += areal-x ; areal-x_SRC := $(wildcard COMPONENT/cmd/*.c)
#   ARCHIVES += e2e ; e2e_ARCHIVE_SRC := ...       an archive outside the product library
#                                                  (build/MODE/libareal_e2e.a), linked only
#   areal-x_ARCHIVES := e2e                        into the programs, tests (test_x_ARCHIVES)
#                                                  and fuzz targets that name it
#   TEST_SRC += $(wildcard COMPONENT/tests/test_*.c)
#   FUZZ_SRC / BENCH_SRC likewise (fuzz_*.c / bench_*.c)
#   BENCH_SCRIPTS += COMPONENT/bench/x.sh          run by `make bench` after the binaries,
#                                                  with BUILD=build/rel in the environment
PKGS       :=
DEPS_GROUPS := build
INCLUDES   :=
EXTRA_LIBS := -lm
LIB_SRC    :=
PROGRAMS   :=
ARCHIVES   :=
TEST_SRC   :=
TEST_UTIL  := $(wildcard tests/util/*.c)
TEST_INCLUDES := -Itests/util
BENCH_SRC  := $(wildcard bench/bench_*.c)
BENCH_SCRIPTS :=
FUZZ_SRC   :=
-include $(wildcard */module.mk */*/module.mk)
PKGS       := $(sort $(PKGS))

DEPS_OK  := $(BUILD)/.deps-ok

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wpointer-arith -Wformat=2 -Wvla
BASE_CFLAGS = -std=c11 -D_GNU_SOURCE $(INCLUDES) $(TEST_INCLUDES) $(WARN) -MMD -MP
PKG_CFLAGS   = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS     = $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(EXTRA_LIBS)
TEST_LIBS    = $(shell pkg-config --libs cmocka 2>/dev/null)

REL_FLAGS := -O2 -g
SAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all

# objects of a source list in a build mode: $(call objs,MODE,SOURCES)
objs = $(patsubst %.c,$(BUILD)/$(1)/%.o,$(2))
# the source of test NAME: $(call test_src,NAME)
test_src = $(filter %/$(1).c,$(TEST_SRC))
fuzz_src = $(filter %/$(1).c,$(FUZZ_SRC))
bench_src = $(filter %/$(1).c,$(BENCH_SRC))
MODE_FLAGS = $(if $(filter san,$(1)),$(SAN_FLAGS),$(REL_FLAGS))

.SECONDEXPANSION:
.SECONDARY:

.PHONY: all run test test-rel test-san test-oom bench fuzz fmt lint clean deps help
.DEFAULT_GOAL := all

all: $(addprefix $(BUILD)/rel/,$(PROGRAMS)) $(BUILD)/rel/libareal.a

help:
	@sed -n '3,13p' Makefile

deps: $(DEPS_OK)

$(DEPS_OK): scripts/install-deps.sh $(wildcard */module.mk */*/module.mk)
	@scripts/install-deps.sh $(DEPS_GROUPS)
	@mkdir -p $(BUILD) && touch $@

# ---- compilation, one rule per mode ---------------------------------------
$(BUILD)/rel/%.o: %.c | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(REL_FLAGS) $(PKG_CFLAGS) -c $< -o $@

$(BUILD)/san/%.o: %.c | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(SAN_FLAGS) $(PKG_CFLAGS) -c $< -o $@

# The version of every program (areal/version.h) comes from VERSION; only
# version.o is compiled with it, so a new version rebuilds one object.
AREAL_VERSION := $(shell cat VERSION)
VERSION_OBJS := $(foreach m,rel san,$(call objs,$(m),$(filter %/version.c,$(LIB_SRC))))
$(VERSION_OBJS): VERSION
$(VERSION_OBJS): BASE_CFLAGS += -DAREAL_VERSION='"$(AREAL_VERSION)"'

$(BUILD)/%/libareal.a: $$(call objs,$$*,$(LIB_SRC))
	@rm -f $@
	ar rcs $@ $^

# extra archives: build/MODE/libareal_NAME.a from NAME_ARCHIVE_SRC
define archive_rule
$$(BUILD)/%/libareal_$(1).a: $$$$(call objs,$$$$*,$$($(1)_ARCHIVE_SRC))
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach a,$(ARCHIVES),$(eval $(call archive_rule,$(a))))
# the extra archives of target NAME in MODE, before libareal.a on the link line: $(call extra_ars,MODE,NAME)
extra_ars = $(foreach a,$($(2)_ARCHIVES),$(BUILD)/$(1)/libareal_$(a).a)

# programs: build/MODE/NAME from NAME_SRC and the library
define program_rule
$$(BUILD)/rel/$(1): $$(call objs,rel,$$($(1)_SRC)) $$(call extra_ars,rel,$(1)) $$(BUILD)/rel/libareal.a
	$$(CC) $$(REL_FLAGS) -o $$@ $$^ $$(PKG_LIBS)
$$(BUILD)/san/$(1): $$(call objs,san,$$($(1)_SRC)) $$(call extra_ars,san,$(1)) $$(BUILD)/san/libareal.a
	$$(CC) $$(SAN_FLAGS) -o $$@ $$^ $$(PKG_LIBS)
endef
$(foreach prog,$(PROGRAMS),$(eval $(call program_rule,$(prog))))

# test binaries: build/MODE/tests/NAME from .../tests/NAME.c
TEST_NAMES := $(notdir $(basename $(TEST_SRC)))
# Static pattern rules: only these targets, never an object that happens to sit in the same folder.
REL_TESTS := $(addprefix $(BUILD)/rel/tests/,$(TEST_NAMES))
SAN_TESTS := $(addprefix $(BUILD)/san/tests/,$(TEST_NAMES))
BENCH_BINS := $(addprefix $(BUILD)/rel/bench/,$(notdir $(basename $(BENCH_SRC))))
$(REL_TESTS): $(BUILD)/rel/tests/%: $$(call objs,rel,$$(call test_src,$$*) $(TEST_UTIL)) $$(call extra_ars,rel,$$*) $(BUILD)/rel/libareal.a
	@mkdir -p $(dir $@)
	$(CC) $(REL_FLAGS) -o $@ $^ $(PKG_LIBS) $(TEST_LIBS)
$(SAN_TESTS): $(BUILD)/san/tests/%: $$(call objs,san,$$(call test_src,$$*) $(TEST_UTIL)) $$(call extra_ars,san,$$*) $(BUILD)/san/libareal.a
	@mkdir -p $(dir $@)
	$(CC) $(SAN_FLAGS) -o $@ $^ $(PKG_LIBS) $(TEST_LIBS)

$(BENCH_BINS): $(BUILD)/rel/bench/%: $$(call objs,rel,$$(call bench_src,$$*)) $(BUILD)/rel/libareal.a
	@mkdir -p $(dir $@)
	$(CC) $(REL_FLAGS) -o $@ $^ $(PKG_LIBS)

# test-oom binaries: build/san/oom/NAME from tests/oom/NAME.c, the torture
# harness and the sanitized library, linked so that every malloc, calloc,
# realloc, strdup and strndup of the project's objects goes through the
# harness's failure counter (tests/oom/oom.h explains why a link-time wrap and
# not a source conversion). ASan+UBSan catch the crashes, LeakSanitizer the leaks.
OOM_SRC  := $(wildcard tests/oom/test_oom_*.c)
OOM_BINS := $(addprefix $(BUILD)/san/oom/,$(notdir $(basename $(OOM_SRC))))
OOM_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup
oom_src = $(filter %/$(1).c,$(OOM_SRC))
$(OOM_BINS): $(BUILD)/san/oom/%: $$(call objs,san,$$(call oom_src,$$*) tests/oom/oom.c $(TEST_UTIL)) $(BUILD)/san/libareal.a
	@mkdir -p $(dir $@)
	$(CC) $(SAN_FLAGS) $(OOM_WRAP) -o $@ $^ $(PKG_LIBS) $(TEST_LIBS)

# ---- targets ---------------------------------------------------------------
run: $(BUILD)/rel/arealctl $(BUILD)/rel/areal-worker
	$(BUILD)/rel/arealctl plan
	$(BUILD)/rel/arealctl run

# Both builds run even when the first fails; the last line sums them up.
test: $(addprefix $(BUILD)/rel/tests/,$(TEST_NAMES)) $(addprefix $(BUILD)/rel/,$(PROGRAMS)) \
      $(addprefix $(BUILD)/san/tests/,$(TEST_NAMES)) $(addprefix $(BUILD)/san/,$(PROGRAMS)) \
      $(OOM_BINS)
	@rm -f $(BUILD)/test-counts; rc=0; \
	AREAL_BIN=$(BUILD)/rel AREALCTL=$(BUILD)/rel/arealctl COUNTS=$(BUILD)/test-counts \
	    scripts/run-tests.sh release \
	    $(addprefix $(BUILD)/rel/tests/,$(TEST_NAMES)) || rc=1; \
	AREAL_BIN=$(BUILD)/san AREALCTL=$(BUILD)/san/arealctl COUNTS=$(BUILD)/test-counts \
	    scripts/run-tests.sh sanitized \
	    $(addprefix $(BUILD)/san/tests/,$(TEST_NAMES)) || rc=1; \
	COUNTS=$(BUILD)/test-counts scripts/run-tests.sh oom $(OOM_BINS) || rc=1; \
	AREAL_BIN=$(abspath $(BUILD)/rel) COUNTS=$(BUILD)/test-counts scripts/run-e2e.sh || rc=1; \
	awk '{p += $$1; f += $$2} END {printf "test: %d passed, %d failed\n", p, f}' $(BUILD)/test-counts; \
	exit $$rc

test-rel: $(addprefix $(BUILD)/rel/tests/,$(TEST_NAMES)) $(addprefix $(BUILD)/rel/,$(PROGRAMS))
	@AREAL_BIN=$(BUILD)/rel AREALCTL=$(BUILD)/rel/arealctl scripts/run-tests.sh release $(addprefix $(BUILD)/rel/tests/,$(TEST_NAMES))

# make test-oom: every allocation of the parsers, caches, reconcile and kube
# client fails once (tests/oom/oom.h); part of `make test`.
test-oom: $(OOM_BINS)
	@scripts/run-tests.sh oom $(OOM_BINS)

test-san: $(addprefix $(BUILD)/san/tests/,$(TEST_NAMES)) $(addprefix $(BUILD)/san/,$(PROGRAMS))
	@AREAL_BIN=$(BUILD)/san AREALCTL=$(BUILD)/san/arealctl scripts/run-tests.sh sanitized $(addprefix $(BUILD)/san/tests/,$(TEST_NAMES))

bench: $(BENCH_BINS) $(addprefix $(BUILD)/rel/,$(PROGRAMS))
	@for b in $(BENCH_BINS); do echo "== $$b"; $$b || exit 1; done
	@for s in $(BENCH_SCRIPTS); do echo "== $$s"; BUILD=$(BUILD)/rel $$s || exit 1; done

# libFuzzer targets are built by clang with their own flags and the library sources.
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=all
$(BUILD)/fuzz/%: $$(call fuzz_src,$$*) $$(foreach a,$$($$*_ARCHIVES),$$($$(a)_ARCHIVE_SRC)) $(LIB_SRC) | $(DEPS_OK)
	@scripts/install-deps.sh fuzz
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(INCLUDES) $(PKG_CFLAGS) -o $@ $^ $(PKG_LIBS)

fuzz: $(addprefix $(BUILD)/fuzz/,$(notdir $(basename $(FUZZ_SRC))))
	@scripts/run-fuzz.sh $(FUZZ_SECONDS) $^

FMT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
fmt:
	@scripts/install-deps.sh fmt
	clang-format -i $(FMT_FILES)

lint:
	@scripts/install-deps.sh fmt
	clang-format --dry-run -Werror $(FMT_FILES)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
