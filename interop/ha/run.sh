#!/usr/bin/env bash
# Master/slave replication (RocketMQ's classic HA) between Comet and Apache RocketMQ 5.3.3, both
# directions, on loopback.
#
#   1. Apache slave <- Comet master: `comet namesrv`, a Comet ASYNC_MASTER (brokerId 0) and an
#      Apache broker as its SLAVE (brokerId 1, same cluster and broker name, same CommitLog segment
#      size). The official Java client creates the topic on the master and produces messages with
#      distinct bodies over several segments; the suite waits until the slave's CommitLog end and
#      the max offset of every queue of the slave (GET_MAX_OFFSET at the slave's address, so from
#      the slave's own ConsumeQueue) equal the master's, and until the Apache slave's metadata copy
#      (SlaveSynchronize) took the master's topic and copied topics, consumer offsets, delay offsets,
#      subscription groups and request modes without an error. Then it stops the Comet master, the
#      Java client reads every message from the Apache slave (the route names only the slave), both
#      are stopped cleanly and every CommitLog segment file is compared byte for byte.
#   2. Comet slave <- Apache master: Apache's name server and an ASYNC_MASTER, a Comet SLAVE
#      (brokerId 1, slaveReadEnable=true). The Java client produces to the master; once the Comet
#      slave caught up (CommitLog end and queue offsets equal, segment files identical) and copied
#      the master's metadata without an error, the Apache broker is stopped (SIGTERM, name server
#      left running) and a new consumer group of the Java client (push consumer,
#      CONSUME_FROM_FIRST_OFFSET) reads every message from the Comet slave. Both are stopped and
#      the segment files compared again.
#
# Each direction prints a summary line (counts, bytes compared, seconds); on failure the logs of
# every server of that direction are printed. Exits non-zero when a direction failed.
#
#   interop/ha/run.sh
#
# Environment knobs (defaults in brackets):
#   HA_COUNT [4000]             messages per direction
#   HA_SIZE [1024]              body bytes per message
#   HA_SEGMENT [1048576]        mappedFileSizeCommitLog of all four brokers
#   HA_QUEUES [4]               queues of each direction's topic
#   HA_WAIT [120]               seconds any single wait may take before the direction fails
#   HA_DIRECTIONS [1 2]         which directions to run
#   HA_WORKDIR [mktemp]         stores, logs; removed at the end unless a direction failed or HA_KEEP=1
#   CARGO_TARGET_DIR            honoured by cargo as usual
# Knobs of interop/apache/run.sh (JAVA_HEAP, START_TIMEOUT, ROCKETMQ_VERSION) pass through.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
APACHE="$REPO/interop/apache/run.sh"
COUNT="${HA_COUNT:-4000}"
SIZE="${HA_SIZE:-1024}"
SEGMENT="${HA_SEGMENT:-1048576}"
QUEUES="${HA_QUEUES:-4}"
WAIT="${HA_WAIT:-120}"
DIRECTIONS="${HA_DIRECTIONS:-1 2}"
BIND_IP=127.0.0.1
export BIND_IP
CLUSTER=CometHaInterop
STOP_TIMEOUT=60

T0=$SECONDS
die() { echo "ha: $*" >&2; exit 1; }
step() { echo "== ha: $* ($((SECONDS - T0))s)"; }

if [[ -n "${HA_WORKDIR:-}" ]]; then
    WORK="$HA_WORKDIR"
    mkdir -p "$WORK"
    [[ -z "$(ls -A "$WORK")" ]] || die "$WORK is not empty"
else
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/ha-interop.XXXXXX")"
fi
WORK="$(cd "$WORK" && pwd)"

# Kills whatever a direction left running: its Comet processes (pid files comet-*.pid, checked to
# still be comet) and its Apache servers.
reap() {
    local dir=$1 f pid
    for f in "$dir"/comet-*.pid; do
        [[ -f "$f" ]] || continue
        pid="$(cat "$f")"
        if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q comet; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$f"
    done
    if [[ -d "$dir/apache" ]]; then "$APACHE" kill "$dir/apache" >/dev/null 2>&1 || true; fi
}

KEEP=no
cleanup() {
    local rc=$?
    for d in "$WORK"/d*; do [[ -d "$d" ]] && reap "$d"; done
    if [[ $KEEP == no && $rc -eq 0 && "${HA_KEEP:-0}" != 1 ]]; then
        rm -rf "$WORK"
    else
        echo "ha: work directory kept: $WORK" >&2
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for tool in java mvn python3 cargo; do
    command -v "$tool" >/dev/null || die "$tool is required (interop/tests.sh installs the JDK and Maven)"
done

# --- builds -----------------------------------------------------------------------------------
step "building comet, the Java client runner and Apache's classpath"
(cd "$REPO" && cargo build --locked -q -p comet) || die "cargo build -p comet failed"
COMET="${CARGO_TARGET_DIR:-$REPO/target}/debug/comet"
[[ "$COMET" == /* ]] || COMET="$REPO/$COMET"
[[ -x "$COMET" ]] || die "no comet binary at $COMET"
JAVA_DIR="$HERE/java"
JAVA_CP_FILE="$JAVA_DIR/target/classpath.txt"
if [[ ! -s "$JAVA_CP_FILE" || ! -d "$JAVA_DIR/target/classes" ||
    -n "$(find "$JAVA_DIR/src" "$JAVA_DIR/pom.xml" -newer "$JAVA_CP_FILE" -print -quit)" ]]; then
    mvn -q -B -f "$JAVA_DIR/pom.xml" compile dependency:build-classpath -Dmdep.outputFile="$JAVA_CP_FILE" >&2 ||
        die "maven could not build $JAVA_DIR"
    touch "$JAVA_CP_FILE"
fi
JAVA_CP="$JAVA_DIR/target/classes:$(cat "$JAVA_CP_FILE")"
"$APACHE" classpath >/dev/null || die "could not resolve Apache RocketMQ's classpath"

# --- helpers ----------------------------------------------------------------------------------

# Prints a name server port and two broker ports P, each with P-2 (fast channel), P and P+1 (HA)
# free, none overlapping.
pick_ports() {
    python3 - "$BIND_IP" <<'PY'
import socket, sys
host = sys.argv[1]
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
taken = {any_port()}
out = [next(iter(taken))]
for _ in range(400):
    p = any_port()
    block = {p - 2, p - 1, p, p + 1}
    if p > 1024 and not block & taken and all(free(q) for q in (p - 2, p, p + 1)):
        out.append(p)
        taken |= block
        if len(out) == 3:
            print(*out)
            break
else:
    sys.exit("no free broker ports found")
PY
}

# java_check <command> <args...>: the Java client runner; output goes to stdout and to $OUT_FILE.
java_check() {
    java -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Duser.home="$D/java-home" \
        -Drocketmq.client.logRoot="$D/java-logs" -Dcom.rocketmq.sendMessageWithVIPChannel=false \
        -cp "$JAVA_CP" dev.comet.interop.ha.HaCheck "$@" | tee -a "$D/java.out"
    return "${PIPESTATUS[0]}"
}

# start_comet <name> <args...>: a Comet process of this direction, output in $D/<name>.log.
start_comet() {
    local name=$1
    shift
    "$COMET" "$@" >"$D/$name.log" 2>&1 </dev/null &
    echo $! >"$D/comet-$name.pid"
}

# stop_comet <name>: SIGTERM, then waits for a clean exit (status 0).
stop_comet() {
    local name=$1 pid rc=0
    pid="$(cat "$D/comet-$name.pid")"
    kill -TERM "$pid"
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null; do
        ((SECONDS < deadline)) || die "comet $name (pid $pid) did not stop within ${STOP_TIMEOUT}s"
        sleep 0.2
    done
    wait "$pid" || rc=$?
    rm -f "$D/comet-$name.pid"
    ((rc == 0)) || die "comet $name exited with status $rc"
}

# wait_for <seconds> <what> <command...>: polls the command until it succeeds.
wait_for() {
    local secs=$1 what=$2
    shift 2
    local deadline=$((SECONDS + secs))
    until "$@"; do
        ((SECONDS < deadline)) || die "$what: not within ${secs}s"
        sleep 0.2
    done
}
listening() { (exec 3<>"/dev/tcp/$BIND_IP/$1") 2>/dev/null; }
alive_and_listening() { kill -0 "$(cat "$D/comet-$1.pid")" 2>/dev/null || die "comet $1 exited; see its log"; listening "$2"; }
logged() { grep -q -- "$2" "$1" 2>/dev/null; }

# Prints what every server of a direction logged (on failure).
print_logs() {
    local dir=$1 f
    for f in "$dir"/*.log; do
        [[ -f "$f" ]] || continue
        echo "----- $f (last 40 lines)"
        tail -n 40 "$f"
    done
    if [[ -d "$dir/apache" ]]; then
        for f in "$dir/apache"/*.out; do
            [[ -f "$f" ]] && { echo "----- $f (last 20 lines)"; tail -n 20 "$f"; }
        done
        f="$dir/apache/logs/rocketmqlogs/broker.log"
        [[ -f "$f" ]] && { echo "----- $f (WARN/ERROR, last 40)"; grep -E ' (WARN|ERROR) ' "$f" | tail -n 40; }
        f="$dir/apache/logs/rocketmqlogs/store.log"
        [[ -f "$f" ]] && { echo "----- $f (last 30 lines)"; tail -n 30 "$f"; }
    fi
    [[ -f "$dir/java.out" ]] && { echo "----- $dir/java.out (last 20 lines)"; tail -n 20 "$dir/java.out"; }
    return 0
}

# written_end: the CommitLog end wait-synced printed last.
written_end() { sed -n 's/^COMMITLOG_END //p' "$D/java.out" | tail -1; }

segments_written() { echo $(($1 / SEGMENT + ($1 % SEGMENT > 0))); }

# The Apache slave's metadata copy (SlaveSynchronize.syncAll, about 60 s after it started): every
# table it copies from the master is logged as updated, and none failed.
apache_slave_synced() {
    local log="$D/apache/logs/rocketmqlogs/broker.log" what
    for what in "topic config" "consumer offset" "delay offset" "Subscription Group" "Message Request Mode"; do
        grep -q "Update slave $what from master" "$log" 2>/dev/null || return 1
    done
}

# --- 1. Apache slave <- Comet master ----------------------------------------------------------
direction_1() {
    local t0=$SECONDS topic=HaTopicComet group=HaReaderOfApacheSlave tag=comet-master
    read -r ns master slave < <(pick_ports)
    step "1: Apache slave <- Comet master: comet namesrv :$ns, Comet master :$master, Apache slave :$slave"
    start_comet namesrv namesrv --listen "$BIND_IP:$ns" --data-dir "$D/namesrv"
    wait_for 30 "comet namesrv listening" alive_and_listening namesrv "$ns"
    cat >"$D/master.conf" <<EOF
brokerClusterName=$CLUSTER
brokerName=ha-a
brokerId=0
brokerRole=ASYNC_MASTER
namesrvAddr=$BIND_IP:$ns
bindAddress=$BIND_IP
listenPort=$master
brokerIP1=$BIND_IP
brokerIP2=$BIND_IP
storePathRootDir=$D/master
mappedFileSizeCommitLog=$SEGMENT
diskMaxUsedSpaceRatio=99
EOF
    start_comet master broker -c "$D/master.conf"
    wait_for 60 "Comet master listening" alive_and_listening master "$master"
    # Created before the slave starts: the slave's first metadata copy then has it.
    java_check create-topic "$BIND_IP:$ns" "$BIND_IP:$master" "$topic" "$QUEUES" 60

    step "1: starting the Apache slave"
    EXTERNAL_NAMESRV="$BIND_IP:$ns" BROKER_PORT="$slave" CLUSTER_NAME="$CLUSTER" BROKER_NAME=ha-a \
        BROKER_ROLE=SLAVE BROKER_ID=1 COMMITLOG_FILE_SIZE="$SEGMENT" BROKER_EXTRA_CONF="slaveReadEnable=true" \
        "$APACHE" start "$D/apache" >"$D/apache-start.log" 2>&1 || { cat "$D/apache-start.log"; die "the Apache slave did not start"; }
    # The slave's HA client dials the master a few seconds after boot; the master starts sending
    # once the slave's first offset report arrived.
    wait_for "$WAIT" "the Apache slave connected to the Comet master's HA port and reported" \
        logged "$D/master.log" "transferring the commit log to a slave"
    grep "transferring the commit log to a slave" "$D/master.log" | tail -1

    step "1: producing $COUNT messages of $SIZE bytes to the Comet master"
    java_check produce "$BIND_IP:$ns" "$topic" "$COUNT" "$SIZE" "$tag"
    java_check wait-synced "$BIND_IP:$master" "$BIND_IP:$slave" "$topic" "$QUEUES" "$COUNT" "$WAIT"
    local end
    end="$(written_end)"
    (($(segments_written "$end") >= 3)) || die "only $(segments_written "$end") CommitLog segment(s) written: the test needs several"

    step "1: waiting for the Apache slave's metadata copy from the Comet master (about 60 s after its start)"
    java_check wait-topic "$BIND_IP:$slave" "$topic" "$QUEUES" "$WAIT"
    wait_for 30 "the Apache slave copied every table from the Comet master" apache_slave_synced
    if grep -E "Sync(TopicConfig|ConsumerOffset|DelayOffset|SubscriptionGroup|MessageRequestMode) Exception" \
        "$D/apache/logs/rocketmqlogs/broker.log"; then
        die "the Apache slave failed to copy a table from the Comet master"
    fi

    step "1: stopping the Comet master; the Java client reads from the Apache slave"
    stop_comet master
    java_check consume "$BIND_IP:$ns" "$topic" "$group" "$COUNT" "$SIZE" "$tag" "$BIND_IP:$slave" "$WAIT"

    step "1: stopping the Apache slave and the name server; comparing the CommitLogs"
    "$APACHE" stop "$D/apache"
    stop_comet namesrv
    python3 "$HERE/compare_commitlogs.py" "$D/master/commitlog" "$D/apache/store/commitlog" "$end" "$SEGMENT" |
        tee "$D/compare.out"
    [[ ${PIPESTATUS[0]} -eq 0 ]] || die "CommitLogs differ"
    echo "ha: SUMMARY 1 Apache slave <- Comet master: PASS in $((SECONDS - t0)) s:" \
        "$(sed -n 's/^ha-java: produced \([0-9]* messages ([0-9]* body bytes)\).*/\1/p' "$D/java.out")," \
        "$(sed -n 's/^commitlog identical: //p' "$D/compare.out");" \
        "slave caught up $(sed -n 's/.*caught up with master [^ ]* after \([0-9.]* s\).*/\1/p' "$D/java.out") after the last send;" \
        "its metadata copy took every table; $(sed -n 's/^ha-java: consumed \(all [0-9]* bodies\) from the slave [^ ]* in \([0-9.]* s\).*/the Java client read \1 from it in \2/p' "$D/java.out")"
}

# --- 2. Comet slave <- Apache master ----------------------------------------------------------
direction_2() {
    local t0=$SECONDS topic=HaTopicApache group=HaReaderOfCometSlave tag=apache-master
    read -r ns master slave < <(pick_ports)
    step "2: Comet slave <- Apache master: Apache name server :$ns, Apache master :$master, Comet slave :$slave"
    # waitTimeMillsInSendQueue: Apache sheds sends that waited longer than this (200 ms by default)
    # in its queue with SYSTEM_BUSY; on a loaded 2-core box that is scheduling, not replication.
    NAMESRV_PORT="$ns" BROKER_PORT="$master" CLUSTER_NAME="$CLUSTER" BROKER_NAME=ha-b \
        COMMITLOG_FILE_SIZE="$SEGMENT" BROKER_EXTRA_CONF="waitTimeMillsInSendQueue=5000" \
        "$APACHE" start "$D/apache" >"$D/apache-start.log" 2>&1 ||
        { cat "$D/apache-start.log"; die "the Apache master did not start"; }
    java_check create-topic "$BIND_IP:$ns" "$BIND_IP:$master" "$topic" "$QUEUES" 60
    cat >"$D/slave.conf" <<EOF
brokerClusterName=$CLUSTER
brokerName=ha-b
brokerId=1
brokerRole=SLAVE
slaveReadEnable=true
namesrvAddr=$BIND_IP:$ns
bindAddress=$BIND_IP
listenPort=$slave
brokerIP1=$BIND_IP
brokerIP2=$BIND_IP
storePathRootDir=$D/slave
mappedFileSizeCommitLog=$SEGMENT
diskMaxUsedSpaceRatio=99
EOF
    start_comet slave broker -c "$D/slave.conf"
    wait_for 60 "Comet slave listening" alive_and_listening slave "$slave"
    # The Apache master logs the first report of a slave (in broker.log); it sends nothing before it.
    wait_for "$WAIT" "the Comet slave connected to the Apache master's HA port and reported" \
        logged "$D/apache/logs/rocketmqlogs/broker.log" "request offset"
    grep "request offset" "$D/apache/logs/rocketmqlogs/broker.log" | tail -1

    step "2: producing $COUNT messages of $SIZE bytes to the Apache master"
    java_check produce "$BIND_IP:$ns" "$topic" "$COUNT" "$SIZE" "$tag"
    java_check wait-synced "$BIND_IP:$master" "$BIND_IP:$slave" "$topic" "$QUEUES" "$COUNT" "$WAIT"
    local end
    end="$(written_end)"
    (($(segments_written "$end") >= 3)) || die "only $(segments_written "$end") CommitLog segment(s) written: the test needs several"
    python3 "$HERE/compare_commitlogs.py" "$D/apache/store/commitlog" "$D/slave/commitlog" "$end" "$SEGMENT" |
        tee "$D/compare-live.out"
    [[ ${PIPESTATUS[0]} -eq 0 ]] || die "CommitLogs differ while both run"

    # The Comet slave's metadata copy from the Apache master (at start, then every 10 s).
    wait_for "$WAIT" "the Comet slave copied the Apache master's topics" \
        logged "$D/slave.log" "topic table copied from the master"
    if grep -E "copying the master's .* failed" "$D/slave.log"; then
        die "the Comet slave failed to copy a table from the Apache master"
    fi

    step "2: stopping the Apache master (its name server stays); the Java client reads from the Comet slave"
    "$APACHE" stop-broker "$D/apache"
    java_check consume "$BIND_IP:$ns" "$topic" "$group" "$COUNT" "$SIZE" "$tag" "$BIND_IP:$slave" "$WAIT"

    step "2: stopping the Comet slave and the name server; comparing the CommitLogs"
    stop_comet slave
    "$APACHE" stop "$D/apache"
    python3 "$HERE/compare_commitlogs.py" "$D/apache/store/commitlog" "$D/slave/commitlog" "$end" "$SEGMENT" |
        tee "$D/compare.out"
    [[ ${PIPESTATUS[0]} -eq 0 ]] || die "CommitLogs differ"
    echo "ha: SUMMARY 2 Comet slave <- Apache master: PASS in $((SECONDS - t0)) s:" \
        "$(sed -n 's/^ha-java: produced \([0-9]* messages ([0-9]* body bytes)\).*/\1/p' "$D/java.out")," \
        "$(sed -n 's/^commitlog identical: //p' "$D/compare.out");" \
        "slave caught up $(sed -n 's/.*caught up with master [^ ]* after \([0-9.]* s\).*/\1/p' "$D/java.out") after the last send;" \
        "$(sed -n 's/^ha-java: consumed \(all [0-9]* bodies\) from the slave [^ ]* in \([0-9.]* s\).*/the Java client read \1 from it in \2/p' "$D/java.out") after the master stopped"
}

# Each direction runs in its own subshell (so `set -e` holds inside it) with its own directory D.
FAILED=()
for n in $DIRECTIONS; do
    D="$WORK/d$n"
    mkdir -p "$D"
    (direction_"$n") &
    if ! wait $!; then
        FAILED+=("$n")
        echo "ha: direction $n FAILED; logs of its servers follow" >&2
        print_logs "$D" >&2
    fi
    reap "$D"
done

step "done"
if ((${#FAILED[@]} > 0)); then
    KEEP=yes
    echo "ha: FAILED direction(s): ${FAILED[*]}"
    exit 1
fi
echo "ha: all directions passed in $((SECONDS - T0))s"
