#!/usr/bin/env bash
# gpu-carry.sh - run on a machine with the package registries: puts into
# .gpu-carry/ (ignored by git; carried to the GPU machine with the work tree)
# what the GPU machine lacks for `make test-gpu`: the cmocka runtime and
# headers, and the CPU model's packages that worker/gpu's GPU test and bench
# link (jansson, PCRE2, OpenBLAS with its libgfortran/libquadmath, and
# libunistring: runtime + headers), as .deb files, unpacked there by
# scripts/gpu-check.sh with `dpkg -x` into .gpu-carry/prefix (never into /);
# kernels/module.mk's GPU_PKG_PREFIX points the bare build at it.
#
# Rejected: installing on the GPU machine (it has no network) and static
# cmocka builds (the debs are the same files CI tests with).
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(libcmocka0 libcmocka-dev
    libjansson4 libjansson-dev
    libpcre2-8-0 libpcre2-dev
    libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0
    libunistring2 libunistring-dev)
mkdir -p .gpu-carry/debs
cd .gpu-carry/debs
rm -f ./*.deb
if ! apt-get download "${pkgs[@]}" >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    apt-get download "${pkgs[@]}" >/dev/null
fi
for p in "${pkgs[@]}"; do
    ls "${p}"_*.deb >/dev/null
done
echo "gpu-carry.sh: .gpu-carry/debs holds:"
ls -l ./*.deb
