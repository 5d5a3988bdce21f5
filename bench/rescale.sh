#!/usr/bin/env bash
# bench/rescale.sh - pause time and bytes moved when rescaling a keyed operator.
#
# For each key count V in KEYS, runs the unbounded generator wordcount
#   eddy local --workers 4 --parallelism 2 --generate --lines 0 --vocabulary V
#              --words-per-line WPL --rate RATE --checkpoint-interval 0
# waits until the count operator holds >= FILL * V keys (state_keys in
# `eddy status --json`), then rescales count 2 -> 3 -> 2 -> 4 -> 8 while the
# job keeps running, and prints each rescale's pause_ms and bytes_moved (from
# the job's rescales[] in `eddy status --json`).
#
# The generator draws id = a*b/V for uniform a, b, so ids near V are rare:
# after N words about V * c/(c+1) distinct keys exist (c = N/V); FILL = 0.9
# needs about 9V words.
#
# Environment: BUILD (build dir), KEYS ("100000 1000000 4000000"), WPL (10),
# RATE (lines/s, 300000), FILL (0.9), FILL_TIMEOUT (s per key count, 180),
# HB_TIMEOUT (--heartbeat-timeout-ms, eddy's default 3000; at 4M keys the
# default loses a worker during the rescale, see bench/README.md).
set -euo pipefail
# No flags: --help prints the header above; anything else is an error.
case "${1:-}" in
  "") ;;
  -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
  *) echo "$(basename "$0"): unknown argument '$1' (see --help)" >&2; exit 2 ;;
esac

HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
KEYS=${KEYS:-100000 1000000 4000000}
WPL=${WPL:-10}
RATE=${RATE:-300000}
FILL=${FILL:-0.9}
FILL_TIMEOUT=${FILL_TIMEOUT:-180}
HB_TIMEOUT=${HB_TIMEOUT:-3000}
EDDY=$BUILD/eddy

[[ -x $EDDY ]] || { echo "missing $EDDY; build first (see bench/README.md)" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq is required" >&2; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/eddy-bench-rescale.XXXXXX")
LOCAL_PID=
cleanup() {
    if [[ -n $LOCAL_PID ]] && kill -0 "$LOCAL_PID" 2>/dev/null; then
        kill -TERM "$LOCAL_PID" 2>/dev/null || true
        wait "$LOCAL_PID" 2>/dev/null || true
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

PORT=$((20000 + RANDOM % 20000))
ROWS=()

now() { date +%s.%N; }

# Sum of VmRSS (MB) of the worker processes of this run.
workers_rss_mb() {
    local kb=0 pid r
    for pid in $(pgrep -f -- "--coordinator tcp://127.0.0.1:$PORT " || true); do
        r=$(awk '/VmRSS/{print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
        kb=$((kb + ${r:-0}))
    done
    echo $((kb / 1024))
}

for V in $KEYS; do
    PORT=$((PORT + 2))
    COORD=tcp://127.0.0.1:$PORT
    target=$(echo "$V * $FILL / 1" | bc)
    # --output: counts are emitted once, at end of input (never, here), so the
    # single sink is not a bottleneck that the pausing barrier must wait behind.
    "$EDDY" local --workers 4 --job wordcount --generate --lines 0 --vocabulary "$V" \
        --words-per-line "$WPL" --rate "$RATE" --parallelism 2 --checkpoint-interval 0 \
        --output "$TMP/counts-$V.tsv" \
        --heartbeat-timeout-ms "$HB_TIMEOUT" --control-port "$PORT" --http-port $((PORT + 1)) --state-dir "$TMP/state-$V" --quiet \
        >/dev/null 2>"$TMP/local-$V.log" &
    LOCAL_PID=$!

    t0=$(now)
    keys=0
    while :; do
        sleep 0.5
        if ! kill -0 "$LOCAL_PID" 2>/dev/null; then
            echo "eddy local exited early (V=$V):" >&2
            tail -20 "$TMP/local-$V.log" >&2
            exit 1
        fi
        keys=$("$EDDY" status --json --coordinator "$COORD" 2>/dev/null |
            jq '[.jobs[0].operators[] | select(.name == "count") | .state_keys] | first // 0' 2>/dev/null || echo 0)
        keys=${keys:-0}
        ((keys >= target)) && break
        if (($(echo "$(now) - $t0 > $FILL_TIMEOUT" | bc))); then
            echo "V=$V: only $keys of $target keys after ${FILL_TIMEOUT}s; rescaling anyway" >&2
            break
        fi
    done
    fill_s=$(echo "$(now) - $t0" | bc -l)
    rss=$(workers_rss_mb)
    printf 'V=%s: %s keys after %.1f s (workers RSS %s MB)\n' "$V" "$keys" "$fill_s" "$rss"

    for p in 3 2 4 8; do
        if ! out=$("$EDDY" rescale wordcount count "$p" --coordinator "$COORD" --timeout-ms 120000 2>&1); then
            echo "  rescale to $p failed: $out" >&2
            continue
        fi
        echo "  $out"
    done
    status=$("$EDDY" status --json --coordinator "$COORD")
    while IFS=$'\t' read -r from to pause kgs bytes; do
        ROWS+=("$(printf '%-9s %10s %7s %10.1f %6s %12s' "$V" "$keys" "$from->$to" "$pause" "$kgs" "$bytes")")
    done < <(jq -r '.jobs[0].rescales[] | select(.operator == "count") |
        [.old_parallelism, .new_parallelism, .pause_ms, .key_groups_moved, .bytes_moved] | @tsv' <<<"$status")

    kill -TERM "$LOCAL_PID"
    wait "$LOCAL_PID" 2>/dev/null || true
    LOCAL_PID=
    rm -rf "$TMP/state-$V" "$TMP/local-$V.log"
done

echo
echo "rescale of count (eddy local --workers 4, rate $RATE lines/s x $WPL words, checkpoints off, $(nproc) cpus)"
printf '%-9s %10s %7s %10s %6s %12s\n' vocab keys_before change pause_ms kgs bytes_moved
printf '%s\n' "${ROWS[@]}"
