#!/usr/bin/env bash
# bench/recovery.sh - time from `kill -9` of a worker to recovery.
#
# Each run starts
#   eddy local --workers 3 --job wordcount --generate --lines 0
#              --vocabulary 10000 --rate RATE --parallelism 3
# with eddy's default liveness settings (--heartbeat-ms 500,
# --heartbeat-timeout-ms 3000) and checkpoint interval (2000 ms), waits until
# a checkpoint completed, SIGKILLs one worker that runs tasks and measures,
# from the kill:
#   dead     the coordinator's "worker N (...) declared dead" log line
#   running  the coordinator's "restored in N ms, running again" log line
#   flowing  the coordinator's "records flowing again" log line: a task of a
#            stage after the sources took records in the restored epoch
#            (workers send heartbeats every 100 ms for half a second after
#            START, so this is at most ~100 ms late)
#   records  the first `eddy status --json` (polled every ~POLL s) in which the
#            job's epoch is above the one before the kill and the sources'
#            records_in (status counts only tasks of the current epoch) is > 0,
#            i.e. records past the restored offsets were read. Task metrics
#            reach the coordinator with heartbeats, so this is an upper bound
#            that can be up to one heartbeat (500 ms) + one poll late.
# Log times are the coordinator's HH:MM:SS.mmm stamps, compared with the
# kill's wall-clock time (same host clock; midnight wrap handled).
# Each mode runs RUNS times: `fast` (eddy's default: a worker whose control
# connection closes is dead at once, coordinator/disconnect.c) and, as the
# baseline in the same run, `heartbeat` (--heartbeat-only: dead after the
# heartbeat timeout). Prints one row per run, then the median of each column
# per mode; target: fast median kill -> first record < 1 s.
#
# Environment: BUILD (build dir), RUNS (3), MODES ("fast heartbeat"), RATE
# (lines/s over all sources, 20000), CHECKPOINT_MS (2000), HB_MS (500),
# HB_TIMEOUT_MS (3000), POLL (0.05).
set -euo pipefail
# No flags: --help prints the header above; anything else is an error.
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$HERE/common.sh"
bench_args "$@"
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
RUNS=${RUNS:-3}
MODES=${MODES:-fast heartbeat}
RATE=${RATE:-20000}
CHECKPOINT_MS=${CHECKPOINT_MS:-2000}
HB_MS=${HB_MS:-500}
HB_TIMEOUT_MS=${HB_TIMEOUT_MS:-3000}
POLL=${POLL:-0.05}
EDDY=$BUILD/eddy

[[ -x $EDDY ]] || { echo "missing $EDDY; build first (see bench/README.md)" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq is required" >&2; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/eddy-bench-recovery.XXXXXX")
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

# Seconds since local midnight, with fractions: from `date` or a log stamp.
sod_now() { date +%H:%M:%S.%N | awk -F: '{printf "%.6f\n", $1*3600 + $2*60 + $3}'; }
sod_of() { awk -F: '{printf "%.6f\n", $1*3600 + $2*60 + $3}' <<<"$1"; }
# b - a in ms (b may have wrapped past midnight).
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN {d = b - a; if (d < -43200) d += 86400; printf "%.0f\n", d * 1000}'; }
# Stamp (first field) of the first log line after line $2 that contains $3;
# empty when there is none. One awk, no pipe: `tail | grep -m1` under
# pipefail failed (tail's SIGPIPE, or grep finding nothing) and set -e then
# ended the script silently before it printed a row.
stamp_after() { awk -v n="$2" -v s="$3" 'NR > n && index($0, s) { print $1; exit }' "$1"; }

die() { echo "recovery.sh: $*" >&2; [[ -n ${LOG:-} ]] && tail -30 "$LOG" >&2; exit 1; }

PORT=$((20000 + RANDOM % 20000))
printf '%-9s %-4s %10s %10s %12s %12s %14s\n' mode run victim dead_ms running_ms flowing_ms status_rec_ms
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
declare -A MED_DEAD MED_REC
for mode in $MODES; do
MODE_FLAGS=()
[[ $mode == heartbeat ]] && MODE_FLAGS=(--heartbeat-only)
DEAD=() RUNNING=() FLOWING=() RECORDS=()
for run in $(seq 1 "$RUNS"); do
    PORT=$((PORT + 2))
    COORD=tcp://127.0.0.1:$PORT
    LOG=$TMP/local-$mode-$run.log
    # stdout carries the changelog; nobody reads it here.
    "$EDDY" local --workers 3 --control-port "$PORT" --http-port $((PORT + 1)) \
        --heartbeat-ms "$HB_MS" --heartbeat-timeout-ms "$HB_TIMEOUT_MS" \
        --checkpoint-interval "$CHECKPOINT_MS" --state-dir "$TMP/state-$mode-$run" "${MODE_FLAGS[@]}" \
        --job wordcount --generate --lines 0 --vocabulary 10000 --rate "$RATE" --parallelism 3 \
        >/dev/null 2>"$LOG" &
    LOCAL_PID=$!

    # Running, with a completed checkpoint and a worker running tasks.
    deadline=$((SECONDS + 60))
    victim= epoch=
    while :; do
        kill -0 "$LOCAL_PID" 2>/dev/null || die "eddy local exited early (run $run)"
        (( SECONDS < deadline )) || die "no completed checkpoint within 60 s (run $run)"
        st=$("$EDDY" status --json --coordinator "$COORD" 2>/dev/null || true)
        if [[ -n $st ]] && jq -e '.jobs[0].state == "running" and .jobs[0].last_checkpoint.completed >= 1' \
            >/dev/null 2>&1 <<<"$st"; then
            victim=$(jq -r '[.workers[] | select(.alive and .tasks > 0)][0].pid // empty' <<<"$st")
            epoch=$(jq -r '.jobs[0].epoch' <<<"$st")
            [[ -n $victim ]] && break
        fi
        sleep 0.2
    done

    lines_before=$(wc -l <"$LOG")
    t_kill=$(sod_now)
    kill -9 "$victim"

    # (c) first status of a newer epoch with records read (covers (a), (b) too)
    deadline=$((SECONDS + 60))
    t_rec=
    while :; do
        kill -0 "$LOCAL_PID" 2>/dev/null || die "eddy local exited (run $run)"
        (( SECONDS < deadline )) || die "no records after the restore within 60 s (run $run)"
        st=$("$EDDY" status --json --coordinator "$COORD" 2>/dev/null || true)
        t=$(sod_now)
        if [[ -n $st ]] && jq -e --argjson e "$epoch" \
            '.jobs[0].epoch > $e and .jobs[0].state == "running" and
             ([.jobs[0].operators[] | select(.source) | .records_in] | add) > 0' >/dev/null 2>&1 <<<"$st"; then
            t_rec=$t
            break
        fi
        sleep "$POLL"
    done
    s_dead=$(stamp_after "$LOG" "$lines_before" "pid $victim) declared dead")
    s_run=$(stamp_after "$LOG" "$lines_before" "running again")
    s_flow=
    for _ in $(seq 50); do
        s_flow=$(stamp_after "$LOG" "$lines_before" "records flowing again")
        [[ -n $s_flow ]] && break
        sleep 0.1
    done
    [[ -n $s_dead && -n $s_run && -n $s_flow ]] || die "missing log lines (run $run)"
    d=$(ms_between "$t_kill" "$(sod_of "$s_dead")")
    r=$(ms_between "$t_kill" "$(sod_of "$s_run")")
    f=$(ms_between "$t_kill" "$(sod_of "$s_flow")")
    c=$(ms_between "$t_kill" "$t_rec")
    DEAD+=("$d") RUNNING+=("$r") FLOWING+=("$f") RECORDS+=("$c")
    printf '%-9s %-4s %10s %10s %12s %12s %14s\n' "$mode" "$run" "$victim" "$d" "$r" "$f" "$c"
    stop_local
done
MED_DEAD[$mode]=$(median "${DEAD[@]}")
MED_REC[$mode]=$(median "${FLOWING[@]}")
printf '%-9s %-4s %10s %10s %12s %12s %14s\n' "$mode" median - "${MED_DEAD[$mode]}" "$(median "${RUNNING[@]}")" \
    "${MED_REC[$mode]}" "$(median "${RECORDS[@]}")"
done

for mode in $MODES; do
    m=${MED_REC[$mode]}
    echo "$mode: median kill -> declared dead ${MED_DEAD[$mode]} ms, kill -> records flowing ${m} ms"
done
if [[ -n ${MED_REC[fast]:-} ]]; then
    m=${MED_REC[fast]}
    if (( ${m%.*} < 1000 )); then
        echo "target: fast median kill -> records flowing ${m} ms < 1000 ms: met"
    else
        echo "target: fast median kill -> records flowing ${m} ms >= 1000 ms: MISSED"
    fi
fi
