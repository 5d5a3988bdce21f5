#!/usr/bin/env bash
# bench/nexmark_output.sh - what `--output FILE` costs in Nexmark q0 and q1:
# the rows table in keyed state (BEFORE: a build without the merged path,
# e.g. main's) against part files merged at the end (AFTER), both next to
# the query's rows printed to stdout, in one run; then q0 with --output
# over BIG_EVENTS events on 2 workers, which must finish with no worker
# declared dead (the final write off the worker loop).
#
# For each query in QUERIES and each of stdout / BEFORE --output / AFTER
# --output, RUNS times (the best run counts):
#   eddy local --workers W --job nexmark --query Q --events N --parallelism W
#              --checkpoint-interval 2000 [--output FILE]
# events/s = N / wall time of the whole command (start, deploy and the
# final write included); per core = that / min(W, cores). The outputs of
# BEFORE and AFTER must be byte-identical. Prints a Markdown table.
#
# Environment: AFTER (default <repo>/build/eddy), BEFORE (required: the
# binary to compare against), EVENTS (2000000), BIG_EVENTS (8000000; 0
# skips), W (2), RUNS (2), QUERIES ("q0 q1"), OUT (bench/out).
set -euo pipefail
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$HERE/common.sh"
bench_args "$@"
ROOT=$(cd "$HERE/.." && pwd)
AFTER=${AFTER:-$ROOT/build/eddy}
BEFORE=${BEFORE:-}
EVENTS=${EVENTS:-2000000}
BIG_EVENTS=${BIG_EVENTS:-8000000}
W=${W:-2}
RUNS=${RUNS:-2}
QUERIES=${QUERIES:-"q0 q1"}
OUT=${OUT:-$HERE/out}
CORES=$(nproc)
USED=$(( W < CORES ? W : CORES ))
[[ -x $AFTER ]] || { echo "missing $AFTER; build first" >&2; exit 2; }
[[ -n $BEFORE && -x $BEFORE ]] || { echo "set BEFORE=/path/to/eddy (the build to compare)" >&2; exit 2; }
mkdir -p "$OUT"
work=$(mktemp -d "${TMPDIR:-/tmp}/eddy-nxout-XXXXXX")
trap 'rm -rf "$work"' EXIT
port=$((19000 + RANDOM % 2000))

# run BIN EVENTS LOG [--output FILE]: prints events/s, or fails
run() {
    local bin=$1 n=$2 log=$3
    shift 3
    local t0 t1
    t0=$(date +%s.%N)
    if ! "$bin" local --workers "$W" --control-port "$port" --http-port $((port + 1)) \
        --checkpoint-interval 2000 --job nexmark --query "$q" --events "$n" \
        --parallelism "$W" "$@" >/dev/null 2>"$log"; then
        echo "failed: $bin $q $*; see $log" >&2
        return 1
    fi
    t1=$(date +%s.%N)
    port=$((port + 2))
    awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }'
}

best() { # best of RUNS: the highest events/s
    local b=0 e i
    for ((i = 0; i < RUNS; i++)); do
        e=$(run "$@")
        (( e > b )) && b=$e
    done
    echo "$b"
}

md=$OUT/nexmark_output.md
{
    echo "Nexmark --output, $EVENTS generated events, $W workers, $CORES cores ($(date -u +%Y-%m-%d)); events/s per core, best of $RUNS"
    echo
    echo "| query | stdout | --output before (table) | --output after (merged parts) | after / before | after / stdout |"
    echo "|---|---|---|---|---|---|"
} >"$md"
for q in $QUERIES; do
    s=$(best "$AFTER" "$EVENTS" "$OUT/nxout-$q-stdout.log")
    b=$(best "$BEFORE" "$EVENTS" "$OUT/nxout-$q-before.log" --output "$work/before.tsv")
    a=$(best "$AFTER" "$EVENTS" "$OUT/nxout-$q-after.log" --output "$work/after.tsv")
    cmp -s "$work/before.tsv" "$work/after.tsv" ||
        { echo "$q: before and after outputs differ" >&2; exit 1; }
    echo "| $q | $((s / USED)) | $((b / USED)) | $((a / USED)) |" \
         "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1fx", a / b }') |" \
         "$(awk -v a="$a" -v b="$s" 'BEGIN { printf "%.2fx", a / b }') |" >>"$md"
done
if (( BIG_EVENTS > 0 )); then
    q=q0
    log=$OUT/nxout-big.log
    RUNS=1
    e=$(run "$AFTER" "$BIG_EVENTS" "$log" --output "$work/big.tsv")
    dead=$(grep -c "no heartbeat" "$log" || true)
    restores=$(grep -c "restor" "$log" || true)
    rows=$(wc -l <"$work/big.tsv")
    {
        echo
        echo "q0 --output, $BIG_EVENTS events, $W workers (after): $((e / USED)) events/s per core," \
             "$rows rows; log lines with \"no heartbeat\": $dead, with \"restor\": $restores"
    } >>"$md"
fi
cat "$md"
