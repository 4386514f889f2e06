# worker/model/module.mk - HuggingFace model files (config.json, safetensors) and the
# byte-level BPE tokenizer. PCRE2 gives the pre-tokenizer's Unicode classes and
# libunistring the NFC normalizer, so no Unicode tables live in this tree.
# OpenBLAS does the matrix products of the CPU fp32 model.
# The commands tokenize, score and generate live in the library (worker/model/src/
# cmd_*.c) and run as `areal-worker tokenize|score|generate`.
COMPONENTS  += model
model_DIR   := worker/model
model_DEPS  := base
model_PKGS  := jansson libpcre2-8 openblas
model_LIBS  := -lunistring -lpthread
model_TEST_DEPS := testutil
# the command tests check the CLI with tests/util's cli_check (cmocka: named
# per binary, so that the fuzz targets do not compile it)
test_cmd_tokenize_DEPS := model clicheck
test_model_cmds_DEPS   := model clicheck
DEPS_GROUPS += model
