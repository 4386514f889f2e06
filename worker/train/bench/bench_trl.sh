#!/bin/sh
# bench_trl.sh - `make bench`: TRL's GRPOTrainer on CPU beside this trainer,
# on the tiny model bench_async.sh made ($AREAL_BENCH_OUT/model, the HF
# directory transformers loads), same task, G, prompts per step, max new
# tokens, lr and steps; compares seconds per step and reward after the same
# steps with bench_async.sh's runs. Needs python3 with torch, transformers,
# datasets and trl (pip install trl); skips without them.
set -eu
BUILD=${BUILD:-build/rel}
OUT=${AREAL_BENCH_OUT:-$BUILD/bench-train}
STEPS=${AREAL_BENCH_STEPS:-40}
B=${AREAL_BENCH_BATCH:-16}
G=${AREAL_BENCH_GROUP:-8}
if ! python3 -c 'import torch, transformers, datasets, trl' 2>/dev/null; then
    echo "bench_trl: skipped: python3 lacks torch/transformers/datasets/trl (pip install trl)" >&2
    exit 0
fi
if [ ! -f "$OUT/model/model.safetensors" ]; then
    echo "bench_trl: skipped: no $OUT/model (bench_async.sh makes it)" >&2
    exit 0
fi
python3 "$(dirname "$0")/bench_trl.py" --model "$OUT/model" --steps "$STEPS" --batch "$B" \
    --group "$G" --csv "$OUT/trl.csv" 2>"$OUT/trl.log" | tail -1
for eta in 4 0; do
    f="$OUT/eta$eta/progress.jsonl"
    [ -f "$f" ] && python3 - "$f" "$eta" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [d for d in rows if "reward_mean" in d]
w = rows[-1]["wall_s"]
last = [d["reward_mean"] for d in rows[-5:]]
print("areal-worker train (eta %s, 1 server + 1 trainer, 1 thread each): %d steps in %.1f s, "
      "%.3f s / step, reward (last 5 steps) %.3f" % (sys.argv[2], len(rows), w, w / len(rows),
                                                     sum(last) / len(last)))
PY
done
