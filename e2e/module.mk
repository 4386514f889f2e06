# e2e: the end-to-end suite's C helpers - the simulated-node objects
# (areal-e2e-nodes) and the node simulator that runs pods (areal-e2e-kubelet) -
# and `make e2e`. The control plane itself is built by e2e/build-bins (Go), not
# by make. The simulator is test harness, not product: it is its own archive
# (libareal_e2e.a), which only the e2e programs, tests and fuzz targets name.
COMPONENTS += e2e
e2e_DIR    := e2e
e2e_DEPS   := kube layout
e2e_PKGS   := jansson
# the CLI test runs the programs with tests/util's child and cli_check
test_e2e_cli_DEPS := e2e clicheck
PROGRAMS   += areal-e2e-nodes areal-e2e-kubelet
areal-e2e-nodes_SRC   := $(wildcard e2e/cmd/*.c)
areal-e2e-nodes_DEPS  := e2e
areal-e2e-kubelet_SRC := $(wildcard e2e/kubelet/*.c)
areal-e2e-kubelet_DEPS := e2e
# areal-e2e-logcheck: every line of the operator's log is a JSON record (e2e/run).
PROGRAMS   += areal-e2e-logcheck
areal-e2e-logcheck_SRC  := $(wildcard e2e/logcheck/*.c)
areal-e2e-logcheck_DEPS := base yaml

# make e2e: bring up the loopback control plane, run the scenarios, tear down.
# E2E_SCENARIOS="a_crd" runs a subset. Not part of `make test`: the first run
# builds the control plane from Go modules (see e2e/README.md).
.PHONY: e2e
e2e:
	$(MAKE) all
	AREAL_BIN=$(abspath $(BUILD)/rel) e2e/run $(E2E_SCENARIOS)

# make bench: issue 16's scale-up / drain / trainer-restart times on the e2e cluster.
BENCH_SCRIPTS += e2e/bench/bench_rl_elastic.sh
