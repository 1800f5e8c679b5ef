#!/usr/bin/env bash
# Regenerates the golden fixtures in crates/protocol/tests/fixtures/ from real peers:
#   1. starts the Apache RocketMQ name server and broker (interop/apache/run.sh) on 127.0.0.1, the
#      broker advertising brokerIP1=127.0.0.2 so that clients reach it through a proxy;
#   2. for each client (Java 4.9.8 and 5.3.3, each with JSON and ROCKETMQ headers; Go 2.1.2) starts
#      proxy.py on 127.0.0.2 (name server port and broker port, forwarding to 127.0.0.1), runs the
#      client program against the proxied name server, stops the proxy;
#   3. keeps the interesting frames (select_frames.py) in crates/protocol/tests/fixtures/<peer>/.
# The broker's own traffic to the name server goes straight to 127.0.0.1 and is not recorded.
#
#   capture.sh [WORKDIR]    (default: a fresh temp dir; raw recordings and logs stay there)
# Env: JAVA_CLIENT_VERSIONS ["4.9.8 5.3.3"], GO_CLIENT_VERSION [v2.1.2, must match go/go.mod],
#      PEERS [all] to capture only some, e.g. PEERS="go-2.1.2 java-5.3.3-json".
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
FIXTURES="$ROOT/crates/protocol/tests/fixtures"
RUN="$ROOT/interop/apache/run.sh"
WORK="${1:-$(mktemp -d /tmp/comet-capture.XXXXXX)}"
mkdir -p "$WORK/home"
WORK="$(cd "$WORK" && pwd)"
JAVA_CLIENT_VERSIONS="${JAVA_CLIENT_VERSIONS:-4.9.8 5.3.3}"
GO_CLIENT_VERSION="${GO_CLIENT_VERSION:-v2.1.2}"
PROXY_IP=127.0.0.2
PROXY_START_TIMEOUT=20

log() { echo "capture.sh: $*" >&2; }

PROXY_PID=
cleanup() {
    if [[ -n "$PROXY_PID" ]]; then
        kill -TERM "$PROXY_PID" 2>/dev/null || true
        wait "$PROXY_PID" 2>/dev/null || true
    fi
    "$RUN" stop "$WORK/apache" || true
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

BROKER_IP=$PROXY_IP "$RUN" start "$WORK/apache"
# shellcheck disable=SC1091
source "$WORK/apache/env"
NAMESRV_PORT="${NAMESRV_ADDR##*:}"
BROKER_PORT="${BROKER_ADDR##*:}"
APACHE_VERSION="$ROCKETMQ_VERSION"

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
    done
done
go_tag="${GO_CLIENT_VERSION#v}"
HOME="$WORK/home" capture "go-$go_tag" "GoldenGo${go_tag//./}" "$WORK/capture-go"

{
    echo "apache_rocketmq=$APACHE_VERSION"
    echo "java_clients=$JAVA_CLIENT_VERSIONS"
    echo "go_client=$GO_CLIENT_VERSION"
    echo "jdk=$(java -version 2>&1 | head -1)"
    echo "go=$(go version)"
} >"$WORK/versions.txt"
log "done; raw recordings and logs in $WORK; versions: $(tr '\n' ';' <"$WORK/versions.txt")"
