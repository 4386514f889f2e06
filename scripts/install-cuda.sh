#!/usr/bin/env bash
# install-cuda.sh [--prefix-only] - the CUDA runtime, CUDA headers, NCCL and
# nvcc, for compiling the worker's NCCL backend and the CUDA kernels of
# kernels/, taken from PyPI's nvidia-* wheels.
#
# The wheels (pinned below, the one place where their versions live) are
# downloaded with pip (no dependencies, binary only) into a cache outside the
# repository keyed by the versions:
#     ${AREAL_CUDA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/areal-cuda}/<key>/
# and unpacked into one prefix there (include/, lib/ with the link names
# libcudart.so and libnccl.so that the wheels do not ship, and bin/ + nvvm/
# for nvcc, laid out as its nvcc.profile expects). The last line
# printed is the prefix. A second run finds the prefix complete and returns
# in well under a second. When the registry cannot be reached it prints one
# line saying that the NCCL backend will not be built, and exits 0: the rest
# of the project builds without it.
#
# --prefix-only: print the prefix when it is complete, else nothing; never
# downloads (the Makefile's probe).
#
# Rejected: the NVIDIA apt repository (not reachable from CI) and a full CUDA
# toolkit (gigabytes; the NCCL backend is plain C against cuda_runtime_api.h
# and nccl.h, and nvcc with cicc comes as two wheels of ~100 MB). cuDNN (nvidia-cudnn-cu13) is left out: its
# wheel alone is 349 MB (9.13.0.50) against 202 MB for all of the above, and
# nothing uses it yet. nvidia-cublas (421 MB download, 567 MB unpacked, most of
# it libcublasLt) is in: kernels/'s bf16 GEMM is the bulk of a training step,
# and writing our own Hopper GEMM to spare the download is not worth it.
# Its cu13 wheels are tagged manylinux_2_27, hence that platform below. The
# wheels are deleted once unpacked (about 1.1 GB stay).
set -euo pipefail

# ---- pins: CUDA 13.0 to match the 580 driver of the GPU machine --------------
WHEELS=(
    nvidia-cuda-runtime==13.0.96
    nvidia-cuda-crt==13.0.88
    nvidia-cuda-cccl==13.0.85
    nvidia-nccl-cu13==2.28.9
    nvidia-cuda-nvcc==13.0.88
    nvidia-nvvm==13.0.88
    nvidia-cublas==13.0.2.14
)

mode=${1:-}
cache=${AREAL_CUDA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/areal-cuda}
key=$(printf '%s\n' "${WHEELS[@]}" | sed 's/^nvidia-//; s/==/-/' | paste -sd_ -)
dir=$cache/$key
prefix=$dir/prefix

if [ -f "$dir/complete" ]; then
    echo "$prefix"
    exit 0
fi
[ "$mode" = --prefix-only ] && exit 0

skip() {
    echo "install-cuda.sh: $1; the NCCL backend will be skipped (set CUDA_HOME and NCCL_HOME to build it)" >&2
    exit 0
}

command -v python3 >/dev/null 2>&1 || skip "python3 is not installed"
python3 -m pip --version >/dev/null 2>&1 || skip "pip is not installed (python3 -m pip)"
mkdir -p "$dir/wheels" || skip "cannot create the cache $dir"
echo "install-cuda.sh: downloading ${WHEELS[*]} into $dir" >&2
if ! python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check -q \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_18_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$dir/wheels" "${WHEELS[@]}" >"$dir/pip.log" 2>&1; then
    skip "the CUDA/NCCL wheels could not be downloaded from PyPI ($(tail -n 1 "$dir/pip.log"))"
fi

rm -rf "$dir/unpack" "$prefix"
mkdir -p "$dir/unpack" "$prefix/include" "$prefix/lib" || skip "cannot write $dir"
for w in "$dir"/wheels/*.whl; do
    python3 -m zipfile -e "$w" "$dir/unpack" || skip "cannot unpack $(basename "$w")"
done
# nvidia/cu13/{include,lib,bin,nvvm} (runtime, crt, cccl, nvcc, cicc, cuBLAS/cuBLASLt) and nvidia/nccl/{include,lib}
for sub in "$dir"/unpack/nvidia/*/; do
    for part in include lib bin nvvm; do
        if [ -d "$sub/$part" ]; then
            mkdir -p "$prefix/$part" && cp -a "$sub/$part/." "$prefix/$part/" || skip "cannot copy $part/"
        fi
    done
done
rm -rf "$dir/unpack"
for lib in cudart nccl cublas cublasLt; do
    real=$(cd "$prefix/lib" && ls "lib$lib.so."* 2>/dev/null | head -n 1)
    [ -n "$real" ] || skip "the wheels hold no lib$lib.so.N"
    ln -sf "$real" "$prefix/lib/lib$lib.so" || skip "cannot link lib$lib.so"
done
for h in cuda_runtime_api.h nccl.h cublasLt.h crt/host_defines.h nv/target; do
    [ -e "$prefix/include/$h" ] || skip "the wheels hold no $h"
done
# zipfile drops the execute bits of nvcc's tools
find "$prefix/bin" "$prefix/nvvm/bin" -maxdepth 1 -type f ! -name '*.profile' -exec chmod +x {} + 2>/dev/null
for b in bin/nvcc bin/ptxas nvvm/bin/cicc; do
    [ -x "$prefix/$b" ] || skip "the wheels hold no $b"
done
rm -rf "$dir/wheels" "$dir/pip.log"
touch "$dir/complete"
echo "install-cuda.sh: CUDA and NCCL ready ($(du -sh "$prefix" | cut -f1))" >&2
echo "$prefix"
