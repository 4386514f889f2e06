#!/usr/bin/env bash
# run-fuzz.sh SECONDS TARGET... - runs each libFuzzer target for SECONDS with
# its seed corpus (COMPONENT/fuzz/corpus/NAME, COMPONENT one or two folders deep) and a working corpus under
# build/fuzz-corpus/NAME. Any crash, leak or hang (-timeout) fails the run.
set -eu
secs=$1
shift
for t in "$@"; do
    name=$(basename "$t")
    work="build/fuzz-corpus/$name"
    mkdir -p "$work" build/fuzz-artifacts
    seeds=$(ls -d */fuzz/corpus/"$name" */*/fuzz/corpus/"$name" 2>/dev/null | head -1)
    echo "== fuzzing $name for ${secs}s"
    "$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix=build/fuzz-artifacts/ "$work" $seeds >"build/fuzz-artifacts/$name.log" 2>&1 &&
        rc=0 || rc=$?
    # a failure's report (the SUMMARY line, the input as bytes and the
    # allocations or stack behind it) sits above the final stats
    if [ "$rc" -ne 0 ]; then
        grep -m1 -B2 -A30 'ERROR: libFuzzer\|ERROR: AddressSanitizer\|runtime error' \
            "build/fuzz-artifacts/$name.log" || true
    fi
    tail -n 8 "build/fuzz-artifacts/$name.log"
    [ "$rc" -eq 0 ] || { echo "fuzz target $name failed (exit $rc); see build/fuzz-artifacts/"; exit 1; }
done
echo "fuzz: all targets clean"
