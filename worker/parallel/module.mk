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
