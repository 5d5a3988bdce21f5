#!/usr/bin/env bash
# bench/reorder.sh - operator reordering (issue 12's bench/reorder): a
# pipeline with an expensive map (a POSIX regex over a ~300-byte string)
# and a 1%-selective filter written in the bad order (map first), run as
#   hand      the filter written first (the order a careful author picks)
#   off       the bad order with --no-optimize (as written, one operator each)
#   on        the bad order, optimized (filter moved before the map, fused)
# and, for the adaptive order, two filters (each a substring search of a
# ~200-byte field) whose selectivities swap halfway through the input
# (99%/1%, then 1%/99%), before the same map:
#   adaptive  written with the first half's unselective filter first; the
#             eddy reorders them as the data changes
#   hand2     the same input with the first half's selective filter written
#             first (right for half the input, wrong for the other half:
#             the best any one static order can do)
# records/s = lines / wall time of the whole `eddy local` (start and deploy
# included), best of RUNS. Ratios are to `hand` (and adaptive also to
# hand2) measured in the same run. Every output is compared with its
# hand-ordered twin; the script fails if they differ.
#
# Environment: BUILD (default <repo>/build; use a Release build), LINES
# (200000), RUNS (3), OUT (bench/out).
set -euo pipefail

HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
LINES=${LINES:-200000}
RUNS=${RUNS:-3}
OUT=${OUT:-$HERE/out}
[[ -x $BUILD/eddy ]] || { echo "missing $BUILD/eddy; build first (Release)" >&2; exit 2; }
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# id,key,x,y,body: key % 100 == 7 for 1% of the lines; x ends in 'needle'
# for 99% of the first half and 1% of the second, y the other way round;
# body is ~300 bytes of letters the regex has to walk through.
input=$OUT/reorder-$LINES.csv
if [[ ! -s $input ]]; then
    awk -v n="$LINES" 'BEGIN {
        srand(42);
        pad = ""; for (i = 0; i < 190; i++) pad = pad "abcdefghij" ;
        for (i = 0; i < n; i++) {
            common = (i % 100) != 0; rare = (i % 97) == 0; first = i < n / 2;
            x = substr(pad, 1 + i % 7, 194) ((first ? common : rare) ? "needle" : "nestle");
            y = substr(pad, 1 + i % 5, 194) ((first ? rare : common) ? "needle" : "nestle");
            body = "";
            for (k = 0; k < 30; k++) body = body sprintf("%c%c%c%c%c%c%c%c%c ", 97 + int(rand() * 26),
                97 + int(rand() * 26), 97 + int(rand() * 26), 97 + int(rand() * 26), 97 + int(rand() * 26),
                97 + int(rand() * 26), 97 + int(rand() * 26), 97 + int(rand() * 26), 97 + int(rand() * 26));
            printf "%d,%d,%s,%s,%s\n", i, int(rand() * 1000000), x, y, body;
        }
    }' >"$input"
fi

REGEX="'([a-m]+[n-z]+)+q[a-z]*z ([a-z]+ )*x'"
MAP="  - map: {id: id, key: key, hit: \"matches(body, $REGEX)\"}"
head='source:
  format: csv
  columns: [id, key, x, y, body]
steps:'
spec() { # name, steps...
    local f=$TMP/$1.yaml; shift
    { echo "$head"; for s in "$@"; do echo "$s"; done; } >"$f"
}
spec hand "  - filter: key % 100 == 7" "$MAP"
spec bad "$MAP" "  - filter: key % 100 == 7"
spec adaptive "  - filter: contains(x, 'needle')" "  - filter: contains(y, 'needle')" "$MAP"
spec hand2 "  - filter: contains(y, 'needle')" "  - filter: contains(x, 'needle')" "$MAP"

port=$((17000 + RANDOM % 2000))
declare -A BEST
run() { # label spec [flags]
    local label=$1 file=$TMP/$2.yaml; shift 2
    local best=""
    for ((r = 0; r < RUNS; r++)); do
        local t0 t1
        t0=$(date +%s.%N)
        if ! "$BUILD/eddy" local --workers 1 --control-port "$port" --http-port $((port + 1)) --quiet \
            --pipeline "$file" --input "$input" --output "$TMP/$label.tsv" --parallelism 1 "$@" \
            2>"$OUT/reorder-$label.log"; then
            echo "$label failed; see $OUT/reorder-$label.log" >&2
            exit 1
        fi
        t1=$(date +%s.%N)
        port=$((port + 2))
        best=$(awk -v a="$t0" -v b="$t1" -v c="$best" 'BEGIN { t = b - a; if (c == "" || t < c) c = t; printf "%.3f", c }')
    done
    BEST[$label]=$best
}
run hand hand
run off bad --no-optimize
run on bad
run adaptive adaptive
run hand2 hand2
for pair in "off hand" "on hand" "adaptive hand2"; do
    set -- $pair
    cmp -s "$TMP/$1.tsv" "$TMP/$2.tsv" || { echo "output of $1 differs from $2" >&2; exit 1; }
done

md=$OUT/reorder.md
rate() { awk -v n="$LINES" -v t="${BEST[$1]}" 'BEGIN { printf "%.0f", n / t }'; }
ratio() { awk -v a="${BEST[$2]}" -v b="${BEST[$1]}" 'BEGIN { printf "%.2f", a / b }'; }
{
    echo "bench/reorder: $LINES lines, best of $RUNS, 1 worker, $(nproc) cores ($(date -u +%Y-%m-%d))"
    echo
    echo "| pipeline | seconds | records/s | vs hand-ordered |"
    echo "|---|---|---|---|"
    for l in hand off on; do
        echo "| $l | ${BEST[$l]} | $(rate "$l") | $(ratio "$l" hand) |"
    done
    echo "| hand2 (best static order, selectivities swap) | ${BEST[hand2]} | $(rate hand2) | 1.00 |"
    echo "| adaptive (bad order for the first half, eddy) | ${BEST[adaptive]} | $(rate adaptive) | $(ratio adaptive hand2) |"
} >"$md"
cat "$md"
