#!/usr/bin/env bash
# A long libFuzzer campaign over every target (the figures in RELIABILITY.md come from this).
# Usage: fuzz/campaign.sh [SECONDS_PER_TARGET=270] [PARALLEL=2] [WORK_DIR=/tmp/comet-fuzz]
# Each target starts from a copy of the committed corpus in WORK_DIR/<target> (so the repo's
# corpus does not grow); crashes land in WORK_DIR/artifacts/<target>/ and logs in WORK_DIR/*.log.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-270}"; parallel="${2:-2}"; work="${3:-/tmp/comet-fuzz}"
targets=(frame header_json header_binary typed_header record batch properties json_body)
RUSTC_BOOTSTRAP=1 cargo fuzz build --sanitizer none
bin_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/x86_64-unknown-linux-gnu/release"
mkdir -p "$work"
run() {
    local t="$1"
    mkdir -p "$work/$t" "$work/artifacts/$t"
    cp -n "corpus/$t/"* "$work/$t/" 2>/dev/null || true
    "$bin_dir/$t" "$work/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/artifacts/$t/" \
        >"$work/$t.log" 2>&1 || true
    local execs crashes
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t.log" | grep -o '[0-9]*$' || echo 0)
    crashes=$(find "$work/artifacts/$t" -type f | wc -l)
    echo "$t executions=$execs crashes=$crashes"
}
i=0
for t in "${targets[@]}"; do
    run "$t" &
    i=$((i + 1))
    if [ $((i % parallel)) = 0 ]; then wait; fi
done
wait
