#!/usr/bin/env bash
# Regenerates the golden fixtures in crates/protocol/tests/fixtures/ from real peers:
#   1. starts the Apache RocketMQ name server and broker (interop/apache/run.sh) on 127.0.0.1, the
#      broker advertising brokerIP1=127.0.0.2 so that clients reach it through a proxy, and checking
#      transactions every TX_CHECK_INTERVAL_MS (half messages older than TX_TIMEOUT_MS);
#   2. for each client (Java 4.9.8 and 5.3.3, each with JSON and ROCKETMQ headers; Go 2.1.2) starts
#      proxy.py on 127.0.0.2 (name server port and broker port, forwarding to 127.0.0.1), runs the
#      client program against the proxied name server, stops the proxy; then the same once more
#      per client with its transaction program (peers `<client>-tx`: half sends, END_TRANSACTION,
#      the broker's CHECK_TRANSACTION_STATE and the client's answer);
#   3. keeps the interesting frames (select_frames.py) in crates/protocol/tests/fixtures/<peer>/.
# The broker's own traffic to the name server goes straight to 127.0.0.1 and is not recorded.
#
#   capture.sh [WORKDIR]    (default: a fresh temp dir; raw recordings and logs stay there)
# Env: JAVA_CLIENT_VERSIONS ["4.9.8 5.3.3"], GO_CLIENT_VERSION [v2.1.2, must match go/go.mod],
#      PEERS [all] to capture only some, e.g. PEERS="go-2.1.2 java-5.3.3-json-tx";
#      TARGET [apache] or `comet`: record the same clients against `comet serve` (COMET_BIN
#      [target/debug/comet]) instead, writing the selected frames to WORKDIR/fixtures/<peer>/
#      (never into the repository) so they can be diffed against Apache's (compare.py).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
RUN="$ROOT/interop/apache/run.sh"
WORK="${1:-$(mktemp -d /tmp/comet-capture.XXXXXX)}"
mkdir -p "$WORK/home"
WORK="$(cd "$WORK" && pwd)"
TARGET="${TARGET:-apache}"
COMET_BIN="${COMET_BIN:-$ROOT/target/debug/comet}"
case "$TARGET" in
apache) FIXTURES="$ROOT/crates/protocol/tests/fixtures" ;;
comet) FIXTURES="$WORK/fixtures" ;;
*) echo "capture.sh: TARGET must be apache or comet" >&2; exit 2 ;;
esac
# The broker checks pending transactions this often, once a half message is this old (ms): short,
# so that the transaction programs see a CHECK_TRANSACTION_STATE within seconds. Apache 5.x writes
# the op records that end a transaction in batches (transactionOpBatchInterval, 3 s by default); a
# batch interval above the timeout makes it check (and re-check, forever) transactions that the
# producer had already ended, so Apache's is shortened well below the timeout.
TX_CHECK_INTERVAL_MS=2000
TX_TIMEOUT_MS=1000
APACHE_TX_OP_BATCH_INTERVAL_MS=200
JAVA_CLIENT_VERSIONS="${JAVA_CLIENT_VERSIONS:-4.9.8 5.3.3}"
GO_CLIENT_VERSION="${GO_CLIENT_VERSION:-v2.1.2}"
PROXY_IP=127.0.0.2
PROXY_START_TIMEOUT=20
COMET_START_TIMEOUT=60

log() { echo "capture.sh: $*" >&2; }

PROXY_PID=
COMET_PID=
cleanup() {
    if [[ -n "$PROXY_PID" ]]; then
        kill -TERM "$PROXY_PID" 2>/dev/null || true
        wait "$PROXY_PID" 2>/dev/null || true
    fi
    if [[ -n "$COMET_PID" ]]; then
        kill -TERM "$COMET_PID" 2>/dev/null || true
        wait "$COMET_PID" 2>/dev/null || true
    fi
    if [[ $TARGET == apache ]]; then
        "$RUN" stop "$WORK/apache" || true
    fi
}
trap cleanup EXIT

wanted() { [[ -z "${PEERS:-}" || " $PEERS " == *" $1 "* ]]; }

# Build the clients first, so that a build failure does not leave servers running for nothing.
for v in $JAVA_CLIENT_VERSIONS; do
    log "resolving Java client $v"
    mvn -q -B -f "$HERE/java/pom.xml" -Drocketmq.client.version="$v" \
        compile dependency:build-classpath -Dmdep.outputFile="$HERE/java/target/$v/classpath.txt"
done
log "building Go client ($GO_CLIENT_VERSION)"
grep -q "rocketmq-client-go/v2 $GO_CLIENT_VERSION" "$HERE/go/go.mod" \
    || { log "go/go.mod does not pin rocketmq-client-go $GO_CLIENT_VERSION"; exit 1; }
(cd "$HERE/go" && go build -o "$WORK/capture-go" .)

if [[ $TARGET == apache ]]; then
    BROKER_EXTRA_CONF="$(printf 'transactionCheckInterval=%s\ntransactionTimeOut=%s\ntransactionOpBatchInterval=%s\n%s' \
        "$TX_CHECK_INTERVAL_MS" "$TX_TIMEOUT_MS" "$APACHE_TX_OP_BATCH_INTERVAL_MS" "${BROKER_EXTRA_CONF:-}")" \
        BROKER_IP=$PROXY_IP "$RUN" start "$WORK/apache"
    # shellcheck disable=SC1091
    source "$WORK/apache/env"
    NAMESRV_PORT="${NAMESRV_ADDR##*:}"
    BROKER_PORT="${BROKER_ADDR##*:}"
    SERVER_VERSION="Apache RocketMQ $ROCKETMQ_VERSION"
else
    [[ -x "$COMET_BIN" ]] || { log "no comet binary at $COMET_BIN (set COMET_BIN)"; exit 1; }
    ready="$WORK/comet-ready.json"
    rm -f "$ready"
    "$COMET_BIN" serve --namesrv-listen 127.0.0.1:0 --broker-listen 127.0.0.1:0 --data-dir "$WORK/comet-data" \
        --ready-file "$ready" --set brokerIP1=$PROXY_IP \
        --set transactionCheckInterval=$TX_CHECK_INTERVAL_MS --set transactionTimeOut=$TX_TIMEOUT_MS \
        >"$WORK/comet.log" 2>&1 &
    COMET_PID=$!
    deadline=$((SECONDS + COMET_START_TIMEOUT))
    until [[ -s "$ready" ]]; do
        kill -0 "$COMET_PID" 2>/dev/null || { log "comet serve exited: $(tail -5 "$WORK/comet.log")"; exit 1; }
        ((SECONDS < deadline)) || { log "comet serve not ready"; exit 1; }
        sleep 0.1
    done
    NAMESRV_PORT="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["namesrv"].rsplit(":",1)[1])' "$ready")"
    BROKER_PORT="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["broker"].rsplit(":",1)[1])' "$ready")"
    BROKER_NAME="$("$COMET_BIN" serve --print-config | sed -n 's/^brokerName=//p')"
    SERVER_VERSION="comet serve ($COMET_BIN)"
fi

start_proxy() { # start_proxy <raw dir>
    rm -rf "$1"
    python3 "$HERE/proxy.py" --out "$1" \
        --map "namesrv=$PROXY_IP:$NAMESRV_PORT=127.0.0.1:$NAMESRV_PORT" \
        --map "broker=$PROXY_IP:$BROKER_PORT=127.0.0.1:$BROKER_PORT" >"$1.proxy.log" 2>&1 &
    PROXY_PID=$!
    local deadline=$((SECONDS + PROXY_START_TIMEOUT))
    until grep -q "proxy ready" "$1.proxy.log" 2>/dev/null; do
        kill -0 "$PROXY_PID" 2>/dev/null || { log "proxy died: $(cat "$1.proxy.log")"; exit 1; }
        ((SECONDS < deadline)) || { log "proxy not ready"; exit 1; }
        sleep 0.1
    done
}

stop_proxy() {
    kill -TERM "$PROXY_PID"
    wait "$PROXY_PID" || true
    PROXY_PID=
}

capture() { # capture <peer> <topic> <command...>
    local peer=$1 topic=$2
    shift 2
    wanted "$peer" || return 0
    local raw="$WORK/raw/$peer"
    mkdir -p "$WORK/raw"
    start_proxy "$raw"
    log "capturing $peer (topic $topic)"
    if ! "$@" "$PROXY_IP:$NAMESRV_PORT" "$topic" "$BROKER_NAME" >"$raw.client.log" 2>&1; then
        log "$peer client failed; last lines of $raw.client.log:"
        tail -20 "$raw.client.log" >&2
        exit 1
    fi
    stop_proxy
    python3 "$HERE/select_frames.py" "$raw" "$FIXTURES/$peer"
}

for v in $JAVA_CLIENT_VERSIONS; do
    cp="$HERE/java/target/$v/classes:$(cat "$HERE/java/target/$v/classpath.txt")"
    tag="${v//./}"
    for ser in json rocketmq; do
        props=(-Dcom.rocketmq.sendMessageWithVIPChannel=false -Drocketmq.client.logRoot="$WORK/clientlogs"
            -Duser.home="$WORK/home" -Xmx256m)
        [[ $ser == rocketmq ]] && props+=(-Drocketmq.serialize.type=ROCKETMQ)
        topic="GoldenJava${tag}${ser^}"
        capture "java-$v-$ser" "$topic" java "${props[@]}" -cp "$cp" dev.comet.capture.CaptureClient
        capture "java-$v-$ser-tx" "GoldenTxJava${tag}${ser^}" java "${props[@]}" -cp "$cp" \
            dev.comet.capture.TxCaptureClient
    done
done
go_tag="${GO_CLIENT_VERSION#v}"
HOME="$WORK/home" capture "go-$go_tag" "GoldenGo${go_tag//./}" "$WORK/capture-go"
HOME="$WORK/home" capture "go-$go_tag-tx" "GoldenTxGo${go_tag//./}" "$WORK/capture-go" -tx

{
    echo "server=$SERVER_VERSION"
    echo "broker_conf=transactionCheckInterval=$TX_CHECK_INTERVAL_MS transactionTimeOut=$TX_TIMEOUT_MS (Apache: transactionOpBatchInterval=$APACHE_TX_OP_BATCH_INTERVAL_MS)"
    echo "java_clients=$JAVA_CLIENT_VERSIONS"
    echo "go_client=$GO_CLIENT_VERSION"
    echo "jdk=$(java -version 2>&1 | head -1)"
    echo "go=$(go version)"
} >"$WORK/versions.txt"
log "done; raw recordings and logs in $WORK; versions: $(tr '\n' ';' <"$WORK/versions.txt")"
