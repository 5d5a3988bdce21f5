#!/usr/bin/env bash
# bench/checkpoint_windows.sh - what a checkpoint costs the task thread of a
# windowed job with many keys: window contents and timers serialised at the
# barrier (EDDY_SNAPSHOT_MODE=keyed: only the keyed state was asynchronous,
# the behaviour before windows had snapshot views) against frozen at the
# barrier and serialised by the snapshot writer's thread (the default), in
# one run, with the ratio.
#
# Per state size (KEYS, default "1000000 4000000") and mode, one fresh
# `eddy local --workers 1 --pipeline` with one keyed window instance
# (parallelism 1): a tumbling 1-hour event-time window counting rows per
# key, over a CSV of KEYS distinct keys (all in one window: each key holds
# an accumulator and a timer, nothing fires before the end) followed by
# rows of keys already seen, read at LOAD_RATE lines/s until LOAD_S
# seconds, then at 20000 lines/s; checkpoints every INTERVAL_MS. The run
# is stopped MEASURE_S + 2 seconds after the coordinator counted KEYS
# records read (before its end of input, whose firing of every window is
# not what is measured).
# From the worker's EDDY_LOG_LEVEL=debug lines it prints per phase -
# "load" (new keys: every record makes a window) and "steady" (MEASURE_S
# seconds from 3 s after loading: records only update accumulators) - the
# window stage's checkpoints, the task's mean and max time at the barrier
# ("checkpoint N of JOB/STAGE: ...; barrier B ms, serialise S ms"), the
# writer thread's mean serialise ms, the ratio of the max barrier time to
# the first mode's, and the task's time serialising groups it changed
# before the snapshot thread took them (state/group_freeze.c's "snapshot
# view: N of M key groups serialised by their owner (T ms)"): groups and
# ms per checkpoint, and the largest T.
#
# Environment: BUILD (default <repo>/build; Release or RelWithDebInfo),
# EDDY, KEYS, LOAD_RATE (400000), LOAD_S (15), MEASURE_S (10), INTERVAL_MS
# (1000), MODES ("keyed async").
set -uo pipefail
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$HERE/common.sh"
bench_args "$@"
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
EDDY=${EDDY:-$BUILD/eddy}
KEYS=${KEYS:-"1000000 4000000"}
LOAD_RATE=${LOAD_RATE:-400000}
LOAD_S=${LOAD_S:-15}
MEASURE_S=${MEASURE_S:-10}
INTERVAL_MS=${INTERVAL_MS:-1000}
MODES=${MODES:-"keyed async"}
bench_need_bin "$EDDY"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/eddy-bench-ckwin.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
bench_machine
cat >"$TMP/spec.yaml" <<'EOF'
name: ckwin
source:
  format: csv
  columns: [k, t]
steps:
  - key_by: k
  - window: {type: tumbling, size: 1h, timestamp: t}
  - aggregate:
      n: count()
  - filter: n < 0
parallelism: 1
EOF
printf '%-9s %-6s %-6s %6s %11s %11s %12s %9s %12s %10s %10s\n' keys mode phase ckpts barrier_ms \
    barrier_max serialise_ms max_ratio touched_grps touched_ms touch_max

run() { # KEYS MODE: prints per phase "PHASE checkpoints barrier_mean barrier_max
        #   serialise_mean touched_groups_mean touched_ms_mean touched_max"
    local keys=$1 mode=$2 port pid
    port=$(bench_free_port)
    : >"$TMP/eddy.log"
    EDDY_SNAPSHOT_MODE=$mode EDDY_LOG_LEVEL=debug setsid "$EDDY" local --workers 1 \
        --control-port "$port" --http-port 0 --checkpoint-interval "$INTERVAL_MS" \
        --pipeline "$TMP/spec.yaml" --input "$TMP/in-$keys.csv" \
        --rate "0:$LOAD_RATE,$LOAD_S:20000" --output "$TMP/out.tsv" >/dev/null 2>>"$TMP/eddy.log" &
    pid=$!
    # until the coordinator counted KEYS records read, then MEASURE_S more
    local deadline=$((SECONDS + 300)) loaded=0
    while ((SECONDS < deadline)) && kill -0 "$pid" 2>/dev/null; do
        loaded=$(grep -o '[0-9]* records read' "$TMP/eddy.log" | tail -1 | cut -d' ' -f1)
        ((${loaded:-0} >= keys)) && break
        sleep 1
    done
    sleep $((MEASURE_S + 2))
    if ! kill -0 "$pid" 2>/dev/null || ((${loaded:-0} < keys)); then
        echo "run $keys $mode ended early or never loaded its keys; eddy's log:" >&2
        grep -v 'running [0-9.]*s:' "$TMP/eddy.log" | tail -20 >&2
        kill -TERM -- -"$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        return 1
    fi
    kill -TERM -- -"$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    if grep -q 'was lost\|restoring from' "$TMP/eddy.log"; then
        echo "run $keys $mode: a worker was lost; its numbers mix two attempts" >&2
    fi
    # Two phases: "load", from the deploy until a second after the
    # coordinator counted KEYS records read (new keys: every record makes a
    # window, its accumulator and its timer), and "steady", MEASURE_S
    # seconds from 3 s after that (rows only update accumulators), so not
    # the stop (whose closing operators serialise what their views have
    # pending). Per checkpoint unit of the window's stage: barrier and
    # serialise ms; per snapshot view, the task's time serialising groups
    # it changed before the snapshot thread took them (state/group_freeze.c,
    # logged only when it did), summed and divided by the checkpoints.
    local phase
    for phase in load steady; do
        awk -v keys="$keys" -v span="$MEASURE_S" -v phase="$phase" '
        function secs(t,  a) { split(t, a, ":"); return a[1] * 3600 + a[2] * 60 + a[3] }
        /deploying epoch/ && !t0 { t0 = secs($1) }
        /records read/ && !tl {
            match($0, /: [0-9]+ records read/); split(substr($0, RSTART, RLENGTH), r, " ")
            if (r[2] + 0 >= keys) tl = secs($1) + 1
        }
        !t0 { next }
        phase == "load" && tl && secs($1) >= tl { next }
        phase == "steady" && (!tl || secs($1) < tl + 3 || secs($1) >= tl + 3 + span) { next }
        /checkpoint [0-9]+ of .*: [0-9]+ groups, (sync|async); barrier/ && !/: 0 groups/ &&
        !/\/(source|parse)/ {
            match($0, /barrier [0-9.]+ ms, serialise [0-9.]+/); split(substr($0, RSTART, RLENGTH), f, " ")
            n++; b += f[2]; if (f[2] > m) m = f[2]; s += f[5]
        }
        /snapshot view: [0-9]+ of [0-9]+ key groups serialised by their owner/ {
            match($0, /view: [0-9]+ of/); split(substr($0, RSTART, RLENGTH), g, " "); tg += g[2]
            match($0, /\([0-9.]+ ms/); ms = substr($0, RSTART + 1, RLENGTH - 4) + 0
            tt += ms; if (ms > tx) tx = ms
        }
        END {
            if (n) printf "%s %d %.3f %.3f %.3f %.1f %.3f %.3f\n", phase, n, b / n, m, s / n, tg / n, tt / n, tx
            else print phase " 0 - - - - - -"
        }' "$TMP/eddy.log"
    done
}

for keys in $KEYS; do
    awk -v n="$keys" -v tail="$((LOAD_RATE * LOAD_S + 20000 * (MEASURE_S + 120)))" \
        'BEGIN {for (i = 0; i < n; i++) printf "key%d,1000\n", i;
                for (i = 0; i < tail; i++) printf "key%d,1001\n", (i * 7) % n}' \
        >"$TMP/in-$keys.csv"
    declare -A first=()
    for mode in $MODES; do
        r=$(run "$keys" "$mode") || continue
        while read -r phase n bm bx sm tg tm tx; do
            [[ -z ${first[$phase]:-} ]] && first[$phase]=$bx
            printf '%-9s %-6s %-6s %6s %11s %11s %12s %9s %12s %10s %10s\n' "$keys" "$mode" \
                "$phase" "$n" "$bm" "$bx" "$sm" "$(bench_ratio "${first[$phase]}" "$bx")" "$tg" \
                "$tm" "$tx"
        done <<<"$r"
    done
    rm -f "$TMP/in-$keys.csv"
done
