#!/bin/sh
# bench_http.sh - `make bench`'s rollout HTTP part: makes the bench model (HF
# directory and fp32 GGUF) in the bench cache, builds llama.cpp's
# llama-server there on demand (llama_build.sh), then runs bench_http.py:
# areal-worker serve beside llama-server and transformers, one table.
# Needs python3 with torch, transformers, tokenizers, safetensors, numpy and
# gguf (pip install torch transformers safetensors numpy gguf); cmake for
# llama.cpp. AREAL_BENCH_NO_LLAMA=1 skips llama.cpp; AREAL_BENCH_QUICK=1 runs
# 1 and 8 requests only; AREAL_BENCH_THREADS=N (default 1).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-build/rel}
CACHE="${AREAL_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/areal-bench}"
if ! python3 -c 'import torch, transformers, tokenizers, safetensors, numpy' 2>/dev/null; then
    echo "bench_http: skipped: python3 lacks torch/transformers/tokenizers/safetensors/numpy" \
         "(pip install torch transformers safetensors numpy gguf)" >&2
    exit 0
fi
MODEL="$CACHE/bench-model-qwen2-20m"
python3 "$HERE/make_bench_model.py" "$MODEL"
LLAMA_ARGS=""
if [ "${AREAL_BENCH_NO_LLAMA:-0}" = 1 ]; then
    echo "bench_http: llama.cpp column skipped: AREAL_BENCH_NO_LLAMA=1" >&2
elif ! command -v cmake >/dev/null && [ ! -x "$CACHE/llama-build/bin/llama-server" ]; then
    echo "bench_http: llama.cpp column skipped: no llama-server in $CACHE and no cmake to build it" \
         "(apt-get install cmake, or AREAL_BENCH_NO_LLAMA=1 to silence this)" >&2
else
    rc=0
    "$HERE/llama_build.sh" >/dev/null || rc=$?
    if [ "$rc" = 0 ]; then
        GGUF="$CACHE/bench-model-qwen2-20m-f32.gguf"
        python3 "$HERE/make_bench_model.py" "$MODEL" --gguf "$GGUF" --llama "$CACHE/llama.cpp" \
            >/dev/null 2>"$CACHE/convert.log" || { echo "bench_http: GGUF conversion failed; see $CACHE/convert.log" >&2; GGUF=""; }
        [ -n "$GGUF" ] && LLAMA_ARGS="--gguf $GGUF --llama-server $CACHE/llama-build/bin/llama-server"
    elif [ "$rc" = 3 ]; then
        echo "bench_http: llama.cpp column skipped: its build is still running (llama_build.sh)" >&2
    else
        echo "bench_http: llama.cpp column skipped: the build failed (above; no network for pip," \
             "no compiler?)" >&2
    fi
fi
QUICK=""
[ "${AREAL_BENCH_QUICK:-0}" = 1 ] && QUICK="--quick"
# shellcheck disable=SC2086 # LLAMA_ARGS is a word list by design
exec python3 "$HERE/bench_http.py" --worker "$BUILD/areal-worker" --model "$MODEL" $LLAMA_ARGS $QUICK
