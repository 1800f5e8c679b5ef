#!/usr/bin/env bash
# The web console in a real browser (headless Chromium driven by Playwright):
#
#   1. `comet serve` on ephemeral ports, with a read-only account and a sample every second; the
#      console's generated password is read from its stderr (printed once at first start).
#   2. The CLI prepares a topic with messages, a group that consumed them and went offline, a
#      dead-letter topic, and a message sent and consumed with message trace on.
#   3. interop/console/browser.mjs logs in, loads every page without a browser console error,
#      creates a topic, resets the offline group's offsets by time, sends messages whose body, key
#      and property hold script tags (they must show as text, and no dialog may fire), re-sends a
#      dead letter, shows the message trace, changes a broker setting (a refused key shows the
#      broker's words), and writes a screenshot of each page to $OUT. Skip backlog, reset and
#      resend must ask first; a refused confirmation changes nothing. Then the read-only account
#      visits every page and must see no write control.
#   4. The CLI checks each write: `comet topic list`, `comet group progress`, `comet msg by-key`,
#      `comet broker-config get`.
#   5. `comet cluster` (one name server, two groups of a master and a slave, some load): the
#      browser logs in with the address and password the cluster printed and lists the brokers;
#      broker-a-0 is killed (the console, in the cluster's own process, keeps answering), then
#      the name server (every page shows the error and the age of its data; no uncaught error).
#      The cluster must report both deaths, and no other.
#   6. Apache RocketMQ 5.3.3 (interop/apache/run.sh) with `comet console -n <its name server>`:
#      the browser loads the read pages and creates a topic, which `comet topic list` then shows.
#      CONSOLE_APACHE=0 skips this part.
#
#   interop/console/run.sh
#
# Installs chromium and nodejs/npm with apt-get when missing (as root) and playwright-core into
# ~/.cache/comet-console-test (never into the repo). Env: COMET_BIN [target/debug/comet], OUT
# [target/console-screenshots; the screenshots], CONSOLE_WAIT [60] seconds any wait may take,
# KEEP_WORKDIR=1 keeps the logs.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
APACHE="$ROOT/interop/apache/run.sh"
COMET_BIN="${COMET_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/comet}"
WAIT="${CONSOLE_WAIT:-60}"
PLAYWRIGHT_VERSION=1.64.1
PLAYWRIGHT_DIR="$HOME/.cache/comet-console-test"
WORK="$(mktemp -d -t comet-console.XXXXXX)"
OUT="${OUT:-${CARGO_TARGET_DIR:-$ROOT/target}/console-screenshots}"
T0=$SECONDS

log() { echo "== console: $* ($((SECONDS - T0))s)"; }
die() { echo "console: $*" >&2; exit 1; }

SERVE_PID=
CONSOLE_PID=
CLUSTER_PID=
LOAD_PIDS=()
apache_started=0
cleanup() {
    for pid in "${LOAD_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    [[ -n $SERVE_PID ]] && kill -TERM "$SERVE_PID" 2>/dev/null && wait "$SERVE_PID" 2>/dev/null || true
    [[ -n $CLUSTER_PID ]] && kill -TERM "$CLUSTER_PID" 2>/dev/null && wait "$CLUSTER_PID" 2>/dev/null || true
    [[ -n $CONSOLE_PID ]] && kill -TERM "$CONSOLE_PID" 2>/dev/null && wait "$CONSOLE_PID" 2>/dev/null || true
    ((apache_started)) && "$APACHE" kill "$WORK/apache" >/dev/null 2>&1 || true
    if [[ "${KEEP_WORKDIR:-0}" == 1 ]]; then
        echo "console: work directory kept: $WORK"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

ensure_tools() {
    local missing=()
    [[ -x /usr/bin/chromium ]] || missing+=(chromium)
    command -v node >/dev/null || missing+=(nodejs)
    command -v npm >/dev/null || missing+=(npm)
    if ((${#missing[@]})); then
        echo "console: installing ${missing[*]} (apt-get)"
        local sudo=()
        [[ $(id -u) -eq 0 ]] || sudo=(sudo)
        "${sudo[@]}" apt-get update -q
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q "${missing[@]}"
    fi
    if [[ ! -f "$PLAYWRIGHT_DIR/node_modules/playwright-core/package.json" ]] ||
        ! grep -q "\"version\": \"$PLAYWRIGHT_VERSION\"" "$PLAYWRIGHT_DIR/node_modules/playwright-core/package.json"; then
        mkdir -p "$PLAYWRIGHT_DIR"
        (cd "$PLAYWRIGHT_DIR" && npm install --no-audit --no-fund --silent "playwright-core@$PLAYWRIGHT_VERSION")
    fi
}

json_field() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# Polls `$@` every half second until it succeeds; fails the suite after $WAIT seconds.
wait_for() {
    local what=$1 deadline=$((SECONDS + WAIT))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || die "timed out after ${WAIT}s waiting for $what"
        sleep 0.5
    done
}

ensure_tools
[[ -x "$COMET_BIN" ]] || die "no comet binary at $COMET_BIN (cargo build -p comet)"
mkdir -p "$OUT"
rm -f "$OUT"/*.png

log "comet serve (console on, ephemeral ports)"
VIEWER_PASSWORD=viewer-password-1
"$COMET_BIN" serve --namesrv-listen 127.0.0.1:0 --broker-listen 127.0.0.1:0 --data-dir "$WORK/data" \
    --set consoleReadOnlyPassword=$VIEWER_PASSWORD --set consoleSampleIntervalSecs=1 \
    --ready-file "$WORK/ready.json" >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
wait_for "comet serve" test -s "$WORK/ready.json"
NAMESRV="$(json_field "$WORK/ready.json" namesrv)"
BROKER="$(json_field "$WORK/ready.json" broker)"
CONSOLE="$(json_field "$WORK/ready.json" console)"
PASSWORD="$(sed -n "s/.*generated password for user 'admin': \([^ ]*\) .*/\1/p" "$WORK/serve.log" | head -1)"
[[ -n $PASSWORD ]] || die "no generated password in the serve log"
export NAMESRV_ADDR=$NAMESRV

log "cluster data: ConsoleOrders, an offline group, a DLQ topic"
"$COMET_BIN" topic create ConsoleOrders -b "$BROKER" -r 2 -w 2 >/dev/null
"$COMET_BIN" topic create '%DLQ%console_dead' -b "$BROKER" -r 1 -w 1 >/dev/null
"$COMET_BIN" produce ConsoleOrders --count 24 --body '{"orderId": {i}, "status": "created", "amount": 12.5}' \
    --tags created --keys 'order order-{i}' >/dev/null
timeout "$WAIT" "$COMET_BIN" consume ConsoleOrders -g console_offline --from first --count 24 >/dev/null
progress_lag() { "$COMET_BIN" group progress console_offline -t ConsoleOrders --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["diffTotal"])'; }
lag_is() { [[ "$(progress_lag 2>/dev/null)" == "$1" ]]; }
wait_for "console_offline's committed offsets" lag_is 0

log "a message sent and consumed with message trace on"
"$COMET_BIN" topic create ConsoleTraced -b "$BROKER" -r 1 -w 1 >/dev/null
TRACED_ID="$("$COMET_BIN" produce ConsoleTraced --count 1 --body "traced order" --keys traced-1 --trace --json |
    python3 -c 'import json, sys; print(json.loads(sys.stdin.readline())["msgId"])')"
timeout "$WAIT" "$COMET_BIN" consume ConsoleTraced -g console_traced --from first --count 1 --trace >/dev/null
traced() { grep -q SubAfter <<<"$("$COMET_BIN" msg trace --id "$TRACED_ID" --json 2>/dev/null)"; }
wait_for "the trace records of $TRACED_ID" traced

log "load for the charts: ConsoleLoad produced and consumed (group console_load)"
"$COMET_BIN" topic create ConsoleLoad -b "$BROKER" -r 4 -w 4 >/dev/null
"$COMET_BIN" bench produce -t ConsoleLoad --no-create -g console_load_producer --rate 120 -d 600 --threads 1 \
    >"$WORK/load-produce.log" 2>&1 &
LOAD_PIDS+=($!)
"$COMET_BIN" bench consume -t ConsoleLoad -g console_load -d 600 --threads 1 >"$WORK/load-consume.log" 2>&1 &
LOAD_PIDS+=($!)
online() { grep -q "$1" <<<"$("$COMET_BIN" group connections console_load --json 2>/dev/null)"; }
wait_for "console_load's consumer online" online clientId

log "browser"
CONSOLE_URL="http://$CONSOLE" CONSOLE_PASSWORD="$PASSWORD" VIEWER_PASSWORD="$VIEWER_PASSWORD" \
    TRACED_ID="$TRACED_ID" BROKER_ADDR="$BROKER" OUT="$OUT" PLAYWRIGHT_DIR="$PLAYWRIGHT_DIR" \
    timeout 300 node "$HERE/browser.mjs"

log "the writes, seen through the CLI"
grep -qx 'ConsoleCreated' <<<"$("$COMET_BIN" topic list)" || die "comet topic list lacks ConsoleCreated"
# The reset to a time before the first message puts every queue back to its start: the 24
# consumed messages (and the one the browser sent since) are lag again.
lag_at_least() { local lag; lag="$(progress_lag 2>/dev/null)" && ((lag >= 24)); }
wait_for "console_offline's reset offsets" lag_at_least
resent() { grep -q 'dead letter body' <<<"$("$COMET_BIN" msg by-key ConsoleOrders dlq-key-1 --json 2>/dev/null)"; }
wait_for "the re-sent dead letter on ConsoleOrders" resent
for pid in "${LOAD_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
LOAD_PIDS=()
grep -q '"console"' "$WORK/ready.json" || die "the ready file does not name the console"
permission="$("$COMET_BIN" broker-config get -b "$BROKER" brokerPermission --json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]]["brokerPermission"])' "$BROKER")"
[[ $permission == 4 ]] || die "the broker reads brokerPermission=$permission after the console set 4"
kill -TERM "$SERVE_PID" && wait "$SERVE_PID" || true
SERVE_PID=

log "comet cluster: the console outlives its broker; a name-server outage shows on every page"
"$COMET_BIN" cluster --dir "$WORK/cluster" --base-port 0 --namesrvs 1 --groups 2 --slaves 1 \
    --set consoleSampleIntervalSecs=1 >"$WORK/cluster.out" 2>"$WORK/cluster.err" &
CLUSTER_PID=$!
wait_for "the cluster's console line" grep -q '^console: http://' "$WORK/cluster.out"
CLUSTER_NAMESRV="$(json_field "$WORK/cluster/cluster.json" namesrvAddr)"
"$COMET_BIN" bench produce -n "$CLUSTER_NAMESRV" -t OutageLoad --queues 2 --rate 60 -d 600 --threads 1 \
    >"$WORK/outage-load.log" 2>&1 &
LOAD_PIDS+=($!)
cluster_field() {
    python3 -c 'import json, sys
doc = json.load(open(sys.argv[1]))
print({"url": doc["console"]["url"], "password": doc["console"]["password"],
       "namesrv": doc["namesrvs"][0]["pid"], "broker": doc["brokers"][0]["pid"]}[sys.argv[2]])' "$WORK/cluster/cluster.json" "$1"
}
CLUSTER_URL="$(cluster_field url)"
grep -qF "console: $CLUSTER_URL (user admin, password $(cluster_field password))" "$WORK/cluster.out" ||
    die "comet cluster did not print the console's address and password"
MODE=outage CONSOLE_URL="${CLUSTER_URL%/}" CONSOLE_PASSWORD="$(cluster_field password)" \
    BROKER_PID="$(cluster_field broker)" NAMESRV_PID="$(cluster_field namesrv)" OUT="$OUT" PLAYWRIGHT_DIR="$PLAYWRIGHT_DIR" \
    timeout 200 node "$HERE/browser.mjs"
reported() { grep -q "$1 (pid [0-9]*) exited on its own" "$WORK/cluster.err"; }
wait_for "the report of broker-a-0's death" reported broker-a-0
wait_for "the report of namesrv-0's death" reported namesrv-0
for alive in broker-a-1 broker-b-0 broker-b-1; do
    reported "$alive" && die "comet cluster reported $alive, which did not die"
done
for pid in "${LOAD_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
LOAD_PIDS=()
kill -TERM "$CLUSTER_PID" && wait "$CLUSTER_PID" || true
CLUSTER_PID=

if [[ "${CONSOLE_APACHE:-1}" != 0 ]]; then
    log "Apache RocketMQ 5.3.3 and comet console -n"
    apache_started=1
    "$APACHE" start "$WORK/apache" >"$WORK/apache-start.out" 2>&1 || die "Apache RocketMQ did not start"
    APACHE_NAMESRV="$(sed -n 's/^NAMESRV_ADDR=//p' "$WORK/apache/env")"
    PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    "$COMET_BIN" console -n "$APACHE_NAMESRV" --listen "127.0.0.1:$PORT" --data-dir "$WORK/data/apache-console" \
        --set consolePassword=apache-console-pw >"$WORK/console-apache.log" 2>&1 &
    CONSOLE_PID=$!
    wait_for "comet console" python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$PORT"
    MODE=apache CONSOLE_URL="http://127.0.0.1:$PORT" CONSOLE_PASSWORD=apache-console-pw OUT="$OUT" \
        PLAYWRIGHT_DIR="$PLAYWRIGHT_DIR" timeout 120 node "$HERE/browser.mjs"
    grep -qx 'ConsoleApacheCreated' <<<"$("$COMET_BIN" topic list -n "$APACHE_NAMESRV")" ||
        die "Apache's name server does not list ConsoleApacheCreated"
fi
ls "$OUT"/*.png >/dev/null || die "no screenshot"
log "ok: $(ls "$OUT" | grep -c png) screenshots in $OUT"
