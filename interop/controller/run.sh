#!/usr/bin/env bash
# Failover of a RocketMQ broker group in controller mode, under continuous load, on loopback.
#
# Starts a quorum of controllers (Apache RocketMQ 5.3.3's `ControllerStartup`, or `comet controller`
# with the very same controller.conf files), one Apache 5.3.3 name server and one broker group of
# three Apache 5.3.3 brokers in controller mode (enableControllerMode, allAckInSyncStateSet: a send
# is acknowledged only once every replica of the SyncStateSet has it; no brokerId or brokerRole in
# their broker.conf, the controllers assign both). Then:
#
#   1. waits until a master is elected (brokerId 0 in the name server's broker table) and the
#      SyncStateSet the controller leader reports holds all three replicas (rmq.py asks the name
#      server and the controllers over the remoting protocol); mqadmin getSyncStateSet
#      (rocketmq-tools 5.3.3) prints the controller's view here and at the end, as a cross-check;
#   2. the official Java client (java/, ControllerLoad) creates the topic (QUEUES queues) on every
#      replica and produces sync sends of distinct numbered bodies, one at a time, at up to RATE per
#      second, logging every acknowledged send with its wall-clock time and the broker that stored
#      it;
#   3. FAILOVERS rounds: find the master (brokerId 0 in the topic's route), kill -9 it (or, with
#      FAULT=sigstop, SIGSTOP it until a new master took writes, at least STOP_SECS, then SIGCONT),
#      record the time, wait until a send is acknowledged by another broker (the round fails after
#      FAILOVER_WAIT seconds; when the controller named the new master and when the route showed
#      it are noted on the way), restart the killed broker from its broker.conf and wait until it is
#      a slave in the SyncStateSet again; SETTLE seconds of load between rounds;
#   4. stops the load, reads the whole topic back with a new consumer group (lite pull consumer,
#      every queue from offset 0) and compares (check.py).
#
# Prints one line per failover with its RTO (fault time to the first SEND_OK stored by another
# broker, as the client saw it) and the totals: acknowledged, lost (acknowledged, never delivered),
# duplicated deliveries. Exits non-zero when a message was lost, a failover or a rejoin did not
# complete in time, or a process failed; then the logs of every process are printed. Every process
# listens on 127.0.0.1 (the brokers' HA listeners too, see LoopbackBrokerStartup); data and logs
# live in a temporary directory, removed on success.
#
#   interop/controller/run.sh
#   CONTROLLER=comet FAILOVERS=5 interop/controller/run.sh
#
# Environment knobs (defaults in brackets):
#   CONTROLLER [apache]        apache: Apache ControllerStartup JVMs; comet: `$COMET_BIN controller -c cN.conf`
#   COMET_BIN [target/debug/comet]  the comet binary; when unset, `cargo build -p comet` builds it
#   CONTROLLERS [3]            controllers in the quorum (3 or 1)
#   FAILOVERS [2]              fault rounds
#   FAULT [kill]               kill (kill -9 of the master) | sigstop (freeze the master) |
#                              elect (mqadmin electMaster names another in-sync replica master)
#   STOP_SECS [20]             sigstop: the shortest time the master stays frozen
#   FAILOVER_WAIT [60]         seconds from a fault to the first SEND_OK by another broker
#   START_WAIT [300]           seconds for the servers to start, a group to form, a broker to rejoin
#   RATE [200]                 sends per second (one sync send at a time)
#   MSG_SIZE [256]             body bytes
#   QUEUES [4]                 queues of the topic
#   SEND_TIMEOUT_MS [1000]     sendMsgTimeout of the producer
#   RETRIES [1]                retryTimesWhenSendFailed of the producer
#   POLL_NAMESRV_MS [100]      how often the producer refreshes the route (pollNameServerInterval);
#                              an RTO includes up to this much of route staleness
#   WARMUP [10]                seconds of load before the first fault
#   SETTLE [5]                 seconds of load after a broker rejoined, before the next fault
#   SEGMENT [4194304]          mappedFileSizeCommitLog of the brokers
#   BROKER_HEAP [512m]         -Xms/-Xmx of each broker; the name server and controllers get 256m
#   WORK_DIR [mktemp]          data and logs; removed at the end unless something failed or KEEP=1
#   CARGO_TARGET_DIR           honoured by cargo as usual
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
CONTROLLER="${CONTROLLER:-apache}"
CONTROLLERS="${CONTROLLERS:-3}"
FAILOVERS="${FAILOVERS:-2}"
FAULT="${FAULT:-kill}"
STOP_SECS="${STOP_SECS:-20}"
FAILOVER_WAIT="${FAILOVER_WAIT:-60}"
START_WAIT="${START_WAIT:-300}"
RATE="${RATE:-200}"
MSG_SIZE="${MSG_SIZE:-256}"
QUEUES="${QUEUES:-4}"
SEND_TIMEOUT_MS="${SEND_TIMEOUT_MS:-1000}"
RETRIES="${RETRIES:-1}"
POLL_NAMESRV_MS="${POLL_NAMESRV_MS:-100}"
WARMUP="${WARMUP:-10}"
SETTLE="${SETTLE:-5}"
SEGMENT="${SEGMENT:-4194304}"
BROKER_HEAP="${BROKER_HEAP:-512m}"
SMALL_HEAP=256m
VERSION=5.3.3
BIND_IP=127.0.0.1
CLUSTER=CometControllerCluster
GROUP_NAME=broker-a
TOPIC=ControllerFailoverTopic
CONSUMER_GROUP="ControllerCheck_$$"
REPLICAS=3
STOP_TIMEOUT=15

T0=$SECONDS
step() { echo "== controller: $* ($((SECONDS - T0))s)"; }
die() {
    echo "controller: FAIL: $*" >&2
    exit 1
}
now_ms() { date +%s%3N; }

case "$CONTROLLER" in apache | comet) ;; *) die "CONTROLLER must be apache or comet" ;; esac
case "$FAULT" in kill | sigstop | elect) ;; *) die "FAULT must be kill, sigstop or elect" ;; esac
case "$CONTROLLERS" in 1 | 3) ;; *) die "CONTROLLERS must be 1 or 3" ;; esac
for tool in java mvn python3; do
    command -v "$tool" >/dev/null || die "$tool is required (apt-get install openjdk-17-jdk-headless maven python3)"
done

if [[ -n "${WORK_DIR:-}" ]]; then
    D="$WORK_DIR"
    mkdir -p "$D"
    [[ -z "$(ls -A "$D")" ]] || die "$D is not empty"
else
    D="$(mktemp -d "${TMPDIR:-/tmp}/controller-interop.XXXXXX")"
fi
D="$(cd "$D" && pwd)"
mkdir -p "$D/pids" "$D/logs" "$D/conf"

# --- processes --------------------------------------------------------------------------------
# Every process started here has a pid file $D/pids/<name>.pid; only pids whose command line still
# mentions $D are ever signalled.

pid_of() { cat "$D/pids/$1.pid" 2>/dev/null || true; }
ours() { # ours <pid>: the pid is alive and one of this run's processes
    local pid=$1
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$D"
}
alive() { ours "$(pid_of "$1")"; }
signal() { # signal <name> <SIG>
    local pid
    pid="$(pid_of "$1")"
    ours "$pid" && kill "-$2" "$pid" 2>/dev/null || true
}

# launch_java <name> <kind> <heap> <main class> <args...>: output in $D/logs/<name>.out; RocketMQ's
# own logs (kind = controller | namesrv | broker picks Apache's logback configuration) under
# $D/<name>/home/logs/rocketmqlogs.
launch_java() {
    local name=$1 kind=$2 heap=$3 main=$4
    shift 4
    mkdir -p "$D/$name/home"
    # A subshell: the process is not a job of this shell (no "Killed" notices). setsid: a ^C of
    # this script reaches it only through the cleanup below.
    (
        ROCKETMQ_HOME="$D/$name/home" setsid java -server -Xms"$heap" -Xmx"$heap" -XX:MaxDirectMemorySize=512m \
            --add-opens java.base/java.lang=ALL-UNNAMED -Duser.home="$D/$name/home" \
            -Drocketmq.home.dir="$D/$name/home" -Drmq.logback.configurationFile="rmq.$kind.logback.xml" \
            -cp "$SERVER_CP" "$main" "$@" >"$D/logs/$name.out" 2>&1 </dev/null &
        echo $! >"$D/pids/$name.pid"
    )
    exec_done "$name"
}

# exec_done <name>: waits (up to 5 s) until the process just launched runs its own program:
# between fork and exec it still shows this script's command line, and `alive` would call it gone.
exec_done() {
    local _
    for _ in $(seq 50); do
        alive "$1" && return 0
        sleep 0.1
    done
}

launch_comet() { # launch_comet <name> <args...>
    local name=$1
    shift
    (
        setsid "$COMET" "$@" >"$D/logs/$name.out" 2>&1 </dev/null &
        echo $! >"$D/pids/$name.pid"
    )
    exec_done "$name"
}

# load <args...>: the Java client in the foreground, output appended to $D/logs/client.out.
load() {
    java -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Duser.home="$D/client-home" \
        -Drocketmq.client.logRoot="$D/client-logs" -Dcom.rocketmq.sendMessageWithVIPChannel=false \
        -cp "$CLIENT_CP" dev.comet.interop.controller.load.ControllerLoad "$@" 2>&1 | tee -a "$D/logs/client.out"
    return "${PIPESTATUS[0]}"
}

print_logs() {
    local f
    for f in "$D"/logs/*.out; do
        [[ -f "$f" ]] || continue
        echo "----- $f (last 40 lines)"
        tail -n 40 "$f"
    done
    for f in "$D"/*/home/logs/rocketmqlogs/{controller,dledger,namesrv,broker,store}.log; do
        [[ -f "$f" ]] || continue
        echo "----- $f (WARN/ERROR, last 30)"
        grep -E ' (WARN|ERROR) ' "$f" | tail -n 30 || true
    done
    for f in "$D"/*/home/logs/rocketmqlogs/{controller,broker}.log; do
        [[ -f "$f" ]] || continue
        echo "----- $f (last 30 lines)"
        tail -n 30 "$f"
    done
    if [[ -s "$D/faults" ]]; then echo "----- faults"; cat "$D/faults"; fi
    return 0
}

cleanup() {
    local rc=$? f name deadline
    trap - EXIT INT TERM
    [[ $rc -eq 0 ]] || { echo "controller: logs of every process follow" >&2; print_logs >&2; }
    touch "$D/stop-load" 2>/dev/null || true
    for f in "$D"/pids/*.pid; do
        [[ -f "$f" ]] || continue
        name="$(basename "$f" .pid)"
        signal "$name" CONT
        signal "$name" TERM
    done
    deadline=$((SECONDS + STOP_TIMEOUT))
    for f in "$D"/pids/*.pid; do
        [[ -f "$f" ]] || continue
        name="$(basename "$f" .pid)"
        while alive "$name" && ((SECONDS < deadline)); do sleep 0.2; done
        signal "$name" KILL
    done
    wait 2>/dev/null || true
    if [[ $rc -eq 0 && "${KEEP:-0}" != 1 ]]; then
        rm -rf "$D"
    else
        echo "controller: work directory kept: $D" >&2
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# wait_for <seconds> <what> <command...>: polls the command until it succeeds.
wait_for() {
    local secs=$1 what=$2
    shift 2
    local deadline=$((SECONDS + secs))
    until "$@"; do
        ((SECONDS < deadline)) || die "$what: not within ${secs}s"
        sleep 0.3
    done
}
listening() { (exec 3<>"/dev/tcp/$BIND_IP/$1") 2>/dev/null; }
up_and_listening() { alive "$1" || die "$1 exited; see $D/logs/$1.out"; listening "$2"; }

# --- builds -----------------------------------------------------------------------------------
step "building: Apache $VERSION classpath (controller, name server, broker), the Java client$([[ $CONTROLLER == comet ]] && echo ", comet")"
# build_maven <dir>: compiles a Maven project once and prints its runtime classpath.
build_maven() {
    local dir=$1 cp_file="$1/target/classpath.txt"
    if [[ ! -s "$cp_file" || ! -d "$dir/target/classes" ||
        -n "$(find "$dir/src" "$dir/pom.xml" -newer "$cp_file" -print -quit)" ]]; then
        mvn -q -B -f "$dir/pom.xml" compile dependency:build-classpath -Dmdep.outputFile="$cp_file" >&2 ||
            die "maven could not build $dir"
        touch "$cp_file"
    fi
    echo "$dir/target/classes:$(cat "$cp_file")"
}
SERVER_CP="$(build_maven "$HERE")"
CLIENT_CP="$(build_maven "$HERE/java")"
if [[ $CONTROLLER == comet ]]; then
    if [[ -n "${COMET_BIN:-}" ]]; then
        COMET="$COMET_BIN"
    else
        (cd "$REPO" && cargo build -q -p comet) || die "cargo build -p comet failed"
        COMET="${CARGO_TARGET_DIR:-$REPO/target}/debug/comet"
    fi
    [[ "$COMET" == /* ]] || COMET="$REPO/$COMET"
    [[ -x "$COMET" ]] || die "no comet binary at $COMET"
fi

# --- ports and configuration ------------------------------------------------------------------
# A name server port, the controllers' ports, and per broker a port P with P-2 (fast channel), P
# and P+1 (HA) free, none overlapping.
read -r -a PORTS < <(python3 - "$BIND_IP" "$CONTROLLERS" "$REPLICAS" <<'PY'
import socket, sys
host, ncontrollers, nbrokers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def free(port):
    s = socket.socket()
    try:
        s.bind((host, port)); return True
    except OSError:
        return False
    finally:
        s.close()
def any_port():
    s = socket.socket(); s.bind((host, 0)); p = s.getsockname()[1]; s.close(); return p
taken, out = set(), []
while len(out) < 1 + ncontrollers:
    p = any_port()
    if p not in taken:
        taken.add(p); out.append(p)
for _ in range(1000):
    if len(out) == 1 + ncontrollers + nbrokers:
        break
    p = any_port()
    block = {p - 2, p - 1, p, p + 1}
    if p > 1026 and not block & taken and all(free(q) for q in (p - 2, p, p + 1)):
        out.append(p); taken |= block
else:
    sys.exit("no free ports")
print(*out)
PY
)
NS_PORT=${PORTS[0]}
NAMESRV="$BIND_IP:$NS_PORT"
CTL_PORTS=("${PORTS[@]:1:$CONTROLLERS}")
BROKER_PORTS=("${PORTS[@]:$((1 + CONTROLLERS)):$REPLICAS}")
PEERS="" CONTROLLER_ADDRS=""
for i in "${!CTL_PORTS[@]}"; do
    PEERS+="${PEERS:+;}n$i-$BIND_IP:${CTL_PORTS[$i]}"
    CONTROLLER_ADDRS+="${CONTROLLER_ADDRS:+;}$BIND_IP:${CTL_PORTS[$i]}"
done

for i in "${!CTL_PORTS[@]}"; do
    mkdir -p "$D/c$i/store"
    # bindAddress: the controller's remoting server (Apache answers brokers on the DLedger peer
    # port, which takes this address) listens on loopback only.
    cat >"$D/conf/c$i.conf" <<EOF
controllerDLegerGroup=CometControllerGroup
controllerDLegerPeers=$PEERS
controllerDLegerSelfId=n$i
controllerStorePath=$D/c$i/store
mappedFileSize=16777216
enableElectUncleanMaster=false
notifyBrokerRoleChanged=true
bindAddress=$BIND_IP
EOF
done
cat >"$D/conf/namesrv.conf" <<EOF
listenPort=$NS_PORT
bindAddress=$BIND_IP
EOF
for i in "${!BROKER_PORTS[@]}"; do
    p=${BROKER_PORTS[$i]}
    mkdir -p "$D/b$i/store/commitlog"
    # waitTimeMillsInSendQueue: Apache sheds sends that waited longer than this (200 ms by default)
    # in its queue with SYSTEM_BUSY; on a loaded 2-core box that is scheduling, not failover.
    cat >"$D/conf/b$i.conf" <<EOF
brokerClusterName=$CLUSTER
brokerName=$GROUP_NAME
namesrvAddr=$NAMESRV
enableControllerMode=true
controllerAddr=$CONTROLLER_ADDRS
allAckInSyncStateSet=true
bindAddress=$BIND_IP
brokerIP1=$BIND_IP
brokerIP2=$BIND_IP
listenPort=$p
haListenPort=$((p + 1))
storePathRootDir=$D/b$i/store
storePathCommitLog=$D/b$i/store/commitlog
mappedFileSizeCommitLog=$SEGMENT
diskMaxUsedSpaceRatio=99
waitTimeMillsInSendQueue=5000
EOF
done
broker_index() { # broker_index <ip:port>: which broker listens there
    local i
    for i in "${!BROKER_PORTS[@]}"; do
        [[ "$1" == "$BIND_IP:${BROKER_PORTS[$i]}" ]] && { echo "$i"; return 0; }
    done
    return 1
}

start_controller() {
    local i=$1
    if [[ $CONTROLLER == apache ]]; then
        launch_java "c$i" controller "$SMALL_HEAP" org.apache.rocketmq.controller.ControllerStartup -c "$D/conf/c$i.conf"
    else
        launch_comet "c$i" controller -c "$D/conf/c$i.conf"
    fi
}
start_broker() {
    launch_java "b$1" broker "$BROKER_HEAP" dev.comet.interop.controller.LoopbackBrokerStartup -c "$D/conf/b$1.conf"
}

# --- probes -----------------------------------------------------------------------------------
# master_addr [topic]: the address the name server lists as brokerId 0 of the group (empty if none).
master_addr() {
    python3 "$HERE/rmq.py" master "$NAMESRV" "$GROUP_NAME" ${1:+"$1"} 2>/dev/null |
        python3 -c 'import json,sys; print(json.load(sys.stdin).get("master") or "")' 2>/dev/null || true
}
# sync_state: one line of JSON from the controller leader (empty when none answered).
sync_state() { python3 "$HERE/rmq.py" syncstate "$CONTROLLER_ADDRS" "$GROUP_NAME" 2>"$D/last-syncstate.err" || true; }
# group_ready <need_addr|-> [topic]: a master in the route, the controller agrees, all replicas
# in the SyncStateSet and alive; with need_addr, that broker is one of them and not the master.
group_ready() {
    local need=$1 topic=${2:-} m s
    m="$(master_addr "$topic")"
    [[ -n "$m" ]] || return 1
    s="$(sync_state)"
    [[ -n "$s" ]] || return 1
    python3 - "$s" "$m" "$need" "$REPLICAS" <<'PY'
import json, sys
s, m, need, n = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
ok = (s.get("masterAddress") == m and len(set(s["inSync"])) >= n
      and all(s["alive"].get(a) is not False for a in s["inSync"])
      and (need == "-" or (need in s["inSync"] and need != m)))
sys.exit(0 if ok else 1)
PY
}
describe_group() {
    local s
    s="$(sync_state)"
    python3 - "$s" "$(master_addr "${1:-}")" <<'PY'
import json, sys
s = json.loads(sys.argv[1] or "{}")
print(f"route master {sys.argv[2] or '-'}; controller {s.get('controller', '-')} says master "
      f"{s.get('masterAddress', '-')} (brokerId {s.get('masterBrokerId', '-')}, epoch {s.get('masterEpoch', '-')}), "
      f"SyncStateSet epoch {s.get('syncStateSetEpoch', '-')}: "
      + ", ".join(f"{a}=id{s['ids'].get(a)}" for a in s.get("inSync", []))
      + (f"; not in sync: {s['notInSync']}" if s.get("notInSync") else ""))
PY
}

# mqadmin_sync_state <tag>: Apache's mqadmin getSyncStateSet (asks the given controller for the
# leader, then the leader), printed indented.
mqadmin_sync_state() {
    local leader=${CONTROLLER_ADDRS%%;*}
    java -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Duser.home="$D/client-home" \
        -Drocketmq.client.logRoot="$D/client-logs" -cp "$CLIENT_CP" org.apache.rocketmq.tools.command.MQAdminStartup \
        getSyncStateSet -a "$leader" -b "$GROUP_NAME" >"$D/logs/mqadmin-$1.out" 2>&1 || true
    echo "controller: mqadmin getSyncStateSet -a $leader -b $GROUP_NAME ($1):"
    grep -v '^\s*$' "$D/logs/mqadmin-$1.out" | grep -v -i 'warn\|slf4j\|^\s*at ' | sed 's/^/    /' | head -20
}

# mqadmin_elect <master> <round>: Apache's mqadmin electMaster names another in-sync replica the
# group's master (a forced failover, the old master stays up and becomes a slave).
mqadmin_elect() {
    local target
    target="$(python3 - "$(sync_state)" "$1" <<'PY'
import json, sys
s = json.loads(sys.argv[1] or "{}")
ids = s.get("ids", {})
others = sorted(ids[a] for a in s.get("inSync", []) if a != sys.argv[2] and a in ids)
print(others[0] if others else "")
PY
)"
    [[ -n $target ]] || die "round $2: no other in-sync replica to elect ($(describe_group "$TOPIC"))"
    java -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Duser.home="$D/client-home" \
        -Drocketmq.client.logRoot="$D/client-logs" -cp "$CLIENT_CP" org.apache.rocketmq.tools.command.MQAdminStartup \
        electMaster -a "${CONTROLLER_ADDRS%%;*}" -c "$CLUSTER" -bn "$GROUP_NAME" -b "$target" \
        >"$D/logs/mqadmin-elect-$2.out" 2>&1 || die "round $2: mqadmin electMaster failed; see $D/logs/mqadmin-elect-$2.out"
    echo "controller: round $2: mqadmin electMaster -b $target:"
    grep '^#' "$D/logs/mqadmin-elect-$2.out" | sed 's/^/    /'
}

# check_loopback: every listening socket of this run's processes is on 127.0.0.1 (a warning
# otherwise: the failover test itself does not depend on it).
check_loopback() {
    command -v ss >/dev/null || return 0
    local f name pid bad=""
    for f in "$D"/pids/*.pid; do
        name="$(basename "$f" .pid)"
        pid="$(pid_of "$name")"
        ours "$pid" || continue
        bad+="$(ss -Hltnp 2>/dev/null | grep -F "pid=$pid," | awk -v n="$name" '$4 !~ /^(127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]):/ {printf " %s:%s", n, $4}')"
    done
    if [[ -n "$bad" ]]; then
        echo "controller: WARNING: listening beyond loopback:$bad"
    else
        echo "controller: every server listens on 127.0.0.1 only ($(ss -Hltnp 2>/dev/null | grep -c -F -f <(for f in "$D"/pids/*.pid; do echo "pid=$(cat "$f"),"; done)) sockets)"
    fi
}

# --- 1. servers -------------------------------------------------------------------------------
step "starting $CONTROLLERS $CONTROLLER controller(s) on ${CONTROLLER_ADDRS//;/ }, the name server on $NAMESRV"
for i in "${!CTL_PORTS[@]}"; do start_controller "$i"; done
launch_java namesrv namesrv "$SMALL_HEAP" org.apache.rocketmq.namesrv.NamesrvStartup -c "$D/conf/namesrv.conf"
for i in "${!CTL_PORTS[@]}"; do
    wait_for "$START_WAIT" "controller c$i listening on ${CTL_PORTS[$i]}" up_and_listening "c$i" "${CTL_PORTS[$i]}"
done
wait_for "$START_WAIT" "name server listening on $NS_PORT" up_and_listening namesrv "$NS_PORT"

step "starting $REPLICAS Apache brokers of group $GROUP_NAME in controller mode on ports ${BROKER_PORTS[*]}"
T_GROUP=$SECONDS
for i in "${!BROKER_PORTS[@]}"; do start_broker "$i"; done
for i in "${!BROKER_PORTS[@]}"; do
    wait_for "$START_WAIT" "broker b$i listening on ${BROKER_PORTS[$i]}" up_and_listening "b$i" "${BROKER_PORTS[$i]}"
done
brokers_alive() { local i; for i in "${!BROKER_PORTS[@]}"; do alive "b$i" || die "broker b$i exited; see $D/logs/b$i.out"; done; }
group_formed() { brokers_alive; group_ready -; }
wait_for "$START_WAIT" "a master elected and all $REPLICAS replicas in the SyncStateSet" group_formed
echo "controller: group formed $((SECONDS - T_GROUP)) s after the brokers started: $(describe_group)"
check_loopback
mqadmin_sync_state start

# --- 2. load ----------------------------------------------------------------------------------
step "creating $TOPIC ($QUEUES queues) on every replica"
load create-topic "$NAMESRV" "$GROUP_NAME" "$TOPIC" "$QUEUES" "$REPLICAS" 120 ||
    die "could not create $TOPIC"
ACKS="$D/acks"
: >"$ACKS"
: >"$D/faults"
step "producing at up to $RATE/s (sendMsgTimeout $SEND_TIMEOUT_MS ms, $RETRIES retries, route refresh $POLL_NAMESRV_MS ms)"
(
    java -Xms64m -Xmx256m -XX:+UseSerialGC -Duser.home="$D/client-home" -Drocketmq.client.logRoot="$D/client-logs" \
        -Dcom.rocketmq.sendMessageWithVIPChannel=false -cp "$CLIENT_CP" \
        dev.comet.interop.controller.load.ControllerLoad produce "$NAMESRV" "$TOPIC" "$ACKS" "$D/stop-load" \
        "$RATE" "$MSG_SIZE" "$SEND_TIMEOUT_MS" "$RETRIES" "$POLL_NAMESRV_MS" >"$D/logs/load.out" 2>&1 </dev/null &
    echo $! >"$D/pids/load.pid"
)
acked_some() { alive load || die "the load program exited; see $D/logs/load.out"; grep -q '^ack ' "$ACKS"; }
wait_for 120 "the first acknowledged send" acked_some
sleep "$WARMUP"

# --- 3. faults --------------------------------------------------------------------------------
rejoined() { alive "b$1" || die "broker b$1 exited after its restart; see $D/logs/b$1.out"; group_ready "$2" "$TOPIC"; }
for round in $(seq 1 "$FAILOVERS"); do
    alive load || die "the load program exited; see $D/logs/load.out"
    wait_for 60 "a master in the route before round $round" group_ready - "$TOPIC"
    master="$(master_addr "$TOPIC")"
    idx="$(broker_index "$master")" || die "the master $master is none of this run's brokers"
    pid="$(pid_of "b$idx")"
    ours "$pid" || die "broker b$idx (the master) is not running"
    step "round $round: $FAULT of the master b$idx $master (pid $pid)"
    from="$(stat -c %s "$ACKS")"
    t_fault="$(now_ms)"
    case $FAULT in
    kill) kill -KILL "$pid" ;;
    sigstop) kill -STOP "$pid" ;;
    elect)
        # The election is done when mqadmin returns; its JVM start is not part of the RTO.
        mqadmin_elect "$master" "$round"
        t_fault="$(now_ms)"
        ;;
    esac
    echo "$round $FAULT $t_fault $master" >>"$D/faults"
    watch="$(python3 "$HERE/check.py" watch "$ACKS" "$from" "$t_fault" "$master" "$NAMESRV" "$GROUP_NAME" \
        "$TOPIC" "$CONTROLLER_ADDRS" "$FAILOVER_WAIT")" || {
        signal "b$idx" CONT
        die "round $round: no send acknowledged by another broker within ${FAILOVER_WAIT}s of the $FAULT of $master ($watch; $(describe_group "$TOPIC"))"
    }
    eval "$watch" # first_ack ack_host controller_ms route_ms new_master
    echo "controller: round $round: RTO $((first_ack - t_fault)) ms (first SEND_OK on $ack_host); the controller named" \
        "$new_master master by +$controller_ms ms, the route showed it by +$route_ms ms (as polled every 50 ms)"
    echo "controller: round $round: $(describe_group "$TOPIC")"
    if [[ $FAULT == elect ]]; then
        step "round $round: waiting until the old master b$idx is a slave in the SyncStateSet"
    elif [[ $FAULT == kill ]]; then
        while ours "$pid"; do sleep 0.1; done
        mv "$D/logs/b$idx.out" "$D/logs/b$idx.round$round.out"
        start_broker "$idx"
        step "round $round: restarted b$idx; waiting until it is a slave in the SyncStateSet"
    else
        left=$((t_fault + STOP_SECS * 1000 - $(now_ms)))
        ((left <= 0)) || sleep "$(python3 -c "print($left / 1000)")"
        signal "b$idx" CONT
        step "round $round: SIGCONT to b$idx after $(($(now_ms) - t_fault)) ms; waiting until it is a slave in the SyncStateSet"
    fi
    t_rejoin=$SECONDS
    wait_for "$START_WAIT" "round $round: b$idx $master back in the SyncStateSet" rejoined "$idx" "$master"
    echo "controller: round $round: b$idx back in the SyncStateSet as a slave $((SECONDS - t_rejoin)) s later; $(describe_group "$TOPIC")"
    sleep "$SETTLE"
done

# --- 4. verdict -------------------------------------------------------------------------------
step "stopping the load"
touch "$D/stop-load"
load_stopped() { ! alive load; }
wait_for 60 "the load program to stop" load_stopped
grep '^controller-load: DONE' "$D/logs/load.out" || die "the load program failed; see $D/logs/load.out"
mqadmin_sync_state end

step "reading $TOPIC back with the new consumer group $CONSUMER_GROUP"
load consume "$NAMESRV" "$TOPIC" "$CONSUMER_GROUP" "$D/consumed" 300 || die "the consumer did not read the whole topic"
python3 "$HERE/check.py" report "$ACKS" "$D/consumed" "$D/faults" | tee "$D/report"
[[ ${PIPESTATUS[0]} -eq 0 ]] || die "messages lost or a failover incomplete"
step "PASS: $FAILOVERS $FAULT failover(s) with $CONTROLLERS $CONTROLLER controller(s)"
