# shellcheck shell=bash disable=SC2034
# e2e/lib.sh - shared settings of the e2e scripts (sourced, never run).
#
# What: where the pinned control-plane binaries are cached, where a running
# test cluster keeps its state, which loopback ports it uses, and small
# helpers (logging, port checks, waiting). How: plain bash, every location
# overridable by environment so parallel runs or CI can relocate them.
# Rejected: keeping binaries or state inside the repository (multi-GB module
# and build caches do not belong in a clone; a stale state dir would survive
# `git clean` and confuse the next run).

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=e2e/versions.env
. "$E2E_DIR/versions.env"

GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}

# Cache of built binaries, keyed by the hash of versions.env.
E2E_CACHE_ROOT=${AREAL_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/areal-e2e}
E2E_VERSIONS_HASH=$(grep -v '^#' "$E2E_DIR/versions.env" | sha256sum | cut -c1-16)
E2E_CACHE=$E2E_CACHE_ROOT/$E2E_VERSIONS_HASH
E2E_BIN=$E2E_CACHE/bin
E2E_PROGRAMS="kube-apiserver kube-controller-manager kubectl etcd helm"

# State of a running cluster (certs, data, logs, pids, kubeconfig).
E2E_STATE=${AREAL_E2E_STATE:-/tmp/areal-e2e-$(id -u)}

# Loopback ports (all overridable).
E2E_ETCD_PORT=${AREAL_E2E_ETCD_PORT:-23790}
E2E_ETCD_PEER_PORT=${AREAL_E2E_ETCD_PEER_PORT:-23800}
E2E_APISERVER_PORT=${AREAL_E2E_APISERVER_PORT:-16443}

e2e_log() { printf '[e2e %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
e2e_die() {
    e2e_log "error: $*"
    exit 1
}

# e2e_port_busy PORT: true if something listens on 127.0.0.1:PORT (tcp).
e2e_port_busy() {
    local hex
    hex=$(printf ':%04X' "$1")
    # /proc/net/tcp: local_address column, state 0A = LISTEN.
    awk -v p="$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { found = 1 } END { exit !found }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# e2e_wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND every 0.2 s.
e2e_wait_for() {
    local secs=$1 what=$2 deadline
    shift 2
    deadline=$((SECONDS + secs))
    while ! "$@" >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            e2e_log "timed out after ${secs}s waiting for $what"
            return 1
        fi
        sleep 0.2
    done
}
