#!/usr/bin/env bash
# bench/checkpoint.sh - record latency of wordcount while checkpoints snapshot
# a large keyed state: checkpoints off, synchronous snapshots (the whole
# state serialised at the barrier, EDDY_SNAPSHOT_MODE=sync) and asynchronous
# ones (a copy-on-write view at the barrier, serialised by the snapshot
# writer's thread; the default).
#
# Per state size (KEYS, default "100000 1000000") and mode, one fresh
# `eddy local --job wordcount --socket` fed by build/latency_probe
# (bench/latency_probe.c): first KEYS distinct words (-k, not measured), a
# SETTLE_S-second phase at 100 lines/s for the backlog to drain, then a
# PHASE_S-second phase at RATE lines/s of marker words, measured, with
# checkpoints every INTERVAL_MS. Prints per run the measured phase's
# p50/p99/max latency in ms, their ratios to the run with checkpoints off
# at the same size (same invocation), and the keyed task's synchronous
# checkpoint time (from the workers' debug log: mean and max "barrier" ms;
# the async runs also give the writer thread's mean serialise ms).
#
# Environment: BUILD (build dir, default <repo>/build; Release for numbers),
# EDDY, PROBE, KEYS, RATE (2000), PHASE_S (10), SETTLE_S (5), INTERVAL_MS
# (1000), WORKERS (1), PARALLELISM (1).
set -uo pipefail
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$HERE/common.sh"
bench_args "$@"
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
EDDY=${EDDY:-$BUILD/eddy}
PROBE=${PROBE:-$BUILD/latency_probe}
KEYS=${KEYS:-"100000 1000000"}
RATE=${RATE:-2000}
PHASE_S=${PHASE_S:-10}
SETTLE_S=${SETTLE_S:-5}
INTERVAL_MS=${INTERVAL_MS:-1000}
WORKERS=${WORKERS:-1}
PARALLELISM=${PARALLELISM:-1}

bench_need_bin "$EDDY" "$PROBE"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/eddy-bench-ckpt.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PORT=$((20000 + RANDOM % 20000))
bench_machine
printf '%-9s %-5s %9s %9s %9s %8s %8s %8s %12s %12s %12s\n' keys mode p50_ms p99_ms max_ms \
    p50_x p99_x max_x barrier_ms barrier_max serialise_ms

run() { # KEYS MODE: prints "p50 p99 max barrier_mean barrier_max serialise_mean"
    local keys=$1 mode=$2 interval=$INTERVAL_MS line
    [[ $mode == off ]] && interval=0
    PORT=$((PORT + 2))
    : >"$TMP/eddy.log"
    if ! line=$(EDDY_SNAPSHOT_MODE=${mode/off/async} EDDY_LOG_LEVEL=debug "$PROBE" -w 30 -k "$keys" \
        -p "settle,100,$SETTLE_S" -p "measure,$RATE,$PHASE_S" -- \
        "$EDDY" local --workers "$WORKERS" --parallelism "$PARALLELISM" --control-port "$PORT" \
        --http-port $((PORT + 1)) --checkpoint-interval "$interval" \
        --job wordcount --socket '127.0.0.1:{PORT}' 2>>"$TMP/eddy.log" | grep '^phase measure'); then
        echo "run $keys $mode failed; eddy's log:" >&2
        tail -20 "$TMP/eddy.log" >&2
        return 1
    fi
    local lat ck
    lat=$(awk '{print $12, $14, $18}' <<<"$line")
    ck=$(grep -E 'checkpoint [0-9]+ of .*: [0-9]+ groups' "$TMP/eddy.log" | grep -v ': 0 groups' |
        sed -E 's/.*barrier ([0-9.]+) ms, serialise ([0-9.]+) ms.*/\1 \2/' |
        awk '{n++; b += $1; if ($1 > m) m = $1; s += $2}
             END {if (n) printf "%.3f %.3f %.3f", b / n, m, s / n; else print "- - -"}')
    echo "$lat $ck"
}

for keys in $KEYS; do
    base=""
    for mode in off sync async; do
        r=$(run "$keys" "$mode") || continue
        read -r p50 p99 max bm bx sm <<<"$r"
        [[ $mode == off ]] && base="$p50 $p99 $max" && bm=- && bx=- && sm=-
        read -r b50 b99 bmax <<<"${base:-0 0 0}"
        printf '%-9s %-5s %9s %9s %9s %8s %8s %8s %12s %12s %12s\n' "$keys" "$mode" "$p50" "$p99" \
            "$max" "$(bench_ratio "$p50" "$b50")" "$(bench_ratio "$p99" "$b99")" "$(bench_ratio "$max" "$bmax")" \
            "$bm" "$bx" "$sm"
    done
done
