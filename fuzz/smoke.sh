#!/usr/bin/env bash
# CI smoke run of every fuzz target: a few seconds each, failing only on a crash.
#
# With cargo-fuzz installed (`cargo install cargo-fuzz`), the libFuzzer targets are built on the
# stable toolchain (RUSTC_BOOTSTRAP=1 unlocks the -Z flags cargo-fuzz passes; --sanitizer none
# because the sanitizer runtimes need nightly) and run from the committed corpus. Where
# cargo-fuzz is missing or cannot build, the same checks run through the stable `replay` harness
# (deterministic mutations of the same corpus), so CI always exercises every decoder.
#
# Env: FUZZ_SECONDS (per target, default 5), FUZZ_ENGINE=libfuzzer|replay (default: auto).
set -euo pipefail
cd "$(dirname "$0")"

SECONDS_PER_TARGET="${FUZZ_SECONDS:-5}"
TARGETS=(frame header_json header_binary typed_header record batch properties json_body grpc)
LOCKED=()
[ -f Cargo.lock ] && LOCKED=(--locked)

engine="${FUZZ_ENGINE:-auto}"
if [ "$engine" = auto ]; then
    engine=replay
    if cargo fuzz --version >/dev/null 2>&1; then
        if RUSTC_BOOTSTRAP=1 cargo fuzz build --sanitizer none >build.log 2>&1; then
            engine=libfuzzer
        else
            echo "fuzz smoke: cargo fuzz build failed (see fuzz/build.log); using the replay harness"
        fi
    else
        echo "fuzz smoke: cargo-fuzz not installed; using the replay harness"
    fi
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

failed=0
if [ "$engine" = libfuzzer ]; then
    for t in "${TARGETS[@]}"; do
        mkdir -p "$scratch/$t"
        # New inputs go to the scratch dir (first corpus); the committed corpus stays read-only.
        if ! RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none "$t" \
            "$scratch/$t" "corpus/$t" -- -max_total_time="$SECONDS_PER_TARGET" \
            -print_final_stats=1 >"$scratch/$t.log" 2>&1; then
            echo "fuzz smoke: $t CRASHED"; tail -40 "$scratch/$t.log"; failed=1
        else
            runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$t.log" | grep -o '[0-9]*$' || echo '?')
            echo "fuzz smoke: $t ok ($runs executions in ${SECONDS_PER_TARGET}s, libFuzzer)"
        fi
    done
else
    cargo build "${LOCKED[@]}" --example replay
    replay="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')/debug/examples/replay"
    for t in "${TARGETS[@]}"; do
        if ! "$replay" "$t" --seconds "$SECONDS_PER_TARGET" --artifacts artifacts "corpus/$t"; then
            echo "fuzz smoke: $t CRASHED (input saved under fuzz/artifacts/$t/)"; failed=1
        fi
    done
fi
[ "$failed" = 0 ] && echo "fuzz smoke: all ${#TARGETS[@]} targets passed"
exit "$failed"
