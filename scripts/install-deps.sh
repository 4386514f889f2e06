#!/usr/bin/env bash
# install-deps.sh GROUP... - installs what a build step needs, only if it is missing.
#
# Groups: build (compiler, pkg-config, jansson, libyaml, cmocka), fuzz (clang
# with libFuzzer), fmt (clang-format), and one group per component that needs
# more (named after it; its module.mk adds the name to DEPS_GROUPS). Debian/Ubuntu packages through apt-get;
# on other systems it names what to install and fails.
set -euo pipefail

need_pkgs=()
have_pc() { pkg-config --exists "$1" 2>/dev/null; }
have_cmd() { command -v "$1" >/dev/null 2>&1; }

for group in "$@"; do
    case "$group" in
    build)
        have_cmd cc || need_pkgs+=(gcc libc6-dev)
        have_cmd make || need_pkgs+=(make)
        have_cmd pkg-config || need_pkgs+=(pkg-config)
        have_pc jansson || need_pkgs+=(libjansson-dev)
        have_pc yaml-0.1 || need_pkgs+=(libyaml-dev)
        have_pc cmocka || need_pkgs+=(libcmocka-dev)
        ;;
    operator)
        have_pc libwebsockets || need_pkgs+=(libwebsockets-dev)
        # lib/http's TLS (the operator's secure metrics) links OpenSSL directly;
        # libwebsockets-dev pulls it in on Debian today, but that is its choice
        have_pc libssl || need_pkgs+=(libssl-dev)
        have_cmd valgrind || need_pkgs+=(valgrind) # the leak check of the controller loop test
        ;;
    fuzz)
        if ! have_cmd clang || ! echo 'int LLVMFuzzerTestOneInput(const char*d,long n){(void)d;(void)n;return 0;}' |
            clang -x c -fsanitize=fuzzer -o /dev/null - >/dev/null 2>&1; then
            need_pkgs+=(clang libclang-rt-dev)
        fi
        ;;
    fmt)
        have_cmd clang-format || need_pkgs+=(clang-format)
        ;;
    kube)
        have_pc libcurl || need_pkgs+=(libcurl4-openssl-dev)
        have_cmd openssl || need_pkgs+=(openssl)
        ;;
    model) # PCRE2 for the tokenizer's Unicode regex, libunistring for NFC, OpenBLAS
        have_pc libpcre2-8 || need_pkgs+=(libpcre2-dev)
        have_pc openblas || need_pkgs+=(libopenblas-dev)
        [ -f /usr/include/uninorm.h ] || need_pkgs+=(libunistring-dev)
        ;;
    worker-bench)
        # make bench of the worker's comm runtime compares against OpenMPI
        have_cmd mpicc || need_pkgs+=(libopenmpi-dev)
        have_cmd mpirun || need_pkgs+=(openmpi-bin)
        ;;
    *)
        echo "install-deps.sh: unknown group '$group' (use build, fuzz, fmt or a component group)" >&2
        exit 2
        ;;
    esac
done

[ ${#need_pkgs[@]} -eq 0 ] && exit 0

if ! have_cmd apt-get; then
    echo "install-deps.sh: missing: ${need_pkgs[*]} - install them with your package manager" >&2
    exit 1
fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "install-deps.sh: installing ${need_pkgs[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
# libclang-rt-dev is a virtual name on some releases; fall back to the versioned one.
if ! $sudo apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null; then
    fixed=()
    for p in "${need_pkgs[@]}"; do
        if [ "$p" = libclang-rt-dev ]; then
            v=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p')
            p="libclang-rt-${v:-14}-dev"
        fi
        fixed+=("$p")
    done
    $sudo apt-get install -y -qq --no-install-recommends "${fixed[@]}" >/dev/null
fi
