#!/usr/bin/env bash
# The whole test suite, as README's second command and .ci/run run it.
# Installs nothing by hand-off: every step below fetches what it needs from the package registries.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test (unit, property, end-to-end) =="
cargo test --workspace --locked

if [ -x interop/tests.sh ]; then
    echo "== interop tests against real RocketMQ peers =="
    interop/tests.sh
fi
