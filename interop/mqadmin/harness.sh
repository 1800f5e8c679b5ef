# What the mqadmin suites share: the cleanup and failure report, the builds (comet, and the
# rocketmq-tools $VERSION classpath of interop/java), and mqadmin runs — `mq` starts one in the
# background, `settle` waits for every started one and checks it, `expect`/`refute` read its
# output. Sourced after the suite sets SUITE (its name in messages), REPO, WORK, VERSION, WAIT and
# FAILED, and, when it runs clients, defines stop_clients.
# shellcheck shell=bash

cleanup() {
    local rc=$?
    if declare -F stop_clients >/dev/null; then stop_clients; fi
    [[ -z "$SERVE_PID" ]] || kill -TERM "$SERVE_PID" 2>/dev/null || true
    [[ -z "$SERVE_PID" ]] || wait "$SERVE_PID" 2>/dev/null || true
    if [[ -d "$WORK/apache" ]]; then "$APACHE" stop "$WORK/apache" >/dev/null 2>&1 || true; fi
    if [[ $rc -eq 0 && $FAILED == no && "${MQADMIN_KEEP:-0}" != 1 ]]; then
        rm -rf "$WORK"
    else
        echo "$SUITE: work directory kept: $WORK" >&2
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
    FAILED=yes
    local f
    for f in "$WORK"/serve.log "$WORK"/apache/broker.out "$WORK"/out/*.out; do
        [[ -f "$f" ]] || continue
        echo "---- $f" >&2
        tail -20 "$f" >&2
    done
    echo "$SUITE: FAIL: $*" >&2
    exit 1
}

for tool in java mvn python3 cargo; do
    command -v "$tool" >/dev/null || die "$tool is required (interop/tests.sh installs the JDK and Maven)"
done

# --- builds -----------------------------------------------------------------------------------
step "building comet and the rocketmq-tools $VERSION classpath"
(cd "$REPO" && cargo build -q -p comet) || die "cargo build -p comet failed"
COMET="${CARGO_TARGET_DIR:-$REPO/target}/debug/comet"
[[ "$COMET" == /* ]] || COMET="$REPO/$COMET"
[[ -x "$COMET" ]] || die "no comet binary at $COMET"
JAVA_DIR="$REPO/interop/java"
CP_FILE="$JAVA_DIR/target/$VERSION/classpath.txt"
if [[ ! -s "$CP_FILE" || ! -d "$JAVA_DIR/target/$VERSION/classes" ||
    -n "$(find "$JAVA_DIR/src" "$JAVA_DIR/pom.xml" -newer "$CP_FILE" -print -quit)" ]]; then
    mkdir -p "$(dirname "$CP_FILE")"
    mvn -q -B -f "$JAVA_DIR/pom.xml" -Drocketmq.client.version="$VERSION" compile dependency:build-classpath \
        -Dmdep.outputFile="$CP_FILE" >&2 || die "maven could not build $JAVA_DIR for $VERSION"
    touch "$CP_FILE"
fi
JAVA_CP="$(cat "$CP_FILE")"

# --- mqadmin ----------------------------------------------------------------------------------
# mq <name> <args...>: starts MQAdminStartup in the background, output in out/<name>.out;
# `settle` waits for every started command and checks it.
STARTED=()
mq() {
    local name=$1
    shift
    mkdir -p "$WORK/out"
    printf '%s\n' "$*" >"$WORK/out/$name.cmd"
    (cd "$WORK" && exec timeout "$WAIT" java -Xms64m -Xmx256m -XX:TieredStopAtLevel=1 \
        -Drocketmq.namesrv.addr="$NAMESRV" -cp "$JAVA_CP" org.apache.rocketmq.tools.command.MQAdminStartup \
        "$@" -n "$NAMESRV") >"$WORK/out/$name.out" 2>&1 &
    echo $! >"$WORK/out/$name.pid"
    STARTED+=("$name")
}

# settle: every started command exited 0 and printed no exception, except commands named
# refused_*, which are expected to fail and are checked by their output.
settle() {
    local name rc
    for name in "${STARTED[@]}"; do
        rc=0
        wait "$(cat "$WORK/out/$name.pid")" || rc=$?
        ((rc == 0)) || die "mqadmin $(cat "$WORK/out/$name.cmd") exited $rc"
        if [[ $name != refused_* ]] && grep -qE 'Exception|CODE: [0-9]+' "$WORK/out/$name.out"; then
            die "mqadmin $(cat "$WORK/out/$name.cmd") failed: $(grep -m1 -E 'Exception|CODE:' "$WORK/out/$name.out")"
        fi
    done
    STARTED=()
}

# run <name> <args...>: one command, waited for and checked.
run() {
    mq "$@"
    settle
}

# expect <name> <extended regex>: the output of <name> has a line matching it.
expect() {
    grep -qE -- "$2" "$WORK/out/$1.out" || die "$1 ($(cat "$WORK/out/$1.cmd")): no line matches /$2/"
}

# refute <name> <extended regex>: no line of the output of <name> matches it.
refute() {
    ! grep -qE -- "$2" "$WORK/out/$1.out" || die "$1 ($(cat "$WORK/out/$1.cmd")): a line matches /$2/"
}
