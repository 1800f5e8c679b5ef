#!/usr/bin/env bash
# The official RocketMQ 5.x Rust SDK (crate `rocketmq` 5.0.0, apache/rocketmq-clients) against a
# gRPC endpoint: Apache RocketMQ 5.3.3's proxy in local mode first (APACHE=1), then `comet serve`.
#
#   1. Topics: RustSdk and RustSdkSimple (NORMAL), RustSdkFifo (FIFO), RustSdkDelay (DELAY),
#      4 queues each (`comet topic create --message-type`).
#   2. Producer rows: the SDK sends COUNT messages (tag TagA, two keys, property seq, numbered
#      bodies; `src/main.rs`) as normal messages, as FIFO messages of one message group and as
#      timer messages due DELAY_MS after sending, over plaintext (the SDK's TLS option connects
#      to neither target, see src/main.rs); `comet consume` (the remoting consumer) reads each
#      topic and check.py requires every message exactly once with body, tag, keys, property and
#      the receipt's message id (FIFO: the group as __SHARDINGKEY, one queue, send order; timer:
#      TIMER_DELIVER_MS, not stored before its time).
#   3. Simple-consumer row: the SDK sends COUNT messages, its SimpleConsumer receives and acks
#      them; check.py requires each once, on its first delivery attempt, with its fields.
#   4. With both targets: Comet's stored property names must equal Apache's.
#
#   interop/rust-sdk/run.sh
#
# Needs cargo, python3 and (APACHE=1) java 17+ and mvn. Env: COMET_BIN [target/debug/comet,
# built if missing], COUNT [20], DELAY_MS [3000], APACHE [1], JAVA_HEAP [512m], KEEP_WORKDIR=1
# keeps logs and outputs. The SDK builds in interop/rust-sdk/target, or in
# $CARGO_TARGET_DIR/rust-sdk when CARGO_TARGET_DIR is set.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
COMET_BIN="${COMET_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/comet}"
SDK_TARGET="${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/rust-sdk}"
SDK_TARGET="${SDK_TARGET:-$HERE/target}"
SDK_BIN="$SDK_TARGET/debug/rust-sdk"
COUNT="${COUNT:-20}"
DELAY_MS="${DELAY_MS:-3000}"
APACHE="${APACHE:-1}"
WAIT=90
WORK="$(mktemp -d -t comet-rust-sdk.XXXXXX)"
T0=$SECONDS

log() { echo "== rust-sdk: $* ($((SECONDS - T0))s)"; }
die() { echo "rust-sdk: $*" >&2; exit 1; }

PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    if [[ -n "${KEEP_WORKDIR:-}" ]]; then
        echo "rust-sdk: work directory kept: $WORK"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

# shellcheck source=interop/lib/apache_proxy.sh
source "$HERE/../lib/apache_proxy.sh"

# create_topics <namesrv> <broker>: the suite's four topics.
create_topics() {
    local t topic type
    for t in "RustSdk NORMAL" "RustSdkSimple NORMAL" "RustSdkFifo FIFO" "RustSdkDelay DELAY"; do
        read -r topic type <<<"$t"
        "$COMET_BIN" topic create "$topic" -n "$1" -b "$2" -r 4 -w 4 --message-type "$type" \
            >/dev/null || die "topic $topic could not be created at $2"
    done
}

# produce_and_check <namesrv> <grpc> <topic> <name> <mode> [sdk option...]: the SDK produces
# COUNT messages, the remoting consumer reads them and check.py checks them; <name> names the
# row's files.
produce_and_check() {
    local namesrv="$1" grpc="$2" topic="$3" name="$4" mode="$5"
    shift 5
    local fifo=()
    [[ "$mode" != produce-fifo ]] || fifo=(--fifo RustSdkGroup)
    log "$name: $mode of $COUNT messages to $grpc $*"
    timeout 120 "$SDK_BIN" "$grpc" "$topic" "$COUNT" "$mode" "$@" \
        >"$WORK/$name.sent" 2>"$WORK/$name.producer.log" ||
        { tail -20 "$WORK/$name.producer.log" >&2; die "$name: the Rust SDK producer failed"; }
    timeout 120 "$COMET_BIN" consume "$topic" -n "$namesrv" -g "RustSdkCheck$topic" --from first \
        --count "$COUNT" --idle 30 --json >"$WORK/$name.consumed" 2>"$WORK/$name.consumer.log" ||
        { tail -20 "$WORK/$name.consumer.log" >&2; die "$name: the remoting consumer failed"; }
    python3 "$HERE/check.py" consumed "$COUNT" "$WORK/$name.sent" "$WORK/$name.consumed" \
        "${fifo[@]}" || die "$name: messages differ"
}

# simple_consume_and_check <grpc> <name>: the SDK produces COUNT messages and its
# SimpleConsumer receives and acks them.
simple_consume_and_check() {
    local grpc="$1" name="$2"
    log "$name: produce $COUNT messages, then SimpleConsumer receive and ack"
    timeout 120 "$SDK_BIN" "$grpc" RustSdkSimple "$COUNT" produce \
        >"$WORK/$name.sent" 2>"$WORK/$name.producer.log" ||
        { tail -20 "$WORK/$name.producer.log" >&2; die "$name: the Rust SDK producer failed"; }
    if ! timeout 120 "$SDK_BIN" "$grpc" RustSdkSimple "$COUNT" simple-consume --deadline-s 60 \
        >"$WORK/$name.received" 2>"$WORK/$name.consumer.log"; then
        tail -20 "$WORK/$name.consumer.log" >&2
        die "$name: the SimpleConsumer did not ack $COUNT messages"
    fi
    python3 "$HERE/check.py" received "$COUNT" "$WORK/$name.sent" "$WORK/$name.received" ||
        die "$name: messages differ"
}

# rows <namesrv> <broker> <grpc> <target>: every row against one target.
rows() {
    local namesrv="$1" broker="$2" grpc="$3" target="$4"
    create_topics "$namesrv" "$broker"
    produce_and_check "$namesrv" "$grpc" RustSdk "$target" produce
    produce_and_check "$namesrv" "$grpc" RustSdkFifo "$target-fifo" produce-fifo
    produce_and_check "$namesrv" "$grpc" RustSdkDelay "$target-delay" produce-delay \
        --delay-ms "$DELAY_MS"
    simple_consume_and_check "$grpc" "$target-simple"
}

run_apache() {
    log "apache: starting Apache RocketMQ 5.3.3's name server and proxy (local mode)"
    # shellcheck disable=SC2119 # no extra broker settings
    apache_proxy_start
    rows "$APACHE_NAMESRV" "$APACHE_BROKER" "$APACHE_GRPC" apache
}

run_comet() {
    log "comet: starting comet serve"
    "$COMET_BIN" serve --namesrv-listen 127.0.0.1:0 --broker-listen 127.0.0.1:0 \
        --data-dir "$WORK/comet-data" --ready-file "$WORK/ready.json" >"$WORK/comet.log" 2>&1 &
    PIDS+=($!)
    local deadline=$((SECONDS + WAIT))
    until [[ -s "$WORK/ready.json" ]]; do
        ((SECONDS < deadline)) || die "comet serve wrote no ready file"
        sleep 0.2
    done
    field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$WORK/ready.json" "$1"; }
    rows "$(field namesrv)" "$(field broker)" "$(field grpc)" comet
}

log "building the Rust SDK runner (rocketmq 5.0.0)"
(cd "$HERE" && CARGO_TARGET_DIR="$SDK_TARGET" cargo build -q --locked) ||
    die "cargo build of interop/rust-sdk failed"
[[ -x "$COMET_BIN" ]] || (cd "$ROOT" && cargo build -q -p comet)
if [[ "$APACHE" != 0 ]]; then
    run_apache
fi
run_comet
if [[ "$APACHE" != 0 ]]; then
    for row in "" -fifo; do
        python3 "$HERE/check.py" keys "$WORK/comet$row.consumed" "$WORK/apache$row.consumed" ||
            die "Comet and Apache's proxy store different properties (${row#-}${row:+ }messages)"
    done
    python3 "$HERE/check.py" keys "$WORK/comet-delay.consumed" "$WORK/apache-delay.consumed" ||
        die "Comet and Apache's proxy store different properties on timer messages"
fi
log "passed"
