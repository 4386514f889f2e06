# AReaL on Kubernetes - top-level build.
#
#   make            build everything that needs no GPU (release, build/rel/); with CUDA,
#                   NCCL (and nvcc) found, the GPU parts and GPU test programs too
#                   (build/gpu/, see kernels/module.mk)
#   make run        the README's first command: plan an example job, then run one locally
#   make test       unit, property, CLI and build tests, built plain and with ASan+UBSan,
#                   the allocation-failure tests (make test-oom, tests/oom), then the e2e
#                   suite when its control plane is built (see e2e/README.md)
#   make test-long  the operator's randomized fault test over thousands of seeds
#   make bench      benchmarks (release build)
#   make images     the operator and worker Docker images (not in CI)
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
# The folders are described in ARCHITECTURE.md. Every component is one archive,
# build/MODE/libareal_NAME.a, declared in its own COMPONENT/module.mk (COMPONENT
# is a top-level folder or one level below: lib/kube, worker/comm), so
# components never edit each other's build lines:
#   COMPONENTS += kube
#   kube_DIR  := lib/kube              sources $(kube_DIR)/src/*.c, headers $(kube_DIR)/include,
#                                      tests/test_*.c, fuzz/fuzz_*.c, bench/bench_*.c under it
#   kube_DEPS := base yaml             the components it uses (direct ones; the closure follows)
#   kube_PKGS := libcurl jansson       pkg-config packages its sources include or it links
#   kube_LIBS := -lpthread             other link flags
#   kube_TEST_DEPS := kubetest         extra components its tests, fuzz targets, benches use
#   optional: kube_SRC, kube_INC (folders, without -I), kube_CFLAGS, and for GPU parts
#   kube_GPU_SRC, kube_CUDA_SRC, kube_GPU_TESTS, ... (see kernels/module.mk)
#   DEPS_GROUPS += kube                a group of scripts/install-deps.sh
# Programs and binaries outside a component folder name their dependencies:
#   PROGRAMS += areal-x ; areal-x_SRC := $(wildcard DIR/cmd/*.c) ; areal-x_DEPS := layout comm
#   TEST_SRC / FUZZ_SRC / BENCH_SRC += FILE ; test_x_DEPS := layout   (per binary, by file name)
# A test, fuzz target or bench inside a component folder names its component and
# NAME_TEST_DEPS; test_x_DEPS, when set, replaces that list. Test file names are unique.
# A source compiles with the -I folders of its own component's closure only, and a
# binary links only the archives of the closure of what it names, in dependency
# order: an include that goes up the graph does not compile (tests/build/).
# Prerequisites are expanded again once every module.mk is read (a module.mk may
# name what a later one declares, e.g. test-gpu: $$(GPU_TESTS)).
.SECONDEXPANSION:
COMPONENTS  :=
PROGRAMS    :=
TEST_SRC    :=
FUZZ_SRC    :=
BENCH_SRC   :=
# scripts `make test` runs once with the release build (cmocka-style closing
# lines; they skip with a message): SCRIPT_TESTS += COMPONENT/tests/test_x.sh
SCRIPT_TESTS :=
# scripts `make bench` runs after the binaries, with BUILD=build/rel in the
# environment: BENCH_SCRIPTS += COMPONENT/bench/x.sh
BENCH_SCRIPTS :=
DEPS_GROUPS := build
# hooks a module.mk registers: variables whose expansion $(eval)s, run once every
# component is declared - MODULE_SETUP before the rules are made (to add to
# components), MODULE_RULES after (to add rules of its own)
MODULE_SETUP :=
MODULE_RULES :=
ALL_EXTRA   :=
-include $(wildcard */module.mk */*/module.mk)

ifneq ($(strip $(LIB_SRC)$(INCLUDES)),)
$(error LIB_SRC/INCLUDES are gone: declare a component (NAME_DIR, NAME_DEPS, NAME_PKGS) in your module.mk, see the Makefile header and ARCHITECTURE.md)
endif

# The packages of DEPS_GROUPS are installed before any rule is made: the
# compile and link flags come from pkg-config while the rules are made, so a
# first `make` on a fresh machine that installed them mid-build linked without
# them (bench_parallel: no -ljansson, -lopenblas). DEPS_OK is therefore an
# included makefile (an empty one): GNU make remakes it first and, having
# remade it, reads everything again with the packages there. Goals that build
# nothing skip it. Rejected: installing from a $(shell) at parse time (it runs
# on every read, `make -n` included) and an order-only prerequisite alone (the
# earlier rule, which had the flags already computed).
DEPS_OK  := $(BUILD)/.deps-ok
NO_DEPS_GOALS := clean help fmt lint images print-closure
ifneq ($(filter-out $(NO_DEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
include $(DEPS_OK)
endif

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wpointer-arith -Wformat=2 -Wvla
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -MMD -MP
TEST_LIBS    = $(shell pkg-config --libs cmocka 2>/dev/null)

REL_FLAGS := -O2 -g
SAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
MODE_FLAGS = $(if $(filter san,$(1)),$(SAN_FLAGS),$(REL_FLAGS))

# ---- the component graph -------------------------------------------------------
# defaults for what a module.mk left out
$(foreach c,$(COMPONENTS),\
  $(if $($(c)_DIR),,$(error component $(c): $(c)_DIR is not set))\
  $(eval $(c)_SRC ?= $(wildcard $($(c)_DIR)/src/*.c))\
  $(eval $(c)_INC ?= $(wildcard $($(c)_DIR)/include))\
  $(eval $(c)_TEST_SRC += $(wildcard $($(c)_DIR)/tests/test_*.c))\
  $(eval $(c)_FUZZ_SRC += $(wildcard $($(c)_DIR)/fuzz/fuzz_*.c))\
  $(eval $(c)_BENCH_SRC += $(wildcard $($(c)_DIR)/bench/bench_*.c)))

# first occurrences only, order kept: $(call uniq,LIST)
uniq = $(if $(1),$(firstword $(1)) $(call uniq,$(filter-out $(firstword $(1)),$(1))))
reverse = $(if $(1),$(call reverse,$(wordlist 2,$(words $(1)),$(1))) $(firstword $(1)))
# every component reachable from LIST, each before the ones it uses (a DAG, so this is a
# valid static link order): $(call closure,LIST). PATH (2nd argument) catches cycles.
closure_walk = $(foreach d,$(1),\
  $(if $(filter $(d),$(COMPONENTS)),,$(error unknown component "$(d)" (a _DEPS entry; known: $(COMPONENTS))))\
  $(if $(filter $(d),$(2)),$(error dependency cycle: $(2) $(d)))\
  $(d) $(call closure_walk,$($(d)_DEPS),$(2) $(d)))
closure = $(call reverse,$(call uniq,$(call reverse,$(call closure_walk,$(1)))))

# flags of a list of components' closure, computed once per distinct list
empty :=
space := $(empty) $(empty)
comp_key = $(subst $(space),+,$(strip $(1)))
define comp_flags_def
FLAGS_CLOSURE_$(2) := $$(call closure,$(1))
FLAGS_CFLAGS_$(2) := $$(foreach c,$$(FLAGS_CLOSURE_$(2)),$$(addprefix -I,$$($$(c)_INC)) $$($$(c)_CFLAGS)) \
    $$(if $$(strip $$(foreach c,$$(FLAGS_CLOSURE_$(2)),$$($$(c)_PKGS))),$$(shell pkg-config --cflags $$(sort $$(foreach c,$$(FLAGS_CLOSURE_$(2)),$$($$(c)_PKGS))) 2>/dev/null))
FLAGS_LIBS_$(2) := $$(if $$(strip $$(foreach c,$$(FLAGS_CLOSURE_$(2)),$$($$(c)_PKGS))),$$(shell pkg-config --libs $$(sort $$(foreach c,$$(FLAGS_CLOSURE_$(2)),$$($$(c)_PKGS))) 2>/dev/null)) \
    $$(call uniq,$$(foreach c,$$(FLAGS_CLOSURE_$(2)),$$($$(c)_LIBS))) -lm
endef
need_flags = $(if $(FLAGS_DONE_$(call comp_key,$(1))),,$(eval $(call comp_flags_def,$(1),$(call comp_key,$(1))))$(eval FLAGS_DONE_$(call comp_key,$(1)) := 1))
# the compile flags / link flags / archives of what LIST names
cflags_of = $(call need_flags,$(1))$(FLAGS_CFLAGS_$(call comp_key,$(1)))
libs_of = $(call need_flags,$(1))$(FLAGS_LIBS_$(call comp_key,$(1)))
closure_of = $(call need_flags,$(1))$(FLAGS_CLOSURE_$(call comp_key,$(1)))
archives_of = $(foreach c,$(call closure_of,$(2)),$(BUILD)/$(1)/libareal_$(c).a)

# objects of a source list in a build mode: $(call objs,MODE,SOURCES)
objs = $(patsubst %.c,$(BUILD)/$(1)/%.o,$(2))

# one component: its objects (compiled with its closure's flags) and its archive
define component_rule
$(1)_OBJS_$(2) := $$(call objs,$(2),$$($(1)_SRC))
$$($(1)_OBJS_$(2)): $$(BUILD)/$(2)/%.o: %.c | $$(DEPS_OK)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(BASE_CFLAGS) $$(call MODE_FLAGS,$(2)) $$(call cflags_of,$(1)) -c $$< -o $$@
$$(BUILD)/$(2)/libareal_$(1).a: $$($(1)_OBJS_$(2)) $$($(1)_EXTRA_OBJS_$(2))
	@rm -f $$@
	ar rcs $$@ $$^
endef

# one binary of MODE at PATH from SOURCES naming DEPS: $(call binary_rule,MODE,PATH,SOURCES,DEPS,EXTRA_LIBS)
define binary_rule
$(call objs,$(1),$(3)): $$(BUILD)/$(1)/%.o: %.c | $$(DEPS_OK)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(BASE_CFLAGS) $$(call MODE_FLAGS,$(1)) $$(call cflags_of,$(4)) -c $$< -o $$@
$(2): $(call objs,$(1),$(3)) $$(call archives_of,$(1),$(4))
	@mkdir -p $$(dir $$@)
	$$(CC) $$(call MODE_FLAGS,$(1)) -o $$@ $$^ $$(call libs_of,$(4)) $(5)
endef

# the component a file of a component's tests/fuzz/bench belongs to, and what it names
owner_of = $(firstword $(foreach c,$(COMPONENTS),$(if $(filter $($(c)_DIR)/%,$(1)),$(c))))
bin_name = $(notdir $(basename $(1)))
# a test/fuzz/bench file's dependencies: its own NAME_DEPS, else its component + TEST_DEPS
bin_deps = $(or $($(call bin_name,$(1))_DEPS),$(call owner_of,$(1)) $($(call owner_of,$(1))_TEST_DEPS))

$(foreach h,$(MODULE_SETUP),$($(h)))

TEST_SRC  += $(foreach c,$(COMPONENTS),$($(c)_TEST_SRC))
FUZZ_SRC  += $(foreach c,$(COMPONENTS),$($(c)_FUZZ_SRC))
BENCH_SRC += $(foreach c,$(COMPONENTS),$($(c)_BENCH_SRC))
TEST_NAMES := $(foreach f,$(TEST_SRC),$(call bin_name,$(f)))
ifneq ($(words $(TEST_NAMES)),$(words $(sort $(TEST_NAMES))))
$(error two tests share a file name: $(TEST_NAMES))
endif

$(foreach m,rel san,$(foreach c,$(COMPONENTS),$(eval $(call component_rule,$(c),$(m)))))
$(foreach m,rel san,$(foreach p,$(PROGRAMS),\
  $(eval $(call binary_rule,$(m),$(BUILD)/$(m)/$(p),$($(p)_SRC),$($(p)_DEPS),))))
$(foreach m,rel san,$(foreach f,$(TEST_SRC),\
  $(eval $(call binary_rule,$(m),$(BUILD)/$(m)/tests/$(call bin_name,$(f)),$(f),$(call bin_deps,$(f)),$$(TEST_LIBS)))))
$(foreach f,$(BENCH_SRC),\
  $(eval $(call binary_rule,rel,$(BUILD)/rel/bench/$(call bin_name,$(f)),$(f),$(call bin_deps,$(f)),)))
$(foreach h,$(MODULE_RULES),$($(h)))

# The version of every program (areal/version.h) comes from VERSION; only
# version.o (a source of base) is compiled with it, so a new version rebuilds
# one object.
AREAL_VERSION := $(shell cat VERSION)
VERSION_OBJS := $(foreach m,rel san,$(call objs,$(m),$(filter %/version.c,$(base_SRC))))
$(VERSION_OBJS): VERSION
$(VERSION_OBJS): BASE_CFLAGS += -DAREAL_VERSION='"$(AREAL_VERSION)"'

# test-oom binaries: build/san/oom/NAME from tests/oom/NAME.c, the torture
# harness (component oomtest, tests/module.mk) and the sanitized archives of
# what test_oom_NAME_DEPS names, linked so that every malloc, calloc, realloc,
# strdup and strndup of the project's objects goes through the harness's
# failure counter (tests/oom/oom.h explains why a link-time wrap and not a
# source conversion). ASan+UBSan catch the crashes, LeakSanitizer the leaks.
OOM_SRC  := $(wildcard tests/oom/test_oom_*.c)
OOM_BINS := $(addprefix $(BUILD)/san/oom/,$(notdir $(basename $(OOM_SRC))))
OOM_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup
$(foreach f,$(OOM_SRC),$(eval $(call binary_rule,san,$(BUILD)/san/oom/$(call bin_name,$(f)),$(f),$($(call bin_name,$(f))_DEPS) oomtest,$(OOM_WRAP) $$(TEST_LIBS))))

# No .SECONDARY: every object is a target of an explicit (static pattern) rule, so
# none is intermediate, and an object added to a component is built even when the
# archive is newer than the objects it had.

.PHONY: all run test test-rel test-san test-oom test-long test-long-chaos bench fuzz fmt lint clean deps help print-closure probe test-scripts images
.DEFAULT_GOAL := all

ARCHIVES_REL := $(foreach c,$(COMPONENTS),$(BUILD)/rel/libareal_$(c).a)
all: $(addprefix $(BUILD)/rel/,$(PROGRAMS)) $(ARCHIVES_REL) $(ALL_EXTRA)

help:
	@sed -n '3,16p' Makefile

deps: $(DEPS_OK)

$(DEPS_OK): scripts/install-deps.sh $(wildcard */module.mk */*/module.mk)
	@scripts/install-deps.sh $(DEPS_GROUPS)
	@mkdir -p $(BUILD) && touch $@

# make print-closure C="kube" prints the closure and the compile flags of what C names;
# make probe C=layout PROBE=FILE compiles FILE as a source of component(s) C would be
# compiled (tests/build/test_layering.sh proves the layering with it).
print-closure:
	@echo "closure: $(call closure_of,$(C))"; echo "cflags: $(call cflags_of,$(C))"
probe: | $(DEPS_OK)
	$(CC) $(BASE_CFLAGS) $(REL_FLAGS) $(call cflags_of,$(C)) -fsyntax-only $(PROBE)

# ---- targets ---------------------------------------------------------------
# The demo job: the tiny model made and warmed up, then asynchronous GRPO with one
# rollout server and one trainer (examples/jobs/local-tiny.yaml; RUN_DIR holds the
# model, checkpoints, progress.jsonl and reward.svg; rerun with --resume to continue).
RUN_DIR ?= $(BUILD)/run
run: $(BUILD)/rel/arealctl $(BUILD)/rel/areal-worker
	$(BUILD)/rel/arealctl plan
	$(BUILD)/rel/arealctl run
	rm -rf $(RUN_DIR)
	$(BUILD)/rel/arealctl run examples/jobs/local-tiny.yaml --job-dir $(RUN_DIR)

REL_TESTS := $(addprefix $(BUILD)/rel/tests/,$(TEST_NAMES))
SAN_TESTS := $(addprefix $(BUILD)/san/tests/,$(TEST_NAMES))
BENCH_BINS := $(addprefix $(BUILD)/rel/bench/,$(notdir $(basename $(BENCH_SRC))))
# Script tests (print cmocka's closing lines), run once, with the release build.
SCRIPT_TESTS += $(wildcard tests/build/test_*.sh)

# Both builds run even when the first fails; the last line sums them up.
test: $(REL_TESTS) $(addprefix $(BUILD)/rel/,$(PROGRAMS)) $(SAN_TESTS) $(addprefix $(BUILD)/san/,$(PROGRAMS)) \
      $(OOM_BINS)
	@rm -f $(BUILD)/test-counts; rc=0; \
	AREAL_BIN=$(BUILD)/rel AREALCTL=$(BUILD)/rel/arealctl COUNTS=$(BUILD)/test-counts \
	    scripts/run-tests.sh release $(REL_TESTS) $(SCRIPT_TESTS) || rc=1; \
	AREAL_BIN=$(BUILD)/san AREALCTL=$(BUILD)/san/arealctl COUNTS=$(BUILD)/test-counts \
	    scripts/run-tests.sh sanitized $(SAN_TESTS) || rc=1; \
	COUNTS=$(BUILD)/test-counts scripts/run-tests.sh oom $(OOM_BINS) || rc=1; \
	AREAL_BIN=$(abspath $(BUILD)/rel) COUNTS=$(BUILD)/test-counts scripts/run-e2e.sh || rc=1; \
	awk '{p += $$1; f += $$2} END {printf "test: %d passed, %d failed\n", p, f}' $(BUILD)/test-counts; \
	exit $$rc

test-rel: $(REL_TESTS) $(addprefix $(BUILD)/rel/,$(PROGRAMS))
	@AREAL_BIN=$(BUILD)/rel AREALCTL=$(BUILD)/rel/arealctl scripts/run-tests.sh release $(REL_TESTS) $(SCRIPT_TESTS)

# make test-long: the operator's randomized fault test over thousands of seeds
# (CHAOS_SEEDS from CHAOS_FIRST; make test runs 200). Not part of make test.
CHAOS_SEEDS ?= 3000
CHAOS_FIRST ?= 1
# (a prerequisite of test-long, whose other parts live in the module.mk files)
test-long: test-long-chaos
test-long-chaos: $(BUILD)/rel/tests/test_controller_chaos
	AREAL_CHAOS_RERUNS=0 AREAL_CHAOS_SEEDS=$(CHAOS_SEEDS) AREAL_CHAOS_FIRST=$(CHAOS_FIRST) $(BUILD)/rel/tests/test_controller_chaos

# make test-oom: every allocation of the parsers, caches, reconcile and kube
# client fails once (tests/oom/oom.h); part of `make test`.
test-oom: $(OOM_BINS)
	@scripts/run-tests.sh oom $(OOM_BINS)

test-san: $(SAN_TESTS) $(addprefix $(BUILD)/san/,$(PROGRAMS))
	@AREAL_BIN=$(BUILD)/san AREALCTL=$(BUILD)/san/arealctl scripts/run-tests.sh sanitized $(SAN_TESTS)

# make test-scripts: the SCRIPT_TESTS alone (build tests, the chart's lint, render and RBAC check).
test-scripts: $(BUILD)/rel/areal-operator
	@AREAL_BIN=$(BUILD)/rel scripts/run-tests.sh scripts $(SCRIPT_TESTS)

# make images: the operator and worker images the chart names (areal/operator,
# areal/worker, tagged VERSION), each built inside Docker by this Makefile
# (operator/Dockerfile, worker/Dockerfile). Not part of test or CI.
IMAGE_PREFIX ?= areal
images:
	docker build -f operator/Dockerfile -t $(IMAGE_PREFIX)/operator:$(AREAL_VERSION) .
	docker build -f worker/Dockerfile -t $(IMAGE_PREFIX)/worker:$(AREAL_VERSION) .

bench: $(BENCH_BINS) $(addprefix $(BUILD)/rel/,$(PROGRAMS))
	@for b in $(BENCH_BINS); do echo "== $$b"; $$b || exit 1; done
	@for s in $(BENCH_SCRIPTS); do echo "== $$s"; BUILD=$(BUILD)/rel $$s || exit 1; done

# libFuzzer targets are built by clang with their own flags from the sources of the
# closure of what they name (no archives: the whole program is instrumented), plus
# the closure's nvcc objects where CUDA was found (the release ones: device code
# is not instrumented either way). Rejected: a CPU-only closure for the fuzzers
# (stripping NAME_GPU_SRC and the AREAL_HAVE_* flags): it would fuzz a program
# other than the one that ships, and the sanitized tests link the same objects.
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
              -fno-sanitize-recover=all
FUZZ_BINS := $(addprefix $(BUILD)/fuzz/,$(foreach f,$(FUZZ_SRC),$(call bin_name,$(f))))
define fuzz_rule
$(BUILD)/fuzz/$(call bin_name,$(1)): $(1) $(foreach c,$(call closure_of,$(2)),$($(c)_SRC) $($(c)_EXTRA_OBJS_rel)) | $(DEPS_OK)
	@scripts/install-deps.sh fuzz
	@mkdir -p $$(dir $$@)
	$$(FUZZ_CC) $$(FUZZ_FLAGS) $$(call cflags_of,$(2)) -o $$@ $$^ $$(call libs_of,$(2))
endef
$(foreach f,$(FUZZ_SRC),$(eval $(call fuzz_rule,$(f),$(call bin_deps,$(f)))))

fuzz: $(FUZZ_BINS)
	@scripts/run-fuzz.sh $(FUZZ_SECONDS) $^

FMT_FILES = $(shell git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null)
fmt:
	@scripts/install-deps.sh fmt
	clang-format -i $(FMT_FILES)

lint:
	@scripts/install-deps.sh fmt
	clang-format --dry-run -Werror $(FMT_FILES)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
