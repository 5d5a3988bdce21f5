#!/usr/bin/env bash
# bench/wordcount.sh - eddy wordcount throughput vs a single-thread C baseline.
#
# Generates (once, cached in bench/out/) a deterministic ~100 MB text with a
# ~50k-word Zipf vocabulary, then times, each RUNS times (best kept):
#   baseline   build/wc_baseline (one process, one thread)
#   ckpt=off   eddy local --workers 2 --parallelism 2 --checkpoint-interval 0
#   ckpt=2000  same with the default 2000 ms checkpoint interval
#   ckpt=1000  same with 1000 ms
#   no-local-agg  ckpt=2000 with --no-local-aggregation: every word is
#              shuffled, not per-batch partial counts (local-global off)
#   curve      ckpt=2000 with --keys (eddy keygen): CURVE on every socket
#   no-local-agg+curve  no-local-agg with --keys (every word encrypted once)
# The CURVE ratios (with keys / without, throughput) are printed last.
# Every eddy output must be byte-identical to the baseline's, or the script
# fails. words/s = total words / wall time of the whole command (startup,
# deploy and writing the output included).
#
# Environment: BUILD (build dir, default <repo>/build), MB (100), VOCAB (50000),
# RUNS (3), WORKERS (2), PARALLELISM (2).
set -euo pipefail
# No flags: --help prints the header above; anything else is an error.
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
source "$HERE/common.sh"
bench_args "$@"
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
MB=${MB:-100}
VOCAB=${VOCAB:-50000}
RUNS=${RUNS:-3}
WORKERS=${WORKERS:-2}
PARALLELISM=${PARALLELISM:-2}

bench_need_bin "$BUILD/eddy" "$BUILD/gen_text" "$BUILD/wc_baseline"

mkdir -p "$HERE/out"
TEXT=$HERE/out/text-${MB}m-v${VOCAB}.txt
if [[ ! -s $TEXT ]]; then
    echo "generating $TEXT"
    "$BUILD/gen_text" "$TEXT.part" "$MB" "$VOCAB" 42 >/dev/null
    mv "$TEXT.part" "$TEXT"
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/eddy-bench-wc.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# Ports of our own so parallel runs of other eddy instances do not collide.
PORT=$((20000 + RANDOM % 20000))

now() { date +%s.%N; }

cat "$TEXT" >/dev/null # warm the page cache

# Baseline.
best_base=
base_line=
for ((i = 1; i <= RUNS; i++)); do
    t0=$(now)
    line=$("$BUILD/wc_baseline" "$TEXT" "$TMP/baseline.out")
    t1=$(now)
    wall=$(echo "$t1 - $t0" | bc -l)
    if [[ -z $best_base ]] || (($(echo "$wall < $best_base" | bc -l))); then
        best_base=$wall
        base_line=$line
    fi
done
WORDS=$(awk '{print $2}' <<<"$base_line")
DISTINCT=$(awk '{print $4}' <<<"$base_line")

declare -A best
run_eddy() { # name interval [extra flags]
    local name=$1 interval=$2 i t0 t1 wall
    shift 2
    for ((i = 1; i <= RUNS; i++)); do
        PORT=$((PORT + 2))
        rm -f "$TMP/eddy.out"
        t0=$(now)
        "$BUILD/eddy" local --workers "$WORKERS" --job wordcount --input "$TEXT" \
            --output "$TMP/eddy.out" --parallelism "$PARALLELISM" \
            --checkpoint-interval "$interval" --quiet "$@" \
            --control-port "$PORT" --http-port $((PORT + 1)) >"$TMP/eddy.log" 2>&1 || {
            echo "eddy ($name) failed:" >&2
            tail -20 "$TMP/eddy.log" >&2
            exit 1
        }
        t1=$(now)
        if ! cmp -s "$TMP/eddy.out" "$TMP/baseline.out"; then
            echo "eddy ($name) output differs from the baseline:" >&2
            diff "$TMP/baseline.out" "$TMP/eddy.out" | head -10 >&2
            exit 1
        fi
        wall=$(echo "$t1 - $t0" | bc -l)
        if [[ -z ${best[$name]:-} ]] || (($(echo "$wall < ${best[$name]}" | bc -l))); then
            best[$name]=$wall
        fi
    done
}

run_eddy ckpt=off 0
run_eddy ckpt=2000 2000
run_eddy ckpt=1000 1000
run_eddy no-local-agg 2000 --no-local-aggregation
"$BUILD/eddy" keygen "$TMP/keys" >/dev/null
run_eddy curve 2000 --keys "$TMP/keys"
run_eddy no-local-agg+curve 2000 --no-local-aggregation --keys "$TMP/keys"

wps() { echo "$WORDS / $1" | bc -l; }
base_wps=$(wps "$best_base")
off_wps=$(wps "${best[ckpt=off]}")

echo "wordcount: $(stat -c %s "$TEXT") bytes, $WORDS words, $DISTINCT distinct," \
    "best of $RUNS, eddy --workers $WORKERS --parallelism $PARALLELISM, $(nproc) cpus"
echo "outputs: all eddy runs byte-identical to the baseline"
printf '%-18s %9s %14s %12s %12s\n' config wall_s words_per_s vs_baseline vs_ckpt_off
printf '%-18s %9.3f %14.0f %12.3f %12s\n' baseline "$best_base" "$base_wps" 1 -
for name in ckpt=off ckpt=2000 ckpt=1000 no-local-agg curve no-local-agg+curve; do
    w=$(wps "${best[$name]}")
    printf '%-18s %9.3f %14.0f %12.3f %12.3f\n' "$name" "${best[$name]}" "$w" \
        "$(echo "$w / $base_wps" | bc -l)" "$(echo "$w / $off_wps" | bc -l)"
done
echo "(baseline's own timer: $base_line)"
printf 'CURVE on/off throughput: %.3f (ckpt=2000), %.3f (no-local-agg)\n' \
    "$(echo "${best[ckpt=2000]} / ${best[curve]}" | bc -l)" \
    "$(echo "${best[no-local-agg]} / ${best[no-local-agg+curve]}" | bc -l)"
