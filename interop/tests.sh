#!/usr/bin/env bash
# Interop tests against real Apache RocketMQ peers; scripts/test.sh runs this file when it is executable.
#
# A fresh CI machine has Rust but maybe not the JVM tools: if `java` (17 or newer) or `mvn` is missing,
# they are installed from Debian's packages (the machine runs as root). Maven then fetches the Apache
# RocketMQ jars from Maven Central into ~/.m2 on first use.
#
# Suites run in order; every suite runs even if an earlier one failed, and the last line counts them.
set -euo pipefail
cd "$(dirname "$0")/.."

# Oldest JDK the interop Maven projects compile for (maven.compiler.release).
MIN_JAVA_MAJOR=17

java_major() {
    # `java -version` prints e.g. openjdk version "17.0.15" 2025-04-15 (or "1.8.0_x" for Java 8).
    java -version 2>&1 | sed -n 's/.* version "\([0-9]*\)\(\.\([0-9]*\)\)\{0,1\}.*/\1 \3/p' | head -1 |
        awk '{ print ($1 == 1) ? $2 : $1 }'
}

ensure_tools() {
    local missing=()
    if ! command -v java >/dev/null || (($(java_major || echo 0) < MIN_JAVA_MAJOR)); then
        missing+=(java)
    fi
    command -v mvn >/dev/null || missing+=(mvn)
    command -v python3 >/dev/null || missing+=(python3)
    command -v go >/dev/null || missing+=(go)
    command -v openssl >/dev/null || missing+=(openssl)
    ((${#missing[@]} == 0)) && return 0
    echo "interop: installing ${missing[*]} (apt-get)"
    command -v apt-get >/dev/null || { echo "interop: no apt-get to install ${missing[*]}" >&2; return 1; }
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update -q
    local jdk=openjdk-17-jdk-headless
    # Newer Debian releases dropped 17; any default JDK of 17 or later will do.
    apt-cache show "$jdk" >/dev/null 2>&1 || jdk=default-jdk-headless
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q maven "$jdk" python3 golang-go openssl
    command -v java >/dev/null && command -v mvn >/dev/null && command -v python3 >/dev/null &&
        command -v go >/dev/null && command -v openssl >/dev/null
}

ensure_tools

SUITES=(
    interop/store-compat/run.sh
    interop/matrix.sh
    interop/comet-client/run.sh
    interop/ha/run.sh
    interop/failover-read/run.sh
    interop/mqadmin/run.sh
    interop/mqadmin/daily.sh
    interop/mqadmin/broker_config.sh
    interop/cli/run.sh
    interop/metrics/run.sh
    interop/exporter/run.sh
    interop/grpc-descriptors/run.sh
    interop/grpc/run.sh
    interop/rust-sdk/run.sh
    interop/console/run.sh
)
# The two Rust peers (interop/rust-peer for the matrix, interop/rust-sdk) compile their SDKs'
# dependency trees, about 4 min on 2 cores from a fresh clone. They build in the background
# while the first suites run (those mostly wait on JVMs), with the commands and target
# directories the suites use, so the suites' own builds find them done (cargo's lock makes a
# suite wait for a build still under way). A failure here is reported by the suite's own build.
prebuild_rust_peers() {
    local peer_target="${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/rust-peer}"
    peer_target="${peer_target:-$PWD/interop/rust-peer/target}"
    local sdk_target="${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/rust-sdk}"
    sdk_target="${sdk_target:-$PWD/interop/rust-sdk/target}"
    (cd interop/rust-peer && CARGO_TARGET_DIR="$peer_target" cargo build -q --locked) || true
    (cd interop/rust-sdk && CARGO_TARGET_DIR="$sdk_target" cargo build -q --locked) || true
}
prebuild_rust_peers >"${TMPDIR:-/tmp}/interop-rust-prebuild.log" 2>&1 &
PREBUILD_PID=$!

passed=0
failed=0
for suite in "${SUITES[@]}"; do
    echo "== interop: $suite"
    if "$suite"; then
        passed=$((passed + 1))
    else
        echo "interop: $suite FAILED" >&2
        failed=$((failed + 1))
    fi
done
wait "$PREBUILD_PID" 2>/dev/null || true
# The Rust peers' builds (interop/rust-peer, ~1 GB; interop/rust-sdk) are not needed again in a
# one-shot CI run.
if [[ -n "${CI:-}" && -z "${CARGO_TARGET_DIR:-}" ]]; then rm -rf interop/rust-peer/target interop/rust-sdk/target; fi
echo "interop: $passed passed, $failed failed"
((failed == 0))
