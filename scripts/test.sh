#!/usr/bin/env bash
# The whole test suite, as README's second command and .ci/run run it.
# Installs nothing by hand-off: every step below fetches what it needs from the package registries.
set -euo pipefail
cd "$(dirname "$0")/.."

# Free disk is printed at each stage: a CI machine once ran out of it mid-build. So is the time
# the previous stage took (README's "Tests" section keeps typical figures).
stage_start=$SECONDS
disk_free() {
    echo "   (took $((SECONDS - stage_start)) s; disk free: $(df -h . | awk 'NR==2 {print $4}'))"
    stage_start=$SECONDS
}

echo "== cargo test (unit, property, end-to-end): the whole suite; scripts/test-fast.sh is the fast tier =="
cargo test --workspace --locked

disk_free
echo "== comet bench produce: 10-second smoke run against comet serve =="
cargo build --locked -p comet
COMET_BIN="${CARGO_TARGET_DIR:-target}/debug/comet"
SMOKE_DIR="$(mktemp -d)"
"$COMET_BIN" serve --namesrv-listen 127.0.0.1:0 --broker-listen 127.0.0.1:0 \
    --data-dir "$SMOKE_DIR/data" --ready-file "$SMOKE_DIR/ready.json" >"$SMOKE_DIR/serve.log" 2>&1 &
SMOKE_SERVE_PID=$!
for _ in $(seq 600); do
    [ -s "$SMOKE_DIR/ready.json" ] && break
    kill -0 "$SMOKE_SERVE_PID" 2>/dev/null || { cat "$SMOKE_DIR/serve.log"; exit 1; }
    sleep 0.1
done
SMOKE_NAMESRV="$(sed -n 's/.*"namesrv":"\([^"]*\)".*/\1/p' "$SMOKE_DIR/ready.json")"
smoke_ok=yes
"$COMET_BIN" bench produce -n "$SMOKE_NAMESRV" -t BenchSmoke -p 4 -s 1024 -d 10 --json \
    >"$SMOKE_DIR/bench.json" || smoke_ok=no
cat "$SMOKE_DIR/bench.json"
# The run must have stored messages and had no failed send.
grep -q '"failed":0,' "$SMOKE_DIR/bench.json" || smoke_ok=no
grep -Eq '"messages":[1-9]' "$SMOKE_DIR/bench.json" || smoke_ok=no
kill -TERM "$SMOKE_SERVE_PID" 2>/dev/null || true
wait "$SMOKE_SERVE_PID" || true
if [ "$smoke_ok" != yes ]; then
    echo "comet bench smoke run failed; broker log:"
    cat "$SMOKE_DIR/serve.log"
    exit 1
fi
rm -rf "$SMOKE_DIR"

disk_free
echo "== bench/scale.sh smoke: the smallest point of its curves, against comet serve =="
# Prints its table; fails when a point cannot be measured (the scripts must not rot).
COMET_BIN="$COMET_BIN" bench/scale.sh --brokers comet --points 100 --no-write

disk_free
echo "== netns fault suite, quick: two replicated broker groups under kill -9, a cut link, a paused master =="
# Needs root and ip netns; says so and passes where they are missing.
crates/reliability/netns/run.sh --quick

if [ -x fuzz/smoke.sh ]; then
    disk_free
    echo "== fuzz smoke: a few seconds per protocol decoder target =="
    # Uses cargo-fuzz where it builds, else the stable replay harness; fails only on a crash.
    fuzz/smoke.sh
    # The fuzz build is large and not needed again in this run.
    if [ -n "${CI:-}" ]; then rm -rf fuzz/target; fi
fi

if [ -x interop/tests.sh ]; then
    disk_free
    echo "== interop tests against real RocketMQ peers =="
    interop/tests.sh
fi
disk_free
