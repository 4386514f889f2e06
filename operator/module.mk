# operator/: the areal-operator's controller pieces (see Makefile for the variables).
LIB_SRC    += $(wildcard operator/src/*.c)
INCLUDES   += -Ioperator/include
EXTRA_LIBS += -lpthread
TEST_SRC   += $(wildcard operator/tests/test_*.c)
PKGS       += libwebsockets
DEPS_GROUPS += operator
PROGRAMS   += areal-operator
areal-operator_SRC := $(wildcard operator/cmd/*.c)
