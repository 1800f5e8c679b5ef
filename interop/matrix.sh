#!/usr/bin/env bash
# Interop matrix: real RocketMQ clients (Apache Java 4.9.8 and 5.3.3 with JSON headers, Java 5.3.3
# with ROCKETMQ binary headers, Go rocketmq-client-go 2.1.2, and the third-party Rust client
# rocketmq-client-rust 1.0.0) against `comet serve`.
#
#   1. builds comet (cargo), the Java runner for both client versions (Maven), the Go runner and the
#      Rust runner (interop/rust-peer, its own cargo project; only when a rust peer is selected);
#   2. starts `comet serve` on loopback with port 0, a temp data dir, fast retry delays
#      (messageDelayLevel "1s 5s 1s ..." keeps level 2 at 5 s for the delay scenario) and a short
#      transaction check interval; the acl-* rows get a second `comet serve` with aclEnable and a
#      plain_acl.yml written here, the tls-* rows a third one whose listener is TLS-only
#      (self-signed certificate made with openssl); each is started only when a row needs it;
#   3. runs every scenario x peer, MATRIX_JOBS at a time; each row uses its own topic and groups
#      (suffix = peer), so rows do not see each other's messages;
#   4. stops the brokers with SIGTERM and writes INTEROP.md at the repo root (table, per-peer n/a
#      reasons, versions, command, duration, broker warnings). Everything from the line
#      HAND_WRITTEN_MARKER (below) to the end of the existing file is kept: sections written by
#      hand for other suites live there.
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
#   MATRIX_PEERS [all]         e.g. "go-2.1.2 java-5.3.3-json rust-1.0.0"
#   MATRIX_SCENARIOS [all]     e.g. "send-sync clustering"
#   MATRIX_ROW_TIMEOUT [180]   seconds before a row is killed and marked FAIL
#   MATRIX_ROW_RETRIES [1]     1: a failed row runs once more under fresh names; 0: never. A row
#                              that passes on its second attempt says so in the report
#   MATRIX_WORKDIR [mktemp]    comet data, logs, client logs; removed on success unless MATRIX_KEEP=1
#   MATRIX_OUTPUT [INTEROP.md] report path, relative to the repo root
#   CARGO_TARGET_DIR           honoured by cargo as usual; the Rust runner builds in its rust-peer/
#                              subdirectory (else in interop/rust-peer/target)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
BASELINE="$HERE/matrix-baseline.txt"
JOBS="${MATRIX_JOBS:-3}"
ROW_TIMEOUT="${MATRIX_ROW_TIMEOUT:-180}"
ROW_RETRIES="${MATRIX_ROW_RETRIES:-1}"
OUTPUT="$REPO/${MATRIX_OUTPUT:-INTEROP.md}"
READY_TIMEOUT=60
STOP_TIMEOUT=60
JAVA_VERSIONS=(4.9.8 5.3.3)
GO_CLIENT_VERSION=v2.1.2
RUST_CLIENT_VERSION=1.0.0
ALL_PEERS=(java-4.9.8-json java-5.3.3-json java-5.3.3-rocketmq go-2.1.2 "rust-$RUST_CLIENT_VERSION")
# Scenario order: the slow ones first, so the pool drains evenly.
ALL_SCENARIOS=(
    retry-dlq pop-consume delay-level timer-message transactions clustering admin-reset-offset admin-consumer-progress broadcasting
    orderly from-timestamp from-last-offset from-first-offset tag-filter lite-pull-seek pull-offset-restart
    acl-send-consume acl-denied tls-send-consume
    send-sync send-async send-oneway send-batch properties compressed-body
    admin-topic admin-query-message msg-trace
)
# Scenarios not run against Comet yet, with the reason (a missing Comet feature).
declare -A NOT_YET=()
# msg-trace: the Java client's own message trace, read back by the Java decoder and `comet msg trace`.
JAVA_ONLY=" admin-topic admin-consumer-progress admin-query-message admin-reset-offset msg-trace "
# Scenarios a peer cannot run ("n/a" in the table), with the reason; JAVA_ONLY comes on top.
declare -A NA_JAVA4=(
    [timer-message]="Message#setDeliverTimeMs and the timer wheel are RocketMQ 5.x"
    [pop-consume]="POP consumption (setMessageRequestMode, clientRebalance=false) is RocketMQ 5.x"
)
# Rows the Java 5.3.3 client with ROCKETMQ binary headers cannot run, with the reason.
declare -A NA_JAVA_ROCKETMQ=(
    [pop-consume]="with ROCKETMQ binary headers the scenario does not pass against Apache RocketMQ 5.3.3 itself (the 20 messages are not all consumed within 60 s), so there is no reference behaviour"
)
declare -A NA_GO=(
    [timer-message]="not covered: the Go runner does not implement this scenario"
    [pop-consume]="not covered: the Go runner does not implement this scenario"
    [tls-send-consume]="rocketmq-client-go 2.1.2 has no TLS option (its remoting client dials plain TCP)"
)
declare -A NA_RUST=(
    [timer-message]="not covered: the Rust runner does not implement this scenario"
    [pop-consume]="not covered: the Rust runner does not implement this scenario"
    [tls-send-consume]="not covered: the Rust runner does not implement this scenario"
    [pull-offset-restart]="rocketmq-client-rust 1.0.0's classic pull consumer has no persist call and its shutdown commits no offset (a restarted consumer reads 0 from Apache 5.3.3 as from Comet)"
)
# The matrix broker's transaction check: quick enough for the UNKNOWN -> check -> commit row.
TRANSACTION_CHECK_INTERVAL_MS=1000
TRANSACTION_TIMEOUT_MS=2000
# ACL broker accounts (plain_acl.yml is written into the work dir).
ACL_USER="cometUser:cometUserSecret"
ACL_ADMIN="cometAdmin:cometAdminSecret"
DELAY_LEVELS="1s 5s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"

UPDATE_BASELINE=no
for arg in "$@"; do
    case "$arg" in
        --update-baseline) UPDATE_BASELINE=yes ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "matrix.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done

COMMAND_LINE="MATRIX_JOBS=$JOBS${MATRIX_PEERS:+ MATRIX_PEERS=\"$MATRIX_PEERS\"}${MATRIX_SCENARIOS:+ MATRIX_SCENARIOS=\"$MATRIX_SCENARIOS\"} interop/matrix.sh${*:+ $*}"
read -r -a PEERS <<<"${MATRIX_PEERS:-${ALL_PEERS[*]}}"
read -r -a SCENARIOS <<<"${MATRIX_SCENARIOS:-${ALL_SCENARIOS[*]}}"

die() { echo "matrix.sh: $*" >&2; exit 1; }
step() { echo "== matrix: $* ($((SECONDS - T0))s)"; }

# na_reason <peer> <scenario>: prints why the peer cannot run the scenario, nothing if it can.
na_reason() {
    local peer=$1 scenario=$2
    if [[ "$JAVA_ONLY" == *" $scenario "* && $peer == rust-* ]]; then
        echo "not covered: the Rust runner does not drive rocketmq-client-rust's admin API"
    elif [[ "$JAVA_ONLY" == *" $scenario "* && $peer != java-* ]]; then
        echo "Java admin tools only"
    elif [[ $peer == java-4.* && -n "${NA_JAVA4[$scenario]:-}" ]]; then
        echo "${NA_JAVA4[$scenario]}"
    elif [[ $peer == java-*-rocketmq && -n "${NA_JAVA_ROCKETMQ[$scenario]:-}" ]]; then
        echo "${NA_JAVA_ROCKETMQ[$scenario]}"
    elif [[ $peer == go-* && -n "${NA_GO[$scenario]:-}" ]]; then
        echo "${NA_GO[$scenario]}"
    elif [[ $peer == rust-* && -n "${NA_RUST[$scenario]:-}" ]]; then
        echo "${NA_RUST[$scenario]}"
    fi
}

# broker_of <scenario>: which comet instance serves the row (main, acl or tls).
broker_of() {
    case "$1" in
        acl-*) echo acl ;;
        tls-*) echo tls ;;
        *) echo main ;;
    esac
}

# Which brokers and peers the selected, runnable rows need.
declare -A NEEDED_BROKERS=() NEEDED_PEERS=()
for scenario in "${SCENARIOS[@]}"; do
    [[ -n "${NOT_YET[$scenario]:-}" ]] && continue
    for peer in "${PEERS[@]}"; do
        [[ -n "$(na_reason "$peer" "$scenario")" ]] && continue
        NEEDED_BROKERS[$(broker_of "$scenario")]=1
        NEEDED_PEERS[${peer%%-*}]=1
    done
done

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
declare -A COMET_PIDS=() NAMESRVS=() BROKERS=()
OK=no

stop_comet() { # stops every comet instance (SIGTERM, then SIGKILL after STOP_TIMEOUT)
    local name pid deadline
    for name in "${!COMET_PIDS[@]}"; do
        kill -TERM "${COMET_PIDS[$name]}" 2>/dev/null || true
    done
    deadline=$((SECONDS + STOP_TIMEOUT))
    for name in "${!COMET_PIDS[@]}"; do
        pid=${COMET_PIDS[$name]}
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "matrix.sh: comet ($name) did not stop within ${STOP_TIMEOUT}s, killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
        unset "COMET_PIDS[$name]"
    done
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
        echo "matrix.sh: work directory kept: $WORK (comet-*.log, logs/<row>.log)" >&2
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
    [[ -n "${NEEDED_PEERS[java]:-}" ]] || break
    step "building the Java runner for rocketmq-client $v"
    cp_file="$JAVA_DIR/target/$v/classpath.txt"
    if [[ ! -s "$cp_file" || ! -d "$JAVA_DIR/target/$v/classes" ||
        -n "$(find "$JAVA_DIR/src" "$JAVA_DIR/pom.xml" -newer "$cp_file" -print -quit)" ]]; then
        mvn -q -B -f "$JAVA_DIR/pom.xml" -Drocketmq.client.version="$v" compile dependency:build-classpath \
            -Dmdep.outputFile="$cp_file" >&2 || die "maven could not build $JAVA_DIR for $v"
        touch "$cp_file"
    fi
done

if [[ -n "${NEEDED_PEERS[go]:-}" ]]; then
    step "building the Go runner ($GO_CLIENT_VERSION)"
    grep -q "rocketmq-client-go/v2 $GO_CLIENT_VERSION" "$HERE/go/go.mod" || die "go/go.mod does not pin $GO_CLIENT_VERSION"
    (cd "$HERE/go" && go build -o "$WORK/matrix-go" .) || die "go build failed"
fi

RUST_PEER_TARGET="${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/rust-peer}"
RUST_PEER_TARGET="${RUST_PEER_TARGET:-$HERE/rust-peer/target}"
RUST_BIN="$RUST_PEER_TARGET/debug/matrix-rust"
if [[ -n "${NEEDED_PEERS[rust]:-}" ]]; then
    # A cold build compiles the client's whole dependency tree (~10 min on 2 cores); later runs reuse it.
    step "building the Rust runner (rocketmq-client-rust $RUST_CLIENT_VERSION)"
    grep -q "^rocketmq-client-rust = \"=$RUST_CLIENT_VERSION\"" "$HERE/rust-peer/Cargo.toml" ||
        die "rust-peer/Cargo.toml does not pin rocketmq-client-rust =$RUST_CLIENT_VERSION"
    (cd "$HERE/rust-peer" && CARGO_TARGET_DIR="$RUST_PEER_TARGET" cargo build -q --locked) ||
        die "cargo build of interop/rust-peer failed"
fi

# --- comet ------------------------------------------------------------------------------------
# start_comet <name> [--set key=value ...]: one `comet serve` with its own data dir and log.
start_comet() {
    local name=$1 ready="$WORK/ready-$1.json" log="$WORK/comet-$1.log"
    shift
    step "starting comet serve ($name)"
    "$COMET_BIN" serve --namesrv-listen 127.0.0.1:0 --broker-listen 127.0.0.1:0 --data-dir "$WORK/data-$name" \
        --ready-file "$ready" --set "messageDelayLevel=$DELAY_LEVELS" "$@" >"$log" 2>&1 &
    COMET_PIDS[$name]=$!
    local deadline=$((SECONDS + READY_TIMEOUT))
    until [[ -s "$ready" ]]; do
        kill -0 "${COMET_PIDS[$name]}" 2>/dev/null || die "comet serve ($name) exited: $(tail -5 "$log")"
        ((SECONDS < deadline)) || die "comet serve ($name) not ready after ${READY_TIMEOUT}s"
        sleep 0.1
    done
    NAMESRVS[$name]="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["namesrv"])' "$ready")"
    BROKERS[$name]="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["broker"])' "$ready")"
    echo "matrix: comet ($name) name server ${NAMESRVS[$name]}, broker ${BROKERS[$name]}"
}

# write_acl_file <path>: an admin account, and an ordinary one granted PUB|SUB on the acl rows'
# topics only (defaultTopicPerm DENY), SUB on groups by default. No white list: every request is
# signature-checked.
write_acl_file() {
    local user_ak=${ACL_USER%%:*} user_sk=${ACL_USER#*:} admin_ak=${ACL_ADMIN%%:*} admin_sk=${ACL_ADMIN#*:} peer
    {
        echo "globalWhiteRemoteAddresses: []"
        echo "accounts:"
        echo "  - accessKey: $admin_ak"
        echo "    secretKey: $admin_sk"
        echo "    admin: true"
        echo "  - accessKey: $user_ak"
        echo "    secretKey: $user_sk"
        echo "    admin: false"
        echo "    defaultTopicPerm: DENY"
        echo "    defaultGroupPerm: SUB"
        echo "    topicPerms:"
        for peer in "${PEERS[@]}"; do
            for suffix in "$(row_suffix "$peer")" "$(row_suffix "$peer" 2)"; do
                echo "      - MxT_acl_send_consume_$suffix=PUB|SUB"
                echo "      - MxT_acl_denied_$suffix=PUB|SUB"
            done
        done
    } >"$1"
}

row_suffix() { # row_suffix <peer> [attempt]: the names of one attempt (a second one gets its own: x2)
    echo "$(peer_suffix "$1")${2:+x$2}"
}

peer_suffix() { # java-5.3.3-rocketmq -> j533r, go-2.1.2 -> g212, rust-1.0.0 -> r100
    local p=$1 v
    v="$(echo "$p" | cut -d- -f2 | tr -d .)"
    case "$p" in
        java-*-json) echo "j${v}j" ;;
        java-*-rocketmq) echo "j${v}r" ;;
        go-*) echo "g${v}" ;;
        rust-*) echo "r${v}" ;;
    esac
}

[[ -n "${NEEDED_BROKERS[main]:-}" ]] && start_comet main \
    --set "transactionCheckInterval=$TRANSACTION_CHECK_INTERVAL_MS" --set "transactionTimeOut=$TRANSACTION_TIMEOUT_MS"
if [[ -n "${NEEDED_BROKERS[acl]:-}" ]]; then
    write_acl_file "$WORK/plain_acl.yml"
    start_comet acl --set aclEnable=true --set "aclFile=$WORK/plain_acl.yml"
fi
if [[ -n "${NEEDED_BROKERS[tls]:-}" ]]; then
    command -v openssl >/dev/null || die "openssl is required for the TLS rows"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$WORK/server.key" -out "$WORK/server.pem" -days 1 \
        -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null ||
        die "openssl could not make the self-signed certificate"
    start_comet tls --set tlsServerMode=enforcing --set "tlsServerCertPath=$WORK/server.pem" \
        --set "tlsServerKeyPath=$WORK/server.key"
fi

# --- rows -------------------------------------------------------------------------------------
row_command() { # row_command <peer> <scenario> [attempt]: prints nothing, sets CMD array
    local peer=$1 scenario=$2 suffix broker namesrv
    # A second attempt gets names of its own (topics, groups, home), untouched by the first.
    suffix="$(row_suffix "$peer" "${3:-}")"
    broker="$(broker_of "$scenario")"
    namesrv="${NAMESRVS[$broker]}"
    CMD=(env MATRIX_BROKER_ADDR="${BROKERS[$broker]}" MATRIX_COMET_BIN="$COMET_BIN")
    [[ $broker == acl ]] && CMD+=(MATRIX_ACL_USER="$ACL_USER" MATRIX_ACL_ADMIN="$ACL_ADMIN")
    case "$peer" in
        java-*)
            local v ser
            v="$(echo "$peer" | cut -d- -f2)"
            ser="$(echo "$peer" | cut -d- -f3)"
            CMD+=(java -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
                -Duser.home="$WORK/home/$suffix" -Drocketmq.client.logRoot="$WORK/clientlogs/$suffix"
                -Drocketmq.client.localOffsetStoreDir="$WORK/offsets/$suffix"
                -Dcom.rocketmq.sendMessageWithVIPChannel=false)
            [[ $ser == rocketmq ]] && CMD+=(-Drocketmq.serialize.type=ROCKETMQ)
            # TLS rows: the client trusts any certificate (tls.test.mode.enable), the broker's is self-signed.
            [[ $broker == tls ]] && CMD+=(-Dtls.enable=true -Dtls.test.mode.enable=true)
            CMD+=(-cp "$JAVA_DIR/target/$v/classes:$(cat "$JAVA_DIR/target/$v/classpath.txt")"
                dev.comet.interop.MatrixRunner "$scenario" "$namesrv" "$suffix")
            ;;
        go-*)
            CMD+=(HOME="$WORK/home/$suffix" "$WORK/matrix-go" "$scenario" "$namesrv" "$suffix")
            ;;
        rust-*)
            CMD+=(HOME="$WORK/home/$suffix" "$RUST_BIN" "$scenario" "$namesrv" "$suffix")
            ;;
    esac
}

attempt_row() { # attempt_row <peer> <scenario> <log> [attempt]: runs the row once, sets STATUS, DETAIL
    local peer=$1 scenario=$2 log=$3 attempt=${4:-} rc=0
    row_command "$peer" "$scenario" "$attempt"
    mkdir -p "$WORK/home/$(row_suffix "$peer" "$attempt")"
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
    STATUS=$status DETAIL=$detail
}

run_row() { # run_row <peer> <scenario>: writes results/<peer>__<scenario> = "status<TAB>detail<TAB>seconds"
    local peer=$1 scenario=$2 log="$WORK/logs/$1__$2.log" out="$WORK/results/$1__$2" start
    local STATUS DETAIL status detail
    start="$(date +%s)"
    attempt_row "$peer" "$scenario" "$log"
    # A failed row runs once more (MATRIX_ROW_RETRIES) under fresh names; the report says so. The
    # peers' own clients fail now and then on their side (rocketmq-client-rust 1.0.0's consume task
    # has panicked with "runtime.capacity.exhausted" and, broadcasting, dropped the message), which
    # would otherwise fail the run for a row that passes when run again.
    if [[ $STATUS == FAIL && $ROW_RETRIES == 1 ]]; then
        local first=$DETAIL
        mv "$log" "${log%.log}.attempt1.log"
        attempt_row "$peer" "$scenario" "$log" 2
        if [[ $STATUS == pass ]]; then
            DETAIL="$DETAIL; passed on a second attempt (the first failed: $first)"
        else
            DETAIL="$DETAIL (a first attempt failed too: $first)"
        fi
    fi
    status=$STATUS detail=$DETAIL
    detail="${detail//$'\t'/ }"
    detail="${detail//|/\\|}"
    local took=$(($(date +%s) - start))
    printf '%s\t%s\t%s\n' "$status" "$detail" "$took" >"$out"
    echo "matrix: $status $peer $scenario (${took}s)$([[ $status == pass && $detail != *"second attempt"* ]] || echo " $detail")"
}

running_rows() { # how many of the started rows are still running
    local n=0 pid
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && n=$((n + 1)); done
    echo "$n"
}

step "running ${#SCENARIOS[@]} scenarios x ${#PEERS[@]} peers, $JOBS at a time"
RUN_T0=$SECONDS
pids=()
for scenario in "${SCENARIOS[@]}"; do
    for peer in "${PEERS[@]}"; do
        reason="$(na_reason "$peer" "$scenario")"
        if [[ -n "$reason" ]]; then
            printf 'n/a\t%s\t0\n' "$reason" >"$WORK/results/${peer}__$scenario"
            continue
        fi
        if [[ -n "${NOT_YET[$scenario]:-}" ]]; then
            printf 'not yet\t%s\t0\n' "${NOT_YET[$scenario]}" >"$WORK/results/${peer}__$scenario"
            continue
        fi
        # Count this loop's rows only: the comet instances are background jobs of this shell too.
        while (($(running_rows) >= JOBS)); do wait -n || true; done
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

# Sections written by hand (e.g. by other interop suites) follow this marker line at the end of the
# report; they are carried over unchanged.
HAND_WRITTEN_MARKER='<!-- Hand-written sections below: interop/matrix.sh keeps everything from this line on. -->'
HAND_WRITTEN="$WORK/hand-written.md"
: >"$HAND_WRITTEN"
if [[ -f "$OUTPUT" ]]; then
    awk -v m="$HAND_WRITTEN_MARKER" 'found || $0 == m { found = 1; print }' "$OUTPUT" >"$HAND_WRITTEN"
fi

failed_baseline=()
passed_rows=()
{
    echo "# Interop matrix: real RocketMQ clients against \`comet serve\`"
    echo
    if [[ -s "$HAND_WRITTEN" ]]; then
        echo "Generated by \`interop/matrix.sh\` on $STARTED_AT, except the hand-written sections after the marker at the end, which it keeps; do not edit the rest by hand."
    else
        echo "Generated by \`interop/matrix.sh\` on $STARTED_AT; do not edit by hand."
    fi
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
                pass)
                    cell="pass"
                    [[ $detail == *"second attempt"* ]] && cell="pass (second attempt; the first failed)"
                    passed_rows+=("$scenario $peer")
                    ;;
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
    echo "not yet: not run against Comet yet (reasons below). n/a: that client cannot run it, or its runner does not cover it (reasons below)."
    echo
    echo "## Not run, and why"
    echo
    for scenario in "${SCENARIOS[@]}"; do
        [[ -n "${NOT_YET[$scenario]:-}" ]] && echo "- not yet, $scenario: ${NOT_YET[$scenario]}."
    done
    for peer in "${PEERS[@]}"; do
        na=()
        for scenario in "${SCENARIOS[@]}"; do
            [[ "$(result_field "$peer" "$scenario" 1)" == n/a ]] && na+=("$scenario: $(result_field "$peer" "$scenario" 2)")
        done
        ((${#na[@]} > 0)) && echo "- n/a for $peer: $(printf '%s; ' "${na[@]}" | sed 's/; $//')."
    done
    echo
    echo "## What the rows check"
    echo
    echo "- Every scenario creates its own topic (4 queues) and groups; waits are condition polls bounded at 60 s."
    echo "- send-*: send results (status, ids, per-queue offsets) and delivery of exactly the sent messages to a consumer."
    echo "- compressed-body: an 8 KiB compressible body is inflated by the consumer, and the stored record is smaller than the body."
    echo "- clustering: two consumers of one group, rebalance settled (disjoint, complete), 40 messages delivered exactly once (Java also waits for the committed lag to reach 0)."
    echo "- retry-dlq: RECONSUME_LATER with maxReconsumeTimes 2 gives deliveries with reconsumeTimes 0, 1, 2, then the message is pulled from %DLQ%group."
    echo "- delay-level: level 2; storeTimestamp - bornTimestamp >= 5000 ms on the delivered message."
    echo "- pop-consume (RocketMQ 5.x clients): the group is switched to POP on every master (DefaultMQAdminExt#setMessageRequestMode, POP, share 8, what mqadmin setConsumeMode -m POP -q 8 sends); a push consumer with clientRebalance=false gets its queue from QUERY_ASSIGNMENT and pops; 20 messages are all consumed, each carrying POP_CK, and one that fails once (RECONSUME_LATER, which the client turns into an invisible-time change) comes back. Validated against Apache RocketMQ 5.3.3 (interop/apache/run.sh) with JSON headers."
    echo "- timer-message (RocketMQ 5.x clients): Message#setDeliverTimeMs 3 s ahead; the delivered message's storeTimestamp is at or after that time (so no consumer can have had it earlier), it arrives on the real topic with its tag, TIMER_DELIVER_MS, TIMER_OUT_MS, TIMER_ENQUEUE_MS, TIMER_DEQUEUE_MS and REAL_TOPIC (Apache keeps the parked record's properties). The scenario was validated against Apache RocketMQ 5.3.3 (interop/apache/run.sh, default timer settings)."
    echo "- from-last-offset / from-timestamp: no client sends setZeroIfNotFound, so for a new group a broker that still holds a queue's first message answers offset 0 and the consumer starts there (Apache's rule); the rows check that, and Java also checks the client's own start offsets (maxOffset, searchOffset at the second boundary)."
    echo "- lite-pull-seek: Java DefaultLitePullConsumer assign + seek; rocketmq-client-go 2.1.2 has no lite pull consumer, so its row uses PullFrom at explicit offsets; the Rust row does the same with its classic DefaultMQPullConsumer."
    echo "- Go batch sends: the Go client reports an empty MsgID for batches (it reads UNIQ_KEY from the batch wrapper), so that row checks the broker's offset id and per-message ids instead."
    echo "- rocketmq-client-rust 1.0.0 rows: tag-filter subscribes with \`TagA||TagB\` (that client hashes each tag of \`TagA || TagB\` before trimming it, so with spaces no broker, Apache's included, delivers anything); acl-denied checks the code only (the client redacts the broker's remark in its error); send-batch checks the per-message msgIds the batch result lists."
    echo "- transactions: one half message committed by the local transaction, one rolled back, one UNKNOWN and committed when the broker checks back (check interval ${TRANSACTION_CHECK_INTERVAL_MS} ms, transactionTimeOut ${TRANSACTION_TIMEOUT_MS} ms); exactly the two committed messages are delivered with their half message's msgId, the producer is asked about the UNKNOWN one only, and the topic's queues hold 2 messages. The scenario was validated against Apache RocketMQ 5.3.3 (interop/apache/run.sh with transactionCheckInterval=1000, transactionTimeOut=2000 and transactionOpBatchInterval=100: Apache writes its op records in batches, 3 s by default, and checks already-resolved half messages until they land)."
    echo "- acl-*: a second \`comet serve\` with aclEnable and a generated plain_acl.yml (an admin account creates the topics; the ordinary account has PUB|SUB on its acl topics only, defaultTopicPerm DENY, no white list). acl-send-consume: signed sends and a signed push consumer, every message delivered once. acl-denied: a granted send, then a send to a topic outside topicPerms and a send signed with a wrong secret key both fail with NO_PERMISSION (16) and an error naming the topic / the signature. Java signs with AclClientRPCHook (rocketmq-acl 4.9.8; inside rocketmq-client in 5.x), Go with primitive.Credentials (its admin API signs only after one GetAllSubscriptionGroup call, see interop/go), Rust with AclClientRPCHook."
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
    echo "- Comet: $(cd "$REPO" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$(cd "$REPO" && git diff --quiet 2>/dev/null || echo ' + uncommitted changes'), \`comet serve --set messageDelayLevel=\"$DELAY_LEVELS\" --set transactionCheckInterval=$TRANSACTION_CHECK_INTERVAL_MS --set transactionTimeOut=$TRANSACTION_TIMEOUT_MS\` (debug build); ACL rows: \`--set aclEnable=true --set aclFile=plain_acl.yml\`; TLS rows: \`--set tlsServerMode=enforcing\` with a self-signed certificate"
    echo "- Java clients: \`org.apache.rocketmq:rocketmq-client\` and \`rocketmq-tools\` ${JAVA_VERSIONS[*]} (Maven Central); ROCKETMQ rows add \`-Drocketmq.serialize.type=ROCKETMQ\`"
    echo "- Go client: \`github.com/apache/rocketmq-client-go/v2\` $GO_CLIENT_VERSION"
    echo "- Rust client: \`rocketmq-client-rust\` $RUST_CLIENT_VERSION (crates.io, third-party; interop/rust-peer pins it and its Cargo.lock)"
    echo "- $(java -version 2>&1 | head -1); $(go version); $(mvn -v 2>/dev/null | head -1 | sed 's/\x1b\[[0-9;]*m//g')"
    echo
    echo "## Broker warnings and errors during the run"
    echo
    echo '```'
    for log in "$WORK"/comet-*.log; do
        [[ -f "$log" ]] || continue
        # Timestamps and peer ports differ on every line: drop them so repeats collapse.
        grep -E ' (WARN|ERROR) ' "$log" | sed 's/\x1b\[[0-9;]*m//g; s/^[0-9TZ:.-]* *//; s/peer=127\.0\.0\.1:[0-9]*/peer=127.0.0.1/' |
            cut -c1-300 | sed "s/^/$(basename "$log" .log): /" || true
    done | sort | uniq -c | sort -rn | head -30
    echo '```'
    if [[ -s "$HAND_WRITTEN" ]]; then
        echo
        cat "$HAND_WRITTEN"
    fi
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
