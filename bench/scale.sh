#!/usr/bin/env bash
# Cost curves as work grows, Comet beside Apache RocketMQ on this box, one load generator for both
# (`comet bench`). Writes a table per curve into bench/results.md (between the "scale.sh
# results" markers) and a plot per curve into docs/images/ (gnuplot, installed when missing).
#
#   bench/scale.sh [--brokers "comet apache"] [--points "100 1000 10000 50000"] [--no-write]
#
# S1 topics: one broker with an empty store; one admin connection creates 8-queue topics one
# request after another (UPDATE_AND_CREATE_TOPIC) until the table holds each point's count (the
# points are cumulative: 100, then 900 more, ...). Per point: topics created per second and the
# create request's p50/p99, how long after the last create the name server routed it, route
# lookups through the name server (p50/p99, over the whole table) and the broker's RSS.
# APACHE_MAX_POINT caps Apache's curve (its creates slow down as the table grows: 10,000 topics
# take it minutes); Comet runs every point.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"

POINTS="${POINTS:-100 1000 10000 50000}"
APACHE_MAX_POINT="${APACHE_MAX_POINT:-10000}"
LOOKUPS="${LOOKUPS:-2000}"            # route lookups per point
SIZE="${SIZE:-1024}"
QUEUES="${QUEUES:-8}"
GEN_THREADS="${GEN_THREADS:-}"
JAVA_HEAP="${JAVA_HEAP:-1g}"
ROCKETMQ_VERSION="${ROCKETMQ_VERSION:-5.3.3}"
START_PATIENCE="${START_PATIENCE:-180}"
WORK="${WORK:-$(mktemp -d /tmp/comet-scale.XXXXXX)}"
OUT="${OUT:-$ROOT/bench/results.md}"
IMAGES="${IMAGES:-$ROOT/docs/images}"
BROKERS="comet apache"
WRITE=yes

while (($#)); do
    case "$1" in
    --brokers) BROKERS="$2"; shift ;;
    --points) POINTS="$2"; shift ;;
    --no-write) WRITE=no ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "scale.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

die() { echo "scale.sh: $*" >&2; exit 1; }
log() { echo "[scale $(date +%H:%M:%S)] $*" >&2; }
mkdir -p "$WORK"
RESULTS="$WORK/results.tsv"   # broker  curve-point  key  value
: >"$RESULTS"
COMMANDS="$WORK/commands.txt"
: >"$COMMANDS"

if [[ -z "${COMET_BIN:-}" ]]; then
    log "building comet (release)"
    (cd "$ROOT" && cargo build --release --locked -p comet >&2)
    COMET_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/comet"
fi
[[ -x "$COMET_BIN" ]] || die "no comet binary at $COMET_BIN"

# shellcheck source=bench/lib.sh
source "$HERE/lib.sh"

cleanup() {
    [[ -n "${BROKER_PID:-}" ]] && kill -KILL "$BROKER_PID" 2>/dev/null || true
    [[ -d "$WORK/apache/rmq" ]] && "$ROOT/interop/apache/run.sh" kill "$WORK/apache/rmq" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# s1 <broker>: the topic curve on one broker.
s1() {
    local broker=$1 dir="$WORK/$1" start=0 p out
    start_broker "$broker" ASYNC_FLUSH "$dir"
    wait_ready "$broker" S1 "$dir"
    cp "$dir/cmdline" "$WORK/cmdline-$broker"
    for p in $POINTS; do
        if [[ $broker == apache ]] && ((p > APACHE_MAX_POINT)); then
            log "apache S1: points past APACHE_MAX_POINT=$APACHE_MAX_POINT are left out"
            break
        fi
        log "$broker S1: creating topics $start..$((p - 1))"
        out="$dir/s1-$p.json"
        bench "$broker" "S1-$p" "$out" topics -n "$NAMESRV" --start "$start" --count "$((p - start))" \
            --queues "$QUEUES" --lookups "$LOOKUPS"
        record "$broker" "S1-$p" topics_per_sec "$(json_get "$out" topics_per_sec)"
        record "$broker" "S1-$p" create_p50_ms "$(json_get "$out" create_request_latency.p50_us)"
        record "$broker" "S1-$p" create_p99_ms "$(json_get "$out" create_request_latency.p99_us)"
        record "$broker" "S1-$p" routable_ms "$(json_get "$out" routable_after_ms)"
        record "$broker" "S1-$p" lookup_p50_ms "$(json_get "$out" route_lookup_latency.p50_us)"
        record "$broker" "S1-$p" lookup_p99_ms "$(json_get "$out" route_lookup_latency.p99_us)"
        record "$broker" "S1-$p" rss_mib "$(($(awk '/^VmRSS:/ {print $2}' "/proc/$BROKER_PID/status") / 1024))"
        start=$p
    done
    stop_broker "$broker" S1 "$dir"
}

for b in $BROKERS; do
    s1 "$b"
done

# ---- report ---------------------------------------------------------------------------------------
python3 - "$RESULTS" "$WORK/s1.md" "$WORK/s1.dat" "$POINTS" <<'PY'
import sys
rows, md, dat, points = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
v = {}
for line in open(rows):
    b, w, k, x = line.rstrip("\n").split("\t")
    v[(b, w, k)] = x
def f(b, p, k, scale=1.0, digits=1):
    x = v.get((b, f"S1-{p}", k), "")
    return "–" if x == "" else f"{float(x) * scale:.{digits}f}"
def ratio(p, k, better_high=True):
    c, a = v.get(("comet", f"S1-{p}", k), ""), v.get(("apache", f"S1-{p}", k), "")
    if not c or not a or float(c) == 0 or float(a) == 0:
        return "–"
    return f"{float(c) / float(a):.1f}×" if better_high else f"{float(a) / float(c):.1f}×"
with open(md, "w") as out:
    out.write("| topics | Comet topics/s | Apache topics/s | Comet / Apache | create p99 ms (Comet / Apache) "
              "| route lookup p50 / p99 ms, Comet | route lookup p50 / p99 ms, Apache | RSS MiB (Comet / Apache) |\n")
    out.write("|---|---|---|---|---|---|---|---|\n")
    for p in points:
        out.write(f"| {int(p):,} | {f('comet', p, 'topics_per_sec')} | {f('apache', p, 'topics_per_sec')} "
                  f"| {ratio(p, 'topics_per_sec')} "
                  f"| {f('comet', p, 'create_p99_ms', 1e-3, 2)} / {f('apache', p, 'create_p99_ms', 1e-3, 2)} "
                  f"| {f('comet', p, 'lookup_p50_ms', 1e-3, 3)} / {f('comet', p, 'lookup_p99_ms', 1e-3, 3)} "
                  f"| {f('apache', p, 'lookup_p50_ms', 1e-3, 3)} / {f('apache', p, 'lookup_p99_ms', 1e-3, 3)} "
                  f"| {f('comet', p, 'rss_mib', 1, 0)} / {f('apache', p, 'rss_mib', 1, 0)} |\n")
with open(dat, "w") as out:
    out.write("# topics comet_topics_per_sec apache_topics_per_sec comet_ms_per_create apache_ms_per_create\n")
    for p in points:
        c, a = v.get(("comet", f"S1-{p}", "topics_per_sec"), ""), v.get(("apache", f"S1-{p}", "topics_per_sec"), "")
        cms = f"{1000 / float(c):.3f}" if c else "NaN"
        ams = f"{1000 / float(a):.3f}" if a else "NaN"
        out.write(f"{p} {c or 'NaN'} {a or 'NaN'} {cms} {ams}\n")
PY

{
    echo "<!-- scale.sh results begin -->"
    echo "## Cost curves: bench/scale.sh"
    echo
    echo "Run $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo),"
    echo "kernel $(uname -r). Load generator: \`comet bench topics\` ($("$COMET_BIN" --version), git"
    echo "$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown), release build); Apache RocketMQ $ROCKETMQ_VERSION, heap $JAVA_HEAP per JVM."
    echo
    echo "### S1 topics (8 queues each, created one request after another on one connection)"
    echo
    cat "$WORK/s1.md"
    echo
    echo "Exact commands (DIR = a fresh directory per broker):"
    echo
    echo '```'
    for b in $BROKERS; do [[ -f "$WORK/cmdline-$b" ]] && echo "$b broker: $(cat "$WORK/cmdline-$b")"; done
    sed "s#$WORK#\$WORK#g" "$COMMANDS"
    echo '```'
    echo "<!-- scale.sh results end -->"
} >"$WORK/block.md"
cat "$WORK/block.md"

if [[ $WRITE == yes ]]; then
    if ! command -v gnuplot >/dev/null; then
        log "installing gnuplot (Debian gnuplot-nox) for the plots"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox >&2 || die "gnuplot is needed for the plots"
    fi
    mkdir -p "$IMAGES"
    gnuplot <<GP
set terminal pngcairo size 900,420 font "sans,10"
set output "$IMAGES/s1-topics.png"
set multiplot layout 1,2 title "S1: creating 8-queue topics one after another (one admin connection)"
set logscale x
set xlabel "topics in the table"
set grid
set key center right
set ylabel "topics created per second"
plot "$WORK/s1.dat" using 1:2 with linespoints lw 2 pt 7 title "Comet", \
     "$WORK/s1.dat" using 1:3 with linespoints lw 2 pt 5 title "Apache RocketMQ $ROCKETMQ_VERSION"
set ylabel "ms per create"
set logscale y
plot "$WORK/s1.dat" using 1:4 with linespoints lw 2 pt 7 title "Comet", \
     "$WORK/s1.dat" using 1:5 with linespoints lw 2 pt 5 title "Apache RocketMQ $ROCKETMQ_VERSION"
unset multiplot
GP
    python3 - "$OUT" "$WORK/block.md" <<'PY'
import sys, re, os
out, block = sys.argv[1], open(sys.argv[2]).read()
text = open(out).read() if os.path.exists(out) else "# bench results\n"
pat = re.compile(r"<!-- scale.sh results begin -->.*?<!-- scale.sh results end -->\n?", re.S)
text = pat.sub(lambda m: block, text) if pat.search(text) else text.rstrip("\n") + "\n\n" + block
open(out, "w").write(text)
PY
    log "results written to $OUT, plot to $IMAGES/s1-topics.png (raw figures in $RESULTS)"
fi
