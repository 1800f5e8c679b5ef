#!/usr/bin/env bash
# Consumer groups go on from their committed offsets at the slave while their broker group's
# master is down: RocketMQ clients against a Comet master/slave pair and against an Apache
# RocketMQ 5.3.3 master/slave pair (the reference), on loopback.
#
# Targets (each its own cluster, one after the other):
#   apache  Apache 5.3.3 name server, ASYNC_MASTER (brokerId 0) and SLAVE (brokerId 1,
#           slaveReadEnable=true), from interop/apache/run.sh
#   comet   `comet namesrv`, `comet broker -c master.conf` (ASYNC_MASTER, brokerId 0) and
#           `comet broker -c slave.conf` (SLAVE, brokerId 1, slaveReadEnable=true)
# Clients (each a row per target, each with its own topic and groups on the target's cluster):
#   java-4.9.8, java-5.3.3  the official Java client (interop/java, class FailoverRead)
#   comet                   Comet's client through the CLI: `comet produce`, `comet consume`
#
# For every client, on every target:
#   1. a topic of 4 queues is created on the master; the client produces FIRST messages with
#      distinct bodies; group "late" consumes all of them and shuts down, committing its offsets
#      at the master. Group "run" starts a consumer that keeps its backlog on the brokers: one
#      message per pull, at most one cached per queue, and a listener (Java) or an output reader
#      (`comet consume`, which reports a message consumed only once it printed it) that stops
#      after HOLD_AFTER messages;
#   2. the client produces SECOND more messages; the suite waits until every queue's max offset
#      at the slave equals the master's and the slave answers QUERY_CONSUMER_OFFSET for group
#      "late" with the master's committed offsets (an Apache slave copies them every 60 s, a
#      Comet slave every 10 s);
#   3. the master is killed (SIGKILL); the suite waits until the name server's route names the
#      broker group with its slave and without a master;
#   4. a new consumer of group "late" must receive exactly the SECOND messages from the slave
#      (none of the FIRST again) and its offsets must reach the end of every queue at the slave;
#      group "run" is let go and must receive every FIRST+SECOND message at least once, and its
#      offsets must reach the end of every queue at the slave (QUERY_CONSUMER_OFFSET at the
#      slave's address).
# A summary table has one row per target x client with the counts; the script exits non-zero
# when a row failed. On a target's failure the logs of its servers and clients are printed.
#
#   interop/failover-read/run.sh
#
# Environment knobs (defaults in brackets):
#   FO_TARGETS ["apache comet"]   targets, in order (Apache first: it is the reference)
#   FO_CLIENTS ["java-4.9.8 java-5.3.3 comet"]
#   FO_FIRST [200] / FO_SECOND [200]  messages produced before / after group "late" consumed
#   FO_HOLD_AFTER [8]             messages group "run" consumes before it waits
#   FO_WAIT [120]                 seconds any single wait may take
#   FO_SYNC_WAIT [150]            seconds for the slave's copy of the committed offsets
#   FO_IDLE [20]                  a consumer of group "late" stops after this long without a message
#   FO_WORKDIR [mktemp]           stores, logs; removed at the end unless a row failed or FO_KEEP=1
#   CARGO_TARGET_DIR              honoured by cargo as usual
# Knobs of interop/apache/run.sh (JAVA_HEAP, START_TIMEOUT) pass through.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
APACHE="$REPO/interop/apache/run.sh"
JAVA_DIR="$REPO/interop/java"
read -r -a TARGETS <<<"${FO_TARGETS:-apache comet}"
read -r -a CLIENTS <<<"${FO_CLIENTS:-java-4.9.8 java-5.3.3 comet}"
FIRST="${FO_FIRST:-200}"
SECOND="${FO_SECOND:-200}"
HOLD_AFTER="${FO_HOLD_AFTER:-8}"
WAIT="${FO_WAIT:-120}"
SYNC_WAIT="${FO_SYNC_WAIT:-150}"
IDLE="${FO_IDLE:-20}"
QUEUES=4
# CommitLog segment size of all brokers (master and slave must agree); the data fits in one.
SEGMENT=1048576
# The checks (topic creation, offsets asked at one broker address) run on this client build.
ADMIN_VERSION=5.3.3
CLUSTER=CometFailoverRead
BROKER_NAME=fo-a
STOP_TIMEOUT=60
BIND_IP=127.0.0.1
export BIND_IP

T0=$SECONDS
die() { echo "failover-read: $*" >&2; exit 1; }
step() { echo "== failover-read: $* ($((SECONDS - T0))s)"; }

for t in "${TARGETS[@]}"; do [[ $t == apache || $t == comet ]] || die "unknown target $t"; done
JAVA_VERSIONS=("$ADMIN_VERSION")
for c in "${CLIENTS[@]}"; do
    case "$c" in
        java-*) [[ " ${JAVA_VERSIONS[*]} " == *" ${c#java-} "* ]] || JAVA_VERSIONS+=("${c#java-}") ;;
        comet) ;;
        *) die "unknown client $c" ;;
    esac
done

if [[ -n "${FO_WORKDIR:-}" ]]; then
    WORK="$FO_WORKDIR"
    mkdir -p "$WORK"
    [[ -z "$(ls -A "$WORK")" ]] || die "$WORK is not empty"
else
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/failover-read.XXXXXX")"
fi
WORK="$(cd "$WORK" && pwd)"

# Kills whatever a target left running: the processes whose pid files (*.pid, Comet servers and
# clients, Java clients) are in its directory tree, checked to still be what was started there,
# and its Apache servers.
reap() {
    local dir=$1 f pid
    while IFS= read -r f; do
        pid="$(cat "$f" 2>/dev/null || true)"
        [[ -n "$pid" ]] || continue
        if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qE 'comet|FailoverRead|bodies.py'; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$f"
    done < <(find "$dir" -name '*.pid' -not -path '*/apache-*/*' 2>/dev/null)
    for f in "$dir"/apache-*; do
        [[ -d "$f" ]] && { "$APACHE" kill "$f" >/dev/null 2>&1 || true; }
    done
    return 0
}

KEEP=no
cleanup() {
    local rc=$?
    for d in "$WORK"/*/; do [[ -d "$d" ]] && reap "${d%/}"; done
    if [[ $KEEP == no && $rc -eq 0 && "${FO_KEEP:-0}" != 1 ]]; then
        rm -rf "$WORK"
    else
        echo "failover-read: work directory kept: $WORK" >&2
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for tool in java mvn python3 cargo; do
    command -v "$tool" >/dev/null || die "$tool is required (interop/tests.sh installs the JDK and Maven)"
done

# --- builds -----------------------------------------------------------------------------------
step "building comet, the Java runner (${JAVA_VERSIONS[*]}) and Apache's classpath"
(cd "$REPO" && cargo build --locked -q -p comet) || die "cargo build -p comet failed"
COMET="${CARGO_TARGET_DIR:-$REPO/target}/debug/comet"
[[ "$COMET" == /* ]] || COMET="$REPO/$COMET"
[[ -x "$COMET" ]] || die "no comet binary at $COMET"
for v in "${JAVA_VERSIONS[@]}"; do
    # The same build directories as interop/matrix.sh: one per client version.
    cp_file="$JAVA_DIR/target/$v/classpath.txt"
    if [[ ! -s "$cp_file" || ! -d "$JAVA_DIR/target/$v/classes" ||
        -n "$(find "$JAVA_DIR/src" "$JAVA_DIR/pom.xml" -newer "$cp_file" -print -quit)" ]]; then
        mvn -q -B -f "$JAVA_DIR/pom.xml" -Drocketmq.client.version="$v" compile dependency:build-classpath \
            -Dmdep.outputFile="$cp_file" >&2 || die "maven could not build $JAVA_DIR for $v"
        touch "$cp_file"
    fi
done
if [[ " ${TARGETS[*]} " == *" apache "* ]]; then
    "$APACHE" classpath >/dev/null || die "could not resolve Apache RocketMQ's classpath"
fi

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
alive() { kill -0 "$(cat "$1")" 2>/dev/null; }
alive_and_listening() { alive "$D/$1.pid" || die "comet $1 exited; see its log"; listening "$2"; }
logged() { grep -q -- "$2" "$1" 2>/dev/null; }

# java_cmd <version>: sets JCMD to the Java runner of that client version.
java_cmd() {
    local v=$1
    JCMD=(java -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Duser.home="$D/java-home"
        -Drocketmq.client.logRoot="$D/java-logs" -Dcom.rocketmq.sendMessageWithVIPChannel=false
        -cp "$JAVA_DIR/target/$v/classes:$(cat "$JAVA_DIR/target/$v/classpath.txt")" dev.comet.interop.FailoverRead)
}

# last_verdict <log>: the runner's last PASS/FAIL line (client threads may log after it).
last_verdict() { grep -E '^(PASS|FAIL) ' "$1" | tail -1 || true; }

# check_soft <args...>: a check of the suite (FailoverRead on the ADMIN_VERSION build); prints
# what it found, keeps its output in checks.log and its verdict in CHECK_VERDICT; non-zero when
# it failed.
check_soft() {
    local out="$D/check.out" rc=0
    java_cmd "$ADMIN_VERSION"
    "${JCMD[@]}" "$@" >"$out" 2>&1 || rc=$?
    { echo "-- $*"; cat "$out"; } >>"$D/checks.log"
    grep '^failover-java: ' "$out" || true
    CHECK_VERDICT="$(last_verdict "$out")"
    CHECK_VERDICT="${CHECK_VERDICT#FAIL }"
    return $rc
}
# check <args...>: a check the whole target depends on; dies with its verdict.
check() { check_soft "$@" || die "check $1 failed: $CHECK_VERDICT"; }

# start_comet <name> <args...>: a Comet server of the target, output in $D/<name>.log.
start_comet() {
    local name=$1
    shift
    "$COMET" "$@" >"$D/$name.log" 2>&1 </dev/null &
    echo $! >"$D/$name.pid"
}

# stop_pid <pidfile> <what>: SIGTERM, then waits until the process is gone.
stop_pid() {
    local pid
    pid="$(cat "$1")"
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while kill -0 "$pid" 2>/dev/null; do
        ((SECONDS < deadline)) || die "$2 (pid $pid) did not stop within ${STOP_TIMEOUT}s"
        sleep 0.2
    done
    rm -f "$1"
}

# Prints what every server and client of a target logged (on failure).
print_logs() {
    local dir=$1 f
    for f in "$dir"/*.log "$dir"/*/client.log; do
        [[ -f "$f" ]] || continue
        echo "----- $f (last 40 lines)"
        tail -n 40 "$f"
    done
    for f in "$dir"/apache-*/*.out; do
        [[ -f "$f" ]] && { echo "----- $f (last 20 lines)"; tail -n 20 "$f"; }
    done
    for f in "$dir"/apache-*/logs/rocketmqlogs/broker.log; do
        [[ -f "$f" ]] && { echo "----- $f (WARN/ERROR, last 40)"; grep -E ' (WARN|ERROR) ' "$f" | tail -n 40; }
    done
    return 0
}

# --- one client's row ---------------------------------------------------------------------------
# Each client has a directory $D/<client> with its log (client.log), what its consumers received
# (late-before.txt, late-after.txt, run.txt: one body per line), the files that let group "run" go
# on and stop (release, stop), and "failed": one line per failed check. A failed check ends the
# row's remaining steps; the other rows go on.

suffix_of() { case "$1" in java-*) echo "j$(echo "${1#java-}" | tr -d .)" ;; comet) echo comet ;; esac; }
topic_of() { echo "FoT_$(suffix_of "$1")"; }
first_prefix() { echo "$(suffix_of "$1")-first-"; }
second_prefix() { echo "$(suffix_of "$1")-second-"; }
row_ok() { [[ ! -s "$D/$1/failed" ]]; }
row_fail() { echo "$2" >>"$D/$1/failed"; echo "failover-read: $TARGET / $1: FAIL: $2" >&2; }

# produce <client> <bodyPrefix> <count>
produce() {
    local c=$1 prefix=$2 count=$3 dir="$D/$1" topic
    topic="$(topic_of "$c")"
    case "$c" in
        java-*)
            java_cmd "${c#java-}"
            "${JCMD[@]}" produce "$NS" "$topic" "$prefix" "$count" >>"$dir/client.log" 2>&1 ||
                { row_fail "$c" "producing $prefix*: $(last_verdict "$dir/client.log")"; return 1; }
            ;;
        comet)
            "$COMET" produce -n "$NS" "$topic" --body "$prefix{i}" --count "$count" --json >>"$dir/client.log" 2>&1 ||
                { row_fail "$c" "comet produce of $prefix* failed: $(tail -1 "$dir/client.log")"; return 1; }
            ;;
    esac
}

# consume <client> <group> <count> <out>: stops after <count> messages or $IDLE s without one.
consume() {
    local c=$1 group=$2 count=$3 out=$4 dir="$D/$1" topic rc=0
    topic="$(topic_of "$c")"
    : >"$out"
    case "$c" in
        java-*)
            java_cmd "${c#java-}"
            "${JCMD[@]}" consume "$NS" "$topic" "$group" "$count" "$IDLE" "$out" >>"$dir/client.log" 2>&1 || rc=$?
            ;;
        comet)
            python3 "$HERE/bodies.py" "$out" -- "$COMET" consume -n "$NS" "$topic" -g "$group" --from first \
                --count "$count" --idle "$IDLE" --json 2>>"$dir/client.log" || rc=$?
            ;;
    esac
    # An idle run that got nothing fails (`comet consume` says "no messages"); the counts tell.
    ((rc == 0)) || echo "failover-read: $c $group consumer exited $rc" >>"$dir/client.log"
    return 0
}

# start_held <client>: group "run", in the background; its pid in <client>/run.pid.
start_held() {
    local c=$1 dir="$D/$1" topic group
    topic="$(topic_of "$c")"
    group="FoRun_$(suffix_of "$c")"
    case "$c" in
        java-*)
            java_cmd "${c#java-}"
            "${JCMD[@]}" consume-held "$NS" "$topic" "$group" "$HOLD_AFTER" "$dir/release" "$dir/stop" "$dir/run.txt" \
                >>"$dir/client.log" 2>&1 </dev/null &
            echo $! >"$dir/run.pid"
            ;;
        comet)
            # bodies.py starts `comet consume` and writes its pid to run.pid.
            python3 "$HERE/bodies.py" "$dir/run.txt" --hold-after "$HOLD_AFTER" --release "$dir/release" \
                --pid-file "$dir/run.pid" -- "$COMET" consume -n "$NS" "$topic" -g "$group" --from first --json \
                --pull-batch-size 1 --pull-threshold-for-queue 1 2>>"$dir/client.log" </dev/null &
            echo $! >"$dir/reader.pid"
            wait_for 10 "$c: comet consume of group run started" test -s "$dir/run.pid"
            ;;
    esac
}

# stop_held <client>: Java's runner stops on its stop file, `comet consume` on SIGTERM (both
# commit what they consumed).
stop_held() {
    local c=$1 dir="$D/$1"
    case "$c" in
        java-*)
            touch "$dir/stop"
            wait_for "$STOP_TIMEOUT" "$c group run stops" bash -c "! kill -0 $(cat "$dir/run.pid") 2>/dev/null"
            rm -f "$dir/run.pid"
            ;;
        comet)
            stop_pid "$dir/run.pid" "$c comet consume of group run"
            # bodies.py ends with the CLI and exits with its status.
            local rc=0
            wait "$(cat "$dir/reader.pid")" || rc=$?
            rm -f "$dir/reader.pid"
            ((rc == 0)) || row_fail "$c" "comet consume of group run exited $rc on SIGTERM"
            ;;
    esac
}

lines_of() { if [[ -f "$1" ]]; then grep -c '' "$1" || true; else echo 0; fi; }
held_started() { (($(lines_of "$D/$1/run.txt") >= HOLD_AFTER)); }
run_complete() {
    python3 "$HERE/tally.py" "$D/$1/run.txt" --expect "$(first_prefix "$1"):$FIRST" \
        --expect "$(second_prefix "$1"):$SECOND" --complete
}

# Phase 1 of a row: FIRST messages, group "late" reads them all.
before_kill() {
    local c=$1 dir="$D/$1" counts
    produce "$c" "$(first_prefix "$c")" "$FIRST" || return 0
    consume "$c" "FoLate_$(suffix_of "$c")" "$FIRST" "$dir/late-before.txt"
    counts="$(python3 "$HERE/tally.py" "$dir/late-before.txt" --expect "$(first_prefix "$c"):$FIRST")"
    echo "failover-read: $TARGET / $c: group late before the kill: $counts"
    [[ "$counts" == "received=$FIRST unique=$FIRST missing=0 "* ]] ||
        row_fail "$c" "group late did not read the $FIRST first messages exactly once while the master was up: $counts"
    return 0
}

# Phase 3 of a row: a new consumer of group "late", started with the master dead.
late_after_kill() {
    local c=$1 dir="$D/$1" counts
    consume "$c" "FoLate_$(suffix_of "$c")" "$SECOND" "$dir/late-after.txt"
    counts="$(python3 "$HERE/tally.py" "$dir/late-after.txt" --expect "$(second_prefix "$c"):$SECOND" \
        --earlier "$(first_prefix "$c"):$FIRST")"
    echo "$counts" >"$dir/late-after.counts"
    echo "failover-read: $TARGET / $c: group late after the kill: $counts"
    [[ "$counts" == "received=$SECOND unique=$SECOND missing=0 duplicates=0 earlier=0 unknown=0" ]] ||
        row_fail "$c" "group late, started after the master died, did not read exactly the $SECOND new messages: $counts"
    return 0
}

# --- targets ------------------------------------------------------------------------------------

start_comet_cluster() {
    local ns master slave role id port
    read -r ns master slave < <(pick_ports)
    step "$TARGET: comet namesrv :$ns, Comet master :$master, Comet slave :$slave"
    start_comet namesrv namesrv --listen "$BIND_IP:$ns" --data-dir "$D/namesrv"
    wait_for 30 "comet namesrv listening" alive_and_listening namesrv "$ns"
    for role in master slave; do
        if [[ $role == master ]]; then id=0 port=$master; else id=1 port=$slave; fi
        cat >"$D/$role.conf" <<EOF
brokerClusterName=$CLUSTER
brokerName=$BROKER_NAME
brokerId=$id
brokerRole=$([[ $role == master ]] && echo ASYNC_MASTER || echo SLAVE)
slaveReadEnable=true
namesrvAddr=$BIND_IP:$ns
bindAddress=$BIND_IP
listenPort=$port
brokerIP1=$BIND_IP
brokerIP2=$BIND_IP
storePathRootDir=$D/$role
mappedFileSizeCommitLog=$SEGMENT
diskMaxUsedSpaceRatio=99
consoleEnable=false
EOF
        start_comet "$role" broker -c "$D/$role.conf"
        wait_for 60 "Comet $role listening" alive_and_listening "$role" "$port"
    done
    # The master starts sending its log once the slave's first offset report arrived.
    wait_for "$WAIT" "the Comet slave connected to the master's HA port and reported" \
        logged "$D/master.log" "transferring the commit log to a slave"
    NS="$BIND_IP:$ns" MASTER="$BIND_IP:$master" SLAVE="$BIND_IP:$slave"
}

start_apache_cluster() {
    CLUSTER_NAME="$CLUSTER" BROKER_NAME="$BROKER_NAME" COMMITLOG_FILE_SIZE="$SEGMENT" \
        BROKER_EXTRA_CONF="waitTimeMillsInSendQueue=5000" \
        "$APACHE" start "$D/apache-master" >"$D/apache-master-start.log" 2>&1 ||
        { cat "$D/apache-master-start.log"; die "the Apache name server and master did not start"; }
    NS="$(sed -n 's/^NAMESRV_ADDR=//p' "$D/apache-master/env")"
    MASTER="$(sed -n 's/^BROKER_ADDR=//p' "$D/apache-master/env")"
    EXTERNAL_NAMESRV="$NS" CLUSTER_NAME="$CLUSTER" BROKER_NAME="$BROKER_NAME" BROKER_ROLE=SLAVE BROKER_ID=1 \
        COMMITLOG_FILE_SIZE="$SEGMENT" BROKER_EXTRA_CONF="slaveReadEnable=true" \
        "$APACHE" start "$D/apache-slave" >"$D/apache-slave-start.log" 2>&1 ||
        { cat "$D/apache-slave-start.log"; die "the Apache slave did not start"; }
    SLAVE="$(sed -n 's/^BROKER_ADDR=//p' "$D/apache-slave/env")"
    step "$TARGET: Apache name server $NS, master $MASTER, slave $SLAVE"
    # The master logs the slave's first offset report; it sends nothing before it.
    wait_for "$WAIT" "the Apache slave connected to the master's HA port and reported" \
        logged "$D/apache-master/logs/rocketmqlogs/broker.log" "request offset"
}

kill_master() {
    case "$TARGET" in
        comet)
            local pid
            pid="$(cat "$D/master.pid")"
            kill -KILL "$pid"
            wait "$pid" 2>/dev/null || true
            rm -f "$D/master.pid"
            ;;
        apache) "$APACHE" kill-broker "$D/apache-master" ;;
    esac
}

stop_cluster() {
    case "$TARGET" in
        comet)
            stop_pid "$D/slave.pid" "comet slave"
            stop_pid "$D/namesrv.pid" "comet namesrv"
            ;;
        apache)
            # Nothing is compared after the run, so Apache's slow clean shutdown is skipped.
            "$APACHE" kill "$D/apache-slave" >/dev/null
            "$APACHE" kill "$D/apache-master" >/dev/null
            ;;
    esac
}

# wait_rows <client:pid>...: waits for each row's background step; a step that died without
# saying why fails its row.
wait_rows() {
    local pair rc
    for pair in "$@"; do
        rc=0
        wait "${pair#*:}" || rc=$?
        ((rc == 0)) || row_fail "${pair%%:*}" "a step of the row exited $rc; see client.log"
    done
}

run_target() {
    local c pids=() topics=() t0=$SECONDS
    for c in "${CLIENTS[@]}"; do
        mkdir -p "$D/$c"
        : >"$D/$c/failed"
        topics+=("$(topic_of "$c")")
    done
    "start_${TARGET}_cluster"
    step "$TARGET: creating ${topics[*]} ($QUEUES queues) on the master"
    check create-topic "$NS" "$MASTER" "$QUEUES" "${topics[@]}"

    step "$TARGET: every client produces $FIRST messages; its group late reads them all"
    for c in "${CLIENTS[@]}"; do
        before_kill "$c" &
        pids+=("$c:$!")
    done
    wait_rows "${pids[@]}"
    step "$TARGET: group run of every client starts and stops after $HOLD_AFTER messages"
    for c in "${CLIENTS[@]}"; do
        if row_ok "$c"; then start_held "$c"; fi
    done
    for c in "${CLIENTS[@]}"; do
        row_ok "$c" || continue
        local deadline=$((SECONDS + WAIT))
        until held_started "$c"; do
            if ((SECONDS >= deadline)) || ! alive "$D/$c/run.pid"; then
                row_fail "$c" "group run did not start consuming: $(lines_of "$D/$c/run.txt") message(s) in ${WAIT}s"
                break
            fi
            sleep 0.2
        done
    done

    step "$TARGET: every client produces $SECOND more messages"
    pids=()
    for c in "${CLIENTS[@]}"; do
        if row_ok "$c"; then
            produce "$c" "$(second_prefix "$c")" "$SECOND" &
            pids+=("$c:$!")
        fi
    done
    wait_rows "${pids[@]}"
    step "$TARGET: waiting until the slave holds every message and group late's committed offsets"
    for c in "${CLIENTS[@]}"; do
        if row_ok "$c" && ! check_soft wait-synced "$NS" "$MASTER" "$SLAVE" "$WAIT" "$(topic_of "$c")=$((FIRST + SECOND))"; then
            row_fail "$c" "$CHECK_VERDICT"
        fi
    done
    for c in "${CLIENTS[@]}"; do
        if row_ok "$c" && ! check_soft wait-group-synced "$NS" "$MASTER" "$SLAVE" "$SYNC_WAIT" \
            "FoLate_$(suffix_of "$c")@$(topic_of "$c")=$FIRST"; then
            row_fail "$c" "$CHECK_VERDICT"
        fi
    done
    for c in "${CLIENTS[@]}"; do
        row_ok "$c" || continue
        if ! alive "$D/$c/run.pid"; then
            row_fail "$c" "group run exited before the master died"
        elif (($(lines_of "$D/$c/run.txt") >= FIRST + SECOND)); then
            row_fail "$c" "group run read every message before the master died: nothing was left to read from the slave"
        else
            echo "failover-read: $TARGET / $c: group run has read $(lines_of "$D/$c/run.txt") of $((FIRST + SECOND)) messages when the master is killed"
        fi
    done

    step "$TARGET: killing the master (SIGKILL)"
    kill_master
    check wait-no-master "$NS" "$WAIT" "${topics[@]}"

    step "$TARGET: group run goes on; a new consumer of group late reads from the slave"
    for c in "${CLIENTS[@]}"; do touch "$D/$c/release"; done
    pids=()
    for c in "${CLIENTS[@]}"; do
        if row_ok "$c"; then
            late_after_kill "$c" &
            pids+=("$c:$!")
        fi
    done
    wait_rows "${pids[@]}"
    for c in "${CLIENTS[@]}"; do
        row_ok "$c" || continue
        if check_soft wait-group-at-end "$NS" "$SLAVE" "$WAIT" "FoLate_$(suffix_of "$c")@$(topic_of "$c")"; then
            echo ok >"$D/$c/late-offsets"
        else
            row_fail "$c" "$CHECK_VERDICT"
        fi
    done
    for c in "${CLIENTS[@]}"; do
        [[ -f "$D/$c/run.pid" ]] || continue
        local deadline=$((SECONDS + WAIT))
        until run_complete "$c"; do
            if ((SECONDS >= deadline)) || ! alive "$D/$c/run.pid"; then
                row_fail "$c" "group run did not receive every message: $(python3 "$HERE/tally.py" "$D/$c/run.txt" \
                    --expect "$(first_prefix "$c"):$FIRST" --expect "$(second_prefix "$c"):$SECOND")"
                break
            fi
            sleep 0.2
        done
        if run_complete "$c"; then
            if check_soft wait-group-at-end "$NS" "$SLAVE" "$WAIT" "FoRun_$(suffix_of "$c")@$(topic_of "$c")"; then
                echo ok >"$D/$c/run-offsets"
            else
                row_fail "$c" "$CHECK_VERDICT"
            fi
        fi
        stop_held "$c"
        if [[ $c == java-* ]] && [[ "$(last_verdict "$D/$c/client.log")" != "PASS consume-held" ]]; then
            row_fail "$c" "group run's runner: $(last_verdict "$D/$c/client.log")"
        fi
        python3 "$HERE/tally.py" "$D/$c/run.txt" --expect "$(first_prefix "$c"):$FIRST" \
            --expect "$(second_prefix "$c"):$SECOND" >"$D/$c/run.counts"
        echo "failover-read: $TARGET / $c: group run: $(cat "$D/$c/run.counts")"
    done

    step "$TARGET: stopping the cluster"
    stop_cluster
    echo $((SECONDS - t0)) >"$D/seconds"
}

# Each target runs in its own subshell (so `set -e` and `die` end only that target) with its own
# directory D.
for TARGET in "${TARGETS[@]}"; do
    D="$WORK/$TARGET"
    mkdir -p "$D"
    (run_target) &
    if ! wait $!; then
        echo "$TARGET" >"$D/target-failed"
        echo "failover-read: target $TARGET FAILED; logs of its servers and clients follow" >&2
        print_logs "$D" >&2
    fi
    reap "$D"
done

# --- summary --------------------------------------------------------------------------------------
# field <key> <counts line>: one value of a tally line.
field() { sed -n "s/.*\b$1=\([0-9]*\).*/\1/p" <<<"$2"; }
step "summary"
failed=0
printf '%-7s %-11s | %-52s | %-40s | %-6s\n' target client "late, started after the kill: received/missing/again" \
    "run: received (unique)/missing/dups" result
for TARGET in "${TARGETS[@]}"; do
    D="$WORK/$TARGET"
    for c in "${CLIENTS[@]}"; do
        late="-" run="-" result=pass
        if [[ -f "$D/$c/late-after.counts" ]]; then
            l="$(cat "$D/$c/late-after.counts")"
            late="$(field received "$l")/$(field missing "$l")/$(field earlier "$l") of $SECOND"
            [[ -f "$D/$c/late-offsets" ]] && late+=", offsets at slave ok"
        fi
        if [[ -f "$D/$c/run.counts" ]]; then
            r="$(cat "$D/$c/run.counts")"
            run="$(field received "$r") ($(field unique "$r"))/$(field missing "$r")/$(field duplicates "$r") of $((FIRST + SECOND))"
            [[ -f "$D/$c/run-offsets" ]] && run+=", offsets at slave ok"
        fi
        if [[ -f "$D/target-failed" || ! -f "$D/$c/failed" || -s "$D/$c/failed" ||
            ! -f "$D/$c/late-offsets" || ! -f "$D/$c/run-offsets" ]]; then
            result=FAIL
            failed=$((failed + 1))
        fi
        printf '%-7s %-11s | %-52s | %-40s | %-6s\n' "$TARGET" "$c" "$late" "$run" "$result"
        if [[ $result == FAIL && -s "$D/$c/failed" ]]; then sed 's/^/        /' "$D/$c/failed"; fi
    done
    [[ -f "$D/seconds" ]] && echo "        ($TARGET: $(cat "$D/seconds") s)"
done
if ((failed > 0)); then
    KEEP=yes
    echo "failover-read: $failed row(s) FAILED ($((SECONDS - T0)) s)"
    exit 1
fi
echo "failover-read: all rows passed in $((SECONDS - T0)) s"
