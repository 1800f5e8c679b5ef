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
#   topics:     updateTopic (-c, -b), updateTopicList (-b), topicList (and -c), topicRoute,
#               topicStatus, topicClusterList, updateTopicPerm, deleteTopic
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
LIST_TOPIC_1=DailyListTopic1 # created by updateTopicList, with LIST_TOPIC_2
LIST_TOPIC_2=DailyListTopic2
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
SUITE="mqadmin daily"
# shellcheck source=interop/mqadmin/harness.sh
source "$HERE/harness.sh"

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
