#!/usr/bin/env bash
# Store compatibility between Apache RocketMQ 5.3.3 and Comet, both directions, on loopback.
#
#   1. Apache -> Comet: a real Apache broker (1 MiB CommitLog segments) is filled by the Java producer,
#      which writes a manifest of its send results; a copy of the live store is taken (the crash image:
#      Apache's abort file is in it), Apache is stopped cleanly, and Comet's MessageStore opens both
#      directories (normal recovery, abnormal recovery) and dumps every queue and index lookup
#      (store_dump); compare.py checks every acknowledged message against the dump.
#   2. Comet -> Apache: Comet's MessageStore writes a store (store_write) with the future broker's
#      address as store host, plus config/topics.json and a manifest; Apache is started on that
#      directory and the Java consumer pulls every queue from offset 0 and checks it against the
#      manifest, then looks messages up through Apache's index and by offset message id; finally
#      compare.py checks Apache left every Comet-written ConsumeQueue/index file and the CommitLog as is.
#
# Exits non-zero on any mismatch. Prints a summary with the counts compared per direction.
#
#   interop/store-compat/run.sh
#
# Environment knobs (defaults in brackets):
#   STORE_COMPAT_COUNT [2000]         messages per direction
#   STORE_COMPAT_SEED [1]             seed of the message bodies (both producers)
#   STORE_COMPAT_SEGMENT [1048576]    CommitLog segment size for Apache and Comet
#   STORE_COMPAT_WORKDIR [mktemp]     where the stores, manifests and dumps go; removed at the end
#                                     unless the run failed or STORE_COMPAT_KEEP=1
#   CARGO_TARGET_DIR                  honoured by cargo as usual
# Knobs of interop/apache/run.sh (JAVA_HEAP, START_TIMEOUT, ROCKETMQ_VERSION...) pass through.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
APACHE="$REPO/interop/apache/run.sh"
COUNT="${STORE_COMPAT_COUNT:-2000}"
SEED="${STORE_COMPAT_SEED:-1}"
SEGMENT="${STORE_COMPAT_SEGMENT:-1048576}"
BIND_IP="${BIND_IP:-127.0.0.1}"
export BIND_IP

die() { echo "store-compat: $*" >&2; exit 1; }
step() { echo "== store-compat: $* ($((SECONDS - T0))s)"; }

T0=$SECONDS
if [[ -n "${STORE_COMPAT_WORKDIR:-}" ]]; then
    WORK="$STORE_COMPAT_WORKDIR"
    mkdir -p "$WORK"
    [[ -z "$(ls -A "$WORK")" ]] || die "$WORK is not empty"
else
    WORK="$(mktemp -d "${TMPDIR:-/tmp}/store-compat.XXXXXX")"
fi
WORK="$(cd "$WORK" && pwd)"
A2C="$WORK/apache-to-comet"
C2A="$WORK/comet-to-apache"
STARTED=()
OK=no

cleanup() {
    local rc=$?
    for dir in "${STARTED[@]}"; do
        [[ -f "$dir/broker.pid" || -f "$dir/namesrv.pid" ]] && "$APACHE" kill "$dir" >/dev/null 2>&1 || true
    done
    if [[ $OK == yes && "${STORE_COMPAT_KEEP:-0}" != 1 ]]; then
        rm -rf "$WORK"
    else
        echo "store-compat: work directory kept: $WORK (Apache logs: */broker.out, */logs/rocketmqlogs)" >&2
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for tool in java mvn python3 cargo; do
    command -v "$tool" >/dev/null || die "$tool is required (interop/tests.sh installs the JDK and Maven)"
done

# --- builds -----------------------------------------------------------------------------------
step "building the Java client and the store examples"
JAVA_DIR="$HERE/java"
JAVA_CP_FILE="$JAVA_DIR/target/classpath.txt"
if [[ ! -s "$JAVA_CP_FILE" || -n "$(find "$JAVA_DIR/src" "$JAVA_DIR/pom.xml" -newer "$JAVA_CP_FILE" -print -quit)" ]]; then
    mvn -q -B -f "$JAVA_DIR/pom.xml" compile dependency:build-classpath -Dmdep.outputFile="$JAVA_CP_FILE" >&2 \
        || die "maven could not build $JAVA_DIR"
    touch "$JAVA_CP_FILE"
fi
JAVA_CP="$JAVA_DIR/target/classes:$(cat "$JAVA_CP_FILE")"
# Client logs go under the work directory, not ~/logs.
java_client() { java -Xms128m -Xmx512m -Duser.home="$WORK/java-home" -cp "$JAVA_CP" dev.comet.storecompat.StoreCompat "$@"; }

(cd "$REPO" && cargo build --locked -q -p comet-store --example store_dump && cargo build --locked -q -p comet-broker --example store_write)
EXAMPLES="$(cd "$REPO" && cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/examples"
[[ -x "$EXAMPLES/store_dump" && -x "$EXAMPLES/store_write" ]] || die "store examples not found in $EXAMPLES"

FAILED=0
check() { "$@" || FAILED=$((FAILED + 1)); }

# --- 1. Apache -> Comet -------------------------------------------------------------------------
step "Apache -> Comet: starting Apache with ${SEGMENT}-byte CommitLog segments"
STARTED+=("$A2C")
COMMITLOG_FILE_SIZE="$SEGMENT" "$APACHE" start "$A2C" >/dev/null
# shellcheck disable=SC1091
NAMESRV_ADDR="$(. "$A2C/env" && echo "$NAMESRV_ADDR")"
BROKER_NAME="$(. "$A2C/env" && echo "$BROKER_NAME")"
step "Apache -> Comet: producing $COUNT messages"
java_client produce "$NAMESRV_ADDR" "$BROKER_NAME" "$WORK/a2c-manifest.jsonl" "$COUNT" "$SEED"

# The crash image: the store as the running broker has it (page cache included), abort file and all.
CRASH="$WORK/a2c-crash-store"
mkdir -p "$CRASH"
for part in commitlog consumequeue index config checkpoint abort; do
    if [[ -e "$A2C/store/$part" ]]; then cp -a --sparse=always "$A2C/store/$part" "$CRASH/"; fi
done
[[ -f "$CRASH/abort" ]] || die "the running Apache broker has no abort file: the crash image would not be abnormal"

step "Apache -> Comet: stopping Apache cleanly"
"$APACHE" stop "$A2C"
[[ ! -f "$A2C/store/abort" ]] || die "Apache left its abort file after a clean stop"
SEGMENTS=$(find "$A2C/store/commitlog" -type f | wc -l)
((SEGMENTS >= 3)) || die "only $SEGMENTS CommitLog segment(s): the test needs several (BLANK records)"

python3 "$HERE/compare.py" keys "$WORK/a2c-manifest.jsonl" >"$WORK/a2c-keys.tsv"
step "Apache -> Comet: Comet opens Apache's store (normal recovery, $SEGMENTS segments)"
check "$EXAMPLES/store_dump" --root "$A2C/store" --mapped-file-size "$SEGMENT" \
    --query-keys "$WORK/a2c-keys.tsv" --out "$WORK/a2c-dump-normal.jsonl"
check python3 "$HERE/compare.py" apache-to-comet "$WORK/a2c-manifest.jsonl" "$WORK/a2c-dump-normal.jsonl" --recovery normal
step "Apache -> Comet: Comet opens the crash image (abnormal recovery)"
check "$EXAMPLES/store_dump" --root "$CRASH" --mapped-file-size "$SEGMENT" \
    --query-keys "$WORK/a2c-keys.tsv" --out "$WORK/a2c-dump-abnormal.jsonl"
check python3 "$HERE/compare.py" apache-to-comet "$WORK/a2c-manifest.jsonl" "$WORK/a2c-dump-abnormal.jsonl" --recovery abnormal

# --- 2. Comet -> Apache -------------------------------------------------------------------------
# The broker's port must be known before Comet writes: it is the store host of every record.
read -r NAMESRV_PORT BROKER_PORT < <(python3 - "$BIND_IP" <<'PY'
import socket, sys
host = sys.argv[1]
def free(port):
    s = socket.socket()
    try:
        s.bind((host, port)); return True
    except OSError:
        return False
    finally:
        s.close()
def any_port():
    s = socket.socket(); s.bind((host, 0)); p = s.getsockname()[1]; s.close(); return p
namesrv = any_port()
for _ in range(200):
    p = any_port()
    if p > 1024 and p != namesrv and all(free(q) for q in (p - 2, p, p + 1)) and namesrv not in (p - 2, p + 1):
        print(namesrv, p); break
else:
    sys.exit("no free broker port triple found")
PY
)
step "Comet -> Apache: Comet writes $COUNT messages (store host $BIND_IP:$BROKER_PORT)"
mkdir -p "$C2A"
WRITE_OUT="$("$EXAMPLES/store_write" --root "$C2A/store" --mapped-file-size "$SEGMENT" \
    --store-host "$BIND_IP:$BROKER_PORT" --manifest "$WORK/c2a-manifest.jsonl" --count "$COUNT" --seed "$SEED")"
echo "$WRITE_OUT"
CL_END="$(sed -n 's/.*CommitLog end \([0-9]*\),.*/\1/p' <<<"$WRITE_OUT")"
[[ -n "$CL_END" ]] || die "store_write did not report its CommitLog end"
python3 "$HERE/compare.py" fingerprint "$C2A/store" "$WORK/c2a-fingerprint.json" "$CL_END"

step "Comet -> Apache: starting Apache on Comet's store"
STARTED+=("$C2A")
NAMESRV_PORT="$NAMESRV_PORT" BROKER_PORT="$BROKER_PORT" COMMITLOG_FILE_SIZE="$SEGMENT" "$APACHE" start "$C2A" >/dev/null
NAMESRV_ADDR="$(. "$C2A/env" && echo "$NAMESRV_ADDR")"
step "Comet -> Apache: Apache's consumer reads every queue"
check java_client consume "$NAMESRV_ADDR" "$BROKER_NAME" "$WORK/c2a-manifest.jsonl"
"$APACHE" stop "$C2A"
check python3 "$HERE/compare.py" fingerprint-check "$WORK/c2a-fingerprint.json" "$C2A/store"

step "done"
if ((FAILED > 0)); then
    echo "store-compat: $FAILED check(s) FAILED"
    exit 1
fi
OK=yes
echo "store-compat: all checks passed in $((SECONDS - T0))s"
