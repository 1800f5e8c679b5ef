# Starting and stopping the two targets the interop suites compare: `comet serve` and Apache
# RocketMQ's name server and broker (interop/apache/run.sh). Sourced; the caller sets
#   WORK    work directory (data, logs)       COMET   the comet binary
#   APACHE  interop/apache/run.sh             WAIT    seconds any single wait may take
# and defines `die`. The *_start functions set NAMESRV; comet_serve_start sets SERVE_PID.
# shellcheck shell=bash
# NAMESRV and SERVE_PID are set here for the caller.
# shellcheck disable=SC2034

# wait_for <what> <command...>: polls until the command succeeds, or dies after $WAIT seconds.
wait_for() {
    local what=$1 deadline=$((SECONDS + WAIT))
    shift
    until "$@"; do
        ((SECONDS < deadline)) || die "$what: not within ${WAIT}s"
        sleep 0.3
    done
}

# comet_serve_start: `comet serve` on free loopback ports, data under $WORK/data.
comet_serve_start() {
    rm -rf "$WORK/data" "$WORK/ready.json"
    comet_serve_launch
}

# comet_serve_restart: stops `comet serve` and starts it again on the same data directory (on new
# free ports).
comet_serve_restart() {
    comet_serve_stop
    comet_serve_launch
}

# comet_serve_launch: starts `comet serve` on $WORK/data as it is, and waits until it is ready.
comet_serve_launch() {
    "$COMET" serve --namesrv-listen 127.0.0.1:0 --broker-listen 127.0.0.1:0 --data-dir "$WORK/data" \
        --ready-file "$WORK/ready.json" >"$WORK/serve.log" 2>&1 &
    SERVE_PID=$!
    wait_for "comet serve ready" test -s "$WORK/ready.json"
    NAMESRV="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["namesrv"])' "$WORK/ready.json")"
}

comet_serve_stop() {
    [[ -z "${SERVE_PID:-}" ]] || kill -TERM "$SERVE_PID" 2>/dev/null || true
    [[ -z "${SERVE_PID:-}" ]] || wait "$SERVE_PID" 2>/dev/null || true
    SERVE_PID=""
    rm -f "$WORK/ready.json"
}

# apache_start: Apache's name server and broker under $WORK/apache (run.sh's environment knobs,
# e.g. CLUSTER_NAME, apply).
apache_start() {
    "$APACHE" start "$WORK/apache" >"$WORK/apache-start.out" 2>&1 || die "Apache RocketMQ did not start"
    NAMESRV="$(sed -n 's/^NAMESRV_ADDR=//p' "$WORK/apache/env")"
}

# apache_restart_broker: stops Apache's broker and starts it again from its config file (the name
# server keeps running); NAMESRV does not change.
apache_restart_broker() {
    "$APACHE" restart-broker "$WORK/apache" >>"$WORK/apache-start.out" 2>&1 || die "Apache's broker did not restart"
}

apache_stop() {
    "$APACHE" stop "$WORK/apache" >/dev/null 2>&1 || true
    rm -rf "$WORK/apache"
}
