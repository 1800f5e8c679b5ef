#!/usr/bin/env bash
# Comet's client SDK against the real Apache RocketMQ name server and broker.
#
#   interop/comet-client/run.sh [WORKDIR]
#
# Builds the scenario runner (a cargo package outside the workspace, target dir
# ${CARGO_TARGET_DIR:-target}/interop-comet-client), starts Apache RocketMQ with interop/apache/run.sh
# (delay level 2 = 5 s, every other level 1 s, so retries come back quickly; transaction checks
# every 5 s), runs every scenario with JSON headers and a subset again with ROCKETMQ (binary)
# headers, several at a time, stops Apache, and writes results.md next to this script. Exits
# non-zero when a row listed in baseline.txt (rows that passed before) fails; a new row that fails
# is reported but does not fail the suite.
#
# One scenario by hand: interop/apache/run.sh start DIR (with the BROKER_EXTRA_CONF lines below),
# then comet-client-interop --namesrv "$NAMESRV_ADDR" --scenario NAME, then run.sh kill DIR.
#
# Env: JOBS [4] scenarios run at once; KEEP_WORKDIR=1 keeps Apache's logs and store; plus every knob
# of interop/apache/run.sh (ROCKETMQ_VERSION, JAVA_HEAP, ...).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
JOBS="${JOBS:-4}"
WORKDIR="${1:-$(mktemp -d -t comet-client-interop.XXXXXX)}"
RESULTS="$HERE/results.md"
BASELINE="$HERE/baseline.txt"
# Level 2 is the delay row's 5 s; level 3 and 4 are the first retries of the DLQ row.
DELAY_LEVELS="1s 5s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
# The transactions row waits for a check: Apache's default period (30 s in 5.x) is shortened.
TRANSACTION_CHECK_INTERVAL=5000
# Rows run a second time with the ROCKETMQ header codec: one per request family.
ROCKETMQ_ROWS="send_sync send_batch properties_roundtrip push_clustering orderly_hash_selector retry_then_dlq admin_consumer_lag admin_query_key_and_id"
# Hard limit of one scenario process (each scenario also has its own, shorter budget).
SCENARIO_TIMEOUT=150

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/interop-comet-client"
BIN="$CARGO_TARGET_DIR/debug/comet-client-interop"

log() { echo "comet-client: $*" >&2; }

started=0
cleanup() {
    if ((started)); then
        "$ROOT/interop/apache/run.sh" kill "$WORKDIR/rmq" >/dev/null 2>&1 || true
    fi
    if [[ "${KEEP_WORKDIR:-0}" != 1 ]]; then
        rm -rf "$WORKDIR"
    else
        log "work directory kept: $WORKDIR"
    fi
}
trap cleanup EXIT

log "building the scenario runner and running its unit tests"
cargo build -q --manifest-path "$HERE/Cargo.toml"
cargo test -q --manifest-path "$HERE/Cargo.toml" >&2

mkdir -p "$WORKDIR/out"
log "starting Apache RocketMQ"
started=1
# waitTimeMillsInSendQueue: Apache drops a send that waited longer than this (200 ms by default) in
# its send queue (fast failure, SYSTEM_BUSY "[TIMEOUT_CLEAN_QUEUE]"). A sync send is answered and
# retried, a oneway send is lost silently: on a loaded 2-core CI box the send_oneway row once found
# 3 of its 8 messages stored. The rows check the client, not Apache's shedding.
BROKER_EXTRA_CONF="messageDelayLevel=$DELAY_LEVELS
transactionCheckInterval=$TRANSACTION_CHECK_INTERVAL
waitTimeMillsInSendQueue=5000${BROKER_EXTRA_CONF:+
$BROKER_EXTRA_CONF}" "$ROOT/interop/apache/run.sh" start "$WORKDIR/rmq" >"$WORKDIR/apache-start.log" 2>&1 || {
    cat "$WORKDIR/apache-start.log" >&2
    log "Apache RocketMQ did not start"
    exit 1
}
# shellcheck disable=SC1091
. "$WORKDIR/rmq/env"
log "Apache RocketMQ $ROCKETMQ_VERSION: name server $NAMESRV_ADDR, broker $BROKER_ADDR"
# The message_trace row reads the traces back with Apache's own mqadmin (rocketmq-tools is on the
# server's classpath).
APACHE_CLASSPATH="$("$ROOT/interop/apache/run.sh" classpath)"
export APACHE_CLASSPATH

# One line per run: <row id> <scenario> <serialize>. The row id is the scenario name, with
# "@rocketmq" appended for the binary-header runs.
suffix_base="$(date +%s)"
plan="$WORKDIR/plan"
: >"$plan"
while IFS=$'\t' read -r name _; do
    echo "$name $name json" >>"$plan"
done < <("$BIN" --list)
for name in $ROCKETMQ_ROWS; do
    echo "$name@rocketmq $name rocketmq" >>"$plan"
done

run_one() {
    local id="$1" name="$2" ser="$3"
    local suffix="${suffix_base}_${ser}"
    local begin end
    begin=$(date +%s)
    timeout "$SCENARIO_TIMEOUT" "$BIN" --namesrv "$NAMESRV_ADDR" --scenario "$name" --suffix "$suffix" \
        --serialize "$ser" >"$WORKDIR/out/$id.out" 2>"$WORKDIR/out/$id.err" || true
    end=$(date +%s)
    echo "$((end - begin))" >"$WORKDIR/out/$id.secs"
}
export -f run_one
export BIN NAMESRV_ADDR WORKDIR SCENARIO_TIMEOUT suffix_base

log "running $(wc -l <"$plan") scenario runs, $JOBS at a time"
suite_begin=$(date +%s)
xargs -P "$JOBS" -L 1 bash -c 'run_one "$@"' _ <"$plan"
suite_secs=$(($(date +%s) - suite_begin))

# The outcome of a run is its RESULT line; no line (crash, timeout) is a failure too.
declare -A outcome
failed_baseline=()
passed=0
failed=0
while read -r id name ser; do
    line="$(grep -a '^RESULT ' "$WORKDIR/out/$id.out" | tail -1 || true)"
    if [[ "$line" == "RESULT $name pass" ]]; then
        outcome[$id]="pass"
        passed=$((passed + 1))
    else
        if [[ -n "$line" ]]; then
            detail="${line#RESULT "$name" FAIL }"
        else
            detail="no result (exit, crash or timeout after $(cat "$WORKDIR/out/$id.secs") s): $(tail -c 300 "$WORKDIR/out/$id.err" | tr '\n' ' ')"
        fi
        outcome[$id]="FAIL: $detail"
        failed=$((failed + 1))
        if [[ -f "$BASELINE" ]] && grep -qxF "$id" <(sed 's/#.*//; s/[[:space:]]*$//' "$BASELINE"); then
            failed_baseline+=("$id")
        fi
    fi
done <"$plan"

rust_version="$(rustc --version 2>/dev/null || echo unknown)"
client_version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)"
{
    echo "# Comet's client against Apache RocketMQ"
    echo
    echo "Written by \`interop/comet-client/run.sh\` on $(date -u +%Y-%m-%dT%H:%MZ): $passed passed, $failed failed, in ${suite_secs} s of scenarios."
    echo
    echo "- Server: Apache RocketMQ $ROCKETMQ_VERSION name server + broker (Maven Central, \`interop/apache/run.sh\`), \`messageDelayLevel=$DELAY_LEVELS\`, \`transactionCheckInterval=$TRANSACTION_CHECK_INTERVAL\`, \`waitTimeMillsInSendQueue=5000\`"
    echo "- Client: comet-client $client_version (this checkout), $rust_version"
    echo "- Rows marked ROCKETMQ ran again with the binary (ROCKETMQ) header codec; all others use JSON headers."
    echo
    echo "| Scenario | Headers | Result | Time |"
    echo "|---|---|---|---|"
    while read -r id name ser; do
        title="$("$BIN" --list | awk -F'\t' -v n="$name" '$1 == n { print $2 }')"
        result="${outcome[$id]//|/\\|}"
        headers=JSON
        [[ "$ser" == rocketmq ]] && headers=ROCKETMQ
        echo "| \`$name\`: ${title//|/\\|} | $headers | $result | $(cat "$WORKDIR/out/$id.secs") s |"
    done <"$plan"
    if [[ -f "$HERE/NOTES.md" ]]; then
        echo
        cat "$HERE/NOTES.md"
    fi
} >"$RESULTS"
log "results written to $RESULTS ($passed passed, $failed failed)"

if ((${#failed_baseline[@]})); then
    log "rows that passed before now fail: ${failed_baseline[*]}"
    exit 1
fi
exit 0
