#!/usr/bin/env bash
# bench/pipeline_vs_c.sh - what a declarative pipeline costs against the
# same query written in C: for each Nexmark query in QUERIES, the spec
# examples/pipelines/Q.yaml (`eddy local --pipeline`) and the C job
# (`eddy local --job nexmark --query Q`) read the same generated events
# file, with one worker and parallelism 1, and must write the same rows.
#
# How (bench/rounds.sh): the runs are interleaved, ROUNDS rounds of
# "c-Q spec-Q" for every query plus a start-up run (the q0 spec on 100
# events); each run is timed by bash's time. The figure is CPU seconds
# (user + system) of the whole `eddy local`, whose median over the rounds
# is compared: spec/C = median(spec) / median(C), the pipeline's cost in
# units of the C query's (1.00 = as cheap), with the min..max of the
# per-round ratios; wall-clock medians are printed next to it.
#
# With BEFORE=dir (another build, e.g. of main) every round also runs that
# build's eddy on the same queries, and the table gets its spec/C next to
# this build's and the ratio of the two builds' spec CPU times: a change to
# the pipeline code measured before and after in the same run.
#
# Usage: bench/pipeline_vs_c.sh [--long]   (~2 min, ~4.5 min with BEFORE;
#                                           --long: 3x the rounds)
# Environment: BUILD (default <repo>/build; Release or RelWithDebInfo),
# BEFORE (unset), EVENTS (500000), ROUNDS (3), QUERIES ("q1 q2 q5"),
# OUT (bench/out).
set -euo pipefail

HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
EVENTS=${EVENTS:-500000}
ROUNDS=${ROUNDS:-3}
QUERIES=${QUERIES:-"q1 q2 q5"}
OUT=${OUT:-$HERE/out}
source "$HERE/rounds.sh"
rounds_setup "$@"
[[ -x $BUILD/eddy ]] || { echo "missing $BUILD/eddy; build first (Release)" >&2; exit 2; }
declare -A EDDY=([now]=$BUILD/eddy)
BUILDS=now
if [[ -n ${BEFORE:-} ]]; then
    [[ -x $BEFORE/eddy ]] || { echo "missing $BEFORE/eddy" >&2; exit 2; }
    EDDY[before]=$BEFORE/eddy
    BUILDS="before now"
fi

events=$OUT/nexmark-events-$EVENTS.csv
if [[ ! -s $events ]]; then
    "$BUILD/eddy" nexmark generate --events "$EVENTS" --output "$events.tmp"
    mv "$events.tmp" "$events"
fi
head -n 100 "$events" >"$TMP/startup.csv"

port=$((17000 + RANDOM % 2000))
local_run() { # build label input args...
    local eddy=${EDDY[$1]} label=$2 in=$3; shift 3
    rounds_time "$label" "$eddy" local --workers 1 --control-port "$port" \
        --http-port $((port + 1)) --quiet --input "$in" --output "$TMP/$label.tsv" \
        --parallelism 1 "$@"
    port=$((port + 2))
}
t0=$(date +%s)
for ((r = 1; r <= ROUNDS; r++)); do
    for q in $QUERIES; do
        for b in $BUILDS; do
            local_run "$b" "c-$q-$b" "$events" --job nexmark --query "$q"
            local_run "$b" "spec-$q-$b" "$events" --pipeline "$ROOT/examples/pipelines/$q.yaml"
            cmp -s "$TMP/c-$q-$b.tsv" "$TMP/spec-$q-$b.tsv" ||
                { echo "$q ($b): the spec's rows differ from the C query's" >&2; exit 1; }
        done
    done
    local_run now startup "$TMP/startup.csv" --pipeline "$ROOT/examples/pipelines/q0.yaml"
    echo "round $r/$ROUNDS done ($(( $(date +%s) - t0 )) s)" >&2
done

md=$OUT/pipeline_vs_c.md
{
    echo "bench/pipeline_vs_c: $EVENTS Nexmark events, $ROUNDS interleaved rounds, medians; 1 worker,"
    echo "parallelism 1, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end ($(date -u '+%Y-%m-%d %H:%M UTC'))."
    echo "spec/C = median(spec) / median(C query) of CPU seconds (user + system) of the whole eddy local"
    echo "(in brackets the min..max of the per-round ratios); wall seconds likewise. Start-up (100 events):"
    echo "$(rounds_median startup cpu) CPU s, $(rounds_median startup wall) wall s."
    echo
    echo "| query | build | C CPU s | spec CPU s | spec/C (CPU) | C wall s | spec wall s | spec/C (wall) |"
    echo "|---|---|---|---|---|---|---|---|"
    for q in $QUERIES; do
        for b in $BUILDS; do
            # rounds_ratio/spread give base/label; spec/C is its inverse.
            c=c-$q-$b sp=spec-$q-$b
            cs=$(rounds_spread "$c" "$sp" cpu); ws=$(rounds_spread "$c" "$sp" wall)
            echo "| $q | $b | $(rounds_median "$c" cpu) | $(rounds_median "$sp" cpu) | $(rounds_ratio "$c" "$sp" cpu) (${cs/ /..}) | $(rounds_median "$c" wall) | $(rounds_median "$sp" wall) | $(rounds_ratio "$c" "$sp" wall) (${ws/ /..}) |"
        done
    done
    if [[ -n ${BEFORE:-} ]]; then
        echo
        echo "Spec CPU time, this build / BEFORE ($BEFORE): ratio of medians, per-round min..max in brackets (< 1: this build is cheaper):"
        for q in $QUERIES; do
            sp=$(rounds_spread "spec-$q-before" "spec-$q-now" cpu)
            echo "- $q: $(rounds_ratio "spec-$q-before" "spec-$q-now" cpu) (${sp/ /..})"
        done
    fi
} >"$md"
cat "$md"
