#!/usr/bin/env bash
# bench/guarantees.sh - what `--guarantee` allows when a worker dies.
#
# For each mode (exactly-once, at-least-once, at-most-once) it starts
#   eddy local --workers 3 --guarantee MODE --job wordcount --input TEXT
#              --output FILE --parallelism 3 --rate RATE
# waits for a completed checkpoint and some progress after it, SIGKILLs a
# worker that runs tasks (pid from `eddy status --json`), lets the job be
# restored and finish, and compares FILE word by word with a reference
# count made here with awk (tokens split on blanks, as wordcount does).
# Prints per mode: words whose count is exact / too high / too low
# (missing words count as too low) and the total difference in counts.
# exactly-once must be exact; at-least-once may only be high, at-most-once
# only low (a kill may also land where nothing is replayed or skipped).
#
# Environment: BUILD (build dir), MB (text size, 4), RUN_S (undisturbed run
# time, 8 s; sets the rate), RATE (lines/s, overrides RUN_S; 0 = unlimited),
# CHECKPOINT_MS (500), KILL_AFTER (records read after the first completed
# checkpoint before the kill, 20000), MODES (the three), JOB_FLAGS (extra
# wordcount flags, default --no-local-aggregation: with the combiner, partial
# counts leave a source instance only at barriers, so nothing ever crosses a
# barrier early and at-least-once shows no duplicates in wordcount).
set -euo pipefail
# No flags: --help prints the header above; anything else is an error.
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$HERE/common.sh"
bench_args "$@"
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
MB=${MB:-4}
RUN_S=${RUN_S:-8}
CHECKPOINT_MS=${CHECKPOINT_MS:-500}
KILL_AFTER=${KILL_AFTER:-20000}
EDDY=$BUILD/eddy
GEN=$BUILD/gen_text

[[ -x $EDDY && -x $GEN ]] || { echo "missing $EDDY or $GEN; build first (see bench/README.md)" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq is required" >&2; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/eddy-bench-guarantees.XXXXXX")
LOCAL_PID=
stop_local() {
    if [[ -n $LOCAL_PID ]] && kill -0 "$LOCAL_PID" 2>/dev/null; then
        kill -TERM "$LOCAL_PID" 2>/dev/null || true
        wait "$LOCAL_PID" 2>/dev/null || true
    fi
    LOCAL_PID=
}
cleanup() { stop_local; rm -rf "$TMP"; }
trap cleanup EXIT
die() { echo "guarantees.sh: $*" >&2; [[ -n ${LOG:-} && -f ${LOG:-} ]] && tail -30 "$LOG" >&2; exit 1; }

TEXT=$TMP/input.txt
"$GEN" "$TEXT" "$MB" 20000 7 >/dev/null
LINES=$(wc -l <"$TEXT")
RATE=${RATE:-$((LINES / RUN_S))}
export LC_ALL=C
awk '{for (i = 1; i <= NF; i++) n[$i]++} END {for (w in n) printf "%s\t%d\n", w, n[w]}' "$TEXT" |
    sort >"$TMP/reference.tsv"
echo "input: $LINES lines, $(wc -l <"$TMP/reference.tsv") distinct words, rate $RATE lines/s, checkpoints every $CHECKPOINT_MS ms"

PORT=$((20000 + RANDOM % 20000))
printf '%-14s %8s %8s %10s %10s %12s %9s\n' mode restarts exact too_high too_low total_diff verdict
for mode in ${MODES:-exactly-once at-least-once at-most-once}; do
    PORT=$((PORT + 2))
    COORD=tcp://127.0.0.1:$PORT
    LOG=$TMP/local-$mode.log
    OUT=$TMP/counts-$mode.tsv
    "$EDDY" local --workers 3 --control-port "$PORT" --http-port $((PORT + 1)) \
        --heartbeat-ms 200 --heartbeat-timeout-ms 1000 --checkpoint-interval "$CHECKPOINT_MS" \
        --quiet --guarantee "$mode" --job wordcount --input "$TEXT" --output "$OUT" \
        --parallelism 3 --rate "$RATE" ${JOB_FLAGS:---no-local-aggregation} 2>"$LOG" &
    LOCAL_PID=$!

    # A completed checkpoint, then KILL_AFTER more records read.
    deadline=$((SECONDS + 60)) victim= base=
    while :; do
        kill -0 "$LOCAL_PID" 2>/dev/null || die "eddy local exited early ($mode)"
        (( SECONDS < deadline )) || die "no checkpoint and progress within 60 s ($mode)"
        st=$("$EDDY" status --json --coordinator "$COORD" 2>/dev/null || true)
        if [[ -n $st ]] && jq -e '.jobs[0].state == "running" and .jobs[0].last_checkpoint.completed >= 1' \
            >/dev/null 2>&1 <<<"$st"; then
            read_now=$(jq '[.jobs[0].operators[] | select(.source) | .records_in] | add' <<<"$st")
            [[ -z $base ]] && base=$read_now
            if (( read_now >= base + KILL_AFTER )); then
                victim=$(jq -r '[.workers[] | select(.alive and .tasks > 0)][0].pid // empty' <<<"$st")
                [[ -n $victim ]] && break
            fi
        fi
        sleep 0.1
    done
    kill -9 "$victim" 2>/dev/null || die "worker $victim was gone before the kill (job too fast? lower RATE)"
    rc=0
    wait "$LOCAL_PID" || rc=$?
    LOCAL_PID=
    (( rc == 0 )) || die "eddy local --guarantee $mode exited $rc"
    restarts=$(grep -c "restoring from checkpoint\|restarting from the beginning" "$LOG" || true)

    # Word by word: reference count (0 if absent) against the output's.
    read -r exact high low diff < <(join -t $'\t' -a 1 -a 2 -e 0 -o 0,1.2,2.2 \
        "$TMP/reference.tsv" <(sort "$OUT") |
        awk -F'\t' '{d = $3 - $2; t += d; if (d > 0) h++; else if (d < 0) l++; else e++}
                    END {printf "%d %d %d %d\n", e, h, l, t}')
    case $mode in
        exactly-once) ok=$(( high == 0 && low == 0 )) ;;
        at-least-once) ok=$(( low == 0 )) ;;
        at-most-once) ok=$(( high == 0 )) ;;
    esac
    verdict=$([[ $ok == 1 ]] && echo ok || echo VIOLATED)
    printf '%-14s %8s %8s %10s %10s %12s %9s\n' "$mode" "$restarts" "$exact" "$high" "$low" "$diff" "$verdict"
done
