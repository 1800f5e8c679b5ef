#!/usr/bin/env bash
# The official RocketMQ 5.x gRPC SDK (rocketmq-client-java 5.0.8) producing to Comet's gRPC
# endpoint, with a remoting consumer reading what it sent, and consuming with its own consumers.
#
#   1. `comet serve` (gRPC on, ephemeral ports, named in its ready file); a 4-queue topic.
#   2. GrpcProducer sends N messages to the gRPC port over TLS (the SDK's default): tag TagA, two
#      keys, a user property and a numbered body each; it prints the message id of every receipt.
#   3. `comet consume --from first` (the remoting push consumer) reads the topic, and check.py
#      requires every message exactly once with its body, tag, keys, property and message id.
#      Steps 2 and 3 run again over plaintext (`enableSsl(false)`) to a second topic, and as
#      timer messages (`setDeliveryTimestamp`, due DELAY_MS after sending) to a DELAY topic
#      (`topic create --message-type DELAY`): each must arrive with TIMER_DELIVER_MS, not before
#      its time. Then a transactional producer (TRANSACTION topic) commits one message, rolls one
#      back and leaves one open, which the server checks back (TX_CHECK_MS apart) and the
#      producer's checker commits: exactly the committed and the checked message must arrive.
#   4. The SDK's consumers: GrpcProducer sends N messages to a fresh topic, then GrpcConsumer
#      reads them with a SimpleConsumer (acks, changeInvisibleDuration, a redelivery once the
#      invisible time is over) and, on another topic, with a PushConsumer (every message
#      consumed, a FAILURE from the listener delivered again), and on a FIFO topic with a push
#      consumer of an orderly group (one message group consumed in order, a failed message
#      retried before the next); it checks ids, delivery attempts and order itself. Last, a
#      SimpleConsumer of a group with retryMaxTimes 1 never acks: every message must be delivered
#      twice, then land in %DLQ%<group> (read back by `comet consume`) and not come back.
#   5. ACL on: a second server that checks credentials (Comet: `comet serve` with aclEnable and a
#      plain_acl.yml of an ordinary account granted PUB|SUB on the topic; Apache: the proxy with
#      authenticationEnabled and the account as its broker's initial user). The producer and a
#      SimpleConsumer signed with the account send and consume COUNT messages (checked as in
#      step 4); the producer signed with a wrong secret key, and unsigned, must be refused with
#      UNAUTHORIZED (response code 40100).
#   6. Unless APACHE=0: the same producer and consumer against Apache RocketMQ 5.3.3's proxy in
#      local mode (its name server, and the proxy with its embedded broker), so the checks
#      themselves are known to hold for Apache; then the property names stored by both must be
#      the same.
#
#   interop/grpc/run.sh
#
# Needs java 17+, mvn and python3. Env: COMET_BIN [target/debug/comet, built if missing],
# COUNT [50] messages, DELAY_MS [3000] of the timer messages, APACHE [1], COMET [1] (0 runs only
# Apache's side), CONSUMERS_ONLY=1 runs only step 4, ACL_ONLY=1 only step 5, JAVA_HEAP [512m],
# KEEP_WORKDIR=1 keeps logs and outputs.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
COMET_BIN="${COMET_BIN:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/comet}"
COUNT="${COUNT:-50}"
DELAY_MS="${DELAY_MS:-3000}"
# transactionCheckInterval of both servers, so that the orphaned transaction is checked soon.
TX_CHECK_MS="${TX_CHECK_MS:-3000}"
APACHE="${APACHE:-1}"
COMET="${COMET:-1}"
CONSUMERS_ONLY="${CONSUMERS_ONLY:-}"
ACL_ONLY="${ACL_ONLY:-}"
JAVA_HEAP="${JAVA_HEAP:-512m}"
WAIT=90
WORK="$(mktemp -d -t comet-grpc.XXXXXX)"
T0=$SECONDS

log() { echo "== grpc: $* ($((SECONDS - T0))s)"; }
die() { echo "grpc: $*" >&2; exit 1; }

PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    if [[ -n "${KEEP_WORKDIR:-}" ]]; then
        echo "grpc: work directory kept: $WORK"
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT

# shellcheck source=../lib/apache_proxy.sh
source "$ROOT/interop/lib/apache_proxy.sh"

# Produces COUNT messages to gRPC endpoint $2 (topic $3) over $5 (tls or plain), as timer
# messages due $6 ms after sending when given, consumes them through name server $1, and checks
# them; $4 names the run in logs and file names.
produce_and_check() {
    local namesrv="$1" endpoint="$2" topic="$3" name="$4" transport="$5" delay="${6:-}"
    log "$name: producing $COUNT messages to $endpoint ($transport${delay:+, due after ${delay} ms})"
    timeout 120 java -Xmx256m -cp "$HERE/target/classes:$(cat "$HERE/target/classpath.txt")" \
        dev.comet.interop.GrpcProducer "$endpoint" "$topic" "$COUNT" "$transport" $delay \
        >"$WORK/$name.sent" 2>"$WORK/$name.producer.log" ||
        { tail -20 "$WORK/$name.producer.log" >&2; die "$name: the gRPC producer failed"; }
    log "$name: consuming with the remoting consumer"
    timeout 120 "$COMET_BIN" consume "$topic" -n "$namesrv" -g "GrpcCheck$name" --from first \
        --count "$COUNT" --idle 30 --json >"$WORK/$name.consumed" 2>"$WORK/$name.consumer.log" ||
        { tail -20 "$WORK/$name.consumer.log" >&2; die "$name: the consumer failed"; }
    python3 "$HERE/check.py" "$COUNT" "$WORK/$name.sent" "$WORK/$name.consumed" ||
        die "$name: messages differ"
}

# Runs the transactional producer against gRPC endpoint $2 (topic $3, over $5) and checks that
# only its committed and its checked-back message reach consumers of name server $1; $4 names
# the run.
produce_tx_and_check() {
    local namesrv="$1" endpoint="$2" topic="$3" name="$4" transport="$5"
    log "$name: committing, rolling back and leaving open a transaction at $endpoint ($transport)"
    timeout 150 java -Xmx256m -cp "$HERE/target/classes:$(cat "$HERE/target/classpath.txt")" \
        dev.comet.interop.GrpcTxProducer "$endpoint" "$topic" "$transport" 90 \
        >"$WORK/$name.sent" 2>"$WORK/$name.producer.log" ||
        { tail -20 "$WORK/$name.producer.log" >&2; die "$name: no transaction check arrived"; }
    log "$name: consuming with the remoting consumer"
    timeout 120 "$COMET_BIN" consume "$topic" -n "$namesrv" -g "GrpcCheck$name" --from first \
        --count 2 --idle 20 --json >"$WORK/$name.consumed" 2>"$WORK/$name.consumer.log" ||
        { tail -20 "$WORK/$name.consumer.log" >&2; die "$name: the consumer failed"; }
    python3 "$HERE/check.py" 2 "$WORK/$name.sent" "$WORK/$name.consumed" ||
        die "$name: messages differ"
}

# Sends COUNT messages to gRPC endpoint $1 (topic $2; one message group for fifo), then consumes
# them with the SDK's $4 consumer (simple, push or fifo) as group GrpcConsumer$3, which checks what
# it got; $3 names the run.
consume_and_check() {
    local endpoint="$1" topic="$2" name="$3" mode="$4"
    local cp="$HERE/target/classes:$(cat "$HERE/target/classpath.txt")"
    log "$name: producing $COUNT messages to $endpoint, consuming them with a $mode consumer"
    local message_group=""
    [[ "$mode" == fifo ]] && message_group="order-1"
    GRPC_MESSAGE_GROUP="$message_group" timeout 120 java -Xmx256m -cp "$cp" \
        dev.comet.interop.GrpcProducer "$endpoint" "$topic" "$COUNT" tls \
        >"$WORK/$name.sent" 2>"$WORK/$name.producer.log" ||
        { tail -20 "$WORK/$name.producer.log" >&2; die "$name: the gRPC producer failed"; }
    timeout 120 java -Xmx256m -cp "$cp" dev.comet.interop.GrpcConsumer "$mode" "$endpoint" \
        "$topic" "GrpcConsumer$name" "$WORK/$name.sent" 60 \
        >"$WORK/$name.result" 2>"$WORK/$name.consumer.log" ||
        { cat "$WORK/$name.result" >&2; tail -20 "$WORK/$name.consumer.log" >&2
          die "$name: the $mode consumer's checks failed"; }
    cat "$WORK/$name.result"
}

# Dead letters: creates group GrpcConsumer$4 with retryMaxTimes 1 through name server $1 and
# broker $2, sends COUNT messages to gRPC endpoint $3 (topic GrpcInteropDlq), and has the SDK's
# SimpleConsumer receive them without ever acking. Once the attempts run out, every message must
# be in %DLQ%GrpcConsumer$4 (read back by the remoting consumer and checked like a producer row),
# having been delivered exactly twice (attempts 1 and 2), and not be delivered again.
dlq_and_check() {
    local namesrv="$1" broker="$2" endpoint="$3" name="$4"
    local cp="$HERE/target/classes:$(cat "$HERE/target/classpath.txt")"
    local group="GrpcConsumer$name" dlq="%DLQ%GrpcConsumer$name" t0=$SECONDS
    "$COMET_BIN" topic create GrpcInteropDlq -n "$namesrv" -b "$broker" -r 4 -w 4 >/dev/null
    "$COMET_BIN" group create "$group" -n "$namesrv" -b "$broker" -r 1 >/dev/null
    log "$name: producing $COUNT messages to $endpoint, receiving them unacked (retryMaxTimes 1)"
    timeout 120 java -Xmx256m -cp "$cp" dev.comet.interop.GrpcProducer "$endpoint" \
        GrpcInteropDlq "$COUNT" tls >"$WORK/$name.sent" 2>"$WORK/$name.producer.log" ||
        { tail -20 "$WORK/$name.producer.log" >&2; die "$name: the gRPC producer failed"; }
    timeout 150 java -Xmx256m -cp "$cp" dev.comet.interop.GrpcConsumer dlq "$endpoint" \
        GrpcInteropDlq "$group" "$WORK/$name.sent" 120 "$WORK/$name.stop" \
        >"$WORK/$name.result" 2>"$WORK/$name.consumer.log" &
    local consumer=$!
    PIDS+=("$consumer")
    local deadline=$((SECONDS + 100))
    until "$COMET_BIN" topic route "$dlq" -n "$namesrv" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "$name: no $dlq topic within 100s"
        sleep 1
    done
    log "$name: reading $dlq with the remoting consumer"
    timeout 120 "$COMET_BIN" consume "$dlq" -n "$namesrv" -g "GrpcCheck$name" --from first \
        --count "$COUNT" --idle 60 --json >"$WORK/$name.consumed" 2>"$WORK/$name.dlq.log" ||
        { tail -20 "$WORK/$name.dlq.log" >&2; die "$name: reading $dlq failed"; }
    touch "$WORK/$name.stop"
    wait "$consumer" ||
        { cat "$WORK/$name.result" >&2; tail -20 "$WORK/$name.consumer.log" >&2
          die "$name: the dlq consumer's checks failed"; }
    cat "$WORK/$name.result"
    python3 "$HERE/check.py" "$COUNT" "$WORK/$name.sent" "$WORK/$name.consumed" ||
        die "$name: the dead-lettered messages differ"
    log "$name: every message dead-lettered after 2 attempts in $((SECONDS - t0))s"
}

# The ACL account of step 5, and Comet's admin account that creates its topic.
ACL_USER="grpcUser:grpcSecret123"
ACL_ADMIN="grpcAdmin:grpcAdminSecret"
ACL_TOPIC="GrpcInteropAcl"

# ACL: with the account ACL_USER, the SDK's producer sends COUNT messages to gRPC endpoint $1
# (topic ACL_TOPIC) and its SimpleConsumer consumes them (group GrpcConsumer$2, checked as in
# consume_and_check); then a producer signed with a wrong secret key and an unsigned one must both
# fail with UNAUTHORIZED (40100); $2 names the run.
acl_and_check() {
    local endpoint="$1" name="$2" access_key="${ACL_USER%%:*}" secret_key="${ACL_USER#*:}"
    local cp="$HERE/target/classes:$(cat "$HERE/target/classpath.txt")" bad ak sk
    log "$name: producing and consuming $COUNT messages signed as $access_key"
    GRPC_ACCESS_KEY="$access_key" GRPC_SECRET_KEY="$secret_key" timeout 120 java -Xmx256m \
        -cp "$cp" dev.comet.interop.GrpcProducer "$endpoint" "$ACL_TOPIC" "$COUNT" tls \
        >"$WORK/$name.sent" 2>"$WORK/$name.producer.log" ||
        { tail -20 "$WORK/$name.producer.log" >&2; die "$name: the signed producer failed"; }
    GRPC_ACCESS_KEY="$access_key" GRPC_SECRET_KEY="$secret_key" timeout 120 java -Xmx256m \
        -cp "$cp" dev.comet.interop.GrpcConsumer simple "$endpoint" "$ACL_TOPIC" \
        "GrpcConsumer$name" "$WORK/$name.sent" 60 \
        >"$WORK/$name.result" 2>"$WORK/$name.consumer.log" ||
        { cat "$WORK/$name.result" >&2; tail -20 "$WORK/$name.consumer.log" >&2
          die "$name: the signed simple consumer's checks failed"; }
    cat "$WORK/$name.result"
    for bad in wrong-secret unsigned; do
        ak="$access_key" sk="not-$secret_key"
        [[ "$bad" == unsigned ]] && ak="" sk=""
        if GRPC_ACCESS_KEY="$ak" GRPC_SECRET_KEY="$sk" timeout 120 java -Xmx256m -cp "$cp" \
            dev.comet.interop.GrpcProducer "$endpoint" "$ACL_TOPIC" 1 tls \
            >"$WORK/$name-$bad.sent" 2>"$WORK/$name-$bad.log"; then
            die "$name: a $bad producer was not refused"
        fi
        grep -q "response-code=40100" "$WORK/$name-$bad.log" ||
            { tail -20 "$WORK/$name-$bad.log" >&2
              die "$name: the $bad producer failed, but not with UNAUTHORIZED (40100)"; }
        log "$name: the $bad producer was refused with UNAUTHORIZED"
    done
}

# Step 5 on Comet: a second `comet serve` with aclEnable and a plain_acl.yml written here.
run_comet_acl() {
    local user_ak="${ACL_USER%%:*}" user_sk="${ACL_USER#*:}"
    local admin_ak="${ACL_ADMIN%%:*}" admin_sk="${ACL_ADMIN#*:}"
    cat >"$WORK/plain_acl.yml" <<YAML
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: $admin_ak
    secretKey: $admin_sk
    admin: true
  - accessKey: $user_ak
    secretKey: $user_sk
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - $ACL_TOPIC=PUB|SUB
YAML
    start_comet_serve comet-acl --set aclEnable=true --set "aclFile=$WORK/plain_acl.yml"
    COMET_ACCESS_KEY="$admin_ak" COMET_SECRET_KEY="$admin_sk" "$COMET_BIN" topic create \
        "$ACL_TOPIC" -n "$COMET_NAMESRV" -b "$COMET_BROKER" -r 4 -w 4 >/dev/null
    acl_and_check "$COMET_GRPC" comet-acl
}

# Step 5 on Apache: a second name server and proxy whose gRPC endpoint authenticates every call
# against the users of its broker, whose initial (super) user is the ACL account.
run_apache_acl() {
    log "apache-acl: starting a name server and the proxy 5.3.3 with authenticationEnabled"
    local user="{\"username\":\"${ACL_USER%%:*}\",\"password\":\"${ACL_USER#*:}\"}"
    APACHE_NAME=apache-acl APACHE_PROXY_JSON='"authenticationEnabled": true,
 "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
 "authenticationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider"' \
        apache_proxy_start \
        "authenticationMetadataProvider=org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider" \
        "authConfigPath=$WORK/apache-acl/auth" "initAuthenticationUser=$user"
    "$COMET_BIN" topic create "$ACL_TOPIC" -n "$APACHE_NAMESRV" -b "$APACHE_BROKER" \
        -r 4 -w 4 >/dev/null
    acl_and_check "$APACHE_GRPC" apache-acl
}

# start_comet_serve <name> [serve option...]: starts `comet serve` on ephemeral ports (data, ready
# file and log named after <name> in the work directory), waits for its ready file and sets
# COMET_NAMESRV, COMET_BROKER and COMET_GRPC to its addresses.
start_comet_serve() {
    local name="$1" ready="$WORK/$1-ready.json"
    shift
    log "$name: starting comet serve $*"
    "$COMET_BIN" serve --namesrv-listen 127.0.0.1:0 --broker-listen 127.0.0.1:0 \
        --data-dir "$WORK/$name-data" --ready-file "$ready" "$@" >"$WORK/$name.log" 2>&1 &
    PIDS+=($!)
    local deadline=$((SECONDS + WAIT))
    until [[ -s "$ready" ]]; do
        ((SECONDS < deadline)) || die "$name: comet serve wrote no ready file"
        sleep 0.2
    done
    local field
    field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$ready" "$1"; }
    COMET_NAMESRV="$(field namesrv)" COMET_BROKER="$(field broker)" COMET_GRPC="$(field grpc)"
}

run_comet() {
    [[ -x "$COMET_BIN" ]] || (cd "$ROOT" && cargo build -q -p comet)
    if [[ -n "$ACL_ONLY" ]]; then
        run_comet_acl
        return
    fi
    start_comet_serve comet --set transactionCheckInterval="$TX_CHECK_MS"
    local namesrv="$COMET_NAMESRV" broker="$COMET_BROKER" grpc="$COMET_GRPC"
    if [[ -z "$CONSUMERS_ONLY" ]]; then
        "$COMET_BIN" topic create GrpcInterop -n "$namesrv" -b "$broker" -r 4 -w 4 >/dev/null
        "$COMET_BIN" topic create GrpcInteropPlain -n "$namesrv" -b "$broker" -r 4 -w 4 >/dev/null
        "$COMET_BIN" topic create GrpcInteropDelay -n "$namesrv" -b "$broker" -r 4 -w 4 \
            --message-type DELAY >/dev/null
        produce_and_check "$namesrv" "$grpc" GrpcInterop comet tls
        produce_and_check "$namesrv" "$grpc" GrpcInteropPlain comet-plain plain
        "$COMET_BIN" topic create GrpcInteropTx -n "$namesrv" -b "$broker" -r 4 -w 4 \
            --message-type TRANSACTION >/dev/null
        produce_and_check "$namesrv" "$grpc" GrpcInteropDelay comet-delay tls "$DELAY_MS"
        produce_tx_and_check "$namesrv" "$grpc" GrpcInteropTx comet-tx tls
    fi
    "$COMET_BIN" topic create GrpcInteropSimple -n "$namesrv" -b "$broker" -r 4 -w 4 >/dev/null
    "$COMET_BIN" topic create GrpcInteropPush -n "$namesrv" -b "$broker" -r 4 -w 4 >/dev/null
    consume_and_check "$grpc" GrpcInteropSimple comet-simple simple
    consume_and_check "$grpc" GrpcInteropPush comet-push push
    "$COMET_BIN" topic create GrpcInteropFifo -n "$namesrv" -b "$broker" -r 4 -w 4 \
        --message-type FIFO >/dev/null
    "$COMET_BIN" group create GrpcConsumercomet-fifo -n "$namesrv" -b "$broker" -o true >/dev/null
    consume_and_check "$grpc" GrpcInteropFifo comet-fifo fifo
    dlq_and_check "$namesrv" "$broker" "$grpc" comet-dlq
    run_comet_acl
}

run_apache() {
    if [[ -n "$ACL_ONLY" ]]; then
        run_apache_acl
        return
    fi
    log "apache: starting the name server and the proxy 5.3.3 (local mode)"
    apache_proxy_start "transactionCheckInterval=$TX_CHECK_MS"
    local ns="$APACHE_NAMESRV" broker="$APACHE_BROKER" grpc="$APACHE_GRPC"
    if [[ -z "$CONSUMERS_ONLY" ]]; then
        "$COMET_BIN" topic create GrpcInterop -n "$ns" -b "$broker" \
            -r 4 -w 4 >/dev/null
        "$COMET_BIN" topic create GrpcInteropDelay -n "$ns" \
            -b "$broker" -r 4 -w 4 --message-type DELAY >/dev/null
        produce_and_check "$ns" "$grpc" GrpcInterop apache tls
        produce_and_check "$ns" "$grpc" GrpcInteropDelay apache-delay \
            tls "$DELAY_MS"
        "$COMET_BIN" topic create GrpcInteropTx -n "$ns" -b "$broker" \
            -r 4 -w 4 --message-type TRANSACTION >/dev/null
        produce_tx_and_check "$ns" "$grpc" GrpcInteropTx apache-tx tls
    fi
    for topic in GrpcInteropSimple GrpcInteropPush; do
        "$COMET_BIN" topic create "$topic" -n "$ns" \
            -b "$broker" -r 4 -w 4 >/dev/null
    done
    consume_and_check "$grpc" GrpcInteropSimple apache-simple simple
    consume_and_check "$grpc" GrpcInteropPush apache-push push
    "$COMET_BIN" topic create GrpcInteropFifo -n "$ns" \
        -b "$broker" -r 4 -w 4 --message-type FIFO >/dev/null
    "$COMET_BIN" group create GrpcConsumerapache-fifo -n "$ns" \
        -b "$broker" -o true >/dev/null
    consume_and_check "$grpc" GrpcInteropFifo apache-fifo fifo
    dlq_and_check "$ns" "$broker" "$grpc" apache-dlq
    run_apache_acl
}

log "building the gRPC producer (rocketmq-client-java 5.0.8)"
mvn -q -B -f "$HERE/pom.xml" compile dependency:build-classpath \
    -Dmdep.outputFile="$HERE/target/classpath.txt" >&2
if [[ "$COMET" != 0 ]]; then
    run_comet
fi
if [[ "$APACHE" != 0 ]]; then
    run_apache
fi
if [[ "$APACHE" != 0 && "$COMET" != 0 && -z "$CONSUMERS_ONLY$ACL_ONLY" ]]; then
    python3 "$HERE/check.py" keys "$WORK/comet.consumed" "$WORK/apache.consumed" ||
        die "Comet and Apache's proxy store different properties"
    python3 "$HERE/check.py" keys "$WORK/comet-delay.consumed" "$WORK/apache-delay.consumed" ||
        die "Comet and Apache's proxy store different properties on timer messages"
    python3 "$HERE/check.py" keys "$WORK/comet-tx.consumed" "$WORK/apache-tx.consumed" ||
        die "Comet and Apache's proxy store different properties on transactional messages"
fi
if [[ "$APACHE" != 0 && "$COMET" != 0 && -z "$ACL_ONLY" ]]; then
    python3 "$HERE/check.py" keys "$WORK/comet-dlq.consumed" "$WORK/apache-dlq.consumed" ||
        die "Comet and Apache's proxy store different properties on dead-lettered messages"
fi
log "passed"
