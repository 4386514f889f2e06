#!/usr/bin/env bash
# runtime-packages.sh PROGRAM... - the Debian packages that hold the shared
# libraries the programs load, one a line (the images' runtime stage installs
# exactly these). Why from ldd and not a hand list: package names change
# between Debian releases (libcurl4 / libcurl4t64), the link line does not.
# A library no package owns (built from source, /usr/local) is an error.
set -euo pipefail
for bin in "$@"; do
    ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
done | sort -u | while read -r lib; do
    real=$(realpath "$lib")
    for p in "$lib" "$real" "${lib#/usr}" "/usr$lib" "${real#/usr}" "/usr$real"; do
        if pkg=$(dpkg -S "$p" 2>/dev/null); then
            echo "${pkg%%:*}" | sed 's/,.*//'
            continue 2
        fi
    done
    echo "runtime-packages.sh: no Debian package holds $lib" >&2
    exit 1
done | sort -u
