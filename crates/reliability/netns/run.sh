#!/usr/bin/env bash
# Network-namespace fault suite: two name servers and two broker groups (a master and a slave
# each), every process in its own network namespace, load from a client namespace, and faults
# injected one round at a time, each followed by the checker (see RELIABILITY.md, "Replication").
#
#   crates/reliability/netns/run.sh [--quick|--long] [--role SYNC_MASTER|ASYNC_MASTER] [--keep]
#
#   --quick   the CI version (scripts/test.sh): kill -9 of a master, a cut link, a paused master,
#             short durations.
#   --long    every fault: kill -9 of a master, loss of a master's disk (with the operator's
#             restore), a cut link (slave, then master) longer than the HA housekeeping interval,
#             a paused master and a paused slave; each round also runs `comet bench produce`
#             (200 msg/s on a topic of its own) from the client namespace. Default.
#   --role    the masters' brokerRole (default SYNC_MASTER, inSyncReplicas 2).
#   --keep    keep the run directory (logs, ledgers, stores) even when every check passed.
#   --java    also run the Apache RocketMQ Java client (interop/java, FaultLoad): a Java producer
#             beside each round's Rust producer and a Java consumer in the Rust consumer's group.
#             On by default with --long when java and mvn are installed; JAVA_CLIENT_VERSION picks
#             4.9.8 (default) or 5.3.3.
#   --no-java the Rust client only.
#
# Needs root and `ip netns`; without either it says so and exits 0. Binaries: COMET_BIN and
# RELIABILITY_BIN, by default target/debug/comet and target/debug/comet-reliability (built if
# missing). Everything it creates (namespaces, veth pairs, a bridge, addresses 10.77.0.0/24)
# lives in namespaces named after this process and is deleted on exit.
set -euo pipefail
cd "$(dirname "$0")/../../.."

MODE=long
ROLE=SYNC_MASTER
KEEP=no
JAVA=auto
while (($#)); do
    case "$1" in
        --quick) MODE=quick ;;
        --long) MODE=long ;;
        --role) ROLE="$2"; shift ;;
        --keep) KEEP=yes ;;
        --java) JAVA=yes ;;
        --no-java) JAVA=no ;;
        *) echo "usage: $0 [--quick|--long] [--role SYNC_MASTER|ASYNC_MASTER] [--keep] [--java|--no-java]" >&2; exit 2 ;;
    esac
    shift
done
case "$ROLE" in SYNC_MASTER | ASYNC_MASTER) ;; *) echo "--role: SYNC_MASTER or ASYNC_MASTER" >&2; exit 2 ;; esac

skip() { echo "netns fault suite skipped: $*"; exit 0; }
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces)"
command -v ip >/dev/null || skip "no ip command (iproute2)"
PFX="cmtf$$-"
ip netns add "${PFX}probe" 2>/dev/null || skip "ip netns add is not permitted here"
ip netns del "${PFX}probe"

TARGET="${CARGO_TARGET_DIR:-target}"
COMET_BIN="${COMET_BIN:-$TARGET/debug/comet}"
RELIABILITY_BIN="${RELIABILITY_BIN:-$TARGET/debug/comet-reliability}"
if [[ ! -x $COMET_BIN || ! -x $RELIABILITY_BIN ]]; then
    cargo build --locked -p comet -p comet-reliability
fi
COMET_BIN="$(realpath "$COMET_BIN")"
RELIABILITY_BIN="$(realpath "$RELIABILITY_BIN")"

# The Java client: its classpath from the interop Maven project (offline: ~/.m2 must hold it).
JAVA_CLIENT_VERSION="${JAVA_CLIENT_VERSION:-4.9.8}"
JAVA_CP=""
if [[ $JAVA == yes || ($JAVA == auto && $MODE == long) ]]; then
    java_dir="interop/java"
    cp_file="$java_dir/target/$JAVA_CLIENT_VERSION/classpath.txt"
    if command -v java >/dev/null && command -v mvn >/dev/null &&
        mvn -q -B -o -f "$java_dir/pom.xml" -Drocketmq.client.version="$JAVA_CLIENT_VERSION" compile \
            dependency:build-classpath -Dmdep.outputFile="$(realpath -m "$cp_file")" >&2; then
        JAVA_CP="$(realpath "$java_dir/target/$JAVA_CLIENT_VERSION/classes"):$(cat "$cp_file")"
    elif [[ $JAVA == yes ]]; then
        echo "--java: cannot build interop/java for rocketmq-client $JAVA_CLIENT_VERSION (java, mvn, ~/.m2)" >&2
        exit 1
    else
        echo "netns fault suite: no Java client (java/mvn or the Maven artifacts missing); Rust client only"
    fi
fi

RUN="$(mktemp -d "${TMPDIR:-/tmp}/comet-netns.XXXXXX")"
SUMMARY="$RUN/summary.txt"
TOPIC=FaultTopic
QUEUES=4
NAMESRV="10.77.0.11:9876;10.77.0.12:9876"
if [[ $MODE == quick ]]; then
    ROUTE_REFRESH_MS=5000 # the clients' pollNameServerInterval: short, so the CI run is short
    FAULT_SECS=5
else
    ROUTE_REFRESH_MS=30000 # RocketMQ's default
    FAULT_SECS=30          # longer than haHousekeepingInterval (20 s): the HA connection drops
fi
BENCH_SECS=45 # long mode: each round also runs comet bench for this long, from the round's start

declare -A IP=([ns1]=10.77.0.11 [ns2]=10.77.0.12 [ma]=10.77.0.21 [sa]=10.77.0.22
    [mb]=10.77.0.31 [sb]=10.77.0.32 [cl]=10.77.0.100)
NODES=(ns1 ns2 ma sa mb sb cl)
declare -A PIDS=()
CREATED_NS=()
FAILED=0
ROUND=0

log() { echo "[$(date +%H:%M:%S)] $*"; }
now_ms() { date +%s%3N; }
ns() { echo "${PFX}$1"; }
in_ns() { local node=$1; shift; ip netns exec "$(ns "$node")" "$@"; }

cleanup() {
    local rc=$?
    for name in "${!PIDS[@]}"; do
        kill -CONT "${PIDS[$name]}" 2>/dev/null || true
        kill -9 "${PIDS[$name]}" 2>/dev/null || true
    done
    for name in "${!PIDS[@]}"; do wait "${PIDS[$name]}" 2>/dev/null || true; done
    for n in "${CREATED_NS[@]}"; do ip netns del "$n" 2>/dev/null || true; done
    if [[ $rc -eq 0 && $FAILED -eq 0 && $KEEP == no ]]; then
        rm -rf "$RUN"
    else
        echo "run directory kept: $RUN"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- network: one bridge in a hub namespace, one veth pair per node -----------------------------
net_up() {
    ip netns add "$(ns hub)"
    CREATED_NS+=("$(ns hub)")
    ip -n "$(ns hub)" link add br0 type bridge
    ip -n "$(ns hub)" link set br0 up
    for node in "${NODES[@]}"; do
        ip netns add "$(ns "$node")"
        CREATED_NS+=("$(ns "$node")")
        ip -n "$(ns hub)" link add name "h-$node" netns "$(ns hub)" type veth peer name eth0 netns "$(ns "$node")"
        ip -n "$(ns hub)" link set "h-$node" master br0
        ip -n "$(ns hub)" link set "h-$node" up
        ip -n "$(ns "$node")" link set lo up
        ip -n "$(ns "$node")" addr add "${IP[$node]}/24" dev eth0
        ip -n "$(ns "$node")" link set eth0 up
    done
}
link() { ip -n "$(ns hub)" link set "h-$1" "$2"; } # link ma down|up: cuts a node off everyone

# --- processes ----------------------------------------------------------------------------------
spawn() { # spawn NAME NODE CMD...: runs CMD in NODE's namespace, output to $RUN/NAME.log
    local name=$1 node=$2
    shift 2
    # A simple command, so that $! is the process itself (ip netns exec execs it).
    ip netns exec "$(ns "$node")" "$@" >>"$RUN/$name.log" 2>&1 &
    PIDS[$name]=$!
}
stop() { # stop NAME [SIGNAL]: signal (TERM) and reap
    local pid=${PIDS[$1]:-}
    [[ -n $pid ]] || return 0
    kill -CONT "$pid" 2>/dev/null || true
    kill "-${2:-TERM}" "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    unset "PIDS[$1]"
}
rel() { in_ns cl "$RELIABILITY_BIN" fault "$@"; }
export RUST_BACKTRACE=0

broker_conf() { # broker_conf NODE NAME ID ROLE
    local node=$1 dir="$RUN/$1"
    mkdir -p "$dir"
    cat >"$dir/broker.conf" <<EOF
brokerClusterName=FaultCluster
brokerName=$2
brokerId=$3
brokerRole=$4
bindAddress=${IP[$node]}
brokerIP1=${IP[$node]}
listenPort=10911
namesrvAddr=$NAMESRV
storePathRootDir=$dir/store
flushDiskType=ASYNC_FLUSH
mappedFileSizeCommitLog=4194304
slaveReadEnable=true
registerNameServerPeriod=10000
EOF
}
start_broker() { spawn "$1" "$1" "$COMET_BIN" broker -c "$RUN/$1/broker.conf"; }
wait_broker() { rel wait-broker --addr "${IP[$1]}:10911" --deadline-secs 120 >/dev/null; }
wait_log() { # wait_log FILE FROM PATTERN SECONDS: polls FILE's bytes after FROM for PATTERN
    local deadline=$((SECONDS + $4))
    until tail -c +"$(($2 + 1))" "$1" | grep -q -- "$3"; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

GROUP_ARGS=(
    --group "broker-a,${IP[ma]}:10911,${IP[sa]}:10911,$RUN/ma/store,$RUN/sa/store"
    --group "broker-b,${IP[mb]}:10911,${IP[sb]}:10911,$RUN/mb/store,$RUN/sb/store"
)
check() { # check LABEL [checker options]: runs the checker, records its line
    local label=$1
    shift
    local out
    local deliveries=(--deliveries "$RUN/deliveries.txt")
    [[ -z $JAVA_CP ]] || deliveries+=(--deliveries "$RUN/deliveries-java.txt")
    if out=$(rel check --label "$label" --topic "$TOPIC" --queues "$QUEUES" --ledger-dir "$RUN/ledgers" \
        --known-lost "$RUN/known-lost.txt" "${deliveries[@]}" "${GROUP_ARGS[@]}" "$@" 2>&1); then
        echo "$out"
    else
        echo "$out"
        FAILED=$((FAILED + 1))
        echo "CHECK FAILED: $label" | tee -a "$SUMMARY"
    fi
    echo "$out" | grep -E '^check |VIOLATION' >>"$SUMMARY" || true
}
note() { echo "$*" | tee -a "$SUMMARY"; }
wait_acks() { rel wait-acks --ledger-dir "$RUN/ledgers" "$@"; }
measure() { # measure TEXT WAIT-ACKS-OPTIONS...: notes TEXT with what wait-acks found; fails the run if it timed out
    local text=$1 out
    shift
    if out=$(wait_acks "$@" 2>&1); then
        note "$text: $out"
    else
        note "$text: FAILED: $(echo "$out" | tail -1)"
        FAILED=$((FAILED + 1))
    fi
}

java_load() { # java_load NAME FaultLoad-ARGS...: the Java client in the client namespace
    local name=$1
    shift
    spawn "$name" cl java -Xmx256m -cp "$JAVA_CP" -Drocketmq.client.logRoot="$RUN/java-logs" \
        dev.comet.interop.FaultLoad "$@"
}
start_producer() {
    ROUND=$((ROUND + 1))
    spawn producer cl "$RELIABILITY_BIN" fault produce --namesrv "$NAMESRV" --topic "$TOPIC" \
        --ledger "$RUN/ledgers/round-$ROUND.ledger" --round "$ROUND" --tasks 4 --pause-ms 2 \
        --route-refresh-ms "$ROUTE_REFRESH_MS"
    if [[ $MODE == long ]]; then # comet bench beside the checked load, on a topic of its own
        spawn bench cl "$COMET_BIN" bench produce -n "$NAMESRV" -t FaultBench --no-create -p 2 \
            --rate 200 -d "$BENCH_SECS" --timeout-ms 3000 --json --report-interval 3600
    fi
    if [[ -n $JAVA_CP ]]; then # id round 100+R: the Java producer's own id space
        java_load producer-java produce "$NAMESRV" "$TOPIC" "$RUN/ledgers/round-$ROUND-java.ledger" \
            "$((100 + ROUND))" 2 "$ROUTE_REFRESH_MS"
    fi
}
stop_producers() {
    stop producer
    stop producer-java
    if [[ -n ${PIDS[bench]:-} ]]; then # it ends by itself after BENCH_SECS
        wait "${PIDS[bench]}" 2>/dev/null || true
        unset "PIDS[bench]"
        note "round $ROUND: comet bench (FaultBench, 200 msg/s, ${BENCH_SECS} s): $(grep -o '"messages":[0-9]*' "$RUN/bench.log" | tail -1) $(grep -o '"failed":[0-9]*' "$RUN/bench.log" | tail -1)"
    fi
}

# --- the cluster --------------------------------------------------------------------------------
start_cluster() {
    mkdir -p "$RUN/ledgers"
    for n in ns1 ns2; do
        spawn "$n" "$n" "$COMET_BIN" namesrv --listen "${IP[$n]}:9876" --data-dir "$RUN/$n"
    done
    broker_conf ma broker-a 0 "$ROLE"
    broker_conf sa broker-a 1 SLAVE
    broker_conf mb broker-b 0 "$ROLE"
    broker_conf sb broker-b 1 SLAVE
    for b in ma mb; do start_broker "$b"; done
    for b in ma mb; do wait_broker "$b"; done
    for b in sa sb; do start_broker "$b"; done
    for b in sa sb; do wait_broker "$b"; done
    rel setup --namesrv "$NAMESRV" --topic "$TOPIC" --queues "$QUEUES" "${GROUP_ARGS[@]}" --deadline-secs 120
    if [[ $MODE == long ]]; then # comet bench's topic, known to both groups before its first route
        rel setup --namesrv "$NAMESRV" --topic FaultBench --queues "$QUEUES" "${GROUP_ARGS[@]}" --deadline-secs 120
    fi
    spawn consumer cl "$RELIABILITY_BIN" fault consume --namesrv "$NAMESRV" --topic "$TOPIC" \
        --group fault_consumer --deliveries "$RUN/deliveries.txt" --route-refresh-ms "$ROUTE_REFRESH_MS"
    if [[ -n $JAVA_CP ]]; then
        java_load consumer-java consume "$NAMESRV" "$TOPIC" fault_consumer "$RUN/deliveries-java.txt" "$ROUTE_REFRESH_MS"
    fi
}
wait_consuming() { # until every consumer has delivered from both groups
    local files=("$RUN/deliveries.txt") deadline=$((SECONDS + 180))
    [[ -z $JAVA_CP ]] || files+=("$RUN/deliveries-java.txt")
    for f in "${files[@]}"; do
        until grep -q " broker-a " "$f" 2>/dev/null && grep -q " broker-b " "$f" 2>/dev/null; do
            if ((SECONDS >= deadline)); then
                note "no deliveries from both groups in $f within 180 s"
                FAILED=$((FAILED + 1))
                return 0
            fi
            sleep 0.2
        done
    done
}
pause_consumers() {
    for c in consumer consumer-java; do
        [[ -z ${PIDS[$c]:-} ]] || kill "-$1" "${PIDS[$c]}"
    done
}

# --- faults -------------------------------------------------------------------------------------
# kill -9 of master-a under load, with a consumer backlog on broker-a: producers must route to
# broker-b, the consumer must consume broker-a's backlog from slave-a; then master-a restarts.
fault_kill_master() {
    log "round: kill -9 of master-a"
    start_producer
    wait_acks --round "$ROUND" --count 200 --deadline-secs 120 >/dev/null
    wait_consuming
    pause_consumers STOP # the consumers fall behind: a backlog on both groups
    wait_acks --round "$ROUND" --count 1200 --deadline-secs 120 >/dev/null
    local kill_ms
    kill_ms=$(now_ms)
    stop ma 9
    pause_consumers CONT
    measure "kill-master: acknowledged after the kill (broker-b only)" --round "$ROUND" \
        --after-ms "$kill_ms" --broker broker-b --count 300 --deadline-secs 120
    check kill-master/master-down --master-down broker-a --no-compare --since-ms "$kill_ms" --drain-secs 120
    start_broker ma
    wait_broker ma
    local back_ms
    back_ms=$(now_ms)
    measure "kill-master: acknowledged by the restarted master-a" --round "$ROUND" \
        --broker broker-a --after-ms "$back_ms" --count 50 --deadline-secs 120
    stop_producers
    check kill-master/restarted --drain-secs 120
}

# Machine loss: master-a killed and its store deleted; every acknowledged message must be on
# slave-a; master-a comes back empty (slave-a is refused: its log is ahead); then the operator's
# restore: stop both, copy slave-a's store to master-a, start both.
fault_disk_loss() {
    log "round: loss of master-a's disk"
    start_producer
    wait_acks --round "$ROUND" --count 500 --deadline-secs 120 >/dev/null
    local kill_ms
    kill_ms=$(now_ms)
    stop ma 9
    rm -rf "$RUN/ma/store"
    local loss=() # ASYNC_MASTER: what slave-a had not copied is lost with the disk, and counted
    [[ $ROLE == SYNC_MASTER ]] || loss=(--allow-loss)
    check disk-loss/master-gone --master-down broker-a --no-compare --since-ms "$kill_ms" --drain-secs 120 "${loss[@]}"
    local ma_log_start
    ma_log_start=$(wc -c <"$RUN/ma.log")
    start_broker ma
    wait_broker ma
    if wait_log "$RUN/ma.log" "$ma_log_start" "beyond the master's end" 60; then
        note "disk-loss: empty master-a refuses slave-a: $(grep -o "the slave's commit log ends at [^;]*" "$RUN/ma.log" | tail -1)"
    else
        note "disk-loss: empty master-a did not refuse slave-a within 60 s"
        FAILED=$((FAILED + 1))
    fi
    local empty_ms
    empty_ms=$(now_ms)
    if [[ $ROLE == SYNC_MASTER ]]; then
        measure "disk-loss: FLUSH_SLAVE_TIMEOUT answers of the empty master-a" --round "$ROUND" \
            --broker broker-a --after-ms "$empty_ms" --status FLUSH_SLAVE_TIMEOUT --count 5 --deadline-secs 120
    else
        measure "disk-loss: SEND_OK answers of the empty master-a" --round "$ROUND" \
            --broker broker-a --after-ms "$empty_ms" --count 50 --deadline-secs 120
    fi
    # The operator's restore, under load (producers use broker-b meanwhile).
    stop ma TERM
    stop sa TERM
    rm -rf "$RUN/ma/store"
    cp -a "$RUN/sa/store" "$RUN/ma/store"
    start_broker ma
    start_broker sa
    wait_broker ma
    wait_broker sa
    local restored_ms
    restored_ms=$(now_ms)
    # The consumers' offsets of broker-a moved to the empty master's queue ends: put the group
    # back to the moment of the loss (it re-reads since then rather than skip what the restored
    # master stores below those ends).
    note "disk-loss: group offsets reset to the loss: $(in_ns cl "$COMET_BIN" group reset-offset -n "$NAMESRV" \
        fault_consumer "$TOPIC" --timestamp "$kill_ms" 2>&1 | tail -1)"
    measure "disk-loss: acknowledged by the restored master-a" --round "$ROUND" \
        --broker broker-a --after-ms "$restored_ms" --count 50 --deadline-secs 120
    stop_producers
    check disk-loss/restored --drain-secs 120 "${loss[@]}"
}

# A cut link (the veth of NODE set down, then up) for FAULT_SECS under load.
fault_cut_link() {
    local node=$1
    log "round: link of $node cut for ${FAULT_SECS}s"
    start_producer
    wait_acks --round "$ROUND" --count 300 --deadline-secs 120 >/dev/null
    local cut_ms
    cut_ms=$(now_ms)
    link "$node" down
    sleep "$FAULT_SECS" # the fault's duration, not a wait for a condition
    link "$node" up
    local healed_ms
    healed_ms=$(now_ms)
    measure "cut-$node: acknowledged during the cut and since" --round "$ROUND" \
        --after-ms "$cut_ms" --count 1 --deadline-secs 5
    measure "cut-$node: acknowledged by broker-a after healing" --round "$ROUND" \
        --broker broker-a --after-ms "$healed_ms" --count 50 --deadline-secs 180
    stop_producers
    check "cut-$node/healed" --drain-secs 120
}

# SIGSTOP of NODE's broker for FAULT_SECS under load, then SIGCONT.
fault_pause() {
    local node=$1
    log "round: $node paused for ${FAULT_SECS}s"
    start_producer
    wait_acks --round "$ROUND" --count 300 --deadline-secs 120 >/dev/null
    kill -STOP "${PIDS[$node]}"
    sleep "$FAULT_SECS" # the fault's duration, not a wait for a condition
    kill -CONT "${PIDS[$node]}"
    local resumed_ms
    resumed_ms=$(now_ms)
    measure "pause-$node: acknowledged by broker-a after SIGCONT" --round "$ROUND" \
        --broker broker-a --after-ms "$resumed_ms" --count 50 --deadline-secs 180
    stop_producers
    check "pause-$node/resumed" --drain-secs 120
}

started=$SECONDS
log "netns fault suite ($MODE, $ROLE) in $RUN"
net_up
start_cluster
note "suite: $MODE $ROLE, route refresh ${ROUTE_REFRESH_MS} ms, fault duration ${FAULT_SECS} s"
fault_kill_master
if [[ $MODE == long ]]; then
    fault_disk_loss
    fault_cut_link sa
    fault_cut_link ma
    fault_pause ma
    fault_pause sa
else
    fault_cut_link sa
    fault_pause ma
fi
stop_producers
stop consumer
stop consumer-java
echo "== summary ($((SECONDS - started)) s)"
cat "$SUMMARY"
if ((FAILED > 0)); then
    echo "netns fault suite: $FAILED checks FAILED"
    exit 1
fi
echo "netns fault suite: every check passed"
