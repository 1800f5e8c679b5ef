#!/usr/bin/env bash
# Checks Comet's RocketMQ v2 .proto files (crates/grpc-proto/proto) against the contract Apache's
# clients and proxy are built on: the descriptors embedded in rocketmq-proto 2.0.4's generated Java
# classes. Both sides are dumped as JSON (messages with every field's name, number, type, label,
# proto3 optional flag, type name and oneof; enums with their values; services with their methods'
# input/output types and streaming flags) and compare.py prints and fails on every difference.
#
#   interop/grpc-descriptors/run.sh
#
# Needs java 17+, mvn (Maven resolves rocketmq-proto and protobuf-java into ~/.m2) and cargo.
# KEEP_WORKDIR=1 keeps the two dumps.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
WORK="$(mktemp -d -t comet-grpc-descriptors.XXXXXX)"
cleanup() { [[ -n "${KEEP_WORKDIR:-}" ]] && echo "grpc-descriptors: dumps in $WORK" || rm -rf "$WORK"; }
trap cleanup EXIT

cp_file="$HERE/target/classpath.txt"
mvn -q -B -f "$HERE/pom.xml" compile dependency:build-classpath -Dmdep.outputFile="$cp_file" >&2
java -cp "$HERE/target/classes:$(cat "$cp_file")" dev.comet.interop.DumpDescriptors >"$WORK/apache.json"

(cd "$ROOT" && cargo run -q -p comet-grpc-proto --example dump_descriptors) >"$WORK/comet.json"

python3 "$HERE/compare.py" "$WORK/apache.json" "$WORK/comet.json"
