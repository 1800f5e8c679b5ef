#!/usr/bin/env bash
# Apache's own mqadmin (rocketmq-tools 5.3.3) changing a running broker's settings with
# `updateBrokerConfig`, with the same checks against two targets: `comet serve`, then Apache
# RocketMQ 5.3.3's name server and broker from interop/apache/run.sh.
#
#   1. `getBrokerConfig`: flushIntervalCommitLog 500, fileReservedTime 72 (both defaults);
#   2. `updateBrokerConfig` of flushIntervalCommitLog 900, fileReservedTime 48 and
#      maxMessageSize 1024: each prints "update broker config success";
#   3. `getBrokerConfig` shows the three new values at once, and a `sendMessage` of 2000 bytes is
#      refused with MESSAGE_ILLEGAL (CODE: 13) while one of 100 bytes is sent;
#   4. black-listed keys (brokerConfigPath, rocketmqHome, configBlackList) are refused with
#      NO_PERMISSION and Apache's remark, and change nothing;
#   5. the broker's config file holds the three new values (Apache: the `-c` broker.conf it
#      rewrites; comet serve: <data-dir>/store/config/broker.properties, its config file without
#      `-c`);
#   6. the broker restarts (Apache's from its config file, comet serve on the same data directory)
#      and `getBrokerConfig` still shows them;
#   7. `updateBrokerConfig` flushIntervalCommitLog 500 and maxMessageSize 4194304 put the defaults
#      back: `getBrokerConfig` shows them and the 2000-byte message is sent.
#
# mqadmin prints a failed command's exception and still exits 0, so every command must exit 0 and
# print no exception, except those expected to be refused, which are checked by their output.
# Prints one summary line per target; on failure the outputs and the server logs. Exits non-zero
# on failure.
#
#   interop/mqadmin/broker_config.sh
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
TOPIC=BrokerConfigTopic
TARGETS="${MQADMIN_TARGETS:-comet apache}"
APACHE="$REPO/interop/apache/run.sh"
BIG_BODY="$(printf 'x%.0s' $(seq 2000))"

T0=$SECONDS
step() { echo "== mqadmin broker config: $* ($((SECONDS - T0))s)"; }

if [[ -n "${MQADMIN_WORKDIR:-}" ]]; then
    WORK="$MQADMIN_WORKDIR"
    mkdir -p "$WORK"
else
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/mqadmin-broker-config.XXXXXX")"
fi
WORK="$(cd "$WORK" && pwd)"

SERVE_PID=""
FAILED=no
SUITE="mqadmin broker config"
# shellcheck source=interop/mqadmin/harness.sh
source "$HERE/harness.sh"

# shown <name> <key> <value>: getBrokerConfig output <name> lists the key with that value.
shown() { expect "$1" "^$2 +=  $3$"; }

# --- targets ----------------------------------------------------------------------------------
# shellcheck source=interop/lib/targets.sh
source "$REPO/interop/lib/targets.sh"

# master_listed: clusterList lists a master; sets BROKER and ADDR from its line.
master_listed() {
    run cluster clusterList
    ADDR=""
    read -r _ BROKER _ ADDR _ < <(awk '$3 == "0" && $1 !~ /^#/ { print; exit }' "$WORK/out/cluster.out") || true
    [[ -n "$ADDR" ]]
}

# check <target> <config file> <restart command>: every step against $NAMESRV.
check() {
    local target=$1 conf=$2 restart=$3 key
    wait_for "clusterList lists the master" master_listed
    run create updateTopic -b "$ADDR" -t "$TOPIC" -r 1 -w 1
    expect create "^create topic to $ADDR success"

    step "getBrokerConfig, then updateBrokerConfig of three keys ($target)"
    run before getBrokerConfig -b "$ADDR"
    shown before flushIntervalCommitLog 500
    shown before fileReservedTime 72
    mq flush updateBrokerConfig -b "$ADDR" -k flushIntervalCommitLog -v 900
    mq reserved updateBrokerConfig -b "$ADDR" -k fileReservedTime -v 48
    mq size updateBrokerConfig -b "$ADDR" -k maxMessageSize -v 1024
    settle
    for key in flush reserved size; do
        expect "$key" "^update broker config success, $ADDR$"
    done

    step "the new values, in force ($target)"
    mq after getBrokerConfig -b "$ADDR"
    mq refused_big sendMessage -t "$TOPIC" -p "$BIG_BODY"
    mq small sendMessage -t "$TOPIC" -p "small enough"
    mq refused_path updateBrokerConfig -b "$ADDR" -k brokerConfigPath -v "$WORK/elsewhere.conf"
    mq refused_home updateBrokerConfig -b "$ADDR" -k rocketmqHome -v "$WORK"
    mq refused_list updateBrokerConfig -b "$ADDR" -k configBlackList -v "maxMessageSize"
    settle
    shown after flushIntervalCommitLog 900
    shown after fileReservedTime 48
    shown after maxMessageSize 1024
    expect refused_big "CODE: 13 "
    refute refused_big "SEND_OK"
    expect small "^$BROKER +[0-9]+ +SEND_OK +[0-9A-F]{32}"
    for key in path home list; do
        expect "refused_$key" "CODE: 16 +DESC: Can not update config in black list\."
        refute "refused_$key" "update broker config success"
    done

    step "persisted to $conf, kept across a restart ($target)"
    for key in flushIntervalCommitLog=900 fileReservedTime=48 maxMessageSize=1024; do
        grep -qx -- "$key" "$conf" || die "$conf has no line $key"
    done
    grep -q "$WORK/elsewhere.conf" "$conf" && die "$conf took a black-listed value"
    $restart
    wait_for "clusterList lists the restarted master" master_listed
    run restarted getBrokerConfig -b "$ADDR"
    shown restarted flushIntervalCommitLog 900
    shown restarted fileReservedTime 48
    shown restarted maxMessageSize 1024

    step "updateBrokerConfig back to the defaults ($target)"
    mq flush_back updateBrokerConfig -b "$ADDR" -k flushIntervalCommitLog -v 500
    mq size_back updateBrokerConfig -b "$ADDR" -k maxMessageSize -v 4194304
    settle
    mq back getBrokerConfig -b "$ADDR"
    mq big sendMessage -t "$TOPIC" -p "$BIG_BODY"
    settle
    shown back flushIntervalCommitLog 500
    shown back maxMessageSize 4194304
    expect big "^$BROKER +[0-9]+ +SEND_OK +[0-9A-F]{32}"
    grep -qx "flushIntervalCommitLog=500" "$conf" || die "$conf does not hold flushIntervalCommitLog=500"
    echo "mqadmin broker config: PASS $(find "$WORK/out" -name '*.cmd' | wc -l) mqadmin runs against $target ($((SECONDS - T0))s)"
}

for target in $TARGETS; do
    rm -rf "$WORK/out"
    case "$target" in
    comet)
        step "starting comet serve"
        comet_serve_start
        check "comet serve" "$WORK/data/store/config/broker.properties" comet_serve_restart
        comet_serve_stop
        ;;
    apache)
        step "starting Apache RocketMQ $VERSION"
        apache_start
        check "Apache RocketMQ $VERSION" "$WORK/apache/conf/broker.conf" apache_restart_broker
        apache_stop
        ;;
    *) die "unknown target $target" ;;
    esac
done
