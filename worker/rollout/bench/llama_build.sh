#!/bin/sh
# llama_build.sh - builds llama.cpp's llama-server (CPU, fp32-capable) and
# makes its HF->GGUF converter importable, in the bench cache, on demand.
# llama.cpp comes vendored in the llama-cpp-python sdist on PyPI (the only
# network the project allows is the package registries); we fetch the sdist
# with pip rather than cloning GitHub. Idempotent: a second run finds the
# binary and exits. Prints the cache directory on stdout. Start it early
# (`nice worker/rollout/bench/llama_build.sh &`): on 2 shared cores it takes
# tens of minutes (and hours when the machine is busy: niced, it gets what
# nobody else wants). Exit 3: another build of this cache is running.
#   LLAMA_CPP_PYTHON_VERSION pins the sdist (default: the newest).
set -eu
CACHE="${AREAL_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/areal-bench}"
mkdir -p "$CACHE"
SRV="$CACHE/llama-build/bin/llama-server"
if [ -x "$SRV" ] && [ -d "$CACHE/llama.cpp" ]; then echo "$CACHE"; exit 0; fi
# One build at a time per cache: a second caller (make bench while a
# background build runs) must not run cmake in the same tree; it fails at
# once with exit 3 and the bench skips the column, saying so.
if command -v flock >/dev/null; then
    exec 9>"$CACHE/llama-build.lock"
    if ! flock -n 9; then
        echo "llama_build: another llama.cpp build holds $CACHE/llama-build.lock; try again when it is done" >&2
        exit 3
    fi
fi
command -v cmake >/dev/null || { echo "llama_build: cmake missing (apt-get install cmake)" >&2; exit 1; }
SPEC=llama-cpp-python${LLAMA_CPP_PYTHON_VERSION:+==$LLAMA_CPP_PYTHON_VERSION}
if ! ls "$CACHE"/sdist/llama_cpp_python-*.tar.gz >/dev/null 2>&1; then
    pip download --no-deps --no-binary :all: -d "$CACHE/sdist" "$SPEC" >&2
fi
if [ ! -d "$CACHE/llama.cpp" ]; then
    rm -rf "$CACHE/unpack" && mkdir -p "$CACHE/unpack"
    tar -xzf "$(ls "$CACHE"/sdist/llama_cpp_python-*.tar.gz | tail -1)" -C "$CACHE/unpack"
    mv "$CACHE"/unpack/llama_cpp_python-*/vendor/llama.cpp "$CACHE/llama.cpp"
    rm -rf "$CACHE/unpack"
fi
# Only what the bench runs: the llama-server target (with the libraries it
# links: ggml, llama, common, mtmd), Release, native CPU flags, no BLAS, no
# GPU, no curl/OpenSSL, no tests, examples, web UI or unified app. The build
# is niced and -j1 by default (BENCH_JOBS=N to change) because the machine is
# shared: it is meant to be started early, in the background, and it resumes
# where a previous (interrupted) run stopped.
nice -n 19 cmake -S "$CACHE/llama.cpp" -B "$CACHE/llama-build" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DGGML_BLAS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF >&2
nice -n 19 cmake --build "$CACHE/llama-build" --target llama-server -j "${BENCH_JOBS:-1}" >&2
echo "$CACHE"
