# lib/yaml/module.mk - YAML -> JSON (libyaml + jansson), shared by the
# inventory reader of lib/layout and the kubeconfig reader of lib/kube.
LIB_SRC  += $(wildcard lib/yaml/src/*.c)
INCLUDES += -Ilib/yaml/include
PKGS     += jansson yaml-0.1
