# lib/yaml/module.mk - YAML -> JSON (libyaml + jansson), shared by the
# inventory reader of lib/layout and the kubeconfig reader of lib/kube.
COMPONENTS += yaml
yaml_DIR  := lib/yaml
yaml_DEPS := base
yaml_PKGS := jansson yaml-0.1
# the bare GPU build (kernels/module.mk) has neither library
yaml_GPU_SKIP := $(wildcard lib/yaml/src/*.c)
