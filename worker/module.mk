# worker/module.mk - the areal-worker program (pod launcher, rank, selftest and
# the model commands), in worker/cmd. Its libraries are the subcomponents beside
# it: worker/comm, worker/model, worker/rollout (each with its own module.mk).
PROGRAMS   += areal-worker
areal-worker_SRC  := $(wildcard worker/cmd/*.c)
areal-worker_DEPS := layout comm model rollout train
