#!/usr/bin/env bash
# bench/latency.sh - end-to-end record latency of wordcount, measured from
# outside, at several loads and during a rescale.
#
# build/latency_probe (bench/latency_probe.c) is a TCP server for
# `eddy local --job wordcount --socket`: it sends lines of one marker word
# `m<seq>` at a given rate and reads the changelog (`+I[m<seq>, 1]`) from
# eddy's stdout, a pipe; latency = time the row is read - time the line was
# written. Each load runs in a fresh `eddy local` (a backlog left by one load
# must not count against the next):
#   max      lines as fast as eddy takes them for MAX_S seconds; the rate of
#            changelog rows read meanwhile is the maximum throughput R
#   1% 10% 50% 90%   PHASE_S seconds at that share of R
#   at50 at20000     50 and 20,000 lines/s (targets: p50 < 1 ms, p99 < 5 ms)
#   rescale          10% of R; 2 s in, `eddy rescale wordcount count 3`
# Prints one line per load: lines/s written, rows/s read, lines sent and
# seen, p50/p99/p99.9/max latency in ms; and the rescale's pause.
#
# Environment: BUILD (build dir, default <repo>/build; Release for numbers),
# EDDY (the eddy binary, default $BUILD/eddy: point it at another build to
# compare), PROBE ($BUILD/latency_probe), WORKERS (2), PARALLELISM (2),
# MAX_S (5), PHASE_S (10), LINEBUF=1 runs eddy under `stdbuf -oL` (for
# builds whose sink flushes its stdout only at checkpoints).
set -uo pipefail
# No flags: --help prints the header above; anything else is an error.
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$HERE/common.sh"
bench_args "$@"
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
EDDY=${EDDY:-$BUILD/eddy}
PROBE=${PROBE:-$BUILD/latency_probe}
WORKERS=${WORKERS:-2}
PARALLELISM=${PARALLELISM:-2}
MAX_S=${MAX_S:-5}
PHASE_S=${PHASE_S:-10}

bench_need_bin "$EDDY" "$PROBE"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/eddy-bench-lat.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PORT=$((20000 + RANDOM % 20000))
PREFIX=()
if [[ ${LINEBUF:-0} == 1 ]]; then PREFIX=(stdbuf -oL); fi

bench_machine

run() { # NAME RATE SECONDS [CMD]: one fresh eddy local; eddy's log in $TMP/eddy.log
    local spec="$1,$2,$3${4:+,$4}" line
    PORT=$((PORT + 2))
    spec=${spec//@CONTROL@/$PORT}
    : >"$TMP/eddy.log"
    if ! line=$("$PROBE" -w 15 -p "$spec" -- "${PREFIX[@]}" "$EDDY" local --workers "$WORKERS" \
        --parallelism "$PARALLELISM" --control-port "$PORT" --http-port $((PORT + 1)) \
        --job wordcount --socket '127.0.0.1:{PORT}' 2>>"$TMP/eddy.log") || [[ -z $line ]]; then
        echo "phase $1 failed; eddy's log:" >&2
        tail -20 "$TMP/eddy.log" >&2
        return 1
    fi
    echo "$line"
}

max_line=$(run max 0 "$MAX_S") || exit 1
echo "$max_line"
R=$(awk '{print $6}' <<<"$max_line")
if [[ -z $R || $R == 0 ]]; then
    echo "no maximum throughput measured" >&2
    exit 1
fi
pct() { awk -v r="$R" -v p="$1" 'BEGIN { v = r * p / 100; if (v < 1) v = 1; printf "%.0f", v }'; }

for p in 1 10 50 90; do
    run "$p%" "$(pct "$p")" "$PHASE_S"
done
run at50 50 "$PHASE_S"
run at20000 20000 "$PHASE_S"
run rescale "$(pct 10)" "$PHASE_S" \
    "sleep 2; $EDDY rescale wordcount count 3 --coordinator tcp://127.0.0.1:@CONTROL@ >>$TMP/rescale.log 2>&1"
if [[ -s $TMP/rescale.log ]]; then
    echo "rescale: $(tr '\n' ' ' <"$TMP/rescale.log")"
fi
echo "machine after: load average $(cut -d' ' -f1-3 /proc/loadavg)"
