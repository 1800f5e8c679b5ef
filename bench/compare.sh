#!/usr/bin/env bash
# Side-by-side comparison of Comet with Apache RocketMQ (and optionally rocketmq-rust) on this box,
# with one load generator for all of them (`comet bench`). Writes the run's full results into
# bench/results.md (between the "compare.sh results" markers, replacing an earlier run's section);
# BENCHMARKS.md quotes the figures that matter from it.
#
#   bench/compare.sh [--with-rocketmq-rust] [--brokers "comet apache"] [--workloads "W1 W6"] [--no-write]
#
# Each workload runs against a freshly started broker with an empty store, so peak RSS, CPU
# seconds and start-to-first-send are per workload. W1-W5 are timed or counted loads, W6 is W1
# beside 1,000 idle client connections, R10 fills a 10 GiB commit log, kills the broker with
# SIGKILL and times the restart until a send is accepted again. H1-H3 run a master with a slave
# attached (H1 ASYNC_MASTER and H2 SYNC_MASTER with two copies under W1s's load, H3 a slave catching
# up H3_GIB written while it was down). T1 is W1s with timer messages due T1_AFTER_MS later (parked,
# not delivered during the run); T2 sends T2_RATE timer messages/s due T2_AFTER_MS later to a
# consumer in the same process and measures how late each arrives. See bench/README.md for the knobs.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"

DURATION="${DURATION:-60}"            # seconds per timed workload (W1, W2, W3, W5)
PRODUCERS="${PRODUCERS:-32}"          # concurrent senders (W1, W2, W5)
SIZE="${SIZE:-1024}"                  # body bytes
QUEUES="${QUEUES:-8}"                 # queues of each topic
W3_RATE="${W3_RATE:-10000}"           # msg/s of the e2e workload
W3_PRODUCERS="${W3_PRODUCERS:-32}"    # senders sharing the W3 schedule
T1_AFTER_MS="${T1_AFTER_MS:-600000}"  # T1 timer messages are due this long after their send
T2_AFTER_MS="${T2_AFTER_MS:-5000}"    # T2 timer messages are due this long after their send
T2_RATE="${T2_RATE:-2000}"            # msg/s of T2
W4_COUNT="${W4_COUNT:-1000000}"       # backlog size of W4
W5_BATCH="${W5_BATCH:-32}"            # messages per batch of W5
W6_IDLE="${W6_IDLE:-1000}"            # idle client connections held during W6
R10_GIB="${R10_GIB:-10}"              # commit log size (GiB) before the kill -9 of R10
H3_GIB="${H3_GIB:-10}"                # log written while H3's slave is down (GiB)
GEN_THREADS="${GEN_THREADS:-}"        # tokio worker threads of the load generator (empty: one per core)
JAVA_HEAP="${JAVA_HEAP:-1g}"          # -Xms/-Xmx of each Apache JVM
ROCKETMQ_VERSION="${ROCKETMQ_VERSION:-5.3.3}"
RMQRS_VERSION="${RMQRS_VERSION:-^1}"  # rocketmq-rust crates version requirement
# Workloads rocketmq-rust runs: at its ~1.5 k msg/s, W4's 1 M backlog and R10's 10 GiB fill would
# take from ten minutes to hours, so they are left out (their cells read "–").
RMQRS_WORKLOADS="${RMQRS_WORKLOADS:-W1 W1s W2 W2s W3 W3s W5 W6}"
START_PATIENCE="${START_PATIENCE:-180}"
# A workload during which the box lost more than STEAL_LIMIT_S seconds of CPU to steal (both vCPUs
# together; a quiet 60 s workload loses 0-1 s) measured the host, not the broker: it runs again,
# at most STEAL_RERUNS times, for every broker alike, and the report counts the reruns.
STEAL_LIMIT_S="${STEAL_LIMIT_S:-6}"
STEAL_RERUNS="${STEAL_RERUNS:-2}"
CEILING_SECS="${CEILING_SECS:-3}"
WORK="${WORK:-$(mktemp -d /tmp/comet-compare.XXXXXX)}"
OUT="${OUT:-$ROOT/bench/results.md}"
BROKERS="comet apache"
WORKLOADS="W1 W1s W2 W2s W3 W3s W4 W5 W6 R10 H1 H2 H3 T1 T2"
WRITE=yes

while (($#)); do
    case "$1" in
    --with-rocketmq-rust) BROKERS="$BROKERS rocketmq-rust" ;;
    --brokers) BROKERS="$2"; shift ;;
    --workloads) WORKLOADS="$2"; shift ;;
    --no-write) WRITE=no ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

die() { echo "compare.sh: $*" >&2; exit 1; }
log() { echo "[compare $(date +%H:%M:%S)] $*" >&2; }
mkdir -p "$WORK"
RESULTS="$WORK/results.tsv"   # broker  workload  key  value
: >"$RESULTS"
COMMANDS="$WORK/commands.txt"
: >"$COMMANDS"

# ---- the load generator ---------------------------------------------------------------------------
if [[ -z "${COMET_BIN:-}" ]]; then
    log "building comet (release)"
    (cd "$ROOT" && cargo build --release --locked -p comet >&2)
    COMET_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/comet"
fi
[[ -x "$COMET_BIN" ]] || die "no comet binary at $COMET_BIN"

# Results, `comet bench` and the broker lifecycle (start_broker, wait_ready, stop_broker, ...).
# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"

# ---- replication ----------------------------------------------------------------------------------
# start_slave <broker> <dir>: a slave (brokerId 1) of the master start_broker started, with its own
# ports and store under <dir>/slave (kept when it exists: H3 restarts it); sets SLAVE_PID and
# SLAVE_ADDR. Both brokers use 1 GiB CommitLog segments.
start_slave() {
    local broker=$1 dir=$2 ports sp
    ports="$(free_ports)"
    sp="${ports#* }"
    SLAVE_ADDR="127.0.0.1:$sp"
    mkdir -p "$dir/slave"
    case "$broker" in
    comet)
        cat >"$dir/slave/broker.conf" <<CONF
brokerName=broker-a
brokerId=1
brokerRole=SLAVE
namesrvAddr=$NAMESRV
bindAddress=127.0.0.1
brokerIP1=127.0.0.1
listenPort=$sp
storePathRootDir=$dir/slave/store
slaveReadEnable=true
CONF
        "$COMET_BIN" broker -c "$dir/slave/broker.conf" >>"$dir/slave/comet.log" 2>&1 &
        SLAVE_PID=$!
        echo "$broker slave: comet broker -c slave.conf (brokerRole=SLAVE, brokerId=1)" >>"$COMMANDS"
        ;;
    apache)
        cat >"$dir/slave/broker.conf" <<CONF
brokerClusterName=CometInteropCluster
brokerName=broker-a
brokerId=1
brokerRole=SLAVE
namesrvAddr=$NAMESRV
listenPort=$sp
bindAddress=127.0.0.1
brokerIP1=127.0.0.1
brokerIP2=127.0.0.1
storePathRootDir=$dir/slave/store
storePathCommitLog=$dir/slave/store/commitlog
mappedFileSizeCommitLog=1073741824
diskMaxUsedSpaceRatio=99
slaveReadEnable=true
CONF
        local cp
        cp="$(ROCKETMQ_VERSION=$ROCKETMQ_VERSION "$ROOT/interop/apache/run.sh" classpath)"
        ROCKETMQ_HOME="$dir/slave" setsid java -server -Xms"$JAVA_HEAP" -Xmx"$JAVA_HEAP" \
            -XX:MaxDirectMemorySize=512m -Duser.home="$dir/slave" -Drocketmq.home.dir="$dir/slave" \
            -cp "$cp" org.apache.rocketmq.broker.BrokerStartup -c "$dir/slave/broker.conf" \
            >>"$dir/slave/broker.out" 2>&1 </dev/null &
        SLAVE_PID=$!
        echo "$broker slave: BrokerStartup -c slave.conf (brokerRole=SLAVE, brokerId=1, -Xms$JAVA_HEAP -Xmx$JAVA_HEAP)" >>"$COMMANDS"
        ;;
    esac
}

stop_slave() {
    kill -TERM "$SLAVE_PID" 2>/dev/null || true
    wait "$SLAVE_PID" 2>/dev/null || true
}

# commit_log_end <addr>: the broker's commitLogMaxOffset (GET_BROKER_RUNTIME_INFO), empty when it
# does not answer yet.
commit_log_end() {
    "$COMET_BIN" broker-status -n "$NAMESRV" -b "$1" --json 2>/dev/null |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print(next(iter(d.values())).get("commitLogMaxOffset", ""))' 2>/dev/null || true
}

# wait_caught_up <master addr> <slave addr>: waits until the slave's log ends where the master's
# does (the master not writing meanwhile); prints the seconds it took.
wait_caught_up() {
    local master=$1 slave=$2 t0 deadline=$((SECONDS + START_PATIENCE * 10)) m s
    t0="$(now_ns)"
    m="$(commit_log_end "$master")"
    while :; do
        s="$(commit_log_end "$slave")"
        [[ -n $m && -n $s && $s -ge $m ]] && break
        kill -0 "$SLAVE_PID" 2>/dev/null || die "the slave exited (see its log under $WORK)"
        ((SECONDS < deadline)) || die "the slave did not catch up (at ${s:-?} of $m)"
        sleep 0.05
    done
    echo "$(( ($(now_ns) - t0) / 1000000 ))" | awk '{printf "%.3f", $1 / 1000}'
}

# replicated_load <broker> <w> <dir> <out>: W1s's load against the master once its slave (started
# with it) caught up.
replicated_load() {
    local broker=$1 w=$2 dir=$3 out=$4
    wait_caught_up "127.0.0.1:$BROKER_PORT" "$SLAVE_ADDR" >/dev/null
    THREADS=1 bench "$broker" "$w" "$out" produce -n "$NAMESRV" -t "Bench$w" --queues "$QUEUES" \
        -p "$PRODUCERS" -s "$SIZE" -m sync -d "$DURATION"
    record "$broker" "$w" tps "$(json_get "$out" tps)"
    record "$broker" "$w" p50_ms "$(json_get "$out" send_rt.p50_us | awk '{printf "%.3f", $1/1000}')"
    record "$broker" "$w" p99_ms "$(json_get "$out" send_rt.p99_us | awk '{printf "%.3f", $1/1000}')"
    record "$broker" "$w" failed "$(json_get "$out" failed)"
    if [[ $broker == comet ]]; then
        # The master measures each write's replication: until the slave acknowledged it.
        "$COMET_BIN" broker-status -n "$NAMESRV" -b "127.0.0.1:$BROKER_PORT" --json >"$dir/status.json"
        for q in P50 P99 P999; do
            record "$broker" "$w" "lag_${q,,}_ms" "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.3f" % (int(next(iter(d.values()))["haReplicationLag'"$q"'Micros"]) / 1000))' "$dir/status.json")"
        done
    fi
    stop_slave
}

# catch_up <broker> <w> <dir>: once the slave (started with the master) caught up, it stops,
# H3_GIB are written, it comes back; its catch-up rate.
catch_up() {
    local broker=$1 w=$2 dir=$3 per_msg=$((SIZE + 200)) before after secs
    wait_caught_up "127.0.0.1:$BROKER_PORT" "$SLAVE_ADDR" >/dev/null
    stop_slave
    before="$(commit_log_end "127.0.0.1:$BROKER_PORT")"
    bench "$broker" "$w" "$dir/fill.json" produce -n "$NAMESRV" -t "Bench$w" --queues "$QUEUES" \
        -p "$PRODUCERS" -s "$SIZE" -m batch --batch "$W5_BATCH" --count "$((H3_GIB * 1073741824 / per_msg))"
    after="$(commit_log_end "127.0.0.1:$BROKER_PORT")"
    start_slave "$broker" "$dir"
    secs="$(wait_caught_up "127.0.0.1:$BROKER_PORT" "$SLAVE_ADDR")"
    record "$broker" "$w" catchup_gib "$(awk -v b="$before" -v a="$after" 'BEGIN {printf "%.2f", (a - b) / 1073741824}')"
    record "$broker" "$w" catchup_mb_s "$(awk -v b="$before" -v a="$after" -v s="$secs" 'BEGIN {printf "%.1f", (a - b) / 1e6 / s}')"
    stop_slave
}

# ---- workloads ------------------------------------------------------------------------------------
run_workload() {
    local broker=$1 w=$2 dir="$WORK/$1-$2" flush=ASYNC_FLUSH
    [[ $w == W2 || $w == W2s ]] && flush=SYNC_FLUSH
    MASTER_CONF=""
    case "$w" in
    H1 | H3) MASTER_CONF="brokerRole=ASYNC_MASTER" ;;
    H2) MASTER_CONF=$'brokerRole=SYNC_MASTER\ninSyncReplicas=2\ntotalReplicas=2' ;;
    esac
    log "$broker $w ($flush)"
    start_broker "$broker" "$flush" "$dir"
    # A SYNC_MASTER answers the ready probe only once its slave holds it.
    if [[ $w == H* ]]; then start_slave "$broker" "$dir"; fi
    wait_ready "$broker" "$w" "$dir"
    cp "$dir/cmdline" "$WORK/cmdline-$broker"
    local out="$dir/result.json" steal_before
    steal_before="$(steal_ticks)"
    case "$w" in
    W1 | W2 | W1s | W2s)
        # W1s, W2s: W1, W2 with the load generator on one worker thread (see bench/README.md).
        local threads="$GEN_THREADS"
        [[ $w == W1s || $w == W2s ]] && threads=1
        THREADS="$threads" bench "$broker" "$w" "$out" produce -n "$NAMESRV" -t "Bench$w" --queues "$QUEUES" \
            -p "$PRODUCERS" -s "$SIZE" -m sync -d "$DURATION"
        record "$broker" "$w" tps "$(json_get "$out" tps)"
        record "$broker" "$w" p50_ms "$(json_get "$out" send_rt.p50_us | awk '{printf "%.3f", $1/1000}')"
        record "$broker" "$w" p99_ms "$(json_get "$out" send_rt.p99_us | awk '{printf "%.3f", $1/1000}')"
        record "$broker" "$w" failed "$(json_get "$out" failed)"
        ;;
    W3 | W3s)
        # W3s: W3 with the load generator on one worker thread, as W1s is to W1.
        local threads="$GEN_THREADS"
        [[ $w == W3s ]] && threads=1
        THREADS="$threads" bench "$broker" "$w" "$out" e2e -n "$NAMESRV" -t "Bench$w" --queues "$QUEUES" \
            -p "$W3_PRODUCERS" -s "$SIZE" --rate "$W3_RATE" -d "$DURATION" --warmup 2
        record "$broker" "$w" tps "$(json_get "$out" tps)"
        for q in p50 p99 p99_9; do
            record "$broker" "$w" "${q}_ms" "$(json_get "$out" "e2e_latency.${q}_us" | awk '{printf "%.3f", $1/1000}')"
        done
        record "$broker" "$w" lost "$(json_get "$out" lost)"
        ;;
    T1)
        THREADS=1 bench "$broker" "$w" "$out" produce -n "$NAMESRV" -t "Bench$w" --queues "$QUEUES" \
            -p "$PRODUCERS" -s "$SIZE" -m sync -d "$DURATION" --deliver-after-ms "$T1_AFTER_MS"
        record "$broker" "$w" tps "$(json_get "$out" tps)"
        record "$broker" "$w" p99_ms "$(json_get "$out" send_rt.p99_us | awk '{printf "%.3f", $1/1000}')"
        record "$broker" "$w" failed "$(json_get "$out" failed)"
        ;;
    T2)
        THREADS=1 bench "$broker" "$w" "$out" e2e -n "$NAMESRV" -t "Bench$w" --queues "$QUEUES" \
            -p "$W3_PRODUCERS" -s "$SIZE" --rate "$T2_RATE" -d "$DURATION" --warmup 2 \
            --deliver-after-ms "$T2_AFTER_MS" --drain "$((T2_AFTER_MS / 1000 + 15))"
        for q in p50 p99 p99_9 max; do
            record "$broker" "$w" "late_${q}_ms" "$(json_get "$out" "e2e_latency.${q}_us" | awk '{printf "%.1f", $1/1000}')"
        done
        record "$broker" "$w" early "$(json_get "$out" early)"
        record "$broker" "$w" lost "$(json_get "$out" lost)"
        ;;
    W4)
        bench "$broker" "$w" "$dir/backlog.json" produce -n "$NAMESRV" -t "Bench$w" --queues "$QUEUES" \
            -p "$PRODUCERS" -s "$SIZE" -m batch --batch "$W5_BATCH" --count "$W4_COUNT"
        record "$broker" "$w" backlog_mb_s "$(json_get "$dir/backlog.json" mb_per_sec)"
        bench "$broker" "$w" "$out" consume -n "$NAMESRV" -t "Bench$w" -m push -g "BenchW4Group" \
            --from-where first --count "$W4_COUNT" -d "$((DURATION * 10))"
        record "$broker" "$w" mb_s "$(json_get "$out" mb_per_sec)"
        record "$broker" "$w" consumed "$(json_get "$out" messages)"
        # The same backlog again, each time by a new group, with the pull consumer (one task per
        # queue): with the generator's default threads, then on one thread.
        bench "$broker" "$w" "$dir/pull.json" consume -n "$NAMESRV" -t "Bench$w" -m pull \
            -g "BenchW4PullGroup" --from-where first --count "$W4_COUNT" -d "$((DURATION * 10))"
        record "$broker" "$w" pull_mb_s "$(json_get "$dir/pull.json" mb_per_sec)"
        THREADS=1 bench "$broker" "$w" "$dir/pull1.json" consume -n "$NAMESRV" -t "Bench$w" -m pull \
            -g "BenchW4Pull1Group" --from-where first --count "$W4_COUNT" -d "$((DURATION * 10))"
        record "$broker" "$w" pull1_mb_s "$(json_get "$dir/pull1.json" mb_per_sec)"
        ;;
    W5)
        bench "$broker" "$w" "$out" produce -n "$NAMESRV" -t "Bench$w" --queues "$QUEUES" \
            -p "$PRODUCERS" -s "$SIZE" -m batch --batch "$W5_BATCH" -d "$DURATION"
        record "$broker" "$w" mb_s "$(json_get "$out" mb_per_sec)"
        record "$broker" "$w" tps "$(json_get "$out" tps)"
        record "$broker" "$w" p99_ms "$(json_get "$out" send_rt.p99_us | awk '{printf "%.3f", $1/1000}')"
        ;;
    W6)
        # W1 beside idle client connections that each sent one heartbeat and then stay quiet.
        python3 "$HERE/idle_conns.py" 127.0.0.1 "$BROKER_PORT" "$W6_IDLE" "$dir/idle.ready" &
        local idle_pid=$!
        local deadline=$((SECONDS + START_PATIENCE))
        until [[ -s "$dir/idle.ready" ]]; do
            kill -0 "$idle_pid" 2>/dev/null || die "idle_conns.py failed"
            ((SECONDS < deadline)) || die "idle connections not answered"
            sleep 0.1
        done
        echo "$broker $w: python3 bench/idle_conns.py 127.0.0.1 BROKER_PORT $W6_IDLE READY_FILE" >>"$COMMANDS"
        bench "$broker" "$w" "$out" produce -n "$NAMESRV" -t "Bench$w" --queues "$QUEUES" \
            -p "$PRODUCERS" -s "$SIZE" -m sync -d "$DURATION"
        record "$broker" "$w" tps "$(json_get "$out" tps)"
        record "$broker" "$w" p99_ms "$(json_get "$out" send_rt.p99_us | awk '{printf "%.3f", $1/1000}')"
        kill -TERM "$idle_pid" 2>/dev/null || true
        wait "$idle_pid" 2>/dev/null || true
        record "$broker" "$w" idle "$(cat "$dir/idle.ready") / $(cat "$dir/idle.ready.done" 2>/dev/null || echo "?")"
        ;;
    H1 | H2) replicated_load "$broker" "$w" "$dir" "$out" ;;
    H3) catch_up "$broker" "$w" "$dir" ;;
    R10)
        # Fill the commit log with batches of 1 KiB messages, then SIGKILL and restart.
        local per_msg=$((SIZE + 200)) target=$((R10_GIB * 1024 * 1024 * 1024))
        bench "$broker" "$w" "$dir/fill.json" produce -n "$NAMESRV" -t "Bench$w" --queues "$QUEUES" \
            -p "$PRODUCERS" -s "$SIZE" -m batch --batch "$W5_BATCH" --count "$((target / per_msg))"
        record "$broker" "$w" fill_mb_s "$(json_get "$dir/fill.json" mb_per_sec)"
        record "$broker" "$w" log_gib "$(store_bytes "$dir" | awk '{printf "%.2f", $1 / 1073741824}')"
        record "$broker" "$w" messages "$(json_get "$dir/fill.json" messages)"
        kill_broker "$broker" "$dir"
        start_broker "$broker" ASYNC_FLUSH "$dir" keep
        wait_ready "$broker" R10r "$dir"
        ;;
    esac
    # A tail latency read without this is hard to judge: the box's vCPUs share their host.
    record "$broker" "$w" steal_s "$(ticks_s $(($(steal_ticks) - steal_before)))"
    stop_broker "$broker" "$w" "$dir"
}

# ---- the ceiling ----------------------------------------------------------------------------------
ceiling() {
    log "ceiling: loopback TCP with ${SIZE}-byte writes, page-cache write bandwidth"
    python3 - "$SIZE" "$CEILING_SECS" >"$WORK/ceiling-tcp.txt" <<'PY'
import multiprocessing as mp, socket, sys, time
size, secs = int(sys.argv[1]), float(sys.argv[2])
def sink(port_q):
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
    port_q.put(srv.getsockname()[1])
    conn, _ = srv.accept()
    buf = bytearray(1 << 20)
    while conn.recv_into(buf):
        pass
if __name__ == "__main__":
    q = mp.Queue(); p = mp.Process(target=sink, args=(q,)); p.start()
    c = socket.create_connection(("127.0.0.1", q.get()))
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"x" * size; n = 0; end = time.perf_counter() + secs; t0 = time.perf_counter()
    while True:
        for _ in range(1000):
            c.sendall(msg)
        n += 1000
        if time.perf_counter() >= end:
            break
    el = time.perf_counter() - t0
    c.close(); p.join()
    print(f"{n / el:.0f} {n * size / el / 1e6:.1f}")
PY
    record ceiling - tcp_writes_s "$(cut -d' ' -f1 "$WORK/ceiling-tcp.txt")"
    record ceiling - tcp_mb_s "$(cut -d' ' -f2 "$WORK/ceiling-tcp.txt")"
    local f="$WORK/ceiling-dd.bin"
    dd if=/dev/zero of="$f" bs=1M count=2048 2>"$WORK/ceiling-dd.txt"
    rm -f "$f"
    sync
    record ceiling - pagecache_mb_s "$(tail -1 "$WORK/ceiling-dd.txt" | python3 -c "
import re, sys
m = re.search(r'([0-9.,]+) ([kMG]?B)/s', sys.stdin.read())
v = float(m.group(1).replace(',', '.')); unit = m.group(2)
print(round(v * {'B': 1e-6, 'kB': 1e-3, 'MB': 1, 'GB': 1e3}[unit]))")"
}

install_rocketmq_rust() {
    local root="$WORK/rocketmq-rust"
    [[ -x "$root/bin/rocketmq-broker-rust" ]] && return
    log "cargo install rocketmq-namesrv + rocketmq-broker $RMQRS_VERSION (about 15 minutes)"
    cargo install --root "$root" --version "$RMQRS_VERSION" rocketmq-namesrv >&2
    cargo install --root "$root" --version "$RMQRS_VERSION" rocketmq-broker >&2
}

# ---- main -----------------------------------------------------------------------------------------
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
for broker in $BROKERS; do
    [[ $broker == rocketmq-rust ]] && install_rocketmq_rust
    for w in $WORKLOADS; do
        if [[ $broker == rocketmq-rust && " $RMQRS_WORKLOADS " != *" $w "* ]]; then
            log "rocketmq-rust $w skipped (not in RMQRS_WORKLOADS)"
            continue
        fi
        run_workload "$broker" "$w"
        reruns=0
        while ((reruns < STEAL_RERUNS)); do
            steal="$(awk -F'\t' -v b="$broker" -v w="$w" '$1 == b && $2 == w && $3 == "steal_s" { s = $4 } END { print s + 0 }' "$RESULTS")"
            awk -v s="$steal" -v l="$STEAL_LIMIT_S" 'BEGIN { exit !(s > l) }' || break
            reruns=$((reruns + 1))
            log "$broker $w lost ${steal} s of CPU to steal (limit ${STEAL_LIMIT_S} s): rerun $reruns of at most $STEAL_RERUNS"
            rm -rf "$WORK/$broker-$w.steal$reruns"
            mv "$WORK/$broker-$w" "$WORK/$broker-$w.steal$reruns"
            run_workload "$broker" "$w"
        done
        record "$broker" "$w" steal_reruns "$reruns"
    done
done
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"
# The ceiling is measured after the workloads, not before: its 2 GiB dd left the filesystem busy
# (writeback, then freeing the file's blocks) under the first workload's start, even after a
# sync (with the ceiling measured first, Comet's W1 start took 112 and 54 ms against 14-32 ms otherwise).
ceiling

# ---- report ---------------------------------------------------------------------------------------
SECTION="$WORK/section.md"
python3 - "$RESULTS" "$SECTION" "$BROKERS" <<PY
import sys, collections
results, section, brokers = sys.argv[1], sys.argv[2], sys.argv[3].split()
val = collections.defaultdict(dict)
for line in open(results):
    b, w, k, v = line.rstrip("\n").split("\t")
    val[(w, k)][b] = v
names = {"comet": "Comet", "apache": "Apache $ROCKETMQ_VERSION", "rocketmq-rust": "rocketmq-rust"}
peers = [b for b in brokers if b != "comet"]
rows = [
    ("W1", "tps", "W1 sync send, ASYNC_FLUSH: msg/s", True),
    ("W1", "p50_ms", "W1 send RT p50 (ms)", False),
    ("W1", "p99_ms", "W1 send RT p99 (ms)", False),
    ("W1s", "tps", "W1s = W1, load generator on one thread: msg/s", True),
    ("W1s", "p50_ms", "W1s send RT p50 (ms)", False),
    ("W1s", "p99_ms", "W1s send RT p99 (ms)", False),
    ("W1b", "tps", "W1 or W1s, each broker's better one: msg/s", True),
    ("W2", "tps", "W2 sync send, SYNC_FLUSH: msg/s", True),
    ("W2", "p50_ms", "W2 send RT p50 (ms)", False),
    ("W2", "p99_ms", "W2 send RT p99 (ms)", False),
    ("W2s", "tps", "W2s = W2, load generator on one thread: msg/s", True),
    ("W2s", "p50_ms", "W2s send RT p50 (ms)", False),
    ("W2s", "p99_ms", "W2s send RT p99 (ms)", False),
    ("W2b", "tps", "W2 or W2s, each broker's better one: msg/s", True),
    ("W3", "p50_ms", "W3 e2e @ $W3_RATE msg/s: p50 (ms)", False),
    ("W3", "p99_ms", "W3 e2e p99 (ms)", False),
    ("W3", "p99_9_ms", "W3 e2e p99.9 (ms)", False),
    ("W3", "tps", "W3 messages received /s", True),
    ("W3", "lost", "W3 not received within the drain", False),
    ("W3s", "p50_ms", "W3s = W3, load generator on one thread: p50 (ms)", False),
    ("W3s", "p99_ms", "W3s e2e p99 (ms)", False),
    ("W3s", "p99_9_ms", "W3s e2e p99.9 (ms)", False),
    ("W3s", "tps", "W3s messages received /s", True),
    ("W3s", "lost", "W3s not received within the drain", False),
    ("W3b", "p99_ms", "W3 or W3s, each broker's lower p99 (ms)", False),
    ("W4", "backlog_mb_s", "W4 backlog fill (batch) MB/s", True),
    ("W4", "mb_s", "W4 catch-up, push consumer: MB/s", True),
    ("W4", "pull_mb_s", "W4 catch-up again, pull consumer, second group: MB/s", True),
    ("W4", "pull1_mb_s", "W4 catch-up again, pull consumer on one thread, third group: MB/s", True),
    ("W5", "mb_s", "W5 batch $W5_BATCH x $SIZE B: MB/s", True),
    ("W5", "p99_ms", "W5 batch send RT p99 (ms)", False),
    ("W6", "tps", "W6 sync send beside $W6_IDLE idle connections: msg/s", True),
    ("W6", "p99_ms", "W6 send RT p99 (ms)", False),
    ("W6", "idle", "W6 idle connections answered / still open at the end", False),
    ("R10", "log_gib", "R10 commit log before the kill -9 (GiB)", False),
    ("R10", "fill_mb_s", "R10 fill rate (batch) MB/s", True),
    ("R10r", "start_ms", "R10 restart after kill -9 → first accepted send (ms)", False),
    ("H1", "tps", "H1 W1s against an ASYNC_MASTER with a slave attached: msg/s", True),
    ("H1", "p99_ms", "H1 send RT p99 (ms)", False),
    ("H1", "lag_p50_ms", "H1 replication lag, write → slave ack, p50 (ms)", False),
    ("H1", "lag_p99_ms", "H1 replication lag p99 (ms)", False),
    ("H1", "lag_p999_ms", "H1 replication lag p99.9 (ms)", False),
    ("H2", "tps", "H2 W1s against a SYNC_MASTER, 2 copies: msg/s", True),
    ("H2", "p99_ms", "H2 send RT p99 (ms)", False),
    ("H2", "failed", "H2 sends not answered SEND_OK", False),
    ("H3", "catchup_gib", "H3 log written while the slave was down (GiB)", False),
    ("H3", "catchup_mb_s", "H3 slave catch-up MB/s", True),
    ("T1", "tps", "T1 timer messages (due in $T1_AFTER_MS ms) sent, sync, one thread: msg/s", True),
    ("T1", "p99_ms", "T1 send RT p99 (ms)", False),
    ("T1", "failed", "T1 sends not answered SEND_OK", False),
    ("T2", "late_p50_ms", "T2 timer delivery @ $T2_RATE msg/s, due in $T2_AFTER_MS ms: late by p50 (ms)", False),
    ("T2", "late_p99_ms", "T2 late by p99 (ms)", False),
    ("T2", "late_p99_9_ms", "T2 late by p99.9 (ms)", False),
    ("T2", "late_max_ms", "T2 late by at most (ms)", False),
    ("T2", "early", "T2 delivered before their time", False),
    ("T2", "lost", "T2 not received within the drain", False),
]
ran = [w for w in "$WORKLOADS".split()]
for w in ran:
    rows.append((w, "rss_mib", f"{w} broker peak RSS (MiB)", False))
for w in ran:
    rows.append((w, "anon_mib", f"{w} broker anonymous RSS at the end (MiB)", False))
for w in ran:
    rows.append((w, "cpu_s", f"{w} broker CPU seconds", False))
for w in ran:
    rows.append((w, "start_ms", f"{w} start → first accepted send (ms)", False))
for w in ran:
    rows.append((w, "steal_s", f"{w} box CPU steal during the workload, both vCPUs (s)", None))
for w in ran:
    rows.append((w, "steal_reruns", f"{w} reruns for CPU steal over $STEAL_LIMIT_S s", None))
out = []
head = "| measurement | " + " | ".join(names[b] for b in brokers) + " | " + " | ".join(f"Comet/{names[p]}" for p in peers) + " |"
out.append(head)
out.append("|" + "---|" * (1 + len(brokers) + len(peers)))
def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None
# W1b, W2b: each broker's better of the two generator settings.
# W3b: each broker's lower W3/W3s p99.
derived = {"W1b": ("W1", "W1s"), "W2b": ("W2", "W2s"), "W3b": ("W3", "W3s")}
pick = {"W1b": ("tps", max, "{:.2f}"), "W2b": ("tps", max, "{:.2f}"), "W3b": ("p99_ms", min, "{:.3f}")}
for b in brokers:
    for d, pair in derived.items():
        key, better, fmt = pick[d]
        best = [num(val[(w, key)].get(b)) for w in pair]
        best = [x for x in best if x is not None]
        if best:
            val[(d, key)][b] = fmt.format(better(best))
rows = [r for r in rows if r[0].rstrip("r") in ran
        or (r[0] in derived and all(w in ran for w in derived[r[0]]))]
for w, k, label, higher in rows:
    cells = [val[(w, k)].get(b, "–") for b in brokers]
    ratios = []
    for p in peers:
        if higher is None:  # a reading of the box, not of the broker: no ratio
            ratios.append("–")
            continue
        c, q = num(val[(w, k)].get("comet")), num(val[(w, k)].get(p))
        ratios.append(f"{c / q:.2f}" if c is not None and q not in (None, 0.0) else "–")
    out.append(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
ceil = {k: v.get("ceiling") for (w, k), v in val.items() if w == "-"}
out.append("")
out.append(f"Ceiling of this box: loopback TCP carried {ceil.get('tcp_writes_s')} writes/s of $SIZE B "
           f"({ceil.get('tcp_mb_s')} MB/s, one python sender, one receiver process); page-cache write "
           f"bandwidth (dd, 2 GiB, 1 MiB blocks, no fsync) {ceil.get('pagecache_mb_s')} MB/s; both measured "
           f"after the workloads.")
t = num(ceil.get("tcp_writes_s"))
fractions = []
for w in ("W1", "W1s", "W2", "W2s"):
    c = num(val[(w, "tps")].get("comet"))
    if c and t:
        fractions.append(f"{w} {100 * c / t:.1f} %")
if fractions:
    out.append(f"Comet's rate as a fraction of the loopback write ceiling for $SIZE B messages: {', '.join(fractions)}.")
open(section, "w").write("\n".join(out) + "\n")
PY

{
    echo "<!-- compare.sh results begin -->"
    echo "## Comet vs Apache RocketMQ: bench/compare.sh"
    echo
    echo "Run $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo),"
    echo "kernel $(uname -r); load average before/after: $LOAD_BEFORE / $LOAD_AFTER (the box is shared"
    echo "with other engineers' builds, so absolute figures are pessimistic and noisy). DURATION=${DURATION}s per"
    echo "timed workload, W4_COUNT=$W4_COUNT, $PRODUCERS producers, $SIZE B bodies, $QUEUES queues, one fresh broker"
    echo "per workload. Load generator for every broker: \`comet bench\` ($("$COMET_BIN" --version), git"
    echo "$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown), release build) on the same box,"
    gen_threads="one tokio worker thread per core"
    if [[ -n $GEN_THREADS ]]; then gen_threads="$GEN_THREADS tokio worker thread(s)"; fi
    echo "its client on $gen_threads (W1s, W2s, W3s and the third W4 read: one thread)."
    echo "Apache RocketMQ $ROCKETMQ_VERSION from Maven Central, $(java -version 2>&1 | head -1), heap $JAVA_HEAP per JVM."
    if [[ " $BROKERS " == *" rocketmq-rust "* ]]; then
        echo "rocketmq-rust broker $(cargo install --list --root "$WORK/rocketmq-rust" 2>/dev/null | awk '/^rocketmq-broker /{sub(":", "", $2); print $2}') (cargo install from crates.io, release), run on: $RMQRS_WORKLOADS."
    fi
    echo "Peak RSS (VmHWM) and CPU seconds (utime+stime) are the broker process's: for Comet the single"
    echo "\`comet serve\` process (name server included), for Apache the broker JVM only. Ratios are"
    echo "Comet/peer: above 1 is better for rates, below 1 is better for latency, RSS, CPU and start time."
    echo
    cat "$SECTION"
    echo
    echo "Exact commands (DIR = a fresh directory per workload):"
    echo
    echo '```'
    for b in $BROKERS; do [[ -f "$WORK/cmdline-$b" ]] && echo "$b broker: $(cat "$WORK/cmdline-$b")"; done
    sed "s#$WORK#\$WORK#g" "$COMMANDS"
    echo '```'
    echo "<!-- compare.sh results end -->"
} >"$WORK/block.md"

cat "$WORK/block.md"
if [[ $WRITE == yes ]]; then
    python3 - "$OUT" "$WORK/block.md" <<'PY'
import sys, re
out, block = sys.argv[1], open(sys.argv[2]).read()
text = open(out).read() if __import__("os").path.exists(out) else "# bench/compare.sh: full output of the latest run\n"
pat = re.compile(r"<!-- compare.sh results begin -->.*?<!-- compare.sh results end -->\n?", re.S)
text = pat.sub(lambda m: block, text) if pat.search(text) else text.rstrip("\n") + "\n\n" + block
open(out, "w").write(text)
PY
    log "results written to $OUT (raw figures in $RESULTS)"
fi
