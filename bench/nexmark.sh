#!/usr/bin/env bash
# bench/nexmark.sh - Nexmark throughput of eddy, per core, next to a
# single-process C baseline measured in the same run and to Flink's
# published per-core figures (Nexmark GUIDE_V1: 8 TaskManagers on 3 x 8 cores).
#
# For each query in QUERIES and each worker count in WORKERS_LIST:
#   eddy local --workers W --job nexmark --query Q --events N --parallelism W
#              --checkpoint-interval 2000   (rows printed to stdout, discarded)
# events/s = N / wall time of the whole command (startup and deploy
# included); per core = that / min(W, cores). The baseline
# (build/nexmark_baseline: parse + compute in one thread, generation not
# timed) covers q0, q1 and q5. Prints a Markdown table and writes
# OUT/nexmark.md, OUT/nexmark.dat and OUT/nexmark.png (gnuplot).
#
# Environment: BUILD (default <repo>/build; use a Release build), EVENTS
# (2000000), WORKERS_LIST ("1 2"), QUERIES ("q0 q1 q2 q3 q5 q7 q8 q11"),
# OUT (bench/out).
set -euo pipefail
# No flags: --help prints the header above; anything else is an error.
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$HERE/common.sh"
bench_args "$@"
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
EVENTS=${EVENTS:-2000000}
WORKERS_LIST=${WORKERS_LIST:-"1 2"}
QUERIES=${QUERIES:-"q0 q1 q2 q3 q5 q7 q8 q11"}
OUT=${OUT:-$HERE/out}
CORES=$(nproc)

bench_need_bin "$BUILD/eddy" "$BUILD/nexmark_baseline"
mkdir -p "$OUT"

declare -A FLINK=([q0]=155000 [q1]=158000 [q2]=175000 [q3]=152000 [q5]=22000 [q7]=12000
                  [q8]=146000 [q11]=40000)
declare -A BASE
while read -r _ q rest; do
    eps=$(sed -n 's/.*events_per_s=\([0-9.e+]*\).*/\1/p' <<<"$rest")
    BASE[$q]=$eps
done < <("$BUILD/nexmark_baseline" --events "$EVENTS" --runs 1 | grep '^baseline')

port=$((17000 + RANDOM % 2000))
dat=$OUT/nexmark.dat
md=$OUT/nexmark.md
: >"$dat"
{
    echo "Nexmark, $EVENTS generated events, $CORES cores ($(date -u +%Y-%m-%d))"
    echo
    echo "| query | workers | events/s | events/s per core | baseline events/s (1 core) | vs baseline per core | Flink per core | vs Flink per core |"
    echo "|---|---|---|---|---|---|---|---|"
} >"$md"
for q in $QUERIES; do
    for w in $WORKERS_LIST; do
        used=$(( w < CORES ? w : CORES ))
        t0=$(date +%s.%N)
        if ! "$BUILD/eddy" local --workers "$w" --control-port "$port" --http-port $((port + 1)) \
            --quiet --checkpoint-interval 2000 --job nexmark --query "$q" --events "$EVENTS" \
            --parallelism "$w" >/dev/null 2>"$OUT/nexmark-$q-$w.log"; then
            echo "nexmark $q with $w workers failed; see $OUT/nexmark-$q-$w.log" >&2
            exit 1
        fi
        t1=$(date +%s.%N)
        eps=$(awk -v n="$EVENTS" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')
        per=$(( eps / used ))
        base=${BASE[$q]:-}
        vs_base="-"; base_txt="-"
        if [[ -n $base ]]; then
            base_txt=$(printf "%.0f" "$base")
            vs_base=$(awk -v a="$per" -v b="$base" 'BEGIN { printf "%.2fx", a / b }')
        fi
        flink=${FLINK[$q]}
        vs_flink=$(awk -v a="$per" -v b="$flink" 'BEGIN { printf "%.1fx", a / b }')
        echo "| $q | $w | $eps | $per | $base_txt | $vs_base | $flink | $vs_flink |" >>"$md"
        echo "$q $w $per $flink ${base:-0}" >>"$dat"
        port=$((port + 2))
    done
done
cat "$md"
if command -v gnuplot >/dev/null; then
    gnuplot <<GP
set terminal pngcairo size 1100,600 font "Sans,11"
set output "$OUT/nexmark.png"
set title "Nexmark events/s per core: eddy (1 and 2 workers) vs Flink's published figures"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel "events/s per core (log)"
set key top right
plot "< awk '\$2==1' $dat" using 3:xtic(1) title "eddy, 1 worker", \
     "< awk '\$2==2' $dat" using 3 title "eddy, 2 workers", \
     "< awk '\$2==1' $dat" using 4 title "Flink (GUIDE_V1)"
GP
    echo "wrote $md and $OUT/nexmark.png"
fi
