# bench/module.mk - benchmarks that span components (make bench).
BENCH_SRC += $(wildcard bench/bench_*.c)
bench_layout_DEPS := layout
# the cache memory bench serves its cluster from the operator's fake API server
bench_operator_cache_DEPS := operator optest
# the e2e bind bench starts areal-operator and the simulated nodes of the e2e cluster
bench_e2e_bind_DEPS := operator
$(BUILD)/rel/bench/bench_e2e_bind: | $(BUILD)/rel/areal-operator $(BUILD)/rel/areal-e2e-nodes
