#!/usr/bin/env bash
# bench/latency.sh - end-to-end record latency of wordcount, measured from
# outside, at several loads and during a rescale, next to a baseline path
# measured in the same run.
#
# build/latency_probe (bench/latency_probe.c) is a TCP server for
# `eddy local --job wordcount --socket`: it sends lines of one marker word
# `m<seq>` at a given rate and reads the changelog (`+I[m<seq>, 1]`) from
# eddy's stdout, a pipe; latency = time the row is read - time the line was
# written. Each load runs in a fresh `eddy local` (a backlog left by one load
# must not count against the next). LOADS lists the loads, in order:
#   max      lines as fast as eddy takes them for MAX_S seconds; the rate of
#            changelog rows read meanwhile is the maximum throughput R
#   P%       PHASE_S seconds at P percent of R (measured first if needed)
#   N        PHASE_S seconds at N lines/s (a positive integer)
#   rescale  10% of R; 2 s in, `eddy rescale wordcount count 3`
# Default LOADS="max 1% 10% 50% 90% 50 20000 rescale"; LOADS="50 20000" is
# the issue's targets (p99 < 2 ms) alone. An unknown or malformed load exits
# 2 before anything runs.
#
# BASELINE sets what each load (but max and rescale) is also run through,
# right after eddy at the same rate: `zmq` (default; build/latency_echo
# --zmq: the socket read, one ZeroMQ PUSH->PULL hop over loopback TCP
# between two threads and the changelog row written to the pipe: the path
# without the engine), `socket` (latency_echo without the ZeroMQ hop) or
# `none`. Prints the probe's line per run (lines/s written, rows/s read,
# lines sent and seen, p50/p99/p99.9/max latency in ms), then per load a
# line `load L eddy p50 A p99 B BASE p50 C p99 D ratio BASE/eddy p50 E p99 F`
# and the rescale's pause. RUNS (1) repeats each load (eddy then baseline).
#
# Environment: LOADS, BASELINE, RUNS, BUILD (build dir, default
# <repo>/build; Release for numbers), EDDY (the eddy binary, default
# $BUILD/eddy: point it at another build to compare), PROBE
# ($BUILD/latency_probe), ECHO ($BUILD/latency_echo), WORKERS (2),
# PARALLELISM (2), MAX_S (5), PHASE_S (10), EDDY_ARGS (more `eddy local`
# flags, e.g. "--checkpoint-interval 0"), LINEBUF=1 runs eddy under
# `stdbuf -oL` (for builds whose sink flushes its stdout only at
# checkpoints).
set -uo pipefail
# No flags: --help prints the header above; anything else is an error.
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$HERE/common.sh"
bench_args "$@"
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
EDDY=${EDDY:-$BUILD/eddy}
PROBE=${PROBE:-$BUILD/latency_probe}
ECHO=${ECHO:-$BUILD/latency_echo}
WORKERS=${WORKERS:-2}
PARALLELISM=${PARALLELISM:-2}
MAX_S=${MAX_S:-5}
PHASE_S=${PHASE_S:-10}
RUNS=${RUNS:-1}
LOADS=${LOADS:-"max 1% 10% 50% 90% 50 20000 rescale"}
BASELINE=${BASELINE:-zmq}
read -ra EXTRA <<<"${EDDY_ARGS:-}"

need_max=0
for l in $LOADS; do
    case $l in
        max|rescale) need_max=1 ;;
        *%) [[ ${l%\%} =~ ^[0-9]+$ && ${l%\%} -gt 0 && ${l%\%} -le 100 ]] ||
                { echo "latency.sh: bad load '$l' in LOADS (a percentage is 1%..100%)" >&2; exit 2; }
            need_max=1 ;;
        *) [[ $l =~ ^[1-9][0-9]*$ ]] ||
                { echo "latency.sh: bad load '$l' in LOADS (max, P%, rescale or lines/s)" >&2; exit 2; } ;;
    esac
done
[[ -n ${LOADS// /} ]] || { echo "latency.sh: LOADS is empty" >&2; exit 2; }
case $BASELINE in
    zmq) BASE_CMD=("$ECHO" --zmq '127.0.0.1:{PORT}') ;;
    socket) BASE_CMD=("$ECHO" '127.0.0.1:{PORT}') ;;
    none) BASE_CMD=() ;;
    *) echo "latency.sh: bad BASELINE '$BASELINE' (zmq, socket or none)" >&2; exit 2 ;;
esac
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "latency.sh: bad RUNS '$RUNS'" >&2; exit 2; }

bench_need_bin "$EDDY" "$PROBE"
[[ $BASELINE == none ]] || bench_need_bin "$ECHO"

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
        "${EXTRA[@]}" --job wordcount --socket '127.0.0.1:{PORT}' 2>>"$TMP/eddy.log") ||
        [[ -z $line ]]; then
        echo "phase $1 failed; eddy's log:" >&2
        tail -20 "$TMP/eddy.log" >&2
        return 1
    fi
    echo "$line"
}

run_base() { # NAME RATE SECONDS: the baseline path at the same rate
    local line
    if ! line=$("$PROBE" -w 15 -p "$1,$2,$3" -- "${BASE_CMD[@]}" 2>"$TMP/base.log") ||
        [[ -z $line ]]; then
        echo "baseline $1 failed:" >&2
        tail -5 "$TMP/base.log" >&2
        return 1
    fi
    echo "$line"
}

field() { # LINE NAME: the value after NAME in a probe line
    awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' <<<"$1"
}

R=""
if ((need_max)); then
    max_line=$(run max 0 "$MAX_S") || exit 1
    echo "$max_line"
    R=$(field "$max_line" out)
    if [[ -z $R || $R == 0 ]]; then
        echo "no maximum throughput measured" >&2
        exit 1
    fi
fi
pct() { awk -v r="$R" -v p="$1" 'BEGIN { v = r * p / 100; if (v < 1) v = 1; printf "%.0f", v }'; }

summary=()
for l in $LOADS; do
    [[ $l == max ]] && continue
    for ((r = 0; r < RUNS; r++)); do
        if [[ $l == rescale ]]; then
            : >"$TMP/rescale.log"
            run rescale "$(pct 10)" "$PHASE_S" \
                "sleep 2; $EDDY rescale wordcount count 3 --coordinator tcp://127.0.0.1:@CONTROL@ >>$TMP/rescale.log 2>&1"
            [[ -s $TMP/rescale.log ]] && echo "rescale: $(tr '\n' ' ' <"$TMP/rescale.log")"
            continue
        fi
        if [[ $l == *% ]]; then rate=$(pct "${l%\%}"); name=$l; else rate=$l; name=at$l; fi
        e=$(run "$name" "$rate" "$PHASE_S") || continue
        echo "$e"
        line="load $l ($rate lines/s) eddy p50 $(field "$e" p50) p99 $(field "$e" p99)"
        if [[ $BASELINE != none ]] && b=$(run_base "$name-$BASELINE" "$rate" "$PHASE_S"); then
            echo "$b"
            line+=" $BASELINE p50 $(field "$b" p50) p99 $(field "$b" p99)"
            line+=" ratio $BASELINE/eddy p50 $(bench_ratio "$(field "$b" p50)" "$(field "$e" p50)" 3)"
            line+=" p99 $(bench_ratio "$(field "$b" p99)" "$(field "$e" p99)" 3)"
        fi
        summary+=("$line")
    done
done
printf '%s\n' "${summary[@]}"
echo "machine after: load average $(cut -d' ' -f1-3 /proc/loadavg)"
