#!/bin/sh
# bench_async.sh - `make bench`: asynchronous (eta = 4) against synchronous
# (eta = 0) GRPO on the demo's tiny model, same samples per step and steps:
# one `areal-worker serve` and one `areal-worker train` per run, then
# curves.py prints the wall-time ratio and writes the reward-vs-wall-time
# curves of both as CSV and SVG under $AREAL_BENCH_OUT (default
# $BUILD/bench-train). AREAL_BENCH_STEPS (default 40), _BATCH (16), _GROUP (8).
set -eu
BUILD=${BUILD:-build/rel}
W="$BUILD/areal-worker"
OUT=${AREAL_BENCH_OUT:-$BUILD/bench-train}
STEPS=${AREAL_BENCH_STEPS:-40}
B=${AREAL_BENCH_BATCH:-16}
G=${AREAL_BENCH_GROUP:-8}
if ! command -v python3 >/dev/null || ! command -v curl >/dev/null; then
    echo "bench_async: skipped: needs python3 and curl" >&2
    exit 0
fi
mkdir -p "$OUT"
tmp=$(mktemp -d)
MODEL="$OUT/model"
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
rm -rf "$MODEL"
"$W" tiny --out "$MODEL" --warmup-steps 300 >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
for eta in 4 0; do
    "$W" serve --model "$MODEL" --host 127.0.0.1 --port "$port" --threads 1 >/dev/null 2>&1 &
    pid=$!
    i=0
    until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do
        i=$((i + 1)); [ $i -gt 400 ] && { echo "bench_async: the server did not start" >&2; exit 1; }
        sleep 0.05
    done
    rm -rf "$OUT/eta$eta"
    # same prompts per step (B), samples per prompt (G), steps and in-flight limit
    "$W" train --model "$MODEL" --job-dir "$OUT/eta$eta" --servers "127.0.0.1:$port" \
        --steps "$STEPS" --batch "$B" --group "$G" --eta "$eta" --max-concurrent $((5 * B)) \
        --eval-every 0 --eval-n 200 --ckpt-every 0 --quiet 2>"$OUT/eta$eta.log"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    pid=""
done
echo "bench_async: tiny model, $STEPS steps of $B prompts x $G samples, one server, 2 shared cores"
python3 "$(dirname "$0")/curves.py" "$OUT/async_vs_sync.csv" "$OUT/async_vs_sync.svg" \
    "eta 4 (async)=$OUT/eta4/progress.jsonl" "eta 0 (sync)=$OUT/eta0/progress.jsonl"
echo "curves: $OUT/async_vs_sync.csv, $OUT/async_vs_sync.svg"
