#!/usr/bin/env bash
# bench/recovery.sh - time from `kill -9` of a worker to recovery, by state
# size, with and without local recovery.
#
# Each run starts
#   eddy local --workers 3 --job wordcount --generate --lines 0
#              --vocabulary KEYS --rate RATE --parallelism 3
# with eddy's default liveness settings (--heartbeat-ms 500,
# --heartbeat-timeout-ms 3000) and checkpoint interval (2000 ms), waits until
# the count operator holds FILL x KEYS keys and a checkpoint completed after
# that, SIGKILLs the worker of count[0] and measures, from the kill:
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
# and from the coordinator's "restored in" line: restore_ms (DEPLOY of the
# restore to the last DEPLOYED) and the key groups loaded from the workers'
# local copies / from checkpoint storage.
# Log times are the coordinator's HH:MM:SS.mmm stamps, compared with the
# kill's wall-clock time (same host clock; midnight wrap handled).
# Axes: KEYS (state size: distinct words), RECOVERY (`local`: eddy's default,
# survivors load their groups from their local copies; `storage`: the
# workers run with --no-local-recovery, every group from checkpoint storage)
# and MODES (`fast`: eddy's default, a worker whose control connection
# closes is dead at once, coordinator/disconnect.c; `heartbeat`:
# --heartbeat-only, dead after the heartbeat timeout). Runs are interleaved
# (per size and run, every recovery mode and liveness mode in turn) so the
# ratios compare runs of the same minute. Prints one row per run, the median
# of each column per (keys, recovery, mode), and per size and mode the ratio
# local / storage of the medians.
#
# Environment: BUILD (build dir), RUNS (3), KEYS ("100000 1000000"),
# RECOVERY ("local storage"), MODES ("fast"), RATE (lines/s over all
# sources, 20000), FILL (0.5), CHECKPOINT_MS (2000), HB_MS (500),
# HB_TIMEOUT_MS (3000), POLL (0.05), FILL_TIMEOUT_S (300).
set -euo pipefail
# No flags: --help prints the header above; anything else is an error.
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$HERE/common.sh"
bench_args "$@"
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
RUNS=${RUNS:-3}
MODES=${MODES:-fast}
KEYS=${KEYS:-100000 1000000}
RECOVERY=${RECOVERY:-local storage}
FILL=${FILL:-0.5}
FILL_TIMEOUT_S=${FILL_TIMEOUT_S:-300}
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
bench_machine
printf '%-8s %-8s %-9s %-4s %8s %8s %10s %11s %12s %14s %10s %12s\n' keys recovery mode run \
    dead_ms restore_ms running_ms flowing_ms status_rec_ms local_groups storage_groups state_keys
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
# Per (keys recovery mode): space-separated values of each column.
declare -A DEAD RESTORE RUNNING FLOWING RECORDS

# One run: prints its row and appends to the arrays above.
one_run() { # KEYS RECOVERY MODE RUN
    local keys=$1 rec=$2 mode=$3 run=$4 k="$1 $2 $3"
    local flags=()
    [[ $mode == heartbeat ]] && flags+=(--heartbeat-only)
    [[ $rec == storage ]] && flags+=(--no-local-recovery)
    PORT=$((PORT + 2))
    COORD=tcp://127.0.0.1:$PORT
    LOG=$TMP/local-$keys-$rec-$mode-$run.log
    # stdout carries the changelog; nobody reads it here.
    "$EDDY" local --workers 3 --control-port "$PORT" --http-port $((PORT + 1)) \
        --heartbeat-ms "$HB_MS" --heartbeat-timeout-ms "$HB_TIMEOUT_MS" \
        --checkpoint-interval "$CHECKPOINT_MS" --state-dir "$TMP/state" "${flags[@]}" \
        --job wordcount --generate --lines 0 --vocabulary "$keys" --rate "$RATE" --parallelism 3 \
        >/dev/null 2>"$LOG" &
    LOCAL_PID=$!

    # Running, FILL x KEYS keys in count, then one more completed checkpoint.
    local deadline=$((SECONDS + FILL_TIMEOUT_S)) victim= epoch= skeys=0 ck_at_fill=
    local want_keys
    want_keys=$(awk -v k="$keys" -v f="$FILL" 'BEGIN {printf "%d", k * f}')
    while :; do
        kill -0 "$LOCAL_PID" 2>/dev/null || die "eddy local exited early ($k run $run)"
        (( SECONDS < deadline )) || die "count did not reach $want_keys keys with a checkpoint within ${FILL_TIMEOUT_S} s ($k run $run; at $skeys)"
        st=$("$EDDY" status --json --coordinator "$COORD" 2>/dev/null || true)
        if [[ -n $st ]] && jq -e '.jobs[0].state == "running"' >/dev/null 2>&1 <<<"$st"; then
            skeys=$(jq -r '[.jobs[0].operators[] | select(.name == "count") | .state_keys] | add // 0' <<<"$st")
            local done_ck
            done_ck=$(jq -r '.jobs[0].last_checkpoint.completed // 0' <<<"$st")
            if [[ -z $ck_at_fill ]] && (( skeys >= want_keys )); then
                ck_at_fill=$done_ck
            fi
            if [[ -n $ck_at_fill ]] && (( done_ck > ck_at_fill )); then
                victim=$(jq -r --argjson s "$(jq -c '[.workers[] | {id, pid}]' <<<"$st")" \
                    '.jobs[0].operators[] | select(.name == "count") | .instances[0].worker as $w
                     | ($s[] | select(.id == $w) | .pid)' <<<"$st")
                epoch=$(jq -r '.jobs[0].epoch' <<<"$st")
                [[ -n $victim ]] && break
            fi
        fi
        sleep 0.5
    done

    local lines_before t_kill t_rec=
    lines_before=$(wc -l <"$LOG")
    t_kill=$(sod_now)
    kill -9 "$victim"

    # (c) first status of a newer epoch with records read (covers (a), (b) too)
    deadline=$((SECONDS + 120))
    while :; do
        kill -0 "$LOCAL_PID" 2>/dev/null || die "eddy local exited ($k run $run)"
        (( SECONDS < deadline )) || die "no records after the restore within 120 s ($k run $run)"
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
    local s_dead s_run s_flow= line
    s_dead=$(stamp_after "$LOG" "$lines_before" "pid $victim) declared dead")
    s_run=$(stamp_after "$LOG" "$lines_before" "running again")
    for _ in $(seq 50); do
        s_flow=$(stamp_after "$LOG" "$lines_before" "records flowing again")
        [[ -n $s_flow ]] && break
        sleep 0.1
    done
    [[ -n $s_dead && -n $s_run && -n $s_flow ]] || die "missing log lines ($k run $run)"
    # "restored in N ms, running again; L key groups (..) loaded from workers'
    # local copies, S (..) from checkpoint storage"
    line=$(awk -v n="$lines_before" 'NR > n && index($0, "running again") { print; exit }' "$LOG")
    local restore_ms lg sg
    restore_ms=$(sed -n 's/.*restored in \([0-9]*\) ms.*/\1/p' <<<"$line")
    lg=$(sed -n 's/.*again; \([0-9]*\) key groups.*/\1/p' <<<"$line")
    sg=$(sed -n 's/.*local copies, \([0-9]*\) (.*/\1/p' <<<"$line")
    local d r f c
    d=$(ms_between "$t_kill" "$(sod_of "$s_dead")")
    r=$(ms_between "$t_kill" "$(sod_of "$s_run")")
    f=$(ms_between "$t_kill" "$(sod_of "$s_flow")")
    c=$(ms_between "$t_kill" "$t_rec")
    DEAD[$k]+=" $d" RESTORE[$k]+=" $restore_ms" RUNNING[$k]+=" $r" FLOWING[$k]+=" $f" RECORDS[$k]+=" $c"
    printf '%-8s %-8s %-9s %-4s %8s %8s %10s %11s %12s %14s %10s %12s\n' "$keys" "$rec" "$mode" "$run" \
        "$d" "$restore_ms" "$r" "$f" "$c" "${lg:--}" "${sg:--}" "$skeys"
    stop_local
    rm -rf "$TMP/state" # checkpoints of a large state: one run's at a time
}

for keys in $KEYS; do
    for run in $(seq 1 "$RUNS"); do
        for rec in $RECOVERY; do
            for mode in $MODES; do
                one_run "$keys" "$rec" "$mode" "$run"
            done
        done
    done
done

echo
printf '%-8s %-8s %-9s %8s %10s %10s %11s %12s\n' keys recovery mode dead_ms restore_ms running_ms \
    flowing_ms status_rec_ms
declare -A MED_FLOW MED_RESTORE
for keys in $KEYS; do
    for rec in $RECOVERY; do
        for mode in $MODES; do
            k="$keys $rec $mode"
            # shellcheck disable=SC2086
            MED_FLOW[$k]=$(median ${FLOWING[$k]})
            # shellcheck disable=SC2086
            MED_RESTORE[$k]=$(median ${RESTORE[$k]})
            # shellcheck disable=SC2086
            printf '%-8s %-8s %-9s %8s %10s %10s %11s %12s\n' "$keys" "$rec" "$mode" \
                "$(median ${DEAD[$k]})" "${MED_RESTORE[$k]}" "$(median ${RUNNING[$k]})" \
                "${MED_FLOW[$k]}" "$(median ${RECORDS[$k]})"
        done
    done
done
if [[ " $RECOVERY " == *" local "* && " $RECOVERY " == *" storage "* ]]; then
    echo
    for keys in $KEYS; do
        for mode in $MODES; do
            l="$keys local $mode" s="$keys storage $mode"
            echo "keys $keys, $mode: kill -> records flowing ${MED_FLOW[$l]} ms local vs ${MED_FLOW[$s]} ms storage" \
                "(ratio $(bench_ratio "${MED_FLOW[$l]}" "${MED_FLOW[$s]}")); restore ${MED_RESTORE[$l]} vs" \
                "${MED_RESTORE[$s]} ms (ratio $(bench_ratio "${MED_RESTORE[$l]}" "${MED_RESTORE[$s]}"))"
        done
    done
fi
