#!/usr/bin/env bash
# Apache's own mqadmin (rocketmq-tools 5.3.3, `MQAdminStartup`) running the commands operators use
# every day, with the same assertions against two targets: `comet serve`, then Apache RocketMQ
# 5.3.3's name server and broker from interop/apache/run.sh. A Comet push consumer and a Comet
# producer are online while the group and connection commands run.
#
# mqadmin prints a failed command's exception and still exits 0, so every command must exit 0,
# print no exception, and print what the check expects: the topic listed, the offset moved (read
# back with `comet group progress`), the config value read back, the permission in the route.
# Commands that do not depend on each other run as parallel JVMs (each mqadmin JVM takes seconds,
# most of it spent shutting its client down).
#
#   topics:     updateTopic (-c, -b), topicList (and -c), topicRoute, topicStatus, topicClusterList,
#               updateTopicPerm, deleteTopic
#   groups:     updateSubGroup, getConsumerConfig, deleteSubGroup, consumerConnection,
#               consumerStatus, consumerProgress, producerConnection, brokerConsumeStats, statsAll
#   offsets:    cloneGroupOffset, resetOffsetByTime (an offline group, then the online group, whose
#               consumer receives the messages again), skipAccumulatedMessage
#   messages:   sendMessage, queryMsgById, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset,
#               printMsg
#   cluster:    clusterList, brokerStatus, getBrokerConfig, updateBrokerConfig (brokerPermission,
#               read back and seen in the route; a black-listed key refused with NO_PERMISSION),
#               wipeWritePerm, addWritePerm, getNamesrvConfig, updateNamesrvConfig (likewise)
#
# Prints one summary line per target; on failure the outputs and the server logs. Exits non-zero
# on failure.
#
#   interop/mqadmin/daily.sh
#
# Environment (defaults in brackets):
#   MQADMIN_WAIT [60]        seconds any single wait may take
#   MQADMIN_TARGETS [comet apache]  which targets to run
#   MQADMIN_WORKDIR [mktemp] data, logs and outputs; removed on success unless MQADMIN_KEEP=1
#   CARGO_TARGET_DIR         honoured by cargo as usual
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WAIT="${MQADMIN_WAIT:-60}"
VERSION=5.3.3
TOPIC=DailyTopic          # the topic most commands look at (4 queues)
TEMP_TOPIC=DailyTempTopic # created and deleted
BENCH_TOPIC=DailyBenchTopic
GROUP=DailyGroup          # the online push consumer's group
OFFLINE=DailyOfflineGroup # offsets cloned from GROUP, reset and skipped with nobody online
TEMP_GROUP=DailyTempGroup # created and deleted
PRODUCER_GROUP=DailyProducerGroup
TARGETS="${MQADMIN_TARGETS:-comet apache}"
APACHE="$REPO/interop/apache/run.sh"

T0=$SECONDS
step() { echo "== mqadmin daily: $* ($((SECONDS - T0))s)"; }

if [[ -n "${MQADMIN_WORKDIR:-}" ]]; then
    WORK="$MQADMIN_WORKDIR"
    mkdir -p "$WORK"
else
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/mqadmin-daily.XXXXXX")"
fi
WORK="$(cd "$WORK" && pwd)"

SERVE_PID=""
CONSUMER_PID=""
PRODUCER_PID=""
FAILED=no
stop_clients() {
    local pid
    for pid in "$CONSUMER_PID" "$PRODUCER_PID"; do
        [[ -z "$pid" ]] || kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "$CONSUMER_PID" "$PRODUCER_PID"; do
        [[ -z "$pid" ]] || wait "$pid" 2>/dev/null || true
    done
    CONSUMER_PID=""
    PRODUCER_PID=""
}
cleanup() {
    local rc=$?
    stop_clients
    [[ -z "$SERVE_PID" ]] || kill -TERM "$SERVE_PID" 2>/dev/null || true
    [[ -z "$SERVE_PID" ]] || wait "$SERVE_PID" 2>/dev/null || true
    if [[ -d "$WORK/apache" ]]; then "$APACHE" stop "$WORK/apache" >/dev/null 2>&1 || true; fi
    if [[ $rc -eq 0 && $FAILED == no && "${MQADMIN_KEEP:-0}" != 1 ]]; then
        rm -rf "$WORK"
    else
        echo "mqadmin daily: work directory kept: $WORK" >&2
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
    FAILED=yes
    local f
    for f in "$WORK"/serve.log "$WORK"/apache/broker.out "$WORK"/out/*.out; do
        [[ -f "$f" ]] || continue
        echo "---- $f" >&2
        tail -20 "$f" >&2
    done
    echo "mqadmin daily: FAIL: $*" >&2
    exit 1
}

for tool in java mvn python3 cargo; do
    command -v "$tool" >/dev/null || die "$tool is required (interop/tests.sh installs the JDK and Maven)"
done

# --- builds -----------------------------------------------------------------------------------
step "building comet and the rocketmq-tools $VERSION classpath"
(cd "$REPO" && cargo build -q -p comet) || die "cargo build -p comet failed"
COMET="${CARGO_TARGET_DIR:-$REPO/target}/debug/comet"
[[ "$COMET" == /* ]] || COMET="$REPO/$COMET"
[[ -x "$COMET" ]] || die "no comet binary at $COMET"
JAVA_DIR="$REPO/interop/java"
CP_FILE="$JAVA_DIR/target/$VERSION/classpath.txt"
if [[ ! -s "$CP_FILE" || ! -d "$JAVA_DIR/target/$VERSION/classes" ||
    -n "$(find "$JAVA_DIR/src" "$JAVA_DIR/pom.xml" -newer "$CP_FILE" -print -quit)" ]]; then
    mkdir -p "$(dirname "$CP_FILE")"
    mvn -q -B -f "$JAVA_DIR/pom.xml" -Drocketmq.client.version="$VERSION" compile dependency:build-classpath \
        -Dmdep.outputFile="$CP_FILE" >&2 || die "maven could not build $JAVA_DIR for $VERSION"
    touch "$CP_FILE"
fi
JAVA_CP="$(cat "$CP_FILE")"

# --- mqadmin ----------------------------------------------------------------------------------
# mq <name> <args...>: starts MQAdminStartup in the background, output in out/<name>.out.
# `settle` waits for every started command and checks them.
STARTED=()
mq() {
    local name=$1
    shift
    mkdir -p "$WORK/out"
    printf '%s\n' "$*" >"$WORK/out/$name.cmd"
    (cd "$WORK" && exec timeout "$WAIT" java -Xms64m -Xmx256m -XX:TieredStopAtLevel=1 \
        -Drocketmq.namesrv.addr="$NAMESRV" -cp "$JAVA_CP" org.apache.rocketmq.tools.command.MQAdminStartup \
        "$@" -n "$NAMESRV") >"$WORK/out/$name.out" 2>&1 &
    echo $! >"$WORK/out/$name.pid"
    STARTED+=("$name")
}

# settle: every started command exited 0 and printed no exception (mqadmin prints a failed
# command's exception and exits 0 all the same), except commands named refused_*, which are
# expected to fail and are checked by their output.
settle() {
    local name rc
    for name in "${STARTED[@]}"; do
        rc=0
        wait "$(cat "$WORK/out/$name.pid")" || rc=$?
        ((rc == 0)) || die "mqadmin $(cat "$WORK/out/$name.cmd") exited $rc"
        if [[ $name != refused_* ]] && grep -qE 'Exception|CODE: [0-9]+' "$WORK/out/$name.out"; then
            die "mqadmin $(cat "$WORK/out/$name.cmd") failed: $(grep -m1 -E 'Exception|CODE:' "$WORK/out/$name.out")"
        fi
    done
    STARTED=()
}

# run <name> <args...>: one command, waited for and checked.
run() {
    mq "$@"
    settle
}

# expect <name> <extended regex>: the output of <name> has a line matching it.
expect() {
    grep -qE -- "$2" "$WORK/out/$1.out" || die "$1 ($(cat "$WORK/out/$1.cmd")): no line matches /$2/"
}

# refute <name> <extended regex>: no line of the output of <name> matches it.
refute() {
    ! grep -qE -- "$2" "$WORK/out/$1.out" || die "$1 ($(cat "$WORK/out/$1.cmd")): a line matches /$2/"
}

# count <name> <extended regex>: how many lines of the output match.
count() { grep -cE -- "$2" "$WORK/out/$1.out" || true; }

# --- Comet tools as witnesses -----------------------------------------------------------------
# progress <group>: the group's offsets of $TOPIC as JSON (`comet group progress`).
progress() { "$COMET" group progress -n "$NAMESRV" -t "$TOPIC" --json "$1"; }

# diff_total_is <group> <n>: the group's lag over $TOPIC is n.
diff_total_is() {
    [[ "$(progress "$1" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["diffTotal"])' 2>/dev/null)" == "$2" ]]
}

# consumer_offsets <group>: "queueId:consumerOffset" of every queue of $TOPIC, sorted.
consumer_offsets() {
    progress "$1" | python3 -c 'import json,sys
queues = sorted(json.load(sys.stdin)["queues"], key=lambda q: q["queueId"])
print(" ".join("%s:%s" % (q["queueId"], q["consumerOffset"]) for q in queues))'
}

# route_perm_is <topic> <perm>: the name server's route of the topic carries that perm.
route_perm_is() {
    [[ "$("$COMET" topic route -n "$NAMESRV" --json "$1" 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["queueDatas"][0]["perm"])' 2>/dev/null)" == "$2" ]]
}

# indexed <key>: a message of $TOPIC with that key is found (the index is built after the consume
# queue, message by message, so the last message sent being indexed means all are readable).
indexed() {
    grep -q . <<<"$("$COMET" msg by-key -n "$NAMESRV" --json "$TOPIC" "$1" 2>/dev/null)"
}

# printed <n>: the consumer printed at least n messages.
printed() { (($(grep -c "daily " "$WORK/consumer.out" || true) >= $1)); }

client_id() {
    "$COMET" group connections -n "$NAMESRV" "$1" --json 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["connectionSet"][0]["clientId"])'
}

# --- targets ----------------------------------------------------------------------------------
# shellcheck source=interop/lib/targets.sh
source "$REPO/interop/lib/targets.sh"

start_comet() {
    step "starting comet serve"
    rm -rf "$WORK/out"
    comet_serve_start
}

stop_comet() { comet_serve_stop; }

start_apache() {
    step "starting Apache RocketMQ $VERSION"
    rm -rf "$WORK/out"
    apache_start
}

stop_apache() { apache_stop; }

# shellcheck source=interop/mqadmin/daily_checks.sh
source "$HERE/daily_checks.sh"

for target in $TARGETS; do
    case "$target" in
    comet) start_comet && check "comet serve" && stop_comet ;;
    apache) start_apache && check "Apache RocketMQ $VERSION" && stop_apache ;;
    *) die "unknown target $target" ;;
    esac
done
