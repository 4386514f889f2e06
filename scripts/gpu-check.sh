#!/usr/bin/env bash
# gpu-check.sh - the one script to run on a GPU machine: builds and runs the
# GPU tests and benchmarks (NCCL backend, CUDA kernels where nvcc is found;
# make test-gpu, make bench-gpu) and
# prints what they ran on. Everything goes to stdout and, when $OUT is set,
# to $OUT/gpu.log. Finishes within about 9 minutes (each step has a timeout: 150 s build,
# 200 s tests, 180 s benchmarks).
#
# The GPU machine has no network and may lack Debian dev packages: cmocka
# comes from .gpu-carry/debs (made by scripts/gpu-carry.sh on a networked
# machine), unpacked with dpkg -x (or ar + tar) into .gpu-carry/prefix.
# CUDA_HOME: the environment's, else /usr/local/cuda, else nvcc's parent.
# NCCL_HOME: the environment's, else the Python package nvidia.nccl (the
# nvidia-nccl-cu13 wheel: include/ and lib/libnccl.so.2), else CUDA_HOME.
# CUBLAS_HOME: the environment's, else CUDA_HOME when it holds cublasLt.h,
# else the Python package nvidia.cu13 / nvidia.cublas (the nvidia-cublas wheel).
# The kernels' tests (gpu_test_layers, _vocab, _optim, _gemm, ...),
# gpu_bench_kernels (GEMM TFLOP/s at the Qwen2 shapes, memory-bound GB/s) and
# gpu_bench_attention (attention fwd / bwd / fwd+bwd TFLOP/s at 2k and 8k
# tokens per sequence, the tensor-core kernels beside the scalar reference;
# gpu_test_attention checks both families against its CPU reference) run inside make test-gpu / bench-gpu, and so do
# worker/gpu's gpu_test_model (a training step and decode steps of the tiny
# Qwen3 / Qwen3-MoE / Qwen2 against the CPU model), gpu_test_ppo (the fused
# GRPO loss and a PPO training step against worker/rl's CPU loss),
# gpu_test_grpo (the trainer's GPU backend's calls: two GRPO steps of two
# micro-batches each against the CPU trainer's arithmetic - prints the
# losses, grad norms and the worst update difference per step),
# gpu_test_paged (the rollout engine's GPU step under an engine-like
# schedule against the CPU engine's step - prints the logits error, the
# greedy tokens checked and how long free-running GPU greedy agrees) and
# gpu_bench_model (training tokens/s and MFU at the 0.5B and 1.5B shapes at
# 8k and 16k tokens, decode tokens/s at batch 1/32/256 and HBM fraction): one
# run prints every figure of issue 17's Bench; the benchmark step's time
# limit covers all three benches.
# Exit status: 0 when the tests passed (or were skipped loudly for lack of a
# device), else the first failing step's.
set -uo pipefail
cd "$(dirname "$0")/.."

step() { echo; echo "==== $*"; }

unpack_debs() {
    local prefix=.gpu-carry/prefix
    rm -rf "$prefix"
    mkdir -p "$prefix"
    for deb in .gpu-carry/debs/*.deb; do
        [ -f "$deb" ] || continue
        if command -v dpkg >/dev/null 2>&1; then
            dpkg -x "$deb" "$prefix" || return 1
        else
            local tmp
            tmp=$(mktemp -d)
            (cd "$tmp" && ar x "$OLDPWD/$deb") || return 1
            tar -xf "$tmp"/data.tar.* -C "$prefix" || return 1
            rm -rf "$tmp"
        fi
    done
    [ -f "$prefix/usr/include/cmocka.h" ] && [ -e "$prefix/usr/lib/x86_64-linux-gnu/libcmocka.so" ]
}

# the carried packages' libraries for the programs (their rpath also names them)
carried_libs() {
    local p=$PWD/.gpu-carry/prefix/usr/lib/x86_64-linux-gnu
    export LD_LIBRARY_PATH=$p:$p/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    ls "$p"/libjansson.so "$p"/libpcre2-8.so "$p"/libunistring.so "$p"/openblas-pthread/libopenblas.so 2>&1
}

main() {
    local t0=$SECONDS rc=0
    step "gpu-check: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    uname -a
    step "nvidia-smi"
    nvidia-smi 2>&1 | head -n 30 || echo "nvidia-smi: not available"
    nvidia-smi -L 2>&1 || true

    export CUDA_HOME=${CUDA_HOME:-}
    if [ -z "$CUDA_HOME" ]; then
        if [ -f /usr/local/cuda/include/cuda_runtime_api.h ]; then
            CUDA_HOME=/usr/local/cuda
        elif command -v nvcc >/dev/null 2>&1; then
            CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
        fi
    fi
    step "CUDA_HOME=$CUDA_HOME"
    if [ -x "$CUDA_HOME/bin/nvcc" ]; then "$CUDA_HOME/bin/nvcc" --version | tail -n 2; fi
    ls "$CUDA_HOME"/lib64/libcudart.so* 2>&1 | head -n 3

    export NCCL_HOME=${NCCL_HOME:-}
    if [ -z "$NCCL_HOME" ]; then
        NCCL_HOME=$(python3 -c 'import nvidia.nccl as m, os; print(os.path.dirname(m.__file__) if getattr(m, "__file__", None) else list(m.__path__)[0])' 2>/dev/null || true)
    fi
    if [ -z "$NCCL_HOME" ] && [ -f "$CUDA_HOME/include/nccl.h" ]; then NCCL_HOME=$CUDA_HOME; fi
    step "NCCL_HOME=$NCCL_HOME"
    ls "$NCCL_HOME/include/nccl.h" "$NCCL_HOME"/lib/libnccl.so* 2>&1
    grep -hE '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$NCCL_HOME/include/nccl.h" 2>/dev/null | awk '{printf "%s=%s ", $2, $3} END {print ""}'

    # cuBLASLt for kernels/'s GEMM: CUDA's own, else the python nvidia-cublas wheel
    export CUBLAS_HOME=${CUBLAS_HOME:-}
    if [ -z "$CUBLAS_HOME" ] && [ ! -f "$CUDA_HOME/include/cublasLt.h" ]; then
        local nv
        nv=$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null || true)
        for d in "$nv/cu13" "$nv/cublas"; do
            if [ -n "$nv" ] && [ -f "$d/include/cublasLt.h" ]; then CUBLAS_HOME=$d; break; fi
        done
    fi
    step "CUBLAS_HOME=${CUBLAS_HOME:-$CUDA_HOME}"
    ls "${CUBLAS_HOME:-$CUDA_HOME}"/lib*/libcublasLt.so* 2>&1 | head -n 2

    step "cmocka"
    if ls .gpu-carry/debs/*.deb >/dev/null 2>&1 && unpack_debs; then
        export CMOCKA_PREFIX=$PWD/.gpu-carry/prefix
        echo "cmocka from .gpu-carry/debs, unpacked in $CMOCKA_PREFIX"
        carried_libs
    elif [ -f /usr/include/cmocka.h ]; then
        echo "system cmocka"
    else
        echo "gpu-check: no cmocka: run scripts/gpu-carry.sh on a networked machine and carry .gpu-carry"
        return 2
    fi

    export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
    local jobs
    jobs=$(nproc 2>/dev/null || echo 4)
    step "make gpu-info"
    make --no-print-directory gpu-info || return 3
    step "build (make -j$jobs gpu-bins: the test-gpu and bench-gpu programs)"
    timeout 150 make --no-print-directory -j"$jobs" gpu-bins || return 4
    step "make test-gpu"
    TEST_TIMEOUT=180 timeout 200 make --no-print-directory test-gpu || rc=5
    step "make bench-gpu"
    timeout 180 make --no-print-directory bench-gpu || { [ "$rc" -eq 0 ] && rc=6; }
    step "gpu-check: done in $((SECONDS - t0)) s, exit $rc"
    return $rc
}

if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    main 2>&1 | tee "$OUT/gpu.log"
    exit "${PIPESTATUS[0]}"
fi
main 2>&1
