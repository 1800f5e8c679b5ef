#!/usr/bin/env bash
# Every mqadmin-style `comet` subcommand, with --json, against two targets after the same
# preparation: `comet serve`, then Apache RocketMQ 5.3.3's name server and broker
# (interop/apache/run.sh, cluster named DefaultCluster like Comet's, and with
# useServerSideResetOffset=false so that resetting an offline group takes the client's
# CONSUMER_NOT_ONLINE fallback, which is checked, and the trace topic on). compare.py then reduces each
# answer to what must agree (topic names, queue counts, perms, offsets and lags, message keys and
# bodies, settings read back after a set) and prints one line per command per target, and fails
# when the two targets disagree.
#
# Preparation on each target: topic CliTopic with 4 queues and 8 messages keyed ck0..ck7; group
# CliOnline consuming it with a push consumer that stays online; group CliOffline that consumed 5
# messages and left (pull mode); group CliPushCount that consumed 3 in push mode and left (its lag
# must be exactly the 5 it did not print, on both targets); a producer of group CliProducers sending to CliBenchTopic meanwhile.
#
#   interop/cli/run.sh
#
# Environment (defaults in brackets):
#   CLI_WAIT [60]          seconds any single wait may take
#   CLI_TARGETS [comet apache]  which targets to run (compare.py needs both)
#   CLI_WORKDIR [mktemp]   data, logs and answers; removed on success unless CLI_KEEP=1
#   CARGO_TARGET_DIR       honoured by cargo as usual
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WAIT="${CLI_WAIT:-60}"
read -ra TARGETS <<<"${CLI_TARGETS:-comet apache}"
APACHE="$REPO/interop/apache/run.sh"
TOPIC=CliTopic
BENCH_TOPIC=CliBenchTopic
TEMP_TOPIC=CliTempTopic
CLUSTER=DefaultCluster
BROKER=broker-a

T0=$SECONDS
step() { echo "== cli: $* ($((SECONDS - T0))s)"; }

if [[ -n "${CLI_WORKDIR:-}" ]]; then
    WORK="$CLI_WORKDIR"
    mkdir -p "$WORK"
else
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/cli-interop.XXXXXX")"
fi
WORK="$(cd "$WORK" && pwd)"

SERVE_PID=""
CLIENT_PIDS=()
FAILED=no
stop_clients() {
    local pid
    for pid in "${CLIENT_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${CLIENT_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    CLIENT_PIDS=()
}
die() {
    FAILED=yes
    local f
    for f in "$WORK"/serve.log "$WORK"/apache/broker.out; do
        [[ -f "$f" ]] || continue
        echo "---- $f" >&2
        tail -20 "$f" >&2
    done
    echo "cli interop: FAIL: $*" >&2
    exit 1
}
cleanup() {
    local rc=$?
    stop_clients
    comet_serve_stop
    if [[ -d "$WORK/apache" ]]; then "$APACHE" stop "$WORK/apache" >/dev/null 2>&1 || true; fi
    if [[ $rc -eq 0 && $FAILED == no && "${CLI_KEEP:-0}" != 1 ]]; then
        rm -rf "$WORK"
    else
        echo "cli interop: work directory kept: $WORK" >&2
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck source=interop/lib/targets.sh
source "$REPO/interop/lib/targets.sh"

for tool in java mvn python3 cargo; do
    command -v "$tool" >/dev/null || die "$tool is required (interop/tests.sh installs the JDK and Maven)"
done

step "building comet"
(cd "$REPO" && cargo build -q -p comet) || die "cargo build -p comet failed"
COMET="${CARGO_TARGET_DIR:-$REPO/target}/debug/comet"
[[ "$COMET" == /* ]] || COMET="$REPO/$COMET"
[[ -x "$COMET" ]] || die "no comet binary at $COMET"

# c <name> <args...>: `comet <args> -n $NAMESRV --json`; stdout in <name>.json, stderr in
# <name>.err, exit code in <name>.rc (a failing command is an answer too: compare.py reads it).
c() {
    local name=$1 rc=0
    shift
    timeout "$WAIT" "$COMET" "$@" -n "$NAMESRV" --json >"$OUT/$name.json" 2>"$OUT/$name.err" || rc=$?
    echo "$rc" >"$OUT/$name.rc"
}

# ok <name> <args...>: like c, and the command must succeed.
ok() {
    c "$@"
    [[ "$(cat "$OUT/$1.rc")" == 0 ]] || die "comet ${*:2}: $(head -3 "$OUT/$1.err")"
}

# field <json file> <python expression over `d`>: one value of an answer.
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

indexed() { grep -q . <<<"$("$COMET" msg by-key -n "$NAMESRV" --json "$TOPIC" "$1" 2>/dev/null)"; }
lag_is() {
    [[ "$("$COMET" group progress -n "$NAMESRV" -t "$TOPIC" --json "$1" 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["diffTotal"])' 2>/dev/null)" == "$2" ]]
}
online() { "$COMET" group connections -n "$NAMESRV" --json "$1" >/dev/null 2>&1; }
producing() { "$COMET" producer connections -n "$NAMESRV" -g CliProducers -t "$BENCH_TOPIC" >/dev/null 2>&1; }
route_perm_is() {
    [[ "$("$COMET" topic route -n "$NAMESRV" --json "$TOPIC" 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["queueDatas"][0]["perm"])' 2>/dev/null)" == "$1" ]]
}
traced() { grep -q '"type":"Pub"' <<<"$("$COMET" msg trace -n "$NAMESRV" --json --id "$1" 2>/dev/null)"; }
master_listed() {
    grep -q '"brokerId":0' <<<"$("$COMET" cluster-list -n "$NAMESRV" --json 2>/dev/null)"
}

prepare() {
    wait_for "a master is listed" master_listed
    ADDR="$("$COMET" cluster-list -n "$NAMESRV" --json | python3 -c 'import json,sys
print(next(b["addr"] for b in json.load(sys.stdin)["brokers"] if b["brokerId"] == 0))')"
    ok create topic create "$TOPIC" -c "$CLUSTER" -r 4 -w 4
    ok create_bench topic create "$BENCH_TOPIC" -c "$CLUSTER" -r 1 -w 1
    ok create_temp topic create "$TEMP_TOPIC" -b "$ADDR" -r 2 -w 2
    for g in CliOnline CliOffline CliPushCount CliClone CliCfg; do
        ok "create_$g" group create "$g" -c "$CLUSTER"
    done
    "$COMET" produce -n "$NAMESRV" "$TOPIC" --count 8 --keys "ck{i}" --body "cb{i}" --tags TagA \
        --json >"$OUT/produce.jsonl" || die "comet produce failed"
    wait_for "the last message is indexed" indexed ck7
    "$COMET" consume -n "$NAMESRV" "$TOPIC" --mode pull --from first --count 5 -g CliOffline \
        >/dev/null || die "the offline group could not consume"
    "$COMET" consume -n "$NAMESRV" "$TOPIC" --mode push --from first --count 3 -g CliPushCount \
        >/dev/null || die "the push-count group could not consume"
    "$COMET" consume -n "$NAMESRV" "$TOPIC" --mode push --from first -g CliOnline \
        >"$OUT/online.out" 2>&1 &
    CLIENT_PIDS+=($!)
    "$COMET" bench produce -n "$NAMESRV" -t "$BENCH_TOPIC" --no-create -g CliProducers -p 1 \
        --rate 2 -d 600 >"$OUT/bench.out" 2>&1 &
    CLIENT_PIDS+=($!)
    wait_for "CliOnline is online" online CliOnline
    wait_for "CliOnline consumed everything" lag_is CliOnline 0
    wait_for "CliOffline committed 5" lag_is CliOffline 3
    wait_for "CliPushCount committed exactly the 3 it printed" lag_is CliPushCount 5
    wait_for "CliProducers is online" producing
}

# commands: every subcommand once (reads first, then the changes, each read back).
commands() {
    local uniq offset_id qid qoff client
    read -r uniq offset_id qid qoff < <(python3 -c 'import json,sys
m = [json.loads(l) for l in open(sys.argv[1])][2]
print(m["msgId"], m["offsetMsgId"], m["queueId"], m["queueOffset"])' "$OUT/produce.jsonl")
    client="$(field <("$COMET" group connections -n "$NAMESRV" --json CliOnline) 'd["connectionSet"][0]["clientId"]')"
    step "reads"
    c topic_list topic list
    c topic_list_c topic list -c
    c topic_route topic route "$TOPIC"
    c topic_status topic status "$TOPIC"
    c topic_cluster_list topic cluster-list "$TOPIC"
    c group_progress group progress CliOffline -t "$TOPIC"
    c group_progress_push group progress CliPushCount -t "$TOPIC"
    c group_connections group connections CliOnline
    c group_status group status CliOnline
    c group_config group config CliCfg
    c group_consume_stats group consume-stats -b "$ADDR"
    c producer_connections producer connections -g CliProducers -t "$BENCH_TOPIC"
    c msg_by_key msg by-key "$TOPIC" ck3
    c msg_by_id msg by-id "$offset_id"
    c msg_by_unique_key msg by-unique-key "$TOPIC" "$uniq"
    c msg_by_offset msg by-offset -t "$TOPIC" -b "$BROKER" -i "$qid" -o "$qoff"
    c msg_print msg print "$TOPIC"
    c msg_consume_directly msg consume-directly "$offset_id" -g CliOnline -d "$client"
    c cluster_list cluster-list -m
    c broker_status broker-status -b "$ADDR"
    c stats_all stats-all -t "$TOPIC"
    step "changes"
    c topic_update_perm topic update-perm "$TOPIC" -p 4
    c topic_route_after_perm topic route "$TOPIC"
    c topic_update_perm_back topic update-perm "$TOPIC" -p 6
    c topic_delete topic delete "$TEMP_TOPIC" -c "$CLUSTER"
    c topic_list_after_delete topic list
    c group_create group create CliCfg -c "$CLUSTER" -r 3 -q 2 -s false
    c group_config_after_create group config CliCfg
    c group_delete group delete CliCfg -c "$CLUSTER" -r
    c group_config_after_delete group config CliCfg
    c group_clone_offset group clone-offset -s CliOffline -d CliClone -t "$TOPIC"
    c group_progress_clone group progress CliClone -t "$TOPIC"
    c group_reset_offset group reset-offset CliOffline "$TOPIC" -s 0
    c group_progress_after_reset group progress CliOffline -t "$TOPIC"
    c group_skip_backlog group skip-backlog CliOffline "$TOPIC"
    c group_progress_after_skip group progress CliOffline -t "$TOPIC"
    c broker_config_get broker-config get -b "$ADDR" brokerPermission
    c broker_config_set broker-config set -b "$ADDR" brokerPermission=4
    c broker_config_after_set broker-config get -b "$ADDR" brokerPermission
    c broker_config_set_back broker-config set -b "$ADDR" brokerPermission=6
    wait_for "the broker re-registers with perm 6" route_perm_is 6
    c namesrv_config_set namesrv-config set orderMessageEnable=false
    c namesrv_config_after_set namesrv-config get orderMessageEnable
    c broker_perm_wipe broker-perm wipe-write "$BROKER"
    c topic_route_after_wipe topic route "$TOPIC"
    c broker_perm_add broker-perm add-write "$BROKER"
    c topic_route_after_add topic route "$TOPIC"
    step "sending to one queue, with a trace"
    ok msg_send produce "$TOPIC" --body cs -b "$BROKER" -i 3 --keys cs1 --trace
    wait_for "the message sent to queue 3 is indexed" indexed cs1
    c msg_send_found msg by-key "$TOPIC" cs1
    SENT_ID="$(field "$OUT/msg_send.json" 'd["msgId"]')"
    wait_for "the trace of the message sent is stored" traced "$SENT_ID"
    c msg_trace msg trace --id "$SENT_ID"
}

for target in "${TARGETS[@]}"; do
    OUT="$WORK/answers/$target"
    rm -rf "$OUT"
    mkdir -p "$OUT"
    case "$target" in
    comet)
        step "starting comet serve"
        comet_serve_start
        prepare
        commands
        stop_clients
        comet_serve_stop
        ;;
    apache)
        step "starting Apache RocketMQ 5.3.3"
        CLUSTER_NAME="$CLUSTER" BROKER_NAME="$BROKER" BROKER_EXTRA_CONF="useServerSideResetOffset=false
traceTopicEnable=true" \
            apache_start
        prepare
        commands
        [[ "$(field "$OUT/group_reset_offset.json" 'd["offline"]')" == True ]] ||
            die "resetting the offline group on Apache did not take the CONSUMER_NOT_ONLINE fallback"
        stop_clients
        apache_stop
        ;;
    *) die "unknown target $target" ;;
    esac
done

step "comparing"
python3 "$HERE/compare.py" "$WORK/answers" "${TARGETS[@]}" || die "the targets answer differently"
step "done"
