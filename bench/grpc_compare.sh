#!/usr/bin/env bash
# Comet's gRPC endpoint against Apache RocketMQ 5.3.3's proxy (local mode, its broker in the same
# JVM), both driven by the same two load generators: `comet bench grpc-send|grpc-receive`
# (release), and the official Java SDK, rocketmq-client-java 5.0.8 (interop/grpc's GrpcBench), as
# an application drives it:
#
#   G1  SendMessage, one message per call, G_PRODUCERS concurrent callers, DURATION s: msg/s, RT
#   G2  a backlog of G_COUNT messages (remoting batch sends), then ReceiveMessage (batches of 32)
#       and acks from G_RECEIVERS concurrent loops until all are acked: msg/s
#   SDK G1: G_PRODUCERS threads sharing one Producer, synchronous sends, SDK_WARMUP s not counted,
#       then DURATION s; SDK G2: G_RECEIVERS threads sharing one SimpleConsumer, receive 32 and
#       ack each message, over a backlog of G_COUNT
#
#   bench/grpc_compare.sh [--brokers "comet apache"] [--no-sdk]
#
# Each broker starts fresh with an empty store. Needs java 17+, mvn, python3 (for Apache and the
# SDK). Env: COMET_BIN [built], DURATION [30], G_PRODUCERS [32], G_RECEIVERS [8],
# G_COUNT [200000], SIZE [1024], JAVA_HEAP [1g], SDK_WARMUP [10].
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
DURATION="${DURATION:-30}"
G_PRODUCERS="${G_PRODUCERS:-32}"
G_RECEIVERS="${G_RECEIVERS:-8}"
G_COUNT="${G_COUNT:-200000}"
SIZE="${SIZE:-1024}"
JAVA_HEAP="${JAVA_HEAP:-1g}"
SDK_WARMUP="${SDK_WARMUP:-10}"
BROKERS="comet apache"
SDK=1
WAIT=180
while (($#)); do
    case "$1" in
    --brokers) BROKERS="$2"; shift ;;
    --no-sdk) SDK=0 ;;
    -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "grpc_compare.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

die() { echo "grpc_compare.sh: $*" >&2; exit 1; }
log() { echo "[grpc-compare $(date +%H:%M:%S)] $*" >&2; }
WORK="$(mktemp -d /tmp/comet-grpc-compare.XXXXXX)"
PIDS=()
stop_all() {
    local pid
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    PIDS=()
}
trap 'stop_all; rm -rf "$WORK"' EXIT

if [[ -z "${COMET_BIN:-}" ]]; then
    log "building comet (release)"
    (cd "$ROOT" && cargo build --release --locked -p comet >&2)
    COMET_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/comet"
fi
# shellcheck source=../interop/lib/apache_proxy.sh
source "$ROOT/interop/lib/apache_proxy.sh"

json_get() {
    python3 -c 'import json,sys
v=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): v=v.get(k) if isinstance(v,dict) else None
print("" if v is None else v)' "$1" "$2"
}

RESULTS="$WORK/results.tsv"
: >"$RESULTS"
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RESULTS"; }

# run_loads <broker> <namesrv> <grpc>: G1 and G2 against one started broker.
run_loads() {
    local b=$1 ns=$2 grpc=$3 out="$WORK/$1"
    log "$b G1: grpc-send, $G_PRODUCERS callers, ${DURATION}s"
    "$COMET_BIN" bench --threads 1 grpc-send -n "$ns" --endpoint "$grpc" -t GrpcBenchG1 --queues 8 \
        -p "$G_PRODUCERS" -s "$SIZE" -d "$DURATION" --wait-ready "$WAIT" --json >"$out-g1.json"
    record "$b" g1_tps "$(json_get "$out-g1.json" tps)"
    record "$b" g1_p99_ms "$(json_get "$out-g1.json" send_rt.p99_us | awk '{printf "%.3f", $1/1000}')"
    record "$b" g1_failed "$(json_get "$out-g1.json" failed)"
    log "$b G2: $G_COUNT messages of backlog, then grpc-receive with $G_RECEIVERS loops"
    "$COMET_BIN" bench produce -n "$ns" -t GrpcBenchG2 --queues 8 -p 32 -s "$SIZE" -m batch \
        --batch 32 --count "$G_COUNT" --json >"$out-fill.json"
    "$COMET_BIN" bench --threads 1 grpc-receive -n "$ns" --endpoint "$grpc" -t GrpcBenchG2 \
        -g GrpcBenchG2Group -p "$G_RECEIVERS" --count "$G_COUNT" -d "$((DURATION * 10))" \
        --json >"$out-g2.json"
    record "$b" g2_tps "$(json_get "$out-g2.json" tps)"
    record "$b" g2_acked "$(json_get "$out-g2.json" messages)"
    record "$b" g2_failed "$(json_get "$out-g2.json" failed)"
    if ((SDK)); then
        run_sdk_loads "$b" "$ns" "$grpc"
    fi
}

# run_sdk_loads <broker> <namesrv> <grpc>: the SDK's G1 and G2 against one started broker.
run_sdk_loads() {
    local b=$1 ns=$2 grpc=$3 out="$WORK/$1"
    local cp="$ROOT/interop/grpc/target/classes:$(cat "$ROOT/interop/grpc/target/classpath.txt")"
    "$COMET_BIN" bench produce -n "$ns" -t GrpcSdkG1 --queues 8 -p 1 -s "$SIZE" --count 1 \
        --wait-ready "$WAIT" --json >/dev/null
    log "$b SDK G1: $G_PRODUCERS threads, one Producer, ${SDK_WARMUP}s warm-up + ${DURATION}s"
    java -Xmx"$JAVA_HEAP" -cp "$cp" dev.comet.interop.GrpcBench send "$grpc" GrpcSdkG1 \
        "$G_PRODUCERS" "$SIZE" "$SDK_WARMUP" "$DURATION" >"$out-sdk-g1.json"
    record "$b" sdk_g1_tps "$(json_get "$out-sdk-g1.json" tps)"
    record "$b" sdk_g1_p99_ms "$(json_get "$out-sdk-g1.json" p99_ms)"
    record "$b" sdk_g1_failed "$(json_get "$out-sdk-g1.json" failed)"
    log "$b SDK G2: $G_COUNT messages of backlog, then $G_RECEIVERS threads of one SimpleConsumer"
    "$COMET_BIN" bench produce -n "$ns" -t GrpcSdkG2 --queues 8 -p 32 -s "$SIZE" -m batch \
        --batch 32 --count "$G_COUNT" --json >/dev/null
    java -Xmx"$JAVA_HEAP" -cp "$cp" dev.comet.interop.GrpcBench receive "$grpc" GrpcSdkG2 \
        GrpcSdkG2Group "$G_RECEIVERS" "$G_COUNT" "$((DURATION * 10))" >"$out-sdk-g2.json"
    record "$b" sdk_g2_tps "$(json_get "$out-sdk-g2.json" tps)"
    record "$b" sdk_g2_acked "$(json_get "$out-sdk-g2.json" acked)"
}

if ((SDK)); then
    log "building the SDK load generator (rocketmq-client-java 5.0.8)"
    mvn -q -B -f "$ROOT/interop/grpc/pom.xml" compile dependency:build-classpath \
        -Dmdep.outputFile="$ROOT/interop/grpc/target/classpath.txt" >&2
fi

for b in $BROKERS; do
    case "$b" in
    comet)
        mkdir -p "$WORK/comet"
        "$COMET_BIN" serve --namesrv-listen 127.0.0.1:0 --broker-listen 127.0.0.1:0 \
            --data-dir "$WORK/comet/data" --ready-file "$WORK/comet/ready" \
            --set consoleEnable=false >"$WORK/comet/serve.log" 2>&1 &
        PIDS+=($!)
        for _ in $(seq 1 $((WAIT * 10))); do [[ -s "$WORK/comet/ready" ]] && break; sleep 0.1; done
        [[ -s "$WORK/comet/ready" ]] || die "comet serve did not start"
        run_loads comet "$(json_get "$WORK/comet/ready" namesrv)" "$(json_get "$WORK/comet/ready" grpc)"
        ;;
    apache)
        JAVA_HEAP="$JAVA_HEAP" apache_proxy_start
        run_loads apache "$APACHE_NAMESRV" "$APACHE_GRPC"
        ;;
    *) die "unknown broker $b" ;;
    esac
    stop_all
done

python3 - "$RESULTS" "$BROKERS" "$G_PRODUCERS" "$G_RECEIVERS" "$G_COUNT" <<'PY'
import sys, collections
rows = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    b, k, v = line.rstrip("\n").split("\t")
    rows[k][b] = v
brokers = sys.argv[2].split()
names = {"comet": "Comet (gRPC endpoint)", "apache": "Apache 5.3.3 proxy (local)"}
labels = [
    ("g1_tps", f"G1 SendMessage, {sys.argv[3]} callers: msg/s", True),
    ("g1_p99_ms", "G1 send RT p99 (ms)", False),
    ("g1_failed", "G1 sends not answered OK", None),
    ("g2_tps", f"G2 ReceiveMessage + AckMessage, {sys.argv[4]} loops: msg/s", True),
    ("g2_acked", f"G2 messages acked (of {sys.argv[5]})", None),
    ("g2_failed", "G2 acks refused", None),
    ("sdk_g1_tps", f"SDK G1 Producer.send, {sys.argv[3]} threads: msg/s", True),
    ("sdk_g1_p99_ms", "SDK G1 send RT p99 (ms)", False),
    ("sdk_g1_failed", "SDK G1 sends failed", None),
    ("sdk_g2_tps", f"SDK G2 SimpleConsumer receive + ack, {sys.argv[4]} threads: msg/s", True),
    ("sdk_g2_acked", f"SDK G2 messages acked (of {sys.argv[5]})", None),
]
ratio = "comet" in brokers and "apache" in brokers
print("| measurement | " + " | ".join(names[b] for b in brokers) + (" | Comet / Apache |" if ratio else " |"))
print("|---" * (len(brokers) + 1 + ratio) + "|")
for key, label, rate in labels:
    if key not in rows:
        continue
    cells = [rows[key].get(b, "–") for b in brokers]
    extra = ""
    if ratio:
        try:
            extra = f" {float(rows[key]['comet']) / float(rows[key]['apache']):.2f} |" if rate is not None else " – |"
        except (KeyError, ValueError, ZeroDivisionError):
            extra = " – |"
    print(f"| {label} | " + " | ".join(cells) + " |" + extra)
PY
