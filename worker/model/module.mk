# worker/model/module.mk - HuggingFace model files (config.json, safetensors) and the
# byte-level BPE tokenizer. PCRE2 gives the pre-tokenizer's Unicode classes and
# libunistring the NFC normalizer, so no Unicode tables live in this tree.
# OpenBLAS does the matrix products of the CPU fp32 model.
LIB_SRC     += $(wildcard worker/model/src/*.c)
INCLUDES    += -Iworker/model/include
PKGS        += libpcre2-8 openblas
EXTRA_LIBS  += -lunistring -lpthread
DEPS_GROUPS += model
# The commands tokenize, score and generate live in the library (worker/model/src/
# cmd_*.c) and run as `areal-worker tokenize|score|generate`.
TEST_SRC    += $(wildcard worker/model/tests/test_*.c)
FUZZ_SRC    += $(wildcard worker/model/fuzz/fuzz_*.c)
BENCH_SRC   += $(wildcard worker/model/bench/bench_*.c)
