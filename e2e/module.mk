# e2e: the end-to-end suite's C helpers - the simulated-node objects
# (areal-e2e-nodes) and the node simulator that runs pods (areal-e2e-kubelet) -
# and `make e2e`. The control plane itself is built by e2e/build-bins (Go), not
# by make. The simulator is test harness, not product: its objects form their
# own archive (libareal_e2e.a), linked only into the e2e programs, tests and
# fuzz targets.
ARCHIVES += e2e
e2e_ARCHIVE_SRC := $(wildcard e2e/src/*.c)
INCLUDES += -Ie2e/include
PROGRAMS += areal-e2e-nodes areal-e2e-kubelet
areal-e2e-nodes_ARCHIVES := e2e
areal-e2e-kubelet_ARCHIVES := e2e
$(foreach t,$(notdir $(basename $(wildcard e2e/tests/test_*.c e2e/fuzz/fuzz_*.c))),$(eval $(t)_ARCHIVES := e2e))
areal-e2e-nodes_SRC := $(wildcard e2e/cmd/*.c)
areal-e2e-kubelet_SRC := $(wildcard e2e/kubelet/*.c)
TEST_SRC += $(wildcard e2e/tests/test_*.c)
FUZZ_SRC += $(wildcard e2e/fuzz/fuzz_*.c)

# make e2e: bring up the loopback control plane, run the scenarios, tear down.
# E2E_SCENARIOS="a_crd" runs a subset. Not part of `make test`: the first run
# builds the control plane from Go modules (see e2e/README.md).
.PHONY: e2e
e2e:
	$(MAKE) all
	AREAL_BIN=$(abspath $(BUILD)/rel) e2e/run $(E2E_SCENARIOS)
