#!/usr/bin/env bash
# bench/checkpoint_incremental.sh - bytes, objects and time per checkpoint,
# full (--checkpoint-full-every 1) against incremental (the default
# --checkpoint-full-every, or FULL_EVERY), measured in the same run.
#
# Per state size (KEYS, default 1000000) and mode, one fresh `eddy local
# --job wordcount --socket` fed by build/latency_probe (bench/latency_probe.c):
# first KEYS distinct words (-k, the state), a SETTLE_S-second phase at 100
# lines/s for that backlog to drain, then a PHASE_S-second phase at RATE
# lines/s of marker words (each a new key: RATE * INTERVAL_MS / 1000 keys
# change per checkpoint, a small fraction of KEYS), checkpoints every
# INTERVAL_MS. From the coordinator's EDDY_LOG_LEVEL=debug line per
# completed checkpoint ("complete in T ms, B bytes in F files (R key groups
# referred to ...)") it averages over the checkpoints completed in the
# measured phase: bytes, objects written, key groups referred to, and the
# duration from trigger to complete; then prints incremental / full ratios.
# Averages include the periodic full checkpoints of the incremental mode.
#
# Environment: BUILD (build dir, default <repo>/build; Release for numbers),
# EDDY, PROBE, KEYS, RATE (20), PHASE_S (12), SETTLE_S (5), INTERVAL_MS
# (1000), FULL_EVERY (10), WORKERS (1), PARALLELISM (1).
set -uo pipefail
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$HERE/common.sh"
bench_args "$@"
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
EDDY=${EDDY:-$BUILD/eddy}
PROBE=${PROBE:-$BUILD/latency_probe}
KEYS=${KEYS:-1000000}
RATE=${RATE:-20}
PHASE_S=${PHASE_S:-12}
SETTLE_S=${SETTLE_S:-5}
INTERVAL_MS=${INTERVAL_MS:-1000}
FULL_EVERY=${FULL_EVERY:-10}
WORKERS=${WORKERS:-1}
PARALLELISM=${PARALLELISM:-1}

bench_need_bin "$EDDY" "$PROBE"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/eddy-bench-incr.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
PORT=$((20000 + RANDOM % 20000))
bench_machine
echo "changed keys per checkpoint: ~$((RATE * INTERVAL_MS / 1000)) (markers at $RATE lines/s)"
printf '%-9s %-12s %5s %12s %9s %11s %9s\n' keys mode n bytes objects referenced ms

run() { # KEYS FULL_EVERY: prints "n bytes objects referenced ms" (means)
    local keys=$1 every=$2
    PORT=$((PORT + 2))
    : >"$TMP/eddy.log"
    if ! EDDY_LOG_LEVEL=debug "$PROBE" -w 60 -k "$keys" \
        -p "settle,100,$SETTLE_S" -p "measure,$RATE,$PHASE_S" -- \
        "$EDDY" local --workers "$WORKERS" --parallelism "$PARALLELISM" --control-port "$PORT" \
        --http-port $((PORT + 1)) --checkpoint-interval "$INTERVAL_MS" \
        --checkpoint-full-every "$every" --state-dir "$TMP/state-$every-$keys" \
        --job wordcount --socket '127.0.0.1:{PORT}' 2>>"$TMP/eddy.log" >/dev/null; then
        echo "run $keys full-every $every failed; eddy's log:" >&2
        tail -20 "$TMP/eddy.log" >&2
        return 1
    fi
    rm -rf "$TMP/state-$every-$keys"
    # the checkpoints of the measured phase: the last PHASE_S*1000/INTERVAL_MS - 1
    local n=$((PHASE_S * 1000 / INTERVAL_MS - 1))
    grep -E 'checkpoint [0-9]+ complete in' "$TMP/eddy.log" | tail -n "$n" |
        sed -E 's/.*complete in ([0-9]+) ms, ([0-9]+) bytes in ([0-9]+) files \(([0-9]+) key.*/\1 \2 \3 \4/' |
        awk '{n++; ms += $1; b += $2; f += $3; r += $4}
             END {if (n) printf "%d %.0f %.1f %.1f %.1f\n", n, b / n, f / n, r / n, ms / n; else print "0 0 0 0 0"}'
}

for keys in $KEYS; do
    read -r fn fb ff fr fm <<<"$(run "$keys" 1)" || continue
    read -r inn ib if_ ir im <<<"$(run "$keys" "$FULL_EVERY")" || continue
    printf '%-9s %-12s %5s %12s %9s %11s %9s\n' "$keys" "full" "$fn" "$fb" "$ff" "$fr" "$fm"
    printf '%-9s %-12s %5s %12s %9s %11s %9s\n' "$keys" "incr/$FULL_EVERY" "$inn" "$ib" "$if_" "$ir" "$im"
    echo "ratio incremental/full at $keys keys: bytes $(bench_ratio "$ib" "$fb" 3), objects $(bench_ratio "$if_" "$ff" 3), time $(bench_ratio "$im" "$fm" 3)"
done
