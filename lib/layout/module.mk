# lib/layout/module.mk - the topology library: allocation grammar, rank groups,
# inventory (YAML/JSON, Kubernetes quantities), placement and the pod
# environment. Shared by the operator, the worker and arealctl.
COMPONENTS  += layout
layout_DIR  := lib/layout
layout_DEPS := base yaml
layout_PKGS := jansson
# the inventory reader needs jansson and libyaml, which the bare GPU build lacks
layout_GPU_SKIP := lib/layout/src/cluster_parse.c
