#!/usr/bin/env bash
# bench/nexmark_windows.sh - what windows cost per record (issue 28 item 3):
# Nexmark q5 (sliding 10 s / 2 s windows, kept as panes after the change)
# and q7 (tumbling windows whose "highest bids" steps keep only the best
# rows after it) in BEFORE (a build without either, e.g. main's) against
# AFTER, interleaved in one run, with the ratios.
#
# For each query in QUERIES, ROUNDS times, BEFORE then AFTER:
#   eddy local --workers W --job nexmark --query Q --events N --parallelism W
#              --checkpoint-interval 2000 --output FILE
# timed by /usr/bin/time: wall seconds and the peak RSS of the largest
# process (a worker: its window state). events/s = N / wall time of the
# whole command (start, deploy and the final write included); per core =
# that / min(W, cores). BEFORE's and AFTER's files must be byte-identical
# (the script fails otherwise). Prints a Markdown table (best and median
# events/s per core of each, after / before of both, peak RSS medians).
#
# Environment: AFTER (default <repo>/build/eddy), BEFORE (required), EVENTS
# (2000000), W (2), ROUNDS (3), QUERIES ("q5 q7"), OUT (bench/out).
set -euo pipefail
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$HERE/common.sh"
bench_args "$@"
ROOT=$(cd "$HERE/.." && pwd)
AFTER=${AFTER:-$ROOT/build/eddy}
BEFORE=${BEFORE:-}
EVENTS=${EVENTS:-2000000}
W=${W:-2}
ROUNDS=${ROUNDS:-3}
QUERIES=${QUERIES:-"q5 q7"}
OUT=${OUT:-$HERE/out}
CORES=$(nproc)
USED=$(( W < CORES ? W : CORES ))
bench_need_bin "$AFTER" /usr/bin/time
[[ -n $BEFORE && -x $BEFORE ]] || { echo "set BEFORE=/path/to/eddy (the build to compare)" >&2; exit 2; }
mkdir -p "$OUT"
work=$(mktemp -d "${TMPDIR:-/tmp}/eddy-nxwin-XXXXXX")
trap 'rm -rf "$work"' EXIT
port=$((21000 + RANDOM % 2000))

# timed BIN Q TAG: appends "events/s-per-core peak-rss-kB" to $work/Q-TAG
timed() {
    local bin=$1 q=$2 tag=$3 log=$OUT/nxwin-$2-$3.log
    if ! /usr/bin/time -f "%e %M" -o "$work/time" "$bin" local --workers "$W" \
        --control-port "$port" --http-port $((port + 1)) --checkpoint-interval 2000 \
        --job nexmark --query "$q" --events "$EVENTS" --parallelism "$W" \
        --output "$work/$q-$tag.tsv" >/dev/null 2>"$log"; then
        echo "failed: $bin $q; see $log" >&2
        exit 1
    fi
    port=$((port + 2))
    read -r secs rss <"$work/time"
    awk -v n="$EVENTS" -v s="$secs" -v u="$USED" -v r="$rss" \
        'BEGIN { printf "%.0f %d\n", n / s / u, r }' >>"$work/$q-$tag"
}

# stat FILE COLUMN best|median
stat() {
    sort -n -k"$2" "$1" | awk -v c="$2" -v m="$3" '{ v[NR] = $c }
        END { if (m == "best") print v[NR]; else print v[int((NR + 1) / 2)] }'
}

md=$OUT/nexmark_windows.md
{
    echo "Nexmark windows, $EVENTS generated events, $W workers, $CORES cores," \
         "$ROUNDS interleaved rounds ($(date -u +%Y-%m-%d)); events/s per core"
    echo
    echo "| query | before best | after best | after / before (best) | before median | after median | after / before (median) | peak RSS before / after (MB, median) |"
    echo "|---|---|---|---|---|---|---|---|"
} >"$md"
for q in $QUERIES; do
    for ((i = 0; i < ROUNDS; i++)); do
        timed "$BEFORE" "$q" before
        timed "$AFTER" "$q" after
        cmp -s "$work/$q-before.tsv" "$work/$q-after.tsv" ||
            { echo "$q: before and after outputs differ" >&2; exit 1; }
    done
    bb=$(stat "$work/$q-before" 1 best); ab=$(stat "$work/$q-after" 1 best)
    bm=$(stat "$work/$q-before" 1 median); am=$(stat "$work/$q-after" 1 median)
    br=$(stat "$work/$q-before" 2 median); ar=$(stat "$work/$q-after" 2 median)
    awk -v q="$q" -v bb="$bb" -v ab="$ab" -v bm="$bm" -v am="$am" -v br="$br" -v ar="$ar" \
        'BEGIN { printf "| %s | %d | %d | %.2fx | %d | %d | %.2fx | %.0f / %.0f |\n",
                 q, bb, ab, ab / bb, bm, am, am / bm, br / 1024, ar / 1024 }' >>"$md"
done
cat "$md"
