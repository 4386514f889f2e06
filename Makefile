# AReaL on Kubernetes - top-level build.
#
#   make            build everything that needs no GPU (release, build/rel/)
#   make run        the README's first command: plan a job on an embedded default cluster
#   make test       unit, property and CLI tests, built plain and with ASan+UBSan
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

PKGS     := jansson yaml-0.1
DEPS_OK  := $(BUILD)/.deps-ok

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wpointer-arith -Wformat=2 -Wvla
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -Ilayout/include $(WARN) -MMD -MP
PKG_CFLAGS   = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS     = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
TEST_LIBS    = $(shell pkg-config --libs cmocka 2>/dev/null)

REL_FLAGS := -O2 -g
SAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all

LAYOUT_SRC := $(wildcard layout/src/*.c)
CLI_SRC    := $(wildcard cli/*.c)
TEST_SRC   := $(wildcard layout/tests/test_*.c cli/tests/test_*.c)
TEST_UTIL  := $(wildcard tests/util/*.c)
BENCH_SRC  := $(wildcard bench/bench_*.c)
FUZZ_SRC   := $(wildcard layout/fuzz/fuzz_*.c)

# objects of a source list in a build mode: $(call objs,MODE,SOURCES)
objs = $(patsubst %.c,$(BUILD)/$(1)/%.o,$(2))
# the source of test NAME: $(call test_src,NAME)
test_src = $(filter %/$(1).c,$(TEST_SRC))

.SECONDEXPANSION:
.SECONDARY:

.PHONY: all run test test-rel test-san bench fuzz fmt lint clean deps help
.DEFAULT_GOAL := all

all: $(BUILD)/rel/arealctl $(BUILD)/rel/libareal-layout.a

help:
	@sed -n '3,13p' Makefile

deps: $(DEPS_OK)

$(DEPS_OK): scripts/install-deps.sh
	@scripts/install-deps.sh build
	@mkdir -p $(BUILD) && touch $@

# ---- compilation, one rule per mode ---------------------------------------
$(BUILD)/rel/%.o: %.c | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(REL_FLAGS) $(PKG_CFLAGS) -c $< -o $@

$(BUILD)/san/%.o: %.c | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(SAN_FLAGS) $(PKG_CFLAGS) -c $< -o $@

$(BUILD)/%/libareal-layout.a: $$(call objs,$$*,$(LAYOUT_SRC))
	@rm -f $@
	ar rcs $@ $^

MODE_FLAGS = $(if $(filter san,$(1)),$(SAN_FLAGS),$(REL_FLAGS))

$(BUILD)/%/arealctl: $$(call objs,$$*,$(CLI_SRC)) $(BUILD)/%/libareal-layout.a
	$(CC) $(call MODE_FLAGS,$*) -o $@ $^ $(PKG_LIBS) -lm

# test binaries: build/MODE/tests/NAME from .../tests/NAME.c
TEST_NAMES := $(notdir $(basename $(TEST_SRC)))
$(BUILD)/rel/tests/%: $$(call objs,rel,$$(call test_src,$$*) $(TEST_UTIL)) $(BUILD)/rel/libareal-layout.a
	@mkdir -p $(dir $@)
	$(CC) $(REL_FLAGS) -o $@ $^ $(PKG_LIBS) $(TEST_LIBS) -lm
$(BUILD)/san/tests/%: $$(call objs,san,$$(call test_src,$$*) $(TEST_UTIL)) $(BUILD)/san/libareal-layout.a
	@mkdir -p $(dir $@)
	$(CC) $(SAN_FLAGS) -o $@ $^ $(PKG_LIBS) $(TEST_LIBS) -lm

$(BUILD)/rel/bench/%: $(BUILD)/rel/bench/%.o $(BUILD)/rel/libareal-layout.a
	$(CC) $(REL_FLAGS) -o $@ $^ $(PKG_LIBS) -lm

# ---- targets ---------------------------------------------------------------
run: $(BUILD)/rel/arealctl
	$(BUILD)/rel/arealctl plan

# Both builds run even when the first fails; the last line sums them up.
test: $(addprefix $(BUILD)/rel/tests/,$(TEST_NAMES)) $(BUILD)/rel/arealctl \
      $(addprefix $(BUILD)/san/tests/,$(TEST_NAMES)) $(BUILD)/san/arealctl
	@rm -f $(BUILD)/test-counts; rc=0; \
	AREALCTL=$(BUILD)/rel/arealctl COUNTS=$(BUILD)/test-counts scripts/run-tests.sh release \
	    $(addprefix $(BUILD)/rel/tests/,$(TEST_NAMES)) || rc=1; \
	AREALCTL=$(BUILD)/san/arealctl COUNTS=$(BUILD)/test-counts scripts/run-tests.sh sanitized \
	    $(addprefix $(BUILD)/san/tests/,$(TEST_NAMES)) || rc=1; \
	awk '{p += $$1; f += $$2} END {printf "test: %d passed, %d failed\n", p, f}' $(BUILD)/test-counts; \
	exit $$rc

test-rel: $(addprefix $(BUILD)/rel/tests/,$(TEST_NAMES)) $(BUILD)/rel/arealctl
	@AREALCTL=$(BUILD)/rel/arealctl scripts/run-tests.sh release $(addprefix $(BUILD)/rel/tests/,$(TEST_NAMES))

test-san: $(addprefix $(BUILD)/san/tests/,$(TEST_NAMES)) $(BUILD)/san/arealctl
	@AREALCTL=$(BUILD)/san/arealctl scripts/run-tests.sh sanitized $(addprefix $(BUILD)/san/tests/,$(TEST_NAMES))

bench: $(patsubst bench/%.c,$(BUILD)/rel/bench/%,$(BENCH_SRC))
	@for b in $^; do echo "== $$b"; $$b || exit 1; done

# libFuzzer targets are built by clang with their own flags and the library sources.
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -Ilayout/include -g -O1 -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=all
$(BUILD)/fuzz/%: layout/fuzz/%.c $(LAYOUT_SRC) | $(DEPS_OK)
	@scripts/install-deps.sh fuzz
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(PKG_CFLAGS) -o $@ $^ $(PKG_LIBS) -lm

fuzz: $(patsubst layout/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
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
