#!/usr/bin/env bash
# Interop matrix: real Apache RocketMQ clients (Java 4.9.8 and 5.3.3 with JSON headers, Java 5.3.3
# with ROCKETMQ binary headers, Go rocketmq-client-go 2.1.2) against ONE `comet serve`.
#
#   1. builds comet (cargo), the Java runner for both client versions (Maven) and the Go runner;
#   2. starts `comet serve` on loopback with port 0, a temp data dir and fast retry delays
#      (messageDelayLevel "1s 5s 1s ..." keeps level 2 at 5 s for the delay scenario);
#   3. runs every scenario x peer, MATRIX_JOBS at a time; each row uses its own topic and groups
#      (suffix = peer), so rows do not see each other's messages;
#   4. stops comet with SIGTERM and writes INTEROP.md at the repo root (table, versions, command,
#      duration, broker warnings).
#
# A row is "pass" only when the runner exited 0, printed `PASS <scenario>` as its last line and
# reported at least one check (`CHECKS n`, n > 0). Rows listed in interop/matrix-baseline.txt must
# pass: the script exits non-zero when one of them does not. `--update-baseline` rewrites that file
# with the rows that passed in this run.
#
#   interop/matrix.sh [--update-baseline]
#
# Environment (defaults in brackets):
#   MATRIX_JOBS [3]            rows run in parallel (each Java row is one JVM)
#   MATRIX_PEERS [all]         e.g. "go-2.1.2 java-5.3.3-json"
#   MATRIX_SCENARIOS [all]     e.g. "send-sync clustering"
#   MATRIX_ROW_TIMEOUT [180]   seconds before a row is killed and marked FAIL
#   MATRIX_WORKDIR [mktemp]    comet data, logs, client logs; removed on success unless MATRIX_KEEP=1
#   MATRIX_OUTPUT [INTEROP.md] report path, relative to the repo root
#   CARGO_TARGET_DIR           honoured by cargo as usual
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
BASELINE="$HERE/matrix-baseline.txt"
JOBS="${MATRIX_JOBS:-3}"
ROW_TIMEOUT="${MATRIX_ROW_TIMEOUT:-180}"
OUTPUT="$REPO/${MATRIX_OUTPUT:-INTEROP.md}"
READY_TIMEOUT=60
STOP_TIMEOUT=60
JAVA_VERSIONS=(4.9.8 5.3.3)
GO_CLIENT_VERSION=v2.1.2
ALL_PEERS=(java-4.9.8-json java-5.3.3-json java-5.3.3-rocketmq go-2.1.2)
# Scenario order: the slow ones first, so the pool drains evenly.
ALL_SCENARIOS=(
    retry-dlq delay-level clustering admin-reset-offset admin-consumer-progress broadcasting orderly
    from-timestamp from-last-offset from-first-offset tag-filter lite-pull-seek pull-offset-restart
    send-sync send-async send-oneway send-batch properties compressed-body
    admin-topic admin-query-message transactions
)
# Scenarios that are not run: "not yet" (Comet refuses half messages today) or "n/a" for a peer.
NOT_YET=" transactions "
JAVA_ONLY=" admin-topic admin-consumer-progress admin-query-message admin-reset-offset "
DELAY_LEVELS="1s 5s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"

UPDATE_BASELINE=no
for arg in "$@"; do
    case "$arg" in
        --update-baseline) UPDATE_BASELINE=yes ;;
        -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
        *) echo "matrix.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done

COMMAND_LINE="MATRIX_JOBS=$JOBS${MATRIX_PEERS:+ MATRIX_PEERS=\"$MATRIX_PEERS\"}${MATRIX_SCENARIOS:+ MATRIX_SCENARIOS=\"$MATRIX_SCENARIOS\"} interop/matrix.sh${*:+ $*}"
read -r -a PEERS <<<"${MATRIX_PEERS:-${ALL_PEERS[*]}}"
read -r -a SCENARIOS <<<"${MATRIX_SCENARIOS:-${ALL_SCENARIOS[*]}}"

die() { echo "matrix.sh: $*" >&2; exit 1; }
step() { echo "== matrix: $* ($((SECONDS - T0))s)"; }

T0=$SECONDS
STARTED_AT="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
if [[ -n "${MATRIX_WORKDIR:-}" ]]; then
    WORK="$MATRIX_WORKDIR"
    mkdir -p "$WORK"
else
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/comet-matrix.XXXXXX")"
fi
WORK="$(cd "$WORK" && pwd)"
mkdir -p "$WORK/results" "$WORK/logs" "$WORK/home"
COMET_PID=
OK=no

stop_comet() {
    [[ -n "$COMET_PID" ]] || return 0
    kill -TERM "$COMET_PID" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while kill -0 "$COMET_PID" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 "$COMET_PID" 2>/dev/null; then
        echo "matrix.sh: comet did not stop within ${STOP_TIMEOUT}s, killing it" >&2
        kill -KILL "$COMET_PID" 2>/dev/null || true
    fi
    wait "$COMET_PID" 2>/dev/null || true
    COMET_PID=
}

cleanup() {
    local rc=$?
    # Rows still running (interrupted run): stop each row's runner, then the row itself.
    local job
    for job in $(jobs -p); do
        pkill -TERM -P "$job" 2>/dev/null || true
        kill -TERM "$job" 2>/dev/null || true
    done
    stop_comet
    if [[ $OK == yes && "${MATRIX_KEEP:-0}" != 1 ]]; then
        rm -rf "$WORK"
    else
        echo "matrix.sh: work directory kept: $WORK (comet.log, logs/<row>.log)" >&2
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for tool in java mvn go cargo python3 timeout; do
    command -v "$tool" >/dev/null || die "$tool is required (interop/tests.sh installs the JDK and Maven)"
done

# --- builds -----------------------------------------------------------------------------------
step "building comet"
(cd "$REPO" && cargo build -q -p comet) || die "cargo build -p comet failed"
COMET_BIN="${CARGO_TARGET_DIR:-$REPO/target}/debug/comet"
[[ -x "$COMET_BIN" ]] || die "no comet binary at $COMET_BIN"

JAVA_DIR="$HERE/java"
for v in "${JAVA_VERSIONS[@]}"; do
    step "building the Java runner for rocketmq-client $v"
    cp_file="$JAVA_DIR/target/$v/classpath.txt"
    if [[ ! -s "$cp_file" || ! -d "$JAVA_DIR/target/$v/classes" ||
        -n "$(find "$JAVA_DIR/src" "$JAVA_DIR/pom.xml" -newer "$cp_file" -print -quit)" ]]; then
        mvn -q -B -f "$JAVA_DIR/pom.xml" -Drocketmq.client.version="$v" compile dependency:build-classpath \
            -Dmdep.outputFile="$cp_file" >&2 || die "maven could not build $JAVA_DIR for $v"
        touch "$cp_file"
    fi
done

step "building the Go runner ($GO_CLIENT_VERSION)"
grep -q "rocketmq-client-go/v2 $GO_CLIENT_VERSION" "$HERE/go/go.mod" || die "go/go.mod does not pin $GO_CLIENT_VERSION"
(cd "$HERE/go" && go build -o "$WORK/matrix-go" .) || die "go build failed"

# --- comet ------------------------------------------------------------------------------------
step "starting comet serve"
"$COMET_BIN" serve --namesrv-listen 127.0.0.1:0 --broker-listen 127.0.0.1:0 --data-dir "$WORK/data" \
    --ready-file "$WORK/ready.json" --set "messageDelayLevel=$DELAY_LEVELS" >"$WORK/comet.log" 2>&1 &
COMET_PID=$!
deadline=$((SECONDS + READY_TIMEOUT))
until [[ -s "$WORK/ready.json" ]]; do
    kill -0 "$COMET_PID" 2>/dev/null || die "comet serve exited: $(tail -5 "$WORK/comet.log")"
    ((SECONDS < deadline)) || die "comet serve not ready after ${READY_TIMEOUT}s"
    sleep 0.1
done
NAMESRV="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["namesrv"])' "$WORK/ready.json")"
BROKER="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["broker"])' "$WORK/ready.json")"
echo "matrix: comet name server $NAMESRV, broker $BROKER"

# --- rows -------------------------------------------------------------------------------------
peer_suffix() { # java-5.3.3-rocketmq -> j533r, go-2.1.2 -> g212
    local p=$1 v
    v="$(echo "$p" | cut -d- -f2 | tr -d .)"
    case "$p" in
        java-*-json) echo "j${v}j" ;;
        java-*-rocketmq) echo "j${v}r" ;;
        go-*) echo "g${v}" ;;
    esac
}

row_command() { # row_command <peer> <scenario>: prints nothing, sets CMD array
    local peer=$1 scenario=$2 suffix
    suffix="$(peer_suffix "$peer")"
    case "$peer" in
        java-*)
            local v ser
            v="$(echo "$peer" | cut -d- -f2)"
            ser="$(echo "$peer" | cut -d- -f3)"
            CMD=(java -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
                -Duser.home="$WORK/home/$suffix" -Drocketmq.client.logRoot="$WORK/clientlogs/$suffix"
                -Drocketmq.client.localOffsetStoreDir="$WORK/offsets/$suffix"
                -Dcom.rocketmq.sendMessageWithVIPChannel=false)
            [[ $ser == rocketmq ]] && CMD+=(-Drocketmq.serialize.type=ROCKETMQ)
            CMD+=(-cp "$JAVA_DIR/target/$v/classes:$(cat "$JAVA_DIR/target/$v/classpath.txt")"
                dev.comet.interop.MatrixRunner "$scenario" "$NAMESRV" "$suffix")
            ;;
        go-*)
            CMD=(env HOME="$WORK/home/$suffix" MATRIX_BROKER_ADDR="$BROKER" "$WORK/matrix-go" "$scenario" "$NAMESRV" "$suffix")
            ;;
    esac
}

run_row() { # run_row <peer> <scenario>: writes results/<peer>__<scenario> = "status<TAB>detail<TAB>seconds"
    local peer=$1 scenario=$2 log="$WORK/logs/$1__$2.log" out="$WORK/results/$1__$2" start rc=0
    start="$(date +%s)"
    mkdir -p "$WORK/home/$(peer_suffix "$peer")"
    row_command "$peer" "$scenario"
    timeout --kill-after=10 "$ROW_TIMEOUT" "${CMD[@]}" >"$log" 2>&1 || rc=$?
    local last checks status detail
    last="$(grep -E "^(PASS|FAIL) $scenario" "$log" | tail -1 || true)"
    checks="$(sed -n 's/^CHECKS \([0-9]*\)$/\1/p' "$log" | tail -1)"
    # Client threads may still log after the verdict (4.9.x logs to stdout), so the verdict is the
    # last PASS/FAIL line rather than the last line.
    if [[ $rc -eq 0 && "$last" == "PASS $scenario" && "${checks:-0}" -gt 0 ]]; then
        status=pass detail="${checks} checks"
    elif [[ $rc -eq 124 || $rc -eq 137 ]]; then
        status=FAIL detail="row timed out after ${ROW_TIMEOUT}s${last:+; last verdict: $last}"
    elif [[ "$last" == "FAIL $scenario: "* ]]; then
        status=FAIL detail="${last#FAIL "$scenario": }"
    else
        status=FAIL detail="runner exited $rc without a verdict: $(grep -v '^\s*at ' "$log" | tail -1 | cut -c1-200)"
    fi
    detail="${detail//$'\t'/ }"
    detail="${detail//|/\\|}"
    local took=$(($(date +%s) - start))
    printf '%s\t%s\t%s\n' "$status" "$detail" "$took" >"$out"
    echo "matrix: $status $peer $scenario (${took}s)$([[ $status == pass ]] || echo " $detail")"
}

step "running ${#SCENARIOS[@]} scenarios x ${#PEERS[@]} peers, $JOBS at a time"
RUN_T0=$SECONDS
pids=()
for scenario in "${SCENARIOS[@]}"; do
    for peer in "${PEERS[@]}"; do
        if [[ "$NOT_YET" == *" $scenario "* ]]; then
            printf 'not yet\t%s\t0\n' "Comet's broker refuses half messages" >"$WORK/results/${peer}__$scenario"
            continue
        fi
        if [[ "$JAVA_ONLY" == *" $scenario "* && $peer != java-* ]]; then
            printf 'n/a\t%s\t0\n' "Java admin tools only" >"$WORK/results/${peer}__$scenario"
            continue
        fi
        while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
        run_row "$peer" "$scenario" &
        pids+=($!)
    done
done
wait "${pids[@]}" 2>/dev/null || true
RUN_SECONDS=$((SECONDS - RUN_T0))
step "rows done in ${RUN_SECONDS}s; stopping comet"
stop_comet

# --- report -----------------------------------------------------------------------------------
result_field() { # result_field <peer> <scenario> <n>
    local f="$WORK/results/$1__$2"
    [[ -f "$f" ]] && cut -f"$3" "$f" || echo ""
}

failed_baseline=()
passed_rows=()
{
    echo "# Interop matrix: real RocketMQ clients against \`comet serve\`"
    echo
    echo "Generated by \`interop/matrix.sh\` on $STARTED_AT; do not edit by hand."
    echo
    echo "Command: \`$COMMAND_LINE\`"
    echo
    echo "| Scenario | $(printf '%s | ' "${PEERS[@]}")"
    echo "|---|$(printf -- '---|%.0s' "${PEERS[@]}")"
    for scenario in "${SCENARIOS[@]}"; do
        line="| $scenario |"
        for peer in "${PEERS[@]}"; do
            status="$(result_field "$peer" "$scenario" 1)"
            detail="$(result_field "$peer" "$scenario" 2)"
            case "$status" in
                pass) cell="pass"; passed_rows+=("$scenario $peer") ;;
                FAIL) cell="**FAIL**: $detail" ;;
                "not yet" | n/a) cell="$status" ;;
                *) cell="**FAIL**: no result" ;;
            esac
            if [[ $status != pass && $status != "not yet" && $status != n/a ]] &&
                grep -qxF "$scenario $peer" "$BASELINE" 2>/dev/null; then
                failed_baseline+=("$scenario $peer")
            fi
            line+=" $cell |"
        done
        echo "$line"
    done
    echo
    echo "pass: the runner's checks all ran and held. FAIL: the first failing check, as the client saw it."
    echo "not yet: not run (Comet's broker refuses transactional half messages today). n/a: no such API in that client."
    echo
    echo "## What the rows check"
    echo
    echo "- Every scenario creates its own topic (4 queues) and groups; waits are condition polls bounded at 60 s."
    echo "- send-*: send results (status, ids, per-queue offsets) and delivery of exactly the sent messages to a consumer."
    echo "- compressed-body: an 8 KiB compressible body is inflated by the consumer, and the stored record is smaller than the body."
    echo "- clustering: two consumers of one group, rebalance settled (disjoint, complete), 40 messages delivered exactly once (Java also waits for the committed lag to reach 0)."
    echo "- retry-dlq: RECONSUME_LATER with maxReconsumeTimes 2 gives deliveries with reconsumeTimes 0, 1, 2, then the message is pulled from %DLQ%group."
    echo "- delay-level: level 2; storeTimestamp - bornTimestamp >= 5000 ms on the delivered message."
    echo "- from-last-offset / from-timestamp: no client sends setZeroIfNotFound, so for a new group a broker that still holds a queue's first message answers offset 0 and the consumer starts there (Apache's rule); the rows check that, and Java also checks the client's own start offsets (maxOffset, searchOffset at the second boundary)."
    echo "- lite-pull-seek: Java DefaultLitePullConsumer assign + seek; rocketmq-client-go 2.1.2 has no lite pull consumer, so its row uses PullFrom at explicit offsets."
    echo "- Go batch sends: the Go client reports an empty MsgID for batches (it reads UNIQ_KEY from the batch wrapper), so that row checks the broker's offset id and per-message ids instead."
    echo
    echo "## Timing"
    echo
    echo "All rows: ${RUN_SECONDS} s wall clock with $JOBS rows in parallel on $(nproc) cores; whole script (builds, comet start and stop): $((SECONDS - T0)) s."
    echo
    echo "| Row | Seconds |"
    echo "|---|---|"
    for f in "$WORK"/results/*; do
        secs="$(cut -f3 "$f")"
        if ((secs > 0)); then echo "| $(basename "$f" | sed 's/__/ · /') | $secs |"; fi
    done | sort -t'|' -k3 -rn | head -10
    echo
    echo "## Versions"
    echo
    echo "- Comet: $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$(cd "$REPO" && git diff --quiet 2>/dev/null || echo ' + uncommitted changes'), \`comet serve --set messageDelayLevel=\"$DELAY_LEVELS\"\` (debug build)"
    echo "- Java clients: \`org.apache.rocketmq:rocketmq-client\` and \`rocketmq-tools\` ${JAVA_VERSIONS[*]} (Maven Central); ROCKETMQ rows add \`-Drocketmq.serialize.type=ROCKETMQ\`"
    echo "- Go client: \`github.com/apache/rocketmq-client-go/v2\` $GO_CLIENT_VERSION"
    echo "- $(java -version 2>&1 | head -1); $(go version); $(mvn -v 2>/dev/null | head -1 | sed 's/\x1b\[[0-9;]*m//g')"
    echo
    echo "## Broker warnings and errors during the run"
    echo
    echo '```'
    grep -E ' (WARN|ERROR) ' "$WORK/comet.log" | sed 's/\x1b\[[0-9;]*m//g' | cut -c1-300 | sort | uniq -c | sort -rn | head -30 || true
    echo '```'
} >"$OUTPUT"
step "wrote $OUTPUT"

if [[ $UPDATE_BASELINE == yes ]]; then
    {
        echo "# Rows of the interop matrix (interop/matrix.sh) that passed: \"<scenario> <peer>\"."
        echo "# matrix.sh exits non-zero when one of them fails. Regenerate with interop/matrix.sh --update-baseline."
        printf '%s\n' "${passed_rows[@]}" | sort
    } >"$BASELINE"
    step "baseline updated: ${#passed_rows[@]} rows"
fi

total=0
for f in "$WORK"/results/*; do total=$((total + 1)); done
echo "matrix: ${#passed_rows[@]} of $total rows pass"
if ((${#failed_baseline[@]} > 0)); then
    printf 'matrix: baseline row FAILED: %s\n' "${failed_baseline[@]}" >&2
    exit 1
fi
# Keep the work directory (comet.log, row logs) whenever a row failed, baseline or not.
grep -q "^FAIL" "$WORK"/results/* || OK=yes
