#!/usr/bin/env bash
# (Re)seeds fuzz/corpus/<target>/ from the golden fixtures captured from real Java and Go peers
# (crates/protocol/tests/fixtures): whole frames, JSON and binary headers, typed-header ext fields,
# pull bodies (record streams), batch bodies, properties strings and JSON bodies. Idempotent:
# seeds are named by a hash of their content.
set -euo pipefail
cd "$(dirname "$0")"
cargo run --release --example seed -- ../crates/protocol/tests/fixtures corpus
