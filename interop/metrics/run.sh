#!/usr/bin/env bash
# The metrics endpoint as operators use it, checked with Prometheus' own tools and against Apache.
#
#   1. `comet serve` (metrics on by default) under a small load: a producer running, a consumer
#      group online, and a group that consumed part of a topic and went offline.
#   2. promtool reads the scrape (`promtool check metrics`); its only findings may be the lint
#      advice to use seconds on the families that carry Apache's `_milliseconds` names.
#   3. Python's prometheus_client parser reads it, and every series has cluster, node_type and
#      node_id.
#   4. A real Prometheus server scrapes it every second: its API shows the target up and the
#      series present, and the lag of the offline group rises by exactly the messages produced
#      to its topic while it is offline.
#   5. Apache RocketMQ 5.3.3 with metricsExporterType=PROM under the same load is scraped, and the
#      metric families and label keys of both are compared with the table in docs/metrics.md
#      (interop/metrics/compare.py; UPDATE_DOCS=1 rewrites the table from this run).
#
#   interop/metrics/run.sh
#
# Needs prometheus, promtool, curl and Debian's python3-prometheus-client; installs them with apt-get
# when missing (as root). Env: COMET_BIN [target/debug/comet], METRICS_WAIT [60] seconds any wait
# may take, KEEP_WORKDIR=1 keeps scrapes and logs. Knobs of interop/apache/run.sh pass through.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
APACHE="$ROOT/interop/apache/run.sh"
COMET_BIN="${COMET_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/comet}"
WAIT="${METRICS_WAIT:-60}"
DOC="$ROOT/docs/metrics.md"
# Debian's interpreter: the one python3-prometheus-client installs into.
PY=/usr/bin/python3
WORK="$(mktemp -d -t comet-metrics.XXXXXX)"
T0=$SECONDS

log() { echo "== metrics: $* ($((SECONDS - T0))s)"; }
die() { echo "metrics: $*" >&2; exit 1; }

PIDS=()
SERVE_PID=""
apache_started=0
cleanup() {
    local pid
    for pid in "${PIDS[@]}" ${SERVE_PID:+"$SERVE_PID"}; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}" ${SERVE_PID:+"$SERVE_PID"}; do wait "$pid" 2>/dev/null || true; done
    ((apache_started)) && "$APACHE" kill "$WORK/rmq" >/dev/null 2>&1 || true
    if [[ "${KEEP_WORKDIR:-0}" == 1 ]]; then
        echo "metrics: work directory kept: $WORK"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

ensure_tools() {
    if command -v prometheus >/dev/null && command -v promtool >/dev/null && command -v curl >/dev/null &&
        "$PY" -c 'import prometheus_client' 2>/dev/null; then
        return 0
    fi
    echo "metrics: installing prometheus python3-prometheus-client curl (apt-get)"
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update -q
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q prometheus python3-prometheus-client curl
}

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
json_field() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# Polls `$@` every half second until it succeeds; fails the suite after $WAIT seconds.
wait_for() {
    local what=$1 deadline=$((SECONDS + WAIT))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || die "timed out after ${WAIT}s waiting for $what"
        sleep 0.5
    done
}

scrape() { curl -sf "http://$1/metrics"; }
has_series() { grep -q "^$2{.*$3" <<<"$(scrape "$1")"; }

# The load on broker $2 behind name server $1, with metrics at $3: a producer sending all along,
# a group online, and a group that consumed all of MetricsLag and left (its lag is served by
# Comet only: Apache reports the lag of online groups).
start_load() {
    local namesrv=$1 broker=$2 metrics=$3 tag=$4
    "$COMET_BIN" topic create MetricsLag -n "$namesrv" -b "$broker" -r 2 -w 2 >/dev/null
    "$COMET_BIN" topic create MetricsLoad -n "$namesrv" -b "$broker" -r 2 -w 2 >/dev/null
    "$COMET_BIN" produce MetricsLag -n "$namesrv" --count 20 --body "lag {i}" >/dev/null
    timeout "$WAIT" "$COMET_BIN" consume MetricsLag -n "$namesrv" -g metrics_offline --from first \
        --count 20 >/dev/null
    "$COMET_BIN" bench produce -n "$namesrv" -t MetricsLoad --no-create -p 1 -s 128 --rate 20 \
        -d 3600 >"$WORK/bench-$tag.log" 2>&1 &
    PIDS+=($!)
    "$COMET_BIN" consume MetricsLoad -n "$namesrv" -g metrics_online --from first >/dev/null 2>&1 &
    PIDS+=($!)
    wait_for "the producer on $tag" has_series "$metrics" rocketmq_producer_connections 'language='
    wait_for "the online group on $tag" has_series "$metrics" rocketmq_consumer_connections 'consumer_group="metrics_online"'
    if [[ $tag == comet ]]; then
        wait_for "the offline group's lag on $tag" has_series "$metrics" rocketmq_consumer_lag_messages 'consumer_group="metrics_offline"'
    fi
}

stop_load() {
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    PIDS=()
}

ensure_tools
[[ -x "$COMET_BIN" ]] || die "no comet binary at $COMET_BIN (cargo build -p comet)"

log "comet serve, metrics on by default"
"$COMET_BIN" serve --namesrv-listen 127.0.0.1:0 --broker-listen 127.0.0.1:0 --data-dir "$WORK/data" \
    --ready-file "$WORK/ready.json" >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
wait_for "comet serve" test -s "$WORK/ready.json"
NAMESRV="$(json_field "$WORK/ready.json" namesrv)"
METRICS="$(json_field "$WORK/ready.json" metrics)"
start_load "$NAMESRV" "$(json_field "$WORK/ready.json" broker)" "$METRICS" comet
scrape "$METRICS" >"$WORK/comet.txt"

log "promtool check metrics"
rc=0
promtool check metrics <"$WORK/comet.txt" >"$WORK/promtool.txt" 2>&1 || rc=$?
cat "$WORK/promtool.txt"
# Exit 1 is a parse error; 3 is lint findings, of which only the unit advice is expected.
((rc == 0 || rc == 3)) || die "promtool could not read the scrape (exit $rc)"
if grep -v -E '^rocketmq_[a-z_]+_milliseconds use base unit "seconds" instead of "milliseconds"$' \
    "$WORK/promtool.txt" | grep -q .; then
    die "promtool found more than the expected unit advice"
fi

log "prometheus_client parser"
"$PY" - "$WORK/comet.txt" <<'EOF'
import sys
from prometheus_client.parser import text_string_to_metric_families
families = list(text_string_to_metric_families(open(sys.argv[1]).read()))
samples = [s for f in families for s in f.samples]
assert len(families) >= 15 and samples, f"{len(families)} families"
for s in samples:
    missing = {"cluster", "node_type", "node_id"} - set(s.labels)
    assert not missing, f"{s.name} lacks {missing}"
print(f"parsed {len(families)} families, {len(samples)} samples")
EOF

log "Prometheus scrapes comet serve"
PROM_PORT="$(free_port)"
cat >"$WORK/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: comet
    static_configs:
      - targets: ["$METRICS"]
EOF
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$WORK/prometheus.log" 2>&1 &
PIDS+=($!)
PROM="http://127.0.0.1:$PROM_PORT"
query() { curl -sf --get "$PROM/api/v1/query" --data-urlencode "query=$1"; }
# The value of a one-series instant query, or nothing.
value() { query "$1" | "$PY" -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if len(r) == 1 else "")'; }
target_up() { grep -q '"health":"up"' <<<"$(curl -sf "$PROM/api/v1/targets")"; }
wait_for "Prometheus to find the target up" target_up
lag_query='sum(rocketmq_consumer_lag_messages{consumer_group="metrics_offline",topic="MetricsLag"})'
wait_for "the offline group's lag in Prometheus" test -n "$(value "$lag_query")"
for name in rocketmq_consumer_connections rocketmq_topic_number rocketmq_storage_size_bytes comet_store_put_messages_total; do
    [[ -n "$(value "count($name)")" ]] || die "Prometheus has no $name"
done
before="$(value "$lag_query")"
"$COMET_BIN" produce MetricsLag -n "$NAMESRV" --count 7 --body "later {i}" >/dev/null
expected=$((${before%.*} + 7))
lag_is_expected() { [[ "$(value "$lag_query")" == "$expected" ]]; }
wait_for "the offline group's lag to rise from $before to $expected" lag_is_expected
echo "metrics: offline lag in Prometheus $before -> $expected"
stop_load
kill -TERM "$SERVE_PID"
wait "$SERVE_PID" || true
SERVE_PID=""

log "Apache RocketMQ 5.3.3 with metricsExporterType=PROM"
APACHE_METRICS_PORT="$(free_port)"
BROKER_EXTRA_CONF=$'metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\nmetricsPromExporterPort='"$APACHE_METRICS_PORT" \
    "$APACHE" start "$WORK/rmq" >"$WORK/apache-start.log" 2>&1 || { cat "$WORK/apache-start.log"; die "Apache did not start"; }
apache_started=1
# shellcheck disable=SC1091
source "$WORK/rmq/env"
start_load "$NAMESRV_ADDR" "$BROKER_ADDR" "127.0.0.1:$APACHE_METRICS_PORT" apache
scrape "127.0.0.1:$APACHE_METRICS_PORT" >"$WORK/apache.txt"
stop_load

log "families and label keys against docs/metrics.md"
if [[ "${UPDATE_DOCS:-0}" == 1 ]]; then
    "$PY" "$HERE/compare.py" update "$WORK/comet.txt" "$WORK/apache.txt" "$DOC"
    echo "metrics: rewrote the table in $DOC"
fi
"$PY" "$HERE/compare.py" check "$WORK/comet.txt" "$WORK/apache.txt" "$DOC" ||
    die "the scrapes differ from the table in docs/metrics.md (UPDATE_DOCS=1 rewrites it)"
log "every check passed"
