#!/usr/bin/env bash
# run-tests.sh LABEL BINARY... - runs cmocka test binaries, each under a time
# limit, and prints one closing line "LABEL: N passed, N failed".
#
# cmocka prints "[  PASSED  ] N test(s)." and "[  FAILED  ] N test(s)..." per
# binary; a binary that crashes, times out or prints neither counts as one
# failure of its own, so nothing can pass silently. With COUNTS=FILE the
# totals are also appended to FILE as "PASSED FAILED".
set -u
label=$1
shift
limit=${TEST_TIMEOUT:-300}
passed=0
failed=0
failed_bins=()
for bin in "$@"; do
    name=$(basename "$bin")
    out=$(mktemp)
    timeout --kill-after=5 "$limit" "$bin" >"$out" 2>&1
    rc=$?
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -1)
    p=${p:-0}
    f=${f:-0}
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1 # crashed, timed out (rc 124/137) or failed outside a test
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
        failed_bins+=("$name")
        echo "---- $label $name: exit $rc, output:"
        tail -n 60 "$out"
    else
        echo "$label $name: $p passed"
    fi
    rm -f "$out"
done
if [ ${#failed_bins[@]} -ne 0 ]; then
    echo "$label failing: ${failed_bins[*]}"
fi
echo "$label: $passed passed, $failed failed"
[ -n "${COUNTS:-}" ] && echo "$passed $failed" >>"$COUNTS"
[ "$failed" -eq 0 ]
