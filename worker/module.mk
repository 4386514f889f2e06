# worker/module.mk - the areal-worker program (pod launcher, rank, selftest and
# the model commands). Its libraries are the subcomponents beside it:
# worker/comm, worker/model (each with its own module.mk).
PROGRAMS   += areal-worker
areal-worker_SRC := $(wildcard worker/cmd/*.c)
