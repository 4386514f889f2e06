# worker/parallel/module.mk - binds the model core's shards (worker/model) to
# real process groups (worker/comm): tensor-parallel reductions, data-parallel
# gradient reduction and ZeRO-1, the 1F1B pipeline, the GRPO step's loss
# (worker/rl's decoupled PPO loss on the last stage). Uses comm, model and rl
# (ARCHITECTURE.md: only the layers above them may).
COMPONENTS    += parallel
parallel_DIR  := worker/parallel
parallel_DEPS := comm model rl
parallel_LIBS := -lpthread
# the parallel tests fork ranks with a helper of their own
# (tests/par_test_util.h), which also includes the comm tests' ranks.h by its
# relative path, so no include flag reaches other tests

# make test-long: the seed's d4 t4 p2 c2 e8 etp4 (64 forked ranks, about 2 s
# release and 6 s sanitized on 2 cores), which make test skips
.PHONY: test-long
test-long: $(BUILD)/rel/tests/test_par_seed $(BUILD)/san/tests/test_par_seed
	AREAL_TEST_LONG=1 $(BUILD)/rel/tests/test_par_seed
	AREAL_TEST_LONG=1 $(BUILD)/san/tests/test_par_seed

# the layouts' bench (make bench runs it; it also builds with make, so it cannot rot)
ALL_EXTRA += $(BUILD)/rel/bench/bench_parallel
# its smoke run (tests/test_bench_smoke.sh, about a second) is a script test
SCRIPT_TESTS += worker/parallel/tests/test_bench_smoke.sh
test test-rel test-scripts: $(BUILD)/rel/bench/bench_parallel
