# Shared by bench/compare.sh and bench/scale.sh: recording results, running `comet bench`, and
# starting, measuring and stopping one broker (Comet, Apache RocketMQ or rocketmq-rust) with an
# empty store. The caller sets ROOT, WORK, RESULTS, COMMANDS, COMET_BIN (BENCH_BIN), QUEUES,
# SIZE, GEN_THREADS, JAVA_HEAP, ROCKETMQ_VERSION and START_PATIENCE, and defines die and log.
# shellcheck shell=bash

record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RESULTS"; }

# json_get <file> <dotted.path>: prints a field of a JSON object (empty when absent).
json_get() {
    python3 - "$1" "$2" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split('.'):
    v = v.get(k) if isinstance(v, dict) else None
print("" if v is None else v)
PY
}

# bench <broker> <workload> <outfile> <args...>: runs `comet bench` and logs the command line.
# THREADS, when set for one call, replaces GEN_THREADS.
bench() {
    local broker=$1 workload=$2 out=$3
    shift 3
    local threads="${THREADS-$GEN_THREADS}" t=()
    [[ -n $threads ]] && t=(--threads "$threads")
    echo "$broker $workload: comet bench ${t[*]:+${t[*]} }$*" >>"$COMMANDS"
    "${BENCH_BIN:-$COMET_BIN}" bench "${t[@]}" "$@" --json >"$out"
}

# ---- broker lifecycle -----------------------------------------------------------------------------
# Free ports: a name server port, and a broker port P with P-2 and P+1 free (Apache's fast channel
# and HA listener). They are taken below the kernel's ephemeral range: a port from that range can
# be handed to an outgoing connection (the load generator polling the starting name server) in the
# seconds between this check and the JVM binding it, which once failed Apache's HA listener.
free_ports() {
    python3 - <<'PY'
import random
import socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
    low = int(f.read().split()[0])
top = max(low - 2, 12000)
def pick():
    return random.randrange(10002, top)
n = pick()
while not free(n):
    n = pick()
while True:
    p = pick()
    if abs(p - n) > 2 and all(free(q) for q in (p - 2, p, p + 1)):
        print(n, p); break
PY
}

now_ns() { date +%s%N; }

# start_broker <broker> <flush> <dir> [keep]: sets BROKER_PID, NAMESRV, BROKER_PORT, STARTED_NS,
# STARTER_PID. With "keep" the directory (and so the store) of an earlier start is reused; the
# brokers' logs are appended to, so R10's first start (a start→first-send figure too) keeps its
# timeline beside the restart's.
start_broker() {
    local broker=$1 flush=$2 dir=$3 keep=${4:-} ports
    if [[ $keep != keep ]]; then rm -rf "$dir"; fi
    mkdir -p "$dir"
    ports="$(free_ports)"
    local np="${ports% *}" bp="${ports#* }"
    NAMESRV="127.0.0.1:$np"
    BROKER_PORT="$bp"
    STARTED_NS="$(now_ns)"
    # MASTER_CONF: extra broker.conf lines of the master (the replication workloads' role).
    local extra=() line
    while IFS= read -r line; do
        [[ -n $line ]] && extra+=(--set "$line")
    done <<<"${MASTER_CONF:-}"
    case "$broker" in
    comet)
        "$COMET_BIN" serve --namesrv-listen "$NAMESRV" --broker-listen "127.0.0.1:$bp" \
            --data-dir "$dir/data" --set "flushDiskType=$flush" "${extra[@]}" >>"$dir/comet.log" 2>&1 &
        BROKER_PID=$!
        STARTER_PID=""
        echo "comet serve --namesrv-listen $NAMESRV --broker-listen 127.0.0.1:$bp --data-dir DIR --set flushDiskType=$flush ${extra[*]}" >"$dir/cmdline"
        ;;
    apache)
        NAMESRV_PORT=$np BROKER_PORT=$bp FLUSH_DISK_TYPE=$flush JAVA_HEAP=$JAVA_HEAP COMMITLOG_FILE_SIZE=1073741824 \
            BROKER_EXTRA_CONF="${MASTER_CONF:-}" \
            ROCKETMQ_VERSION=$ROCKETMQ_VERSION "$ROOT/interop/apache/run.sh" start "$dir/rmq" >>"$dir/runsh.log" 2>&1 &
        STARTER_PID=$!
        # The broker pid file appears once run.sh launched the broker JVM.
        local deadline=$((SECONDS + START_PATIENCE))
        until [[ -s "$dir/rmq/broker.pid" ]]; do
            kill -0 "$STARTER_PID" 2>/dev/null || { cat "$dir/runsh.log" >&2; die "Apache start failed"; }
            ((SECONDS < deadline)) || die "Apache broker did not start"
            sleep 0.05
        done
        BROKER_PID="$(cat "$dir/rmq/broker.pid")"
        echo "interop/apache/run.sh start DIR (NamesrvStartup + BrokerStartup, -Xms$JAVA_HEAP -Xmx$JAVA_HEAP, flushDiskType=$flush, mappedFileSizeCommitLog=1 GiB as Comet)" >"$dir/cmdline"
        ;;
    rocketmq-rust)
        local bin="$WORK/rocketmq-rust/bin"
        mkdir -p "$dir/store"
        cat >"$dir/broker.conf" <<CONF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
listenPort=$bp
brokerIP1=127.0.0.1
namesrvAddr=$NAMESRV
storePathRootDir=$dir/store
flushDiskType=$flush
autoCreateTopicEnable=true
CONF
        # 1.0.0's name server refuses a properties file ("failed to load NameServer runtime
        # configuration") and fails to start without a RocketMQ home: flags and a home it is.
        "$bin/rocketmq-namesrv-rust" --listenPort "$np" --bindAddress 127.0.0.1 --rocketmqHome "$dir" \
            >>"$dir/namesrv.log" 2>&1 &
        STARTER_PID=$!
        # The broker gives up at start if the name server is not listening yet.
        local deadline=$((SECONDS + START_PATIENCE))
        until (exec 3<>"/dev/tcp/127.0.0.1/$np") 2>/dev/null; do
            ((SECONDS < deadline)) || die "rocketmq-rust name server did not start"
            sleep 0.05
        done
        ROCKETMQ_HOME="$dir" "$bin/rocketmq-broker-rust" -c "$dir/broker.conf" -n "$NAMESRV" \
            >>"$dir/broker.log" 2>&1 &
        BROKER_PID=$!
        echo "rocketmq-namesrv-rust --listenPort P --bindAddress 127.0.0.1 --rocketmqHome DIR; ROCKETMQ_HOME=DIR rocketmq-broker-rust -c broker.conf -n $NAMESRV (flushDiskType=$flush)" >"$dir/cmdline"
        ;;
    *) die "unknown broker $broker" ;;
    esac
}

# wait_ready <broker> <workload> <dir>: waits for the first accepted send; records start_ms.
wait_ready() {
    local broker=$1 workload=$2 dir=$3 ready_ns
    # One launch/ready pair per start (R10's restart keeps its first start's), to be read
    # against the broker's log timestamps.
    local ready="$dir/$workload.ready.json"
    echo "$STARTED_NS" >"$dir/$workload.started_ns"
    bench "$broker" "$workload-ready" "$ready" produce -n "$NAMESRV" -t "Ready$workload" \
        --queues "$QUEUES" -p 1 -s "$SIZE" --count 1 --wait-ready "$START_PATIENCE" \
        || die "$broker did not accept a send within ${START_PATIENCE}s (see $dir)"
    ready_ns="$(json_get "$ready" ready_unix_nanos)"
    record "$broker" "$workload" start_ms "$(((ready_ns - STARTED_NS) / 1000000))"
    if [[ -n "${STARTER_PID:-}" && "$broker" == apache ]]; then
        wait "$STARTER_PID" || die "run.sh start failed"
    fi
}

# ticks_s <ticks>: clock ticks (/proc's unit for CPU time) as seconds, two decimals.
ticks_s() {
    python3 -c "import os,sys; print(round(int(sys.argv[1]) / os.sysconf('SC_CLK_TCK'), 2))" "$1"
}

# proc_stats <pid>: "<peak RSS KiB> <anonymous RSS KiB now> <CPU seconds>" from /proc. The peak
# includes resident pages of the mapped commit log (file-backed), for every broker alike.
proc_stats() {
    local pid=$1 hwm anon ticks
    hwm="$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status")"
    anon="$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status")"
    ticks="$(sed 's/^.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}')"
    echo "$hwm $anon $(ticks_s "$ticks")"
}

# steal_ticks: the box's CPU steal so far (clock ticks, all CPUs), the 8th value of /proc/stat's
# "cpu" line: time the hypervisor ran something else while this guest's vCPUs wanted to run.
steal_ticks() {
    awk '/^cpu / {print $9; exit}' /proc/stat
}

# kill_broker <broker> <dir>: SIGKILL, as a crash would (for Apache both JVMs, as a host crash).
kill_broker() {
    local broker=$1 dir=$2
    case "$broker" in
    comet) kill -KILL "$BROKER_PID" 2>/dev/null || true; wait "$BROKER_PID" 2>/dev/null || true ;;
    apache) "$ROOT/interop/apache/run.sh" kill "$dir/rmq" >>"$dir/runsh.log" 2>&1 || true ;;
    rocketmq-rust)
        kill -KILL "$BROKER_PID" "$STARTER_PID" 2>/dev/null || true
        wait "$BROKER_PID" "$STARTER_PID" 2>/dev/null || true
        ;;
    esac
}

# store_bytes <dir>: bytes of commit log on disk under a broker's directory.
store_bytes() {
    find "$1" -path '*commitlog*' -type f -printf '%s\n' 2>/dev/null | awk '{s += $1} END {print s + 0}'
}

stop_broker() {
    local broker=$1 workload=$2 dir=$3
    local hwm anon cpu
    read -r hwm anon cpu < <(proc_stats "$BROKER_PID")
    record "$broker" "$workload" rss_mib "$((hwm / 1024))"
    record "$broker" "$workload" anon_mib "$((anon / 1024))"
    record "$broker" "$workload" cpu_s "$cpu"
    case "$broker" in
    comet)
        kill -TERM "$BROKER_PID" 2>/dev/null || true
        wait "$BROKER_PID" 2>/dev/null || true
        ;;
    apache) "$ROOT/interop/apache/run.sh" stop "$dir/rmq" >>"$dir/runsh.log" 2>&1 || true ;;
    rocketmq-rust)
        kill -TERM "$BROKER_PID" "$STARTER_PID" 2>/dev/null || true
        wait "$BROKER_PID" "$STARTER_PID" 2>/dev/null || true
        ;;
    esac
    rm -rf "$dir/data" "$dir/rmq/store" "$dir/store" "$dir/slave/store"
    # The next broker starts on a quiet disk: freeing a workload's gigabytes and their journal
    # work otherwise overlapped the next start (a SYNC_FLUSH start right after W1s's 5 GB was
    # seen taking 76 ms to its first send against 17-49 ms for the others).
    sync
}
