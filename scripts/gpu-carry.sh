#!/usr/bin/env bash
# gpu-carry.sh - run on a machine with the package registries: puts into
# .gpu-carry/ (ignored by git; carried to the GPU machine with the work tree)
# what the GPU machine lacks for `make test-gpu`: the cmocka runtime and
# headers as .deb files, unpacked there by scripts/gpu-check.sh with
# `dpkg -x` into .gpu-carry/prefix (never into /).
#
# Rejected: installing on the GPU machine (it has no network) and static
# cmocka builds (the debs are the same files CI tests with).
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(libcmocka0 libcmocka-dev)
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
