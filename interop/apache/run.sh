#!/usr/bin/env bash
# Runs the real Apache RocketMQ name server and broker (from Maven Central, see pom.xml) on loopback,
# for interop tests and fixture capture.
#
#   run.sh start <workdir>   start a name server and a broker, wait until both accept connections and
#                            the broker has booted, write <workdir>/env (NAMESRV_ADDR, BROKER_ADDR, ...)
#   run.sh stop <workdir>    SIGTERM both (broker first) and wait for them to exit
#   run.sh stop-broker <workdir>  SIGTERM only the broker and wait for it to exit (the name server
#                            keeps serving routes, e.g. to show clients falling back to a slave)
#   run.sh restart-broker <workdir>  SIGTERM the broker, wait for it to exit, start it again from its
#                            config file (which updateBrokerConfig rewrites) and wait until it booted
#   run.sh kill <workdir>    SIGKILL both
#   run.sh kill-broker <workdir>  SIGKILL only the broker and wait until it is gone (a crash: it
#                            does not unregister; the name server drops it when its connection closes)
#   run.sh classpath         print the runtime classpath (resolving it first if needed)
#
# Environment knobs (defaults in brackets):
#   ROCKETMQ_VERSION [5.3.3]            Apache version to resolve (5.3.4 is only partly on Maven Central)
#   JAVA_HEAP [512m]                    -Xms/-Xmx of each JVM
#   BIND_IP [127.0.0.1]                 address both servers listen on (also the HA listener)
#   BROKER_IP [$BIND_IP]                brokerIP1: the address the broker advertises in routes and msg ids;
#                                       point it at a recording proxy to see client<->broker traffic
#   NAMESRV_PORT / BROKER_PORT [free]   fixed ports; otherwise free ones are picked (the broker also
#                                       needs BROKER_PORT-2 (fast channel) and BROKER_PORT+1 (HA) free)
#   EXTERNAL_NAMESRV []                 host:port of a name server already running (e.g. Comet's): no
#                                       name server is started and the broker registers there
#   CLUSTER_NAME [CometInteropCluster]  brokerClusterName
#   BROKER_NAME [broker-a]              brokerName
#   BROKER_ROLE [ASYNC_MASTER]          brokerRole: ASYNC_MASTER | SYNC_MASTER | SLAVE
#   BROKER_ID [0]                       brokerId (a SLAVE needs one above 0)
#   COMMITLOG_FILE_SIZE [67108864]      mappedFileSizeCommitLog in bytes
#   FLUSH_DISK_TYPE [ASYNC_FLUSH]       ASYNC_FLUSH | SYNC_FLUSH
#   BROKER_EXTRA_CONF []                extra broker.conf lines (key=value, newline separated)
#   START_TIMEOUT [120]                 seconds to wait for each server
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROCKETMQ_VERSION="${ROCKETMQ_VERSION:-5.3.3}"
JAVA_HEAP="${JAVA_HEAP:-512m}"
BIND_IP="${BIND_IP:-127.0.0.1}"
BROKER_IP="${BROKER_IP:-$BIND_IP}"
COMMITLOG_FILE_SIZE="${COMMITLOG_FILE_SIZE:-67108864}"
FLUSH_DISK_TYPE="${FLUSH_DISK_TYPE:-ASYNC_FLUSH}"
START_TIMEOUT="${START_TIMEOUT:-120}"
EXTERNAL_NAMESRV="${EXTERNAL_NAMESRV:-}"
CLUSTER_NAME="${CLUSTER_NAME:-CometInteropCluster}"
BROKER_NAME="${BROKER_NAME:-broker-a}"
BROKER_ROLE="${BROKER_ROLE:-ASYNC_MASTER}"
BROKER_ID="${BROKER_ID:-0}"
STOP_TIMEOUT=60

die() { echo "run.sh: $*" >&2; exit 1; }

# Resolves the classpath once per version; Maven's local repository stays in ~/.m2 so CI reuses it.
classpath() {
    local cp_file="$HERE/target/classpath-$ROCKETMQ_VERSION.txt"
    if [[ ! -s "$cp_file" || ! -d "$HERE/target/classes/META-INF" ]]; then
        mvn -q -B -f "$HERE/pom.xml" -Drocketmq.version="$ROCKETMQ_VERSION" \
            compile dependency:build-classpath -Dmdep.outputFile="$cp_file" >&2 \
            || die "maven could not resolve Apache RocketMQ $ROCKETMQ_VERSION"
    fi
    echo "$HERE/target/classes:$(cat "$cp_file")"
}

# Prints N ports that are free on BIND_IP; for the broker the port P is chosen with P-2 and P+1 free too.
free_ports() {
    python3 - "$BIND_IP" <<'PY'
import socket, sys
host = sys.argv[1]

def free(port):
    s = socket.socket()
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()

def any_port():
    s = socket.socket()
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port

namesrv = any_port()
for _ in range(200):
    p = any_port()
    if p > 1024 and p != namesrv and all(free(q) for q in (p - 2, p, p + 1)) and namesrv not in (p - 2, p + 1):
        print(namesrv, p)
        break
else:
    sys.exit("no free broker port triple found")
PY
}

# Waits until host:port accepts a TCP connection or the pid dies.
wait_port() {
    local host=$1 port=$2 pid=$3 what=$4 deadline=$((SECONDS + START_TIMEOUT))
    until (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; do
        kill -0 "$pid" 2>/dev/null || die "$what exited during start-up; see its log"
        ((SECONDS < deadline)) || die "$what did not listen on $host:$port within ${START_TIMEOUT}s"
        sleep 0.2
    done
}

# Waits until a line matching a pattern shows up in a log, or the pid dies.
wait_log() {
    local file=$1 pattern=$2 pid=$3 what=$4 deadline=$((SECONDS + START_TIMEOUT))
    until grep -q "$pattern" "$file" 2>/dev/null; do
        kill -0 "$pid" 2>/dev/null || die "$what exited during start-up; see $file"
        ((SECONDS < deadline)) || die "$what did not report '$pattern' within ${START_TIMEOUT}s"
        sleep 0.2
    done
}

launch() { # launch <name> <main class> <args...>; JVM output goes to <workdir>/<name>.out
    local name=$1 main=$2
    shift 2
    # setsid: the servers must outlive the shell that started them (and not get its signals).
    ROCKETMQ_HOME="$WORKDIR" setsid java -server -Xms"$JAVA_HEAP" -Xmx"$JAVA_HEAP" \
        -XX:MaxDirectMemorySize=512m -Duser.home="$WORKDIR" -Drocketmq.home.dir="$WORKDIR" \
        -Dcomet.ha.bindAddress="$BIND_IP" -cp "$CP" "$main" "$@" \
        >"$WORKDIR/$name.out" 2>&1 </dev/null &
    echo $! >"$WORKDIR/$name.pid"
}

start() {
    mkdir -p "$WORKDIR"
    WORKDIR="$(cd "$WORKDIR" && pwd)"
    for n in broker namesrv; do
        if [[ -f "$WORKDIR/$n.pid" ]] && kill -0 "$(cat "$WORKDIR/$n.pid")" 2>/dev/null; then
            die "$n already running in $WORKDIR (pid $(cat "$WORKDIR/$n.pid"))"
        fi
    done
    CP="$(classpath)"
    local ports
    ports="$(free_ports)"
    local namesrv_port="${NAMESRV_PORT:-${ports% *}}" broker_port="${BROKER_PORT:-${ports#* }}"
    local namesrv_addr="$BIND_IP:$namesrv_port"
    [[ -z "$EXTERNAL_NAMESRV" ]] || namesrv_addr="$EXTERNAL_NAMESRV"
    mkdir -p "$WORKDIR/store/commitlog" "$WORKDIR/conf"

    cat >"$WORKDIR/conf/namesrv.conf" <<EOF
listenPort=$namesrv_port
bindAddress=$BIND_IP
EOF
    cat >"$WORKDIR/conf/broker.conf" <<EOF
brokerClusterName=$CLUSTER_NAME
brokerName=$BROKER_NAME
brokerId=$BROKER_ID
brokerRole=$BROKER_ROLE
namesrvAddr=$namesrv_addr
listenPort=$broker_port
bindAddress=$BIND_IP
brokerIP1=$BROKER_IP
brokerIP2=$BIND_IP
storePathRootDir=$WORKDIR/store
storePathCommitLog=$WORKDIR/store/commitlog
mappedFileSizeCommitLog=$COMMITLOG_FILE_SIZE
flushDiskType=$FLUSH_DISK_TYPE
autoCreateTopicEnable=true
autoCreateSubscriptionGroup=true
diskMaxUsedSpaceRatio=99
${BROKER_EXTRA_CONF:-}
EOF

    local t0=$SECONDS
    if [[ -z "$EXTERNAL_NAMESRV" ]]; then
        launch namesrv org.apache.rocketmq.namesrv.NamesrvStartup -c "$WORKDIR/conf/namesrv.conf"
        wait_port "$BIND_IP" "$namesrv_port" "$(cat "$WORKDIR/namesrv.pid")" "name server"
    fi
    launch broker org.apache.rocketmq.broker.BrokerStartup -c "$WORKDIR/conf/broker.conf"
    wait_port "$BIND_IP" "$broker_port" "$(cat "$WORKDIR/broker.pid")" broker
    # "boot success" is printed after the broker's first registration with the name server.
    wait_log "$WORKDIR/broker.out" "boot success" "$(cat "$WORKDIR/broker.pid")" broker

    cat >"$WORKDIR/env" <<EOF
NAMESRV_ADDR=$namesrv_addr
BROKER_ADDR=$BROKER_IP:$broker_port
BROKER_LISTEN_ADDR=$BIND_IP:$broker_port
BROKER_NAME=$BROKER_NAME
CLUSTER_NAME=$CLUSTER_NAME
ROCKETMQ_VERSION=$ROCKETMQ_VERSION
NAMESRV_PID=$(cat "$WORKDIR/namesrv.pid" 2>/dev/null || true)
BROKER_PID=$(cat "$WORKDIR/broker.pid")
EOF
    echo "run.sh: Apache RocketMQ $ROCKETMQ_VERSION up in $((SECONDS - t0))s: $(tr '\n' ' ' <"$WORKDIR/env")"
}

# signal_all <signal> <wait?> [names...]: broker first, so it can unregister from the name server.
signal_all() {
    local sig=$1 wait=$2
    shift 2
    local names=("$@")
    ((${#names[@]} > 0)) || names=(broker namesrv)
    for n in "${names[@]}"; do
        local f="$WORKDIR/$n.pid"
        [[ -f "$f" ]] || continue
        local pid
        pid="$(cat "$f")"
        # Only signal the pid we started: it must still be a java process running in this workdir.
        if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "-Drocketmq.home.dir=$WORKDIR "; then
            kill "-$sig" "$pid" 2>/dev/null || true
            if [[ $wait == yes ]]; then
                local deadline=$((SECONDS + STOP_TIMEOUT))
                while kill -0 "$pid" 2>/dev/null; do
                    if ((SECONDS >= deadline)); then
                        echo "run.sh: $n (pid $pid) ignored SIGTERM for ${STOP_TIMEOUT}s, sending SIGKILL" >&2
                        kill -KILL "$pid" 2>/dev/null || true
                    fi
                    sleep 0.2
                done
            fi
        fi
        rm -f "$f"
    done
}

# restart_broker: the broker again, from the config file it started with, on the same ports.
restart_broker() {
    [[ -f "$WORKDIR/env" ]] || die "no broker was started in $WORKDIR"
    signal_all TERM yes broker
    CP="$(classpath)"
    local listen
    listen="$(sed -n 's/^BROKER_LISTEN_ADDR=//p' "$WORKDIR/env")"
    launch broker org.apache.rocketmq.broker.BrokerStartup -c "$WORKDIR/conf/broker.conf"
    wait_port "${listen%:*}" "${listen##*:}" "$(cat "$WORKDIR/broker.pid")" broker
    wait_log "$WORKDIR/broker.out" "boot success" "$(cat "$WORKDIR/broker.pid")" broker
    sed -i "s/^BROKER_PID=.*/BROKER_PID=$(cat "$WORKDIR/broker.pid")/" "$WORKDIR/env"
    echo "run.sh: Apache RocketMQ broker restarted on $listen"
}

cmd="${1:-}"
case "$cmd" in
start | stop | stop-broker | restart-broker | kill | kill-broker)
    [[ $# -eq 2 ]] || die "usage: run.sh $cmd <workdir>"
    WORKDIR="$2"
    [[ $cmd == start ]] || WORKDIR="$(cd "$WORKDIR" && pwd)"
    case "$cmd" in
    start) start ;;
    stop) signal_all TERM yes ;;
    stop-broker) signal_all TERM yes broker ;;
    restart-broker) restart_broker ;;
    kill) signal_all KILL no ;;
    kill-broker) signal_all KILL yes broker ;;
    esac
    ;;
classpath) classpath ;;
*) die "usage: run.sh start|stop|stop-broker|restart-broker|kill|kill-broker <workdir> | run.sh classpath" ;;
esac
