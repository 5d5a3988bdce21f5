#!/usr/bin/env bash
# bench/nexmark.sh - Nexmark throughput of eddy, per core, next to a
# single-thread C baseline of the same query measured in the same run and
# to Flink's published per-core figures (Nexmark GUIDE_V1: 8 TaskManagers
# on 3 x 8 cores; issue 28).
#
# The generator is timed apart from the queries: `eddy nexmark generate
# --events N` writes the events once (its time is printed, `gen_s`), then
# for each query in QUERIES and each worker count in WORKERS_LIST, RUNS
# times (best kept):
#   eddy local --workers W --job nexmark --query Q --input EVENTS_FILE
#              --parallelism W --checkpoint-interval 2000  (rows to stdout)
# events/s = N / wall time of the whole command (startup and deploy
# included); per core = that / min(W, cores). The baseline
# (build/nexmark_baseline: parse + compute in one thread over the same
# events in memory, generation not timed; bench/nexmark_baseline.c) runs
# every query, best of BASE_RUNS (3: it is cheap). eddy's stdout rows are
# counted and must equal the baseline's row count: a difference is marked
# in the table and the script exits 1 after it; unless the job restored (a
# worker declared dead on a loaded machine): stdout is at least once, so
# the row is then marked "restored" and its count not checked. Prints a
# Markdown table (eddy events/s per core, baseline events/s, eddy per core
# / baseline, Flink per core, eddy per core / Flink) and writes OUT/nexmark.md,
# OUT/nexmark.dat and OUT/nexmark.png (gnuplot).
#
# With SQL=1 (the default) each query that has Flink's SQL text in
# examples/sql/ runs that too, the same way (`eddy local --sql Q.sql
# --input EVENTS_FILE --parallelism W`, its blackhole sink made a print
# sink so that its rows reach stdout as the C query's do, and are counted
# and checked the same way), and the table adds its events/s per core and
# SQL / C query: what compiling to a pipeline costs against the query
# written in C on the same runtime.
#
# Environment: BUILD (default <repo>/build; use a Release build), EVENTS
# (2000000), WORKERS_LIST ("1 2"), QUERIES ("q0 q1 q2 q3 q5 q7 q8 q11"),
# RUNS (1), BASE_RUNS (3), SQL (1), OUT (bench/out).
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
RUNS=${RUNS:-1}
BASE_RUNS=${BASE_RUNS:-3}
SQL=${SQL:-1}
OUT=${OUT:-$HERE/out}
CORES=$(nproc)

bench_need_bin "$BUILD/eddy" "$BUILD/nexmark_baseline"
mkdir -p "$OUT"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/eddy-bench-nexmark.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

declare -A FLINK=([q0]=155000 [q1]=158000 [q2]=175000 [q3]=152000 [q5]=22000 [q7]=12000
                  [q8]=146000 [q11]=40000)
for q in $QUERIES; do
    [[ -n ${FLINK[$q]:-} ]] || { echo "nexmark.sh: unknown query '$q' in QUERIES" >&2; exit 2; }
done

bench_machine
events=$TMP/events.csv
t0=$(date +%s.%N)
"$BUILD/eddy" nexmark generate --events "$EVENTS" --output "$events"
t1=$(date +%s.%N)
gen_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
echo "generator: $EVENTS events in ${gen_s} s (not part of any figure below)"

declare -A BASE BASE_ROWS
while read -r _ q rest; do
    BASE[$q]=$(sed -n 's/.*events_per_s=\([0-9.e+]*\).*/\1/p' <<<"$rest")
    BASE_ROWS[$q]=$(sed -n 's/.*rows=\([0-9]*\).*/\1/p' <<<"$rest")
done < <("$BUILD/nexmark_baseline" --events "$EVENTS" --runs "$BASE_RUNS" --queries "$QUERIES" |
         grep '^baseline')

port=$((17000 + RANDOM % 2000))
mismatch=0
dat=$OUT/nexmark.dat
md=$OUT/nexmark.md
: >"$dat"
sql_cols="" sql_sep=""
if [[ $SQL == 1 ]]; then sql_cols=" SQL per core | SQL / C query |" sql_sep="---|---|"; fi
{
    echo "Nexmark, $EVENTS events from a file, $CORES cores, load average" \
         "$(cut -d' ' -f1 /proc/loadavg) ($(date -u +%Y-%m-%d)); generator ${gen_s} s apart"
    echo
    echo "| query | workers | eddy events/s | eddy per core | C baseline events/s (1 core) | eddy per core / C | Flink per core | eddy per core / Flink | rows |$sql_cols"
    echo "|---|---|---|---|---|---|---|---|---|$sql_sep"
} >"$md"

# run_eddy NAME Q W ARGS...: eddy local with ARGS, RUNS times; sets best
# (seconds, the fastest run) and rows (stdout lines, checked against the
# baseline's count unless the job restored).
run_eddy() {
    local name=$1 q=$2 w=$3 r s t0 t1 log
    shift 3
    log=$OUT/nexmark-$name-$w.log
    best=""
    for ((r = 0; r < RUNS; r++)); do
        t0=$(date +%s.%N)
        if ! "$BUILD/eddy" local --workers "$w" --control-port "$port" --http-port $((port + 1)) \
            --quiet --checkpoint-interval 2000 "$@" --input "$events" --parallelism "$w" \
            2>"$log" | wc -l >"$TMP/rows"; then
            echo "nexmark $name with $w workers failed; see $log" >&2
            exit 1
        fi
        t1=$(date +%s.%N)
        port=$((port + 2))
        s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')
        if [[ -z $best ]] || awk -v a="$s" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$s; fi
        rows=$(<"$TMP/rows")
        if grep -q "restoring" "$log"; then
            # stdout is at least once: a restore prints rows again
            rows="$rows (restored)"
            echo "nexmark $name with $w workers: the job restored (see $log); its rows are not checked" >&2
        elif [[ -n ${BASE_ROWS[$q]:-} && $rows != "${BASE_ROWS[$q]}" ]]; then
            echo "nexmark $name with $w workers: $rows rows, the baseline ${BASE_ROWS[$q]}" >&2
            rows="$rows (baseline ${BASE_ROWS[$q]}!)"
            mismatch=1
        fi
    done
}

for q in $QUERIES; do
    sql=""
    if [[ $SQL == 1 && -f $ROOT/examples/sql/$q.sql ]]; then
        sql=$TMP/$q.sql
        sed "s/'connector' *= *'blackhole'/'connector' = 'print'/" "$ROOT/examples/sql/$q.sql" >"$sql"
    fi
    for w in $WORKERS_LIST; do
        used=$(( w < CORES ? w : CORES ))
        run_eddy "$q" "$q" "$w" --job nexmark --query "$q"
        eps=$(awk -v n="$EVENTS" -v s="$best" 'BEGIN { printf "%.0f", n / s }')
        per=$(( eps / used ))
        c_rows=$rows
        sql_txt="" sql_per=0
        if [[ -n $sql ]]; then
            run_eddy "$q-sql" "$q" "$w" --sql "$sql"
            sql_per=$(( $(awk -v n="$EVENTS" -v s="$best" 'BEGIN { printf "%.0f", n / s }') / used ))
            sql_txt=" $sql_per | $(bench_ratio "$sql_per" "$per")x |"
            [[ $rows == "$c_rows" ]] || sql_txt=" $sql_per ($rows rows) | $(bench_ratio "$sql_per" "$per")x |"
        elif [[ $SQL == 1 ]]; then
            sql_txt=" - | - |"
        fi
        base=${BASE[$q]:-0}
        base_txt=$(printf "%.0f" "$base")
        flink=${FLINK[$q]}
        echo "| $q | $w | $eps | $per | $base_txt | $(bench_ratio "$per" "$base")x | $flink |" \
             "$(bench_ratio "$per" "$flink" 1)x | $c_rows |$sql_txt" >>"$md"
        echo "$q $w $per $flink $base $sql_per" >>"$dat"
    done
done
cat "$md"
if command -v gnuplot >/dev/null; then
    gnuplot <<GP
set terminal pngcairo size 1100,600 font "Sans,11"
set output "$OUT/nexmark.png"
set title "Nexmark events/s per core: eddy (1 and 2 workers), the one-thread C baseline, Flink's published figures"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set ylabel "events/s per core (log)"
set key top right
plot "< awk '\$2==1' $dat" using 3:xtic(1) title "eddy, 1 worker", \
     "< awk '\$2==2' $dat" using 3 title "eddy, 2 workers", \
     "< awk '\$2==1' $dat" using 5 title "C baseline (1 thread)", \
     "< awk '\$2==1' $dat" using 4 title "Flink (GUIDE_V1)"
GP
    echo "wrote $md and $OUT/nexmark.png"
fi
exit "$mismatch"
