#!/usr/bin/env bash
# Apache's own mqadmin (rocketmq-tools 5.3.3, `MQAdminStartup`) with a Comet push consumer online:
# the admin requests a broker relays to one client. Two targets, each checked the same way:
# `comet serve` (Comet's broker relays to the Comet client), then Apache RocketMQ 5.3.3's name
# server and broker from interop/apache/run.sh (Apache's broker relays to the Comet client).
#
#   1. builds comet and the classpath of interop/java (rocketmq-client and rocketmq-tools 5.3.3);
#   2. starts the target on loopback (free ports), sends three messages with `comet produce` and
#      starts a Comet push consumer with `comet consume --mode push` (group MqadminGroup), waiting
#      until it printed the three messages;
#   3. `mqadmin consumerStatus -g GROUP`: exit 0, the client listed, "Same subscription" and
#      "Rebalance OK" (mqadmin parsed every client's ConsumerRunningInfo);
#   4. `mqadmin consumerStatus -g GROUP -i CLIENT -s`: exit 0 and every section of Java's
#      ConsumerRunningInfo.formatString, the queues of the topic and the client's task dump;
#   5. `mqadmin consumerProgress -g GROUP -s true`: every queue of the topic shows the client's IP,
#      which mqadmin takes from the MessageQueue keys of the client's running info;
#   6. `mqadmin queryMsgById -i MSGID -g GROUP -d CLIENT` (CONSUME_MESSAGE_DIRECTLY): prints a
#      ConsumeMessageDirectlyResult with CR_SUCCESS, and the consumer printed that message again.
#
# Prints one summary line per target; on failure the outputs and the server logs. Exits non-zero
# on failure.
#
#   interop/mqadmin/run.sh
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
TOPIC=MqadminTopic
GROUP=MqadminGroup
TARGETS="${MQADMIN_TARGETS:-comet apache}"
APACHE="$REPO/interop/apache/run.sh"

T0=$SECONDS
step() { echo "== mqadmin: $* ($((SECONDS - T0))s)"; }

if [[ -n "${MQADMIN_WORKDIR:-}" ]]; then
    WORK="$MQADMIN_WORKDIR"
    mkdir -p "$WORK"
else
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/mqadmin-interop.XXXXXX")"
fi
WORK="$(cd "$WORK" && pwd)"

SERVE_PID=""
CONSUMER_PID=""
FAILED=no
cleanup() {
    local rc=$?
    [[ -z "$CONSUMER_PID" ]] || kill -TERM "$CONSUMER_PID" 2>/dev/null || true
    [[ -z "$SERVE_PID" ]] || kill -TERM "$SERVE_PID" 2>/dev/null || true
    [[ -z "$CONSUMER_PID" ]] || wait "$CONSUMER_PID" 2>/dev/null || true
    [[ -z "$SERVE_PID" ]] || wait "$SERVE_PID" 2>/dev/null || true
    if [[ -d "$WORK/apache" ]]; then "$APACHE" stop "$WORK/apache" >/dev/null 2>&1 || true; fi
    if [[ $rc -eq 0 && $FAILED == no && "${MQADMIN_KEEP:-0}" != 1 ]]; then
        rm -rf "$WORK"
    else
        echo "mqadmin: work directory kept: $WORK" >&2
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
    FAILED=yes
    echo "mqadmin: FAIL: $*" >&2
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
    mvn -q -B -f "$JAVA_DIR/pom.xml" -Drocketmq.client.version="$VERSION" compile dependency:build-classpath \
        -Dmdep.outputFile="$CP_FILE" >&2 || die "maven could not build $JAVA_DIR for $VERSION"
    touch "$CP_FILE"
fi
JAVA_CP="$(cat "$CP_FILE")"

# mqadmin <output name> <args...>: runs MQAdminStartup in the work directory (consumerStatus
# writes one file per client there); fails the suite when it exits non-zero.
mqadmin() {
    local out="$WORK/$1.out"
    shift
    (cd "$WORK" && timeout "$WAIT" java -Xms64m -Xmx256m -Drocketmq.namesrv.addr="$NAMESRV" \
        -cp "$JAVA_CP" org.apache.rocketmq.tools.command.MQAdminStartup "$@" -n "$NAMESRV") >"$out" 2>&1 ||
        die "mqadmin $* exited $?"
}

# expect <output name> <fixed string>: the output contains the string.
expect() {
    grep -qF -- "$2" "$WORK/$1.out" || die "$1: no \"$2\" in the output"
}

# wait_for <what> <command...>: polls until the command succeeds.
wait_for() {
    local what=$1 deadline=$((SECONDS + WAIT))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || die "$what: not within ${WAIT}s"
        sleep 0.2
    done
}

# progress_rows: `mqadmin consumerProgress -s true` shows every queue of the topic with the
# client's IP, which mqadmin takes from the keys of the client's running-info mqTable.
progress_rows() {
    mqadmin progress consumerProgress -g "$GROUP" -s true
    local queues
    queues="$(grep -c "^$TOPIC .* ${CLIENT_ID%@*} " "$WORK/progress.out" || true)"
    ((queues == 4))
}

# --- targets ----------------------------------------------------------------------------------
start_comet() {
    step "starting comet serve"
    "$COMET" serve --namesrv-listen 127.0.0.1:0 --broker-listen 127.0.0.1:0 --data-dir "$WORK/data" \
        --ready-file "$WORK/ready.json" >"$WORK/serve.log" 2>&1 &
    SERVE_PID=$!
    wait_for "comet serve ready" test -s "$WORK/ready.json"
    NAMESRV="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["namesrv"])' "$WORK/ready.json")"
}

stop_comet() {
    kill -TERM "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null || true
    SERVE_PID=""
}

start_apache() {
    step "starting Apache RocketMQ $VERSION"
    "$APACHE" start "$WORK/apache" >"$WORK/apache-start.out" 2>&1 || die "Apache RocketMQ did not start"
    NAMESRV="$(sed -n 's/^NAMESRV_ADDR=//p' "$WORK/apache/env")"
}

stop_apache() {
    "$APACHE" stop "$WORK/apache" >/dev/null 2>&1 || true
    rm -rf "$WORK/apache"
}

# --- checks -----------------------------------------------------------------------------------
# printed <n>: the consumer printed at least n messages.
printed() { (($(grep -c "mqadmin " "$WORK/consumer.out" || true) >= $1)); }

# client_id: the first client id of the group's connections.
client_id() {
    "$COMET" group connections -n "$NAMESRV" "$GROUP" --json 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["connectionSet"][0]["clientId"])'
}

# check <target>: the consumer, then the three mqadmin commands, against $NAMESRV.
check() {
    local target=$1 section queues
    step "producing and starting a Comet push consumer ($target)"
    "$COMET" produce -n "$NAMESRV" "$TOPIC" --count 3 --body "mqadmin {i}" --json >"$WORK/produce.out" ||
        die "comet produce failed"
    MSG_ID="$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["msgId"])' "$WORK/produce.out")"
    "$COMET" consume -n "$NAMESRV" "$TOPIC" -g "$GROUP" --mode push --from first >"$WORK/consumer.out" 2>&1 &
    CONSUMER_PID=$!
    wait_for "the consumer prints the 3 messages" printed 3
    wait_for "the consumer's connection" client_id >/dev/null
    CLIENT_ID="$(client_id)"

    step "mqadmin consumerStatus -g $GROUP ($target)"
    mqadmin status consumerStatus -g "$GROUP"
    expect status "$CLIENT_ID"
    expect status "Same subscription in the same group of consumer"
    expect status "Rebalance OK"

    step "mqadmin consumerStatus -g $GROUP -i $CLIENT_ID -s ($target)"
    mqadmin detail consumerStatus -g "$GROUP" -i "$CLIENT_ID" -s
    for section in "#Consumer Properties#" "#Consumer Subscription#" "#Consumer Offset#" \
        "#Consumer MQ Detail#" "#Consumer RT&TPS#" "#Consumer jstack#" \
        "PROP_CONSUME_TYPE" "CONSUME_PASSIVELY" "PROP_NAMESERVER_ADDR" "$NAMESRV;" "consumerGroup" \
        "Topic: $TOPIC" "ProcessQueueInfo [commitOffset="; do
        expect detail "$section"
    done
    # Each queue of the topic appears in #Consumer Offset# and in #Consumer MQ Detail#.
    queues="$(grep -c "^$TOPIC " "$WORK/detail.out" || true)"
    ((queues >= 8)) || die "detail: $queues lines of $TOPIC queues, expected 8 or more"

    step "mqadmin consumerProgress -g $GROUP -s true ($target)"
    # The broker lists a group's topics once it holds a committed offset of the group, which the
    # consumer sends every few seconds: the command is repeated until the topic's rows appear.
    wait_for "consumerProgress to list the 4 queues of $TOPIC with the client's IP" progress_rows

    step "mqadmin queryMsgById -i $MSG_ID -g $GROUP -d $CLIENT_ID ($target)"
    mqadmin direct queryMsgById -t "$TOPIC" -i "$MSG_ID" -g "$GROUP" -d "$CLIENT_ID"
    expect direct "ConsumeMessageDirectlyResult [order=false, autoCommit=true, consumeResult=CR_SUCCESS"
    wait_for "the consumer prints the directly consumed message" printed 4

    kill -TERM "$CONSUMER_PID" 2>/dev/null || true
    wait "$CONSUMER_PID" 2>/dev/null || true
    CONSUMER_PID=""
    echo "mqadmin: PASS consumerStatus (summary, -i -s detail), consumerProgress -s and queryMsgById -g -d against $target ($((SECONDS - T0))s)"
}

for target in $TARGETS; do
    case "$target" in
    comet) start_comet && check "comet serve" && stop_comet ;;
    apache) start_apache && check "Apache RocketMQ $VERSION" && stop_apache ;;
    *) die "unknown target $target" ;;
    esac
done
