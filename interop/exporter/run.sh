#!/usr/bin/env bash
# rocketmq-exporter's collection cycle against two targets: `comet serve`, then Apache RocketMQ
# 5.3.3's name server and broker (interop/apache/run.sh), each checked the same way.
#
# apache/rocketmq-exporter is not published to Maven Central, so its collector cannot run here
# as it ships. ExporterCollect (the Maven project beside this script) makes the same admin calls
# with the same library (rocketmq-tools' DefaultMQAdminExt, 5.3.3): cluster, topic list and route,
# topic stats, producers by group (GET_ALL_PRODUCER_INFO), who consumes the topic, consumer connections and
# progress, the broker runtime table parsed key by key as the exporter parses it, and the minute
# statistics the exporter turns into TPS gauges (VIEW_BROKER_STATS_DATA: TOPIC_PUT_NUMS/SIZE,
# GROUP_GET_NUMS/SIZE, BROKER_PUT/GET_NUMS). A Java producer and push consumer are online while it
# collects. Every figure must be present and non-empty.
#
#   interop/exporter/run.sh
#
# Environment: EXPORTER_TARGETS [comet apache], EXPORTER_KEEP=1 keeps the work directory,
# CARGO_TARGET_DIR honoured as usual.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
VERSION=5.3.3
TOPIC=ExporterTopic
GROUP=ExporterGroup
PRODUCER_GROUP=ExporterProducerGroup
TARGETS="${EXPORTER_TARGETS:-comet apache}"
APACHE="$REPO/interop/apache/run.sh"
WAIT=60

T0=$SECONDS
step() { echo "== exporter: $* ($((SECONDS - T0))s)"; }
WORK="$(mktemp -d "${TMPDIR:-/tmp}/exporter-interop.XXXXXX")"
SERVE_PID=""
FAILED=no
cleanup() {
    local rc=$?
    [[ -z "$SERVE_PID" ]] || { kill -TERM "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; }
    if [[ -d "$WORK/apache" ]]; then "$APACHE" stop "$WORK/apache" >/dev/null 2>&1 || true; fi
    if [[ $rc -eq 0 && $FAILED == no && "${EXPORTER_KEEP:-0}" != 1 ]]; then
        rm -rf "$WORK"
    else
        echo "exporter: work directory kept: $WORK" >&2
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
    FAILED=yes
    echo "exporter: FAIL: $*" >&2
    local f
    for f in "$WORK"/*.out "$WORK"/serve.log "$WORK"/apache/broker.out; do
        [[ -f "$f" ]] || continue
        echo "---- $f" >&2
        tail -40 "$f" >&2
    done
    exit 1
}

for tool in java mvn python3 cargo; do
    command -v "$tool" >/dev/null || die "$tool is required (interop/tests.sh installs the JDK and Maven)"
done

step "building comet and the rocketmq-tools $VERSION classpath"
(cd "$REPO" && cargo build -q -p comet) || die "cargo build -p comet failed"
COMET="${CARGO_TARGET_DIR:-$REPO/target}/debug/comet"
[[ "$COMET" == /* ]] || COMET="$REPO/$COMET"
JAVA_DIR="$HERE"
CP_FILE="$JAVA_DIR/target/classpath.txt"
if [[ ! -s "$CP_FILE" || ! -d "$JAVA_DIR/target/classes" ||
    -n "$(find "$JAVA_DIR/src" "$JAVA_DIR/pom.xml" -newer "$CP_FILE" -print -quit)" ]]; then
    mvn -q -B -f "$JAVA_DIR/pom.xml" compile dependency:build-classpath \
        -Dmdep.outputFile="$CP_FILE" >&2 || die "maven could not build $JAVA_DIR"
    touch "$CP_FILE"
fi
JAVA_CP="$JAVA_DIR/target/classes:$(cat "$CP_FILE")"

# shellcheck source=interop/lib/targets.sh
source "$REPO/interop/lib/targets.sh"

# broker_addr: the target's broker (topics are created on it).
broker_addr() {
    if [[ -s "$WORK/ready.json" ]]; then
        python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["broker"])' "$WORK/ready.json"
    else
        sed -n 's/^BROKER_ADDR=//p' "$WORK/apache/env"
    fi
}

check() {
    local target=$1
    step "creating $TOPIC ($target)"
    "$COMET" topic create "$TOPIC" -n "$NAMESRV" -b "$(broker_addr)" -r 4 -w 4 >"$WORK/create.out" 2>&1 ||
        die "comet topic create failed"
    step "one exporter collection cycle ($target)"
    timeout 180 java -Xms64m -Xmx256m -Drocketmq.client.logUseSlf4j=false -cp "$JAVA_CP" \
        dev.comet.interop.ExporterCollect "$NAMESRV" "$TOPIC" "$GROUP" "$PRODUCER_GROUP" \
        >"$WORK/collect.out" 2>&1 || die "the collection cycle failed against $target"
    grep -E '^(OK|FAIL)' "$WORK/collect.out"
    grep -qx collected "$WORK/collect.out" || die "the collection cycle did not finish against $target"
    echo "exporter: PASS every figure of the exporter's collection cycle against $target ($((SECONDS - T0))s)"
}

for target in $TARGETS; do
    case "$target" in
    comet)
        step "starting comet serve"
        comet_serve_start && check "comet serve" && comet_serve_stop
        ;;
    apache)
        step "starting Apache RocketMQ $VERSION"
        apache_start && check "Apache RocketMQ $VERSION" && apache_stop
        ;;
    *) die "unknown target $target" ;;
    esac
done
